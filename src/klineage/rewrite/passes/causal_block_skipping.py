"""Causal block skipping: key blocks above the diagonal are never loaded; only the diagonal
block(s) carry the causal mask.

In causal attention, query block m (rows [m*BM, (m+1)*BM)) sees only keys <= its row, so every
key block past (m+1)*BM is masked out entirely: loading K/V for it and computing its two
matmuls is wasted. Experts stop the key loop at the diagonal (half of all tiles at long
lengths: ~2x fewer FLOPs and K/V bytes) and split what is left (the Triton fused-attention
tutorial's STAGE split): an off-diagonal loop over [0, m*BM) with no mask at all, then a
diagonal loop that alone evaluates the mask. Pays off on long causal sequences; non-causal
attention gains nothing.

Recognised forms, backward:
- "split": a kernel calls a @triton.jit helper whose key loop runs over [lo, hi) given as
  parameters and whose causal mask sits under `if FLAG:` (FLAG a parameter): first with FLAG
  False from key 0 (off-diagonal), later with FLAG True (diagonal). Backward drops the first
  call, gives the diagonal call the range [0, LENGTH) (LENGTH: what the helper compares the keys
  against, `< N_CTX`) and drops the statements that only computed the old diagonal bounds.
- "loop": a key loop with the causal mask in its body whose upper bound is
  `X if CAUSAL else LENGTH` (inline or through one assignment): backward makes it LENGTH.

Both rewrites are exact. The loop then starts at key 0, which no row masks, so after the first
block every row's running max is a real score; every later fully masked block adds exp2(-1e6 -
m) = 0 (or exp(-inf) = 0) to the sum and leaves the max unchanged (alpha = 1). (A first block
that masked a whole row would give NaN with -inf, (-inf) - (-inf), and rely on alpha = 0 to
wash out garbage with -1e6.) Forward restores the params of a backward site ("segment": the
expert's statements; "bound": the loop bound); for a loop without params it infers
`tl.minimum(X + BM, LENGTH) if FLAG else LENGTH` from the mask's row offsets
`offs_m = X + tl.arange(0, BM)` and the `if FLAG:` around the mask.

Finding the sites of both forms is causal_block_skipping_analysis.py; this module edits them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_call_to,
    parse,
    positions,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.passes.causal_block_skipping_analysis import (
    _arg,
    _broadcast,
    _Cand,
    _candidates,
    _causal_compare,
    _has_causal,
    _helper_call,
    _names,
    _walk,
)
from klineage.rewrite.registry import register

_PURE = ("tl.minimum", "tl.maximum", "tl.multiple_of", "tl.max_contiguous", "tl.cdiv")


def _pure_assigns(stmt: cst.CSTNode) -> set[str] | None:
    """Names a statement assigns, if it only assigns (through ifs) side-effect-free values."""

    def pure(e: cst.CSTNode) -> bool:
        return all(
            is_call_to(c, *_PURE) or dotted(c.func) in ("min", "max", "int")
            for c in _walk(e)
            if isinstance(c, cst.Call)
        )

    out: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if not isinstance(small, cst.Assign) or not pure(small.value):
                return None
            for t in small.targets:
                elems = t.target.elements if isinstance(t.target, cst.Tuple) else [t.target]
                for e in elems:
                    v = e.value if isinstance(e, cst.Element) else e
                    if not isinstance(v, cst.Name):
                        return None
                    out.add(v.value)
        return out
    if isinstance(stmt, cst.If | cst.Else) and isinstance(stmt.body, cst.IndentedBlock):
        if isinstance(stmt, cst.If) and not pure(stmt.test):
            return None
        parts: list[cst.CSTNode] = list(stmt.body.body)
        if isinstance(stmt, cst.If) and stmt.orelse is not None:
            parts.append(stmt.orelse)
        for sub in parts:
            names = _pure_assigns(sub)
            if names is None:
                return None
            out |= names
        return out
    return None


def _tl_alias(module: cst.Module) -> str:
    for n in _walk(module):
        if isinstance(n, cst.Import):
            for a in n.names:
                if _code(a.name) == "triton.language" and a.asname is not None:
                    return _code(a.asname.name)
        if isinstance(n, cst.ImportFrom) and n.module and _code(n.module) == "triton":
            for a in n.names if isinstance(n.names, list | tuple) else []:
                if _code(a.name) == "language":
                    return _code(a.asname.name) if a.asname else "language"
    return "tl"


def _parse_statements(code: str) -> list[cst.BaseStatement]:
    m = parse(code)
    body: list[cst.BaseStatement] = list(m.body)
    if body and m.header:  # comments before the first statement parse as the module header
        body[0] = _with_leading(body[0], m.header)
    return body


def _with_leading(stmt: cst.BaseStatement, lines: Sequence[cst.EmptyLine]) -> cst.BaseStatement:
    """stmt with `lines` (blank lines, comments) put before its own leading lines."""
    own = getattr(stmt, "leading_lines", ())
    return stmt.with_changes(leading_lines=[*lines, *own])


def _replace(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> str:
    out = cast(Any, module).deep_replace(old, new)
    assert isinstance(out, cst.Module)
    return out.code


def _dead_between(
    fn: cst.FunctionDef, between: list[cst.BaseStatement], gone: set[int]
) -> set[int]:
    """Indices of `between` statements that only assign side-effect-free values to names read
    nowhere else in fn (ids in `gone`: nodes already removed, e.g. the old call arguments)."""
    dead: set[int] = set()
    changed = True
    while changed:
        changed = False
        for k, st in enumerate(between):
            names = _pure_assigns(st) if k not in dead else None
            if not names:
                continue
            skip = gone | {id(n) for n in _walk(st)}
            used = Counter(
                n.value for n in _walk(fn) if isinstance(n, cst.Name) and id(n) not in skip
            )
            if not any(used[n] for n in names):
                dead.add(k)
                gone = skip
                changed = True
    return dead


_NO_LENGTH = "cannot tell the key length of {} (no `keys < LENGTH` on a parameter in its loop)"
_NO_SPLIT_PARAMS = (
    "the split form needs the expert's params (form='split', segment=...) from a backward site"
)
_NO_ARANGE = (
    "cannot infer the diagonal: the mask's row offsets are not `START + tl.arange(0, BLOCK)`; "
    "give params bound=..."
)
_READS_FIRST = "a statement between the calls reads the first call's result"


@register
class CausalBlockSkipping(RewritePass):
    NAME = "causal_block_skipping"
    DESCRIPTION = (
        "Causal attention: never load key blocks above the diagonal and mask only the "
        "diagonal block(s) (off-diagonal loop unmasked): ~2x less work at long lengths."
    )
    CATEGORY = "control-flow"
    STRUCTURAL = True
    ANCHOR = "causal key-block loop (or off-diagonal/diagonal helper calls) in attention"

    def _sites(self, source: str, direction: str) -> list[Site]:
        module = parse(source)
        _, pos = positions(module)
        return [
            self.site(
                direction, i, pos[c.node].start.line, c.fn.name.value, c.description, **c.params
            )
            for i, c in enumerate(_candidates(module, direction))
        ]

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "backward")

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "forward")

    def _at(
        self,
        source: str,
        site: Site,
        direction: str,
        rewrite: Callable[[cst.Module, _Cand, str], RewriteResult],
    ) -> RewriteResult:
        """rewrite(module, the site's candidate, its function's name), through `safe`; a skip
        when the source has no such candidate (of the site's form, backward) any more."""

        def run() -> RewriteResult:
            module = parse(source)
            cands = _candidates(module, direction)
            form = site.params.get("form")
            if site.index < len(cands) and (
                direction == "forward" or form in (None, cands[site.index].form)
            ):
                c = cands[site.index]
                return rewrite(module, c, c.fn.name.value)
            what = f"no {direction} causal-skipping site #{site.index} ({form or 'any form'}) here"
            return RewriteResult.skip(what, site)

        return self.safe(run)

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return self._at(source, site, "backward", lambda m, c, fn: self._simplify(m, c, fn, site))

    def _simplify(self, module: cst.Module, c: _Cand, fn: str, site: Site) -> RewriteResult:
        if c.form == "loop":
            assert isinstance(c.target, cst.IfExp)
            negated = isinstance(c.target.test, cst.UnaryOperation)
            keep = c.target.body if negated else c.target.orelse
            new = _replace(module, c.target, keep.with_changes(lpar=[], rpar=[]))
            return RewriteResult(True, f"causal loop in {fn} runs to `{_code(keep)}`", new, site)
        assert c.block is not None and c.helper is not None
        h, (i, j), stmts = c.helper, c.span, list(c.block.body)
        found = _helper_call(stmts[j], {h.name: h})
        assert found is not None
        call = found[1]
        lo, hi, length = _arg(call, h, h.lo), _arg(call, h, h.hi), _arg(call, h, h.length)
        if lo is None or hi is None or length is None:
            return RewriteResult.skip(_NO_LENGTH.format(h.name), site)
        bounds = {id(lo): cst.Integer("0"), id(hi): length.value}
        args = [a.with_changes(value=bounds[id(a)]) if id(a) in bounds else a for a in call.args]
        diag = cast(cst.BaseStatement, stmts[j].deep_replace(call, call.with_changes(args=args)))
        # Statements between the calls that only computed the old diagonal bounds go too.
        between = stmts[i + 1 : j]
        gone = {id(n) for n in (*_walk(lo.value), *_walk(hi.value), *_walk(stmts[i]))}
        dead = _dead_between(c.fn, between, gone)
        kept = [st for k, st in enumerate(between) if k not in dead]
        first = stmts[i]
        head = first.body[0] if isinstance(first, cst.SimpleStatementLine) else None
        produced = _names(head.targets[0]) if isinstance(head, cst.Assign) else set()
        if any(produced & _names(st) for st in kept):
            return RewriteResult.skip(_READS_FIRST, site)
        rest = [*kept, diag]
        blank = [ln for ln in getattr(first, "leading_lines", ()) if ln.comment is None]
        rest[0] = _with_leading(rest[0], blank)  # the comments went with the first call
        block = c.block.with_changes(body=[*stmts[:i], *rest, *stmts[j + 1 :]])
        new = _replace(module, c.block, block)
        return RewriteResult(True, f"{h.name} in {fn}: one masked call over all keys", new, site)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}
        return self._at(source, site, "forward", lambda m, c, fn: self._apply(m, c, fn, site, p))

    def _apply(
        self, module: cst.Module, c: _Cand, fn: str, site: Site, p: dict[str, Any]
    ) -> RewriteResult:
        if c.form == "split":
            assert c.block is not None and c.helper is not None
            if p.get("form") != "split" or not p.get("segment"):
                return RewriteResult.skip(_NO_SPLIT_PARAMS, site)
            seg = _parse_statements(str(p["segment"]))
            if not seg or _helper_call(seg[-1], {c.helper.name: c.helper}) is None:
                why = f"params' segment does not end with a {c.helper.name} call"
                return RewriteResult.skip(why, site)
            i, stmts = c.span[0], list(c.block.body)
            block = c.block.with_changes(body=[*stmts[:i], *seg, *stmts[i + 1 :]])
            new = _replace(module, c.block, block)
            return RewriteResult(
                True, f"restored the off-diagonal/diagonal split in {fn}", new, site
            )
        assert c.target is not None and isinstance(c.node, cst.For)
        bound, how = (p.get("bound"), "params") if p.get("form") == "loop" else (None, "")
        if not bound:
            bound, how = _infer(module, c.fn, c.node, c.target), "inferred"
        if bound is None:
            return RewriteResult.skip(_NO_ARANGE, site)
        new = _replace(module, c.target, cst.parse_expression(str(bound)))
        return RewriteResult(True, f"causal loop in {fn} stops at `{bound}` ({how})", new, site)


def _infer(
    module: cst.Module, fn: cst.FunctionDef, loop: cst.For, old: cst.BaseExpression
) -> str | None:
    """`tl.minimum(START + BLOCK, OLD) if FLAG else OLD` from the mask's row offsets
    `offs = START + tl.arange(0, BLOCK)` and the `if FLAG:` around the mask (no FLAG: no if)."""
    cmp = next(n for n in _walk(loop.body) if _causal_compare(n))
    rows = _broadcast(cmp, True)
    name = _code(rows.value) if rows is not None else ""
    values = [
        n.value
        for n in _walk(fn.body)
        if isinstance(n, cst.Assign) and _code(n.targets[0].target) == name
    ]
    v = values[0] if len(values) == 1 else None
    if not (isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add)):
        return None
    ar, start = (v.right, v.left) if is_call_to(v.right, "tl.arange") else (v.left, v.right)
    if not (isinstance(ar, cst.Call) and is_call_to(ar, "tl.arange") and len(ar.args) == 2):
        return None
    end = f"{_code(start)} + {_code(ar.args[1].value)}"
    short = f"{_tl_alias(module)}.minimum({end}, {_code(old)})"
    guards = [n for n in _walk(loop.body) if isinstance(n, cst.If) and _has_causal(n.body)]
    return f"{short} if {_code(guards[-1].test)} else {_code(old)}" if guards else short

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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_call_to,
    is_triton_jit,
    kwarg,
    parse,
    positions,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.registry import register

_ORDER = (cst.GreaterThanEqual, cst.LessThanEqual, cst.GreaterThan, cst.LessThan)
_PURE = ("tl.minimum", "tl.maximum", "tl.multiple_of", "tl.max_contiguous", "tl.cdiv")


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in _walk(node) if isinstance(n, cst.Name)}


def _broadcast(node: cst.CSTNode, rows: bool) -> cst.Subscript | None:
    """The first x[:, None] (rows) or x[None, :] (columns) inside node."""
    for n in _walk(node):
        if isinstance(n, cst.Subscript) and len(n.slice) == 2:
            kinds = [
                "full"
                if isinstance(e.slice, cst.Slice)
                and e.slice.lower is None
                and e.slice.upper is None
                else "none"
                if isinstance(e.slice, cst.Index) and _code(e.slice.value) == "None"
                else ""
                for e in n.slice
            ]
            if kinds == (["full", "none"] if rows else ["none", "full"]):
                return n
    return None


def _causal_compare(node: cst.CSTNode) -> bool:
    """rows[:, None] >= cols[None, :] (any order operator, either side): a causal mask."""
    if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
        return False
    if not isinstance(node.comparisons[0].operator, _ORDER):
        return False
    left, right = node.left, node.comparisons[0].comparator
    return bool(
        (_broadcast(left, True) and _broadcast(right, False))
        or (_broadcast(left, False) and _broadcast(right, True))
    )


def _has_causal(node: cst.CSTNode) -> bool:
    return any(_causal_compare(n) for n in _walk(node))


def _params(fn: cst.FunctionDef) -> list[str]:
    return [p.name.value for p in fn.params.params]


def _range_call(loop: cst.For) -> cst.Call | None:
    it = loop.iter
    if not isinstance(it, cst.Call) or not (
        dotted(it.func) == "range" or is_call_to(it, "tl.range")
    ):
        return None
    return it if len(it.args) >= 2 and all(a.keyword is None for a in it.args[:2]) else None


def _truth(expr: cst.BaseExpression) -> bool | None:
    return {"True": True, "1": True, "False": False, "0": False}.get(_code(expr))


@dataclass
class _Helper:
    name: str
    params: list[str]
    lo: str
    hi: str
    flag: str
    length: str | None


def _helper(fn: cst.FunctionDef) -> _Helper | None:
    """A jit helper whose key loop runs over parameters [lo, hi) with the causal mask under
    `if FLAG:` (FLAG a parameter)."""
    params = _params(fn)
    for loop in (n for n in _walk(fn.body) if isinstance(n, cst.For)):
        call = _range_call(loop)
        if call is None:
            continue
        lo, hi = call.args[0].value, call.args[1].value
        if not all(isinstance(b, cst.Name) and b.value in params for b in (lo, hi)):
            continue
        flags = [
            n.test.value
            for n in _walk(loop.body)
            if isinstance(n, cst.If)
            and isinstance(n.test, cst.Name)
            and n.test.value in params
            and _has_causal(n.body)
        ]
        if not flags:
            continue
        var = _names(loop.target)
        length = next(
            (
                n.comparisons[0].comparator.value
                for n in _walk(loop.body)
                if isinstance(n, cst.Comparison)
                and len(n.comparisons) == 1
                and isinstance(n.comparisons[0].operator, cst.LessThan)
                and isinstance(n.comparisons[0].comparator, cst.Name)
                and n.comparisons[0].comparator.value in params
                and var & _names(n.left)
            ),
            None,
        )
        assert isinstance(lo, cst.Name) and isinstance(hi, cst.Name)
        return _Helper(fn.name.value, params, lo.value, hi.value, flags[0], length)
    return None


def _arg(call: cst.Call, h: _Helper, name: str | None) -> cst.Arg | None:
    if name is None:
        return None
    found = kwarg(call, name)
    if found is not None:
        return found
    positional = [a for a in call.args if a.keyword is None and not a.star]
    i = h.params.index(name)
    return positional[i] if i < len(positional) else None


def _helper_call(stmt: cst.CSTNode, helpers: dict[str, _Helper]) -> tuple[_Helper, cst.Call] | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    value = small.value if isinstance(small, cst.Assign | cst.Expr) else None
    if isinstance(value, cst.Call) and dotted(value.func) in helpers:
        return helpers[dotted(value.func)], value
    return None


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


@dataclass
class _Cand:
    form: str  # "split" or "loop"
    fn: cst.FunctionDef
    node: cst.CSTNode  # the line anchor: first call (split) or the loop
    params: dict[str, Any]
    description: str
    block: cst.IndentedBlock | None = None
    span: tuple[int, int] = (0, 0)  # split: statement indices of the two calls in block
    helper: _Helper | None = None
    target: cst.BaseExpression | None = None  # loop: the bound expression to replace


def _bound_target(fn: cst.FunctionDef, call: cst.Call) -> cst.BaseExpression | None:
    """The loop's upper bound, through one assignment `hi = ...` when it is a local name."""
    bound = call.args[1].value
    if not isinstance(bound, cst.Name) or bound.value in _params(fn):
        return bound
    values = []
    for n in _walk(fn.body):
        if isinstance(n, cst.Assign) and len(n.targets) == 1:
            t, v = n.targets[0].target, n.value
            if isinstance(t, cst.Name) and t.value == bound.value:
                values.append(v)
            elif isinstance(t, cst.Tuple) and isinstance(v, cst.Tuple):
                for te, ve in zip(t.elements, v.elements, strict=False):
                    if isinstance(te.value, cst.Name) and te.value.value == bound.value:
                        values.append(ve.value)
    return values[0] if len(values) == 1 else (bound if not values else None)


def _split_cands(fn: cst.FunctionDef, helpers: dict[str, _Helper], direction: str) -> list[_Cand]:
    """Backward: (flag False from key 0, later flag True) helper call pairs in one block.
    Forward: a helper call with the flag True from key 0 (the whole range, masked)."""
    out: list[_Cand] = []
    for block in (n for n in _walk(fn) if isinstance(n, cst.IndentedBlock)):
        calls = [(i, hc) for i, s in enumerate(block.body) if (hc := _helper_call(s, helpers))]
        for a, (i, (h, call)) in enumerate(calls):
            flag, lo = _arg(call, h, h.flag), _arg(call, h, h.lo)
            if flag is None or lo is None or _code(lo.value) != "0":
                continue
            if direction == "forward" and _truth(flag.value) is True:
                desc = f"{h.name} over all keys with the causal mask"
                out.append(_Cand("split", fn, block.body[i], {"form": "split"}, desc))
                out[-1].block, out[-1].span, out[-1].helper = block, (i, i), h
            if direction != "backward" or _truth(flag.value) is not False:
                continue
            nxt = next(((j, c) for j, (h2, c) in calls[a + 1 :] if h2 is h), None)
            flag2 = _arg(nxt[1], h, h.flag) if nxt else None
            if nxt is None or flag2 is None or _truth(flag2.value) is not True:
                continue
            seg = "".join(_code(s) for s in block.body[i : nxt[0] + 1])
            params = {"form": "split", "helper": h.name, "segment": seg}
            desc = f"off-diagonal {h.name} call + masked diagonal call"
            out.append(_Cand("split", fn, block.body[i], params, desc))
            out[-1].block, out[-1].span, out[-1].helper = block, (i, nxt[0]), h
    return out


def _loop_cands(fn: cst.FunctionDef, direction: str) -> list[_Cand]:
    """Key loops with a causal mask in their body; backward: bound `X if FLAG else LENGTH`,
    forward: any other bound (not a helper's loop over a caller-given [lo, hi))."""
    out: list[_Cand] = []
    for loop in (n for n in _walk(fn) if isinstance(n, cst.For)):
        call = _range_call(loop)
        if call is None or not _has_causal(loop.body):
            continue
        target = _bound_target(fn, call)
        if target is None or all(_code(a.value) in _params(fn) for a in call.args[:2]):
            continue  # ambiguous bound, or a helper's loop over a caller-given range
        skipping = isinstance(target, cst.IfExp) and bool(_names(target.test) & _names(loop.body))
        if skipping and direction == "backward":
            params = {"form": "loop", "bound": _code(target)}
            out.append(_Cand("loop", fn, loop, params, f"causal loop bound `{_code(target)}`"))
        elif not skipping and direction == "forward":
            desc = f"causal key loop up to `{_code(target)}`"
            out.append(_Cand("loop", fn, loop, {"form": "loop"}, desc))
        else:
            continue
        out[-1].target = target
    return out


def _candidates(module: cst.Module, direction: str) -> list[_Cand]:
    jit = [
        n
        for n in _walk(module)
        if isinstance(n, cst.FunctionDef) and any(is_triton_jit(d) for d in n.decorators)
    ]
    helpers = {h.name: h for h in map(_helper, jit) if h is not None}
    return [
        c for fn in jit for c in _split_cands(fn, helpers, direction) + _loop_cands(fn, direction)
    ]


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
        result = self.safe(self._sites, source, "backward")
        return result if isinstance(result, list) else []

    def forward_sites(self, source: str) -> list[Site]:
        result = self.safe(self._sites, source, "forward")
        return result if isinstance(result, list) else []

    def _pick(self, source: str, site: Site, direction: str) -> tuple[cst.Module, _Cand] | str:
        module = parse(source)
        cands = _candidates(module, direction)
        form = site.params.get("form")
        if site.index < len(cands) and (
            direction == "forward" or form in (None, cands[site.index].form)
        ):
            return module, cands[site.index]
        return f"no {direction} causal-skipping site #{site.index} ({form or 'any form'}) here"

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return self.safe(self._simplify, source, site)

    def _simplify(self, source: str, site: Site) -> RewriteResult:
        picked = self._pick(source, site, "backward")
        if isinstance(picked, str):
            return RewriteResult.skip(picked, site)
        module, c = picked
        fn = c.fn.name.value
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
        return self.safe(self._apply, source, site, params or {})

    def _apply(self, source: str, site: Site, p: dict[str, Any]) -> RewriteResult:
        picked = self._pick(source, site, "forward")
        if isinstance(picked, str):
            return RewriteResult.skip(picked, site)
        module, c = picked
        fn = c.fn.name.value
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

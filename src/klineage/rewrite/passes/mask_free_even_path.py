"""Mask-free fast path when a block size divides a dimension (EVEN_K / DIVISIBLE flags).

A compile-time flag, set by `@triton.heuristics({"EVEN_K": lambda args: args["K"] %
args["BLOCK_SIZE_K"] == 0})` or written inline (`if N_CTX % BLOCK_M == 0:`), selects loads and
stores with no `mask=` / `other=` when no tile runs past the dimension. Triton compiles one binary
per flag value, so the even case gets unpredicated, fully vectorized memory operations and no
compare/select per element, and the ragged case keeps its masks. It pays off in memory-heavy inner
loops at shapes the block divides (matmul K loops, row kernels with power-of-two rows).

Backward keeps the masked branch and drops the `if`; once the flag has no use left, its heuristics
entry goes (the decorator too when it empties) and so does its parameter (heuristics supply it, so
no launch site passes it). Forward wraps a run of masked loads/stores whose masks depend on one
dimension and one block-size parameter in `if FLAG: <unmasked> else: <masked>` and adds the flag.

Finding both kinds of site is mask_free_even_path_analysis.py; this module rewrites them.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_call_to,
    is_triton_jit,
    names_under,
)
from klineage.rewrite.passes.mask_free_even_path_analysis import (
    _MEM,
    Span,
    _dims,
    _find,
    _flags,
    _helper,
    _heuristics,
    _keys,
    _masked,
    _masks,
    _params,
    _slots,
    _spans,
)
from klineage.rewrite.registry import register


class _Unmask(cst.CSTTransformer):
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if not is_call_to(updated_node, *_MEM):
            return updated_node
        keep, npos = [], -1
        for a in updated_node.args:
            npos += a.keyword is None
            if (a.keyword is None and npos in _slots(updated_node)) or (
                a.keyword is not None and a.keyword.value in ("mask", "other")
            ):
                continue
            keep.append(a)
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(args=keep)


def _leading(lines: Any) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """(the blank lines before the first comment, the rest)."""
    lines = list(lines)
    k = next((i for i, ln in enumerate(lines) if ln.comment is not None), len(lines))
    return lines[:k], lines[k:]


def _insert(items: list[Any], index: int, new: Any) -> list[Any]:
    """items (params, dict elements) with `new` at index, commas as the list has them."""
    inner = items[0].comma if len(items) >= 2 else None
    if not isinstance(inner, cst.Comma):
        inner = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if index < len(items):
        return [*items[:index], new.with_changes(comma=inner), *items[index:]]
    last = items[-1].with_changes(comma=inner) if items else None
    new = new.with_changes(comma=items[-1].comma if items else cst.MaybeSentinel.DEFAULT)
    return [*items[:-1], last, new] if last is not None else [new]


def _remove(items: list[Any], index: int) -> list[Any]:
    items = list(items)
    removed = items.pop(index)
    if index == len(items) and items:
        items[-1] = items[-1].with_changes(comma=removed.comma)
    return items


def _with_table(fn: Any, d: cst.Decorator, elements: list[Any]) -> list[cst.Decorator]:
    """fn's decorators with heuristics decorator d holding `elements` (dropped when empty)."""
    decorators, k = list(fn.decorators), list(fn.decorators).index(d)
    if not elements:
        return decorators[:k] + decorators[k + 1 :]
    call = d.decorator
    assert isinstance(call, cst.Call)
    arg = call.args[0].with_changes(value=call.args[0].value.with_changes(elements=elements))
    decorators[k] = d.with_changes(decorator=call.with_changes(args=[arg, *call.args[1:]]))
    return decorators


class _Rewrite(cst.CSTTransformer):
    """Backward: unwrap the `target` If. Forward: wrap a span of `block` in an If. Then the
    flag's heuristics entry and parameter in `fn` are dropped (backward) or added (forward)."""

    def __init__(self, fn: cst.FunctionDef, flag: str | None, **kw: Any) -> None:
        self.fn, self.flag, self.kw = fn, flag, kw

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> Any:
        if original_node is not self.kw.get("target") or updated_node.orelse is None:
            return updated_node
        general = updated_node.body if self.kw["negated"] else updated_node.orelse.body
        stmts: list[Any] = list(general.body)
        blanks, _ = _leading(updated_node.leading_lines)  # comments above the `if` go with it
        stmts[0] = stmts[0].with_changes(leading_lines=[*blanks, *stmts[0].leading_lines])
        return cst.FlattenSentinel(stmts)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: Any) -> Any:
        if original_node is not self.kw.get("block"):
            return updated_node
        i, j, helpers = self.kw["span"]
        stmts = list(updated_node.body)
        run = stmts[i : j + 1]
        unmask = [
            s.with_changes(leading_lines=()).visit(_Unmask())
            for k, s in enumerate(run)
            if k not in helpers
        ]
        blanks, rest = _leading(run[0].leading_lines)
        fast, general = unmask, [run[0].with_changes(leading_lines=rest), *run[1:]]
        test = cst.parse_expression(self.kw["test"])
        if self.kw["negated"]:
            test, fast, general = cst.UnaryOperation(cst.Not(), test), general, fast
        new = cst.If(
            test=test,
            body=cst.IndentedBlock(fast),
            orelse=cst.Else(body=cst.IndentedBlock(general)),
            leading_lines=blanks,
        )
        return updated_node.with_changes(body=[*stmts[:i], new, *stmts[j + 1 :]])

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: Any) -> Any:
        if original_node is not self.fn or self.flag is None:
            return updated_node
        flag, h = self.flag, _heuristics(updated_node)
        params = list(updated_node.params.params)
        names = [p.name.value for p in params]
        if "target" in self.kw:  # backward: drop the flag once nothing uses it
            if h is None or flag in names_under(updated_node.body):
                return updated_node
            keys = [
                getattr(getattr(e, "key", None), "evaluated_value", None) for e in h[1].elements
            ]
            decorators = _with_table(
                updated_node, h[0], _remove(list(h[1].elements), keys.index(flag))
            )
            if flag in names:
                params = _remove(params, names.index(flag))
        elif flag in names and (h is None or flag not in _flags(updated_node)):
            return updated_node  # the launcher passes the flag: only the `if` was needed
        else:
            decorators = list(updated_node.decorators)
            if h is not None and flag in _flags(updated_node):
                pass  # another site already added it
            elif h is not None:
                entry = cst.DictElement(
                    cst.SimpleString(f'"{flag}"'), cst.parse_expression(self.kw["heuristic"])
                )
                decorators = _with_table(
                    updated_node, h[0], _insert(list(h[1].elements), len(h[1].elements), entry)
                )
            else:
                jit = next(k for k, d in enumerate(decorators) if is_triton_jit(d))
                head = dotted(decorators[jit].decorator).rpartition(".")[0] or "triton"
                table = f'{head}.heuristics({{"{flag}": {self.kw["heuristic"]}}})'
                decorators.insert(jit, cst.Decorator(cst.parse_expression(table)))
            if flag not in names:
                anns = [q.annotation for q in params if _params(updated_node).get(q.name.value)]
                ann = anns[0] if anns else cst.Annotation(cst.parse_expression("tl.constexpr"))
                params = _insert(params, self.kw["param_index"], cst.Param(cst.Name(flag), ann))
        return updated_node.with_changes(
            decorators=decorators, params=updated_node.params.with_changes(params=params)
        )


@register
class MaskFreeEvenPath(RewritePass):
    NAME = "mask_free_even_path"
    DESCRIPTION = (
        "When a block size divides a dimension (EVEN_K = K % BLOCK_K == 0, a compile-time flag),"
        " take a path whose loads/stores carry no mask/other: unpredicated, fully vectorized"
        " memory operations; the ragged case keeps the masked path in its own binary."
    )
    CATEGORY = "control-flow"
    ANCHOR = "masked tl.load / tl.store (typically in a K loop) under a divisibility flag"

    def backward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            _, finder, _ = _find(source)
            return [
                self.site(
                    "backward",
                    i,
                    line,
                    fn.name.value,
                    f"mask-free branch under `{p.get('flag') or p['test']}`",
                    **p,
                )
                for i, (_, fn, line, p) in enumerate(finder.backward)
            ]

        return self.safe_sites(run)

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            module, finder, _ = _find(source)
            if site.index >= len(finder.backward):
                return RewriteResult.skip(f"no even/ragged `if` #{site.index} here", site)
            node, fn, _, p = finder.backward[site.index]
            new = module.visit(_Rewrite(fn, p.get("flag"), target=node, negated=p["negated"]))
            what = p.get("flag") or p["test"]
            reason = f"kept only the masked path under `{what}` in {fn.name.value}"
            return RewriteResult(True, reason, new.code, site)

        return self.safe(run)

    def _forward(self, source: str) -> tuple[cst.Module, list[tuple[Span, Site]]]:
        module, finder, pos = _find(source)
        out: list[tuple[Span, Site]] = []
        for span in _spans(finder):
            block, fn, a, b = span[:4]
            stmts = list(block.body)[a : b + 1]
            dims = _dims(fn, [m for s in stmts for c in _masked(s) for m in _masks(c, False)])
            if dims is not None:
                line, what = pos[stmts[0]].start.line, f"masked loads/stores, {dims[0]} % {dims[1]}"
                site = self.site(
                    "forward", len(out), line, fn.name.value, what, dim=dims[0], block=dims[1]
                )
                out.append((span, site))
        return module, out

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(lambda: [s for _, s in self._forward(source)[1]])

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def rewrite(module: cst.Module, hit: tuple[Span, Site]) -> RewriteResult:
            (block, fn, a, b, anchor, lo, hi), fs = hit
            p = {**fs.params, **(params or {})}
            if "statements" in p:  # the expert's `if` held exactly these statements
                start = anchor - int(p.get("leading_helpers", 0))
                end = start + int(p["statements"]) - 1
                body = list(block.body)
                fits = lo <= start and anchor <= end <= hi and bool(_masked(body[end]))
                lead = body[max(start, 0) : anchor]
                if fits and all(
                    _helper(h, fn, body[start + k + 1 : end + 1]) for k, h in enumerate(lead)
                ):
                    a, b = start, end
            # The expert's test or heuristic is used only where it tests these masks' dimension.
            dim, blk, flag = str(fs.params["dim"]), str(fs.params["block"]), None
            if p.get("kind") == "inline":
                test = str(p["test"])
                if set(names_under(cst.parse_expression(test))) != {dim, blk}:
                    test = f"{dim} % {blk} == 0"
            else:
                if _keys(str(p.get("heuristic", ""))) != {dim, blk}:
                    p["heuristic"] = f'lambda args: args["{dim}"] % args["{blk}"] == 0'
                    p["flag"] = f"EVEN_{dim.upper()}"
                flag = test = str(p.get("flag") or f"EVEN_{dim.upper()}")
                # A flag of that name testing another block (seqlen % BLOCK_KV for the K loop,
                # where these masks are over BLOCK_Q tiles) would drop masks still needed.
                other = _flags(fn).get(flag)
                if other is not None and _keys(other) != {dim, blk}:
                    flag = test = f"EVEN_{dim.upper()}_{blk.upper()}"
                    p["heuristic"] = f'lambda args: args["{dim}"] % args["{blk}"] == 0'

            stmts = list(block.body)[a : b + 1]
            helpers = {k for k, s in enumerate(stmts) if _helper(s, fn, stmts[k + 1 :])}
            rw = _Rewrite(
                fn,
                flag,
                block=block,
                span=(a, b, helpers),
                test=test,
                negated=bool(p.get("negated")),
                heuristic=p.get("heuristic", ""),
                param_index=int(p.get("param_index", 10**6)),
            )
            reason = f"added a mask-free path under `{test}` in {fn.name.value}"
            return RewriteResult(True, reason, module.visit(rw).code, site)

        return self.rewrite_at(
            lambda: self._forward(source), site, "masked load/store run", rewrite
        )

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
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_call_to,
    is_triton_jit,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.registry import register

_MEM = ("tl.load", "tl.store")
# (block, function, span start, span end, anchor: its first masked statement, run start, run end)
Span = tuple[cst.IndentedBlock, cst.FunctionDef, int, int, int, int, int]


def _names(node: cst.CSTNode) -> list[str]:
    """Names referenced under node, with repeats (attribute and keyword names excluded)."""
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return found


def _calls(node: cst.CSTNode, *names: str) -> list[cst.Call]:
    found: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if is_call_to(n, *names):
                found.append(n)

    node.visit(V())
    return found


def _slots(call: cst.Call) -> range:
    """Positional indices of mask (and other): tl.load(ptr, mask, other), tl.store(ptr, v, mask)."""
    return range(1, 3) if is_call_to(call, "tl.load") else range(2, 3)


def _masks(call: cst.Call, with_other: bool = True) -> list[cst.BaseExpression]:
    """The mask (and other) expressions of a load/store, keyword or positional."""
    pos = [a.value for a in call.args if a.keyword is None]
    kws = ("mask", "other") if with_other else ("mask",)
    found = [v for k, v in enumerate(pos) if k in _slots(call)][: 2 if with_other else 1]
    return found + [a.value for a in call.args if a.keyword and a.keyword.value in kws]


def _masked(node: cst.CSTNode) -> list[cst.Call]:
    return [c for c in _calls(node, *_MEM) if _masks(c)]


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


def _heuristics(fn: cst.FunctionDef) -> tuple[cst.Decorator, cst.Dict] | None:
    for d in fn.decorators:
        c = d.decorator
        if (
            isinstance(c, cst.Call)
            and dotted(c.func).split(".")[-1] == "heuristics"
            and c.args
            and isinstance(c.args[0].value, cst.Dict)
        ):
            return d, c.args[0].value
    return None


def _flags(fn: cst.FunctionDef) -> dict[str, str]:
    """Heuristic flags that test divisibility (the lambda holds a %): name -> lambda code."""
    h = _heuristics(fn)
    return {
        str(e.key.evaluated_value): _code(e.value)
        for e in (h[1].elements if h else [])
        if isinstance(e, cst.DictElement)
        and isinstance(e.key, cst.SimpleString)
        and "%" in _code(e.value)
    }


def _keys(heuristic: str) -> set[str]:
    """The argument names a heuristic lambda reads (args["K"], args['BLOCK_K'])."""
    return set(heuristic.replace("'", '"').split('"')[1::2])


def _params(fn: cst.FunctionDef) -> dict[str, bool]:
    """Parameter name -> annotated tl.constexpr."""
    ann = {p.name.value: p.annotation for p in fn.params.params}
    return {n: bool(a and _code(a.annotation).endswith("constexpr")) for n, a in ann.items()}


def _divisibility(test: cst.BaseExpression) -> bool | None:
    """True for `a % b == 0`, False for `a % b != 0`, None for anything else."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    t = test.comparisons[0]
    if (
        isinstance(test.left, cst.BinaryOperation)
        and isinstance(test.left.operator, cst.Modulo)
        and isinstance(t.comparator, cst.Integer)
        and t.comparator.value == "0"
        and isinstance(t.operator, (cst.Equal, cst.NotEqual))
    ):
        return isinstance(t.operator, cst.Equal)
    return None


class _Finder(cst.CSTVisitor):
    """Backward sites (even/ragged Ifs) and every block of the jit functions."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.fns: list[cst.FunctionDef] = []
        self.backward: list[tuple[cst.If, cst.FunctionDef, int, dict[str, Any]]] = []
        self.even_blocks: set[int] = set()
        self.blocks: list[tuple[cst.IndentedBlock, cst.FunctionDef]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.fns.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.fns.pop()

    def _fn(self) -> cst.FunctionDef | None:
        return next((f for f in reversed(self.fns) if any(map(is_triton_jit, f.decorators))), None)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if (fn := self._fn()) is not None:
            self.blocks.append((node, fn))

    def visit_If(self, node: cst.If) -> None:
        fn = self._fn()
        if fn is None or not isinstance(node.orelse, cst.Else):
            return
        test, negate = node.test, False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negate = test.expression, True
        flags, div = _flags(fn), _divisibility(test)
        if isinstance(test, cst.Name) and test.value in flags:
            names = list(_params(fn))
            index = names.index(test.value) if test.value in names else len(names)
            p = dict(kind="heuristic", flag=test.value, heuristic=flags[test.value])
            p["param_index"] = index  # type: ignore[assignment]
        elif isinstance(test, cst.Comparison) and div is not None:
            negate ^= not div
            p = {"kind": "inline", "test": f"{_code(test.left)} == 0"}
        else:
            return
        fast, general = (node.orelse.body, node.body) if negate else (node.body, node.orelse.body)
        if _calls(fast, *_MEM) and len(_masked(fast)) < len(_masked(general)):
            line = self.get_metadata(PositionProvider, node).start.line
            stmts = list(general.body)
            shape = {"statements": len(stmts), "leading_helpers": _first_masked(stmts)}
            self.backward.append((node, fn, line, {**p, "negated": negate, **shape}))
            self.even_blocks.update({id(node.body), id(node.orelse.body)})


def _find(source: str) -> tuple[cst.Module, _Finder, Any]:
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    finder = _Finder()
    wrapper.visit(finder)
    return module, finder, wrapper.resolve(PositionProvider)


def _dims(fn: cst.FunctionDef, masks: list[cst.BaseExpression]) -> tuple[str, str] | None:
    """(dimension, block) when the masks, through fn's assignments, depend on exactly one
    block-size parameter (a constexpr inside a tl.arange) and one other parameter."""
    params, defs, loops = _params(fn), {}, set()  # type: ignore[var-annotated]

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for name in {x for t in n.targets for x in _names(t.target)}:
                defs.setdefault(name, []).append(n.value)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            defs.setdefault(_code(n.target), []).append(n.value)

        def visit_For(self, n: cst.For) -> None:
            loops.update(_names(n.target))

    fn.body.visit(V())
    todo: list[cst.CSTNode] = list(masks)
    seen: set[str] = set()
    refs: set[str] = set()
    ranged: set[str] = set()
    while todo:
        expr = todo.pop()
        ranged |= {n for c in _calls(expr, "tl.arange") for n in _names(c)}
        for name in set(_names(expr)) - seen - loops:
            seen.add(name)
            refs |= {name} & set(params)
            todo += defs.get(name, [])
    blocks = {r for r in refs if params[r] and r in ranged}
    if len(blocks) == 1 and len(refs - blocks) == 1:
        return next(iter(refs - blocks)), next(iter(blocks))
    return None


def _helper(stmt: cst.BaseStatement, fn: cst.FunctionDef, run: list[Any]) -> bool:
    """An assignment whose names are used only in the masks of `run` (nowhere else in fn)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Assign)):
        return False
    targets = {n for t in stmt.body[0].targets for n in _names(t.target)}
    in_masks = [n for s in run for c in _masked(s) for m in _masks(c) for n in _names(m)]
    uses = [n for n in _names(fn.body) if n in targets]
    return bool(targets) and len(uses) == len(targets) + sum(n in targets for n in in_masks) > 1


def _first_masked(stmts: list[Any]) -> int:
    return next((k for k, s in enumerate(stmts) if _masked(s)), 0)


def _spans(finder: _Finder) -> list[Span]:
    """Runs of simple statements with masked loads/stores (blocks already under an even/ragged
    `if` excluded), from the mask-only helper assignments before the first masked statement
    (the anchor) to the last masked statement."""
    out = []
    for block, fn in finder.blocks:
        if id(block) in finder.even_blocks:
            continue
        stmts, i = list(block.body), 0
        while i < len(stmts):
            j = i
            while j < len(stmts) and isinstance(stmts[j], cst.SimpleStatementLine):
                j += 1
            mem = [k for k in range(i, j) if _masked(stmts[k])]
            if mem:
                start = mem[0]
                while start > i and _helper(stmts[start - 1], fn, stmts[start : mem[-1] + 1]):
                    start -= 1
                out.append((block, fn, start, mem[-1], mem[0], i, j - 1))
            i = j + 1
    return out


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
            if h is None or flag in _names(updated_node.body):
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
                self.site("backward", i, line, fn.name.value,
                          f"mask-free branch under `{p.get('flag') or p['test']}`", **p)
                for i, (_, fn, line, p) in enumerate(finder.backward)
            ]  # fmt: skip

        result = self.safe(run)
        return result if isinstance(result, list) else []

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
        result = self.safe(lambda: [s for _, s in self._forward(source)[1]])
        return result if isinstance(result, list) else []

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            module, found = self._forward(source)
            if site.index >= len(found):
                return RewriteResult.skip(f"no masked load/store run #{site.index} here", site)
            (block, fn, a, b, anchor, lo, hi), fs = found[site.index]
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
                if set(_names(cst.parse_expression(test))) != {dim, blk}:
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
                fn, flag, block=block, span=(a, b, helpers), test=test,
                negated=bool(p.get("negated")), heuristic=p.get("heuristic", ""),
                param_index=int(p.get("param_index", 10**6)),
            )  # fmt: skip
            reason = f"added a mask-free path under `{test}` in {fn.name.value}"
            return RewriteResult(True, reason, module.visit(rw).code, site)

        return self.safe(run)

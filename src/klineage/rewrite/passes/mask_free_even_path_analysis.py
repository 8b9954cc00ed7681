"""mask_free_even_path's analysis (not a pass): in a file's @triton.jit functions, the masked
loads and stores, the divisibility flags of a @triton.heuristics table, the even/ragged `if`s
that are backward sites, and the runs of masked statements (with the mask-only assignments
before them) that are forward sites, each with the one dimension and block size its masks
depend on. rewrite/passes/mask_free_even_path.py rewrites them; nothing is rewritten here.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.base import code_of as _code
from klineage.rewrite.base import dotted, is_call_to, is_triton_jit, names_under

_MEM = ("tl.load", "tl.store")
# (block, function, span start, span end, anchor: its first masked statement, run start, run end)
Span = tuple[cst.IndentedBlock, cst.FunctionDef, int, int, int, int, int]


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
            for name in {x for t in n.targets for x in names_under(t.target)}:
                defs.setdefault(name, []).append(n.value)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            defs.setdefault(_code(n.target), []).append(n.value)

        def visit_For(self, n: cst.For) -> None:
            loops.update(names_under(n.target))

    fn.body.visit(V())
    todo: list[cst.CSTNode] = list(masks)
    seen: set[str] = set()
    refs: set[str] = set()
    ranged: set[str] = set()
    while todo:
        expr = todo.pop()
        ranged |= {n for c in _calls(expr, "tl.arange") for n in names_under(c)}
        for name in set(names_under(expr)) - seen - loops:
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
    targets = {n for t in stmt.body[0].targets for n in names_under(t.target)}
    in_masks = [n for s in run for c in _masked(s) for m in _masks(c) for n in names_under(m)]
    uses = [n for n in names_under(fn.body) if n in targets]
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

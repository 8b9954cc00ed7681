"""The lane-by-lane checks block_scan_analysis's two shapes share (not a pass): which calls
work lane by lane on a block of the row, where loads and stores address it, how its masks bound
it, and, for a [1, B] tile (one row a program, its columns along tile axis 1), that the columns
stay on that axis (`orientation`).

Why a [1, B] tile is the one-row tile widened by a unit axis: every value is a scalar, a 1-D
vector, or 2-D through `[:, None]` / `[None, :]`. When no value that depends on the columns is
put on axis 0 (`[:, None]`), the columns are on the last axis of every value they enter (a 1-D
vector broadcasts along the last axis), and the other axis has one lane (the launch makes the
row side 1, block_scan_analysis checks it): lane j of the tile is column j, as lane j of the
one-row tile is, and the scan along axis 1 is that scan. Reductions, tl.trans, reshapes and any
other indexing are rejected, so nothing moves a column off its lane.
"""

from __future__ import annotations

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.multi_row_analysis import ELEMENTWISE
from klineage.rewrite.passes.rows_per_program import code, walk


def _body(kdef: cst.FunctionDef) -> list[cst.BaseStatement]:
    return list(kdef.body.body) if isinstance(kdef.body, cst.IndentedBlock) else []


def _targets(small: cst.CSTNode) -> list[str]:
    if isinstance(small, cst.Assign):
        exprs = [t.target for t in small.targets]
    elif isinstance(small, cst.AugAssign | cst.AnnAssign):
        exprs = [small.target]
    else:
        return []
    return [x.value for e in exprs for x in walk(e) if isinstance(x, cst.Name)]


def _reads(node: cst.CSTNode | None, names: set[str]) -> bool:
    if node is None:
        return False
    return any(isinstance(x, cst.Name) and x.value in names for x in walk(node))


def _value(small: cst.CSTNode) -> cst.BaseExpression | None:
    return getattr(small, "value", None)


def is_fp32(e: cst.BaseExpression | None) -> bool:
    """e is `<...>.to(tl.float32)` (the scan adds in fp32 whatever the input)."""
    return (
        isinstance(e, cst.Call)
        and isinstance(e.func, cst.Attribute)
        and e.func.attr.value == "to"
        and len(e.args) >= 1
        and dotted(e.args[0].value).endswith("float32")
    )


def _tl_call(n: cst.Call, roots: set[str]) -> str:
    """The tl function a call names ("load", "cumsum"), "" for anything else."""
    callee = dotted(n.func)
    return callee.split(".")[-1] if callee and callee.split(".")[0] in roots else ""


def _calls(
    stmts: list[cst.BaseStatement], roots: set[str], allowed: set[str], vectors: bool = False
) -> str | None:
    """Why a call or expression in the statements is not lane by lane on a 1-D block (with
    `vectors`, on a [1, B] tile: `[:, None]` and `[None, :]` pass, `orientation` checks them)."""
    for st in stmts:
        for n in walk(st):
            if isinstance(n, cst.Subscript) and not (vectors and vector_axis(n) is not None):
                return f"indexing `{code(n)}` (the scan axis must be the tile's only axis)"
            if isinstance(n, cst.Lambda | cst.IfExp | cst.ListComp | cst.GeneratorExp):
                return f"`{code(n)}`"
            if not isinstance(n, cst.Call):
                continue
            last = _tl_call(n, roots)
            if last in ELEMENTWISE | allowed | {"load", "store"}:
                continue
            if not last and isinstance(n.func, cst.Attribute) and n.func.attr.value == "to":
                continue
            return f"`{code(n)}`: not known to work lane by lane on a block of the row"
    return None


def _terms(
    e: cst.BaseExpression, index: str, once: dict[str, cst.BaseExpression], depth: int = 0
) -> list[cst.BaseExpression]:
    """The additive terms of a pointer, names set once expanded (not the index itself)."""
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
        return _terms(e.left, index, once, depth) + _terms(e.right, index, once, depth)
    if isinstance(e, cst.Name) and e.value != index and e.value in once and depth < 8:
        return _terms(once[e.value], index, once, depth + 1)
    return [e]


def _memory(
    stmts: list[cst.BaseStatement],
    roots: set[str],
    index: str,
    dep: set[str],
    once: dict[str, cst.BaseExpression],
) -> tuple[str | None, list[cst.Call]]:
    """Why a load/store that depends on the index is not at base + index (unit stride), or a
    store does not depend on it; the loads and stores that do."""
    found: list[cst.Call] = []
    for st in stmts:
        for n in walk(st):
            if not isinstance(n, cst.Call) or _tl_call(n, roots) not in ("load", "store"):
                continue
            if not n.args:
                return f"`{code(n)}` has no pointer", []
            ptr = n.args[0].value
            if not _reads(ptr, dep | {index}):
                if _tl_call(n, roots) == "store":
                    return (
                        f"`{code(n)}`: the store does not depend on the column (it writes "
                        "elsewhere than the row's positions)",
                        [],
                    )
                continue
            terms = [t for t in _terms(ptr, index, once) if _reads(t, dep | {index})]
            if len(terms) != 1 or not _is_lane(terms[0], index):
                shown = ", ".join(f"`{code(t)}`" for t in terms)
                return (
                    f"pointer `{code(ptr)}`: the column enters as {shown}, not added once with "
                    f"unit stride (`+ {index}`): loads and stores must be at the row's positions",
                    [],
                )
            found.append(n)
    return None, found


def _mask(call: cst.Call) -> cst.BaseExpression | None:
    pos = 1 if dotted(call.func).endswith("load") else 2
    for i, a in enumerate(call.args):
        if (a.keyword and a.keyword.value == "mask") or (a.keyword is None and i == pos):
            return a.value
    return None


def _assigned_once(kdef: cst.FunctionDef) -> tuple[dict[str, cst.BaseExpression], list[str]]:
    """Names with exactly one plain assignment (and its value), and the names set more than
    once (augmented assignments and loop targets count)."""
    counts: dict[str, int] = {}
    values: dict[str, cst.BaseExpression] = {}
    for n in walk(kdef.body):
        names = _targets(n)
        if isinstance(n, cst.For):
            names = [x.value for x in walk(n.target) if isinstance(x, cst.Name)]
        for name in names:
            counts[name] = counts.get(name, 0) + 1
            v = _value(n)
            if isinstance(n, cst.Assign) and v is not None:
                values[name] = v
    once = {k: v for k, v in values.items() if counts[k] == 1}
    return once, sorted(k for k, c in counts.items() if c > 1)


def vector_axis(n: cst.Subscript) -> int | None:
    """0 for `e[:, None]` (a column vector: e along tile axis 0), 1 for `e[None, :]`, else
    None (any other indexing)."""
    kinds = []
    for el in n.slice:
        s = el.slice
        if isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None:
            kinds.append(":")
        elif isinstance(s, cst.Index) and isinstance(s.value, cst.Name) and s.value.value == "None":
            kinds.append("None")
        else:
            return None
    return {(":", "None"): 0, ("None", ":"): 1}.get(tuple(kinds))  # type: ignore[arg-type]


def _is_lane(e: cst.BaseExpression, index: str) -> bool:
    """e is the column `index` itself, or `index[None, :]` (along the tile's axis 1)."""
    if isinstance(e, cst.Subscript) and vector_axis(e) == 1:
        e = e.value
    return isinstance(e, cst.Name) and e.value == index


def orientation(kdef: cst.FunctionDef, index: str, dep: set[str]) -> str | None:
    """Why the kernel's `[:, None]` / `[None, :]` do not keep the columns on tile axis 1: a
    value that depends on them put on axis 0, or a row value put on axis 1."""
    for n in walk(kdef.body):
        if not isinstance(n, cst.Subscript):
            continue
        axis = vector_axis(n)
        lane = _reads(n.value, dep | {index})
        if axis is None:
            return f"indexing `{code(n)}` (only [:, None] and [None, :] make the [1, B] tile)"
        if any(isinstance(x, cst.Subscript) for x in walk(n.value)):
            return f"`{code(n)}`: indexing a tile again (a tile of more than two axes)"
        if lane and axis == 0:
            return (
                f"`{code(n)}`: the row's columns along tile axis 0 (only a [1, B] tile scanned "
                "along axis 1 is followed)"
            )
        if not lane and axis == 1:
            return f"`{code(n)}`: a value that does not depend on the columns along their axis 1"
    return None


def conjuncts(
    e: cst.BaseExpression, once: dict[str, cst.BaseExpression], depth: int = 0
) -> list[cst.BaseExpression]:
    """The `&`-conjuncts of a mask, through names set once and `[:, None]` / `[None, :]`."""
    if depth > 16:
        return [e]
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.BitAnd):
        return conjuncts(e.left, once, depth + 1) + conjuncts(e.right, once, depth + 1)
    if isinstance(e, cst.Name) and e.value in once:
        return conjuncts(once[e.value], once, depth + 1)
    if isinstance(e, cst.Subscript) and vector_axis(e) is not None:
        return conjuncts(e.value, once, depth + 1)
    return [e]


def lane_bound(
    m: cst.BaseExpression | None, index: str, dep: set[str], once: dict[str, cst.BaseExpression]
) -> str | None:
    """n of a mask `index < n` (n a name), maybe `&` conditions that do not depend on the
    column (the row's own, the same in every block); None for any other mask."""
    if m is None:
        return None
    found: list[str] = []
    for c in conjuncts(m, once):
        cmp = (
            c.comparisons[0] if isinstance(c, cst.Comparison) and len(c.comparisons) == 1 else None
        )
        if (
            cmp is not None
            and isinstance(cmp.operator, cst.LessThan)
            and isinstance(c, cst.Comparison)
            and isinstance(c.left, cst.Name)
            and c.left.value == index
            and isinstance(cmp.comparator, cst.Name)
        ):
            found.append(cmp.comparator.value)
        elif _reads(c, dep | {index}):
            return None
    return found[0] if len(found) == 1 else None

"""column_tiling in an expert's shape (not a pass): the launcher variable that sets how many
adjacent columns a program owns, for column_tiling's backward direction and its way back.

A site is a launcher's `NAME = expr` (assigned once there) passed as a constexpr P to a jit
kernel that tiles columns by it: the kernel sets `cols = <program id> * P + tl.arange(0, P)`,
loads through a pointer with the term `cols[None, :]` (the columns along the tile's contiguous
inner dimension) and reduces over axis 0 (the rows). Every launch in that launcher that passes
NAME passes it to such a kernel. Backward sets `NAME = 1`: one column per program, the grid (a
cdiv by NAME) spans the columns and the kernel's own masks keep the tail; the tile keeps its
other dimension, so the step measures the columns per program and nothing else. Forward at
`NAME = 1` restores the expert's expression (params["value"]), byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.multi_row_analysis import _tl_roots
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    assignments,
    bind,
    code,
    constexprs,
    walk,
)


@dataclass
class ColumnBlock:
    func: cst.FunctionDef
    assign: cst.Assign
    name: str  # the launcher variable
    value: str  # its expression's text
    kernels: list[str]
    line: int


def _is_pid(e: cst.BaseExpression, kdef: cst.FunctionDef) -> bool:
    if isinstance(e, cst.Call):
        return dotted(e.func).endswith("program_id")
    if isinstance(e, cst.Name):
        found = assignments(kdef).get(e.value, [])
        return len(found) == 1 and found[0].value is not None and _is_pid(found[0].value, kdef)
    return False


def _column_offsets(kdef: cst.FunctionDef, p: str, roots: set[str]) -> set[str]:
    """Names set to `<program id> * p + tl.arange(0, p)` (either order of the terms)."""
    out: set[str] = set()
    for name, found in assignments(kdef).items():
        if len(found) != 1 or not isinstance(found[0].value, cst.BinaryOperation):
            continue
        v = found[0].value
        if not isinstance(v.operator, cst.Add):
            continue
        for ar, mul in ((v.left, v.right), (v.right, v.left)):
            if not (
                isinstance(ar, cst.Call)
                and dotted(ar.func).split(".")[0] in roots
                and dotted(ar.func).endswith("arange")
                and [code(a.value) for a in ar.args] == ["0", p]
                and isinstance(mul, cst.BinaryOperation)
                and isinstance(mul.operator, cst.Multiply)
            ):
                continue
            sides = (mul.left, mul.right)
            if any(
                isinstance(s, cst.Name) and s.value == p and _is_pid(o, kdef)
                for s, o in (sides, sides[::-1])
            ):
                out.add(name)
    return out


def _terms(e: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
        return _terms(e.left) + _terms(e.right)
    return [e]


def tiles_columns(kdef: cst.FunctionDef, p: str, roots: set[str]) -> bool:
    """Whether the kernel tiles columns by its constexpr p (the module docstring's shape)."""
    cols = _column_offsets(kdef, p, roots)
    if not cols:
        return False
    inner = {f"{c}[None, :]" for c in cols}
    loads = False
    reduces = False
    assigned = assignments(kdef)
    for n in walk(kdef.body):
        if not isinstance(n, cst.Call) or not isinstance(n.func, cst.Attribute):
            continue
        if dotted(n.func).split(".")[0] not in roots:
            continue
        last = n.func.attr.value
        if last in ("sum", "max", "min") and any(
            code(a.value) == "0"
            and (
                (a.keyword is None and i == 1)
                or (a.keyword is not None and a.keyword.value == "axis")
            )
            for i, a in enumerate(n.args)
        ):
            reduces = True
        if last == "load" and n.args:
            ptr = n.args[0].value
            exprs = [ptr]
            if isinstance(ptr, cst.Name):
                exprs = [a.value for a in assigned.get(ptr.value, []) if a.value is not None]
            loads = loads or any(code(t) in inner for e in exprs for t in _terms(e))
    return loads and reduces


def column_blocks(ctx: Ctx) -> list[ColumnBlock]:
    """The file's column-block launcher variables (a literal 1 included: a forward site)."""
    roots = _tl_roots(ctx.module)
    found: dict[tuple[int, str], ColumnBlock] = {}
    passes_name: dict[tuple[int, str], int] = {}  # launches that pass the name at all
    for la in ctx.launches:
        for a in la.call.args:
            if isinstance(a.value, cst.Name):
                key = (id(la.func), a.value.value)
                passes_name[key] = passes_name.get(key, 0) + 1
    tiled: dict[tuple[int, str], int] = {}
    for la in ctx.launches:
        kdef = ctx.kernels.get(la.kernel)
        if kdef is None:
            continue
        args = bind(la.call, kdef)
        for p in sorted(constexprs(kdef)):
            arg = args.get(p)
            if not isinstance(arg, cst.Name) or not tiles_columns(kdef, p, roots):
                continue
            key = (id(la.func), arg.value)
            tiled[key] = tiled.get(key, 0) + 1
            assigns = assignments(la.func).get(arg.value, [])
            if len(assigns) != 1 or not isinstance(assigns[0], cst.Assign):
                continue
            block = found.setdefault(
                key,
                ColumnBlock(
                    la.func, assigns[0], arg.value, code(assigns[0].value), [], ctx.line(assigns[0])
                ),
            )
            if la.kernel not in block.kernels:
                block.kernels.append(la.kernel)
    return [b for k, b in found.items() if tiled.get(k) == passes_name.get(k)]


def replaced(ctx: Ctx, block: ColumnBlock, value: str) -> str:
    """The source with block's assignment set to `value`."""
    target = block.assign
    new = target.with_changes(value=cst.parse_expression(value))

    class _Swap(cst.CSTTransformer):
        def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
            return new if original is target else updated

    return ctx.module.visit(_Swap()).code

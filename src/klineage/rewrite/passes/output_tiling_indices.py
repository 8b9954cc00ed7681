"""output_tiling's output indices (not a pass): where a one-program-per-output kernel reads
the output (r, c) it computes, from a 2-D grid `(R, C)` and two program ids, or from a 1-D grid
`(R * C,)` and `t // D`, `t % D` (output_tiling_analysis.py says what else makes a site); and
the small expression readers the analysis shares."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.rows_per_program import Ctx, Launch, bind, code, same, walk


@dataclass
class Indices:
    form: str = ""  # "grid2": (R, C) and two program axes; "split": (R * C,) split by // and %
    pid: str = ""  # split form: the name of tl.program_id(0)
    pid_def: cst.Assign | None = None
    names: tuple[str, str] = ("", "")  # the first index (program axis 0, or t // D), the second
    defs: tuple[cst.Assign | None, cst.Assign | None] = (None, None)
    counts: tuple[str, str] = ("", "")  # the launch's count of each


def _assign_of(st: cst.BaseStatement) -> cst.Assign | None:
    """The statement's single `name = value`, else None."""
    if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1:
        a = st.body[0]
        if (
            isinstance(a, cst.Assign)
            and len(a.targets) == 1
            and isinstance(a.targets[0].target, cst.Name)
        ):
            return a
    return None


def _target(a: cst.Assign) -> str:
    t = a.targets[0].target
    assert isinstance(t, cst.Name)
    return t.value


def _reads(node: cst.CSTNode, names: set[str]) -> bool:
    return any(isinstance(x, cst.Name) and x.value in names for x in walk(node))


def _is_call(node: cst.CSTNode, roots: set[str], *last: str) -> bool:
    if not isinstance(node, cst.Call):
        return False
    parts = dotted(node.func).split(".")
    return len(parts) >= 2 and parts[0] in roots and parts[-1] in last


def _program_axis(e: cst.BaseExpression, roots: set[str]) -> int | None:
    """n for `tl.program_id(n)` / `tl.program_id(axis=n)` with n a literal, else None."""
    if not _is_call(e, roots, "program_id"):
        return None
    assert isinstance(e, cst.Call)
    if len(e.args) != 1 or not isinstance(e.args[0].value, cst.Integer):
        return None
    kw = e.args[0].keyword
    if kw is not None and kw.value != "axis":
        return None
    return int(e.args[0].value.value)


def _product_factors(e: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply):
        return [e.left, e.right]
    return None


def output_indices(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], body: list[cst.BaseStatement]
) -> Indices | str:
    """The kernel's two output indices, read from its grid and program ids, or why not."""
    grid = la.grid
    params = {p.name.value for p in kdef.params.params}
    out = Indices()
    if not (isinstance(grid, cst.Tuple | cst.List) and len(grid.elements) in (1, 2)):
        return f"grid `{code(grid)}` is not a literal (R * C,) or (R, C)"
    pids = [n for n in walk(kdef.body) if _is_call(n, roots, "program_id")]
    if any(_is_call(n, roots, "num_programs") for n in walk(kdef.body)):
        return f"{la.kernel} reads tl.num_programs"
    defs = [x for x in map(_assign_of, body) if x is not None]
    by_axis: dict[int, list[cst.Assign]] = {}
    for d in defs:
        axis = _program_axis(d.value, roots)
        if axis is not None:
            by_axis.setdefault(axis, []).append(d)
    if len(pids) != sum(len(v) for v in by_axis.values()):
        return "a program id read inside an expression (each must be assigned to a name)"
    if len(grid.elements) == 2:
        if set(by_axis) != {0, 1} or any(len(v) != 1 for v in by_axis.values()):
            return "a 2-D grid whose two program ids are not each read once into a name"
        out.form = "grid2"
        first, second = by_axis[0][0], by_axis[1][0]
        counts = [code(e.value) for e in grid.elements]
    else:
        if set(by_axis) != {0} or len(by_axis[0]) != 1:
            return "a 1-D grid whose program id is not read once into a name"
        out.form, out.pid_def = "split", by_axis[0][0]
        out.pid = _target(out.pid_def)
        split = [d for d in defs if _reads(d.value, {out.pid})]
        reads = [n for n in walk(kdef.body) if isinstance(n, cst.Name) and n.value == out.pid]
        if len(split) != 2 or len(reads) != 3:  # its assignment and the two splits
            return f"{out.pid} is not split into exactly two indices (`{out.pid} // D`, `{out.pid} % D`)"
        ops: dict[type, cst.Assign] = {}
        div = ""
        for d in split:
            v = d.value
            if not (
                isinstance(v, cst.BinaryOperation)
                and isinstance(v.operator, cst.FloorDivide | cst.Modulo)
                and isinstance(v.left, cst.Name)
                and v.left.value == out.pid
                and isinstance(v.right, cst.Name)
                and v.right.value in params
            ):
                return f"`{code(d)}`: not `{out.pid} // D` or `{out.pid} % D` with D a parameter"
            if div and v.right.value != div:
                return f"{out.pid} is split by two divisors"
            div = v.right.value
            ops[type(v.operator)] = d
        if set(ops) != {cst.FloorDivide, cst.Modulo}:
            return f"{out.pid} is not split by both // and %"
        first, second = ops[cst.FloorDivide], ops[cst.Modulo]
        col_arg = bind(la.call, kdef).get(div)
        factors = _product_factors(grid.elements[0].value)
        if col_arg is None or factors is None:
            return f"grid `{code(grid)}` is not R * {div}'s launch value"
        rest = [f for f in factors if not same(code(f), code(col_arg))]
        if len(rest) != 1:
            return f"grid `{code(grid)}` is not R * {code(col_arg)}"
        counts = [code(rest[0]), code(col_arg)]
    names = [_target(first), _target(second)]
    for n in names:
        if len(ctx.assigns(kdef).get(n, [])) != 1 or n in params:
            return f"the output index {n} is assigned more than once"
    out.names = (names[0], names[1])
    out.defs = (first, second)
    out.counts = (counts[0], counts[1])
    return out

"""Launch-side values tiled_transpose_tile.py and block_scan_analysis.py read (not a pass): what
a launch argument or a grid is bound to, through the launcher's names and the module's
constants, and whether a tile side is one lane at the launch.

A name is followed only when it is bound once: a launcher local assigned once and bound no
other way (no parameter, loop, tuple or augmented assignment of it), else a module constant
assigned once at the top level and declared `global` nowhere. Anything else stays the name,
which no check takes for a value.
"""

from __future__ import annotations

import libcst as cst

from klineage.rewrite.passes.rows_per_program import Ctx, Launch, assignments, walk


def _bound_names(node: cst.CSTNode) -> list[str]:
    """Every name the node's statements bind (assignment targets of any form, loop targets,
    parameters, `with ... as`), once per binding."""
    out: list[str] = []
    for n in walk(node):
        targets: list[cst.CSTNode] = []
        if isinstance(n, cst.Assign):
            targets = [t.target for t in n.targets]
        elif isinstance(n, cst.AugAssign | cst.AnnAssign | cst.For | cst.CompFor):
            targets = [n.target]
        elif isinstance(n, cst.AsName | cst.Param):
            targets = [n.name]
        for t in targets:
            if isinstance(t, cst.Name):
                out.append(t.value)
            else:
                out += [x.value for x in walk(t) if isinstance(x, cst.Name)]
    return out


def _module_constant(module: cst.Module, name: str) -> cst.BaseExpression | None:
    """The value of a top-level `name = value` assigned once and declared global nowhere."""
    if any(
        isinstance(n, cst.Global) and any(g.name.value == name for g in n.names)
        for n in walk(module)
    ):
        return None
    top = [st for st in module.body if isinstance(st, cst.SimpleStatementLine)]
    if sum(_bound_names(st).count(name) for st in top) != 1:
        return None
    found = assignments(module).get(name, [])
    return found[0].value if len(found) == 1 and found[0].value is not None else None


def launch_value(ctx: Ctx, la: Launch, e: cst.BaseExpression) -> cst.BaseExpression:
    """e, or what the name e is bound to once (a launcher local, else a module constant)."""
    if not isinstance(e, cst.Name):
        return e
    local = _bound_names(la.func)
    if e.value in local:
        found = assignments(la.func).get(e.value, [])
        if local.count(e.value) == 1 and len(found) == 1 and found[0].value is not None:
            return found[0].value
        return e
    return _module_constant(ctx.module, e.value) or e


def one_at_launch(ctx: Ctx, la: Launch, e: cst.BaseExpression) -> bool:
    """The launch value e is the literal 1 (itself or through a name bound once to it)."""
    v = launch_value(ctx, la, e)
    return isinstance(v, cst.Integer) and v.value == "1"


def stable_in_launcher(la: Launch, e: cst.BaseExpression) -> bool:
    """Every name e reads is bound at most once in the launcher: e means the same wherever the
    launcher reads it (before the launch, in the grid, in an argument)."""
    local = _bound_names(la.func)
    return all(local.count(x.value) <= 1 for x in walk(e) if isinstance(x, cst.Name))

"""block_scan's analysis (not a pass): a file's one-row-per-program scans and whether each can
become a loop of block scans with a carried prefix (rewrite/passes/block_scan.py says what is
rewritten). It builds on multi_row_analysis's launch checks (analyse_launches, launch_problem)
and taint walk (flows_from).

Two shapes, read from the structure and never from names; a kernel that is neither gets the
reason. Common to both: a literal 1-D grid `(n_rows,)`, straight-line simple statements (one
`for` loop in the serial shape), and in the part that becomes the loop body only loads,
stores, `.to(...)` and elementwise tl calls.

- "serial": one `for j in range(start, n)` loop (step 1) carrying exactly one value, a running
  sum started from a float literal and updated once, `acc += e` (or `acc = acc + e`), where e
  is fp32 (`.to(tl.float32)`) and depends on j; nothing reads acc before that update (an
  exclusive scan is not rewritten); every other name set in the loop is a temporary read
  neither before it is set nor after the loop; every load and store that depends on j adds j
  once with unit stride to a pointer, and every store in the loop depends on j.
- "tile": no loop, every name assigned once; exactly one `cols = tl.arange(0, B)`, B a
  constexpr parameter used nowhere else; exactly one `y = tl.cumsum(x, axis=0)` (not reversed)
  whose x is set once to an fp32 `.to(tl.float32)` (or is `v.to(tl.float32)` of a name v) and
  depends on cols; every load and store after the arange adds cols once with unit stride and
  is masked by `cols < n` (the same n, a name that does not depend on cols; `&` conditions that
  do not read the columns, the row's own, may join it); the launch passes B = next_power_of_2
  of the n it passes (so the tile covered the row, and a loop over n in B-wide blocks scans the
  same columns). No indexing but `[:, None]` / `[None, :]`, and those only on a [1, B] tile:
  one row a program widened by a unit axis, its row side a second `tl.arange(0, R)` whose R the
  launch binds to 1 (or no second arange: a scalar row), every value that depends on cols on
  axis 1 and every other on axis 0 (block_scan_lanes.orientation), the scan along axis 1. A
  tile of several rows (R not shown to be 1: the cumsum expert's `_cumsum_tile_kernel`) is not
  a one-row scan and is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.block_scan_lanes import (
    _assigned_once,
    _body,
    _calls,
    _mask,
    _memory,
    _reads,
    _targets,
    _tl_call,
    is_fp32,
    lane_bound,
    orientation,
)
from klineage.rewrite.passes.multi_row_analysis import (
    Launched,
    analyse_launches,
    flows_from,
    launch_problem,
)
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    _triton_alias,
    assignments,
    bind,
    code,
    constexprs,
    walk,
)
from klineage.rewrite.passes.tile_rewrite import _is_docstring
from klineage.rewrite.passes.tiled_transpose_launch import launch_value, one_at_launch

RANGES = {"range", "tl.range", "triton.language.range"}


@dataclass
class Analysis(Launched):
    shape: str = ""  # "serial" (a loop one element a step) or "tile" (one tile of the row)
    bound: str = ""  # the kernel's row length (the loop's stop, the mask's bound)
    launch_bound: str = ""  # the launch's expression for it ("" if it is not a parameter)
    # serial: the loop, its variable, the running sum, its update, the element added
    loop: cst.For | None = None
    index: str = ""
    acc: str = ""
    update: cst.SimpleStatementLine | None = None
    element: cst.BaseExpression | None = None
    # tile: the arange's statement, the block constexpr and the launch's argument for it
    arange: cst.SimpleStatementLine | None = None
    block_param: str = ""
    block_arg: cst.BaseExpression | None = None
    scanned: str = ""  # the cumsum's operand
    scan: cst.Call | None = None
    # a [1, B] tile: its row side's block (the carry is [that, 1]); "" for a 1-D tile (a scalar)
    carry_rows: str = ""
    rows: str = ""  # the grid's row count
    total_read: bool = False  # serial: the running sum is read after the loop (its total)
    memory: list[cst.Call] = field(default_factory=list)  # serial: loads/stores at the column


def _launch_bound(la: Launch, kdef: cst.FunctionDef, bound: str) -> str:
    params = {p.name.value for p in kdef.params.params}
    arg = bind(la.call, kdef).get(bound) if bound in params else None
    return code(arg) if arg is not None else ""


def _serial(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], a: Analysis, loop: cst.For
) -> str:
    body = _body(kdef)
    at = body.index(loop)
    before, after = body[:at], body[at + 1 :]
    if loop.orelse is not None or loop.asynchronous is not None:
        return "a for loop with an else clause (or async)"
    blocks = [n for n in walk(kdef.body) if isinstance(n, cst.Call)]
    if any(_tl_call(n, roots) in ("arange", "zeros", "full") for n in blocks):
        return "a block (tl.arange/zeros/full) beside the serial loop: its values are not scalars"
    if not isinstance(loop.target, cst.Name):
        return f"`for {code(loop.target)} in ...`: only a plain loop variable is followed"
    j = loop.target.value
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted(it.func) in RANGES):
        return f"`for {j} in {code(it)}`: only a range(...) loop is followed"
    if any(x.keyword is not None or x.star for x in it.args) or not 1 <= len(it.args) <= 3:
        return f"`{code(it)}`: only range([start,] stop[, 1]) without keywords is followed"
    if len(it.args) == 3 and not (
        isinstance(it.args[2].value, cst.Integer) and it.args[2].value.value == "1"
    ):
        return f"`{code(it)}`: the loop does not step one element at a time"
    stop = it.args[0].value if len(it.args) == 1 else it.args[1].value
    if not isinstance(stop, cst.Name):
        return f"`{code(it)}`: the loop's stop is not a name"
    inner: list[cst.SimpleStatementLine] = []
    for st in loop.body.body if isinstance(loop.body, cst.IndentedBlock) else []:
        if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1:
            first = code(st).splitlines()[0]
            return f"`{first}` in the loop: one simple statement a line is followed"
        if not isinstance(st.body[0], cst.Assign | cst.AugAssign | cst.Expr | cst.Pass):
            return f"a `{code(st.body[0])}` statement in the loop"
        inner.append(st)
    set_before = {t for st in before for s in walk(st) for t in _targets(s)}
    set_inside = [t for st in inner for t in _targets(st.body[0])]
    carried = sorted({t for t in set_inside if t in set_before or t == j})
    if len(carried) != 1:
        what = ", ".join(carried) or "nothing"
        return f"the loop carries {what}: a scan carries exactly one prefix value"
    acc = carried[0]
    ups = [st for st in inner if acc in _targets(st.body[0])]
    starts = [s for st in before for s in walk(st) if acc in _targets(s)]
    if len(starts) != 1 or not isinstance(starts[0], cst.Assign):
        return f"the running sum {acc} is set {len(starts)} times before its loop"
    start = starts[0].value
    lit = start.expression if isinstance(start, cst.UnaryOperation) else start
    if not isinstance(lit, cst.Float):
        return f"the running sum `{acc} = {code(start)}` does not start from a float literal"
    if len(ups) != 1:
        return f"the running sum {acc} is updated {len(ups)} times in the loop"
    up = ups[0].body[0]
    element = _added(up, acc)
    if element is None:
        return f"`{code(up)}`: the running sum is not updated as `{acc} += <element>`"
    at_up = inner.index(ups[0])
    if any(_reads(st, {acc}) for st in inner[:at_up]):
        return f"the loop reads {acc} before adding the element (an exclusive scan)"
    temps = [t for t in set_inside if t != acc]
    if len(set(temps)) != len(temps):
        return "a temporary is set twice in the loop"
    if any(_reads(st, set(temps) | {j}) for st in after):
        return "a value set in the loop (or its variable) is read after the loop"
    once, _ = _assigned_once(kdef)
    dep = flows_from(kdef, lambda x: isinstance(x, cst.Name) and x.value == j, False) - {acc}
    elem = once.get(element.value) if isinstance(element, cst.Name) else element
    if not is_fp32(elem):
        return f"the element `{code(element)}` is not made fp32 by `.to(tl.float32)`"
    if not _reads(element, dep | {j}):
        return f"the element `{code(element)}` does not depend on the loop's column"
    why = _calls(list(inner), roots, set())
    if why:
        return why
    why, found = _memory(list(inner), roots, j, dep, once)
    if why:
        return why
    calls = [n for st in inner for n in walk(st) if isinstance(n, cst.Call) and n.args]
    if any(
        _tl_call(c, roots) in ("load", "store") and _reads(c.args[0].value, {acc}) for c in calls
    ):
        return f"a pointer reads the running sum {acc} (a data-dependent address)"
    if not any(dotted(c.func).endswith("store") for c in found):
        return "the loop stores nothing at its column"
    a.shape, a.loop, a.index, a.acc, a.update, a.element = "serial", loop, j, acc, ups[0], element
    a.bound, a.launch_bound = stop.value, _launch_bound(la, kdef, stop.value)
    a.total_read = any(_reads(st, {acc}) for st in after)
    a.memory = found
    return ""


def _added(up: cst.BaseSmallStatement, acc: str) -> cst.BaseExpression | None:
    """e of `acc += e`, `acc = acc + e` or `acc = e + acc` (e not reading acc), else None."""
    if isinstance(up, cst.AugAssign) and isinstance(up.operator, cst.AddAssign):
        e: cst.BaseExpression | None = up.value
    elif (
        isinstance(up, cst.Assign)
        and len(up.targets) == 1
        and isinstance(up.value, cst.BinaryOperation)
        and isinstance(up.value.operator, cst.Add)
    ):
        v = up.value
        is_acc = [isinstance(s, cst.Name) and s.value == acc for s in (v.left, v.right)]
        e = v.right if is_acc[0] else v.left if is_acc[1] else None
    else:
        e = None
    return None if e is None or _reads(e, {acc}) else e


def _tile(ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], a: Analysis) -> str:
    body = _body(kdef)
    calls = [n for n in walk(kdef.body) if isinstance(n, cst.Call)]
    aranges = [n for n in calls if _tl_call(n, roots) == "arange"]
    scans = [n for n in calls if _tl_call(n, roots) == "cumsum"]
    if len(scans) != 1:
        return f"{len(scans) or 'no'} tl.cumsum calls: one scan of the row is rewritten"
    unfit, ar, unit = _lanes(ctx, la, kdef, aranges)
    if unfit:
        return unfit
    line = next(st for st in body if any(x is ar for x in walk(st)))
    assert isinstance(line, cst.SimpleStatementLine)
    small = line.body[0]
    if not (
        len(line.body) == 1
        and isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and small.value is ar
        and len(ar.args) == 2
        and isinstance(ar.args[0].value, cst.Integer)
        and ar.args[0].value.value == "0"
        and isinstance(ar.args[1].value, cst.Name)
    ):
        return f"`{code(line).strip()}`: the tile is not `cols = tl.arange(0, B)` on its own line"
    cols = small.targets[0].target.value
    block = ar.args[1].value.value
    if block not in constexprs(kdef):
        return f"tl.arange(0, {block}): the bound is not a constexpr parameter"
    if sum(isinstance(x, cst.Name) and x.value == block for x in walk(kdef.body)) != 1:
        return f"{block} is used beside the tile's tl.arange (the loop changes what it means)"
    once, twice = _assigned_once(kdef)
    if twice:
        return f"{', '.join(twice)} set more than once (each value must be set once)"
    tile = body[body.index(line) + 1 :]
    scan = scans[0]
    host = next((st for st in tile if any(x is scan for x in walk(st))), None)
    if host is None or not (
        isinstance(host, cst.SimpleStatementLine)
        and isinstance(host.body[0], cst.Assign)
        and host.body[0].value is scan
    ):
        return f"`{code(scan)}`: the scan is not assigned on its own after the tile"
    dep = flows_from(kdef, lambda n: isinstance(n, cst.Name) and n.value == cols, False)
    two_d = any(isinstance(n, cst.Subscript) for n in walk(kdef.body))
    why = orientation(kdef, cols, dep) if two_d else None
    x = scan.args[0].value if scan.args else None
    scanned = _scanned(x, once)
    if not why and scanned and two_d:
        tiles = flows_from(kdef, lambda n: isinstance(n, cst.Subscript), False)
        two_d = any(isinstance(n, cst.Subscript) for n in walk(scanned)) or _reads(scanned, tiles)
    why = why or _scan_args(scan, 1 if two_d else 0)
    if why:
        return why
    if x is None or scanned is None:
        shown = code(x) if x is not None else code(scan)
        return f"the scanned value `{shown}` is not set once to an fp32 `.to(tl.float32)`"
    if not _reads(scanned, dep | {cols}):
        return f"the scanned value `{code(x)}` does not depend on the tile's columns"
    why = _calls(tile, roots, {"cumsum"}, vectors=True)
    if why:
        return why
    why, found = _memory(tile, roots, cols, dep, once)
    if why:
        return why
    if not any(dotted(c.func).endswith("store") for c in found):
        return "nothing is stored at the tile's columns"
    bounds = set()
    for c in found:
        bound = lane_bound(_mask(c), cols, dep, once)
        if bound is None:
            return f"`{code(c)}`: not masked by `{cols} < n` (the loop's tail needs it)"
        bounds.add(bound)
    if len(bounds) != 1:
        return f"loads and stores are masked by different bounds ({', '.join(sorted(bounds))})"
    (bound,) = bounds
    if bound in dep or bound == cols:
        return f"the mask's bound {bound} depends on the tile"
    args = bind(la.call, kdef)
    if block not in args:
        return f"the launch does not pass {block}"
    a.launch_bound = _launch_bound(la, kdef, bound)
    covered = _pow2_of(args[block], la.func)
    if (
        not a.launch_bound
        or covered is None
        or "".join(covered.split()) != "".join(a.launch_bound.split())
    ):
        return (
            f"the launch's {block}={code(args[block])} is not next_power_of_2 of the "
            f"{bound} it passes: the tile may not cover the row (a loop would scan more)"
        )
    a.shape, a.arange, a.block_param, a.block_arg = "tile", line, block, args[block]
    a.bound, a.scanned, a.scan, a.index = bound, code(x), scan, cols
    a.block = code(args[block])
    a.carry_rows = (unit or "1") if two_d else ""
    return ""


def _lanes(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, aranges: list[cst.Call]
) -> tuple[str, cst.Call, str]:
    """Why the aranges are not one row's lanes; the lanes' arange; the row side's block when a
    second arange is one lane at the launch (a [1, B] tile), else ""."""
    if len(aranges) == 1:
        return "", aranges[0], ""
    if len(aranges) != 2:
        return (
            f"{len(aranges) or 'no'} tl.arange calls: one tile of the row is rewritten",
            aranges[0],
            "",
        )
    args = bind(la.call, kdef)
    sides = [code(ar.args[1].value) if len(ar.args) == 2 else "" for ar in aranges]
    ones = [
        s == "1" or (s in constexprs(kdef) and s in args and one_at_launch(ctx, la, args[s]))
        for s in sides
    ]
    if ones.count(True) != 1:
        shown = ", ".join(
            f"{s}={code(launch_value(ctx, la, args[s]))}" if s in args else s or code(ar)
            for s, ar in zip(sides, aranges, strict=True)
        )
        return (
            f"2 tl.arange calls ({shown} at the launch), not one of them one lane: a tile of "
            "several rows a program (one row a program is blocked)",
            aranges[0],
            "",
        )
    return "", aranges[ones.index(False)], sides[ones.index(True)]


def _scanned(
    x: cst.BaseExpression | None, once: dict[str, cst.BaseExpression]
) -> cst.BaseExpression | None:
    """The scan's fp32 operand: a name set once to `.to(tl.float32)`, or `v.to(tl.float32)`
    itself on a name v (cheap to read again for the carry); None for anything else."""
    if isinstance(x, cst.Name) and is_fp32(once.get(x.value)):
        return x
    if is_fp32(x) and isinstance(x, cst.Call) and isinstance(x.func, cst.Attribute):
        return x if isinstance(x.func.value, cst.Name) else None
    return None


def _scan_args(scan: cst.Call, lanes: int) -> str | None:
    """Why the scan is not along the columns' axis `lanes` (0 on a 1-D tile, 1 on [1, B])."""
    if not scan.args or scan.args[0].keyword is not None:
        return f"`{code(scan)}`: the scanned value is not the first argument"
    axis = "0"  # tl.cumsum's default
    for i, arg in enumerate(scan.args[1:], 1):
        key = arg.keyword.value if arg.keyword else ("axis" if i == 1 else "reverse")
        v = arg.value
        if key == "axis":
            axis = v.value if isinstance(v, cst.Integer) else code(v)
            axis = str(lanes) if axis == "-1" else axis  # the last axis
        if key == "reverse" and not (isinstance(v, cst.Name) and v.value == "False"):
            return f"`{code(scan)}`: a reversed scan (the carry would run the other way)"
        if key not in ("axis", "reverse"):
            return f"`{code(scan)}`: argument {code(arg)}"
    if axis != str(lanes):
        return f"`{code(scan)}`: a scan over axis {axis}, not the tile's columns (axis {lanes})"
    return None


def _pow2_of(e: cst.BaseExpression, func: cst.FunctionDef) -> str | None:
    """n of a launch value `triton.next_power_of_2(n)` (through one launcher name), else None."""
    if isinstance(e, cst.Name):
        found = assignments(func).get(e.value, [])
        if len(found) != 1 or found[0].value is None:
            return None
        e = found[0].value
    if (
        isinstance(e, cst.Call)
        and dotted(e.func).endswith("next_power_of_2")
        and len(e.args) == 1
        and e.args[0].keyword is None
    ):
        return code(e.args[0].value)
    return None


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    unfit, a.rows = launch_problem(ctx, la, kdef, count, "n_rows")
    if unfit:
        return unfit
    if _triton_alias(ctx.module) is None:
        return "no `import triton` in the file"
    pids = [
        n for n in walk(kdef.body) if isinstance(n, cst.Call) and _tl_call(n, roots) == "program_id"
    ]
    if not pids or any(
        not (n.args and isinstance(n.args[0].value, cst.Integer) and n.args[0].value.value == "0")
        for n in pids
    ):
        return f"{la.kernel} does not read only tl.program_id(0) (one program per row)"
    body = [st for st in _body(kdef) if not _is_docstring(st)]
    compound = [st for st in body if not isinstance(st, cst.SimpleStatementLine)]
    for st in body:
        if isinstance(st, cst.SimpleStatementLine):
            for small in st.body:
                if not isinstance(small, cst.Assign | cst.AugAssign | cst.AnnAssign | cst.Expr):
                    return f"a `{code(small)}` statement"
    if not compound:
        return _tile(ctx, la, kdef, roots, a)
    if len(compound) == 1 and isinstance(compound[0], cst.For):
        inner = compound[0].body
        if any(_tl_call(n, roots) == "cumsum" for n in walk(inner) if isinstance(n, cst.Call)):
            return "the loop already scans blocks with tl.cumsum (a block scan)"
        return _serial(ctx, la, kdef, roots, a, compound[0])
    st = compound[0] if len(compound) == 1 else compound[1]
    return f"a {type(st).__name__.lower()} statement at `{code(st).splitlines()[0]}`"

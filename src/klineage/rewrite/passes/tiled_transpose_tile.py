"""tiled_transpose on a program that copies a [1, B] or [B, 1] tile (not a pass): its analysis
and rewrite. tiled_transpose_analysis.py proves the one-line-per-program kernels (a lane vector,
no indexing); a kernel that indexes `[:, None]` / `[None, :]` is a tile program and is read here.

A tile program whose one side is one lane at the launch is the one-line-per-program kernel
widened along the other side: one row (or column) of the source a program, B lanes at a time
(the transpose expert's kernel walked back to BLOCK_M_SIZE = 1: a [1, 32] tile, its store 32
elements a row pitch apart). The rewrite changes no kernel code, only the tile the launch picks:
both sides become the tile's (params["block_m"] for the source's rows, ["block_n"] for its
columns; 64 x 64, the expert's), at the launch and in the grid that counts the tiles, so the
load and the store both run along whole lines.

What makes a site, read from the structure and never from names:
- the body is straight-line assignments to names (each once) around one tl.load and one
  tl.store of the loaded value (through names, `.to(...)` and tl.trans), with no other calls
  than tl.program_id, tl.arange, tl.cdiv, tl.load, tl.store, tl.trans and `.to`;
- two sides, each `r = c * B + tl.arange(0, B)`: B a constexpr parameter, c a program
  coordinate, exactly one B one lane at the launch (1, or a name bound once to 1);
- the coordinates are `pid // D` and `pid % D` of tl.program_id(0) on a grid `(X * D,)`, or
  tl.program_id(0) and tl.program_id(1) on a grid `(X, Y)`, and each ranges over cdiv(n, B) of
  its side: its grid factor (and D) is `cdiv(n, B)` of the B the launch passes and the n it
  passes for the side's mask bound; the program id, the coordinates, D and each B are read
  nowhere else, and the launcher binds each name these read at most once;
- the load and the store are both masked by `r < n` for both sides (maybe among other
  conditions), the same n on both;
- every value is a scalar, one side's vector, or a 2-D tile built by [:, None] / [None, :], each
  side on one axis of it and the two on different axes (`Program.shape`); the load and the store are
  2-D with both sides;
- a transpose: the load is unit-stride along one side and the store along the other, from two
  different pointer parameters (a copy contiguous along the same side is coalesced already).

Why it is sound at any tile: each element of every value depends only on its pair (r_a, r_b)
(the shapes keep each side on its axis, tl.trans swaps both, and nothing reduces or reshapes),
so the element for a pair computes the same at any B. The coordinates cover [0, cdiv(n, B)) for
each side, so the sides cover [0, n) at any B, and both masks cut them back to n: every pair a
tile of one shape copied, tiles of another copy, once each. Nothing else reads B.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.passes.block_scan_lanes import conjuncts
from klineage.rewrite.passes.multi_row_analysis import analyse_launches
from klineage.rewrite.passes.rows_per_program import Ctx, Launch, bind, code, same, walk
from klineage.rewrite.passes.tiled_transpose_analysis import Analysis
from klineage.rewrite.passes.tiled_transpose_analysis import _problem as line_problem
from klineage.rewrite.passes.tiled_transpose_launch import (
    launch_value,
    one_at_launch,
    stable_in_launcher,
)
from klineage.rewrite.passes.tiled_transpose_program import (
    Program,
    Side,
    Unfit,
    argument,
    cdiv_args,
    stripped,
)


@dataclass
class Tile:
    row: Side  # the source's rows (the load is strided along them)
    col: Side  # its columns (the load is unit-stride along them)
    shape: str  # the launch's tile, [rows, columns] ("[1, 32]")


@dataclass
class TileAnalysis(Analysis):
    tile: Tile | None = None  # set for a tile program (this module's site)


def _bounds(p: Program, call: cst.Call, pos: int) -> dict[str, set[str]]:
    """Per side index, the n of the call's mask conjuncts `r < n` (n a parameter or literal)."""
    mask = argument(call, pos, "mask")
    out: dict[str, set[str]] = {s.index: set() for s in p.sides}
    for c in conjuncts(mask, p.values) if mask is not None else []:
        if isinstance(c, cst.Comparison) and len(c.comparisons) == 1:
            left, cmp = c.left, c.comparisons[0]
            bound = cmp.comparator
            if (
                isinstance(cmp.operator, cst.LessThan)
                and isinstance(left, cst.Name)
                and left.value in out
                and (
                    isinstance(bound, cst.Integer)
                    or (isinstance(bound, cst.Name) and bound.value in p.params)
                )
            ):
                out[left.value].add(code(bound))
    return out


def _strides(p: Program, call: cst.Call) -> tuple[str, str, str]:
    """(base pointer parameter, the side it is unit-stride along, the side it is strided along)
    of a load's or store's address `base + offsets`; raises Unfit for another address."""
    ptr = call.args[0].value if call.args and call.args[0].keyword is None else None
    why = f"`{code(call)}`: the address is not a pointer parameter plus offsets linear in the tile's sides"
    if ptr is None:
        raise Unfit(why)
    sides = {s.index for s in p.sides}

    def terms(e: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression]:
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
            return terms(e.left, depth) + terms(e.right, depth)
        if isinstance(e, cst.Name) and e.value in p.values and e.value not in sides and depth < 8:
            return terms(p.values[e.value], depth + 1)
        return [e]

    def reads(e: cst.CSTNode) -> set[str]:
        return {x.value for x in walk(e) if isinstance(x, cst.Name) and x.value in sides}

    bases, unit, strided = [], [], []
    for t in terms(ptr):
        s = stripped(t)
        if isinstance(s, cst.Name) and s.value in sides:
            unit.append(s.value)
        elif isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Multiply):
            factors = [f for f in (s.left, s.right) if reads(f)]
            if len(factors) != 1 or not isinstance(stripped(factors[0]), cst.Name):
                raise Unfit(why)
            strided.append(code(stripped(factors[0])))
        elif reads(s):
            raise Unfit(why)
        elif isinstance(s, cst.Name) and s.value in p.params:
            bases.append(s.value)
    if len(bases) != 1 or len(unit) != 1 or len(strided) != 1 or unit == strided:
        raise Unfit(
            f"`{code(call)}`: the address is not one pointer parameter, unit-stride along one "
            "side and strided along the other"
        )
    return bases[0], unit[0], strided[0]


def _grid(ctx: Ctx, la: Launch) -> list[cst.BaseExpression]:
    g = launch_value(ctx, la, la.grid)
    if not (
        isinstance(g, cst.Tuple | cst.List)
        and 1 <= len(g.elements) <= 2
        and all(isinstance(e, cst.Element) for e in g.elements)
    ):
        raise Unfit(f"grid `{code(la.grid)}` is not a literal tuple (X * D,) or (X, Y)")
    if not stable_in_launcher(la, g):
        raise Unfit(f"grid `{code(g)}` reads a name the launcher binds more than once")
    return [e.value for e in g.elements]


def _matches(e: cst.BaseExpression, want: tuple[str, str]) -> cst.BaseExpression | None:
    """The B node of e when e is `cdiv(n, B)` with (n, B) reading as `want`, else None."""
    pair = cdiv_args(e)
    if pair is None or not all(same(code(x), w) for x, w in zip(pair, want, strict=True)):
        return None
    return pair[1]


def _ranges(ctx: Ctx, la: Launch, kdef: cst.FunctionDef, p: Program) -> None:
    """Each side's coordinate ranges over cdiv(n, B) of its mask bound n and block B as the
    launch passes them; records the launch nodes that carry each B (argument, grid divisors)."""
    args = bind(la.call, kdef)
    want: dict[str, tuple[str, str]] = {}
    for s in p.sides:
        if s.block not in args:
            raise Unfit(f"the launch does not pass {s.block}")
        if not (s.bound in args or s.bound.isdigit()):
            raise Unfit(f"the launch does not pass {s.bound}")
        n = args[s.bound] if s.bound in args else cst.Integer(s.bound)
        if not (stable_in_launcher(la, args[s.block]) and stable_in_launcher(la, n)):
            raise Unfit(f"{s.block} or {s.bound} reads a name the launcher binds more than once")
        want[s.index] = (code(n), code(args[s.block]))
        s.nodes.append(args[s.block])
    grid = _grid(ctx, la)
    by = {s.coord: s for s in p.sides}

    def take(s: Side, e: cst.BaseExpression, what: str) -> None:
        node = _matches(e, want[s.index])
        if node is None:
            raise Unfit(
                f"{what} `{code(e)}` is not cdiv({', '.join(want[s.index])}): side {s.index} "
                "is not shown to cover its bound at every tile"
            )
        s.nodes.append(node)

    if "axis0" in by:
        if len(grid) != 2:
            raise Unfit(f"a grid of {len(grid)} axes for tl.program_id(0) and tl.program_id(1)")
        take(by["axis0"], grid[0], "grid axis 0")
        take(by["axis1"], grid[1], "grid axis 1")
        return
    mod, div = by["mod"], by["div"]
    d = p.resolve(p.divisor)
    kernel_d = cdiv_args(d)
    if kernel_d is not None:
        # tl.cdiv(n, B) in the kernel, of the side's own bound and block: it follows B itself
        if not (code(kernel_d[0]) == mod.bound and code(kernel_d[1]) == mod.block):
            raise Unfit(
                f"D = `{code(d)}` is not tl.cdiv({mod.bound}, {mod.block}) of side {mod.index}"
            )
    elif isinstance(d, cst.Name) and d.value in args:
        take(mod, launch_value(ctx, la, args[d.value]), f"D = {d.value}, passed as")
    else:
        raise Unfit(f"D = `{code(d)}` is neither tl.cdiv(n, B) in the kernel nor a parameter")
    g = grid[0] if len(grid) == 1 else None
    if not (isinstance(g, cst.BinaryOperation) and isinstance(g.operator, cst.Multiply)):
        raise Unfit(
            f"grid `({', '.join(map(code, grid))})` is not (X * D,) for pid // D and pid % D"
        )
    for factor, other in ((g.right, g.left), (g.left, g.right)):
        if _matches(factor, want[mod.index]) is not None:
            take(mod, factor, "D in the grid")
            take(div, other, "the grid's X of (X * D,)")
            return
    raise Unfit(f"grid `({code(g)},)` is not (X * D,) with D = cdiv({', '.join(want[mod.index])})")


def analyse(source: str) -> tuple[Ctx, list[TileAnalysis]]:
    """Every launch of the file's kernels: a kernel that indexes `[:, None]` / `[None, :]` is a
    tile program (read here), any other a one-line-per-program kernel (tiled_transpose_analysis)."""
    return analyse_launches(source, TileAnalysis, _problem)


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: TileAnalysis
) -> str:
    if any(isinstance(n, cst.Subscript) for n in walk(kdef.body)):
        return tile_problem(ctx, la, kdef, roots, a)
    return line_problem(ctx, la, kdef, roots, count, a)


def tile_problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], a: TileAnalysis
) -> str:
    """Why the launch of a tile program is not a site ("" for one: a.tile is set)."""
    try:
        a.tile = _tile(ctx, la, kdef, roots)
    except Unfit as e:
        return str(e)
    return ""


def _tile(ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str]) -> Tile:
    if len(kdef.decorators) != 1:
        raise Unfit(f"{la.kernel} has decorators besides @triton.jit (autotuned or heuristics)")
    p = Program(kdef, roots)
    p.statements()
    p.find_sides()
    args = bind(la.call, kdef)
    for s in p.sides:
        if s.block not in args:
            raise Unfit(f"the launch does not pass {s.block}")
    ones = [s for s in p.sides if one_at_launch(ctx, la, args[s.block])]
    if len(ones) != 1:
        shown = ", ".join(
            f"{s.block}={code(launch_value(ctx, la, args[s.block]))}" for s in p.sides
        )
        raise Unfit(
            f"{'both' if ones else 'neither'} of the tile's sides one lane at the launch ({shown}): "
            "not one line of the source a program"
        )
    load, store = p.calls["load"][0], p.calls["store"][0]
    lb, sb = _bounds(p, load, 1), _bounds(p, store, 2)
    for s in p.sides:
        both = lb[s.index] & sb[s.index]
        if len(both) != 1:
            raise Unfit(
                f"the load and the store are not both masked by `{s.index} < n` (one n): at "
                "another tile its lanes would reach past the bound"
            )
        s.bound = both.pop()
    for call in (load, store):
        rank, axes = p.shape(call)
        if rank != 2 or len(axes) != 2:
            raise Unfit(f"`{code(call)}`: not a 2-D tile of both sides")
    lbase, lunit, lstrided = _strides(p, load)
    sbase, sunit, _ = _strides(p, store)
    if lbase == sbase:
        raise Unfit(f"the load and the store both address {lbase} (an in-place transpose races)")
    if lunit == sunit:
        raise Unfit(
            "the load and the store are contiguous along the same side (not a transpose; such a "
            "copy is coalesced already)"
        )
    _ranges(ctx, la, kdef, p)
    row, col = (next(s for s in p.sides if s.index == i) for i in (lstrided, lunit))
    shape = ", ".join(code(launch_value(ctx, la, args[s.block])) for s in (row, col))
    return Tile(row, col, f"[{shape}]")


def rewrite_tile(ctx: Ctx, a: TileAnalysis, block_m: int, block_n: int) -> str:
    """The source with a's launch and grid passing a [block_m, block_n] tile (the kernel as
    it is)."""
    t = a.tile
    assert t is not None
    new = {id(n): v for s, v in ((t.row, block_m), (t.col, block_n)) for n in s.nodes}
    call = a.launch.call
    comment = cst.EmptyLine(
        comment=cst.Comment(
            f"# tiled_transpose: a [{block_m}, {block_n}] tile of the source a program, not "
            f"{t.shape} (one line of it): the load and the store both along whole lines"
        )
    )

    class Edit(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
            if id(original) in new:
                return cst.Integer(str(new[id(original)]))
            if isinstance(updated, cst.SimpleStatementLine) and any(
                x is call for x in walk(original)
            ):
                return updated.with_changes(leading_lines=[*updated.leading_lines, comment])
            return updated

    return ctx.module.visit(Edit()).code

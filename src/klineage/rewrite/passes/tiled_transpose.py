"""A 2-D tiled transpose for a one-line-per-program one: a [BLOCK_M, BLOCK_N] tile a program,
coalesced on both sides.

A naive transpose (or last-two-dims permute) gives each program one line: a column of x
gathered with a row pitch between lanes and stored as y's row (kernels/transpose/naive.py), or
a row of x stored as y's column, lanes M elements apart (heldout/batched_transpose_last2), maybe
in chunks of a loop. One side of every access touches one element of each 32-byte sector it
pays for. A 2-D tile has contiguous runs along both dimensions: Triton's coalescing gives the
load and the store each the layout its addresses are contiguous along and converts the tile
between them through shared memory, so both read and write whole lines (the transpose expert's
tile, 64 x 64, kernels/transpose/expert.py).

Forward: the program's index p (its program id, or `pid % D` of a batched one whose batch is
`pid // D`) becomes a vector of BLOCK_P indices, `(tl.program_id(a) * BLOCK_P + tl.arange(0,
BLOCK_P))` along tile axis a, masked `p < n` on every load and store; the lanes `tl.arange(0, B)`
become `(tl.program_id(1 - a) * B + tl.arange(0, B))` along the other axis, or, in a kernel that
walks the lanes by `for s in range(0, S, B)`, the loop becomes one chunk a program,
`s = tl.program_id(1 - a) * B`. Axis 0 is the source's rows (the index its load is not
contiguous along), axis 1 its columns, so the load is a row-major [BLOCK_M, BLOCK_N] tile of x;
a batch goes to grid axis 2 (`tl.program_id(2)`). The launch's grid becomes (cdiv(rows,
BLOCK_M), cdiv(cols, BLOCK_N)[, batches]), B's value and the new BLOCK_P the tile's sides
(params["block_m"], params["block_n"]; 64 x 64, the expert's), and the non-batched kernel takes
the count n. (CUDA caps grid axes 1 and 2 at 65535: 4M columns of 64, 65535 batches.)

Why it is sound: the kernel is a pure copy (tiled_transpose_analysis.py proves the shape): its
operations are elementwise, p and the lanes enter only through the substituted vectors, so the
tile's element (p, q) computes what program p computed at lane q. The tiles cover the same (p,
q): p over [0, G) (the grid's count, or [0, D) x [0, X) for a grid (X * D,) split by // D and
% D) masked p < n; the lanes over [0, bound) when every load and store was masked by `lane <
bound` and the block was next_power_of_2(bound) >= bound (the masks stay), or one loop
iteration a program, cdiv(S, B) of them, the iterations being independent (every name is
assigned once, nothing is carried) and every load and store masked by `s + lane < S`, so
the chunks cover [0, S) whatever B is (B is read only by the arange and the loop's step). The load and the store address different parameters and
nothing else is read or written, so programs stay independent; the store is assumed one-to-one
in (p, q), as a transpose's is (where it is not, the naive kernel's programs race already).

Forward on a tile program with a side of one lane (a [1, B] or [B, 1] tile: the transpose
expert's CPU walk ends on its kernel at BLOCK_M_SIZE = 1, BLOCK_N_SIZE = 32): the same one line
a program, already written for any tile. tiled_transpose_tile.py proves it correct at every tile
and rewrites only the launch: both sides become the tile's, in the arguments and in the grid.

Backward: none. The corpus expert's tile is not a separable step: its tile sides are module
constants read by the grid, a grouped launch order (grouped_launch_order's) maps the program
id to the tile, a heuristic picks an unmasked path on whole tiles (mask_free_even_path's) and
tl.trans exchanges the tile explicitly. Shrinking a tile side to 1 keeps its meaning (forward,
above, reads such a kernel as one line a program), but that is block_size's step, not a
separable tiled transpose. So the pass finds no backward sites.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from klineage.rewrite.base import ForwardOnly, RewriteResult, Site, dotted, launched
from klineage.rewrite.passes.multi_row_analysis import _tl_roots
from klineage.rewrite.passes.rows_per_program import Ctx, _triton_alias, bind, code, names_in
from klineage.rewrite.passes.tile_rewrite import (
    Relaunch,
    _kw,
    _vector,
    _with_args,
    after_docstring,
    fresh,
    index_lines,
    masked,
    tl_alias,
    why_not,
    with_grid,
    with_params,
)
from klineage.rewrite.passes.tiled_transpose_analysis import Analysis
from klineage.rewrite.passes.tiled_transpose_tile import TileAnalysis, analyse, rewrite_tile
from klineage.rewrite.registry import register

TILE = 64  # each side of the expert's 64 x 64 tile: a bf16 tile row is one 128-byte line


class _Kernel(cst.CSTTransformer):
    """The kernel's body on the tile (see the module docstring); n: the names it uses."""

    def __init__(self, a: Analysis, n: dict[str, str], roots: set[str], tl: str) -> None:
        self.a = a
        self.n = n
        self.roots = roots
        self.tl = tl
        self.q_axis = 1 if a.p_is_row else 0

    def _tl_call(self, call: cst.Call) -> str:
        if not isinstance(call.func, cst.Attribute):
            return ""
        parts = dotted(call.func).split(".")
        return parts[-1] if len(parts) > 1 and parts[0] in self.roots else ""

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        last = self._tl_call(original)
        if last == "program_id" and not self.a.split:
            return cst.Name(self.n["index"])
        if last == "arange":
            b = self.a.lane_block
            lanes: cst.BaseExpression = updated
            if self.a.loop is None:
                lanes = cst.parse_expression(
                    f"({self.tl}.program_id({self.q_axis}) * {b} + {code(updated)})"
                )
            return cst.Subscript(lanes, _vector(self.q_axis))
        if last in ("load", "store"):
            return masked(updated, 1 if last == "load" else 2, self.n["ok"])
        return updated

    def leave_BinaryOperation(
        self, original: cst.BinaryOperation, updated: cst.BinaryOperation
    ) -> cst.BaseExpression:
        kind = self.a.split.get(id(original))
        if kind == "b":
            return cst.parse_expression(f"{self.tl}.program_id(2)")
        if kind == "p":
            return cst.Name(self.n["index"])
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> Any:
        if self.a.pid_assign and [id(s) for s in original.body] == [self.a.pid_assign]:
            return cst.RemoveFromParent()  # `pid = tl.program_id(0)`: its split is replaced
        return updated

    def leave_For(self, original: cst.For, updated: cst.For) -> Any:
        if original is not self.a.loop:
            return updated
        assert isinstance(updated.target, cst.Name) and isinstance(updated.body, cst.IndentedBlock)
        start = cst.parse_statement(
            f"{updated.target.value} = {self.tl}.program_id({self.q_axis}) * {self.a.lane_block}"
        ).with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel([start, *updated.body.body])


def _kernel(ctx: Ctx, a: Analysis, tl: str) -> tuple[cst.FunctionDef, dict[str, str]]:
    """The rewritten kernel and the names it uses (index, ok, block, count)."""
    kdef = ctx.kernels[a.kernel]
    used = set(names_in(kdef)) | {p.name.value for p in kdef.params.params}
    side = (
        ("rows", "row_ok", "BLOCK_M", "n_rows")
        if a.p_is_row
        else ("cols", "col_ok", "BLOCK_N", "n_cols")
    )
    n = {k: fresh(v, used) for k, v in zip(("index", "ok", "block", "count"), side, strict=True)}
    body = kdef.body.visit(_Kernel(a, n, _tl_roots(ctx.module), tl))
    assert isinstance(body, cst.IndentedBlock)
    p_axis = 0 if a.p_is_row else 1
    bound = a.divisor or n["count"]
    body = after_docstring(body, index_lines(n, tl, p_axis, p_axis, bound))
    annotation = next(
        p.annotation
        for p in kdef.params.params
        if p.name.value == a.lane_block and p.annotation is not None
    )
    new = [cst.Param(cst.Name(n["block"]), annotation=annotation)]
    if not a.divisor:
        new.insert(0, cst.Param(cst.Name(n["count"])))
    params = with_params(kdef.params.params, new)
    return kdef.with_changes(body=body, params=kdef.params.with_changes(params=params)), n


def _rewrite(ctx: Ctx, a: Analysis, block_m: int, block_n: int) -> str:
    la = a.launch
    kdef = ctx.kernels[a.kernel]
    tr = _triton_alias(ctx.module) or "triton"
    tl = tl_alias(ctx.module) or f"{tr}.language"
    new_kdef, n = _kernel(ctx, a, tl)
    rows, cols = (a.count, a.lanes) if a.p_is_row else (a.lanes, a.count)
    axes = [f"{tr}.cdiv({rows}, {block_m})", f"{tr}.cdiv({cols}, {block_n})"]
    grid = cst.parse_expression(f"({', '.join([*axes, a.batches] if a.batches else axes)})")
    launch = with_grid(la.call, grid)
    p_block, q_block = (block_m, block_n) if a.p_is_row else (block_n, block_m)
    lane_arg = bind(la.call, kdef)[a.lane_block]
    args = [
        x.with_changes(value=cst.Integer(str(q_block))) if x.value is lane_arg else x
        for x in launch.args
    ]
    extra = [_kw(n["block"], str(p_block))]
    if not a.divisor:
        extra.insert(0, _kw(n["count"], a.count))
    new_call = _with_args(launch.with_changes(args=args), extra)
    comment = cst.EmptyLine(
        comment=cst.Comment(
            f"# tiled_transpose: a [{block_m}, {block_n}] tile of the source a program, loaded "
            "along its rows and stored along the destination's (Triton converts the tile "
            "through shared memory): both sides coalesced"
        )
    )
    edit = Relaunch(
        la.call,
        lambda _: new_call,
        lambda st: st.with_changes(leading_lines=[*st.leading_lines, comment]),
        kdef,
        new_kdef,
    )
    return ctx.module.visit(edit).code


def _describe(a: TileAnalysis) -> tuple[str, dict[str, Any]]:
    params = {"kernel": a.kernel, "block_m": TILE, "block_n": TILE}
    if a.tile:
        t = a.tile
        return f"{a.kernel}: a {t.shape} tile of the source a program (part of one line)", params
    return (
        f"{a.kernel}: one {'row' if a.p_is_row else 'column'} of the source a "
        f"program ({a.count}{' x ' + a.batches if a.batches else ''}), {a.lanes} lanes",
        params,
    )


def _side(p: dict[str, Any], key: str, site: Site) -> int | RewriteResult:
    v = p.get(key, TILE)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1 or v & (v - 1):
        return RewriteResult.skip(f"params['{key}']={v!r}: expected a power of two", site)
    return v


@register
class TiledTranspose(ForwardOnly):
    NAME = "tiled_transpose"
    DESCRIPTION = (
        "Turn a one-line-per-program transpose (each program copies one row or column, so one "
        "side's lanes are a row pitch apart: one element per 32-byte sector) into one that "
        "copies a [BLOCK_M, BLOCK_N] tile (the index and the lanes along the two tile axes, a "
        "batch on grid axis 2, masks on both; grid (cdiv(rows, BLOCK_M), cdiv(cols, BLOCK_N))): "
        "Triton exchanges the tile through shared memory, so both the load and the store are "
        "coalesced."
    )
    CATEGORY = "memory"
    STRUCTURAL = True
    ANCHOR = "one-line-per-program launch kernel[(n,)] of a pure-copy kernel whose load and store are contiguous along different indices"

    # no backward sites: the expert's tile is not a separable step (the module docstring)

    def forward_sites(self, source: str) -> list[Site]:
        return self.launch_sites(lambda: analyse(source)[1], _describe)

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""
        return why_not(self, analyse, source)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = {**site.params, **(params or {})}

        def run() -> RewriteResult:
            ctx, found = analyse(source)
            a = launched(found, site)
            if isinstance(a, RewriteResult):
                return a
            bm, bn = _side(p, "block_m", site), _side(p, "block_n", site)
            if isinstance(bm, RewriteResult):
                return bm
            if isinstance(bn, RewriteResult):
                return bn
            out = rewrite_tile(ctx, a, bm, bn) if a.tile else _rewrite(ctx, a, bm, bn)
            return RewriteResult(
                True,
                f"{a.kernel}: a [{bm}, {bn}] tile a program, coalesced load and store",
                out,
                site,
            )

        return self.safe(run)

"""Output tiling: a program that computes one output of a matrix product as a dot product over
K becomes one that computes a [TILE_M, TILE_N] tile of outputs with tl.dot.

A first matrix product is often written one output per program (issue 16): program (r, c)
walks K, loads a block of A's row r and of B's column c, multiplies them lane by lane into a
[STEP] fp32 vector and sums it at the end. Every row of A is then read once per column of the
output and every column of B once per row, B down a column (N elements apart: one useful
element per 32-byte sector at N = 16), and the multiply-adds never reach the tensor cores. On
the H200 the held-out 16 x 16 x 1M bf16 product ran at 2-3% of its memory floor that way even
split over K (docs/benchmarks.md). A tile reads each A and B element once per tile, B along
its rows, and feeds the product to tl.dot.

Forward, on a kernel output_tiling_analysis.py accepts: the first output index r becomes the
column vector `(tile_r * TILE_M + tl.arange(0, TILE_M))[:, None]` and the second c the row
vector `(tile_c * TILE_N + tl.arange(0, TILE_N))[None, :]`, tile (tile_r, tile_c) read from a
1-D grid `(cdiv(R, TILE_M) * cdiv(C, TILE_N),)` (1-D, so split_k can add its axis after); in
the K loop every vector of the K block on A's side becomes `[None, :]` and on B's side
`[:, None]` (its own 1-D definition is kept), so A's load is a [TILE_M, STEP] tile and B's a
[STEP, TILE_N] tile, masked off past R and C; the [STEP] accumulator becomes a [TILE_M, TILE_N]
one updated by `acc += tl.dot(a, b, input_precision="ieee")` (the loads' fp32 casts dropped:
tl.dot accumulates bf16 and fp16 products in fp32, and "ieee" keeps fp32 inputs out of TF32,
which would miss the gate's 1e-4 tolerance); the store writes the accumulator where it wrote
tl.sum(acc, axis=0), masked off past R and C. The kernel gains the parameters R and C (the
padded lanes' bounds) and the constexprs TILE_M and TILE_N.

TILE_M and TILE_N are params["tile_m"] / params["tile_n"] (powers of two, at least 16:
tl.dot's least size), else `min(64, max(16, next_power_of_2(R)))` (and C's): one tile for the
small outputs this is for, 64 x 64 (the corpus matmul's tile) for large ones.

Why it is sound: output_tiling_analysis.py's docstring. Alone on a small output it leaves few
programs (one tile for a 16 x 16 output), each walking all of K: split_k then splits that loop
over programs (its site: a literal 1-D grid, a K loop into one fp32 accumulator, one store
after it), and the optimize loop proposes the two together when the tile alone is correct but
not faster (optimize/policies.py).

Forward only: no backward direction (undoing a tile into one program per output would have
to recognise the expert's tl.dot as a product of two loads).
"""

from __future__ import annotations

import textwrap
from typing import Any

import libcst as cst

from klineage.rewrite.base import ForwardOnly, RewriteResult, Site, dotted, launched
from klineage.rewrite.passes import tile_rewrite
from klineage.rewrite.passes.output_tiling_analysis import Analysis, analyse, tl_roots
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    _triton_alias,
    assignments,
    names_in,
)
from klineage.rewrite.registry import register

MIN_TILE = 16  # tl.dot's least M, N and K
MAX_TILE = 64  # the corpus matmul's tile (docs/benchmarks.md: its naive kernel's 64 x 64)


class _Broadcast(cst.CSTTransformer):
    """An expression of one output index and the K block with every K-block vector (a name
    in `block`, or a tl.arange) indexed as `[None, :]` (axis 1) or `[:, None]` (axis 0)."""

    def __init__(self, block: set[str], roots: set[str], axis: int) -> None:
        self.block, self.roots, self.axis = block, roots, axis

    def _vec(self, e: cst.BaseExpression) -> cst.Subscript:
        return cst.Subscript(e, tile_rewrite._vector(self.axis))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self._vec(updated) if original.value in self.block else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> Any:
        return updated.with_changes(attr=original.attr)  # `x.to`: `to` is no value

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)  # `mask=`: a keyword, no value

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        parts = dotted(original.func).split(".")
        if len(parts) >= 2 and parts[0] in self.roots and parts[-1] == "arange":
            return self._vec(updated)
        return updated


class _Kernel(cst.CSTTransformer):
    def __init__(self, a: Analysis, n: dict[str, str], roots: set[str], tl: str) -> None:
        self.a, self.n, self.roots, self.tl = a, n, roots, tl
        assert a.loop is not None
        self.loop_body = set(map(id, a.loop.body.body))

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> Any:
        a, n, tl = self.a, self.n, self.tl
        if original is a.row_def or original is a.col_def:
            pid = a.pid if a.form == "split" else f"{tl}.program_id(0)"
            tiles_c = f"{tl}.cdiv({n['n_cols']}, {n['tile_n']})"
            if original is a.row_def:
                v = f"({pid} // {tiles_c} * {n['tile_m']} + {tl}.arange(0, {n['tile_m']}))[:, None]"
            else:
                v = f"({pid} % {tiles_c} * {n['tile_n']} + {tl}.arange(0, {n['tile_n']}))[None, :]"
            return updated.with_changes(value=cst.parse_expression(v))
        if original is a.acc_def:
            v = f"{tl}.zeros(({n['tile_m']}, {n['tile_n']}), dtype={tl}.float32)"
            return updated.with_changes(value=cst.parse_expression(v))
        target = original.targets[0].target
        name = target.value if isinstance(target, cst.Name) else ""
        if name in a.a_side or name in a.b_side:
            axis = 1 if name in a.a_side else 0  # A's tile is [TILE_M, STEP], B's [STEP, TILE_N]
            value = updated.value.visit(_Broadcast(a.k_block, self.roots, axis))
            assert isinstance(value, cst.BaseExpression)
            if original.value is a.a_load:
                assert isinstance(value, cst.Call)
                value = tile_rewrite.masked(value, 1, n["row_ok"])
            elif original.value is a.b_load:
                assert isinstance(value, cst.Call)
                value = tile_rewrite.masked(value, 1, n["col_ok"])
            return updated.with_changes(value=value)
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> Any:
        a, tl = self.a, self.tl
        if a.update is not None and original.body[0] is a.update:
            dot = f'{a.acc} += {tl}.dot({a.a_value}, {a.b_value}, input_precision="ieee")'
            line = cst.parse_statement(dot)
            assert isinstance(line, cst.SimpleStatementLine)
            return updated.with_changes(body=[line.body[0]])
        return updated

    def leave_For(self, original: cst.For, updated: cst.For) -> Any:
        if original is not self.a.loop:
            return updated
        # the padded lanes' masks, after both indices (the loop follows them)
        a, n = self.a, self.n
        lines = [
            f"{n['row_ok']} = {a.row} < {n['n_rows']}",
            f"{n['col_ok']} = {a.col} < {n['n_cols']}",
        ]
        return cst.FlattenSentinel([*map(cst.parse_statement, lines), updated])

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        a = self.a
        if original is a.store:
            args = list(updated.args)
            value = args[1].value.visit(_Replace(a.total, cst.Name(a.acc)))
            assert isinstance(value, cst.BaseExpression)
            args[1] = args[1].with_changes(value=value)
            ok = f"{self.n['row_ok']} & {self.n['col_ok']}"
            return tile_rewrite.masked(updated.with_changes(args=args), 2, ok)
        return updated


class _Replace(cst.CSTTransformer):
    """`old` (by identity, as it was before the walk) replaced by `new`."""

    def __init__(self, old: cst.CSTNode | None, new: cst.BaseExpression) -> None:
        self.old_code = tile_rewrite.code(old) if old is not None else None
        self.new = new

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self.old_code is not None and tile_rewrite.code(original) == self.old_code:
            return self.new
        return updated


def _tile(fixed: Any, count: str, tr: str) -> str:
    if fixed is not None:
        return str(fixed)
    return f"min({MAX_TILE}, max({MIN_TILE}, {tr}.next_power_of_2({count})))"


def rewrite(ctx: Ctx, a: Analysis, p: dict[str, Any]) -> str:
    la = a.launch
    kdef = ctx.kernels[la.kernel]
    tl = tile_rewrite.tl_alias(ctx.module) or f"{_triton_alias(ctx.module)}.language"
    tr = _triton_alias(ctx.module)
    assert tr is not None
    used = set(names_in(kdef)) | {x.name.value for x in kdef.params.params}
    n = {
        k: tile_rewrite.fresh(base, used)
        for k, base in (
            ("n_rows", "n_out_rows"),
            ("n_cols", "n_out_cols"),
            ("tile_m", "TILE_M"),
            ("tile_n", "TILE_N"),
            ("row_ok", f"{a.row}_ok"),
            ("col_ok", f"{a.col}_ok"),
        )
    }
    body = kdef.body.visit(_Kernel(a, n, tl_roots(ctx.module), tl))
    assert isinstance(body, cst.IndentedBlock)
    annotation = tile_rewrite.constexpr(kdef, tl)
    new_params = [
        cst.Param(cst.Name(n["n_rows"])),
        cst.Param(cst.Name(n["n_cols"])),
        cst.Param(cst.Name(n["tile_m"]), annotation=annotation),
        cst.Param(cst.Name(n["tile_n"]), annotation=annotation),
    ]
    params = tile_rewrite.with_params(kdef.params.params, new_params)
    new_kdef = kdef.with_changes(body=body, params=kdef.params.with_changes(params=params))

    launcher = set(names_in(la.func)) | set(assignments(ctx.module))
    tm, tn = (tile_rewrite.fresh(x, launcher) for x in ("TILE_M", "TILE_N"))
    why = (
        "tiles fixed"
        if "tile_m" in p and "tile_n" in p
        else f"{MIN_TILE} to {MAX_TILE} lanes a side, {MIN_TILE} being tl.dot's least"
    )
    comment = (
        f"output_tiling: a program computes a {tm} x {tn} tile of outputs with tl.dot ({why}), "
        "reading A and B once per tile"
    )
    first = cst.parse_statement(f"{tm} = {_tile(p.get('tile_m'), a.row_count, tr)}")
    first = first.with_changes(
        leading_lines=[
            cst.EmptyLine(comment=cst.Comment(f"# {x}")) for x in textwrap.wrap(comment, 86)
        ]
    )
    second = cst.parse_statement(f"{tn} = {_tile(p.get('tile_n'), a.col_count, tr)}")
    grid = cst.parse_expression(
        f"({tr}.cdiv({a.row_count}, {tm}) * {tr}.cdiv({a.col_count}, {tn}),)"
    )
    call = tile_rewrite._with_args(
        tile_rewrite.with_grid(la.call, grid),
        [
            tile_rewrite._kw(n["n_rows"], a.row_count),
            tile_rewrite._kw(n["n_cols"], a.col_count),
            tile_rewrite._kw(n["tile_m"], tm),
            tile_rewrite._kw(n["tile_n"], tn),
        ],
    )
    edit = tile_rewrite.Relaunch(
        la.call,
        lambda _: call,
        lambda st: cst.FlattenSentinel([first, second, st]),
        kdef,
        new_kdef,
    )
    return ctx.module.visit(edit).code


@register
class OutputTiling(ForwardOnly):
    NAME = "output_tiling"
    DESCRIPTION = (
        "Compute a TILE_M x TILE_N tile of a matrix product's outputs per program with tl.dot, "
        "where the kernel computes one output per program as a lane-by-lane dot product over K: "
        "A and B are read once per tile instead of once per output (B along its rows, not down "
        "a column) and the products reach the tensor cores. Few outputs leave few tiles, each "
        "walking all of K: split_k then splits that loop over programs."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    ANCHOR = "one program per output (r, c) of a product: a K loop loading A's row r and B's column c a block at a time into a [STEP] fp32 vector, tl.sum at the store"
    NO_BACKWARD = "undoing a tile would have to read the expert's tl.dot as two loads' product"

    def forward_sites(self, source: str) -> list[Site]:
        return self.launch_sites(
            lambda: analyse(source)[1],
            lambda a: (
                f"{a.kernel}: one program per output of {a.row_count} x {a.col_count}, each a "
                f"dot product over K in steps of {a.step_arg}",
                {"kernel": a.kernel, "rows": a.row_count, "cols": a.col_count, "step": a.step_arg},
            ),
        )

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""
        return tile_rewrite.why_not(self, analyse, source)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}

        def run() -> RewriteResult:
            for key in ("tile_m", "tile_n"):
                v = p.get(key)
                if v is None:
                    continue
                if not (
                    isinstance(v, int)
                    and not isinstance(v, bool)
                    and v >= MIN_TILE
                    and not v & (v - 1)
                ):
                    return RewriteResult.skip(
                        f"params['{key}']={v!r}: expected a power of two >= {MIN_TILE} (tl.dot)",
                        site,
                    )
            ctx, found = analyse(source)
            a = launched(found, site)
            if isinstance(a, RewriteResult):
                return a
            out = rewrite(ctx, a, p)
            return RewriteResult(
                True,
                f"{a.kernel}: a TILE_M x TILE_N tile of the {a.row_count} x {a.col_count} outputs "
                f"per program, reduced with tl.dot (grid cdiv({a.row_count}, TILE_M) * "
                f"cdiv({a.col_count}, TILE_N))",
                out,
                site,
            )

        return self.safe(run)

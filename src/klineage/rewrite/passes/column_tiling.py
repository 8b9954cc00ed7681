"""A 2-D tiled column reduction for a one-column-per-program kernel: BLOCK_N columns a program.

A naive column reduction (sum, mean, max over dim 0, a softmax down the columns) launches
`kernel[(n_cols,)]`, and each program walks down its column B rows a step: every load gathers
B elements a row pitch apart (one useful element per 32-byte sector) and n_cols programs each
make n_rows / B dependent steps (issue 16: 49x slower than torch.compile at 16384 rows).

Backward, in an expert's shape (column_tiling_expert.py): the launcher variable that sets a
column-tiled kernel's columns per program (the colsum expert's BLOCK_N) becomes 1, and forward
at such a `= 1` restores the expert's expression. Forward on a naive kernel: the kernel takes
`n_cols` and `BLOCK_N: tl.constexpr`; its program's column becomes the row vector
`(tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]` (the original name keeps its
`.to(tl.int64)`), every `tl.arange` a column vector `[:, None]`, every 1-D reduction
`axis=0, keep_dims=True`, 1-D `tl.zeros`/`tl.full` shapes (B, BLOCK_N), and a carried
accumulator started from a literal `tl.full((1, BLOCK_N), literal, dtype)` (a loop-carried value
keeps one type in compiled Triton). So a per-column scalar is [1, BLOCK_N] and a row step is a
[B, BLOCK_N] tile, coalesced along the row-major inner dimension. Every load or store whose
pointer, mask or value depends on the column gets `& col_ok` (cols < n_cols). The launcher
computes BLOCK_N = min(MAX_BLOCK_N, max(1, TILE // B), next_power_of_2(n_cols)) (TILE 4096 and
MAX_BLOCK_N 256 as the colsum expert; params["tile"], params["max_block_n"], or
params["block_n"] fixed) and launches cdiv(n_cols, BLOCK_N) programs.

Why it is sound: after the rewrite a program's columns only meet in reductions along axis 0
(the rows), everything else broadcasts lane by lane, so each column computes what its own
program computed, in the same order (the kernel's own blocking, so the same rounding); columns
past n_cols compute on masked values and store nothing. The analysis that proves the shape and
skips everything else with its reason is column_tiling_analysis.py; the rewrite is multi_row's
along the other axis (tile_rewrite.py), with the accumulator starts widened.
"""

from __future__ import annotations

from typing import Any

from klineage.rewrite.base import RewritePass, RewriteResult, Site
from klineage.rewrite.passes import tile_rewrite
from klineage.rewrite.passes.column_tiling_analysis import analyse
from klineage.rewrite.passes.column_tiling_expert import column_blocks, replaced
from klineage.rewrite.passes.rows_per_program import Ctx
from klineage.rewrite.registry import register

TILE = 4096  # elements per [B, BLOCK_N] tile, the colsum expert's TILE_ELEMENTS
MAX_BLOCK_N = 256  # the colsum expert's: 512 contiguous bf16 bytes a row, four full lines
COLUMNS = tile_rewrite.Tiling(
    "column_tiling",
    axis=1,
    index="cols",
    ok="col_ok",
    block="BLOCK_N",
    count="n_cols",
    fixed="block_n",
    cap_key="max_block_n",
    tile=TILE,
    cap=MAX_BLOCK_N,
    shape="[rows, BLOCK_N]",
    own="row block",
    unit="columns",
    effect="loads coalesced along the columns",
    done="BLOCK_N columns per program",
)


@register
class ColumnTiling(RewritePass):
    NAME = "column_tiling"
    DESCRIPTION = (
        "Turn a one-column-per-program reduction (grid (n_cols,), a serial loop down the column) "
        "into one where each program owns BLOCK_N adjacent columns and loads [rows, BLOCK_N] "
        "tiles coalesced along the row-major inner dimension (columns a row vector, aranges "
        "[:, None], reductions axis=0; masks & cols < n_cols; grid cdiv(n_cols, BLOCK_N))."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    ANCHOR = "one-column-per-program launch kernel[(n_cols,)] of a kernel adding its program id to pointers with unit stride"

    def _blocks(self, source: str, one: bool, direction: str) -> list[Site]:
        def run() -> list[Site]:
            found = [b for b in column_blocks(Ctx(source)) if (b.value == "1") == one]
            return [
                self.site(
                    direction,
                    i,
                    b.line,
                    b.func.name.value,
                    f"{b.name}={b.value}: columns per program of {', '.join(b.kernels)}",
                    kind="columns",
                    name=b.name,
                    value=b.value,
                )
                for i, b in enumerate(found)
            ]

        return self.safe_sites(run)

    def backward_sites(self, source: str) -> list[Site]:
        return self._blocks(source, one=False, direction="backward")

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            ctx = Ctx(source)
            b = next(
                (
                    x
                    for x in column_blocks(ctx)
                    if x.name == site.params.get("name")
                    and x.func.name.value == site.function
                    and x.value != "1"
                ),
                None,
            )
            if b is None:
                return RewriteResult.skip(f"no column block {site.params.get('name')} here", site)
            return RewriteResult(
                True,
                f"{b.name} = 1: one column per program of {', '.join(b.kernels)}",
                replaced(ctx, b, "1"),
                site,
            )

        return self.safe(run)

    def forward_sites(self, source: str) -> list[Site]:
        naive = self.safe_sites(
            lambda: tile_rewrite.sites(self, COLUMNS, analyse(source)[1], lambda a: a.cols)
        )
        restore = self._blocks(source, one=True, direction="forward")
        n = len(naive)
        return naive + [
            Site(x.pass_name, x.direction, n + x.index, x.line, x.function, x.description, x.params)
            for x in restore
        ]

    def _restore(self, source: str, site: Site, p: dict[str, Any]) -> RewriteResult:
        """Forward in the expert's shape: NAME = 1 back to the expert's expression."""
        value = p.get("value")
        if not isinstance(value, str) or value == "1":
            return RewriteResult.skip(
                f"{site.params.get('name')} = 1: the columns per program to restore are not "
                "given (params['value'])",
                site,
            )
        ctx = Ctx(source)
        b = next(
            (
                x
                for x in column_blocks(ctx)
                if x.name == site.params.get("name")
                and x.func.name.value == site.function
                and x.value == "1"
            ),
            None,
        )
        if b is None:
            return RewriteResult.skip(f"no column block {site.params.get('name')} = 1 here", site)
        return RewriteResult(
            True, f"{b.name} = {value}: columns per program", replaced(ctx, b, value), site
        )

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""
        return tile_rewrite.why_not(self, analyse, source)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}
        if site.params.get("kind") == "columns":
            return self.safe(self._restore, source, site, p)
        return tile_rewrite.apply(self, COLUMNS, analyse, source, site, p, lambda a: a.cols)

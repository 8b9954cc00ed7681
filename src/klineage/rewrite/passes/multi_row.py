"""Several rows per program for a one-row-per-program kernel: rows become a column vector.

A naive row kernel (softmax, norms, log-sum-exp, a per-row loss) launches `kernel[(n_rows,)]`
and gives each program one row in one block `tl.arange(0, BLOCK)`. At short rows most of a
program idles: on the H200 an expert's several-rows-per-program kernel ran 6.2x faster at
65536x16, 4.5x at 65536x64 and 1.5x at 16384x256, and about 1.0x from 1024 columns up.

Forward only (rows_per_program's backward works on the expert's shape). The kernel takes
`ROWS: tl.constexpr` and the row count; its program's row becomes the column vector
`(tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]` (the original name keeps its
`.to(tl.int64)`), every `tl.arange` a row vector `[None, :]`, every 1-D reduction
`axis=1, keep_dims=True`, every 1-D scan (tl.cumsum, tl.cumprod) `axis=1`, and 1-D
`tl.zeros`/`tl.full` shapes (ROWS, B). So a value that was a scalar per row is [ROWS, 1] and a
row is [ROWS, B]; values that do not depend on the row (the weight, its load) stay [1, B] and
are shared by the program's rows. A row walked in chunks (a loop over range(...) whose bounds
do not depend on the row) keeps its loop; a per-row value it carries from a literal start
(`carried = 0.0`) starts as `tl.full((ROWS, 1), 0.0, tl.float32)`, one per row. Every load or
store whose pointer, mask or value depends on the row gets `& row_ok` (rows < n_rows): ROWS
need not divide the row count. The launcher computes ROWS = min(MAX_ROWS, max(1, TILE //
BLOCK), next_power_of_2(n_rows), next_power_of_2(max(1, n_rows // (2 * PROGRAMS)))) (TILE
4096, or SCAN_TILE 256 and no programs floor for a row walked in chunks into a scan; MAX_ROWS
64, PROGRAMS 528; params["tile"], params["max_rows"], params["programs"] (0: no floor), or
params["rows"] fixed; params["scale"], a power of two, multiplies the default rows a
program) and launches cdiv(n_rows, ROWS) programs: short rows are packed where
rows are many, and a few long rows keep one program each.

Why it is sound: after the rewrite a program's rows only meet in reductions and scans along
axis 1, and everything else broadcasts lane by lane, so each row computes what its own program
computed; a loop runs the same iterations for every row (its bounds do not depend on the row)
and carries per-row values only as accumulators (every update reads the value itself, as
column_tiling_analysis checks); rows past n_rows compute on masked (undefined) values and store
nothing. Nothing here reads
what a "row" means: a 1-D blocked elementwise kernel (offs = pid * BLOCK + arange) is a site
too and becomes ROWS blocks a program, which the gate then times like any other candidate.

The rewrite is sound only for code whose operations broadcast, so a kernel is skipped, with
the reason, for: if/with/return, a loop that is not a top-level range(...) or while loop with
simple statements, a loop whose bounds depend on the row, a per-row value a loop carries that
is not an accumulator, indexing (a 2-D tile already), program ids other than axis 0 or
tl.num_programs, atomics, tl.dot, any tl function that is not elementwise, a known reduction
or tl.cumsum/tl.cumprod (associative scans, reshapes, softmax...), a helper that is not elementwise, a
reduction or scan with an axis other than 0 or with return_indices/keep_dims, several block
sizes, a store whose pointer does not depend on the row, a grid that is not a literal 1-tuple,
a kernel launched from several places, autotuned, or with parameter defaults. That analysis is
multi_row_analysis.py; the rewrite of the kernel and its launcher, shared with column_tiling
(the same tiling along the other axis), is tile_rewrite.py.
"""

from __future__ import annotations

from typing import Any

from klineage.rewrite.base import RewritePass, RewriteResult, Site
from klineage.rewrite.passes import tile_count, tile_rewrite
from klineage.rewrite.passes.multi_row_analysis import analyse
from klineage.rewrite.registry import register

TILE = 4096  # elements per [ROWS, BLOCK] tile, the expert's choice (6.2x at 65536x16)
MAX_ROWS = 64
# The default ROWS leaves at least about this many programs (4 per SM of an H100 / H200, 132
# SMs, split_k's aim): packing the 384 long rows of a row scan 64 a program would leave 6.
PROGRAMS = 4 * 132
# A row walked in chunks carrying per-row totals into a scan (the reverse cumsum's naive,
# CHUNK 64) packs best at a few rows: side by side with its naive start on the H200, at
# 524288 x 160 fp16, 4 rows a program (256 elements) ran 2.66x, 2 rows 1.87x, 16 rows 1.07x,
# 32 rows 0.55x; on an H100, 8 rows 2.33x, 64 rows (TILE) 0.50x, 1 row 0.12x. Without the
# programs floor: its 384 rows of 200000 ran 0.42x at 1 row a program (the floor's choice, H100),
# 0.97x at 2 and 0.89x at 4 (H200) (docs/benchmarks.md, "Rows per program for a row scan").
SCAN_TILE = 256
ROWS = tile_rewrite.Tiling(
    "multi_row",
    axis=0,
    index="rows",
    ok="row_ok",
    block="ROWS",
    count="n_rows",
    fixed="rows",
    cap_key="max_rows",
    tile=TILE,
    cap=MAX_ROWS,
    shape="[ROWS, BLOCK]",
    own="block",
    unit="rows",
    effect="short rows fill a program",
    done="several rows per program",
    programs=PROGRAMS,
    scan_tile=SCAN_TILE,
)


@register
class MultiRow(RewritePass):
    NAME = "multi_row"
    DESCRIPTION = (
        "Turn a one-row-per-program kernel (grid (n_rows,), one tl.arange block, 1-D reductions) "
        "into one that handles ROWS rows per program as a [ROWS, BLOCK] tile (rows a column "
        "vector, reductions axis=1, masks & rows < n_rows; grid cdiv(n_rows, ROWS)): short "
        "rows fill a program instead of leaving most lanes idle."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    ANCHOR = "one-row-per-program launch kernel[(n_rows,)] of a loop-free row kernel"

    def backward_sites(self, source: str) -> list[Site]:
        return []  # rows_per_program's backward works on the expert's shape

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return RewriteResult.skip("multi_row is forward only: rows_per_program sets rows to 1")

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(
            lambda: tile_rewrite.sites(self, ROWS, analyse(source)[1], lambda a: a.rows)
        )

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""
        return tile_rewrite.why_not(self, analyse, source)

    def scaled(self, params: dict[str, Any], factor: float) -> dict[str, Any] | None:
        return tile_count.scaled(ROWS, params, factor)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}
        return tile_rewrite.apply(self, ROWS, analyse, source, site, p, lambda a: a.rows)

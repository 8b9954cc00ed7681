"""rewrite/grid.py: the number of programs a kernel file launches, read from its launcher
without running it (no kernels run), on launchers written for these tests and on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.optimize.materialize import mechanical
from klineage.rewrite.grid import programs
from tests.conftest import KERNELS, ROOT

HELDOUT = ROOT / "src" / "klineage" / "heldout"

TWO_D = """
import torch, triton
import triton.language as tl

BLOCK = 64

@triton.jit
def _k(x_ptr, y_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass

def _launch(x, y, block_m):
    rows, cols = x.shape
    grid = (triton.cdiv(rows, block_m), triton.cdiv(cols, BLOCK))
    _k[grid](x, y, rows, cols, BLOCK_M=block_m, BLOCK_N=BLOCK)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous().view(-1, x.shape[-1])
        y = torch.empty_like(x)
        self._go(x, y)
        return y

    def _go(self, x, y):
        _launch(x, y, 32 if x.shape[1] > 128 else 16)
"""

META = """
import torch, triton

def forward(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]), META["SPLIT"])
    _mm[grid](a, b, c, M, N, K, BLOCK_M=16, BLOCK_N=32, SPLIT=min(8, K // 1024))
    _fix[(triton.cdiv(M, 64),)](c, N)
    return c
"""


def test_a_grid_is_counted_through_methods_helpers_branches_and_views() -> None:
    # 3-D input viewed as rows: 6 x 10 rows of 300 columns; 300 > 128, so BLOCK_M = 32.
    assert programs(TWO_D, [[6, 10, 300]]) == 2 * 5  # cdiv(60, 32) * cdiv(300, 64)
    assert programs(TWO_D, [[4096, 100]]) == 256 * 2  # cdiv(4096, 16) * cdiv(100, 64)


def test_a_grid_lambda_reads_the_launch_keywords_and_the_largest_launch_counts() -> None:
    # 16 x 32 outputs, K = 65536: one tile, split 8 ways; the fix-up launch has 1 program.
    assert programs(META, [[16, 65536], [65536, 32]]) == 8
    # 512 rows: 32 row tiles, split min(8, 2) ways; the fix-up launch (8 programs) is smaller
    assert programs(META, [[512, 2048], [2048, 32]]) == 32 * 2


@pytest.mark.parametrize(
    "source",
    [
        # a loop of launches: how many run is not read
        "def forward(x):\n    for i in range(4):\n        _k[(x.shape[0],)](x)\n",
        # a branch on what is not known (a tensor's values)
        "def forward(x):\n    if x.sum() > 0:\n        _k[(x.shape[0],)](x)\n",
        # a grid from a function it cannot see into
        "import os\ndef forward(x):\n    _k[(os.cpu_count(),)](x)\n",
        # no launch at all, no forward, not Python
        "def forward(x):\n    return x + 1\n",
        "def other(x):\n    _k[(1,)](x)\n",
        "def forward(x:\n",
    ],
)
def test_what_cannot_be_read_is_unknown_never_a_guess(source: str) -> None:
    assert programs(source, [[128, 64]]) is None


def test_a_launcher_is_read_never_run(tmp_path: Path) -> None:
    # Only calling forward writes `ran` (defining it does not). Reading it sees an unknown call
    # whose value no launch needs, passes over it, and counts the launch after it.
    ran = tmp_path / "forward-was-run"
    hostile = f"def forward(x):\n    open({str(ran)!r}, 'w').write('x')\n    _k[(x.shape[0],)](x)\n"
    assert programs(hostile, [[8, 8]]) == 8
    assert not ran.exists()
    # A loop that never ends is read as unknown, not run.
    assert programs("def forward(x):\n    while True:\n        pass\n", [[8, 8]]) is None


def test_the_naive_column_kernels_and_their_tiled_forms() -> None:
    # One program per column; column tiling turns them into a few column blocks, the count a
    # split over rows is then judged on.
    naive = (HELDOUT / "column_max_bf16" / "naive.py").read_text()
    assert programs(naive, [[16384, 384]]) == 384
    tiled = mechanical(naive, "column_tiling").source
    assert tiled is not None
    n = programs(tiled, [[16384, 384]])
    assert n is not None and n < 384 / 8, n
    colsum = (KERNELS / "colsum" / "naive.py").read_text()
    assert programs(colsum, [[65536, 32]]) == 32

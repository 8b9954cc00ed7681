"""scan_dot's helper scans by tl.dot in the interpreter as tl.cumsum does (fp16 tiles by one
product or by blocks, 1-D chunks by blocks, both directions; fp32 and tiles under 256 elements
through tl.cumsum), and its
rewrite of the reverse cumsum at 16 rows a program passes the real gate, whose fp16 regime
takes the product. bf16 is not checked here: the interpreter computes it wrongly
(../shared/TRITON_CPU.md); the GPU gate checks it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from klineage.gate import run_gate
from klineage.optimize.materialize import mechanical
from klineage.rewrite.passes.scan_dot import HELPER, HELPER_SOURCE

pytestmark = pytest.mark.interpreter

PROBLEM = (
    Path(__file__).resolve().parents[2] / "src" / "klineage" / "heldout" / "reverse_cumsum_rows"
)

KERNELS = (
    "import triton\nimport triton.language as tl\n"
    + HELPER_SOURCE
    + f"""

@triton.jit
def tile(x, y, R: tl.constexpr, C: tl.constexpr, REVERSE: tl.constexpr):
    at = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(y + at, {HELPER}(tl.load(x + at), 1, REVERSE))


@triton.jit
def chunk(x, y, C: tl.constexpr, REVERSE: tl.constexpr):
    at = tl.arange(0, C)
    tl.store(y + at, {HELPER}(tl.load(x + at), 0, REVERSE))
"""
)


def _load(tmp: Path, text: str) -> dict:
    path = tmp / "kernels.py"
    path.write_text(text)
    space: dict = {}
    exec(compile(text, str(path), "exec"), space)  # triton.jit reads the file for source
    return space


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _load(tmp_path_factory.mktemp("scan_dot"), KERNELS)


# The helper with strict triangles (an exclusive scan where it multiplies): wrong exactly where
# the product is taken, so which path each shape takes is seen, not assumed.
STRICT = KERNELS.replace("k[:, None] >= k[None, :]", "k[:, None] > k[None, :]").replace(
    "k[:, None] <= k[None, :]", "k[:, None] < k[None, :]"
)


@pytest.mark.parametrize(
    "shape,product",
    [((16, 64), True), ((4, 64), True), ((16, 256), True), ((2, 64), False), ((1024,), True)],
)
def test_the_product_is_taken_where_the_shape_allows(tmp_path: Path, shape, product) -> None:
    assert STRICT != KERNELS
    strict = _load(tmp_path, STRICT)
    x = torch.randn(shape).to(torch.float16)
    y = torch.empty(shape, dtype=torch.float32)
    if len(shape) == 2:
        strict["tile"][(1,)](x, y, R=shape[0], C=shape[1], REVERSE=True)
    else:
        strict["chunk"][(1,)](x, y, C=shape[0], REVERSE=True)
    exact = torch.allclose(y, _expected(x, True), rtol=1e-5, atol=1e-4)
    assert exact != product


def _expected(x: torch.Tensor, reverse: bool) -> torch.Tensor:
    xf = x.float()
    return xf.flip(-1).cumsum(-1).flip(-1) if reverse else xf.cumsum(-1)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((16, 64), torch.float16),  # one product by a 64 x 64 triangle
        ((4, 64), torch.float16),  # blocks of 16 lanes: a [16, 16] product, then the blocks' totals
        ((16, 256), torch.float16),  # blocks of 64 lanes (a 256 x 256 triangle is too large)
        ((2, 64), torch.float16),  # 128 elements: tl.cumsum
        ((16, 64), torch.float32),  # fp32: tl.cumsum
    ],
)
def test_a_tile_scans_as_tl_cumsum(kernels: dict, shape, dtype, reverse: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    y = torch.empty(shape, dtype=torch.float32)
    kernels["tile"][(1,)](x, y, R=shape[0], C=shape[1], REVERSE=reverse)
    torch.testing.assert_close(y, _expected(x, reverse), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize(
    "n,dtype",
    [(1024, torch.float16), (256, torch.float16), (128, torch.float16), (1024, torch.float32)],
)
def test_a_chunk_scans_as_tl_cumsum(kernels: dict, n: int, dtype, reverse: bool) -> None:
    torch.manual_seed(1)
    x = torch.randn(n).to(dtype)
    y = torch.empty(n, dtype=torch.float32)
    kernels["chunk"][(1,)](x, y, C=n, REVERSE=reverse)
    torch.testing.assert_close(y, _expected(x, reverse), rtol=1e-5, atol=1e-4)


def test_the_reverse_cumsum_at_16_rows_a_program_is_accepted(tmp_path: Path) -> None:
    source = (PROBLEM / "naive.py").read_text()
    for step, params in [("multi_row", {"rows": 16}), ("ascending_scan", {}), ("scan_dot", {})]:
        m = mechanical(source, step, params)
        assert m.source is not None, m.reason
        source = m.source
    assert f"{HELPER}(v_in, 1, True)" in source
    cand = tmp_path / "scan_dot.py"
    cand.write_text(source)
    result = run_gate(PROBLEM / "problem.py", cand, device="cpu", regimes=["fp16", "ragged"])
    assert result.accepted, result.message
    # the same kernel with the triangle the wrong way round (a prefix sum) is refused
    wrong = tmp_path / "wrong.py"
    wrong.write_text(source.replace(f"{HELPER}(v_in, 1, True)", f"{HELPER}(v_in, 1, False)"))
    assert not run_gate(PROBLEM / "problem.py", wrong, device="cpu", regimes=["fp16"]).accepted


@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul:RuntimeWarning")
def test_an_inf_spreads_nan_where_the_product_is_taken(kernels: dict) -> None:
    """The limit the pass documents: inf * 0 is NaN, so a prefix sum by the product makes NaN
    of the lanes before an inf, which tl.cumsum leaves finite (the gate draws finite inputs)."""
    x = torch.ones(16, 64).to(torch.float16)
    x[3, 40] = float("inf")
    y = torch.empty(16, 64, dtype=torch.float32)
    kernels["tile"][(1,)](x, y, R=16, C=64, REVERSE=False)
    expected = _expected(x, False)
    assert torch.isfinite(expected[3, :40]).all()
    assert torch.isnan(y[3, :40]).all()
    torch.testing.assert_close(y[4:], expected[4:])  # rows without an inf are untouched

"""scan_dot's helpers scan by tl.dot in the interpreter as tl.cumsum does (fp16 tiles by one
product or by blocks, 1-D chunks by blocks, both directions; fp32 and tiles under 1024 elements
through tl.cumsum), and its rewrite of the reverse cumsum at 16 rows a program passes the real
gate, whose fp16 regime takes the product. bf16 is not checked here: the interpreter computes it
wrongly (../shared/TRITON_CPU.md); the GPU gate checks it. The kernels run in one child with
TRITON_INTERPRET=1 (tests/conftest.py `interpreted`): CI's pytest imports triton without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from klineage.gate import run_gate
from klineage.optimize.materialize import mechanical
from klineage.rewrite.passes.scan_dot import HELPER, HELPER_SOURCE
from tests.conftest import interpreted

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
# The helpers with strict triangles (an exclusive scan where they multiply): wrong exactly where
# the product is taken, so which path each shape takes is seen, not assumed.
STRICT = KERNELS.replace("k[:, None] >= k[None, :]", "k[:, None] > k[None, :]").replace(
    "k[:, None] <= k[None, :]", "k[:, None] < k[None, :]"
)

# In the child: each case's kernels (the helpers as written, or strict), shape, dtype and
# direction, run on seeded random values; whether the result is tl.cumsum's, and for the inf
# case where the NaNs are.
CHILD = """
import json, sys, tempfile, warnings
from pathlib import Path
import torch

warnings.simplefilter("ignore")  # inf * 0 in the interpreter's matmul
cases = json.loads(sys.argv[1])
spaces = {}
for name, text in json.loads(sys.argv[2]).items():
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(text)
    spaces[name] = {}
    exec(compile(text, str(path), "exec"), spaces[name])  # triton.jit reads the file

def expected(x, reverse):
    xf = x.float()
    return xf.flip(-1).cumsum(-1).flip(-1) if reverse else xf.cumsum(-1)

out = {}
for key, (kernels, shape, dtype, reverse) in cases.items():
    torch.manual_seed(0)
    x = torch.randn(shape).to(getattr(torch, dtype))
    if key == "inf":
        x = torch.ones(shape).to(getattr(torch, dtype))
        x[3, 40] = float("inf")
    y = torch.empty(shape, dtype=torch.float32)
    space = spaces[kernels]
    if len(shape) == 2:
        space["tile"][(1,)](x, y, R=shape[0], C=shape[1], REVERSE=reverse)
    else:
        space["chunk"][(1,)](x, y, C=shape[0], REVERSE=reverse)
    want = expected(x, reverse)
    row = {"same": bool(torch.allclose(y, want, rtol=1e-5, atol=1e-4))}
    if key == "inf":
        row["expected_finite_before"] = bool(torch.isfinite(want[3, :40]).all())
        row["nan_before"] = bool(torch.isnan(y[3, :40]).all())
        row["other_rows_same"] = bool(torch.allclose(y[4:], want[4:], rtol=1e-5, atol=1e-4))
    out[key] = row
print(json.dumps(out))
"""

TILES = [  # shape, dtype, takes the product
    ((16, 64), "float16", True),  # one product by a 64 x 64 triangle
    ((4, 64), "float16", False),  # 256 elements: tl.cumsum (blocks of 16 lanes lost, H100)
    ((16, 128), "float16", True),  # one product by a 128 x 128 triangle
    ((8, 128), "float16", True),  # 1024 elements: blocks of 64 lanes
    ((16, 256), "float16", True),  # blocks of 64 lanes (a 256 x 256 triangle is too large)
    ((2, 64), "float16", False),  # 128 elements: tl.cumsum
    ((16, 64), "float32", False),  # fp32: tl.cumsum
    ((1024,), "float16", True),  # a chunk: a tile of one row, by blocks of 64
    ((256,), "float16", False),  # under 1024 elements: tl.cumsum
    ((128,), "float16", False),
    ((1024,), "float32", False),
]


def _key(shape: tuple[int, ...], dtype: str, reverse: bool, kernels: str = "helpers") -> str:
    return f"{kernels}:{'x'.join(map(str, shape))}:{dtype}:{'reverse' if reverse else 'forward'}"


@pytest.fixture(scope="module")
def results() -> dict:
    cases: dict = {}
    for shape, dtype, _ in TILES:
        for reverse in (False, True):
            for kernels in ("helpers", "strict"):
                cases[_key(shape, dtype, reverse, kernels)] = (kernels, shape, dtype, reverse)
    cases["inf"] = ("helpers", (16, 64), "float16", False)
    assert STRICT != KERNELS
    return interpreted(CHILD, json.dumps(cases), json.dumps({"helpers": KERNELS, "strict": STRICT}))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,dtype,product", TILES)
def test_a_tile_or_chunk_scans_as_tl_cumsum(results: dict, shape, dtype, product, reverse) -> None:
    assert results[_key(shape, dtype, reverse)]["same"]
    # strict triangles change the result exactly where the product is taken
    assert results[_key(shape, dtype, reverse, "strict")]["same"] != product


def test_an_inf_spreads_nan_where_the_product_is_taken(results: dict) -> None:
    """The limit the pass documents: inf * 0 is NaN, so a prefix sum by the product makes NaN
    of the lanes before an inf, which tl.cumsum leaves finite (the gate draws finite inputs)."""
    row = results["inf"]
    assert row["expected_finite_before"] and row["nan_before"] and row["other_rows_same"]


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

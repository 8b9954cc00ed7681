"""split_scan on the held-out reverse cumsum naive, run: through the CPU gate, and directly.

The ragged regime (M=4, N=300 = 4 * 64 + 44) at segments=3 and the naive's step (chunk=0:
the default would widen the step to 512, one step a row, and no split): cdiv(300, 64) = 5
steps a row, seg_len = 64 * cdiv(5, 3) = 128, SEG = cdiv(300, 128) = 3 segments of 2, 2 and
1 steps, the last step's chunk partial (columns 0-43 of a row walked from its end). The gate (~10-20 s here)
accepts it, and rejects a variant whose segments start from one total too many (the prefix
mask `<= seg`), so the test can fail. The direct run executes the rewritten module for
segments 1 (no totals kernel: the original loop), 2 and 3 at a ragged size in one
subprocess under the interpreter, against the problem's reference Model in float64, and the
default (widened) step at 9000 columns: steps of 4096, 3 segments of one step each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.rewrite import all_passes
from tests.conftest import ROOT, in_gated_folder

pytestmark = pytest.mark.interpreter

REVERSE = ROOT / "src" / "klineage" / "heldout" / "reverse_cumsum_rows"


def _applied(segments: int, chunk: int = 0) -> str:
    p = all_passes()["split_scan"]
    source = (REVERSE / "naive.py").read_text(encoding="utf-8")
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, {"segments": segments, "chunk": chunk})
    assert r.applied and r.source is not None, r.reason
    return r.source


def _verdict(source: str, name: str, regimes: list[str]) -> str:
    """ "" if the CPU gate accepts source for the reverse cumsum, else its message. The
    candidate is written as `name` in the session's one folder of gated candidates (its warm
    sandbox shared); the interpreter runs programs one after another, so a call gets 300 s."""
    config = GateConfig(cache=False, timeout_s=300.0)
    path = in_gated_folder(source, name)
    v = run_gate(REVERSE / "problem.py", path, device="cpu", regimes=regimes, config=config)
    return "" if v.accepted else v.message


def test_the_gate_accepts_split_scan_on_the_ragged_reverse_cumsum() -> None:
    out = _applied(3)
    assert "        SEG = 3\n" in out
    assert _verdict(out, "split_scan_reverse_cumsum3.py", ["ragged"]) == ""


def test_the_gate_rejects_segments_started_from_one_total_too_many() -> None:
    out = _applied(3)
    broken = out.replace("mask=earlier < seg,", "mask=earlier <= seg,")
    assert broken != out
    why = _verdict(broken, "split_scan_reverse_cumsum3_broken.py", ["ragged"])
    assert "correctness: ragged" in why, why


# Under TRITON_INTERPRET=1 from its start, apart from this process (a triton.language imported
# without it cannot run kernels in the interpreter).
RUN = """
import importlib.util, json, sys
import torch

torch.manual_seed(0)
spec = importlib.util.spec_from_file_location("problem", sys.argv[1])
problem = importlib.util.module_from_spec(spec)
spec.loader.exec_module(problem)
errors = {}
n = int(sys.argv[2])
for path in sys.argv[3:]:
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(3, n)
    y = module.ModelNew()(x)
    exact = torch.flip(torch.cumsum(torch.flip(x.double(), [-1]), -1), [-1])
    assert y.shape == x.shape and y.dtype == x.dtype
    errors[path] = [(y.double() - exact).abs().max().item(),
                    (problem.Model()(x).double() - exact).abs().max().item()]
print(json.dumps(errors))
"""


def _errors(tmp_path: Path, n: int, sources: dict[str, str]) -> dict[str, list[float]]:
    paths = []
    for name, out in sources.items():
        paths.append(tmp_path / f"{name}.py")
        paths[-1].write_text(out, encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(REVERSE / "problem.py"), str(n), *map(str, paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(errors) == sorted(map(str, paths))
    return errors


def test_the_rewritten_scan_matches_the_reference_at_1_2_and_3_segments(tmp_path: Path) -> None:
    sources = {f"reverse_split{s}": _applied(s) for s in (1, 2, 3)}
    for path, (ours, reference) in _errors(tmp_path, 300, sources).items():
        # 300 fp32 additions of N(0, 1) values (sums of magnitude ~17): a few ulps, as the
        # reference's own fp32 cumsum; a dropped or doubled segment total would be ~1 off
        assert ours < 1e-4 and reference < 1e-4, (path, ours, reference)


def test_the_widened_step_matches_the_reference_in_three_segments(tmp_path: Path) -> None:
    out = _applied(3, chunk=4096)
    assert "SCAN_STEP = max(64, min(4096, triton.next_power_of_2(n)))" in out
    broken = out.replace("mask=earlier < seg,", "mask=earlier <= seg,")
    errors = _errors(tmp_path, 9000, {"wide": out, "wide_broken": broken})
    ours, reference = errors[str(tmp_path / "wide.py")]
    # 9000 additions (sums of magnitude ~95): fp32 rounding, well under a dropped total's ~1
    assert ours < 1e-3 and reference < 1e-3, (ours, reference)
    assert errors[str(tmp_path / "wide_broken.py")][0] > 1e-2  # a doubled total is seen

"""block_scan's two rewrites run, without the gate: the serial running-sum kernel of
tests/unit/test_block_scan.py and the cumsum corpus naive, rewritten at BLOCK_N = 16 (5 rows of
37 columns: three blocks a row, the last with 11 masked lanes), executed by the Triton
interpreter in one subprocess (~3 s) and compared with torch.cumsum in float64."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from klineage.rewrite.passes.block_scan import BlockScan
from tests.conftest import ROOT
from tests.unit.test_block_scan import SERIAL

pytestmark = pytest.mark.interpreter

RUN = """
import importlib.util, json, sys
import torch

torch.manual_seed(0)
errors = {}
for path, fn in [(sys.argv[1], "row_cumsum"), (sys.argv[2], "cumsum_forward")]:
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randn(5, 37)
    y = getattr(module, fn)(x)
    errors[fn] = (y.double() - torch.cumsum(x.double(), dim=-1)).abs().max().item()
print(json.dumps(errors))
"""


def _rewritten(source: str) -> str:
    p = BlockScan()
    (site,) = p.forward_sites(source)
    r = p.apply(source, site, {"block_n": 16})
    assert r.applied and r.source is not None, r.reason
    return r.source


def test_the_rewritten_scans_match_torch_cumsum(tmp_path: Path) -> None:
    naive = (ROOT / "src" / "klineage" / "kernels" / "cumsum" / "naive.py").read_text("utf-8")
    serial, tile = tmp_path / "serial.py", tmp_path / "tile.py"
    serial.write_text(_rewritten(SERIAL), encoding="utf-8")
    tile.write_text(_rewritten(naive), encoding="utf-8")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(serial), str(tile)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    # 37 fp32 additions of N(0, 1) values: a few ulps of a sum of magnitude ~6
    assert errors["row_cumsum"] < 1e-5 and errors["cumsum_forward"] < 1e-5, errors

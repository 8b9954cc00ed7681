"""Errors inside a kernel name the candidate's file and line (issue 17 item 2): Triton's
interpreter re-raises a kernel body's error as InterpreterError; the harness follows the cause
to the kernel's own line."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from tests.conftest import EXAMPLE

pytestmark = pytest.mark.interpreter


def test_a_shape_error_in_the_kernel_body_names_the_line(tmp_path: Path) -> None:
    src = (EXAMPLE / "candidate.py").read_text()
    bad = src.replace(
        "    num = tl.exp(x)\n", "    num = tl.exp(x) + tl.zeros((2, BLOCK), dtype=tl.float32)\n"
    )
    assert bad != src
    cand = tmp_path / "shapes.py"
    cand.write_text(bad)
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "tl.store(" in text)
    r = run_gate(
        EXAMPLE / "problem.py",
        cand,
        device="cpu",
        regimes=["tiny_rows"],
        config=GateConfig(cache=False),
    )
    assert not r.accepted and r.failed_stage is not None and r.failed_stage.value == "compile"
    assert f"shapes.py:{line}: first call on regime tiny_rows: InterpreterError" in r.message, (
        r.message
    )
    assert "tl.store(" in r.message  # the source line itself

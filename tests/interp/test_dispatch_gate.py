"""Regime dispatch through the CPU gate (optimize/dispatch.py): both paths of a combined file
run on the regimes the split sends them, both are checked, and a parametrized model keeps its
parameters on the alternative's path. The splits here sit between the CPU regimes so that each
path runs on one of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import run_gate
from klineage.gate.records import Stage
from klineage.optimize.dispatch import Split, combine
from tests.conftest import ROOT
from tests.unit.test_dispatch import _multi_row  # the packed file, ROWS fixed

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"


def _kernels(verdict: object) -> dict[str, list[str]]:
    stage = next(s for s in verdict.stages if s.stage is Stage.CORRECTNESS)  # type: ignore[attr-defined]
    return {o.regime: o.kernels for o in stage.regimes}


def _gate(tmp_path: Path, problem: str, source: str) -> object:
    candidate = tmp_path / "dispatch.py"
    candidate.write_text(source, encoding="utf-8")
    return run_gate(
        HELDOUT / problem / "problem.py", candidate, device="cpu", config=GateConfig(cache=False)
    )


def test_each_path_runs_where_the_split_sends_it_and_both_are_checked(tmp_path: Path) -> None:
    naive, packed = _multi_row("reverse_cumsum_rows", 2)
    # tiny (45 columns) and fp16 (200) to the packed kernel, ragged (300) and long (9000) to
    # the naive one
    both = combine(naive, packed, Split(0, "last_dim", 250, True))
    verdict = _gate(tmp_path, "reverse_cumsum_rows", both)
    assert verdict.accepted, verdict.message  # type: ignore[attr-defined]
    assert _kernels(verdict) == {
        "tiny": ["suffix_scan_row_alt"],
        "ragged": ["suffix_scan_row"],
        "fp16": ["suffix_scan_row_alt"],
        "long": ["suffix_scan_row"],
    }
    # the alternative's path broken (every row carries the first row's total): refused on the
    # regimes it serves (fp16's 200 columns are 4 chunks; tiny's 45 are one, where no total is
    # carried), although the other path is right
    broken = packed.replace(
        "carried += tl.sum(v, axis=1, keep_dims=True)",
        "carried += tl.sum(tl.sum(v, axis=1, keep_dims=True), axis=0, keep_dims=True)",
    )
    assert broken != packed
    verdict = _gate(
        tmp_path, "reverse_cumsum_rows", combine(naive, broken, Split(0, "last_dim", 250, True))
    )
    assert not verdict.accepted  # type: ignore[attr-defined]
    assert verdict.message.startswith("correctness: fp16")  # type: ignore[attr-defined]


def test_a_parametrized_model_keeps_its_parameters_on_the_alternative(tmp_path: Path) -> None:
    naive, packed = _multi_row("add_layernorm", 4)  # weight and bias: nn.Parameters of randn
    # tiny (33 rows) and fp16_small (48) to the packed kernel, odd (6 rows) to the naive one
    both = combine(naive, packed, Split(0, "rows", 10, False))
    verdict = _gate(tmp_path, "add_layernorm", both)
    assert verdict.accepted, verdict.message  # type: ignore[attr-defined]
    kernels = _kernels(verdict)
    assert kernels["odd"] == ["add_ln_row_kernel"] and kernels["tiny"] == ["add_ln_row_kernel_alt"]

"""The reference process's float64 evaluation (gate/reference.py), run in this process: written
beside the expected outputs where the Model runs in float64, and where it cannot, recorded as
missing with the reason, never a fault of the problem."""

from __future__ import annotations

from pathlib import Path

import torch

from klineage.config import GateConfig
from klineage.gate.protocol import RefRequest
from klineage.gate.reference import run
from tests.conftest import PROBLEMS


def _run(tmp_path: Path, problem: Path, regimes: list[str] | None = None):
    out = tmp_path / "ref"
    out.mkdir()
    req = RefRequest(problem=str(problem), device="cpu", regimes=regimes or [],
                     config=GateConfig())  # fmt: skip
    return run(req, out), out


def test_float64_outputs_are_written_as_differences_from_the_expected(tmp_path: Path) -> None:
    manifest, out = _run(tmp_path, PROBLEMS / "column_sum.py")
    (regime,) = manifest.regimes
    assert len(regime.cases) >= 4 and all(c.float64 and not c.float64_missing for c in regime.cases)
    case = regime.cases[0]
    (want,) = torch.load(out / case.expected, weights_only=True)["outputs"]
    (delta,) = torch.load(out / case.float64, weights_only=True)["deltas"]
    (x,) = torch.load(out / case.inputs, weights_only=True)["inputs"]
    assert delta.dtype == torch.float32 and delta.shape == want.shape
    exact = want.double() + delta.double()
    assert torch.allclose(exact, x.double().sum(0), rtol=0, atol=1e-9)
    assert float(delta.abs().max()) > 1e-4  # PyTorch's float32 sum is not the float64 one


def test_a_model_that_cannot_run_in_float64_is_recorded_not_failed(tmp_path: Path) -> None:
    problem = tmp_path / "float32_only.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(8))\n\n"
        "    def forward(self, x):\n"
        "        if x.dtype != torch.float32:\n"
        "            raise TypeError('float32 only')\n"
        "        return x * self.w\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    manifest, _ = _run(tmp_path, problem)
    cases = manifest.regimes[0].cases
    assert all(c.float64 is None for c in cases)
    assert all(c.float64_missing == "in float64 the reference raised TypeError: float32 only"
               for c in cases)  # fmt: skip


def test_a_models_own_casts_to_float32_stay_float64(tmp_path: Path) -> None:
    """`x.float()` and `.to(torch.float32)` in the Model keep the evaluation in float64
    (gate/upcast.py): the deltas are float64's, not 0."""
    problem = tmp_path / "casts.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.cumsum(x.float(), -1).to(torch.float32), torch.argmax(x, dim=-1)\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 20000)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    manifest, out = _run(tmp_path, problem)
    case = manifest.regimes[0].cases[0]
    assert case.float64 and not case.float64_missing
    (want, _), (x,) = (torch.load(out / f, weights_only=True)[k] for f, k in
                       ((case.expected, "outputs"), (case.inputs, "inputs")))  # fmt: skip
    delta = torch.load(out / case.float64, weights_only=True)["deltas"][0]
    assert float(delta.abs().max()) > 1e-5  # float32's scan of 20000 terms is not float64's
    exact = want.double() + delta.double()
    assert torch.allclose(exact, x.double().cumsum(-1), rtol=0, atol=1e-9)


def test_a_model_that_returns_float32_in_float64_has_no_float64_evaluation(tmp_path: Path) -> None:
    problem = (
        tmp_path / "through_an_array.py"
    )  # not numpy.py: the loader puts its folder on sys.path
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.from_numpy((x * 2).numpy().astype('float32'))\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    manifest, _ = _run(tmp_path, problem)
    case = manifest.regimes[0].cases[0]
    assert case.float64 is None
    assert (
        case.float64_missing
        == "in float64 output 0 of the reference comes back float32 of shape (4, 8)"
    )


def test_integer_outputs_need_no_float64_evaluation(tmp_path: Path) -> None:
    problem = tmp_path / "ints.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.argmax(x, dim=-1)\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    manifest, _ = _run(tmp_path, problem)
    assert all(c.float64 is None and c.float64_missing is None for c in manifest.regimes[0].cases)


def test_a_regime_with_large_cases_gets_fewer_trials_and_every_variant(tmp_path: Path) -> None:
    """Over large_case_bytes a regime gets large_trials random trials (said in skipped_variants)
    and keeps the cases beyond get_inputs; at or under it, every trial. The regime's build
    seconds are recorded by kind."""
    problem = PROBLEMS / "column_sum.py"
    (tmp_path / "full").mkdir()
    full, _ = _run(tmp_path / "full", problem)
    out = tmp_path / "few"
    out.mkdir()
    req = RefRequest(problem=str(problem), device="cpu", regimes=[],
                     config=GateConfig(large_case_bytes=1, large_trials=2))  # fmt: skip
    few = run(req, out)
    trials = [c for c in few.regimes[0].cases if c.kind == "get_inputs"]
    beyond = [c for c in few.regimes[0].cases if c.kind != "get_inputs"]
    full_beyond = [c for c in full.regimes[0].cases if c.kind != "get_inputs"]
    assert [c.label for c in trials] == ["trial 1/2", "trial 2/2"]
    assert len([c for c in full.regimes[0].cases if c.kind == "get_inputs"]) == 5
    assert [c.label for c in beyond] == [c.label for c in full_beyond] and beyond
    assert any("3 of 5 random trials" in s for s in few.regimes[0].skipped_variants)
    assert not any("random trials" in s for s in full.regimes[0].skipped_variants)
    assert {"cases", "float64", "files"} <= set(few.regimes[0].seconds)

"""Shared fixtures: a seeded RNG and a private gate cache for every test session."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "src" / "klineage" / "examples" / "softmax"
CANDIDATES = Path(__file__).resolve().parent / "interp" / "candidates"
PROBLEMS = Path(__file__).resolve().parent / "interp" / "problems"
KERNELS = ROOT / "src" / "klineage" / "kernels"
UNSEEN = Path(__file__).resolve().parent / "interp" / "unseen"


@pytest.fixture(autouse=True)
def _seed_rng() -> None:
    random.seed(0)
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:  # pragma: no cover
        pass


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Tests must never read verdicts cached by an earlier run of different code.
    os.environ["KLINEAGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("klineage-cache"))


def assert_gate_accepts(problem: Path, source: str, path: Path) -> None:
    """Write `source` to `path` and assert the CPU gate accepts it against `problem`."""
    from klineage.config import GateConfig
    from klineage.gate import run_gate

    path.write_text(source)
    r = run_gate(problem, path, device="cpu", config=GateConfig(cache=False))
    assert r.accepted, r.message

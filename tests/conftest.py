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


def assert_is_the_expert(source: str, workload: str) -> None:
    """`source` is the corpus expert's program (the same AST: comments and layout aside), which
    tests/interp/test_corpus_gate.py gates: a round trip that lands on it needs no gate call of
    its own (each is a matmul- or attention-sized CPU gate call, the CI's longest)."""
    import ast

    expert = (KERNELS / workload / "expert.py").read_text()
    assert ast.dump(ast.parse(source)) == ast.dump(ast.parse(expert)), f"not the {workload} expert"


# The longest tests on the 2-core CI machine (`make test`'s --durations): run first, so that
# pytest-xdist's workers do not end the run waiting on one of them. Order only: a name that
# stops matching costs time, never a test.
LONGEST_FIRST = (
    "test_bench.py::test_bench_local_pool",
    "test_bench.py::test_bench_on_a_local_ray_instance",
    "test_roundtrip_causal_block_skipping.py::test_attention_expert_unsplit",
    "test_gate_hostile.py::test_planted_verdicts_change_nothing",
    "test_corpus_gate.py::test_corpus_kernel_passes_the_gate_on_cpu[attention-expert]",
    "round_trips_through_the_gate",
    "test_distill.py::test_kill_9",
    "test_gate_adversarial.py::test_infinite_loop",
    "test_distill.py::test_distill_json",
    "test_probe.py::test_probes_add_each_step",
    "test_distill_llm.py::",
    "test_bench.py::test_bench_on_a_folder",
    "test_optimize_llm.py::",
    "test_split_k_gate.py::",
    "test_column_tiling_gate.py::",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        hits = [i for i, name in enumerate(LONGEST_FIRST) if name in item.nodeid]
        return hits[0] if hits else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order

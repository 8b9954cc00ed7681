"""Shared fixtures: a seeded RNG and a private gate cache for every test session."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

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


# This session's (xdist worker's) folder for the candidates assert_gate_accepts gates.
_GATED: list[Path] = []


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Tests must never read verdicts cached by an earlier run of different code.
    os.environ["KLINEAGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("klineage-cache"))
    _GATED[:] = [tmp_path_factory.mktemp("gated")]


def apply_at_every_site(pass_name: str, source: str) -> str:
    """`source` with the pass applied at each forward site it finds there, in order, each
    application asserted."""
    from klineage.rewrite import all_passes

    p = all_passes()[pass_name]
    out = source
    for site in p.forward_sites(source):
        r = p.apply(out, site)
        assert r.applied and r.source, r.reason
        out = r.source
    return out


def in_gated_folder(source: str, name: str) -> Path:
    """`source` written as `name` in this test session's one folder for gated candidates.

    The gate keeps a warm sandbox (gate/zygote.py: torch and triton imported) per candidate
    folder, so a candidate in a folder of its own (each test's tmp_path, each held-out problem's
    folder) paid ~4 s of a CPU gate call (~8-10 s on a small problem) to start one. Each
    candidate still runs in its own forked child, as each candidate of a walk or an optimize run
    does; a candidate that imports nothing from its folder is gated the same from here."""
    path = _GATED[0] / name
    assert not path.exists(), f"{path}: two candidates of this session under one name"
    path.write_text(source)
    return path


def assert_gate_accepts(
    problem: Path, source: str, path: Path, regimes: tuple[str, ...] | None = None
) -> None:
    """Write `source` to `path` and assert the CPU gate accepts it against `problem`, on
    `regimes` (None: every CPU regime of the problem). The gate is given a copy in the session's
    folder (in_gated_folder): `path`'s parent is the test's tmp_path, a folder of its own."""
    from klineage.config import GateConfig
    from klineage.gate import run_gate

    path.write_text(source)
    gated = in_gated_folder(source, f"{path.parent.name}-{path.name}")
    r = run_gate(problem, gated, device="cpu", regimes=list(regimes) if regimes else None,
                 config=GateConfig(cache=False))  # fmt: skip
    assert r.accepted, r.message


# The matmul round trips' regimes: the expert's four CPU regimes but odd_fp16, the costliest
# (~19 s of a ~35 s correctness stage: every one of the 8 configs over 4 K steps of fp16 dots).
# What they keep: tiny_fp16 builds and runs every config (fp32 inputs prune all but one by
# shared memory), with EVEN_K true (BLOCK_SIZE_K 32, 64) and false (128); odd_fp32 a masked K
# tail over two K steps; even_k_fp32 four unmasked K steps and a second row tile (pid_m = 1).
# odd_fp16's one extra is a second column tile, which only the launch order reads
# (test_roundtrip_grouped_launch_order.py gates on every regime); the expert itself is gated on
# all four (test_corpus_gate.py).
MATMUL_ROUND_TRIP_REGIMES = ("tiny_fp16", "odd_fp32", "even_k_fp32")


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


def interpreted(script: str, *args: str) -> Any:
    """The JSON the Python `script` prints last, run with `args` in a child with
    TRITON_INTERPRET=1 (set before triton is imported: this process may have imported it
    without, as CI's pytest does)."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "TRITON_INTERPRET": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def heldout_context(name: str, gpu: tuple[str, ...]) -> Any:
    """An optimize Context for held-out problem `name`'s naive kernel on a GPU (its `gpu`
    regimes timed), with the shipped skill library: what a policy reads at a run's start."""
    from klineage.optimize.policies import Context
    from klineage.problem.shapes import features, regime_shapes
    from klineage.skills.library import load_library

    where = ROOT / "src" / "klineage" / "heldout" / name
    shipped, _ = load_library(None)
    shapes = regime_shapes(where / "problem.py")
    return Context(
        where / "problem.py",
        where / "naive.py",
        "cuda",
        shipped,
        llm=False,
        seed=0,
        target={r: features(shapes[r]) for r in gpu},
        capability="9.0",
        best_source=(where / "naive.py").read_text(),
        shapes={r: shapes[r]["shapes"] for r in gpu},
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        hits = [i for i, name in enumerate(LONGEST_FIRST) if name in item.nodeid]
        return hits[0] if hits else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order

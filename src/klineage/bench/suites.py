"""Benchmark suites: the corpus (six workloads with naive and expert kernels) and the public
held-out set (problems no skill was learned from, each with a naive starting kernel)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from klineage.errors import UsageError
from klineage.skills.model import Skill

SUITES = ("corpus", "heldout")


@dataclass(frozen=True)
class BenchProblem:
    name: str  # "corpus/softmax", "heldout/rmsnorm_gemma"
    problem: Path
    naive: Path
    expert: Path | None
    workload: str  # the directory name


def _root() -> Path:
    return Path(str(resources.files("klineage")))


def suite_problems(suite: str, only: list[str] | None = None) -> list[BenchProblem]:
    if suite not in SUITES:
        raise UsageError(f"--suite {suite}: expected one of {', '.join(SUITES)}")
    base = _root() / ("kernels" if suite == "corpus" else "heldout")
    out = []
    for d in sorted(
        p for p in base.iterdir() if (p / "problem.py").exists() and (p / "naive.py").exists()
    ):
        expert = d / "expert.py"
        out.append(
            BenchProblem(
                f"{suite}/{d.name}",
                d / "problem.py",
                d / "naive.py",
                expert if expert.exists() else None,
                d.name,
            )
        )
    if only:
        unknown = sorted(set(only) - {p.workload for p in out})
        if unknown:
            raise UsageError(
                f"--problems: not in the {suite} suite: {', '.join(unknown)}; it has {', '.join(p.workload for p in out)}"
            )
        out = [p for p in out if p.workload in only]
    return out


def step_skills_path() -> Path:
    """Every lineage step's skill before merging (written by benchmarks/build_library.py)."""
    return _root() / "data" / "skills-h200-steps.json"


def _workload_of(skill: Skill) -> set[str]:
    return {Path(p.problem).parent.name for p in skill.provenance}


def leave_one_out(steps: list[Skill], workload: str) -> list[Skill]:
    """The library merged from every step skill whose lineage is not `workload`'s: its
    exemplars, parameters, effects and conditions are not seen when optimizing it."""
    from klineage.skills.library import add_to_library, library_skills
    from klineage.store import open_store

    kept = [s for s in steps if workload not in _workload_of(s)]
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "loo.db")
        add_to_library(store, kept)
        merged = library_skills(store)
        store.close()
    return merged

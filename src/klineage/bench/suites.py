"""Benchmark suites: the corpus (eleven workloads with naive and expert kernels) and the public
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


# A folder suite's starting kernels: in a problem's own folder (klineage's layout), or beside a
# KernelBench problem file NAME.py as NAME_<suffix>.py, or as kernels/NAME.py.
START_NAMES = ("naive.py", "start.py", "candidate.py", "kernel.py")
START_SUFFIXES = ("_start", "_triton", "_new", "_kernel")
FOLDER_LAYOUT = (
    "a folder of problems with starting kernels: either one folder per problem holding problem.py "
    f"and a starting kernel ({', '.join(START_NAMES)}; expert.py optional), or KernelBench's flat "
    f"NAME.py problem files, each with its starting kernel as NAME{START_SUFFIXES[0]}.py (or "
    f"{', '.join(x + '.py' for x in START_SUFFIXES[1:])}) beside it, or kernels/NAME.py"
)


def label(suite: str) -> str:
    """The suite's name in ids and reports: the folder's own name for a folder suite."""
    return suite if suite in SUITES else Path(suite).name


def folder_problems(folder: Path) -> list[BenchProblem]:
    """Every problem of a user's folder that has a starting kernel (FOLDER_LAYOUT)."""
    if not folder.is_dir():
        raise UsageError(f"--suite {folder}: expected corpus, heldout, or {FOLDER_LAYOUT}")
    out: list[BenchProblem] = []
    for d in sorted(p for p in folder.iterdir() if p.is_dir() and (p / "problem.py").exists()):
        start = next((d / n for n in START_NAMES if (d / n).exists()), None)
        if start is not None:
            expert = d / "expert.py"
            out.append(
                BenchProblem(
                    f"{folder.name}/{d.name}",
                    d / "problem.py",
                    start,
                    expert if expert.exists() else None,
                    d.name,
                )
            )
    starts = {f.stem for f in folder.glob("*.py") if f.stem.endswith(START_SUFFIXES)}
    for f in sorted(folder.glob("*.py")):
        if f.stem in starts or f.name.startswith("_"):
            continue
        start = next(
            (
                folder / f"{f.stem}{x}.py"
                for x in START_SUFFIXES
                if (folder / f"{f.stem}{x}.py").exists()
            ),
            None,
        )
        start = start or (
            folder / "kernels" / f.name if (folder / "kernels" / f.name).exists() else None
        )
        if start is not None:
            out.append(BenchProblem(f"{folder.name}/{f.stem}", f, start, None, f.stem))
    if not out:
        raise UsageError(
            f"--suite {folder}: no problem with a starting kernel found; expected {FOLDER_LAYOUT}"
        )
    return out


def suite_problems(suite: str, only: list[str] | None = None) -> list[BenchProblem]:
    """The problems of `corpus`, `heldout`, or a folder of the user's (FOLDER_LAYOUT)."""
    if suite not in SUITES:
        out = folder_problems(Path(suite))
    else:
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

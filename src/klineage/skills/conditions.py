"""Measured conditions: learn a threshold on a shape feature that separates the regimes where a
skill paid off (>= 1.05x) from those where it did not.

With the regimes of one problem, the rule is the simplest that fits: for the first feature
(row_length, rows, elements; for a skill that spreads work over programs, first the number of
programs the kernel launched) on which every paying regime lies below every non-paying one (or
above), the threshold is the geometric midpoint between the two groups. When none separates
them, no threshold is claimed and the regimes are listed instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from klineage.gate.records import Overrides
from klineage.metrics import PAYS_OFF
from klineage.problem.shapes import RegimeInputs, features, regime_shapes
from klineage.skills.model import Condition

FEATURES = ("row_length", "rows", "elements")
# For a skill whose gain depends on how many programs the kernel launches (RewritePass.BY_PROGRAMS:
# split_k, persistent_grid), `programs` (of the kernel it was added to) is tried first: the
# column sum's split over rows paid on its 32-column regime (32 programs) and not on its
# 2048-column ones, and what carries over to another kernel is the program count, not the
# column count (a long-K matmul launches 256 programs for a "row length" of a million).
BY_PROGRAMS = ("programs", *FEATURES)
# Features a threshold is used on at any value, not only near those it was learned on: a program
# count is the GPU's to fill, whatever the kernel, so "programs <= 64" carries to any count.
EXTRAPOLATES = frozenset({"programs"})

_INPUTS: dict[str, dict[str, RegimeInputs]] = {}
# regime_features per problem (key as _INPUTS), read-only: retrieval asks for it per effect.
_FEATURES: dict[str, Mapping[str, Mapping[str, float]]] = {}


def locate_problem(path: str) -> Path | None:
    """The problem file, or the packaged corpus file with the same workload when the lineage was
    distilled in another checkout (the GPU machine's copy of the repo)."""
    p = Path(path)
    if p.exists():
        return p
    parts = p.parts
    if "kernels" in parts:
        here = Path(__file__).resolve().parents[1] / Path(*parts[parts.index("kernels") :])
        if here.exists():
            return here
    return None


SHIPPED_SHAPES = Path(__file__).resolve().parents[1] / "data" / "regime-shapes.json"
"""The regime shapes of the problems this package ships (the corpus, the held-out suite, the
examples), keyed like the disk cache by their source's content: written by
benchmarks/build_regime_shapes.py. Without it, the first `klineage skills list` on a machine ran
every problem a shipped skill came from in a child process, 4-5 s each (40 s in all)."""


def shapes_key(source: str) -> str:
    """The key of a problem's regime shapes: its source's content, so an edited file misses."""
    import hashlib

    return hashlib.sha256(source.encode()).hexdigest()[:24]


@functools.cache
def _shipped() -> dict[str, dict[str, RegimeInputs]]:
    import json

    try:
        table = json.loads(SHIPPED_SHAPES.read_text(encoding="utf-8"))["shapes"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return table if isinstance(table, dict) else {}


def problem_shapes(problem: Path, overrides: Overrides | None = None) -> dict[str, RegimeInputs]:
    """regime_shapes(problem, overrides=...), from the shipped table when the file is a shipped
    problem unchanged and nothing is rebound: what optimize and retrieval start from. Unlike
    regime_inputs it raises the problem's LoadError (a problem that cannot be read stops a run)."""
    if not overrides:
        try:
            hit = _shipped().get(shapes_key(problem.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            hit = None
        if hit:
            return hit
    return regime_shapes(problem, overrides=overrides)


def _disk_cache(source: str) -> Path:
    from klineage.config import default_cache_dir

    return default_cache_dir() / "regime-shapes" / f"{shapes_key(source)}.json"


def regime_inputs(problem: str) -> dict[str, RegimeInputs]:
    """{regime: {"shapes": [...], "dtypes": [...]}} of a problem; empty if it cannot be read.
    Cached per path in memory and per file content on disk: reading them runs the problem in a
    child process (seconds), and a skill card or retrieval needs them for every problem a skill
    came from."""
    import json

    if problem in _INPUTS:
        return _INPUTS[problem]
    located = locate_problem(problem)
    cached = None
    try:
        source = located.read_text(encoding="utf-8") if located else ""
        if source and shapes_key(source) in _shipped():
            _INPUTS[problem] = _shipped()[shapes_key(source)]
            return _INPUTS[problem]
        cached = _disk_cache(source) if source else None
        if cached is not None and cached.exists():
            _INPUTS[problem] = json.loads(cached.read_text(encoding="utf-8"))
            return _INPUTS[problem]
    except (OSError, ValueError):
        cached = None
    try:
        shapes = regime_shapes(located) if located else {}
    except Exception:  # an unreadable problem yields no features, and so no threshold
        shapes = {}
    _INPUTS[problem] = shapes
    if cached is not None and shapes:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(shapes), encoding="utf-8")
            tmp.replace(cached)
        except OSError:
            pass  # no cache is a slower card, nothing worse
    return shapes


def shapes_of(inputs: Mapping[str, Mapping[str, Any]]) -> dict[str, list[list[int]]]:
    """{regime: input shapes} of regime_inputs' (or regime_shapes') {regime: {"shapes": ...}}."""
    return {r: e["shapes"] for r, e in inputs.items()}


def regime_features(problem: str) -> Mapping[str, Mapping[str, float]]:
    """Shape features of every regime of a problem (problem/shapes.py `features`); memoized,
    and so read-only (derive a new dict to change one, as `with_programs` does)."""
    if problem not in _FEATURES:
        _FEATURES[problem] = MappingProxyType(
            {r: MappingProxyType(features(e)) for r, e in regime_inputs(problem).items()}
        )
    return _FEATURES[problem]


def with_programs(
    feats: Mapping[str, Mapping[str, float]],
    shapes: Mapping[str, Sequence[Sequence[int]]],
    source: str,
) -> dict[str, dict[str, float]]:
    """`feats` with each regime's `programs`: how many programs the kernel `source` launches
    there (rewrite/grid.py, read from its launcher, never run) at the regime's input `shapes`,
    where that can be read."""
    from klineage.rewrite.grid import programs

    out = {}
    for r, f in feats.items():
        n = programs(source, shapes[r]) if r in shapes else None
        out[r] = {**f, "programs": float(n)} if n else dict(f)
    return out


def learn_threshold(
    speedups: dict[str, float],
    feats: Mapping[str, Mapping[str, float]],
    problem: str,
    evidence: str,
    order: tuple[str, ...] = FEATURES,
) -> Condition | None:
    pays = [r for r, x in speedups.items() if x >= PAYS_OFF and r in feats]
    nots = [r for r, x in speedups.items() if x < PAYS_OFF and r in feats]
    if not pays or not nots:
        return None
    for f in order:
        if any(f not in feats[r] for r in pays + nots):
            continue
        pv, nv = [feats[r][f] for r in pays], [feats[r][f] for r in nots]
        if min(pv + nv) <= 0:
            continue
        for op, lo, hi in (("<=", max(pv), min(nv)), (">=", max(nv), min(pv))):
            if lo < hi:
                t = math.sqrt(lo * hi)
                return Condition(
                    kind="measured",
                    predicate=f"pays off when {f} {op} {t:.4g}",
                    evidence=f"{evidence}: pays on {', '.join(f'{r} ({f} {feats[r][f]:.4g})' for r in pays)}; "
                    f"not on {', '.join(f'{r} ({f} {feats[r][f]:.4g})' for r in nots)}",
                    feature=f,
                    op=op,
                    threshold=t,
                    source_problem=problem,
                )
    return None

"""The skill library: skills from many lineages merged by (pass, anchor), with confidence.

Merging keeps every piece of evidence once: effects (by source lineage, step and regime),
conditions (by predicate), failures avoided (by attempt and message), provenance (by lineage and
step). The exemplar and the rewrite parameters of the first skill stay; later ones add
evidence. Confidence is the number of distinct source kernels the skill was seen in.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Any

from klineage.skills.model import Skill
from klineage.store import Store


def library_id(pass_name: str, anchor: str) -> str:
    return hashlib.sha256(f"{pass_name}/{anchor}".encode()).hexdigest()[:12]


def _unique(items: list[Any], key: Any) -> list[Any]:
    seen, out = set(), []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


def merge(base: Skill, new: Skill) -> Skill:
    """`base` with `new`'s evidence added (same pass and anchor)."""
    return base.model_copy(
        update={
            "conditions": _unique(
                [*base.conditions, *new.conditions], lambda c: (c.kind, c.predicate)
            ),
            "effects": _unique(
                [*base.effects, *new.effects],
                lambda e: (e.lineage_id, e.step, e.regime, e.gpu, e.base_ms, e.new_ms),
            ),
            "failures_avoided": _unique(
                [*base.failures_avoided, *new.failures_avoided], lambda f: (f.attempt, f.message)
            ),
            "provenance": _unique(
                [*base.provenance, *new.provenance], lambda p: (p.lineage_id, p.step)
            ),
        }
    )


def confidence(skill: Skill) -> int:
    return len({p.source_kernel for p in skill.provenance})


def add_to_library(store: Store, skills: list[Skill]) -> tuple[int, int]:
    """Merge skills into the library; returns (new skills, skills that gained evidence)."""
    created = updated = 0
    for s in skills:
        row = store.get_skill(s.name, s.anchor)
        if row is None:
            merged = s.model_copy(update={"id": library_id(s.name, s.anchor)})
            created += 1
        else:
            merged = merge(Skill.model_validate(row.record), s)
            updated += 1
        store.put_skill(
            merged.id,
            merged.name,
            merged.anchor,
            merged.model_dump(mode="json"),
            confidence(merged),
        )
    return created, updated


def library_skills(store: Store) -> list[Skill]:
    return [Skill.model_validate(r.record) for r in store.skills()]


def shipped_library_path() -> Path:
    """The library packaged with klineage: skills distilled on the H200 from the corpus experts,
    and, correctness only, the structural ones of CPU walks no H200 walk has reached yet
    (regenerate with benchmarks/build_library.py, docs/SKILLS.md)."""
    return Path(str(resources.files("klineage") / "data" / "skills-h200.json"))


def load_library(store: Store | None, path: Path | None = None) -> tuple[list[Skill], str]:
    """The skills to use and where they came from: a JSON file when given, else the user's
    library in the store, else (when that is empty) the shipped library."""
    from klineage.skills.export import read_json

    if path is not None:
        return read_json(path), str(path)
    if store is not None:
        own = library_skills(store)
        if own:
            return own, f"the library in {store.path}"
    shipped = shipped_library_path()
    if shipped.exists():
        return read_json(shipped), f"the shipped library ({shipped.name}: distilled on an H200)"
    return [], "no library"


def without_old_timing(skill: Skill) -> Skill:
    """The skill without the speed conditions learned from "old timing" effects (host-inclusive
    do_bench of separate gate calls, before side-by-side device timing): its thresholds and
    "pays off" lists are dropped; correctness ("correct without it on"), static conditions and
    effects measured since stay. The effects themselves stay, labelled, never evidence."""
    if any(e.status != "old timing" for e in skill.effects):
        return skill  # conditions here may rest on current measurements: extraction decides
    kept = [
        c
        for c in skill.conditions
        if c.kind != "measured" or c.predicate.startswith("correct without it")
    ]
    return skill.model_copy(update={"conditions": kept})

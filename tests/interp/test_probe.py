"""Forward probes on the CPU: each step's optimization added back to the walk's simplest
kernel, gated, stored, resumed without new gate calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig, env_scope
from klineage.errors import UsageError
from klineage.lineage import distill
from klineage.lineage import probe as probe_mod
from klineage.skills.extract import extract_skills
from klineage.store import open_store
from tests.conftest import EXAMPLE

pytestmark = pytest.mark.interpreter

KERNEL = Path(__file__).resolve().parent / "kernels" / "softmax_hinted.py"


def test_probes_add_each_step_back_to_the_simplest_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path / "k.db")
    with env_scope(KLINEAGE_CACHE_DIR=str(tmp_path / "cache")):
        lid = distill(
            EXAMPLE / "problem.py", KERNEL, store=store, regimes=["tiny_rows"], policy="first"
        )
        steps = [n for n in store.nodes(lid) if n.via_attempt is not None]
        assert len(steps) >= 3
        calls: list[tuple[str, bool]] = []  # (candidate file, answered from the cache)
        real = probe_mod.run_gate

        def counting(*a: object, **k: object) -> object:
            g = real(*a, **k)  # type: ignore[arg-type]
            calls.append((str(a[1]), bool(g.cached)))
            return g

        monkeypatch.setattr(probe_mod, "run_gate", counting)
        probes = probe_mod.probe_lineage(
            store, lid, config=GateConfig(profile_compile=False, allow_suspicious=True)
        )
    step_probes = [p for p in probes if not p.forward_only]
    assert [p.step for p in step_probes] == [n.step for n in steps]
    last = max(steps, key=lambda n: n.step)
    assert next(p for p in step_probes if p.step == last.step).message.startswith(
        "the walk's last step"
    )
    # No forward-only pass (a tile for a transpose, a block scan, split K) fits a softmax: each
    # is recorded at the simplest kernel's step, with its reason, and never gated.
    forward = [p for p in probes if p.forward_only]
    assert forward and all(p.step == last.step and not p.applied for p in forward)
    added = [p for p in step_probes if p.step != last.step]
    # Each optimization the walk removed fits back onto the simplest kernel and stays correct.
    assert added and all(p.applied and p.accepted and p.candidate for p in added), [
        p.message for p in added
    ]
    assert all(p.candidate != last.source for p in added)
    # One gate call per probe that applied, none of them a candidate gated twice.
    assert len(calls) == len(added)
    fresh = [f for f, cached in calls if not cached]
    assert len(fresh) == len(set(fresh)) <= len({p.candidate for p in added})
    # Stored: a second run gates nothing and returns the same rows.
    n = len(calls)
    again = probe_mod.probe_lineage(store, lid)
    assert len(calls) == n and [(p.step, p.pass_name, p.accepted) for p in again] == [
        (p.step, p.pass_name, p.accepted) for p in probes
    ]
    # The skills still extract (on the CPU nothing is timed: no probe effects, no new condition).
    skills = extract_skills(store, lid)
    assert len(skills) == len(steps)
    assert not any("simplest kernel, pays off" in c.predicate for s in skills for c in s.conditions)


def test_probes_need_a_finished_walk(tmp_path: Path) -> None:
    store = open_store(tmp_path / "k.db")
    with env_scope(KLINEAGE_CACHE_DIR=str(tmp_path / "cache")):
        lid = distill(
            EXAMPLE / "problem.py",
            KERNEL,
            store=store,
            regimes=["tiny_rows"],
            policy="first",
            max_steps=1,
        )
    assert store.get_lineage(lid).status == "done"  # type: ignore[union-attr]
    store.set_lineage_status(lid, "running", "")
    with pytest.raises(UsageError, match="finish the walk first"):
        probe_mod.probe_lineage(store, lid)

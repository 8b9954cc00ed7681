"""Forward-only passes as skills (no kernels run): the probes table's migration, probes of
forward-only passes on a walk's simplest kernel, their skills, retrieval of them."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from klineage.lineage import probe as probe_mod
from klineage.optimize.materialize import mechanical
from klineage.rewrite import all_passes
from klineage.skills.extract import extract_skills, skill_id
from klineage.store import Store, open_store
from klineage.store.db import ProbeRow
from klineage.store.migrations import MIGRATIONS
from tests.conftest import KERNELS, ROOT
from tests.unit.test_walk import _row

TRANSPOSE = KERNELS / "transpose"
HELDOUT = ROOT / "src" / "klineage" / "heldout" / "batched_transpose_last2"
TILE = "tiled_transpose"
COLSUM = KERNELS / "colsum"


def _gate(ms: dict[str, float], kernel: str = "_transpose_kernel") -> dict[str, Any]:
    return {"stages": [
        {"stage": "correctness", "regimes": [{"regime": r, "status": "passed", "dtype": "float32", "kernels": [kernel]} for r in ms]},
        {"stage": "profile", "numbers": {"regimes": {r: _row(v) for r, v in ms.items()}}},
    ]}  # fmt: skip


def _lineage(
    store: Store,
    expert: str,
    simplest: str,
    gates: tuple[dict, dict] = ({}, {}),
    workload: Path = TRANSPOSE,
    device: str = "cpu",
) -> int:
    """A done two-node lineage "L1" on `workload`'s problem (the transpose's by default):
    expert -> simplest by one block_size step. Returns the simplest node's id."""
    regimes = ["odd", "even"] if workload == TRANSPOSE else []
    store.create_lineage(
        "L1",
        str(workload / "problem.py"),
        str(workload / "expert.py"),
        "p",
        "e",
        device,
        "first",
        regimes,
    )
    n0 = store.add_node("L1", 0, None, None, expert, "s0", gates[0])
    site = {"function": "", "line": 22, "description": "BLOCK_M_SIZE = 64", "params": {}}
    a1 = store.add_attempt(
        "L1", n0, 1, "block_size", "k1", site, applied=True, accepted=True, reason="halved"
    )
    n1 = store.add_node("L1", 1, n0, a1, simplest, "s1", gates[1])
    store.set_lineage_status("L1", "done", "no registered optimization remains")
    return n1


def test_a_store_from_before_forward_only_probes_opens_with_its_probes(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as c:  # the schema as klineage wrote it before migration 5
        for migration in MIGRATIONS[:4]:
            c.executescript(migration)
        c.execute("PRAGMA user_version = 4")
        c.execute(
            "INSERT INTO lineages VALUES ('L1', 'p', 'e', 'p', 'e', 'cpu', 'first', '[]', 'done', '', NULL, 't', 't')"
        )
        c.execute("INSERT INTO nodes VALUES (7, 'L1', 2, NULL, NULL, 'src', 's', '{}', 't')")
        c.execute(
            "INSERT INTO probes VALUES (3, 'L1', 2, 'num_warps', 7, 1, 1, NULL, 'added', 'cand', '{\"accepted\": true}', 1.5, 't')"
        )
    store = open_store(path)
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    (old,) = store.probes("L1")
    assert (old.step, old.pass_name, old.base_node, old.accepted, old.candidate) == (
        2,
        "num_warps",
        7,
        True,
        "cand",
    )
    assert old.gate == {"accepted": True} and old.seconds == 1.5 and not old.forward_only
    assert store.conn.execute("SELECT id FROM probes").fetchone()[0] == 3  # ids kept
    # A forward-only probe at the same step stands beside the step's own (the old UNIQUE
    # (lineage_id, step) would have replaced it); writing a probe again still replaces it.
    fwd = ProbeRow("L1", 2, TILE, 7, False, False, None, "no place", None, None, 0.0, True)
    store.add_probe(fwd)
    store.add_probe(fwd)
    assert [(p.pass_name, p.forward_only) for p in store.probes("L1")] == [
        ("num_warps", False),
        (TILE, True),
    ]
    store.close()
    assert len(open_store(path).probes("L1")) == 2  # reopening migrates nothing


def _accepting_gate(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, dict[str, Any]]]:
    """The probes' gate replaced by one that accepts everything; returns the calls it got."""
    gated: list[tuple[Path, dict[str, Any]]] = []

    def fake_gate(problem: Path, candidate: Path, **kw: Any) -> Any:
        gated.append((candidate, kw))
        return SimpleNamespace(
            accepted=True, failed_stage=None, message="", model_dump=lambda mode: {"ok": 1}
        )

    monkeypatch.setattr(probe_mod, "run_gate", fake_gate)
    return gated


def test_forward_only_passes_are_probed_only_where_the_expert_has_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    naive = (TRANSPOSE / "naive.py").read_text()
    expert = (TRANSPOSE / "expert.py").read_text()
    gated = _accepting_gate(monkeypatch)
    forward = sorted(n for n, p in all_passes().items() if isinstance(p, probe_mod.ForwardOnly))
    assert TILE in forward and "block_scan" in forward

    # The expert is the naive kernel itself: it lacks the tile too, so nothing is learned.
    store = open_store(tmp_path / "lacks.db")
    _lineage(store, naive, naive)
    events: list[tuple[str, dict]] = []
    rows = probe_mod.probe_lineage(store, "L1", on_event=lambda k, d: events.append((k, dict(d))))
    assert not gated
    fwd = {p.pass_name: p for p in rows if p.forward_only}
    assert sorted(fwd) == forward and not any(p.applied for p in fwd.values())
    assert "not learned from the expert" in fwd[TILE].message
    assert fwd["block_scan"].message.startswith("no place to add it to the simplest kernel")
    assert [p.step for p in rows if not p.forward_only] == [1]  # the step's own probe, kept
    assert {d["pass"] for k, d in events if k == "probed" and d.get("forward_only")} == set(forward)
    events.clear()
    assert len(probe_mod.probe_lineage(store, "L1", on_event=lambda k, d: events.append((k, d))))
    assert not events  # stored: a rerun repeats none of them

    # The transpose expert has the tile (its pass finds no place in it): the tile is added to
    # the naive kernel with the pass's defaults and gated once, as a step's probe is.
    store = open_store(tmp_path / "has.db")
    simplest = _lineage(store, expert, naive)
    rows = probe_mod.probe_lineage(store, "L1")
    (tile,) = [p for p in rows if p.forward_only and p.applied]
    assert tile.pass_name == TILE and tile.accepted and tile.step == 1
    assert tile.base_node == simplest and tile.candidate == mechanical(naive, TILE).source
    ((candidate, kw),) = gated
    assert candidate.read_text() == tile.candidate
    assert kw["device"] == "cpu" and kw["base"] is None and kw["regimes"] == ["odd", "even"]


def _tile_skill_store(tmp_path: Path) -> Store:
    """The transpose lineage on a GPU with forward-only probes stored by hand: the tile
    accepted (2x on the square regime, none on the odd one), block_scan applied and rejected,
    split_k not applicable."""
    naive = (TRANSPOSE / "naive.py").read_text()
    store = open_store(tmp_path / "k.db")
    simplest = _lineage(
        store,
        (TRANSPOSE / "expert.py").read_text(),
        naive,
        (_gate({"square": 0.1, "odd": 0.01}), _gate({"square": 0.4, "odd": 0.01})),
    )
    store.set_lineage_status(
        "L1", "done", "", {"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}
    )
    tiled = mechanical(naive, TILE).source
    ms = {"square": 0.2, "odd": 0.0101}
    store.add_probe(
        ProbeRow("L1", 1, TILE, simplest, True, True, None, "ok", tiled, _gate(ms), 1.0, True)
    )
    store.add_probe(
        ProbeRow(
            "L1", 1, "block_scan", simplest, True, False, "correctness", "wrong", "x", None, 1, True
        )
    )
    store.add_probe(
        ProbeRow("L1", 1, "split_k", simplest, False, False, None, "no place", None, None, 0, True)
    )
    return store


def test_an_accepted_forward_only_probe_becomes_a_skill_of_its_own(tmp_path: Path) -> None:
    store = _tile_skill_store(tmp_path)
    naive = (TRANSPOSE / "naive.py").read_text()
    skills = extract_skills(store, "L1")
    # The step's skill, then the tile's: the rejected and the inapplicable probes give none.
    assert [s.name for s in skills] == ["block_size", TILE]
    step, tile = skills
    # The forward-only row at step 1 is not the step's probe.
    assert all(e.context == "lineage" for e in step.effects)
    assert tile.id not in (step.id, skill_id(TILE, "L1", 1))
    p = all_passes()[TILE]
    assert (tile.category, tile.anchor) == (p.CATEGORY, p.ANCHOR)
    assert tile.intent.startswith(p.DESCRIPTION) and "no backward form" in tile.intent
    assert tile.rewrite.pass_name == TILE
    assert tile.rewrite.params == {"kernel": "_transpose_kernel", "block_m": 64, "block_n": 64}
    assert tile.exemplar.before == naive and tile.exemplar.after == mechanical(naive, TILE).source
    assert tile.exemplar.diff.startswith("---") and "tl.program_id(1)" in tile.exemplar.diff
    got = sorted((e.regime, e.context, round(e.speedup or 0, 2), e.exercised) for e in tile.effects)
    assert got == [("odd", "simplest", 0.99, True), ("square", "simplest", 2.0, True)]
    assert [x.step for x in tile.provenance] == [1]
    predicates = [c.predicate for c in tile.conditions]
    assert predicates[:2] == [f"code has: {p.ANCHOR}", "correct with it on: square, odd"]
    learned = next(c for c in tile.conditions if c.feature is not None)
    assert learned.predicate.startswith("pays off when") and learned.op == ">="
    assert (
        "added to the walk's simplest kernel, pays off (>= 1.05x) on: square; not on: odd"
        in predicates
    )
    # The probes that gave no skill are listed with the lineage, with why.
    from klineage.lineage import load_view

    shown = {p["rewrite"]: p for p in load_view(store, "L1").as_json()["probes"]}
    assert shown["block_scan"]["forward_only"] and shown["block_scan"]["stage"] == "correctness"
    assert (shown["block_scan"]["applied"], shown["block_scan"]["accepted"]) == (True, False)
    assert shown["split_k"]["message"] == "no place" and not shown["split_k"]["applied"]


def test_a_forward_only_skill_is_retrieved_and_proposed_for_a_naive_transpose(
    tmp_path: Path,
) -> None:
    from klineage.optimize.policies import Context, get_policy
    from klineage.skills.retrieve import retrieve

    tile = extract_skills(_tile_skill_store(tmp_path), "L1")[-1]
    learned = next(c for c in tile.conditions if c.feature is not None)
    assert learned.threshold is not None and learned.feature is not None
    kernel = HELDOUT / "naive.py"

    def shape(x: float) -> dict[str, dict[str, float]]:
        return {"r": {"row_length": x, "rows": x, "elements": x * x}}

    big, small = shape(learned.threshold * 2), shape(learned.threshold / 2)
    (hit,) = retrieve([tile], HELDOUT / "problem.py", kernel, target=big)
    assert hit.selected and hit.materializer == "mechanical" and hit.pass_name == TILE
    assert hit.score == pytest.approx(2.0)
    (miss,) = retrieve([tile], HELDOUT / "problem.py", kernel, target=small)
    assert not miss.selected and miss.excluded == "measured"
    # Not a transpose: no place for the tile, whatever its conditions say.
    softmax = KERNELS / "softmax"
    (none,) = retrieve([tile], softmax / "problem.py", softmax / "naive.py", target=big)
    assert not none.selected and none.excluded == "static"

    # On a CPU nothing was timed: applicable, gain unknown, the gate decides.
    cpu = tile.model_copy(update={"effects": [], "conditions": tile.conditions[:2]})
    (r,) = retrieve([cpu], HELDOUT / "problem.py", kernel, device="cpu", target=small)
    assert r.selected and r.materializer == "mechanical" and not r.predicted
    ctx = Context(
        problem=HELDOUT / "problem.py",
        kernel=kernel,
        device="cpu",
        skills=[cpu],
        llm=False,
        seed=0,
        target=small,
        best_source=kernel.read_text(),
    )
    first = next(iter(get_policy("klineage").proposals(ctx)))
    assert (first.pass_name, first.materializer, first.skill) == (TILE, "mechanical", cpu)
    m = mechanical(ctx.best_source, TILE, first.params)
    assert m.source is not None and "tl.program_id(1)" in m.source, m.reason


def _colsum_lineage(store: Store, gates: tuple[dict, dict] = ({}, {}), device: str = "cpu") -> int:
    """A done lineage "L1" on the colsum problem whose simplest kernel still has the expert's
    row split (no step removes it), as the real walk's does. Returns the simplest node's id."""
    expert = (COLSUM / "expert.py").read_text()
    return _lineage(store, expert, expert, gates, COLSUM, device)


def test_a_forward_only_pass_with_no_place_in_the_simplest_kernel_is_added_to_the_naive_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    naive = (COLSUM / "naive.py").read_text()
    expert = (COLSUM / "expert.py").read_text()
    split_k = all_passes()["split_k"]
    # The colsum expert splits its rows (split_k's structure): no place in it, nor in the
    # simplest kernel that keeps the split; the naive kernel's serial walk down a column is one.
    assert not split_k.forward_sites(expert) and split_k.forward_sites(naive)
    gated = _accepting_gate(monkeypatch)
    store = open_store(tmp_path / "k.db")
    simplest = _colsum_lineage(store)
    events: list[tuple[str, dict]] = []
    rows = probe_mod.probe_lineage(store, "L1", on_event=lambda k, d: events.append((k, dict(d))))
    fwd = {p.pass_name: p for p in rows if p.forward_only}
    sk = fwd["split_k"]
    assert sk.applied and sk.accepted and sk.base_node == simplest
    assert sk.base_source == naive and sk.candidate == mechanical(naive, "split_k").source
    ((candidate, _),) = gated  # only split_k had a place anywhere
    assert candidate.read_text() == sk.candidate
    # Where neither kernel has a place, the row says both were looked at.
    assert fwd[TILE].base_source is None and not fwd[TILE].applied
    assert "nor to the naive kernel (naive.py)" in fwd[TILE].message
    assert fwd[TILE].message.endswith("nor to a kernel another accepted forward-only probe made")
    assert {d["pass"]: d["onto"] for k, d in events if k == "probed" and d.get("forward_only")}[
        "split_k"
    ] == "naive"
    # Stored with its base: read back from the store as it was written.
    (again,) = [p for p in store.probes("L1") if p.pass_name == "split_k"]
    assert again.base_source == naive


def test_a_probe_on_the_naive_kernel_becomes_a_skill_learned_there(tmp_path: Path) -> None:
    naive = (COLSUM / "naive.py").read_text()
    store = open_store(tmp_path / "k.db")
    # The simplest kernel's own timing (0.05 ms) must not be what the effect is measured
    # against: the probe was timed beside the naive kernel (its ratio: 8x on tall).
    simplest = _colsum_lineage(store, (_gate({"tall": 0.05}), _gate({"tall": 0.05})), "cuda")
    store.set_lineage_status(
        "L1", "done", "", {"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}
    )
    split = mechanical(naive, "split_k").source
    gate = _gate({"tall": 0.1}, kernel="_colsum_kernel")
    gate["stages"][1]["numbers"]["regimes"]["tall"].update(
        base_ms=0.8, ratio=8.0, ratio_lo=7.8, ratio_hi=8.2
    )
    store.add_probe(
        ProbeRow(
            "L1", 1, "split_k", simplest, True, True, None, "ok", split, gate, 1.0, True, naive
        )
    )
    (skill,) = [s for s in extract_skills(store, "L1") if s.name == "split_k"]
    assert skill.exemplar.before == naive and skill.exemplar.after == split
    assert "learned by adding it to the family's naive kernel" in skill.intent
    ((regime, context, speedup),) = [(e.regime, e.context, e.speedup) for e in skill.effects]
    assert (regime, context) == ("tall", "naive") and speedup == pytest.approx(8.0)
    assert skill.rewrite.params["kernel"] == "_colsum_kernel"
    assert any(
        "in the family's naive kernel of colsum/expert.py" in c.evidence for c in skill.conditions
    )


def test_structural_skills_come_first_among_those_whose_gain_is_unknown() -> None:
    from klineage.skills.library import load_library
    from klineage.skills.retrieve import retrieve

    d = ROOT / "src" / "klineage" / "heldout" / "matmul_long_k_small_mn"
    shipped, _ = load_library(None)
    # The 1M-long K, its program count not given: far from every regime split_k was measured
    # on (column sums), so its gain there is unknown, as most skills' is.
    from klineage.problem.shapes import features, regime_shapes

    target = {"k1m_bf16": features(regime_shapes(d / "problem.py")["k1m_bf16"])}
    ranked = [
        r for r in retrieve(shipped, d / "problem.py", d / "naive.py", capability="9.0", target=target)
        if r.selected and not r.predicted
    ]  # fmt: skip
    names = [r.skill.name for r in ranked]
    # split_k (structural: it splits K over programs) before the micro-optimizations that sort
    # before it by name; with no gain predicted for any of them, nothing else tells them apart.
    assert "split_k" in names and "cache_eviction_hints" in names, names
    assert names.index("split_k") < names.index("cache_eviction_hints")
    assert (
        all_passes()["split_k"].STRUCTURAL and not all_passes()["cache_eviction_hints"].STRUCTURAL
    )


def test_a_skill_predicted_no_gain_somewhere_and_unknown_elsewhere_is_still_tried() -> None:
    from klineage.problem.shapes import features, regime_shapes
    from klineage.skills.library import load_library
    from klineage.skills.retrieve import retrieve

    d = ROOT / "src" / "klineage" / "heldout" / "matmul_long_k_small_mn"
    shapes = regime_shapes(d / "problem.py")
    target = {r: features(shapes[r]) for r in ("k1m_bf16", "k512k_fp32")}
    shipped, _ = load_library(None)

    def split_k(known: list[str]):  # the program count read on the regimes in `known` only
        (sk,) = [
            r for r in retrieve(shipped, d / "problem.py", d / "naive.py", capability="9.0",
                                target=target, shapes={k: shapes[k]["shapes"] for k in known})
            if r.skill.name == "split_k"
        ]  # fmt: skip
        return sk

    # k512k: 512 programs fail the learned 'programs <= 256'; k1m: its count not read, and no
    # measured regime near its shape. A "no" on one and an unknown on the other: still tried.
    sk = split_k(["k512k_fp32"])
    assert sk.predicted == {"k512k_fp32": 1.0}, sk.reasons
    assert sk.selected and sk.excluded is None
    assert any("gain unknown on k1m_bf16" in x for x in sk.reasons), sk.reasons
    # Read on both: k1m's 256 programs (16 x 16 outputs) meet it.
    sk = split_k(["k1m_bf16", "k512k_fp32"])
    assert sk.predicted["k512k_fp32"] == 1.0 and sk.predicted["k1m_bf16"] > 5, sk.reasons

"""Forward-only passes probed on the CPU: the transpose and cumsum experts' tile and block scan,
added to a naive kernel standing as the walk's simplest, gated at every CPU regime, become
skills that retrieval picks for a naive kernel (held out, for the transpose).

The lineages are made by hand (expert -> naive in one step): the experts' real CPU walks take
minutes; that their simplest kernels are sites too is tests/unit/test_tiled_transpose_tile.py's
and tests/unit/test_block_scan_row_tile.py's, gated in tests/interp/test_unit_tile_gate.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import env_scope
from klineage.lineage.probe import probe_lineage
from klineage.skills.extract import extract_skills
from klineage.skills.retrieve import retrieve
from klineage.store import open_store
from tests.conftest import KERNELS, ROOT

pytestmark = pytest.mark.interpreter

HELDOUT = ROOT / "src" / "klineage" / "heldout"


@pytest.mark.parametrize(
    ("workload", "learned", "target", "regimes", "chained"),
    [
        (
            "transpose",
            "tiled_transpose",
            HELDOUT / "batched_transpose_last2",
            "odd, tall, even",
            None,
        ),
        # No held-out naive kernel is a forward scan (reverse_cumsum_rows scans backward,
        # which block_scan skips): the corpus naive is the target. The segment split has no
        # place in the naive kernel (one tile, no loop) but one in block_scan's loop.
        (
            "cumsum",
            "block_scan",
            KERNELS / "cumsum",
            "tiny, fp16_short, long_small, split_small",
            # (scan_dot, whose site the naive's one widened tile also is, is no forward-only
            # pass: the expert scans its 16-bit tiles by it, so it is a walk's step, not a probe)
            "split_scan",
        ),
    ],
    ids=["transpose", "cumsum"],
)
def test_a_forward_only_pass_the_expert_has_is_probed_and_becomes_a_skill(
    tmp_path: Path, workload: str, learned: str, target: Path, regimes: str, chained: str | None
) -> None:
    d = KERNELS / workload
    store = open_store(tmp_path / "k.db")
    store.create_lineage(
        "L1", str(d / "problem.py"), str(d / "expert.py"), "p", "e", "cpu", "first", []
    )
    expert = store.add_node("L1", 0, None, None, (d / "expert.py").read_text(), "s0", {})
    site = {"function": "", "line": 1, "description": "by hand", "params": {}}
    a1 = store.add_attempt(
        "L1", expert, 1, "block_size", "k1", site, applied=True, accepted=True, reason="by hand"
    )
    store.add_node("L1", 1, expert, a1, (d / "naive.py").read_text(), "s1", {})
    store.set_lineage_status("L1", "done", "by hand")
    with env_scope(KLINEAGE_CACHE_DIR=str(tmp_path / "cache")):
        rows = probe_lineage(store, "L1")  # the step probes' config: every CPU regime
    forward = {p.pass_name: p for p in rows if p.forward_only}
    assert forward[learned].applied and forward[learned].accepted, forward[learned].message
    # The other forward-only passes find no place in the naive kernel: recorded, not gated.
    others = [p for name, p in forward.items() if name not in (learned, chained)]
    assert others and not any(p.applied or p.gate for p in others)
    assert all(p.message.startswith("no place to add it") for p in others)
    if chained is not None:
        # Probed on the kernel the learned pass made, and gated beside it.
        second = forward[chained]
        assert second.applied and second.accepted, second.message
        assert second.base_source == forward[learned].candidate
        (then,) = [s for s in extract_skills(store, "L1") if s.name == chained]
        assert f"after {learned}" in then.intent
        assert then.exemplar.before == forward[learned].candidate

    (skill,) = [s for s in extract_skills(store, "L1") if s.name == learned]
    assert f"correct with it on: {regimes}" in [c.predicate for c in skill.conditions]
    # Nothing is timed on a CPU: one unmeasured effect per regime it was correct on.
    assert [e.regime for e in skill.effects] == regimes.split(", ")
    assert not any(e.measured for e in skill.effects)

    # Retrieved for a naive kernel of the same kind: applicable, gain unknown on a CPU,
    # written mechanically.
    (r,) = retrieve([skill], target / "problem.py", target / "naive.py", device="cpu")
    assert r.selected and r.materializer == "mechanical" and r.pass_name == learned, r.reasons

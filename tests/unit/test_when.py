"""Skill cards lead with when the optimization pays, from evidence only (skills/when.py)."""

from __future__ import annotations

from typing import Any

from klineage.skills.export import skill_md
from klineage.skills.library import shipped_library_path
from klineage.skills.model import Effect
from klineage.skills.when import short_path, when


def _skill(effects: list[Effect], **extra: Any) -> Any:
    from klineage.skills import read_json

    base = next(s for s in read_json(shipped_library_path()) if s.name == "rows_per_program")
    return base.model_copy(
        update={"effects": effects, "conditions": [], "failures_avoided": [], **extra}
    )


def _e(regime: str, speedup: float, status: str, lineage: str = "x") -> Effect:
    return Effect(regime=regime, gpu="NVIDIA H200", dtype="bfloat16", base_ms=speedup, new_ms=1.0, speedup=speedup,
                  measured=True, status=status, lineage_id=lineage)  # fmt: skip


def test_the_sentence_names_what_paid_what_did_not_and_what_cost() -> None:
    s = _skill([_e("a", 8.0, "measured"), _e("b", 2.0, "measured"), _e("c", 1.01, "within noise"),
                _e("d", 0.9, "measured"), _e("e", 3.0, "launch-bound")])  # fmt: skip
    text = when(s)
    assert text.startswith(
        "pays 2-8x on a bfloat16, b bfloat16; no gain on c bfloat16; slower (0.9x) on d bfloat16"
    )
    assert "e bfloat16" not in text and text.endswith("(H200).")  # launch-bound: never evidence


def test_old_timing_or_noise_alone_says_plainly_that_nothing_was_measured() -> None:
    old = when(_skill([_e("a", 5.0, "old timing")]))
    assert old.startswith(
        "No measured condition: its 1 effect(s) predate side-by-side device timing"
    )
    noisy = when(_skill([_e("a", 1.08, "within noise")]))
    assert noisy.startswith("No measured condition: no effect of it cleared its measured spread")


def test_evidence_that_disagrees_is_said_once_as_mixed() -> None:
    text = when(_skill([_e("a", 2.0, "measured", "l1"), _e("a", 1.0, "within noise", "l2")]))
    assert text.startswith("mixed on a bfloat16 (1-2x across lineages)")


def test_every_shipped_skill_md_states_a_measured_condition_or_that_none_was() -> None:
    from klineage.skills import read_json

    for s in read_json(shipped_library_path()):
        md = skill_md(s)
        front = md.split("---")[1]
        assert "When: " in front, s.name
        said = front.split("When: ", 1)[1]
        assert said.startswith(("pays", "no gain", "slower", "mixed", "No measured condition")), (
            s.name,
            said,
        )
        assert "/work/" not in md and "/root/" not in md, s.name  # no machine paths
    rows = next(s for s in read_json(shipped_library_path()) if s.name == "rows_per_program")
    assert "pays when row_length <= 2048" in when(rows) and "1048576x16 bfloat16" in when(rows)


def test_short_path_drops_the_machine() -> None:
    assert (
        short_path("/root/klineage/src/klineage/kernels/softmax/expert.py") == "softmax/expert.py"
    )

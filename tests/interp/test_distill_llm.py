"""The backward walk's LLM-proposed simplification, with a scripted backend and the real gate:
an accepted removal becomes a step (and a skill named by what the LLM removed), a removal that
breaks the kernel is a recorded rejection."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.lineage import distill
from klineage.llm import get_backend
from klineage.skills import extract_skills
from klineage.skills.retrieve import retrieve
from klineage.store import open_store
from tests.conftest import KERNELS

pytestmark = pytest.mark.interpreter
RMS = KERNELS / "rmsnorm"


def test_llm_simplification_steps_and_rejections(tmp_path: Path) -> None:
    naive = (RMS / "naive.py").read_text()
    assert "        num_warps=4,\n" in naive
    without_warps = naive.replace("        num_warps=4,\n", "")
    broken = without_warps.replace("y = x * rstd * w", "y = x * rstd")
    llm = get_backend("scripted")
    llm.enqueue([  # type: ignore[attr-defined]
        f"REMOVED: explicit num_warps: pins four warps per program instead of the default.\n```python\n{without_warps}```",
        f"REMOVED: weight load: the weight multiply is not needed.\n```python\n{broken}```",
    ])  # fmt: skip
    store = open_store(tmp_path / "k.db")
    lid = distill(RMS / "problem.py", RMS / "naive.py", store=store, policy="first", regimes=["tiny", "odd"],
                  pass_names=["tma_descriptors"], config=GateConfig(cache=False, allow_suspicious=True, profile_compile=False), llm=llm)  # fmt: skip
    attempts = [a for a in store.attempts(lid) if a.pass_name == "llm_simplify"]
    assert [(a.step, a.accepted) for a in attempts] == [(1, True), (2, False)]
    assert attempts[1].failed_stage == "correctness"
    assert "explicit num_warps" in attempts[0].reason
    assert (
        "Already removed in earlier steps (do not reintroduce them): explicit num_warps"
        in llm.prompts[1][0].content
    )  # type: ignore[attr-defined]
    lin = store.get_lineage(lid)
    assert (
        lin is not None
        and lin.status == "done"
        and "no simplification passes the gate" in lin.stop_reason
    )
    (skill,) = extract_skills(store, lid)
    assert skill.name == "llm_simplify" and skill.anchor == "LLM-named: explicit num_warps"
    assert (
        skill.intent.startswith("Add back explicit num_warps")
        and "num_warps=4" in skill.exemplar.diff
    )
    assert any(
        "weight" in f.message or "correctness" in (f.stage or "") for f in skill.failures_avoided
    )
    # Only an LLM can write it back: retrieval selects it for the LLM, excludes it without one.
    with_llm = retrieve([skill], RMS / "problem.py", RMS / "naive.py", device="cpu", llm=True)[0]
    without = retrieve([skill], RMS / "problem.py", RMS / "naive.py", device="cpu")[0]
    assert with_llm.selected and with_llm.materializer == "llm"
    assert not without.selected and "not registered" in without.reasons[0]

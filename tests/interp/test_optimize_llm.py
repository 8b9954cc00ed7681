"""The optimize loop's LLM materializer end to end: the real openai client against a local
chat-completions server, the real gate on the CPU. One run sees a reply that breaks the kernel
(rejected, then one repair turn), a reply that fixes it (kept, predicted), a reply with no
code and a timeout; a rerun replays the stored trajectory without calling the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.llm import get_backend
from klineage.optimize import OptimizeRefused, Settings, optimize
from klineage.skills import read_json
from klineage.skills.library import shipped_library_path
from klineage.store import open_store
from tests.chat_server import chat_server
from tests.conftest import EXAMPLE, KERNELS

pytest.importorskip("openai")
pytestmark = pytest.mark.interpreter

REPLIES = Path(__file__).resolve().parent / "replies"
RMS = KERNELS / "rmsnorm"


def _rows_skills() -> list:
    """The shipped rows_per_program skill and two copies (other ids), so one run has three
    skills an LLM must write: the naive kernel has no site for its rewrite."""
    from tests.unit.test_skills import as_measured

    rows = as_measured(
        next(
            s
            for s in read_json(shipped_library_path())
            if s.rewrite.pass_name == "rows_per_program"
        )
    )
    return [
        rows,
        *(
            rows.model_copy(update={"id": f"copy{i}", "anchor": f"{rows.anchor} ({i})"})
            for i in (1, 2)
        ),
    ]


def test_llm_materializer_breaks_repairs_no_code_timeout_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The LLM writes the skill: no other pass form of it (multi_row writes rows per program
    # into this naive kernel mechanically; skills/retrieve.py OTHER_FORMS).
    monkeypatch.setattr("klineage.skills.retrieve.OTHER_FORMS", {})
    fixed = (REPLIES / "rmsnorm_rows.py").read_text()
    broken = fixed.replace("y = x * rstd[:, None] * w[None, :]", "y = x * rstd[:, None]")
    assert broken != fixed
    store = open_store(tmp_path / "k.db")
    settings = Settings(budget=10, regimes=["tiny", "odd"], llm_timeout_s=1.0)
    config = GateConfig(cache=False)
    with chat_server() as server:
        server.replies.extend([
            f"Here is the tiled kernel.\n```python\n{broken}```\n",
            f"Sorry, I dropped the weight.\n```python\n{fixed}```",
            "I would pack several rows into each program, but I cannot write the code now.",
            ("sleep", 3, f"```python\n{fixed}```"),
        ])  # fmt: skip
        llm = get_backend(f"openai-compatible:{server.url}:tiny-model")
        llm.probe()  # type: ignore[attr-defined]
        summary = optimize(RMS / "problem.py", RMS / "naive.py", store=store, skills=_rows_skills(), settings=settings,
                           config=config, llm=llm)  # fmt: skip
        trials = store.trials(summary["run_id"])
        asked = len(server.requests)
        first_prompt = server.requests[0]["messages"][-1]["content"]
        repair_prompt = server.requests[1]["messages"][-1]["content"]
        # The same command again: every trial replays from the store, no request is made.
        again = optimize(RMS / "problem.py", RMS / "naive.py", store=store, skills=_rows_skills(), settings=settings,
                         config=config, llm=llm)  # fmt: skip
        assert len(server.requests) == asked == 4
    got = [(t.materializer, t.gated, t.accepted, t.kept) for t in trials]
    assert got == [
        ("llm", True, False, False),  # broke it: the gate rejects
        ("llm-repair", True, True, True),  # the repair turn fixes it: kept, predicted
        ("llm", False, False, False),  # no code in the reply
        ("llm", False, False, False),  # timeout
    ], got
    assert trials[0].failed_stage == "correctness"
    assert "no code block defining class ModelNew" in trials[2].message
    assert "no reply within 1 s" in trials[3].message
    assert "rows_per_program" in first_prompt and "_rms_norm_kernel" in first_prompt
    assert "The gate rejected that file" in repair_prompt and "correctness" in repair_prompt
    assert summary["label"] == "predicted, not measured" and summary["gate_calls"] == 2
    assert summary["best_source"] == fixed and summary["tokens"] == 3 * 10
    assert again["best_source"] == fixed and again["gate_calls"] == 2


def test_an_unreachable_server_fails_before_any_work() -> None:
    from klineage.errors import UsageError
    from tests.chat_server import free_port

    llm = get_backend(f"openai-compatible:http://127.0.0.1:{free_port()}/v1:m")
    with pytest.raises(UsageError, match="cannot reach .* no work was started"):
        llm.probe()  # type: ignore[attr-defined]


def test_a_start_that_fails_the_gate_is_refused_with_the_gates_message(tmp_path: Path) -> None:
    store = open_store(tmp_path / "k.db")
    with pytest.raises(OptimizeRefused, match="fails the gate: correctness"):
        optimize(EXAMPLE / "problem.py", EXAMPLE / "broken_mask.py", store=store, skills=[],
                 config=GateConfig(cache=False))  # fmt: skip
    run = store.list_runs()[0]
    assert run.status == "refused" and "correctness" in run.stop_reason


def test_mechanical_optimize_keeps_a_predicted_gain_on_the_cpu(tmp_path: Path) -> None:
    """Softmax's naive kernel with the shipped library: every kept candidate passed the gate
    and its skill predicts a gain; nothing claims a measurement."""
    store = open_store(tmp_path / "k.db")
    summary = optimize(KERNELS / "softmax" / "problem.py", KERNELS / "softmax" / "naive.py", store=store,
                       skills=read_json(shipped_library_path()), settings=Settings(budget=3, regimes=["tiny_rows", "odd"]))  # fmt: skip
    trials = store.trials(summary["run_id"])
    assert summary["measured"] is False and summary["speedup"] is None
    assert all(t.materializer == "mechanical" for t in trials) and 1 <= summary["gate_calls"] <= 3
    for t in trials:
        if t.kept:
            assert t.accepted and t.predicted is not None and t.predicted >= 1.05
    kept = [t for t in trials if t.kept]
    naive = (KERNELS / "softmax" / "naive.py").read_text()
    assert summary["best_source"] == (kept[-1].candidate if kept else naive)

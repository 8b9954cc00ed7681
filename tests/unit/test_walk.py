"""The backward walk's logic with a fake pass and a fake gate (no kernels run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from klineage.config import GateConfig
from klineage.gate.records import GateResult, RegimeOutcome, Stage, StageResult, Status
from klineage.lineage import load_view
from klineage.lineage.walk import Walk, slowdown
from klineage.rewrite.base import RewritePass, RewriteResult, Site
from klineage.store import open_store


class DropMarker(RewritePass):
    """Fake optimization: a line '# opt: NAME'. Backward removes one such line."""

    NAME = "drop_marker"
    DESCRIPTION = "fake"
    CATEGORY = "hint"
    ANCHOR = "a marker line"

    def backward_sites(self, source: str) -> list[Site]:
        lines = [i for i, line in enumerate(source.splitlines()) if line.startswith("# opt:")]
        return [
            self.site("backward", k, i + 1, "", source.splitlines()[i]) for k, i in enumerate(lines)
        ]

    def simplify(self, source: str, site: Site) -> RewriteResult:
        lines = source.splitlines(keepends=True)
        del lines[site.line - 1]
        return RewriteResult(True, "dropped", "".join(lines), site)


def fake_gate(times: dict[str, float], reject: set[str]) -> Any:
    calls: list[str] = []

    def gate(self: Walk, source: str, base: str | None = None) -> GateResult:
        calls.append(source)
        markers = {
            line.split(":")[1].strip() for line in source.splitlines() if line.startswith("# opt:")
        }
        ok = not (reject & (set(times) - markers))  # removing a 'reject' marker breaks the kernel
        ms = 1.0 + sum(times[m] for m in times if m not in markers)
        stages = [
            StageResult(stage=s, status=Status.PASSED)
            for s in (Stage.LOAD, Stage.STATIC_GUARDS, Stage.COMPILE, Stage.RUNTIME_GUARDS)
        ]
        stages.append(
            StageResult(
                stage=Stage.CORRECTNESS,
                status=Status.PASSED if ok else Status.FAILED,
                message="" if ok else "wrong",
                regimes=[
                    RegimeOutcome(
                        regime="r", status=Status.PASSED if ok else Status.FAILED, dtype="float32"
                    )
                ],
            )
        )
        stages.append(
            StageResult(
                stage=Stage.PROFILE,
                status=Status.PASSED,
                numbers={"regimes": {"r": _row(ms)}},
            )
        )
        return GateResult(problem="p", candidate="c", device="cuda", accepted=ok, stages=stages)

    return gate, calls


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    problem = tmp_path / "problem.py"
    problem.write_text("# problem\n")
    expert = tmp_path / "expert.py"
    expert.write_text("x = 1\n# opt: a\n# opt: b\n# opt: c\n")
    return problem, expert


def walk(store: Any, files: tuple[Path, Path], policy: str, device: str = "cuda") -> Walk:
    return Walk(
        store,
        files[0],
        files[1],
        device=device,
        policy=policy,
        max_steps=10,
        regimes=[],
        config=GateConfig(),
        passes={"drop_marker": DropMarker()},
        on_event=None,
    )


def test_least_cost_removes_the_cheapest_optimization_first_and_records_rejections(
    tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, _ = fake_gate({"a": 0.5, "b": 0.01, "c": 0.0}, reject={"c"})
    monkeypatch.setattr(Walk, "gate", gate)
    store = open_store(tmp_path / "k.db")
    lid = walk(store, files, "least_cost").run()
    view = load_view(store, lid)
    assert [s.description for s in view.path] == ["# opt: b", "# opt: a"]
    assert view.lineage.stop_reason == "no simplification passes the gate"
    rejected = [s for s in view.steps if s.applied and not s.accepted]
    assert rejected and all(
        s.description == "# opt: c" and s.stage == "correctness" for s in rejected
    )
    assert "# opt: c" in view.sources[-1] and "# opt: a" not in view.sources[-1]
    assert view.path[0].speedup["r"] > 1  # removing b made it slower: b bought a speedup


def test_an_interrupted_walk_resumes_without_regating(
    tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, calls = fake_gate({"a": 0.1, "b": 0.1, "c": 0.1}, reject=set())
    monkeypatch.setattr(Walk, "gate", gate)
    store = open_store(tmp_path / "k.db")
    w = walk(store, files, "first")
    w.max_steps = 1
    lid = w.run()
    assert store.get_lineage(lid).status == "done"  # type: ignore[union-attr]
    # Simulate a kill mid-walk: the lineage is still running, with one step stored.
    store.set_lineage_status(lid, "running")
    first_calls = len(calls)
    lid2 = walk(store, files, "first").run()
    assert lid2 == lid
    view = load_view(store, lid)
    assert len(view.path) == 3 and view.lineage.stop_reason == "no registered optimization remains"
    assert len(calls) == first_calls + 2  # only the two new steps were gated


def test_slowdown_is_a_geometric_mean_over_common_regimes() -> None:
    def g(rows: dict[str, float]) -> dict[str, Any]:
        return {
            "stages": [
                {
                    "stage": "profile",
                    "numbers": {"regimes": {r: {"kernel_ms": v} for r, v in rows.items()}},
                }
            ]
        }

    assert slowdown(g({"a": 1.0, "b": 1.0}), g({"a": 2.0, "b": 0.5})) == pytest.approx(1.0)
    assert slowdown(g({}), g({"a": 1.0})) is None


def _row(ms: float, **extra: Any) -> dict[str, Any]:
    return {"kernel_ms": ms, "kernel_p20_ms": ms, "kernel_p80_ms": ms, "basis": "device",
            "host_ms": ms, "host_p20_ms": ms, "host_p80_ms": ms, **extra}  # fmt: skip


def _gate(
    rows: dict[str, dict[str, Any]], sha: str = "", base: str | None = None
) -> dict[str, Any]:
    return {
        "candidate_sha": sha,
        "base_sha": base,
        "stages": [{"stage": "profile", "numbers": {"regimes": rows}}],
    }


def test_slowdown_uses_the_side_by_side_ratio_and_leaves_launch_bound_regimes_out() -> None:
    parent = _gate({"big": _row(1.0), "tiny": _row(0.002)}, sha="p")
    # The child was timed beside its parent: its ratio (parent / child) decides, not the
    # medians of two calls (which here say 4x); the launch-bound regime is not counted.
    rows = {
        "big": _row(4.0, base_ms=2.0, ratio=0.5, ratio_lo=0.48, ratio_hi=0.52),
        "tiny": _row(
            0.02, base_ms=0.002, ratio=0.1, ratio_lo=0.09, ratio_hi=0.11, launch_bound=True
        ),
    }
    assert slowdown(parent, _gate(rows, sha="c", base="p")) == pytest.approx(2.0)
    only_tiny = _gate({"tiny": rows["tiny"]}, sha="c", base="p")
    assert slowdown(parent, only_tiny) is None
    # A ratio measured beside another kernel is not this pair's: the two calls' medians are.
    assert slowdown(parent, _gate(rows, sha="c", base="other")) == pytest.approx(4.0)


def test_refuses_an_expert_that_fails_the_gate(
    tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, _ = fake_gate({"a": 0.0}, reject={"x"})

    def failing(self: Walk, source: str, base: str | None = None) -> GateResult:
        r = gate(self, source)
        return r.model_copy(update={"accepted": False})

    monkeypatch.setattr(Walk, "gate", failing)
    store = open_store(tmp_path / "k.db")
    lid = walk(store, files, "first").run()
    lin = store.get_lineage(lid)
    assert lin is not None and lin.status == "refused" and "fails the gate" in lin.stop_reason

"""The hostile corpus (tests/interp/candidates/hostile, problems/hostile): every reward hack is
rejected at the layer meant to catch it, and, where that layer is the static guards, again by
the later layers with the static guards off (run_gate(static_guards=False)), so that each layer
is shown to hold on its own. Problem faults are the problem's (fault=problem, exit 2), and
nothing a candidate or a problem does reaches the user's files, the cache, the store or the
parent."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from klineage.config import GateConfig
from klineage.gate import GateResult, Stage, run_gate
from klineage.gate.records import Fault
from klineage.gate.sandbox import IsolationLevel, strongest_level
from tests.conftest import CANDIDATES, EXAMPLE, PROBLEMS, ROOT

pytestmark = pytest.mark.interpreter

HOSTILE = CANDIDATES / "hostile"
BAD_PROBLEMS = PROBLEMS / "hostile"
SOFTMAX = EXAMPLE / "problem.py"

S, R, C, L = Stage.STATIC_GUARDS, Stage.RUNTIME_GUARDS, Stage.CORRECTNESS, Stage.LOAD
# file -> (stage with every guard, stage with the static guards off or None where the static
# guard is the layer designed for it, a word the first rejection's message contains)
CASES: dict[str, tuple[Stage, Stage | None, str]] = {
    # checker-in-process: nothing of the checker is in the candidate's process any more
    "expected_from_stack": (S, C, "imports sys"),
    "expected_from_gc": (S, R, "imports gc"),
    "patch_reference_forward": (S, C, "imports sys"),
    "patch_torch_softmax": (S, C, "assigns torch.softmax"),
    "patch_compare": (S, C, "importlib"),
    "patch_in_triton": (S, C, "imports sys"),
    "gc_patch_tolerance": (S, C, "imports gc"),
    "forged_events_argv": (S, C, "imports json"),
    "forged_events_proc": (S, C, "imports json"),
    "patch_triton_launch": (S, R, "getattr"),
    # monitor blind spots
    "thread_compute": (S, R, "threading"),
    "fork_compute": (S, R, "mmap"),
    "numpy_compute": (S, R, "numpy"),
    "ctypes_memmove": (S, R, "ctypes"),
    "disable_modes": (S, R, "_python_dispatch"),
    "grid_lambda": (R, R, "aten._softmax"),
    "pre_run_hook": (R, R, "aten._softmax"),
    "autotune_prehook": (R, R, "aten._softmax"),
    "custom_op_clone": (S, R, "torch.library"),
    "lazy_subclass_dispatch": (S, R, "_pytree"),
    "lazy_subclass_function": (S, R, "subclasses torch.Tensor"),
    "jit_python_helper": (S, None, "numpy"),
    "item_loop": (R, R, "_local_scalar_dense"),
    # behaviour the gate used never to sample
    "first_16_calls": (C, C, "beyond"),
    "first_calls_per_shape": (C, C, "changed in place at random positions"),
    "corner_fingerprint_cache": (C, C, "changed in place at random positions"),
    "klineage_in_sys_modules": (S, C, "imports sys"),
    "gate_env_detect": (S, C, "imports sys"),
    "autotune_late_wrong_config": (C, C, "autotune config 2/2"),
    # the cache and the store
    "plant_cache_verdicts": (S, C, "hashlib"),
    "store_update_accepted": (S, C, "sqlite3"),
    "home_marker_write": (S, None, "pathlib"),
    # inputs beyond get_inputs
    "clamp_before_exp": (C, C, "beyond get_inputs"),
    "fixed_max": (C, C, "beyond get_inputs"),
    "partial_max": (C, C, "beyond get_inputs"),
    "writes_nothing": (C, C, "non-finite"),
}


def gate(candidate: Path, problem: Path = SOFTMAX, **kw: object) -> GateResult:
    timeout = float(kw.pop("timeout_s", 120.0))  # type: ignore[arg-type]
    return run_gate(problem, candidate, config=GateConfig(cache=False, timeout_s=timeout), **kw)  # type: ignore[arg-type]


def test_every_hostile_candidate_is_listed() -> None:
    on_disk = {p.stem for p in HOSTILE.glob("*.py")}
    special = {"relu_copy", "plant_then_hang", "plant_then_kill_parent"}  # tested below
    assert on_disk - special == set(CASES), "add the new file to CASES with its expected stages"


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_candidate_is_rejected_at_its_layer(name: str) -> None:
    stage, _, word = CASES[name]
    r = gate(HOSTILE / f"{name}.py")
    assert not r.accepted and r.fault is Fault.CANDIDATE
    assert r.failed_stage is stage, r.message
    assert word in r.message, r.message


# Past the static guards, one or two of each class in CI (each is a full gate call on the CPU);
# KLINEAGE_HOSTILE_ALL=1 runs every one (docs/benchmarks.md has that run).
PAST_STATIC_IN_CI = {
    "expected_from_stack", "patch_compare", "patch_torch_softmax", "thread_compute", "fork_compute",
    "numpy_compute", "ctypes_memmove", "disable_modes", "custom_op_clone", "lazy_subclass_function",
    "klineage_in_sys_modules", "plant_cache_verdicts",
}  # fmt: skip
PAST_STATIC = sorted(
    n for n, (s, off, _) in CASES.items()
    if s is Stage.STATIC_GUARDS and off is not None
    and (n in PAST_STATIC_IN_CI or os.environ.get("KLINEAGE_HOSTILE_ALL") == "1")
)  # fmt: skip


@pytest.mark.parametrize("name", PAST_STATIC)
def test_without_static_guards_the_later_layers_still_hold(name: str) -> None:
    _, stage, _ = CASES[name]
    r = gate(HOSTILE / f"{name}.py", static_guards=False)
    assert not r.accepted, f"{name} got past every layer after the static guards"
    assert r.failed_stage is stage, r.message


def test_relu_that_copies_its_input_fails_on_signed_inputs() -> None:
    r = gate(HOSTILE / "relu_copy.py", BAD_PROBLEMS / "relu_rand.py")
    assert r.failed_stage is Stage.CORRECTNESS and "beyond get_inputs" in r.message, r.message


@pytest.mark.parametrize(
    ("problem", "words"),
    [
        ("forward_raises", ["forward_raises.py:", "reference Model.forward raised"]),
        ("init_raises", ["init_raises.py:", "Model(*get_init_inputs()) failed"]),
        ("get_inputs_valueerror", ["get_inputs_valueerror.py:", "raised ValueError"]),
        ("nan_reference", ["nan_reference.py", "non-finite"]),
        ("exit_at_import", ["exit_at_import.py", "exited with code 3"]),
        ("syntax_error", ["syntax_error.py:", "syntax error"]),
    ],
)
def test_a_faulty_problem_is_the_problems_fault(problem: str, words: list[str]) -> None:
    r = gate(EXAMPLE / "candidate.py", BAD_PROBLEMS / f"{problem}.py")
    assert not r.accepted and r.fault is Fault.PROBLEM and r.failed_stage is Stage.LOAD
    for word in words:
        assert word in r.message, r.message


def test_a_hanging_problem_is_the_problems_fault() -> None:
    r = gate(EXAMPLE / "candidate.py", BAD_PROBLEMS / "get_inputs_hangs.py", timeout_s=15)
    assert r.fault is Fault.PROBLEM and "did not finish making inputs" in r.message


def test_a_kernel_that_writes_nothing_cannot_pass_a_nan_reference() -> None:
    r = gate(HOSTILE / "writes_nothing.py", BAD_PROBLEMS / "nan_reference.py")
    assert r.fault is Fault.PROBLEM and "non-finite" in r.message


def test_problem_code_cannot_write_the_users_home() -> None:
    marker = Path.home() / "klineage-hostile-marker"
    marker.unlink(missing_ok=True)
    r = gate(EXAMPLE / "candidate.py", BAD_PROBLEMS / "marker_at_import.py")
    assert r.accepted, r.message  # its own private HOME took the write
    assert not marker.exists()


def test_candidate_code_cannot_write_the_users_home() -> None:
    marker = Path.home() / "klineage-hostile-marker-candidate"
    marker.unlink(missing_ok=True)
    gate(HOSTILE / "home_marker_write.py", static_guards=False)
    assert not marker.exists()


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


needs_isolation = pytest.mark.skipif(
    strongest_level() is IsolationLevel.PROCESS,
    reason="only a sandbox (bwrap or uid) keeps a candidate from the cache, the store and the parent",
)


@needs_isolation
def test_planted_verdicts_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KLINEAGE_CACHE_DIR", str(cache))
    config = GateConfig(cache=True)
    no_kernel = tmp_path / "no_kernel.py"
    no_kernel.write_text(
        "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    first = run_gate(
        SOFTMAX, EXAMPLE / "candidate.py", regimes=["tiny_rows"], config=config, cache_dir=cache
    )
    before = _tree_digest(cache)
    for name in ("plant_cache_verdicts", "plant_then_hang"):
        r = run_gate(SOFTMAX, HOSTILE / f"{name}.py", regimes=["tiny_rows"], static_guards=False,
                     config=GateConfig(cache=True, timeout_s=10), cache_dir=cache)  # fmt: skip
        assert not r.accepted
    assert _tree_digest(cache) == before
    again = run_gate(
        SOFTMAX, EXAMPLE / "candidate.py", regimes=["tiny_rows"], config=config, cache_dir=cache
    )
    assert again.cached and again.accepted == first.accepted
    forged = run_gate(SOFTMAX, no_kernel, regimes=["tiny_rows"], config=config, cache_dir=cache)
    assert not forged.accepted and not forged.cached


def _store_forger(tmp_path: Path, db: Path) -> Path:
    """store_update_accepted.py told the store's path, as a candidate that guessed it would be."""
    src = (HOSTILE / "store_update_accepted.py").read_text()
    src = src.replace(
        "def _candidate_dbs():\n",
        f"def _candidate_dbs():\n    if Path({str(db)!r}).is_file():\n        return [Path({str(db)!r})]\n",
        1,
    )
    path = tmp_path / "forger.py"
    path.write_text(src)
    return path


@pytest.mark.parametrize("level", ["strongest", "process"])
def test_a_candidate_cannot_touch_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    """At the strongest level the store is out of reach; at the bare process level (the control
    that shows this test can fail) the same candidate rewrites it."""
    if level == "strongest" and strongest_level() is IsolationLevel.PROCESS:
        pytest.skip("no sandbox on this machine")
    db = tmp_path / "klineage.db"
    with sqlite3.connect(db) as con:
        con.execute(
            "create table trials (id integer primary key, accepted integer, kept integer, failed_stage text, message text)"
        )
        con.execute(
            "insert into trials (accepted, kept, failed_stage, message) values (0, 0, 'correctness', 'wrong')"
        )
    before = db.read_bytes()
    if level == "process":
        monkeypatch.setenv("KLINEAGE_ISOLATION", "process")
    r = gate(_store_forger(tmp_path, db), static_guards=False)
    assert not r.accepted
    with sqlite3.connect(db) as con:
        accepted = con.execute("select accepted from trials").fetchone()[0]
    if level == "process":
        assert accepted == 1, "the control: unsandboxed, the forger does rewrite the store"
    else:
        assert db.read_bytes() == before and accepted == 0


@pytest.mark.parametrize("level", ["strongest", "process"])
def test_a_candidate_that_kills_its_parent_kills_nothing(level: str) -> None:
    """Run in a child python, so that pytest is never the victim. Unsandboxed (the control), the
    same candidate does kill the process running the gate."""
    if level == "strongest" and strongest_level() is IsolationLevel.PROCESS:
        pytest.skip("no sandbox on this machine")
    script = (
        "from klineage.gate import run_gate\nfrom klineage.config import GateConfig\n"
        f"r = run_gate({str(SOFTMAX)!r}, {str(HOSTILE / 'plant_then_kill_parent.py')!r}, regimes=['tiny_rows'],"
        " static_guards=False, config=GateConfig(cache=False, timeout_s=60))\n"
        "print('VERDICT', r.accepted, r.failed_stage)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    if level == "process":
        env["KLINEAGE_ISOLATION"] = "process"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    if level == "process":
        assert done.returncode == -9, (
            "the control: unsandboxed, the candidate kills the gate's process"
        )
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "VERDICT False" in done.stdout


def test_an_optimize_loop_whose_llm_writes_hostile_code_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An LLM materializer that answers with store forgers, cache planters and parent killers:
    every proposal is rejected, the loop finishes, and the store keeps what the parent wrote."""
    # The LLM writes every skill: no other pass form of it (multi_row would write rows per
    # program into this naive kernel mechanically; skills/retrieve.py OTHER_FORMS).
    monkeypatch.setattr("klineage.skills.retrieve.OTHER_FORMS", {})
    from klineage.llm import get_backend
    from klineage.optimize import Settings, optimize
    from klineage.skills import read_json
    from klineage.skills.library import shipped_library_path
    from klineage.store import open_store
    from tests.conftest import KERNELS

    rows = next(
        s for s in read_json(shipped_library_path()) if s.rewrite.pass_name == "rows_per_program"
    )
    skills = [
        rows,
        *(
            rows.model_copy(update={"id": f"copy{i}", "anchor": f"{rows.anchor} ({i})"})
            for i in (1, 2)
        ),
    ]
    hostile = [
        (HOSTILE / f"{n}.py").read_text()
        for n in ("store_update_accepted", "plant_cache_verdicts", "plant_then_kill_parent")
    ]
    llm = get_backend("scripted")
    llm.enqueue([f"```python\n{src}```" for src in hostile] * 2)  # type: ignore[attr-defined]
    store = open_store(tmp_path / "k.db")
    rms = KERNELS / "rmsnorm"
    summary = optimize(rms / "problem.py", rms / "naive.py", store=store, skills=skills,
                       settings=Settings(budget=4, regimes=["tiny"], repair=False),
                       config=GateConfig(cache=False), llm=llm)  # fmt: skip
    trials = store.trials(summary["run_id"])
    assert trials and all(not t.accepted for t in trials if t.gated)
    assert summary["best_source"] == (rms / "naive.py").read_text()

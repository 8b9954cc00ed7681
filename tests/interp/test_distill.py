"""klineage distill on real kernels under the interpreter: the CLI, JSON, kill -9 and resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE

pytestmark = pytest.mark.interpreter

HERE = Path(__file__).resolve().parent
KERNEL = HERE / "kernels" / "softmax_hinted.py"
PROBLEM = EXAMPLE / "problem.py"


def cli(*args: str, db: Path) -> list[str]:
    return [sys.executable, "-m", "klineage", *args, "--db", str(db)]


def fresh_cache(tmp_path: Path) -> dict[str, str]:
    """An environment whose gate cache is empty, so every gate call really runs (a cache shared
    with another test would let a walk finish before it can be killed)."""
    return {**os.environ, "KLINEAGE_CACHE_DIR": str(tmp_path / "cache")}


def count(db: Path, table: str) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as c:
            return int(c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_distill_json_lists_every_step_with_its_rewrite_and_verdict(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    out = subprocess.run(
        cli("distill", str(PROBLEM), str(KERNEL), "--regime", "tiny_rows", "--policy", "first", "--json", db=db),
        capture_output=True, text=True, timeout=600, check=False, env=fresh_cache(tmp_path),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "done" and data["stop_reason"].startswith(
        "no registered optimization remains"
    )
    assert data["effects"] == "not measured (no GPU)"
    hinted = [s for s in data["steps"] if s["rewrite"] == "cache_eviction_hints"]
    assert len(hinted) == 3 and all(s["accepted"] is True for s in hinted)
    assert all(isinstance(s["accepted"], bool) and s["rewrite"] for s in data["steps"])
    shown = subprocess.run(
        cli("lineage", "show", data["id"][:8], "--json", db=db),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0 and json.loads(shown.stdout)["path"] == data["path"]
    final = subprocess.run(
        cli("lineage", "show", data["id"], "--source", str(len(data["path"])), db=db),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (
        "eviction_policy" not in final.stdout
        and "cache_modifier" not in final.stdout
        and "class ModelNew" in final.stdout
    )


def test_kill_9_mid_walk_loses_nothing_gated_and_the_rerun_resumes(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    args = cli(
        "distill",
        str(PROBLEM),
        str(KERNEL),
        "--regime",
        "tiny_rows",
        "--policy",
        "first",
        "--passes",
        "cache_eviction_hints",
        db=db,
    )
    env = fresh_cache(tmp_path)
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env
    )
    deadline = time.monotonic() + 300
    while count(db, "nodes") < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the walk finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the walk and its gate child, mid-walk
    proc.wait()
    nodes_at_kill, attempts_at_kill = count(db, "nodes"), count(db, "attempts")
    assert nodes_at_kill >= 2 and attempts_at_kill >= 1
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("SELECT status FROM lineages").fetchone()[0] == "running"
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False, env=env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "resuming lineage" in rerun.stdout
    assert count(db, "nodes") == 4  # the expert and three steps
    with sqlite3.connect(db) as c:
        keys = [r[0] for r in c.execute("SELECT parent_id || site_key FROM attempts")]
    assert len(keys) == len(set(keys)) == 3  # nothing gated twice


def test_kill_9_mid_optimize_loses_no_trial_and_the_rerun_resumes(tmp_path: Path) -> None:
    """The optimize loop commits each trial as it happens: killed after the first, the same
    command resumes from the store, keeps the recorded trial and finishes the run."""
    from tests.conftest import KERNELS

    db = tmp_path / "k.db"
    naive = KERNELS / "softmax" / "naive.py"
    args = cli(
        "optimize",
        str(KERNELS / "softmax" / "problem.py"),
        str(naive),
        "--budget",  # 2: one trial committed before the kill, one after the resume
        "2",
        "--regime",
        "tiny_rows",
        db=db,
    )
    env = fresh_cache(tmp_path)
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env
    )
    deadline = time.monotonic() + 300
    while count(db, "trials") < 1 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the loop and its gate child
    proc.wait()
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        first = c.execute("SELECT seq, candidate_sha FROM trials ORDER BY seq").fetchone()
        assert c.execute("SELECT status FROM runs").fetchone()[0] == "running"
    rerun = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False, env=env)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "resuming run" in rerun.stdout and "(replayed)" in rerun.stdout
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT seq, candidate_sha FROM trials ORDER BY seq").fetchone() == first
        assert c.execute("SELECT status FROM runs").fetchone()[0] == "done"
        seqs = [r[0] for r in c.execute("SELECT seq FROM trials ORDER BY seq")]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 2

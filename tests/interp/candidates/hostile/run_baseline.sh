#!/usr/bin/env bash
# Gate every hostile candidate (this folder) and hostile problem (tests/interp/problems/hostile)
# on the CPU and write the outcomes as JSON (default: baseline.json beside this script).
#
#   tests/interp/candidates/hostile/run_baseline.sh [OUT.json]
#
#   KL_GATE_REV=HEAD   gate the corpus with the gate of that git revision (exported read-only with
#                      `git archive` into a temporary folder); default: the working tree's src/
#   KL_JOBS=2          gate calls in parallel (default 2: the CI machine has 2 cores)
#
# Every call runs with a fresh private HOME and KLINEAGE_CACHE_DIR (new temporary folders), so
# the cache, store and home attacks only ever hit throwaway locations; the store attack is shown
# on a throwaway database seeded there. Caching is off (--no-cache) for the main pass; a second
# pass, with the cache on, checks whether the planted verdicts are then served.
# plant_then_kill_parent.py SIGKILLs its parent: here that is the `klineage gate` subprocess.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" - "$@" <<'PY'
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

ROOT = Path.cwd()
CANDS = ROOT / "tests/interp/candidates/hostile"
PROBS = ROOT / "tests/interp/problems/hostile"
SOFTMAX = ROOT / "src/klineage/examples/softmax"
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else CANDS / "baseline.json"
HANGS = {"plant_then_hang.py", "get_inputs_hangs.py"}

rev = os.environ.get("KL_GATE_REV")
if rev:
    src_root = Path(tempfile.mkdtemp(prefix="kl-gate-src-"))
    archive = subprocess.run(["git", "archive", rev, "src"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src_root)], input=archive, check=True)
    src = src_root / "src"
    commit = subprocess.run(["git", "rev-parse", "--short", rev], check=True, capture_output=True, text=True).stdout.strip()
else:
    src, commit = ROOT / "src", "working tree"
home = Path(tempfile.mkdtemp(prefix="kl-hostile-home-"))
cache = Path(tempfile.mkdtemp(prefix="kl-hostile-cache-"))
env = {k: v for k, v in os.environ.items() if not k.startswith("KLINEAGE_")}
env.update(HOME=str(home), KLINEAGE_CACHE_DIR=str(cache), PYTHONPATH=str(src))
env.pop("XDG_CACHE_HOME", None)
env.pop("XDG_DATA_HOME", None)
py = str(ROOT / ".venv/bin/python")
print(f"gate: {src} ({commit}); HOME={home}; KLINEAGE_CACHE_DIR={cache}", flush=True)

# A throwaway store with one rejected trial, for store_update_accepted.py to forge.
db = home / ".local/share/klineage/klineage.db"
seed = f"""
from pathlib import Path
from klineage.store import open_store
p = Path({str(db)!r}); p.parent.mkdir(parents=True, exist_ok=True)
s = open_store(p)
s.create_run("hostile-demo", "problem.py", "kernel.py", "a", "b", "cpu", "greedy", {{}})
s.add_trial("hostile-demo", 1, "p", "l", None, "mechanical", "b", gated=True, accepted=False, failed_stage="correctness", message="wrong")
"""
subprocess.run([py, "-c", seed], env=env, check=True)


def header(path):
    lines = path.read_text(encoding="utf-8").split('"""', 2)[1].strip().splitlines()
    klass = lines[0].split("(", 1)[1].split(")", 1)[0] if lines[0].startswith("Hostile (") else "?"
    expect = lines[1].removeprefix("Expect: ") if len(lines) > 1 else "?"
    return klass, expect


def gate(problem, candidate, *extra, cache_on=False):
    timeout = "20" if {problem.name, candidate.name} & HANGS else "60"
    cmd = [py, "-m", "klineage", "gate", str(problem), str(candidate), "--device", "cpu",
           "--timeout", timeout, "--json", *extra] + ([] if cache_on else ["--no-cache"])  # fmt: skip
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    try:
        d = json.loads(p.stdout)
    except json.JSONDecodeError:
        how = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}"
        tail = (p.stderr.strip().splitlines() or [""])[-1][:200]
        return {"rc": p.returncode, "outcome": f"klineage crashed ({how}, no verdict)", "message": tail}
    stage = d.get("failed_stage")
    outcome = "accepted" if d["accepted"] else f"rejected at {stage}"
    return {"rc": p.returncode, "outcome": outcome, "failed_stage": stage,
            "cached": d.get("cached", False), "message": d["message"][:400]}  # fmt: skip


jobs = []
for c in sorted(CANDS.glob("*.py")):
    problem = PROBS / "relu_rand.py" if c.name == "relu_copy.py" else SOFTMAX / "problem.py"
    jobs.append(("candidate", c, problem, c))
for p in sorted(PROBS.glob("*.py")):
    if p.name == "relu_rand.py":
        jobs.append(("problem", p, p, CANDS / "relu_copy.py"))
        continue
    jobs.append(("problem", p, p, SOFTMAX / "candidate.py"))
    if p.name == "nan_reference.py":
        jobs.append(("problem", p, p, CANDS / "writes_nothing.py"))


def run(job):
    kind, file, problem, candidate = job
    klass, expect = header(file)
    r = gate(problem, candidate)
    row = {"file": str(file.relative_to(ROOT)), "kind": kind, "class": klass, "expect": expect,
           "problem": str(problem.relative_to(ROOT)), "candidate": str(candidate.relative_to(ROOT)), **r}  # fmt: skip
    print(f"{file.name:32} vs {problem.name if kind == 'candidate' else candidate.name:28} {r['outcome']}", flush=True)
    return row


with ThreadPoolExecutor(max_workers=int(os.environ.get("KL_JOBS", "2"))) as pool:
    rows = list(pool.map(run, jobs))

# Second pass, cache on: are the verdicts planted by the cache attacks served?
problem = SOFTMAX / "problem.py"
followups = {
    "plant_cache_verdicts.py -r tiny_rows": gate(problem, CANDS / "plant_cache_verdicts.py", "-r", "tiny_rows", cache_on=True),
    "autotune_prehook.py (a sibling)": gate(problem, CANDS / "autotune_prehook.py", cache_on=True),
    "plant_then_hang.py": gate(problem, CANDS / "plant_then_hang.py", cache_on=True),
    "plant_then_kill_parent.py": gate(problem, CANDS / "plant_then_kill_parent.py", cache_on=True),
}
import sqlite3

conn = sqlite3.connect(db)
side_effects = {
    "cache entries planted": sum(1 for _ in (cache / "gate").rglob("*.json")) if (cache / "gate").exists() else 0,
    "store trials accepted / total": "{}/{}".format(*conn.execute("SELECT sum(accepted), count(*) FROM trials").fetchone()),
    "store triggers": [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")],
    "markers in private HOME": sorted(p.name for p in home.glob("klineage-hostile-marker*")),
    "markers in real HOME": sorted(p.name for p in Path.home().glob("klineage-hostile-marker*")),
}
conn.close()
# The killed parent could not remove its temporary folder: remove exactly that one.
import shutil

for d in Path(tempfile.gettempdir()).glob("klineage-gate-*"):
    req = d / "request.json"
    if req.is_file() and "plant_then_kill_parent.py" in req.read_text(errors="replace"):
        shutil.rmtree(d, ignore_errors=True)

result = {"date": date.today().isoformat(), "gate": commit, "home": str(home), "cache": str(cache),
          "rows": rows, "cached_followups": followups, "side_effects": side_effects}  # fmt: skip
OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
n = sum(r["outcome"] == "accepted" for r in rows)
print(f"{n}/{len(rows)} accepted; cached follow-ups: "
      + "; ".join(f"{k}: {v['outcome']}{' (cached)' if v.get('cached') else ''}" for k, v in followups.items()))
print(json.dumps(side_effects))
print(f"wrote {OUT}")
PY

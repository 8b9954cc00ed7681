"""The measurement issue's benchmarks on a GPU (issue 14), one phase per argument.

    python3 benchmarks/measurement_h200.py sweep      # expert vs naive softmax, row lengths 16..16384
    python3 benchmarks/measurement_h200.py distill    # the rows-per-program step walked on that sweep
    python3 benchmarks/measurement_h200.py load --src PATH --workers 12 [--foreground 5]

sweep: one gate call of the corpus softmax expert beside its naive kernel (side-by-side ratios
per regime), and one of the naive kernel beside itself (what "no difference" measures).
distill: the backward walk of the expert over the sweep, restricted to the passes that take
its multi-row form apart (persistent_grid, rows_per_program), and the skills it yields.
load: `klineage gate` on the 22 held-out starting kernels, `--workers` at a time, with the
klineage tree at --src (this tree, or an older one for a side-by-side comparison); with
--foreground N, the corpus softmax expert is gated N times meanwhile and its device and host
times per regime reported with their spread across the calls.
Each phase writes JSON to $OUT (./bench-out without $OUT).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "benchmarks" / "problems" / "softmax_sweep.py"
SOFTMAX = ROOT / "src" / "klineage" / "kernels" / "softmax"
HELDOUT = ROOT / "src" / "klineage" / "heldout"
SWEEP_REGIMES = [f"n{n}" for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)]
SOFTMAX_GPU = ["large", "tiny_rows_gpu", "long_rows", "fp32_4096"]


def out_dir() -> Path:
    d = Path(os.environ.get("OUT") or ROOT / "bench-out")
    d.mkdir(parents=True, exist_ok=True)
    return d


def log(*a: object) -> None:
    print(*a, file=sys.stderr, flush=True)


def sweep() -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from klineage.config import GateConfig
    from klineage.gate import run_gate

    cfg = GateConfig(
        cache=False, profile_compile=False
    )  # expert against naive: torch.compile not needed
    out = {}
    for name, cand, base in (("expert_vs_naive", SOFTMAX / "expert.py", SOFTMAX / "naive.py"),
                             ("naive_vs_itself", SOFTMAX / "naive.py", SOFTMAX / "naive.py")):  # fmt: skip
        t0 = time.perf_counter()
        g = run_gate(SWEEP, cand, device="cuda", regimes=SWEEP_REGIMES, config=cfg, base=base)
        log(name, g.accepted, g.message[:300], f"{time.perf_counter() - t0:.1f}s")
        rows = {r: v.model_dump() for r, v in g.profile_rows().items()}
        for r, v in rows.items():
            log(f"  {r}: {v['kernel_ms'] * 1e3:.2f} us, base {v.get('base_ms', 0) * 1e3:.2f} us, "
                f"ratio {v.get('ratio')} [{v.get('ratio_lo')}, {v.get('ratio_hi')}] host {v['host_ms'] * 1e3:.2f} us")  # fmt: skip
        out[name] = {"accepted": g.accepted, "message": g.message, "rows": rows,
                     "environment": g.environment.model_dump() if g.environment else None}  # fmt: skip
    return out


def distill_sweep(regimes: list[str]) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from klineage.config import GateConfig
    from klineage.lineage import distill, load_view
    from klineage.skills.extract import extract_skills
    from klineage.store import open_store

    store = open_store(out_dir() / "sweep.db")
    t0 = time.perf_counter()
    lid = distill(SWEEP, SOFTMAX / "expert.py", store=store, device="cuda", policy="first", regimes=regimes,
                  pass_names=["persistent_grid", "rows_per_program"], config=GateConfig(),
                  on_event=lambda kind, data: log(kind, json.dumps(data, default=str)[:200]))  # fmt: skip
    view = load_view(store, lid)
    skills = extract_skills(store, lid)
    for s in skills:
        log(s.name, [c.predicate for c in s.conditions if c.kind == "measured"])
    return {"lineage": lid, "seconds": time.perf_counter() - t0, "stop": view.lineage.stop_reason,
            "skills": [s.model_dump(mode="json") for s in skills]}  # fmt: skip


def _gate_cmd(src: str, problem: Path, candidate: Path, regimes: list[str]) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "klineage",
        "gate",
        str(problem),
        str(candidate),
        "--device",
        "cuda",
        "--json",
    ]
    for r in regimes:
        cmd += ["--regime", r]
    return cmd


def _run(src: str, cmd: list[str], env_extra: dict[str, str]) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([os.environ.get("SITE", "/tmp/site"), src]),
        **env_extra,
    }
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    wall = time.perf_counter() - t0
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        data = {"accepted": False, "message": (p.stdout + p.stderr)[-800:]}
    return {"rc": p.returncode, "wall_s": wall, "accepted": data.get("accepted"), "message": str(data.get("message"))[:400],
            "data": data}  # fmt: skip


def load(src: str, workers: int, foreground: int) -> dict:
    jobs = sorted(d for d in HELDOUT.iterdir() if (d / "naive.py").exists())
    cache = tempfile.mkdtemp(prefix="kl-cache-")
    env = {"KLINEAGE_CACHE_DIR": cache}
    results: list[dict] = []
    lock = threading.Lock()
    todo = list(jobs)
    t0 = time.perf_counter()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                d = todo.pop(0)
            r = _run(src, _gate_cmd(src, d / "problem.py", d / "naive.py", []), env)
            r["problem"] = d.name
            r.pop("data")
            with lock:
                results.append(r)
                log(
                    f"[{time.perf_counter() - t0:6.1f}s] {d.name}: rc={r['rc']} {r['wall_s']:.1f}s {r['message'][:160]}"
                )

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    fg: list[dict] = []
    for i in range(foreground):
        r = _run(src, _gate_cmd(src, SOFTMAX / "problem.py", SOFTMAX / "expert.py", SOFTMAX_GPU),
                 {"KLINEAGE_CACHE_DIR": tempfile.mkdtemp(prefix="kl-fg-")})  # fmt: skip
        rows = {}
        for st in r["data"].get("stages") or []:
            if st.get("stage") == "profile":
                rows = (st.get("numbers") or {}).get("regimes") or {}
        fg.append(
            {
                "wall_s": r["wall_s"],
                "accepted": r["accepted"],
                "rows": rows,
                "during_load": any(t.is_alive() for t in threads),
            }
        )
        log(
            f"foreground {i}: {r['accepted']} {r['wall_s']:.1f}s",
            {k: v.get("kernel_ms") for k, v in rows.items()},
        )
    for t in threads:
        t.join()
    batch = time.perf_counter() - t0
    spread = {}
    for regime in SOFTMAX_GPU:
        for key in ("device_ms", "host_ms", "kernel_ms"):
            xs = [
                f["rows"][regime][key]
                for f in fg
                if regime in f["rows"] and f["rows"][regime].get(key)
            ]
            if len(xs) >= 2:
                spread.setdefault(regime, {})[key] = {
                    "values": xs,
                    "spread": (max(xs) - min(xs)) / statistics.median(xs),
                }
    accepted = sum(1 for r in results if r["accepted"])
    return {"src": src, "workers": workers, "jobs": len(jobs), "accepted": accepted, "batch_s": batch,
            "calls_per_min": 60.0 * (len(results) + len(fg)) / batch, "results": results, "foreground": fg,
            "spread": spread}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("phase", choices=["sweep", "distill", "load"])
    ap.add_argument("--src", default=str(ROOT / "src"))
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--foreground", type=int, default=0)
    ap.add_argument("--regimes", default=",".join(SWEEP_REGIMES))
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    if a.phase == "sweep":
        data = sweep()
    elif a.phase == "distill":
        data = distill_sweep([r for r in a.regimes.split(",") if r])
    else:
        data = load(a.src, a.workers, a.foreground)
    name = f"measurement-{a.phase}{('-' + a.tag) if a.tag else ''}.json"
    (out_dir() / name).write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    log("wrote", out_dir() / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())

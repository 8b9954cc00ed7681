"""Distill corpus experts (the backward walk) and record wall time, gate calls and the lineage.

    PYTHONPATH=src python benchmarks/distill_corpus.py --device cpu
    python3 distill_corpus.py --device cuda --workloads softmax,rmsnorm --regimes large,llama   # on the H200

Writes one JSON line per workload to $OUT/distill.jsonl (./bench-out without $OUT): the lineage
as `klineage lineage show --json` prints it, plus wall seconds and the number of gate calls.
The database is $OUT/distill.db, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _common import append_jsonl, out_dir

from klineage.config import GateConfig
from klineage.lineage import distill, load_view
from klineage.store import open_store

KERNELS = Path(__file__).resolve().parents[1] / "src" / "klineage" / "kernels"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument(
        "--workloads",
        default="softmax,rmsnorm,layernorm,cross_entropy,matmul,attention,colsum,cumsum,transpose,"
        "skinny_matmul,bias_gelu",
    )
    ap.add_argument(
        "--regimes",
        default="",
        help="comma-separated regime names to gate on; each workload keeps the ones it has",
    )
    ap.add_argument("--policy", default="first")
    ap.add_argument("--max-steps", type=int, default=60)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument(
        "--probe",
        action="store_true",
        help="after each walk, add every step back to the simplest kernel and gate it (lineage/probe.py)",
    )
    args = ap.parse_args()
    out = out_dir()
    store = open_store(out / "distill.db")
    # Short timing runs: ranking steps needs the median, not a publication number.
    config = GateConfig(
        timeout_s=args.timeout,
        profile_compile=False,
        allow_suspicious=True,
        warmup_ms=10,
        rep_ms=40,
    )
    for workload in args.workloads.split(","):
        problem, expert = KERNELS / workload / "problem.py", KERNELS / workload / "expert.py"
        from klineage.problem import load_problem

        known = load_problem(problem).regimes
        regimes = [r for r in args.regimes.split(",") if r in known] if args.regimes else []
        t0 = time.perf_counter()
        events = {"gate_calls": 0}

        def on_event(
            kind: str, data: dict, events: dict = events, workload: str = workload
        ) -> None:
            if kind == "result":
                events["gate_calls"] += int(data["applied"])
                print(
                    f"{workload}: {'kept' if data['accepted'] else ('rejected' if data['applied'] else 'n/a')} {data['pass']} {data['site']}",
                    flush=True,
                )

        lid = distill(
            problem,
            expert,
            store=store,
            device=args.device,
            policy=args.policy,
            max_steps=args.max_steps,
            regimes=regimes,
            config=config,
            on_event=on_event,
        )
        if args.probe and store.get_lineage(lid).status == "done":  # type: ignore[union-attr]
            from klineage.lineage.probe import probe_lineage

            for p in probe_lineage(store, lid, config=config):
                print(
                    f"{workload}: probe step {p.step} {p.pass_name}: {'ok' if p.accepted else p.message[:100]}",
                    flush=True,
                )
        view = load_view(store, lid).as_json()
        row = {
            "workload": workload,
            "wall_s": round(time.perf_counter() - t0, 1),
            "gate_calls_this_run": events["gate_calls"] + 1,
            **view,
        }
        append_jsonl(out / "distill.jsonl", row)
        print(
            json.dumps(
                {
                    k: row[k]
                    for k in ("workload", "wall_s", "gate_calls_this_run", "status", "stop_reason")
                }
            ),
            flush=True,
        )
        for s in view["path"]:
            sp = ", ".join(f"{r} {x:.2f}x" for r, x in s["speedup"].items()) or "not measured"
            print(
                f"  step {s['step']:>2} {s['rewrite']:24s} {s['function']}:{s['line']} -> {sp}",
                flush=True,
            )


if __name__ == "__main__":
    main()

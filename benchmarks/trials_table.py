"""Every trial of every run in a search store, with its per-regime time and % of the roofline
floor (the GPU regimes, launch-bound ones left out): what docs/benchmarks.md's tables are read
from.

    python benchmarks/trials_table.py SEARCH_DB
"""

from __future__ import annotations

import json
import sqlite3
import sys


def regimes(gate_json: str | None) -> dict[str, tuple[float, float]]:
    g = json.loads(gate_json) if gate_json else {}
    prof = next((s for s in g.get("stages", []) if s["stage"] == "profile"), None)
    rows = (prof or {}).get("numbers", {}).get("regimes") or {}
    return {
        r: (round(v["kernel_ms"] * 1000, 1), round(v["pct_of_floor"], 1))
        for r, v in rows.items()
        if not v.get("launch_bound") and v.get("kernel_ms") and v.get("pct_of_floor")
    }


def main() -> None:
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    for run, problem, status in db.execute(
        "select id, problem_path, status from runs order by created"
    ):
        print(f"{run[:10]} {problem} ({status})")
        q = "select seq, kept, label, message, speedup, gate from trials where run_id=? order by seq"
        for seq, kept, label, message, speedup, gate in db.execute(q, (run,)):
            x = f"{speedup:.3f}x" if speedup else "-"
            print(f"  {seq:2} {'KEPT' if kept else '    '} {x:>7}  {label[:110]}")
            if not speedup:
                print(f"             {message[:150]}")
            for r, (us, pct) in regimes(gate).items():
                print(f"             {r}: {us} us, {pct}% of floor")


if __name__ == "__main__":
    main()

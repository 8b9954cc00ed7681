"""Every trial of every run in a search store, with its per-regime time and % of the roofline
floor (the GPU regimes, launch-bound ones left out): what docs/benchmarks.md's tables are read
from.

    python benchmarks/trials_table.py SEARCH_DB
    python benchmarks/trials_table.py SEARCH_DB --own ceilings.json   # and of that card's floor

The gate's floor divides by the H200's ceilings on every card unless told otherwise (docs/
benchmarks.md "The floor on an H100"). With `--own` (the ceilings.json a device script wrote
with benchmarks/card_ceilings.py on the card that ran the store) each row also says what share
of that card's own floor it is: the row's % times the ceiling its floor divided by (recorded
in the row since 2026-12-07; the H200's defaults before) over the card's.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from klineage.config import H200_BF16_FLOPS_PER_S, H200_COPY_BYTES_PER_S

GATE_DEFAULT = {"bytes": H200_COPY_BYTES_PER_S, "flops": H200_BF16_FLOPS_PER_S}
OWN_KEY = {"bytes": "copy_bytes_per_s", "flops": "bf16_matmul_flops_per_s"}


def regimes(gate_json: str | None, own: dict | None = None) -> dict[str, tuple[float, ...]]:
    """regime -> (time in us, % of the gate's floor[, % of the card's own floor])."""
    g = json.loads(gate_json) if gate_json else {}
    prof = next((s for s in g.get("stages", []) if s["stage"] == "profile"), None)
    rows = (prof or {}).get("numbers", {}).get("regimes") or {}
    out: dict[str, tuple[float, ...]] = {}
    for r, v in rows.items():
        if v.get("launch_bound") or not v.get("kernel_ms") or not v.get("pct_of_floor"):
            continue
        row: tuple[float, ...] = (round(v["kernel_ms"] * 1000, 1), round(v["pct_of_floor"], 1))
        if own is not None:
            kind = v.get("floor_kind") or "bytes"
            used = v.get("floor_ceiling") or GATE_DEFAULT[kind]
            row += (round(v["pct_of_floor"] * used / float(own[OWN_KEY[kind]]), 1),)
        out[r] = row
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--own"):
        print(__doc__, file=sys.stderr)
        return 2
    own = json.loads(Path(argv[2]).read_text(encoding="utf-8")) if len(argv) == 3 else None
    card = f" of the {own.get('card', 'card')}'s own" if own else ""
    db = sqlite3.connect(f"file:{argv[0]}?mode=ro", uri=True)
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
            for r, row in regimes(gate, own).items():
                extra = f", {row[2]}%{card}" if own else ""
                print(f"             {r}: {row[0]} us, {row[1]}% of floor{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

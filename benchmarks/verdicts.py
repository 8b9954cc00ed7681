"""Summarise the gate verdicts (`klineage gate --json`) in folders: one line a verdict, then
each timed regime's device time, speedup over the base (with the spread of timing it twice)
and % of the roofline floor.

    python3 benchmarks/verdicts.py DIR [DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    for folder in map(Path, sys.argv[1:]):
        for f in sorted(folder.glob("*.json")):
            try:
                d = json.loads(f.read_text())
            except ValueError:
                err = f.with_suffix(".err")
                tail = err.read_text()[-300:] if err.exists() else ""
                print(f"{f.stem}: no verdict ({tail!r})")
                continue
            print(f"{f.stem}: accepted={d['accepted']} {d['message'][:200]}")
            prof = next((s for s in d["stages"] if s["stage"] == "profile"), None)
            rows = ((prof or {}).get("numbers", {}).get("regimes")) or {}
            for name, row in rows.items():
                print(
                    f"   {name}: {row.get('kernel_ms')} ms, x{row.get('ratio')} vs base "
                    f"(spread {row.get('spread')}), {row.get('pct_of_floor')}% of floor, "
                    f"compile {row.get('compile_ms')} ms, launch-bound {row.get('launch_bound')}"
                )


if __name__ == "__main__":
    main()

"""Render corpus.jsonl files (from benchmarks/corpus.py) as the Markdown table in docs/benchmarks.md.

    python benchmarks/corpus_table.py benchmarks/results/corpus-*.jsonl

For each (workload, regime) the row from the last file that has it wins, so later runs (after
tuning) replace earlier ones; each row names the run it came from.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def pct(floor: float, ms: float | None) -> str:
    return f"{100 * floor / ms:.1f}%" if ms else "–"


def main(paths: list[str]) -> None:
    rows: dict[tuple[str, str], tuple[str, dict]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            if "workload" in row:
                rows[(row["workload"], row["regime"])] = (Path(path).stem.split("-")[-1], row)
    print(
        "| workload | regime | floor ms | naive | expert | eager | torch.compile | library | expert / library | run |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (workload, regime), (run, r) in rows.items():
        f = r["floor_ms"]
        lib = f"{r['library']}: {pct(f, r['library_ms'])}" if r.get("library_ms") else "–"
        ratio = (
            f"{r['library_ms'] / r['expert_ms']:.0%}"
            if r.get("library_ms") and r.get("expert_ms")
            else "–"
        )
        print(
            f"| {workload} | {regime} | {f:.3f} ({r['floor_kind']}) | {pct(f, r['naive_ms'])} | {pct(f, r['expert_ms'])} "
            f"| {pct(f, r['eager_ms'])} | {pct(f, r['compile_ms'])} | {lib} | {ratio} | {run} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])

"""The structural forward passes applied to the held-out naive kernels, at their default values:
one file DIR/<problem>__<pass>.py per rewrite (benchmarks/structural_h200.sh gates them).

    PYTHONPATH=src python benchmarks/structural_rewrites.py DIR [PASS,PASS,...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from klineage.rewrite import all_passes

HELDOUT = Path(__file__).resolve().parents[1] / "src" / "klineage" / "heldout"
STRUCTURAL = ("column_tiling", "tiled_transpose", "split_k", "block_scan", "multi_row")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    wanted = sys.argv[2].split(",") if len(sys.argv) > 2 else list(STRUCTURAL)
    passes = all_passes()
    for problem in sorted(p for p in HELDOUT.iterdir() if (p / "naive.py").exists()):
        source = (problem / "naive.py").read_text(encoding="utf-8")
        for name in wanted:
            sites = passes[name].forward_sites(source)
            if not sites:
                continue
            r = passes[name].apply(source, sites[0], {})
            print(
                f"{problem.name}: {name} {'applied' if r.applied else 'skipped: ' + str(r.reason)}"
            )
            if r.applied and r.source is not None:
                (out / f"{problem.name}__{name}.py").write_text(r.source, encoding="utf-8")


if __name__ == "__main__":
    main()

"""The structural forward passes applied to the held-out naive kernels, at their default values:
one file DIR/<problem>__<pass>.py per rewrite (benchmarks/structural_h200.sh gates them).

    PYTHONPATH=src python benchmarks/structural_rewrites.py DIR [PASS,PASS,...]

A PASS may be a chain `first+second` (each at every site of the kernel the one before it made,
as the optimize loop materializes a composite proposal): DIR/<problem>__first_then_second.py.
(Before 2026-12-06 each step took its first site only: the column softmax's exp2_log2e then
rewrote its sum walk and not its write walk, a kernel klineage never proposes.)
A step may carry integer parameters, `split_k@split=1024` (DIR/<problem>__split_k_split1024.py)
or `split_k@max_split=1024@programs=1056`, for a side-by-side sweep of a structural value (the
split count, rows per program). A `tunables` step's values are one config, pinned: a table of
one row, `tunables@CHUNK=256@num_warps=4` (the chunk of a walk multi_row kept, say).
PROBLEMS=a,b limits the held-out problems.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from klineage.optimize.materialize import mechanical
from klineage.rewrite import all_passes

HELDOUT = Path(__file__).resolve().parents[1] / "src" / "klineage" / "heldout"
STRUCTURAL = ("column_tiling", "tiled_transpose", "split_k", "block_scan", "multi_row")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    wanted = sys.argv[2].split(",") if len(sys.argv) > 2 else list(STRUCTURAL)
    passes = all_passes()
    only = [x for x in os.environ.get("PROBLEMS", "").split(",") if x]
    for problem in sorted(p for p in HELDOUT.iterdir() if (p / "naive.py").exists()):
        if only and problem.name not in only:
            continue
        source = (problem / "naive.py").read_text(encoding="utf-8")
        for name in wanted:
            made, why = source, ""
            for spec in name.split("+"):
                step, *kvs = spec.split("@")
                params: dict[str, object] = {k: int(v) for k, v in (kv.split("=") for kv in kvs)}
                if step == "tunables" and params:
                    params = {"configs": [params]}
                if not passes[step].forward_sites(made):
                    why = f"{step}: no site"
                    break
                m = mechanical(made, step, params)
                if m.source is None:
                    why = f"{step} skipped: {m.reason}"
                    break
                made = m.source
            if why == f"{name.split('+')[0].split('@')[0]}: no site":
                continue  # not this pass's kernel
            print(f"{problem.name}: {name} {why or 'applied'}")
            if not why:
                stem = name.replace("+", "_then_").replace("@", "_").replace("=", "")
                (out / f"{problem.name}__{stem}.py").write_text(made, encoding="utf-8")


if __name__ == "__main__":
    main()

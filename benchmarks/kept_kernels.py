"""The kernel each run of a search store ended on, as klineage ships it: the last kept trial's
candidate with its autotune tables folded to the configs its gate record found fastest
(optimize/decide.folded, what a keep does since the fold of every table; stores written before
kept the whole tables). One file a run, named <problem>__<NAME>.py, for a device script's KEPT=
directory (benchmarks/scan_values_gpu.sh gates each beside its problem's naive kernel).

    python benchmarks/kept_kernels.py SEARCH_DB OUT_DIR [NAME]     # NAME defaults to "kept"
    KEPT_AS_SWEPT=1 python benchmarks/kept_kernels.py ...            # the tables as the gate swept them
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from klineage.optimize.decide import folded


def main(db: str, out: str, name: str = "kept") -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    Path(out).mkdir(parents=True, exist_ok=True)
    for run_id, problem in con.execute("SELECT id, problem_path FROM runs ORDER BY problem_path"):
        last = con.execute(
            "SELECT seq, candidate, gate FROM trials WHERE run_id = ? AND kept = 1 "
            "ORDER BY seq DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        family = Path(problem).parent.name
        if last is None:
            print(f"{family}: run {run_id} kept nothing", file=sys.stderr)
            continue
        seq, candidate, gate = last
        source = candidate
        if not os.environ.get("KEPT_AS_SWEPT"):
            source, _ = folded(candidate, json.loads(gate))
        path = Path(out) / f"{family}__{name}.py"
        path.write_text(source)
        print(f"{path}: trial {seq} of run {run_id}, {source.count('triton.Config(')} configs")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))

"""tile_online on the column softmax, side by side on a GPU: each kernel gated against the
kernel it was made from (`--base`: both timed in one gate call, CUDA-graph replay).

Pairs: the split column softmax as the passes write it from the naive kernel (column_tiling,
online_softmax, split_online) without and with tile_online; and, given a search store
(`--store`, a search.db a device call brought back), the best kept kernel of its column softmax
run without and with tile_online.

    PYTHONPATH=src python3 benchmarks/tile_online_side_by_side.py [--store search.db] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
from pathlib import Path

from klineage.gate import run_gate
from klineage.optimize.materialize import mechanical

ROOT = Path(__file__).resolve().parents[1]
WHERE = ROOT / "src" / "klineage" / "heldout" / "column_softmax"


def _split() -> str:
    naive = (WHERE / "naive.py").read_text(encoding="utf-8")
    then = [("online_softmax", {}), ("split_online", {})]
    made = mechanical(naive, "column_tiling", then=then)
    assert made.source is not None, made.reason
    return made.source


def _best(store: Path) -> str:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    row = db.execute(
        "select t.seq, t.candidate from trials t join runs r on r.id = t.run_id "
        "where r.problem_path like '%column_softmax%' and t.kept = 1 order by t.seq desc limit 1"
    ).fetchone()
    if row is None:
        raise SystemExit(f"{store}: no kept trial of a column_softmax run")
    print(f"best kept kernel of {store}: trial {row[0]}")
    return str(row[1])


def _pair(name: str, base_src: str, folder: Path, device: str) -> dict[str, object]:
    made = mechanical(base_src, "tile_online")
    if made.source is None:
        return {"pair": name, "error": made.reason}
    base, cand = folder / f"{name}_base.py", folder / f"{name}_tile_online.py"
    base.write_text(base_src, encoding="utf-8")
    cand.write_text(made.source, encoding="utf-8")
    r = run_gate(WHERE / "problem.py", cand, device=device, base=base)
    prof = next((s for s in r.stages if s.stage.value == "profile"), None)
    rows = prof.numbers.regimes if prof is not None and prof.numbers is not None else {}
    out: dict[str, object] = {"pair": name, "accepted": r.accepted, "message": r.message}
    for regime, row in (rows or {}).items():
        out[regime] = {
            "base_us": None if row.base_ms is None else round(row.base_ms * 1000, 1),
            "tile_online_us": round(row.kernel_ms * 1000, 1),
            "ratio": row.ratio,
            "ratio_lo": row.ratio_lo,
            "ratio_hi": row.ratio_hi,
            "within_noise": row.within_noise,
            "pct_of_floor": row.pct_of_floor,
        }
    print(json.dumps(out, indent=1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, help="a search.db with a column_softmax run")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run (no timing)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="tile-online-"))
    results = [_pair("split", _split(), folder, args.device)]
    if args.store is not None:
        results.append(_pair("store_best", _best(args.store), folder, args.device))
    (args.out / "tile_online.json").write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

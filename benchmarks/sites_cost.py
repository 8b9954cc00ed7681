"""What finding sites costs: every registered pass, both directions, on every held-out kernel.

A walk, a probe, retrieval and the optimize loop all ask every pass for its sites; this times
that work on the CPU (no GPU needed), cold and then again on the same sources (the second
round is what rewrite/memo.py remembers).

    PYTHONPATH=src python benchmarks/sites_cost.py            # cold, then repeated
    PYTHONPATH=src python benchmarks/sites_cost.py --no-memo  # sites not remembered

--no-memo still shares parses and positions (base.parse, base.positions); the cost before any
sharing is this script run at a commit before memo.py (bd7bba5) with its two memo lines removed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from klineage.rewrite import memo
from klineage.rewrite.registry import all_passes

HELDOUT = Path(__file__).resolve().parents[1] / "src" / "klineage" / "heldout"


def sweep(sources: list[str]) -> tuple[float, int]:
    passes = all_passes()
    t0 = time.perf_counter()
    n = 0
    for source in sources:
        for p in passes.values():
            n += len(p.backward_sites(source)) + len(p.forward_sites(source))
    return time.perf_counter() - t0, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-memo", action="store_true", help="do not remember sites per source")
    args = ap.parse_args()
    memo.set_enabled(not args.no_memo)
    files = sorted(HELDOUT.glob("*/naive.py"))
    sources = [f.read_text() for f in files]
    cold, n = sweep(sources)
    again, n2 = sweep(sources)
    print(
        f"{len(all_passes())} passes x {len(files)} held-out kernels: {n} sites; "
        f"cold {cold:.1f} s, again {again:.1f} s (memo {'off' if args.no_memo else 'on'})"
    )
    return 0 if n == n2 else 1


if __name__ == "__main__":
    sys.exit(main())

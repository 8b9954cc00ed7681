"""The reverse cumsum's kept kernel with scan_dot, for a side-by-side call (docs/benchmarks.md,
issue 16, 2026-12-07, seventh session): writes into DIR

- reverse_cumsum_rows__kept.py: the kept kernel (2026-12-07f, then ascending_scan), as it ran;
- reverse_cumsum_rows__kept_then_dot.py: the same with scan_dot at every site (its 4-row tile by
  blocks of 16 lanes, split_scan's 4096-element chunk by blocks of 64), gated beside it;
- reverse_cumsum_rows__kept_r<R>_then_dot.py: its short-row path at R rows a program (16, 32)
  with 64-column chunks (the table dropped: a 4096-column chunk of R rows is no short-row tile),
  then scan_dot (one product by a 64 x 64 triangle a step), gated beside the naive kernel;
- reverse_cumsum_rows__probe.py: benchmarks/problems/reverse_cumsum_dot.py, hand-written.

    PYTHONPATH=src python benchmarks/scan_dot_variants.py DIR
    bash benchmarks/freeze.sh DIR   # then carry .frozen:
    cd .frozen && KEPT=kept BESIDE='ascending_scan dot' SHORT=- LONG=- T=330 bash benchmarks/scan_values_gpu.sh
"""

from __future__ import annotations

import sys
from pathlib import Path

from klineage.optimize.materialize import mechanical

ROOT = Path(__file__).resolve().parents[1]
KEPT = (
    ROOT
    / "benchmarks/results/issue16-2026-12-07f/kept"
    / "reverse_cumsum_rows__kept_h100_then_ascending_scan.py"
)
ROWS_LINE = "ROWS = min(64, max(1, 256 // 64), triton.next_power_of_2(rows))"
LAUNCH = "suffix_scan_row[(triton.cdiv(rows, ROWS),)](x, y, n, x.stride(0), n_rows=rows, ROWS=ROWS)"


def scan_dot(source: str) -> str:
    """scan_dot at every site, until none is left."""
    while (made := mechanical(source, "scan_dot", {}).source) is not None:
        source = made
    return source


def at_rows(source: str, rows: int) -> str:
    """The short-row path at `rows` rows a program and 64-column chunks, its table dropped."""
    for expected in (ROWS_LINE, LAUNCH, "@triton.autotune("):
        if expected not in source:
            raise SystemExit(f"{KEPT}: expected `{expected}` in the kept kernel")
    start = source.index("@triton.autotune(")
    source = source[:start] + source[source.index("@triton.jit", start) :]
    source = source.replace(ROWS_LINE, f"ROWS = min({rows}, triton.next_power_of_2(rows))")
    return source.replace(LAUNCH, LAUNCH.replace("n_rows=rows", "CHUNK=64, n_rows=rows"))


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    kept = KEPT.read_text(encoding="utf-8")
    files = {
        "kept": kept,
        "kept_then_dot": scan_dot(kept),
        **{f"kept_r{r}_then_dot": scan_dot(at_rows(kept, r)) for r in (16, 32)},
        "probe": (ROOT / "benchmarks/problems/reverse_cumsum_dot.py").read_text(encoding="utf-8"),
    }
    for name, text in files.items():
        (out / f"reverse_cumsum_rows__{name}.py").write_text(text, encoding="utf-8")
        print(out / f"reverse_cumsum_rows__{name}.py")


if __name__ == "__main__":
    main()

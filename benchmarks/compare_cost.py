"""What the gate's parent spends comparing one large output with the reference's (the fast pass
of gate/compare.py), whole-tensor against chunked, on this machine's CPU.

    PYTHONPATH=src python benchmarks/compare_cost.py [--elements 83886080] [--repeat 3]

The default is the reverse cumsum's short_rows_fp16 regime (524288 x 160 fp16, 84M elements):
its cases cross the process boundary through files and are compared here once per case and
per autotune config (docs/GATE.md).
"""

from __future__ import annotations

import argparse
import time

import torch

import klineage.gate.compare as compare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=524288 * 160)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    want = torch.randn(args.elements).half()
    got = (want.float() + 1e-4 * torch.randn(args.elements)).half()
    for label, chunk in (("whole", args.elements), ("chunked", compare.FAST_CHUNK)):
        compare.FAST_CHUNK = chunk
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            c = compare.compare_tensor(got, want, 1e-2, "output")
            times.append(time.perf_counter() - t0)
            assert c.ok
        print(f"{label:8s} chunk {chunk:>10d}: best {min(times):.2f} s of {args.repeat}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()

"""Sweep a kernel file's tuning constants on a GPU: correctness against the reference, then time.

    PYTHONPATH=src python benchmarks/sweep.py --workload rmsnorm \
        --param TILE_ELEMENTS=2048,4096,8192 --param ELEMENTS_PER_THREAD=16,32 --regimes llama,short_rows

Constants are module globals the launcher reads at call time; each combination is set on the
imported module, checked on one seeded input (tolerance by dtype) and timed (do_bench median,
L2 flushed). The numbers decide the constants written in the kernel files, with their reason.
"""

from __future__ import annotations

import argparse
import ast
import itertools
from pathlib import Path

import torch
from _common import bench_ms

from klineage.config import GateConfig
from klineage.gate.compare import compare_outputs
from klineage.problem.loader import import_file, load_problem

KERNELS = Path(__file__).resolve().parents[1] / "src" / "klineage" / "kernels"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workload", required=True)
    ap.add_argument("--kernel", default="expert")
    ap.add_argument("--param", action="append", default=[], help="NAME=v1,v2,... (repeatable)")
    ap.add_argument("--regimes", required=True)
    args = ap.parse_args()
    problem = load_problem(KERNELS / args.workload / "problem.py")
    module = import_file(
        KERNELS / args.workload / f"{args.kernel}.py", f"sweep_{args.workload}_{args.kernel}"
    )
    names, values = [], []
    for p in args.param:
        name, _, raw = p.partition("=")
        names.append(name)
        values.append([ast.literal_eval(v) for v in raw.split(",")])
    tol = GateConfig().tolerance_for
    for regime in args.regimes.split(","):
        torch.manual_seed(0)
        with problem.regime_globals(regime):
            init = problem.init_inputs(regime)
            ref = problem.model_cls(*init).cuda().eval()
            torch.manual_seed(0)
            cand = module.ModelNew(*init).cuda().eval()
        inputs = problem.make_inputs(regime, "cuda")
        with torch.no_grad(), problem.regime_globals(regime):
            want = ref(*inputs)
            for combo in itertools.product(*values):
                for n, v in zip(names, combo, strict=True):
                    setattr(module, n, v)
                label = " ".join(f"{n}={v}" for n, v in zip(names, combo, strict=True))
                try:
                    got = cand(*inputs)
                    c = compare_outputs(got, want, tol)
                    ms = bench_ms(lambda: cand(*inputs)) if c.ok else float("nan")  # noqa: B023 - called now
                    print(
                        f"{args.workload} {regime:16s} {label:50s} {'ok ' if c.ok else 'BAD'} {ms:.4f} ms {c.message[:80]}",
                        flush=True,
                    )
                # A combination that does not compile is a finding, not a crash.
                except Exception as e:
                    print(
                        f"{args.workload} {regime:16s} {label:50s} ERR {type(e).__name__}: {str(e).splitlines()[0][:100]}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()

"""Where one gate call's wall time goes, on the machine it runs on (issue 14: gate throughput).

    PYTHONPATH=src python benchmarks/gate_profile.py [--device cuda] [--calls 2] [PROBLEM CANDIDATE]

Gates CANDIDATE (default: the softmax corpus expert) --calls times in this process, verdict cache
off, the first call cold (the reference's cases are made), the later ones warm (cases from the
reference cache), each under cProfile. Prints, per call, its wall time, stage seconds and lock
wait, and the parent's 25 most expensive functions by cumulative time: the parent's own work
(cases, comparisons, file reads) shows there by name; time spent in a child process (its start,
its imports, the candidate's compile) shows as waits (select, read, wait). Written to
$OUT/gate-profile.txt as well.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path

from _common import out_dir

from klineage.config import GateConfig
from klineage.gate import run_gate

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "src" / "klineage" / "kernels" / "softmax"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("problem", nargs="?", default=str(SOFTMAX / "problem.py"))
    ap.add_argument("candidate", nargs="?", default=str(SOFTMAX / "expert.py"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--calls", type=int, default=2)
    args = ap.parse_args()
    report = io.StringIO()
    for i in range(args.calls):
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        r = run_gate(
            Path(args.problem),
            Path(args.candidate),
            device=args.device,
            config=GateConfig(cache=False, profile_compile=False),
        )
        prof.disable()
        wall = time.perf_counter() - t0
        stages = ", ".join(f"{s.stage.value} {s.seconds:.2f}" for s in r.stages)
        print(
            f"== call {i} ({'cold' if i == 0 else 'warm'}): {wall:.1f} s wall, "
            f"accepted={r.accepted}, lock wait {r.lock_wait_s or 0:.1f} s; stages: {stages}",
            file=report,
        )
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        print(s.getvalue(), file=report)
    text = report.getvalue()
    print(text)
    (out_dir() / "gate-profile.txt").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

"""Where one gate call's wall time goes, on the machine it runs on (issue 14: gate throughput).

    PYTHONPATH=src python benchmarks/gate_profile.py [--device cuda] [--calls 2] [PROBLEM CANDIDATE]

Gates CANDIDATE (default: the softmax corpus expert) --calls times in this process, each time a
verdict cache miss, the first call cold (the reference's cases are made), the later ones warm (cases from the
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
import tempfile
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
    ap.add_argument(
        "--large-case-mib",
        type=float,
        default=None,
        help="GateConfig.large_case_bytes in MiB (default: the gate's); a huge value checks "
        "every trial on every regime, as before the bound",
    )
    args = ap.parse_args()
    report = io.StringIO()
    # The verdict cache stays on: each call gates a copy of CANDIDATE with a line of its own (a
    # verdict miss), so the later calls read the reference's cases from its cache (warm).
    config = GateConfig(profile_compile=False)
    tmp = Path(tempfile.mkdtemp(prefix="gate-profile-"))
    source = Path(args.candidate).read_text(encoding="utf-8")
    if args.large_case_mib is not None:
        config = config.model_copy(update={"large_case_bytes": int(args.large_case_mib * 2**20)})
    print(f"large_case_bytes {config.large_case_bytes / 2**20:g} MiB", file=report)
    for i in range(args.calls):
        candidate = tmp / f"call{i}_{Path(args.candidate).name}"
        candidate.write_text(
            f"{source}\n# gate_profile call {i}, {time.time()}\n", encoding="utf-8"
        )
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        r = run_gate(
            Path(args.problem),
            candidate,
            device=args.device,
            config=config,
        )
        prof.disable()
        wall = time.perf_counter() - t0
        stages = ", ".join(f"{s.stage.value} {s.seconds:.2f}" for s in r.stages)
        load = r.stages[0]
        print(
            f"== call {i} ({'cold' if i == 0 else 'warm'}): {wall:.1f} s wall, "
            f"accepted={r.accepted}, lock wait {r.lock_wait_s or 0:.1f} s; stages: {stages}",
            file=report,
        )
        print(f"   load: {load.message}", file=report)
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        print(s.getvalue(), file=report)
        (out_dir() / "gate-profile.txt").write_text(report.getvalue(), encoding="utf-8")
    print(report.getvalue())


if __name__ == "__main__":
    main()

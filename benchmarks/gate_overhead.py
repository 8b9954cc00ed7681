"""Wall time of one gate call, cold and cached, on the bundled softmax example.

    python benchmarks/gate_overhead.py --device cpu
    python benchmarks/gate_overhead.py --device cuda      # on the GPU machine

Cold = a fresh cache (child process start, imports, compile, every trial of every regime and,
on cuda, the profile with torch.compile). Cached = the same call again (content-addressed hit).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from klineage.config import GateConfig
from klineage.gate import run_gate

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "klineage" / "examples" / "softmax"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--repeat", type=int, default=3, help="cold calls to take the median of")
    ap.add_argument(
        "--steady",
        action="store_true",
        help="as in an optimize loop: a new candidate each call (the example with a comment "
        "appended), one cache, so what does not depend on the candidate may be reused",
    )
    args = ap.parse_args()
    colds, cached, stages = [], [], {}
    shared = tempfile.mkdtemp()
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as fresh:
            cache_dir = shared if args.steady else fresh
            candidate = EXAMPLE / "candidate.py"
            if args.steady:
                candidate = Path(fresh) / "candidate.py"
                candidate.write_text((EXAMPLE / "candidate.py").read_text() + f"\n# call {i}\n")
            t0 = time.perf_counter()
            r = run_gate(
                EXAMPLE / "problem.py",
                candidate,
                device=args.device,
                config=GateConfig(),
                cache_dir=Path(cache_dir),
            )
            colds.append(time.perf_counter() - t0)
            assert r.accepted, r.message
            stages = {s.stage.value: round(s.seconds, 2) for s in r.stages if s.seconds}
            t0 = time.perf_counter()
            r2 = run_gate(
                EXAMPLE / "problem.py",
                candidate,
                device=args.device,
                config=GateConfig(),
                cache_dir=Path(cache_dir),
            )
            cached.append(time.perf_counter() - t0)
            assert r2.cached
    colds.sort()
    cached.sort()
    env = r.environment.model_dump() if r.environment else {}
    row = {
        "device": args.device, "steady": args.steady, "regimes": r.regimes, "cold_s_median": round(colds[len(colds) // 2], 2),
        "cold_s_all": [round(c, 2) for c in colds], "cached_s_median": round(cached[len(cached) // 2], 3),
        "stage_seconds_last_cold": stages, "environment": env,
    }  # fmt: skip
    print(json.dumps(row, indent=2))


if __name__ == "__main__":
    main()

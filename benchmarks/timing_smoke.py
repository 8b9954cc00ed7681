"""Smoke check of the profile stage on a GPU: the softmax expert gated beside its naive kernel.

python3 benchmarks/timing_smoke.py [--problem P --candidate C --base B] > $OUT/smoke.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main() -> int:
    from klineage.config import GateConfig
    from klineage.gate import run_gate
    from klineage.gate.devtime import empty_launch_ms

    k = ROOT / "src" / "klineage" / "kernels" / "softmax"
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default=str(k / "problem.py"))
    ap.add_argument("--candidate", default=str(k / "expert.py"))
    ap.add_argument("--base", default=str(k / "naive.py"))
    ap.add_argument("--regimes", default="")
    a = ap.parse_args()
    print("empty launch ms", empty_launch_ms(), file=sys.stderr)
    cfg = GateConfig(cache=False)
    t0 = time.perf_counter()
    g = run_gate(
        a.problem,
        a.candidate,
        device="cuda",
        config=cfg,
        base=a.base,
        regimes=[r for r in a.regimes.split(",") if r] or None,
    )
    wall = time.perf_counter() - t0
    for s in g.stages:
        print(
            f"{s.stage.value}: {s.status.value} {s.seconds:.2f}s {s.message[:2000]}",
            file=sys.stderr,
        )
    print(
        json.dumps(
            {
                "accepted": g.accepted,
                "wall_s": wall,
                "lock_wait_s": g.lock_wait_s,
                "rows": {k: v.model_dump() for k, v in g.profile_rows().items()},
                "stages": {s.stage.value: s.seconds for s in g.stages},
            },
            indent=1,
        )
    )
    return 0 if g.accepted else 1


if __name__ == "__main__":
    sys.exit(main())

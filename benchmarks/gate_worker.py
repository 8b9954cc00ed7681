"""A long-lived gate worker (benchmarks/measurement_h200.py load --persistent): one process runs
gate call after gate call, as an optimize loop's process does, so what a process keeps between
calls (torch imported once, the warm zygote with KLINEAGE_ZYGOTE=1) counts, which per-call
`klineage gate` subprocesses cannot show.

    python benchmarks/gate_worker.py      # then one JSON job a line on stdin:
    {"argv": [PROBLEM, CANDIDATE, "--device", "cuda", "--regime", R, ...], "env": {...}}

Each job's verdict is one line on stdout: the JSON `klineage gate --json` prints (or
{"accepted": false, "message": ...} for an error of the worker's own). `env` is set in this
process before the call (KLINEAGE_CACHE_DIR differs between the load's jobs).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _parse(argv: list[str]) -> tuple[Path, Path, str, list[str]]:
    problem, candidate, rest = Path(argv[0]), Path(argv[1]), argv[2:]
    device, regimes = "cpu", []
    for flag, value in zip(rest[::2], rest[1::2], strict=False):
        if flag == "--device":
            device = value
        elif flag == "--regime":
            regimes.append(value)
    return problem, candidate, device, regimes


def main() -> int:
    from klineage.cli.gate import _events_to_stderr
    from klineage.gate import run_gate
    from klineage.gate.runner import result_json

    for line in sys.stdin:
        try:
            job = json.loads(line)
            os.environ.update({str(k): str(v) for k, v in job.get("env", {}).items()})
            problem, candidate, device, regimes = _parse([str(a) for a in job["argv"]])
            out = json.loads(
                result_json(
                    run_gate(
                        problem,
                        candidate,
                        device=device,
                        regimes=regimes or None,
                        on_event=_events_to_stderr(),
                    )
                )  # as `klineage gate --json` does
            )
        except Exception as e:  # the worker's own failure: one line, and on to the next job
            out = {"accepted": False, "message": f"gate_worker: {type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

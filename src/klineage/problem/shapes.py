"""Input shapes of every regime of a problem, without allocating: `get_inputs` under the meta
device, in a child process (a problem file is user code).

    python -m klineage.problem.shapes PROBLEM.py [OVERRIDES_JSON]   # prints {regime: {"shapes": [...], "dtypes": [...]}}
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from klineage.errors import LoadError


class RegimeInputs(TypedDict):
    """One regime's input tensors, read on the meta device: their shapes and dtype names."""

    shapes: list[list[int]]
    dtypes: list[str]


def _child(problem: str, overrides: dict[str, Any] | None = None) -> dict[str, RegimeInputs]:
    import torch

    from klineage.problem import load_problem

    p = load_problem(Path(problem), overrides)
    out: dict[str, RegimeInputs] = {}
    for name in p.regimes:
        inputs = p.make_inputs(name, "meta")
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        out[name] = {
            "shapes": [list(t.shape) for t in tensors],
            "dtypes": [str(t.dtype).removeprefix("torch.") for t in tensors],
        }
    return out


def regime_shapes(
    problem: Path, timeout_s: float = 60.0, overrides: dict[str, Any] | None = None
) -> dict[str, RegimeInputs]:
    """{regime: {"shapes": [[...], ...], "dtypes": [...]}} for every regime of `problem`, with
    --set overrides rebound."""
    extra = [json.dumps(overrides)] if overrides else []
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "klineage.problem.shapes", str(problem), *extra],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as e:
        raise LoadError(
            str(problem),
            f"reading regime shapes took over {timeout_s:g} s",
            expected="get_inputs to run quickly on the meta device",
        ) from e
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise LoadError(
            str(problem),
            f"cannot read regime shapes: {last}",
            expected="get_inputs to work under torch.device('meta')",
        )
    result: dict[str, RegimeInputs] = json.loads(proc.stdout)
    return result


def features(entry: Mapping[str, Any]) -> dict[str, float]:
    """Shape features of a regime, from its first input tensor: row length, rows, elements."""
    if not entry.get("shapes"):
        return {}
    shape = entry["shapes"][0]
    numel = 1
    for d in shape:
        numel *= d
    last = shape[-1] if shape else 1
    return {
        "row_length": float(last),
        "rows": float(numel // max(last, 1)),
        "elements": float(numel),
    }


if __name__ == "__main__":
    try:
        given = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
        print(json.dumps(_child(sys.argv[1], given)))
    except LoadError as e:
        print(str(e), file=sys.stderr)
        sys.exit(2)

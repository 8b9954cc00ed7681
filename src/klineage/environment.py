"""Capture the environment a result was measured in (GPU, versions, timing method, date)."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess

from klineage import __version__
from klineage.gate.records import Environment


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.strip().splitlines()
    return first[0].strip() if out.returncode == 0 and first else None


def capture_environment(device: str, timing_method: str) -> Environment:
    """Read the environment of this process. Imports torch and triton (child side)."""
    import torch
    import triton

    gpu_name = capability = cuda = driver = None
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu_name = props.name
        capability = f"{props.major}.{props.minor}"
        cuda = torch.version.cuda
        driver = _driver_version()
    return Environment(
        device=device,
        gpu_name=gpu_name,
        compute_capability=capability,
        driver=driver,
        cuda=cuda,
        torch=torch.__version__,
        triton=triton.__version__,
        klineage=__version__,
        python=platform.python_version(),
        interpreter=os.environ.get("TRITON_INTERPRET", "") == "1",
        timing_method=timing_method,
        date=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )

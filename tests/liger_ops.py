"""Liger-Kernel's ops as gate candidates, read from the installed package at run time
(klineage/liger.py builds them; this skips a test, saying why, where liger_kernel is absent).

Liger-Kernel (the `liger` extra; `make setup` installs it) is a real Triton kernel library:
the static guards must accept its ops unchanged. Nothing of it is copied into this repository.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from klineage import liger

OPS = tuple(liger.OPS)
# op -> (the autograd Function its wrapper calls, the ModelNew wrapper)
WRAPPERS = {op: (spec.function, spec.wrapper) for op, spec in liger.OPS.items()}


def _need_liger() -> None:
    if importlib.util.find_spec("liger_kernel") is None:
        pytest.skip(
            "liger_kernel is not installed (pip install -e '.[liger]', or `make setup`): "
            "the Liger-Kernel ops cannot be read"
        )


def liger_op_path(op: str) -> Path:
    """liger_kernel/ops/<op>.py of the installed package."""
    _need_liger()
    return liger.op_path(op)


def liger_candidate(op: str) -> str:
    """The op's module source, unchanged, followed by a ModelNew that calls its Function."""
    _need_liger()
    return liger.expert_source(op)

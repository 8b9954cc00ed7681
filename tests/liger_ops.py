"""Liger-Kernel's ops as gate candidates, read from the installed package at run time.

Liger-Kernel (the `liger` extra; `make setup` installs it) is a real Triton kernel library:
the static guards must accept its ops unchanged. Nothing of it is copied into this repository:
a test locates the installed module (importlib.util.find_spec, which imports nothing for a
top-level package) and appends a thin ModelNew to its source, in a file under tmp_path.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

# op module (liger_kernel/ops/<op>.py) -> the autograd Function its wrapper calls, and the
# wrapper: a ModelNew in the gate's form, whose forward calls that Function's forward.
WRAPPERS = {
    "softmax": (
        "LigerSoftmaxFunction",
        """
class ModelNew(nn.Module):
    def forward(self, x):
        return LigerSoftmaxFunction.apply(x)
""",
    ),
    "layer_norm": (
        "LigerLayerNormFunction",
        """
class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x):
        return LigerLayerNormFunction.apply(x, self.weight, self.bias, self.eps)
""",
    ),
    "rms_norm": (
        "LigerRMSNormFunction",
        """
class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x):
        return LigerRMSNormFunction.apply(x, self.weight, self.eps, 0.0, "llama", False)
""",
    ),
    "swiglu": (
        "LigerSiLUMulFunction",
        """
class ModelNew(nn.Module):
    def forward(self, a, b):
        return LigerSiLUMulFunction.apply(a, b)
""",
    ),
    "geglu": (
        "LigerGELUMulFunction",
        """
class ModelNew(nn.Module):
    def forward(self, a, b):
        return LigerGELUMulFunction.apply(a, b)
""",
    ),
}
OPS = tuple(WRAPPERS)


def liger_op_path(op: str) -> Path:
    """liger_kernel/ops/<op>.py of the installed package; skips the test when it is absent."""
    spec = importlib.util.find_spec("liger_kernel")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(
            "liger_kernel is not installed (pip install -e '.[liger]', or `make setup`): "
            "the Liger-Kernel ops cannot be read"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "ops" / f"{op}.py"
    assert path.is_file(), f"the installed liger_kernel has no ops/{op}.py"
    return path


def liger_candidate(op: str) -> str:
    """The op's module source, unchanged, followed by a ModelNew that calls its Function."""
    source = liger_op_path(op).read_text(encoding="utf-8")
    function, wrapper = WRAPPERS[op]
    classes = {n.name for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
    assert function in classes, f"liger_kernel/ops/{op}.py no longer defines {function}"
    return f"{source}\n\nimport torch.nn as nn\n\n{wrapper}"

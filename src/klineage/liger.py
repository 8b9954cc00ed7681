"""Experts from an installed library: Liger-Kernel's ops as problem + expert pairs.

Liger-Kernel (the `liger` extra) is a real Triton kernel library whose code has shapes the
corpus lacks (its softmax has a multi-block path for long rows). `klineage corpus liger --out
DIR` reads each op's module from the installed package at run time, appends a thin ModelNew
that calls its autograd Function's forward, and writes it beside a problem file (the corpus'
own reference where one fits, else one written here): DIR/liger_<op>/{problem.py, expert.py,
PROVENANCE.json}. Nothing of Liger is copied into this repository; the walk then treats the
file like any expert, and its skills' provenance names it (`source_kernel`).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from klineage.errors import UsageError


@dataclass(frozen=True)
class LigerOp:
    function: str  # the autograd Function the wrapper calls
    wrapper: str  # class ModelNew in the gate's form
    problem: str  # resource path of the reference problem (klineage's own)
    cpu: bool  # runs under Triton's CPU interpreter (the others only on a GPU)


_NORM_INIT = """
    def __init__(self, hidden_size, eps={eps}):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))
"""

OPS: dict[str, LigerOp] = {
    "softmax": LigerOp(
        "LigerSoftmaxFunction",
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return LigerSoftmaxFunction.apply(x)\n",
        "kernels/softmax/problem.py",
        cpu=True,
    ),
    "layer_norm": LigerOp(
        "LigerLayerNormFunction",
        "class ModelNew(nn.Module):"
        + _NORM_INIT.format(eps="1e-5")
        + "        self.bias = nn.Parameter(torch.randn(hidden_size))\n\n"
        "    def forward(self, x):\n"
        "        return LigerLayerNormFunction.apply(x, self.weight, self.bias, self.eps)\n",
        "kernels/layernorm/problem.py",
        cpu=False,
    ),
    "rms_norm": LigerOp(
        "LigerRMSNormFunction",
        "class ModelNew(nn.Module):"
        + _NORM_INIT.format(eps="1e-6")
        + "\n    def forward(self, x):\n"
        '        return LigerRMSNormFunction.apply(x, self.weight, self.eps, 0.0, "llama", False)\n',
        "kernels/rmsnorm/problem.py",
        cpu=False,
    ),
    "swiglu": LigerOp(
        "LigerSiLUMulFunction",
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return LigerSiLUMulFunction.apply(a, b)\n",
        "liger_problems/swiglu.py",
        cpu=False,
    ),
    "geglu": LigerOp(
        "LigerGELUMulFunction",
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return LigerGELUMulFunction.apply(a, b)\n",
        "liger_problems/geglu.py",
        cpu=False,
    ),
}


def op_path(op: str) -> Path:
    """liger_kernel/ops/<op>.py of the installed package (nothing is imported)."""
    spec = importlib.util.find_spec("liger_kernel")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "liger_kernel is not installed: pip install 'klineage[liger]' (or liger-kernel)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "ops" / f"{op}.py"
    if not path.is_file():
        raise UsageError(f"the installed liger_kernel has no ops/{op}.py ({path})")
    return path


def expert_source(op: str) -> str:
    """The op's module source, unchanged, followed by a ModelNew that calls its Function."""
    if op not in OPS:
        raise UsageError(f"no Liger op {op!r}; known: {', '.join(OPS)}")
    path = op_path(op)
    source = path.read_text(encoding="utf-8")
    spec = OPS[op]
    classes = {n.name for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
    if spec.function not in classes:
        raise UsageError(
            f"{path}: no class {spec.function} (a Liger-Kernel version this does not know)"
        )
    return f"{source}\n\nimport torch.nn as nn\n\n\n{spec.wrapper}"


def problem_source(op: str) -> str:
    return (resources.files("klineage") / OPS[op].problem).read_text(encoding="utf-8")


def write_pairs(out: Path, ops: list[str] | None = None) -> list[Path]:
    """DIR/liger_<op>/{problem.py, expert.py, PROVENANCE.json} for each op; the folders."""
    chosen = ops or list(OPS)
    unknown = [o for o in chosen if o not in OPS]
    if unknown:
        raise UsageError(f"--ops {', '.join(unknown)}: known Liger ops are {', '.join(OPS)}")
    try:
        version = importlib.metadata.version("liger-kernel")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    written = []
    for op in chosen:
        expert = expert_source(op)
        folder = out / f"liger_{op}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "problem.py").write_text(problem_source(op), encoding="utf-8")
        (folder / "expert.py").write_text(expert, encoding="utf-8")
        source = op_path(op).read_bytes()
        provenance = {
            "library": "liger-kernel",
            "version": version,
            "module": f"liger_kernel/ops/{op}.py",
            "sha256": hashlib.sha256(source).hexdigest(),
            "function": OPS[op].function,
            "problem": f"klineage/{OPS[op].problem}",
            "cpu_interpreter": OPS[op].cpu,
        }
        (folder / "PROVENANCE.json").write_text(
            json.dumps(provenance, indent=1) + "\n", encoding="utf-8"
        )
        written.append(folder)
    return written

"""Guards on the candidate's forward: the reference, torch compute, side streams and compilers."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from klineage.gate.static_guards.analysis import Violation, _dotted, _find_class
from klineage.gate.static_guards.tables import ALLOWED_TORCH_CALLS


def guard_no_reference_model(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: calling or inheriting the reference Model makes the reference the answer."""
    model_new = _find_class(tree, "ModelNew")
    if model_new is not None:
        for base in model_new.bases:
            if (_dotted(base) or "").split(".")[-1] == "Model":
                yield Violation(
                    "no_reference_model", model_new.lineno, "ModelNew inherits the reference Model"
                )
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
            yield Violation("no_reference_model", node.lineno, "refers to the reference Model")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "Model" for a in node.names):
            yield Violation("no_reference_model", node.lineno, "imports the reference Model")


def guard_no_torch_compute_in_forward(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: torch compute in forward means PyTorch, not the kernel, does the work."""
    model_new = _find_class(tree, "ModelNew")
    if model_new is None:
        return
    for fn in model_new.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "forward"):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func) or ""
            head, _, attr = name.rpartition(".")
            if head in (
                "torch",
                "torch.nn.functional",
                "F",
                "torch.special",
                "torch.linalg",
                "torch.fft",
            ):
                if head == "torch" and attr in ALLOWED_TORCH_CALLS:
                    continue
                yield Violation(
                    "no_torch_compute",
                    node.lineno,
                    f"{name}() computes in PyTorch inside ModelNew.forward (only allocation, views and casts are allowed)",
                )


def guard_no_side_streams_or_compile(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: side streams escape the timing; torch.compile/jit substitute another compiler."""
    banned = {
        "torch.cuda.Stream": "work on a side stream escapes the timed stream",
        "torch.cuda.stream": "work on a side stream escapes the timed stream",
        "torch.compile": "torch.compile is not the candidate's kernel",
        "torch.jit.script": "TorchScript is not the candidate's kernel",
        "torch.jit.trace": "TorchScript is not the candidate's kernel",
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name):
            name = _dotted(node)
            if name in banned:
                yield Violation("no_side_effects", node.lineno, f"{name}: {banned[name]}")

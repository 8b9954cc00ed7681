"""Guards read from the candidate's source, before any of it runs.

Each guard is a small function returning violations; each carries a one-line rationale.
Text can be fooled, so the runtime guards (runtime_guards.py) also check what actually ran.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# torch.* calls a forward may make: allocation, views/reshapes, layout and dtype plumbing,
# and queries. Everything else computes, and computing is the Triton kernels' job.
ALLOWED_TORCH_CALLS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "arange",
        "tensor",
        "as_strided",
        "broadcast_shapes",
        "Size",
        "device",
        "dtype",
        "finfo",
        "iinfo",
        "is_tensor",
        "is_floating_point",
        "get_device",
        "reshape",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "t",
        "narrow",
        "select",
        "chunk",
        "split",
        "unbind",
        "movedim",
        "view_as_real",
        "view_as_complex",
        "promote_types",
        "result_type",
        "set_grad_enabled",
        "no_grad",
        "inference_mode",
    }
)


@dataclass(frozen=True)
class Violation:
    guard: str
    line: int | None
    message: str

    def render(self, path: str) -> str:
        where = f"{path}:{self.line}" if self.line else path
        return f"{where}: [{self.guard}] {self.message}"


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = _dotted(target) or ""
    return name in ("triton.jit", "jit") or name.endswith(".jit")


def _find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def guard_launches_triton(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: a candidate with no @triton.jit kernel is not a Triton kernel at all."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            _is_triton_jit(d) for d in node.decorator_list
        ):
            return
    yield Violation("launches_triton", None, "no @triton.jit kernel is defined in this file")


def guard_no_try_except(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: a try/except can fall back to eager PyTorch when the kernel fails."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Try | ast.TryStar):
            yield Violation(
                "no_try_except",
                node.lineno,
                "try/except block (a fallback path hides a failing kernel)",
            )
        elif isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("suppress"):
            yield Violation(
                "no_try_except", node.lineno, "contextlib.suppress (swallows kernel errors)"
            )


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


GUARDS: tuple[Callable[[ast.Module], Iterator[Violation]], ...] = (
    guard_launches_triton,
    guard_no_try_except,
    guard_no_reference_model,
    guard_no_torch_compute_in_forward,
    guard_no_side_streams_or_compile,
)


def check_static(tree: ast.Module) -> list[Violation]:
    """Every violation every guard finds, in source order."""
    found = [v for guard in GUARDS for v in guard(tree)]
    return sorted(found, key=lambda v: v.line or 0)

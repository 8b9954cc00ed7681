"""The imports guard: the modules a candidate may import, and os.environ reads."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from klineage.gate.static_guards.analysis import Violation, _analyse, _dotted, _Module, _under
from klineage.gate.static_guards.tables import (
    ALLOWED_ENV_READS,
    ALLOWED_MODULES,
    BANNED_TORCH_APIS,
    DENIED_TORCH_MODULES,
    KERNEL_LIBRARIES,
)


def _module_problem(module: str) -> str | None:
    """Why a candidate may not import `module` (None: it may)."""
    parts = module.split(".")
    if parts[0] in KERNEL_LIBRARIES:
        return None
    if parts[0] not in ALLOWED_MODULES:
        return (
            f"imports {module} (a candidate may import only torch, triton, "
            f"{', '.join(KERNEL_LIBRARIES)} and pure-Python helpers such as math and functools)"
        )
    if parts[0] in ("torch", "triton") and any(p.startswith("_") for p in parts[1:]):
        return f"imports the private module {module}"
    for denied in DENIED_TORCH_MODULES:
        if _under(module, denied):
            return f"imports {module} (registers ops, compiles other code, loads pickles or forks)"
    return None


def _env_read(m: _Module, name: ast.Name) -> bool:
    """True for os.environ.get("<allowed>") / os.environ.get("<allowed>", <constant>)."""
    environ = m.parents.get(name)
    get = m.parents.get(environ) if environ is not None else None
    call = m.parents.get(get) if get is not None else None
    return (
        isinstance(environ, ast.Attribute)
        and environ.attr == "environ"
        and isinstance(get, ast.Attribute)
        and get.attr == "get"
        and isinstance(call, ast.Call)
        and call.func is get
        and not call.keywords
        and 1 <= len(call.args) <= 2
        and all(isinstance(a, ast.Constant) for a in call.args)
        and call.args[0].value in ALLOWED_ENV_READS  # type: ignore[attr-defined]
    )


def guard_imports(tree: ast.Module) -> Iterator[Violation]:
    """Rationale: every module beyond torch/triton/pure helpers is a door out of the sandbox."""
    m = _analyse(tree)
    os_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield Violation(
                "imports",
                node.lineno,
                f"relative import from {'.' * node.level}{node.module or ''} (a candidate is one file)",
            )
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "os":
                    os_names.add(a.asname or "os")  # checked at each use, below
                    continue
                problem = _module_problem(a.name)
                if problem:
                    yield Violation("imports", node.lineno, problem)
        elif isinstance(node, ast.ImportFrom) and node.module:
            problem = _module_problem(node.module)
            if problem:
                yield Violation("imports", node.lineno, problem)
                continue
            for a in node.names:
                if a.name == "*":
                    yield Violation(
                        "imports",
                        node.lineno,
                        f"from {node.module} import * (hides which names the candidate uses)",
                    )
                elif node.module.split(".")[0] in ("torch", "triton"):
                    path = f"{node.module}.{a.name}"
                    problem = _module_problem(path)
                    if problem is None and any(_under(path, b) for b in BANNED_TORCH_APIS):
                        problem = f"imports {path} (not the candidate's Triton kernel)"
                    if problem:
                        yield Violation("imports", node.lineno, problem)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in os_names and not _env_read(m, node):
            parent = m.parents.get(node)
            what = _dotted(parent) if isinstance(parent, ast.Attribute) else node.id
            yield Violation(
                "imports",
                node.lineno,
                f"uses {what}: os may only be read as os.environ.get(...) of "
                f"{', '.join(sorted(ALLOWED_ENV_READS))}",
            )

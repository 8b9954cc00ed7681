"""Load problem and candidate files with errors that name the file, the line and what was expected.

Importing a file runs its code, so load_problem is called in the gate's sandboxed reference
process (klineage.gate.reference); the parent only parses (parse_source). Candidates are
imported by the gate's harness (gate/harness.py), which holds no klineage code.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from klineage.errors import LoadError, UsageError

DEFAULT_REGIME = "default"

# The module global that holds --set values while a problem file with overrides runs.
_OVERRIDES_NAME = "__klineage_overrides__"


def read_source(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise LoadError(str(path), "file not found", expected="a Python file") from e
    except (OSError, UnicodeDecodeError) as e:
        raise LoadError(str(path), f"cannot read: {e}", expected="a UTF-8 Python file") from e


def parse_source(path: Path, source: str | None = None) -> ast.Module:
    """Parse a file; a syntax error becomes a LoadError with the line and a caret."""
    text = read_source(path) if source is None else source
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise LoadError(
            str(path),
            f"syntax error: {e.msg}",
            line=e.lineno,
            column=e.offset,
            source_line=e.text,
            expected="valid Python",
        ) from e


def error_line_in(path: Path, exc: BaseException) -> tuple[int | None, str | None]:
    """The deepest line of `path` in the exception's traceback, and its text."""
    line = text = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == path.resolve():
            line, text = frame.lineno, frame.line
    return line, text


def assignable_globals(tree: ast.Module) -> list[str]:
    """Names bound by a top-level `NAME = value` (or `NAME: T = value`): what --set can set."""
    names: list[str] = []
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Name) and t.id not in names:
                names.append(t.id)
    return names


def override_problem(path: Path, overrides: dict[str, Any], source: str | None = None) -> str:
    """What is wrong with `overrides` for this file ("" when nothing): a name with no top-level
    assignment to rebind. Parses only: the file's code does not run."""
    if not overrides:
        return ""
    names = assignable_globals(parse_source(path, source))
    missing = [k for k in overrides if k not in names]
    if not missing:
        return ""
    return (
        f"--set {', '.join(missing)}: no module-level assignment to {', '.join(missing)}; "
        f"assignable globals: {', '.join(names) or 'none'}"
    )


def check_overrides(path: Path, overrides: dict[str, Any], source: str | None = None) -> None:
    """A UsageError naming the file and the names --set can set, when an override has no
    top-level assignment to rebind."""
    why = override_problem(path, overrides, source)
    if why:
        raise UsageError(f"{path}: {why}")


def rebind(tree: ast.Module, overrides: dict[str, Any]) -> ast.Module:
    """The module with the value of every top-level assignment to an overridden name replaced
    by the override, so that globals computed from it after (bias_shape = (out_channels, 1, 1))
    follow. Line numbers are kept: errors still point at the file's own lines."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            names = [node.target.id] if isinstance(node.target, ast.Name) else []
        else:
            continue
        hit = [n for n in names if n in overrides]
        if not hit or node.value is None:
            continue
        if len(names) > 1 and len({repr(overrides.get(n)) for n in names}) > 1:
            continue  # a = b = 1 with only one overridden: left alone, set after the run
        value = ast.Subscript(
            value=ast.Name(id=_OVERRIDES_NAME, ctx=ast.Load()),
            slice=ast.Constant(value=hit[0]),
            ctx=ast.Load(),
        )
        node.value = ast.copy_location(value, node.value)
    return ast.fix_missing_locations(tree)


def import_file(
    path: Path, module_name: str, overrides: dict[str, Any] | None = None
) -> ModuleType:
    """Import a file as a fresh module; any error while running it becomes a LoadError.

    overrides: module-level assignments to rebind before the file runs (--set NAME=VALUE)."""
    tree = parse_source(path)  # a syntax error gets its caret here rather than from importlib
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(str(path), "cannot be imported", expected="a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # Helpers beside the file (a candidate's own utils.py) import as in KernelBench's runner.
    parent = str(path.resolve().parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    try:
        if overrides:
            code = compile(rebind(tree, overrides), str(path), "exec")
            module.__dict__[_OVERRIDES_NAME] = dict(overrides)
            exec(code, module.__dict__)
            module.__dict__.pop(_OVERRIDES_NAME, None)
            for k, v in overrides.items():  # a chained assignment rebind() left alone
                setattr(module, k, v)
        else:
            spec.loader.exec_module(module)
    except SystemExit as e:
        del sys.modules[module_name]
        line, text = error_line_in(path, e)
        raise LoadError(
            str(path),
            f"exits while being imported (SystemExit {e.code})",
            line=line,
            source_line=text,
            expected="a module that defines classes and functions without exiting",
        ) from None
    except Exception as e:
        del sys.modules[module_name]
        line, text = error_line_in(path, e)
        raise LoadError(
            str(path),
            f"{type(e).__name__} while importing: {e}",
            line=line,
            source_line=text,
            expected="a module that imports without error",
        ) from e
    return module


def _module_name(kind: str, path: Path) -> str:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    return f"klineage_{kind}_{digest}"


def _require_class(module: ModuleType, path: Path, name: str) -> type:
    import torch.nn as nn

    obj = getattr(module, name, None)
    if obj is None:
        defined = sorted(
            n
            for n, v in vars(module).items()
            if inspect.isclass(v) and v.__module__ == module.__name__
        )
        raise LoadError(
            str(path),
            f"no class {name} defined (classes here: {', '.join(defined) or 'none'})",
            expected=f"class {name}(nn.Module) at module level",
        )
    if not (inspect.isclass(obj) and issubclass(obj, nn.Module)):
        raise LoadError(
            str(path),
            f"{name} is {type(obj).__name__}, not an nn.Module subclass",
            line=_def_line(obj),
            expected=f"class {name}(nn.Module)",
        )
    return obj


def _def_line(obj: Any) -> int | None:
    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return None


@dataclass
class Regime:
    """One shape regime: keyword arguments of get_inputs plus module-global overrides."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class Problem:
    path: Path
    module: ModuleType
    model_cls: type
    regimes: dict[str, Regime]
    cpu_regimes: tuple[str, ...]
    # TOLERANCES in the problem file: dtype name -> tolerance replacing the gate's default for
    # that dtype (a reference that rounds an intermediate to bf16, say), at most MAX_TOLERANCE.
    tolerances: dict[str, float] = field(default_factory=dict)

    def select_regimes(self, requested: list[str] | None, device: str) -> list[str]:
        """The regimes to run: those asked for, else the device's default set."""
        if requested:
            unknown = [r for r in requested if r not in self.regimes]
            if unknown:
                raise LoadError(
                    str(self.path),
                    f"unknown regime {', '.join(unknown)}",
                    expected=f"one of: {', '.join(self.regimes)}",
                )
            return list(requested)
        if device == "cpu" and self.cpu_regimes:
            return list(self.cpu_regimes)
        return list(self.regimes)

    def init_inputs(self, regime: str) -> list[Any]:
        with self.regime_globals(regime):
            fn = getattr(self.module, "get_init_inputs", None)
            if fn is None:
                return []
            value = _call_user(self.path, fn, "get_init_inputs")
        if not isinstance(value, list | tuple):
            raise LoadError(
                str(self.path),
                f"get_init_inputs() returned {type(value).__name__}",
                line=_def_line(fn),
                expected="a list of constructor arguments",
            )
        return list(value)

    def make_inputs(self, regime: str, device: str) -> list[Any]:
        """Call get_inputs for a regime with tensors created on `device` (seed set by caller)."""
        import torch

        r = self.regimes[regime]
        fn = self.module.get_inputs
        with self.regime_globals(regime), torch.device(device):
            value = _call_user(self.path, fn, "get_inputs", **r.kwargs)
        if not isinstance(value, list | tuple):
            raise LoadError(
                str(self.path),
                f"get_inputs() returned {type(value).__name__}",
                line=_def_line(fn),
                expected="a list of tensors",
            )
        out: list[Any] = []
        for i, v in enumerate(value):
            if isinstance(v, torch.Tensor):
                out.append(v.to(device) if v.device.type != torch.device(device).type else v)
            elif isinstance(v, bool | int | float):
                out.append(v)
            else:
                raise LoadError(
                    str(self.path),
                    f"get_inputs() element {i} is {type(v).__name__}",
                    line=_def_line(fn),
                    expected="tensors (or int/float/bool scalars)",
                )
        if not any(isinstance(v, torch.Tensor) for v in out):
            raise LoadError(
                str(self.path),
                "get_inputs() returned no tensor",
                line=_def_line(fn),
                expected="a list with at least one tensor",
            )
        return out

    def regime_globals(self, regime: str) -> _GlobalOverrides:
        return _GlobalOverrides(self.module, self.regimes[regime].overrides)


class _GlobalOverrides:
    """Temporarily set module globals (KernelBench's batch_size = ...) for one regime."""

    _MISSING = object()

    def __init__(self, module: ModuleType, overrides: dict[str, Any]) -> None:
        self.module = module
        self.overrides = overrides
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> None:
        for k, v in self.overrides.items():
            self.saved[k] = getattr(self.module, k, self._MISSING)
            setattr(self.module, k, v)

    def __exit__(self, *exc: object) -> None:
        for k, old in self.saved.items():
            if old is self._MISSING:
                delattr(self.module, k)
            else:
                setattr(self.module, k, old)


def _call_user(path: Path, fn: Any, name: str, **kwargs: Any) -> Any:
    try:
        return fn(**kwargs)
    except Exception as e:
        line, text = error_line_in(path, e)
        raise LoadError(
            str(path),
            f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) raised "
            f"{type(e).__name__}: {e}",
            line=line,
            source_line=text,
            expected=f"{name} to run for this regime",
        ) from e


def _resolve_regimes(path: Path, module: ModuleType) -> dict[str, Regime]:
    get_inputs = getattr(module, "get_inputs", None)
    if get_inputs is None or not callable(get_inputs):
        raise LoadError(
            str(path), "no function get_inputs", expected="def get_inputs(): -> list of tensors"
        )
    params = inspect.signature(get_inputs).parameters
    raw = getattr(module, "REGIMES", None)
    if raw is None:
        raw = {DEFAULT_REGIME: {}}
    if not isinstance(raw, dict) or not raw:
        raise LoadError(
            str(path),
            f"REGIMES is {type(raw).__name__}",
            expected='a non-empty dict: regime name -> dict of get_inputs kwargs or globals, e.g. {"small": dict(M=7, N=300)}',
        )
    regimes: dict[str, Regime] = {}
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise LoadError(
                str(path), f"REGIMES[{name!r}] is {type(spec).__name__}", expected="a dict"
            )
        # --set values are in the module already (import_file rebinds them); a regime's own
        # values are set over them while it runs.
        regime = Regime(str(name))
        for key, value in spec.items():
            if key in params:
                regime.kwargs[key] = value
            elif hasattr(module, key):
                regime.overrides[key] = value
            else:
                raise LoadError(
                    str(path),
                    f"REGIMES[{name!r}] sets {key!r}, which is neither a get_inputs parameter nor a module global",
                    expected=f"one of get_inputs({', '.join(params)}) or an existing module global",
                )
        regimes[str(name)] = regime
    return regimes


def load_problem(path: Path, global_overrides: dict[str, Any] | None = None) -> Problem:
    """Import a KernelBench problem file and resolve its regimes."""
    path = Path(path)
    overrides = global_overrides or {}
    why = override_problem(path, overrides)
    if why:
        raise LoadError(str(path), why, expected="a --set name assigned at module level")
    module = import_file(path, _module_name("problem", path), overrides)
    # A candidate that imports the problem by its file name gets this very module, so a call
    # to the reference is seen by the runtime guard instead of going to a fresh copy.
    sys.modules.setdefault(path.stem, module)
    model_cls = _require_class(module, path, "Model")
    regimes = _resolve_regimes(path, module)
    cpu = tuple(getattr(module, "CPU_REGIMES", ()) or ())
    unknown = [r for r in cpu if r not in regimes]
    if unknown:
        raise LoadError(
            str(path),
            f"CPU_REGIMES names unknown regimes: {', '.join(unknown)}",
            expected=f"names from REGIMES: {', '.join(regimes)}",
        )
    return Problem(
        path=path,
        module=module,
        model_cls=model_cls,
        regimes=regimes,
        cpu_regimes=cpu,
        tolerances=_tolerances(path, module),
    )


def _tolerances(path: Path, module: ModuleType) -> dict[str, float]:
    from klineage.config import DEFAULT_TOLERANCES, MAX_TOLERANCE

    raw = getattr(module, "TOLERANCES", None)
    if raw is None:
        return {}
    expected = (
        f"TOLERANCES = {{dtype name: tolerance}} with names from {', '.join(DEFAULT_TOLERANCES)} "
        f"and each tolerance in (0, {MAX_TOLERANCE:g}]"
    )
    if not isinstance(raw, dict):
        raise LoadError(str(path), f"TOLERANCES is {type(raw).__name__}", expected=expected)
    out: dict[str, float] = {}
    for dtype, tol in raw.items():
        ok_value = isinstance(tol, int | float) and not isinstance(tol, bool)
        if dtype not in DEFAULT_TOLERANCES or not ok_value or not 0 < float(tol) <= MAX_TOLERANCE:
            raise LoadError(str(path), f"TOLERANCES[{dtype!r}] = {tol!r}", expected=expected)
        out[str(dtype)] = float(tol)
    return out

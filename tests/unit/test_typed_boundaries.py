"""No `dict[str, Any]` crosses a package boundary (issue 13): a public function or method of a
CHECKED package whose parameters or return mention `dict[str, Any]`, `Dict[str, Any]` or a bare
`dict` (itself or through a module-level alias) must not be imported or called from a module of
another package. Data of a fixed shape crosses as a model (pydantic, TypedDict, dataclass); data
that really is open-ended crosses as `Mapping[str, object]`-style named types, with a comment
saying why (gate/records.py: GateJSON, Overrides; gate/request.py: Event)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import klineage

SRC = Path(klineage.__file__).parent
# Packages whose boundaries are typed; extend the list as more of them are.
CHECKED = ["gate", "lineage", "skills", "optimize", "bench", "report"]
# The corpus and the held-out kernels are problem files, not library code.
EXEMPT = ("kernels", "heldout")

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Definition:
    module: str  # klineage.gate.records
    owner: str | None  # the class a method belongs to, None for a function
    name: str
    line: int
    args: str
    returns: str  # " -> ..." or ""

    def where(self) -> str:
        path = self.module.removeprefix("klineage.").replace(".", "/")
        qual = f"{self.owner}.{self.name}" if self.owner else self.name
        return f"{path}.py:{self.line} {qual}({self.args}){self.returns}"


def _package(module: str) -> str:
    """klineage.gate.records -> gate; klineage.mcp_server -> mcp_server."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@cache
def _modules() -> dict[str, ast.Module]:
    """Every library module by dotted name (klineage.gate, klineage.gate.records), parsed."""
    trees: dict[str, ast.Module] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] in EXEMPT:
            continue
        parts = ["klineage", *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        trees[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return trees


def _is_package(module: str) -> bool:
    return (SRC.joinpath(*module.split(".")[1:]) / "__init__.py").is_file()


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module an ImportFrom reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


@cache
def _resolve(module: str, name: str, depth: int = 0) -> str:
    """The module that defines `name` as seen from `module`, following re-exports."""
    tree = _modules().get(module)
    if tree is None or depth > 10:
        return module
    for node in tree.body:
        if isinstance(node, (*Function.__args__, ast.ClassDef)) and node.name == name:
            return module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if (a.asname or a.name) == name:
                    return _resolve(_absolute(module, node), a.name, depth + 1)
    return module


@cache
def _aliases() -> dict[tuple[str, str], ast.expr]:
    """Module-level assignments (`EventCallback = Callable[...]`) by (module, name), so that a
    type alias cannot hide a dict[str, Any]."""
    found: dict[tuple[str, str], ast.expr] = {}
    for module, tree in _modules().items():
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value = node.target, node.value
            else:
                continue
            if isinstance(target, ast.Name):
                found[(module, target.id)] = value
    return found


def _untyped_dict(annotation: ast.expr | None, module: str | None = None, depth: int = 0) -> bool:
    """Does the annotation mention dict[str, Any], Dict[str, Any] or a bare dict / Dict, itself
    or (with the module it is written in) through a module-level alias?"""
    if annotation is None or depth > 5:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return _untyped_dict(ast.parse(annotation.value, mode="eval").body, module, depth)
    subscripted = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id in ("dict", "Dict"):
            if id(node) not in subscripted:
                return True
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("dict", "Dict")
            and isinstance(node.slice, ast.Tuple)
            and len(node.slice.elts) == 2
            and ast.unparse(node.slice.elts[1]) in ("Any", "typing.Any")
        ):
            return True
        elif module is not None and isinstance(node, ast.Name):
            where = _resolve(module, node.id)
            alias = _aliases().get((where, node.id))
            if alias is not None and _untyped_dict(alias, where, depth + 1):
                return True
    return False


def _offending(fn: Function, module: str | None = None) -> bool:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
    return _untyped_dict(fn.returns, module) or any(
        _untyped_dict(p.annotation, module) for p in params
    )


def _definitions(module: str) -> list[Definition]:
    """The module's public functions and public classes' public methods that offend."""
    found: list[Definition] = []

    def add(fn: Function, owner: str | None) -> None:
        if not fn.name.startswith("_") and _offending(fn, module):
            returns = f" -> {ast.unparse(fn.returns)}" if fn.returns else ""
            found.append(
                Definition(module, owner, fn.name, fn.lineno, ast.unparse(fn.args), returns)
            )

    for node in _modules()[module].body:
        if isinstance(node, Function.__args__):
            add(node, None)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, Function.__args__):
                    add(item, node.name)
    return found


@dataclass(frozen=True)
class Uses:
    names: frozenset[tuple[str, str]]  # (defining module, name): imported, or read as module.name
    attributes: frozenset[str]  # every `x.attr` read in the module


def _uses(module: str) -> Uses:
    tree = _modules()[module]
    imported: set[tuple[str, str]] = set()
    bound: dict[str, str] = {}  # a local name -> the klineage module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for a in node.names:
                if f"{source}.{a.name}" in _modules():  # from klineage.gate import records
                    bound[a.asname or a.name] = f"{source}.{a.name}"
                else:
                    imported.add((source, a.name))
        elif isinstance(node, ast.Import):
            for a in node.names:  # import klineage.gate.records [as m]
                bound[a.asname or a.name] = a.name
    attributes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attributes.add(node.attr)
            dotted = ast.unparse(node.value)
            if dotted in bound:  # m.name, klineage.gate.records.name
                imported.add((bound[dotted], node.attr))
    names = frozenset((_resolve(m, n), n) for m, n in imported)
    return Uses(names, frozenset(attributes))


def offenders() -> list[str]:
    modules = list(_modules())
    defs = [d for m in modules if _package(m) in CHECKED for d in _definitions(m)]
    uses = {m: _uses(m) for m in modules}
    crossing: list[str] = []
    for d in defs:
        for module, used in uses.items():
            if _package(module) == _package(d.module):
                continue
            if d.owner is None:
                hit = (d.module, d.name) in used.names
            else:  # a method (no types here to say of what): read off anything in a module
                # that uses its class's module, which errs on the side of a boundary
                hit = d.name in used.attributes and any(m == d.module for m, _ in used.names)
            if hit:
                crossing.append(d.where())
                break
    return sorted(crossing)


def test_no_untyped_dict_crosses_a_package_boundary() -> None:
    found = offenders()
    assert found == [], (
        f"public functions of {', '.join(CHECKED)} used from another package take or return "
        "dict[str, Any] (give the data a model; a named open type, with its reason, only where "
        "the data is open-ended):\n" + "\n".join(found)
    )


def _fn(src: str) -> Function:
    node = ast.parse(src).body[0]
    assert isinstance(node, Function.__args__)
    return node


def test_the_rule_catches_each_spelling_of_an_untyped_dict() -> None:
    assert _offending(_fn("def f(x: dict[str, Any]) -> int: ..."))
    assert _offending(_fn("def f(x) -> dict: ..."))
    assert _offending(_fn("def f(x: 'Dict[str, Any] | None') -> None: ..."))
    assert _offending(_fn("def f(*, y: list[dict[str, Any]]) -> None: ..."))
    assert not _offending(_fn("def f(x: dict[str, float]) -> Mapping[str, object]: ..."))


def test_an_alias_does_not_hide_an_untyped_dict() -> None:
    # lineage/walk.py's EventCallback was Callable[[str, dict[str, Any]], None].
    aliases = _aliases()
    walk = "klineage.lineage.walk"
    assert (walk, "EventCallback") in aliases
    hidden = ast.parse("Callable[[str, dict[str, Any]], None]", mode="eval").body
    aliases[(walk, "Hidden")] = hidden
    try:
        assert _offending(_fn("def f(on_event: Hidden) -> None: ..."), walk)
        assert not _offending(_fn("def f(on_event: EventCallback) -> None: ..."), walk)
    finally:
        del aliases[(walk, "Hidden")]


def test_a_crossing_is_found_through_a_re_export() -> None:
    # cli/optimize.py imports optimize from klineage.optimize, which re-exports it from loop.py.
    assert _resolve("klineage.optimize", "optimize") == "klineage.optimize.loop"
    assert ("klineage.optimize.loop", "optimize") in _uses("klineage.cli.optimize").names

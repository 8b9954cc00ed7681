"""The candidate's source read once: Violation, name resolution, the module's imports, jit
bodies, classes and their forwards (what every guard asks of it)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from klineage.gate.static_guards.tables import FROM_IMPORTED_MODULES, KERNEL_LIBRARIES


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


_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _chain_root(node: ast.AST) -> ast.AST:
    """The innermost value of a.b(c)[d].e: walks attributes, calls and subscripts."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _value_root(node: ast.AST) -> ast.AST:
    """The innermost value of a.b[c].d, stopping at a call (whose result is a computed value)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".")


def _is_triton(path: str | None) -> bool:
    return path is not None and _under(path, "triton")


def _is_torch(path: str | None) -> bool:
    return path is not None and _under(path, "torch")


def _is_kernel_library(path: str | None) -> bool:
    return path is not None and path.split(".")[0] in KERNEL_LIBRARIES


def _bound_by_import(alias: ast.alias, from_module: str | None) -> tuple[str, str]:
    """(local name, dotted path it stands for) for one imported name."""
    if from_module is not None:
        return alias.asname or alias.name, f"{from_module}.{alias.name}"
    if alias.asname:
        return alias.asname, alias.name
    head = alias.name.split(".")[0]
    return head, head


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes of a scope's body that belong to it, not to a nested function, class or comprehension
    (a nested scope node itself is yielded, since its name is bound here)."""
    body = scope.body if isinstance(scope.body, list) else [scope.body]  # type: ignore[attr-defined]
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (*_FUNCTION_SCOPES, ast.ClassDef, *_COMPREHENSIONS)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _function_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names local to a function: its parameters and what its own body binds (minus globals)."""
    a = fn.args
    names = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x}
    declared_global: set[str] = set()
    for node in _own_nodes(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
    return names - declared_global


def _unbound_loads(
    node: ast.AST, watched: frozenset[str], bound: frozenset[str] = frozenset()
) -> Iterator[ast.Name]:
    """Loads of a watched name that no enclosing function binds, so they reach the builtin.
    Module- and class-level bindings do not count: a conditional one falls back to builtins."""
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id in watched and node.id not in bound:
            yield node
        return
    if isinstance(node, _FUNCTION_SCOPES):
        a = node.args
        outer: list[ast.AST] = [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
        if not isinstance(node, ast.Lambda):
            outer += [*node.decorator_list, *([node.returns] if node.returns else [])]
            outer += [
                x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.annotation
            ]
        for e in outer:
            yield from _unbound_loads(e, watched, bound)
        inner = bound | _function_locals(node)
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            yield from _unbound_loads(stmt, watched, inner)
        return
    if isinstance(node, _COMPREHENSIONS):
        targets = {
            n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)
        }
        bound = bound | targets
    for child in ast.iter_child_nodes(node):
        yield from _unbound_loads(child, watched, bound)


@dataclass
class _Module:
    """What the guards need to know about a candidate's names, computed once per guard call."""

    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted import path
    module_names: set[str] = field(default_factory=set)  # names bound to a module by import
    ambiguous: set[str] = field(default_factory=set)  # imported names bound to something else too
    jit_defs: list[ast.FunctionDef] = field(default_factory=list)
    plain_defs: set[str] = field(default_factory=set)  # module-level non-jit functions, classes
    globals: set[str] = field(default_factory=set)  # every name bound at module level
    const_globals: set[str] = field(default_factory=set)  # ... bound only to constants

    @property
    def jit_names(self) -> set[str]:
        return {fn.name for fn in self.jit_defs}

    def resolve(self, node: ast.AST, *, strict: bool = False) -> str | None:
        """The dotted path an imported name or attribute chain stands for (None: not imported).
        strict: None also for a name that is rebound elsewhere (tl = math would fool a kernel
        check; the bans still see the imported path)."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head not in self.aliases or (strict and head in self.ambiguous):
            return None
        return f"{self.aliases[head]}.{rest}" if rest else self.aliases[head]

    def is_jit_decorator(self, decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        path = self.resolve(target, strict=True)
        return _is_triton(path) and (path or "").rsplit(".", 1)[-1] == "jit"

    def const_expr(self, e: ast.AST) -> bool:
        """True for values a kernel may read as a global: literals, tl.constexpr(...), triton
        attributes and math on those."""
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            return e.id in self.const_globals or _is_triton(self.resolve(e, strict=True))
        if isinstance(e, ast.Attribute):
            path = self.resolve(e, strict=True)
            return _is_triton(path) or (path or "").split(".")[0] == "math"
        if isinstance(e, ast.Call):
            path = self.resolve(e.func, strict=True)
            pure = _is_triton(path) or (path or "").split(".")[0] == "math"
            return pure and all(
                self.const_expr(x) for x in (*e.args, *(k.value for k in e.keywords))
            )
        if isinstance(
            e, ast.UnaryOp | ast.BinOp | ast.BoolOp | ast.Compare | ast.IfExp | ast.Tuple
        ):
            return all(
                self.const_expr(c) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr)
            )
        return False


def _kind(path: str) -> str:
    """Bindings of one name that the kernel check may treat alike."""
    if _is_triton(path):
        return "triton"
    return path.split(".")[0] if _is_kernel_library(path) else path


def _module_level_nodes(stmts: Iterable[ast.stmt]) -> Iterator[ast.AST]:
    """Nodes of module-level statements outside any function, class or comprehension body."""
    stack: list[ast.AST] = list(stmts)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*_FUNCTION_SCOPES, ast.ClassDef, *_COMPREHENSIONS)):
            stack.extend(ast.iter_child_nodes(node))


def _analyse(tree: ast.Module) -> _Module:
    m = _Module(tree)
    bindings: dict[str, set[str]] = {}  # name -> the import paths and "=value" bound to it
    declared_global: set[str] = set()
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            m.parents[child] = node
        if isinstance(node, ast.Import):
            for a in node.names:
                name, path = _bound_by_import(a, None)
                bindings.setdefault(name, set()).add(path)
                m.module_names.add(name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                if a.name != "*":
                    name, path = _bound_by_import(a, node.module)
                    bindings.setdefault(name, set()).add(path)
                    if path in FROM_IMPORTED_MODULES:
                        m.module_names.add(name)
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
    m.aliases = {name: sorted(paths)[0] for name, paths in bindings.items()}
    # Module-level bindings: `tl = triton.language` is one more alias; anything else is a value.
    assigned: dict[str, list[ast.expr | None]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        assigned.setdefault(n.id, []).append(
                            stmt.value if t is n and len(targets) == 1 else None
                        )
            rest: list[ast.AST] = [stmt.value]
        else:
            rest = [stmt]
        for node in _module_level_nodes(rest):  # type: ignore[arg-type]
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                assigned.setdefault(node.id, []).append(None)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                assigned.setdefault(node.name, []).append(None)
    for name in declared_global:
        assigned.setdefault(name, []).append(None)
    m.globals = set(assigned)
    for name, values in assigned.items():
        for value in values:
            to = m.resolve(value) if isinstance(value, ast.Attribute | ast.Name) else None
            if to is not None and (_is_triton(to) or _is_kernel_library(to)):
                bindings.setdefault(name, set()).add(to)
                m.aliases.setdefault(name, to)
            else:
                bindings.setdefault(name, set()).add("=value")
    m.ambiguous = {
        name
        for name, paths in bindings.items()
        if name in m.aliases and len({_kind(p) for p in paths}) > 1
    }
    while True:  # to a fixed point: D = C * 2 is a constant once C is
        consts = {
            name
            for name, values in assigned.items()
            if name not in m.aliases and all(v is not None and m.const_expr(v) for v in values)
        }
        if consts == m.const_globals:
            break
        m.const_globals = consts
    jit_by_call = {
        a.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and m.is_jit_decorator(node.func)
        for a in node.args
        if isinstance(a, ast.Name)
    }  # k = triton.jit(fn)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (
            any(m.is_jit_decorator(d) for d in node.decorator_list) or node.name in jit_by_call
        ):
            m.jit_defs.append(node)
    jit = {id(fn) for fn in m.jit_defs}
    m.plain_defs = {
        s.name
        for s in tree.body
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and id(s) not in jit
    }
    return m


def _inside_jit(m: _Module) -> set[int]:
    """ids of every node in the body of a @triton.jit function."""
    return {id(n) for fn in m.jit_defs for stmt in fn.body for n in ast.walk(stmt)}

"""Several rows per program: a [BLOCK_M, BLOCK_N] tile, BLOCK_M rows to a program.

A row-wise kernel (softmax, RMSNorm, LayerNorm) with short rows wastes most of a program on one
row: at N = 128 a one-row program moves 256 bytes, its warps are mostly masked, and M = 262144
rows make 262144 programs (launch, index setup and a tail wave each). Packing BLOCK_M rows into
a 2-D tile (BLOCK_M = TILE // BLOCK_N, capped by the rows there are) gives each program enough
bytes in flight and shares per-program loads (the weight) across its rows. It pays for short
rows; for rows that fill a block on their own the expression gives BLOCK_M = 1.

The optimization is a launch decision: a name assigned in the launcher, passed to the launch as
a constexpr keyword, and the divisor of the row count in the launch's grid (cdiv(M, BLOCK_M)).
Backward sets it to 1 (one row per program; the grid follows); the kernel's 2-D tile with one
row is the same computation. Forward restores the expert's expression (params["expr"]) or, given
params["tile"], emits min(max(TILE // BLOCK_N, 1), triton.next_power_of_2(M)).

This module also holds the launcher dataflow helpers that online_reduction and persistent_grid
use: launches `kernel[grid](...)`, the launcher's assignments, and what a grid depends on.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_triton_jit,
    parse,
    positions,
    replaced,
)
from klineage.rewrite.registry import register

# Launcher dataflow helpers (shared with online_reduction and persistent_grid) ----------------


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def same(a: str, b: str) -> bool:
    return "".join(a.split()) == "".join(b.split())


@dataclass
class Launch:
    call: cst.Call
    kernel: str  # the launched kernel's name (last dotted part)
    grid: cst.BaseExpression  # the expression inside kernel[...]
    func: cst.FunctionDef  # the enclosing launcher
    line: int


class _Scan(cst.CSTVisitor):
    def __init__(self) -> None:
        self.stack: list[tuple[cst.FunctionDef, bool]] = []
        self.calls: list[tuple[cst.Call, cst.FunctionDef]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append((node, any(is_triton_jit(d) for d in node.decorators)))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if not self.stack or any(jit for _, jit in self.stack):
            return
        if (
            isinstance(f, cst.Subscript)
            and len(f.slice) == 1
            and dotted(f.value)
            and isinstance(f.slice[0].slice, cst.Index)
        ):
            self.calls.append((node, self.stack[-1][0]))


class Ctx:
    """A parsed file: its launches (in launcher functions), jit kernels and positions."""

    def __init__(self, source: str) -> None:
        self.module = parse(source)
        wrapper, self.pos = positions(self.module)
        scan = _Scan()
        wrapper.visit(scan)
        self.launches = [self._launch(c, f) for c, f in scan.calls]
        self.kernels = {
            s.name.value: s
            for s in self.module.body
            if isinstance(s, cst.FunctionDef) and any(is_triton_jit(d) for d in s.decorators)
        }
        self.module_assigns = assignments(self.module)

    def _launch(self, call: cst.Call, func: cst.FunctionDef) -> Launch:
        sub = call.func
        assert isinstance(sub, cst.Subscript) and isinstance(sub.slice[0].slice, cst.Index)
        kernel = dotted(sub.value).split(".")[-1]
        return Launch(call, kernel, sub.slice[0].slice.value, func, self.line(call))

    def line(self, node: cst.CSTNode) -> int:
        return int(self.pos[node].start.line)

    def assigns(self, func: cst.FunctionDef) -> dict[str, list[cst.Assign | cst.AnnAssign]]:
        return assignments(func)


class _Assigns(cst.CSTVisitor):
    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.found: dict[str, list[cst.Assign | cst.AnnAssign]] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.root

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.found.setdefault(node.targets[0].target.value, []).append(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and isinstance(node.target, cst.Name):
            self.found.setdefault(node.target.value, []).append(node)


def assignments(root: cst.CSTNode) -> dict[str, list[cst.Assign | cst.AnnAssign]]:
    """Single-name assignments in a function (not its nested defs) or a module, in order."""
    v = _Assigns(root)
    root.visit(v)
    return v.found


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        return False


def names_in(node: cst.CSTNode) -> list[str]:
    v = _Names()
    node.visit(v)
    return v.names


def closure(expr: cst.BaseExpression, assigns: dict[str, list[Any]]) -> list[cst.BaseExpression]:
    """expr and every value assigned (in the launcher) to a name it depends on, transitively."""
    out, seen, todo = [expr], set(), names_in(expr)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for a in assigns.get(name, []):
            out.append(a.value)
            todo.extend(names_in(a.value))
    return out


def bound_names(node: cst.CSTNode) -> set[str]:
    """Names bound under node: assignment (also tuple), for, with-as and walrus targets."""
    out: set[str] = set()
    for n in walk(node):
        targets: list[Any] = []
        if isinstance(n, cst.Assign):
            targets = [t.target for t in n.targets]
        elif isinstance(n, cst.AnnAssign | cst.AugAssign | cst.For | cst.NamedExpr):
            targets = [n.target]
        elif isinstance(n, cst.AsName):
            targets = [n.name]
        out |= {x.value for t in targets for x in walk(t) if isinstance(x, cst.Name)}
    return out


def known_names(module: cst.Module, func: cst.FunctionDef) -> set[str]:
    """Names a launcher can use: its parameters and assignments, the module's defs, classes,
    imports and assignments, and builtins."""
    known = bound_names(func) | set(assignments(module)) | set(dir(builtins))
    known |= {p.name.value for p in func.params.params}
    known |= {s.name.value for s in module.body if isinstance(s, cst.FunctionDef | cst.ClassDef)}
    for n in walk(module):
        if isinstance(n, cst.ImportAlias):
            target = n.asname.name if n.asname else n.name
            known.add(dotted(target).split(".")[0])
    return known


def undefined_skip(
    expr: str, module: cst.Module, func: cst.FunctionDef, site: Site
) -> RewriteResult | None:
    """A skip when expr uses names the launcher func cannot see (known_names), else None."""
    missing = set(names_in(cst.parse_expression(expr))) - known_names(module, func)
    if missing:
        return RewriteResult.skip(
            f"{expr} uses {', '.join(sorted(missing))}, not defined here", site
        )
    return None


def walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Every node under `node` (itself included), pre-order."""
    out: list[cst.CSTNode] = []

    class _All(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            out.append(n)
            return True

    node.visit(_All())
    return out


def bind(call: cst.Call, kdef: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """The launch's arguments by kernel parameter name (positional ones bound in order)."""
    params = [p.name.value for p in kdef.params.params]
    out: dict[str, cst.BaseExpression] = {}
    i = 0
    for a in call.args:
        if a.keyword is not None:
            out[a.keyword.value] = a.value
        elif not a.star and i < len(params):
            out[params[i]] = a.value
            i += 1
    return out


def constexprs(kdef: cst.FunctionDef) -> set[str]:
    return {
        p.name.value
        for p in kdef.params.params
        if p.annotation is not None and dotted(p.annotation.annotation).endswith("constexpr")
    }


# The pass ---------------------------------------------------------------------------------


@dataclass
class _Match:
    launch: Launch
    assign: cst.Assign | cst.AnnAssign
    name: str
    keyword: str
    rows: str  # the row count the grid divides


def _divides(exprs: list[cst.BaseExpression], name: str) -> str | None:
    """The row count in a cdiv(rows, name) or (rows + name - 1) // name among exprs."""
    for e in exprs:
        for n in walk(e):
            if (
                isinstance(n, cst.Call)
                and dotted(n.func).split(".")[-1] == "cdiv"
                and len(n.args) == 2
                and isinstance(n.args[1].value, cst.Name)
                and n.args[1].value.value == name
            ):
                return code(n.args[0].value)
            rows = _ceil_div_rows(n, name)
            if rows is not None:
                return rows
    return None


def _ceil_div_rows(n: cst.CSTNode, name: str) -> str | None:
    """rows in (rows + name - 1) // name."""
    if not (isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.FloorDivide)):
        return None
    if not (isinstance(n.right, cst.Name) and n.right.value == name):
        return None
    sub = n.left
    if not (isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Subtract)):
        return None
    add = sub.left
    if (
        isinstance(add, cst.BinaryOperation)
        and isinstance(add.operator, cst.Add)
        and isinstance(add.right, cst.Name)
        and add.right.value == name
    ):
        return code(add.left)
    return None


def _is_one(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.value == "1"


def _matches(ctx: Ctx, want_one: bool) -> list[_Match]:
    from klineage.rewrite.passes.rows_axis import tiles_rows as _tiles_rows

    out: list[_Match] = []
    seen: set[int] = set()
    for launch in ctx.launches:
        fa = ctx.assigns(launch.func)
        kdef = ctx.kernels.get(launch.kernel)
        for arg in launch.call.args:
            if arg.keyword is None or not isinstance(arg.value, cst.Name):
                continue
            name = arg.value.value
            found = fa.get(name) or ([] if name in fa else ctx.module_assigns.get(name, []))
            if len(found) != 1 or _is_one(found[0].value) != want_one:  # type: ignore[arg-type]
                continue
            if kdef is not None and arg.keyword.value not in constexprs(kdef):
                continue
            if (kdef is None and want_one) or not (
                kdef is None or _tiles_rows(kdef, arg.keyword.value)
            ):
                continue
            rows = _divides(closure(launch.grid, {**ctx.module_assigns, **fa}), name)
            if rows is None or id(found[0]) in seen:
                continue
            seen.add(id(found[0]))
            out.append(_Match(launch, found[0], name, arg.keyword.value, rows))
    return out


def _triton_alias(module: cst.Module) -> str | None:
    for n in walk(module):
        if isinstance(n, cst.Import):
            for a in n.names:
                if dotted(a.name) == "triton":
                    return dotted(a.asname.name) if a.asname is not None else "triton"
    return None


@register
class RowsPerProgram(RewritePass):
    NAME = "rows_per_program"
    DESCRIPTION = (
        "Pack BLOCK_M short rows into one program's [BLOCK_M, BLOCK_N] tile "
        "(BLOCK_M = TILE // BLOCK_N, grid cdiv(M, BLOCK_M)): fewer, fuller programs and "
        "per-program loads shared across rows, instead of one mostly idle program per row."
    )
    CATEGORY = "parallelism"
    STRUCTURAL = True
    ANCHOR = "launcher: rows-per-program constexpr that divides the row count in the grid"

    def _site(self, ctx: Ctx, i: int, m: _Match, direction: str) -> Site:
        value = code(m.assign.value)  # type: ignore[arg-type]
        what = f"{m.name} = {value}" + (
            " (one row per program)" if direction == "forward" else " rows per program"
        )
        return self.site(
            direction,
            i,
            ctx.line(m.assign),
            m.launch.func.name.value,
            f"{what} for {m.launch.kernel}, grid cdiv({m.rows}, {m.name})",
            name=m.name,
            keyword=m.keyword,
            kernel=m.launch.kernel,
            rows=m.rows,
            **({"expr": value} if direction == "backward" else {}),
        )

    def backward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            ctx = Ctx(source)
            return [self._site(ctx, i, m, "backward") for i, m in enumerate(_matches(ctx, False))]

        return self.safe_sites(run)

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            ctx = Ctx(source)
            return [self._site(ctx, i, m, "forward") for i, m in enumerate(_matches(ctx, True))]

        return self.safe_sites(run)

    def _pick(self, ctx: Ctx, site: Site, want_one: bool) -> _Match | RewriteResult:
        found = _matches(ctx, want_one)
        kind = "one-row" if want_one else "rows-per-program"
        if site.index >= len(found):
            return RewriteResult.skip(f"no {kind} launch #{site.index} here", site)
        m = found[site.index]
        if site.params.get("name", m.name) != m.name:
            return RewriteResult.skip(
                f"{kind} site #{site.index} is {m.name} now, not {site.params['name']}", site
            )
        return m

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            ctx = Ctx(source)
            m = self._pick(ctx, site, False)
            if isinstance(m, RewriteResult):
                return m
            new = replaced(ctx.module, m.assign.value, cst.Integer("1"))  # type: ignore[arg-type]
            was = code(m.assign.value)  # type: ignore[arg-type]
            what = f"one row per program of {m.launch.kernel} (was {was})"
            return RewriteResult(
                True, f"{m.name} = 1 in {m.launch.func.name.value}: {what}", new, site
            )

        return self.safe(run)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = {**site.params, **(params or {})}

        def run() -> RewriteResult:
            ctx = Ctx(source)
            m = self._pick(ctx, site, True)
            if isinstance(m, RewriteResult):
                return m
            if "expr" in p:
                expr = str(p["expr"])
            elif "tile" in p:
                tr = _triton_alias(ctx.module)
                block_n = p.get("block_n") or self._block_n(m)
                if tr is None or block_n is None:
                    return RewriteResult.skip(
                        "tile given but no `import triton` or no single BLOCK_* column "
                        "keyword to divide it by; pass params['block_n']",
                        site,
                    )
                expr = f"min(max({p['tile']} // {block_n}, 1), {tr}.next_power_of_2({m.rows}))"
            else:
                return RewriteResult.skip(
                    "needs params: expr (the expert's rows-per-program expression) or tile "
                    "(elements per [BLOCK_M, BLOCK_N] tile)",
                    site,
                )
            skip = undefined_skip(expr, ctx.module, m.launch.func, site)
            if skip is not None:
                return skip
            new = replaced(ctx.module, m.assign.value, cst.parse_expression(expr))  # type: ignore[arg-type]
            what = f"several rows per program of {m.launch.kernel}"
            return RewriteResult(
                True, f"{m.name} = {expr} in {m.launch.func.name.value}: {what}", new, site
            )

        return self.safe(run)

    @staticmethod
    def _block_n(m: _Match) -> str | None:
        cands = [
            code(a.value)
            for a in m.launch.call.args
            if a.keyword is not None
            and a.keyword.value != m.keyword
            and "BLOCK" in a.keyword.value.upper()
        ]
        return cands[0] if len(cands) == 1 else None

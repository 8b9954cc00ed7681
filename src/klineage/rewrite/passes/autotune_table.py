"""Autotune table: @triton.autotune over several configs instead of one fixed config.

The best tile shape, warp count and pipeline depth depend on the problem shape, dtype and GPU;
an autotune table lets Triton time each config the first time a key (e.g. M, N, K) is seen and
keep the fastest. It pays off whenever one config cannot be best across the shapes a kernel
serves (matmul, attention, long-row reductions); it costs a one-off tuning pass per key.

Backward: the table (`configs=[...]` in the decorator, or a module-level `_CONFIGS = [...]`
that it names) is reduced to its FIRST config; the decorator, its key and everything else
(prune_configs_by, heuristics) stay. Every config of a correct table computes the same
function, so the meaning is kept. A module-level table shared by several kernels is one site
(reducing it reduces it for all of them), reported at the first kernel that uses it.
Forward: a single-config autotuned kernel gets the expert's full list back (params["configs"],
the list's source text; params["key"] restores the key too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    autotune_call,
    kwarg,
    parse,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.registry import register


class _Replacer(cst.CSTTransformer):
    """Replace nodes of the tree by identity (the nodes found by a visitor of the same tree)."""

    def __init__(self, mapping: dict[int, cst.CSTNode]) -> None:
        self.mapping = mapping

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return self.mapping.get(id(original_node), updated_node)


@dataclass
class _Table:
    line: int
    function: str
    decorator: cst.Call
    configs_arg: cst.Arg | None
    name: str | None = None  # module-level name the decorator refers to
    node: cst.List | None = None  # the list literal (inline or module-level)
    problem: str = ""  # why the table cannot be read textually
    users: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.node.elements) if self.node is not None else 0

    def key_code(self) -> str | None:
        key = kwarg(self.decorator, "key")
        if key is None and len(self.decorator.args) > 1 and self.decorator.args[1].keyword is None:
            key = self.decorator.args[1]
        return _code(key.value) if key is not None else None


def _module_lists(module: cst.Module) -> tuple[dict[str, cst.BaseExpression], set[str]]:
    """Module-level `NAME = value` bindings, and the names bound more than once."""
    values: dict[str, cst.BaseExpression] = {}
    twice: set[str] = set()
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            target: cst.BaseExpression | None = None
            value: cst.BaseExpression | None = None
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target, value = small.target, small.value
            if isinstance(target, cst.Name) and value is not None:
                if target.value in values:
                    twice.add(target.value)
                values[target.value] = value
    return values, twice


class _Finder(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.found: list[tuple[int, str, cst.Call]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        for dec in node.decorators:
            call = autotune_call(dec)
            if call is not None:
                line = self.get_metadata(PositionProvider, dec).start.line
                self.found.append((line, node.name.value, call))


def _tables(module: cst.Module) -> list[_Table]:
    """One entry per distinct table, in source order (a shared named table once)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    finder = _Finder()
    wrapper.visit(finder)
    values, twice = _module_lists(module)
    by_name: dict[str, _Table] = {}
    out: list[_Table] = []
    for line, function, call in finder.found:
        arg = kwarg(call, "configs")
        if arg is None and call.args and call.args[0].keyword is None:
            arg = call.args[0]
        t = _Table(line, function, call, arg, users=[function])
        value = arg.value if arg is not None else None
        if value is None:
            t.problem = "the autotune decorator has no configs argument"
        elif isinstance(value, cst.Name):
            t.name = value.value
            if t.name in by_name:
                by_name[t.name].users.append(function)
                continue
            by_name[t.name] = t
            bound = values.get(t.name)
            if t.name in twice:
                t.problem = f"{t.name} is assigned more than once at module level"
            elif bound is None:
                t.problem = f"{t.name} is not bound at module level"
            else:
                value = bound
        if not t.problem and isinstance(value, cst.List):
            if any(isinstance(e, cst.StarredElement) for e in value.elements):
                t.problem = f"the config list has a starred element: {_code(value)[:60]}"
            else:
                t.node = value
        elif not t.problem and value is not None:
            t.problem = f"configs is {_code(value)[:60]!r}, not a literal list of triton.Config"
        out.append(t)
    return out


def _first_only(lst: cst.List) -> cst.List:
    first = lst.elements[0].with_changes(comma=lst.elements[-1].comma)
    return lst.with_changes(elements=[first])


@register
class AutotuneTable(RewritePass):
    NAME = "autotune_table"
    DESCRIPTION = (
        "Autotune over a table of triton.Configs (tiles, warps, stages) keyed on the problem "
        "shape, so each shape runs the fastest config instead of one fixed guess."
    )
    CATEGORY = "tuning"
    ANCHOR = "@triton.autotune(configs=[...], key=[...]) on a kernel"

    def backward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            out = []
            for i, t in enumerate(_tables(parse(source))):
                if t.problem:
                    desc = f"autotune table on {t.function} (unreadable: {t.problem})"
                    out.append(self.site("backward", i, t.line, t.function, desc, name=t.name))
                elif t.count > 1:
                    where = f"{t.name}" if t.name else "inline list"
                    shared = f", shared by {', '.join(t.users)}" if len(t.users) > 1 else ""
                    desc = f"autotune table of {t.count} configs ({where}{shared}) on {t.function}"
                    out.append(
                        self.site(
                            "backward",
                            i,
                            t.line,
                            t.function,
                            desc,
                            configs=_code(t.node) if t.node is not None else "",
                            key=t.key_code(),
                            name=t.name,
                            n_configs=t.count,
                        )
                    )
            return out

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def _table_at(self, module: cst.Module, site: Site) -> _Table | str:
        tables = _tables(module)
        if site.index >= len(tables):
            return f"no autotune table #{site.index} here ({len(tables)} found)"
        t = tables[site.index]
        if site.function and site.function not in t.users:
            return f"autotune table #{site.index} is on {t.function}, not {site.function}"
        if t.problem:
            return f"cannot rewrite the autotune table on {t.function}: {t.problem}"
        return t

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            module = parse(source)
            t = self._table_at(module, site)
            if isinstance(t, str):
                return RewriteResult.skip(t, site)
            if t.node is None or t.count < 2:
                return RewriteResult.skip(
                    f"the autotune table on {t.function} has {t.count} config(s): nothing to reduce",
                    site,
                )
            new = module.visit(_Replacer({id(t.node): _first_only(t.node)}))
            return RewriteResult(
                True,
                f"reduced the autotune table on {', '.join(t.users)} from {t.count} configs to the first",
                new.code,
                site,
            )

        return self.safe(run)

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            return [
                self.site(
                    "forward",
                    i,
                    t.line,
                    t.function,
                    f"autotuned {t.function} with a single config",
                    name=t.name,
                )
                for i, t in enumerate(_tables(parse(source)))
                if not t.problem and t.count == 1
            ]

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            p = params or site.params
            text = p.get("configs")
            if not text:
                return RewriteResult.skip(
                    "autotune_table needs the expert's config list (params['configs'])", site
                )
            table = cst.parse_expression(str(text))
            if not isinstance(table, cst.List) or not table.elements:
                return RewriteResult.skip(
                    f"params['configs'] is not a non-empty list: {text[:60]}", site
                )
            module = parse(source)
            t = self._table_at(module, site)
            if isinstance(t, str):
                return RewriteResult.skip(t, site)
            if t.node is None or t.count != 1:
                return RewriteResult.skip(
                    f"the autotune table on {t.function} has {t.count} configs, not one", site
                )
            mapping: dict[int, cst.CSTNode] = {id(t.node): table}
            key = p.get("key")
            key_arg = kwarg(t.decorator, "key")
            if key and key_arg is not None and _code(key_arg.value) != key:
                mapping[id(key_arg.value)] = cst.parse_expression(str(key))
            new = module.visit(_Replacer(mapping))
            return RewriteResult(
                True,
                f"restored an autotune table of {len(table.elements)} configs on {', '.join(t.users)}",
                new.code,
                site,
            )

        return self.safe(run)

"""Tunables: a kernel's launch-time constants lifted into a config space (@triton.autotune).

Which block size, warp count and pipeline depth is fastest depends on the shape, the dtype and
the GPU: a naive elementwise kernel at BLOCK=64 ran at 0.29x of torch.compile on the H200, and
reaching 1024 by doubling took four gate calls. Lifted, the constants become the keys of a
table of configs, and one gate call checks every config for correctness and times each per
regime (gate/profile.py: sweep), so a config space is searched per call, not one value.

Forward only (its backward is autotune_table's: a table reduced to one config). A site is a
launch `kernel[grid](...)` of a @triton.jit kernel defined in the file (not autotuned yet) and
launched once, with at least one tunable:
- a constexpr keyword whose value is a power-of-two integer literal, or a launcher local or
  module constant bound to one, named like a block size (BLOCK, TILE, ROWS...) and read
  nowhere else;
- `num_warps` and, when the kernel has a loop, `num_stages` (literal or absent).
The grid follows: where it counts tiles of a lifted size (`cdiv(n, BLOCK)`, `n // 64`, in
the launch or in the local it names), it becomes `lambda META: ...` with `META["BLOCK"]` in
place of the size. A size the grid tiles by, or a loop steps by, may take any value; any
other (a block that must cover a row) only values at least the current one.

Skipped, with the reason: atomics or a pointer both loaded and stored (autotune's trial runs
would apply the kernel twice), a kernel launched from several places, a size that something
else reads. params["configs"]: the list of configs, each {"NAME": value, "num_warps": w,
"num_stages": s}; without it, a seeded draw of params.get("count", 16) from the space.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import libcst as cst

from klineage.rewrite.base import RewritePass, RewriteResult, Site, autotune_call, parse
from klineage.rewrite.blocks import _tile_counts
from klineage.rewrite.launches import (
    DEFAULT_COUNT,
    Launch,
    _bindings,
    _grid,
    _reads,
    analyse,
    draw,
    launch_of,
)
from klineage.rewrite.registry import register

__all__ = ["Launch", "Tunables", "analyse", "draw", "fold", "lift", "table_code"]


def _config_code(c: dict[str, int]) -> str:
    sizes = ", ".join(f'"{k}": {v}' for k, v in c.items() if k not in ("num_warps", "num_stages"))
    text = f"triton.Config({{{sizes}}}, num_warps={c.get('num_warps', 4)}"
    if "num_stages" in c:
        text += f", num_stages={c['num_stages']}"
    return text + ")"


def table_code(configs: list[dict[str, int]], keys: list[str]) -> str:
    rows = "".join(f"        {_config_code(c)},\n" for c in configs)
    return f"@triton.autotune(\n    configs=[\n{rows}    ],\n    key={json.dumps(keys)},\n)"


class _Lift(cst.CSTTransformer):
    def __init__(
        self,
        launch: Launch,
        decorator: cst.Decorator,
        grid_name: str | None,
        launcher: cst.FunctionDef | None,
    ) -> None:
        self.launch, self.decorator, self.grid_name = launch, decorator, grid_name
        self.lifted = {t.name for t in launch.tunables} | {"num_warps", "num_stages"}
        self.locals = {t.local: t for t in launch.tunables if t.local}
        self.depth = 0
        self.launcher = launcher  # the outermost function the launch is in
        self.inside = False  # in it (not in another function of the same name)

    def _meta(self, grid: cst.BaseExpression) -> cst.BaseExpression:
        """`lambda META: grid`, each lifted size read from META: a local by name, a literal
        tile count (and the `63` of `(n + 63) // 64`) by the node found in the grid."""
        locals_ = {t.local: t.name for t in self.launch.tunables if t.local}
        literal: dict[int, str] = {}
        for t in self.launch.tunables:
            if t.local is None:
                for node, v in _tile_counts(grid, t.value):
                    literal[id(node)] = (
                        f'META["{t.name}"]' if v == t.value else f'(META["{t.name}"] - 1)'
                    )

        class Meta(cst.CSTTransformer):
            def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
                name = locals_.get(original.value)
                return cst.parse_expression(f'META["{name}"]') if name else updated

            def leave_Integer(
                self, original: cst.Integer, updated: cst.Integer
            ) -> cst.BaseExpression:
                text = literal.get(id(original))
                return cst.parse_expression(text) if text else updated

        body = grid.visit(Meta())
        assert isinstance(body, cst.BaseExpression)
        return cst.Lambda(params=cst.Parameters(params=[cst.Param(cst.Name("META"))]), body=body)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        """The launcher's locals that held a lifted size go: the table holds them now."""
        if not self.inside:
            return updated
        body = []
        for small in updated.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
                if isinstance(target, cst.Name) and target.value in self.locals:
                    continue
                if (
                    isinstance(target, cst.Tuple)
                    and isinstance(value, cst.Tuple)
                    and len(target.elements) == len(value.elements)
                ):
                    pairs = [
                        (t, v)
                        for t, v in zip(target.elements, value.elements, strict=True)
                        if not (isinstance(t.value, cst.Name) and t.value.value in self.locals)
                    ]
                    if not pairs:
                        continue
                    if len(pairs) == 1:
                        small = small.with_changes(
                            targets=[small.targets[0].with_changes(target=pairs[0][0].value)],
                            value=pairs[0][1].value,
                        )
                    else:
                        last = len(pairs) - 1
                        small = small.with_changes(
                            targets=[
                                small.targets[0].with_changes(
                                    target=target.with_changes(
                                        elements=[
                                            t.with_changes(
                                                comma=cst.MaybeSentinel.DEFAULT
                                                if i == last
                                                else t.comma
                                            )
                                            for i, (t, _) in enumerate(pairs)
                                        ]
                                    )
                                )
                            ],
                            value=value.with_changes(
                                elements=[
                                    v.with_changes(
                                        comma=cst.MaybeSentinel.DEFAULT if i == last else v.comma
                                    )
                                    for i, (_, v) in enumerate(pairs)
                                ]
                            ),
                        )
            body.append(small)
        if not body:
            return cst.RemovalSentinel.REMOVE
        return updated.with_changes(body=body)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += 1
        if self.depth == 1:
            self.inside = node is self.launcher

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        self.depth -= 1
        if self.depth == 0 and original.name.value == self.launch.kernel:
            return updated.with_changes(decorators=[self.decorator, *updated.decorators])
        return updated

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if (
            self.grid_name
            and self.inside
            and len(original.targets) == 1
            and isinstance(original.targets[0].target, cst.Name)
            and original.targets[0].target.value == self.grid_name
        ):
            return updated.with_changes(value=self._meta(original.value))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        func = original.func
        if not (
            isinstance(func, cst.Subscript)
            and isinstance(func.value, cst.Name)
            and func.value.value == self.launch.kernel
        ):
            return updated
        args = [
            a
            for a in updated.args
            if not (a.keyword is not None and a.keyword.value in self.lifted)
        ]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        new = updated.with_changes(args=args)
        if self.grid_name is None and isinstance(func.slice[0].slice, cst.Index):
            grid = func.slice[0].slice.value
            if any(
                (t.local and _reads(grid, t.local)) or (not t.local and _tile_counts(grid, t.value))
                for t in self.launch.tunables
            ):
                sub = updated.func
                assert isinstance(sub, cst.Subscript)
                element = sub.slice[0].with_changes(slice=cst.Index(self._meta(grid)))
                new = new.with_changes(func=sub.with_changes(slice=[element]))
        return new


def lift(source: str, launch: Launch, configs: list[dict[str, int]]) -> str:
    module = parse(source)
    decorator = cst.parse_statement(f"{table_code(configs, launch.keys)}\ndef _(): pass\n")
    assert isinstance(decorator, cst.FunctionDef)
    call, fn = launch_of(module, launch.kernel)
    binds = _bindings(fn)
    grid, grid_name = _grid(call, binds)
    uses_tunable = grid is not None and any(
        (t.local and _reads(grid, t.local)) or (not t.local and _tile_counts(grid, t.value))
        for t in launch.tunables
    )
    t = _Lift(launch, decorator.decorators[0], grid_name if uses_tunable else None, fn)
    return module.visit(t).code


def _valid(c: Any, launch: Launch) -> str | None:
    if not isinstance(c, dict):
        return f"a config is {type(c).__name__}, expected a dict"
    names = {t.name for t in launch.tunables} | {"num_warps", "num_stages"}
    for k, v in c.items():
        if k not in names:
            return f"config key {k!r} is not a tunable here ({', '.join(sorted(names))})"
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return f"config {k}={v!r}: expected a positive integer"
    for t in launch.tunables:
        if not t.tiled and c.get(t.name, t.value) < t.value:
            return f"{t.name}={c[t.name]} is under {t.value}, which this kernel needs to cover its block"
    return None


@register
class Tunables(RewritePass):
    NAME = "tunables"
    DESCRIPTION = (
        "Lift the launch's literal block sizes, num_warps and num_stages into an @triton.autotune "
        "table (grid as lambda META), so one gate call checks and times a space of configs."
    )
    CATEGORY = "tuning"
    ANCHOR = "kernel launch with literal constexpr block sizes / num_warps"

    def backward_sites(self, source: str) -> list[Site]:
        return []  # the backward of a table is autotune_table's (reduced to one config)

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return RewriteResult.skip("tunables is forward only: autotune_table removes a table")

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            sites = []
            for i, launch in enumerate(x for x in analyse(source) if not x.problem):
                names = ", ".join(f"{t.name}={t.value}" for t in launch.tunables) or "no sizes"
                sites.append(
                    self.site(
                        "forward",
                        i,
                        launch.line,
                        launch.function,
                        f"{launch.kernel}: {names}, num_warps={launch.warps}"
                        + (f", num_stages={launch.stages}" if launch.stages else ""),
                        kernel=launch.kernel,
                        current=launch.current(),
                        space=len(launch.space()),
                        keys=launch.keys,
                    )
                )
            return sites

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            mine = [x for x in analyse(source) if x.kernel == site.params.get("kernel")]
            launch = next((x for x in mine if not x.problem), None)
            if launch is None:
                why = mine[0].problem if mine else ""
                return RewriteResult.skip(
                    f"no liftable launch of {site.params.get('kernel')}: {why}", site
                )
            p = params or {}
            configs = p.get("configs")
            if configs is None:
                configs = draw(launch.space(), int(p.get("count", DEFAULT_COUNT)), p.get("seed", 0))
            if not isinstance(configs, list) or not configs:
                return RewriteResult.skip("params['configs'] must be a non-empty list", site)
            for c in configs:
                bad = _valid(c, launch)
                if bad:
                    return RewriteResult.skip(bad, site)
            full = [{**launch.current(), **c} for c in configs]
            if launch.stages is None:
                for c in full:
                    c.pop("num_stages", None)
            unique = list({tuple(sorted(c.items())): c for c in reversed(full)}.values())[::-1]
            out = lift(source, launch, unique)
            return RewriteResult(
                True, f"{len(unique)} configs over {', '.join(launch.current())}", out, site
            )

        return self.safe(run)


# -- folding a swept table ------------------------------------------------------------------


def fold(source: str, keep: Sequence[int | Mapping[str, int]]) -> str | None:
    """The source with its inline autotune tables cut to the rows at `keep` (in that order,
    each once): what a sweep found fastest per regime, written as short tables. The gate
    sweeps a file's tables together (its config c makes every autotuner take
    harness_monitors.table_row(c, rows): row c, or the last of a shorter table), so each table
    keeps that row for each k: a subset of the rows the gate checked. A k that is a mapping
    names each kernel's own row (the sweep's rows chosen apart, gate/profile.py `apart`): the
    table on that kernel keeps its row (its first where it is not named). None when the file
    has no inline table or a k is past its table."""
    from klineage.gate.harness_monitors import forced_row

    module = parse(source)
    tables: list[tuple[str, cst.List]] = []

    class Find(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            for dec in node.decorators:
                d = autotune_call(dec)
                for a in d.args if d is not None else ():
                    if (a.keyword is None or a.keyword.value == "configs") and isinstance(
                        a.value, cst.List
                    ):
                        tables.append((node.name.value, a.value))
                        break

    module.visit(Find())
    order = list(dict.fromkeys(k if isinstance(k, int) else tuple(sorted(k.items())) for k in keep))
    if not tables or not order or any(not t.elements for _, t in tables):
        return None
    widest = max(len(t.elements) for _, t in tables)
    sizes = {name: len(t.elements) for name, t in tables}

    if any(
        not 0 <= k < widest
        if isinstance(k, int)
        else any(not 0 <= r < sizes.get(name, r + 1) for name, r in k)
        for k in order
    ):
        return None
    cut: dict[int, list[cst.BaseElement]] = {}
    for name, table in tables:
        n = len(table.elements)
        rows = list(
            dict.fromkeys(forced_row(k if isinstance(k, int) else dict(k), name, n) for k in order)
        )
        # Each kept row takes the comma (and line break) of the row whose place it takes; the
        # last takes the table's last row's, which leads to the closing bracket.
        commas: list[cst.Comma | cst.MaybeSentinel] = [
            e.comma if isinstance(e.comma, cst.Comma) else cst.Comma() for e in table.elements
        ]
        commas[len(rows) - 1] = table.elements[-1].comma
        cut[id(table)] = [
            table.elements[r].with_changes(comma=commas[j]) for j, r in enumerate(rows)
        ]

    class Cut(cst.CSTTransformer):
        def leave_List(self, original: cst.List, updated: cst.List) -> cst.List:
            rows = cut.get(id(original))
            return updated.with_changes(elements=rows) if rows is not None else updated

    return module.visit(Cut()).code

"""Block size: the constexpr tile a program works on (BLOCK_M, BLOCK_V, TILE_ELEMENTS, ...).

Larger blocks give each program more bytes in flight and more reuse per load (a matmul tile
re-reads A and B ~1/BM + 1/BN times per FLOP), amortise per-program and per-iteration overheads
(index setup, reductions, loop control) over more elements, and shrink the grid; the limit is
registers and shared memory per program, and enough programs to fill the GPU.

Sites are integer literals bound to block-size names (containing BLOCK, TILE or ROWS, or
lowercase block_size / tile_m ...; counts such as NUM_BLOCKS are not block sizes):
- entries of a triton.Config dict (`{"BLOCK_M": 128}`);
- launch keywords (`kernel[grid](..., BLOCK_B=1024)`);
- module-level tuning constants (`TILE_ELEMENTS = 8192`, `tl.constexpr(128)` too) and
  launcher locals (`BLOCK_M = 64`) that something reads;
- constexpr parameter defaults of a kernel (`BLOCK: tl.constexpr = 128`).
Backward halves the value (never below 16, and only an even one); values computed at run time
(e.g. `triton.next_power_of_2(n)`) are sites that skip with the reason. Forward sets the given
value (params["value"], default: twice the current one). Halving may break a kernel that
assumes a row fits in one block: the gate rejects it, which is the right outcome.

A launch keyword's literal (`kernel[(triton.cdiv(n, 64),)](..., BLOCK=64)`) changes together
with the grid's tile count written as the same literal (`cdiv(n, 64)`, `n // 64`,
`(n + 63) // 64`, in the grid or the local it names): on the H200 a naive kernel's BLOCK=64 set
to 128 at the launch alone ran twice the programs it needed (0.88x, reverted).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.base import FunctionTracker, RewritePass, RewriteResult, Site, dotted, parse
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.blocks import _is_block_name, _literal, _tile_counts
from klineage.rewrite.registry import register

MIN_BLOCK = 16


class _Replacer(cst.CSTTransformer):
    """Replace nodes of the tree by identity (the nodes found by a visitor of the same tree)."""

    def __init__(self, mapping: dict[int, cst.CSTNode]) -> None:
        self.mapping = mapping

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return self.mapping.get(id(original_node), updated_node)


class _Loads(cst.CSTVisitor):
    """How often each name is read (keywords, parameter names, attributes and targets skipped),
    and the names passed as launch keywords (`kernel[grid](..., BLOCK_M=BLOCK_M)`)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.launched: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Subscript):
            for a in node.args:
                if a.keyword is not None and isinstance(a.value, cst.Name):
                    self.launched.add(a.value.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.counts[node.value] += 1

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        for part in (node.annotation, node.default):
            if part is not None:
                part.visit(self)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if node.value is not None:
            node.value.visit(self)
        return False


@dataclass
class _Block:
    kind: str  # config, launch, constant, local, default
    name: str
    line: int
    function: str
    literal: cst.Integer | None  # the literal to rewrite; None when computed at run time
    expr: str
    # A launch keyword's grid (`kernel[grid](..., BLOCK=64)`): the expression, or the value of
    # the local it names, whose literal tile counts must change with the block size.
    grid: cst.BaseExpression | None = None
    grid_name: str | None = None  # the local the grid was read from, if any

    @property
    def value(self) -> int | None:
        return int(self.literal.evaluated_value) if self.literal is not None else None

    def describe(self) -> str:
        v = self.expr
        where = {
            "config": "in a triton.Config",
            "launch": f"at a launch in {self.function}",
            "constant": "(module constant)",
            "local": f"in {self.function}",
            "default": f"(constexpr default of {self.function})",
        }[self.kind]
        text = f"{self.name}={v} {where}"
        return text if self.literal is not None else f"{text}, computed at run time"


class _Collector(FunctionTracker):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, loads: Counter[str], launched: set[str]) -> None:
        super().__init__()
        self.loads = loads
        self.launched = launched
        self.found: list[_Block] = []
        # (function, name, line) -> the value assigned: a launch's grid may be a local.
        self.assigned: dict[tuple[str, str, int], cst.BaseExpression] = {}

    def _add(
        self,
        kind: str,
        name: str,
        value: cst.BaseExpression,
        at: cst.CSTNode,
        grid: tuple[cst.BaseExpression | None, str | None] = (None, None),
    ) -> None:
        line = self.get_metadata(PositionProvider, at).start.line
        self.found.append(
            _Block(kind, name, line, self.function, _literal(value), _code(value), *grid)
        )

    def _grid_of(self, call: cst.Call) -> tuple[cst.BaseExpression | None, str | None]:
        """`kernel[grid]`'s grid, and the local it names (followed to its last assignment in
        this function), if it names one."""
        assert isinstance(call.func, cst.Subscript)
        if len(call.func.slice) != 1 or not isinstance(call.func.slice[0].slice, cst.Index):
            return None, None
        grid = call.func.slice[0].slice.value
        if isinstance(grid, cst.Name):
            line = self.get_metadata(PositionProvider, call).start.line
            bound = [
                v
                for (f, n, at), v in self.assigned.items()
                if f == self.function and n == grid.value and at < line
            ]
            return (bound[-1] if bound else None), grid.value
        return grid, None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        if not self.stack[-1][1]:
            return
        for p in (*node.params.params, *node.params.kwonly_params):
            named = p.default is not None and _is_block_name(p.name.value)
            if named and p.default is not None and _literal(p.default) is not None:
                self._add("default", p.name.value, p.default, p)

    def visit_Call(self, node: cst.Call) -> None:
        callee = dotted(node.func)
        if callee == "Config" or callee.endswith(".Config"):
            table = next((a.value for a in node.args if a.keyword is None), None)
            for a in node.args:
                if a.keyword is not None and a.keyword.value == "kwargs":
                    table = a.value
            if isinstance(table, cst.Dict):
                for e in table.elements:
                    if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString):
                        key = e.key.evaluated_value
                        if isinstance(key, str) and _is_block_name(key):
                            self._add("config", key, e.value, e)
            elif isinstance(table, cst.Call) and dotted(table.func) == "dict":
                for a in table.args:
                    if a.keyword is not None and _is_block_name(a.keyword.value):
                        self._add("config", a.keyword.value, a.value, a)
        elif isinstance(node.func, cst.Subscript) and not self.in_kernel:
            for a in node.args:
                if a.keyword is None or not _is_block_name(a.keyword.value):
                    continue
                # A name is a binding found elsewhere (a constant or a launcher local).
                if not isinstance(a.value, cst.Name):
                    self._add("launch", a.keyword.value, a.value, a, self._grid_of(node))

    def _assign(self, targets: list[cst.BaseExpression], value: cst.BaseExpression) -> None:
        if self.in_kernel:
            return
        kind = "local" if self.stack else "constant"
        for target in targets:
            pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = [(target, value)]
            if (
                isinstance(target, cst.Tuple)
                and isinstance(value, cst.Tuple)
                and len(target.elements) == len(value.elements)
            ):
                pairs = [
                    (t.value, v.value) for t, v in zip(target.elements, value.elements, strict=True)
                ]
            for t, v in pairs:
                if not isinstance(t, cst.Name) or not _is_block_name(t.value):
                    continue
                # A literal must be read somewhere; a computed value must reach a launch.
                used = self.loads[t.value] if _literal(v) is not None else t.value in self.launched
                if used:
                    self._add(kind, t.value, v, v)

    def visit_Assign(self, node: cst.Assign) -> None:
        line = self.get_metadata(PositionProvider, node).start.line
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.assigned[(self.function, t.target.value, line)] = node.value
        self._assign([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign([node.target], node.value)


def _blocks(module: cst.Module) -> list[_Block]:
    loads = _Loads()
    module.visit(loads)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    collector = _Collector(loads.counts, loads.launched)
    wrapper.visit(collector)
    return collector.found


@register
class BlockSize(RewritePass):
    NAME = "block_size"
    DESCRIPTION = (
        "Grow the constexpr block/tile sizes (BLOCK_M, BLOCK_V, TILE_ELEMENTS...) so each "
        "program moves more bytes per load and amortises its overheads over more elements."
    )
    CATEGORY = "parallelism"
    ANCHOR = "integer block-size constexpr (Config entry, launch keyword or tuning constant)"

    def _sites(self, source: str, direction: str) -> list[Site]:
        out = []
        for i, b in enumerate(_blocks(parse(source))):
            if direction == "forward" and b.value is None:
                continue
            value = b.value if direction == "backward" or b.value is None else 2 * b.value
            out.append(
                self.site(direction, i, b.line, b.function, b.describe(), name=b.name, value=value)
            )
        return out

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "backward")

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(self._sites, source, "forward")

    def _at(self, module: cst.Module, site: Site, name: Any) -> _Block | str:
        blocks = _blocks(module)
        if site.index >= len(blocks):
            return f"no block size #{site.index} here ({len(blocks)} found)"
        b = blocks[site.index]
        if name and b.name != name:
            return f"block size #{site.index} is {b.name}, not {name}"
        if b.literal is None:
            return f"{b.name} = {b.expr} is computed at run time, not a literal to resize"
        if (
            b.grid is not None
            and b.grid_name
            and _tile_counts(b.grid, int(b.literal.evaluated_value))
        ):
            others = [
                x
                for x in blocks
                if x is not b
                and x.kind == "launch"
                and x.function == b.function
                and x.grid_name == b.grid_name
            ]
            if others:
                return (
                    f"{b.name}={b.expr}: its grid {b.grid_name} is shared with {len(others)} other launch(es) "
                    "in this function; resizing one would leave the others with the wrong tile count"
                )
        return b

    def _set(self, module: cst.Module, b: _Block, value: int) -> tuple[str, int]:
        """The source with the block size set, and the number of grid literals changed with it."""
        assert b.literal is not None
        old = int(b.literal.evaluated_value)
        mapping: dict[int, cst.CSTNode] = {id(b.literal): cst.Integer(str(value))}
        if b.grid is not None:
            for node, was in _tile_counts(b.grid, old):
                mapping[id(node)] = cst.Integer(str(value if was == old else value - 1))
        return module.visit(_Replacer(mapping)).code, len(mapping) - 1

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            module = parse(source)
            b = self._at(module, site, site.params.get("name"))
            if isinstance(b, str):
                return RewriteResult.skip(b, site)
            v = b.value
            assert v is not None
            recorded = site.params.get("value")
            if isinstance(recorded, int) and recorded != v:
                return RewriteResult.skip(
                    f"{b.name} is {v} here, the site recorded {recorded}", site
                )
            if v % 2:
                return RewriteResult.skip(f"{b.name}={v} is odd: it cannot be halved", site)
            if v // 2 < MIN_BLOCK:
                return RewriteResult.skip(
                    f"{b.name}={v}: halving would give {v // 2}, below the minimum {MIN_BLOCK}",
                    site,
                )
            out, tied = self._set(module, b, v // 2)
            note = f" (and the launch grid's tile count with it, {tied} literal(s))" if tied else ""
            return RewriteResult(True, f"halved {b.name} from {v} to {v // 2}{note}", out, site)

        return self.safe(run)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            p = params or site.params
            module = parse(source)
            b = self._at(module, site, p.get("name") or site.params.get("name"))
            if isinstance(b, str):
                return RewriteResult.skip(b, site)
            v = b.value
            assert v is not None
            new = p.get("value", 2 * v)
            if isinstance(new, bool) or not isinstance(new, int) or new <= 0:
                return RewriteResult.skip(
                    f"params['value'] must be a positive int, got {new!r}", site
                )
            if new == v:
                return RewriteResult.skip(f"{b.name} is already {v}", site)
            out, tied = self._set(module, b, new)
            note = f" (and the launch grid's tile count with it, {tied} literal(s))" if tied else ""
            return RewriteResult(True, f"set {b.name} from {v} to {new}{note}", out, site)

        return self.safe(run)

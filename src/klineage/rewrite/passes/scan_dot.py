"""A 16-bit tile's scan as a product by a triangle of ones, on the tensor cores.

A prefix (or suffix) sum over C lanes is a matrix product: for a [R, C] tile v, `tl.cumsum(v,
axis=1)` is `v @ L` with L[k, j] = 1 where k <= j (k >= j for `reverse=True`). Products by 0 and
1 are exact and tl.dot adds in fp32, so a 16-bit tile scanned this way has the fp32 scan's
precision (its additions in another order). tl.cumsum runs a log-depth shuffle network per
lane group; the product moves that work to the tensor cores, which a memory-bound scan leaves
idle. Where the tile has fewer than 16 rows (tl.dot's smallest) or more than 128 lanes (a
wider triangle outgrows shared memory) and holds 1024 elements or more, its rows are cut into
blocks of 64 lanes, each block scanned by a 64 x 64 product, and the exclusive scan of the
blocks' totals added along each row (the two-level scan of chunked linear-attention kernels,
where cumulative sums are written this way); a 1-D chunk is a tile of one row. Smaller tiles
keep tl.cumsum: on an H100 (2026-12-07) blocks of 16 lanes on the reverse cumsum's 4 x 64 tile
ran 0.82x of it, while split_scan's 4096-element chunk by blocks of 64 ran 1.08x, and the
product pays most on a [64, 64] tile (a hand-written kernel at 64 rows a program, 8 warps:
1.81x the 4-row tl.cumsum kernel, docs/benchmarks.md).

Forward, a site is a `tl.cumsum(A, axis=0 or 1[, reverse=...])` in a kernel, literal axis
and direction, where A is `tl.load(...).to(tl.float32)` (inline, or a name assigned only that
once in the kernel) or `raw.to(tl.float32)` of a name loaded once: the scanned values are
exactly a tensor's elements widened. Backward (scan_dot_undo.py), a kernel's helper call is the
tl.cumsum it stands for (the cumsum expert scans its 16-bit tiles this way). The rewrite
keeps the tensor's own dtype beside the widened values and calls a helper,
`_scan_by_dot(raw, AXIS, REVERSE)`, that takes the product only where it is exact and legal
(an fp16 or bf16 tile of 16 rows and 16 to 128 lanes, or of at least 1024 elements and 64
lanes, scanned along its last axis), decided at compile time from the tile's dtype and shape, and is tl.cumsum of the widened
values everywhere else (an fp32 tensor, whose product would round to tf32; a tile of 2 x 64).
So the rewrite keeps every finite input's result (up to the order of fp32 additions); whether it
pays is the gate's to say. Not a non-finite one: a product by 0 of an inf is NaN, so an inf at
lane k makes NaN of the lanes a scan would have left finite (before k in a prefix sum, after it
in a suffix sum), where tl.cumsum gives finite values there. The gate draws finite inputs and
cannot see this; the rewrite is for data known finite (the skill's condition to learn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from klineage.rewrite.base import (
    RewritePass,
    RewriteResult,
    Site,
    dotted,
    is_triton_jit,
    names_under,
    parse,
    positions,
)
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.passes import scan_dot_undo
from klineage.rewrite.registry import register

HELPER = "_scan_by_dot"
SIXTEEN = "_scan_16bit_by_dot"
TILE = "_scan_tile_by_dot"
BLOCKS = "_scan_blocks_by_dot"
HELPERS = (HELPER, SIXTEEN, TILE, BLOCKS)
HELPER_SOURCE = f'''
@triton.jit
def {HELPER}(v, AXIS: tl.constexpr, REVERSE: tl.constexpr):
    """scan_dot (klineage): tl.cumsum(v.to(tl.float32), AXIS, reverse=REVERSE), by tl.dot with
    a triangle of ones where v is an fp16 / bf16 row or tile scanned along its last axis and
    {TILE} takes it; tl.cumsum elsewhere (fp32 would round to tf32). Every test is one
    comparison of compile-time values: an older code generator (triton-lang/triton 0072ae0)
    applies `and` by a method a Python bool lacks, and compares a Python int to a constexpr
    one way only."""
    if v.dtype == tl.float16:
        out = {SIXTEEN}(v, AXIS, REVERSE)
    elif v.dtype == tl.bfloat16:
        out = {SIXTEEN}(v, AXIS, REVERSE)
    else:
        out = tl.cumsum(v.to(tl.float32), axis=AXIS, reverse=REVERSE)
    return out


@triton.jit
def {SIXTEEN}(v, AXIS: tl.constexpr, REVERSE: tl.constexpr):
    """A 16-bit v: a 1-D chunk as a tile of one row, a 2-D tile along axis 1 as it is."""
    if AXIS == 0:
        if tl.constexpr(len(v.shape)) == 1:
            out = tl.reshape(
                {TILE}(tl.reshape(v, (1, v.shape[0])), REVERSE), (v.shape[0],)
            )
        else:
            out = tl.cumsum(v.to(tl.float32), axis=AXIS, reverse=REVERSE)
    elif tl.constexpr(len(v.shape)) == 2:
        out = {TILE}(v, REVERSE)
    else:
        out = tl.cumsum(v.to(tl.float32), axis=AXIS, reverse=REVERSE)
    return out


@triton.jit
def {TILE}(v, REVERSE: tl.constexpr):
    """A 16-bit [R, C] tile's fp32 scan along axis 1: one product by a C x C triangle where
    R >= 16 (tl.dot's smallest) and 16 <= C <= 128 (a wider triangle outgrows shared memory),
    else by blocks of 64 lanes where the tile holds 1024 elements or more (16 blocks, a product's
    smallest); tl.cumsum where neither fits (blocks of 16 lanes on a 4 x 64 tile ran 0.82x of
    tl.cumsum on an H100, 2026-12-07)."""
    if v.shape[0] >= 16 and (v.shape[1] >= 16 and v.shape[1] <= 128):
        k = tl.arange(0, v.shape[1])
        if REVERSE:
            ones = k[:, None] >= k[None, :]
        else:
            ones = k[:, None] <= k[None, :]
        out = tl.dot(v, ones.to(v.dtype))
    elif v.shape[1] >= 64 and v.shape[0] * v.shape[1] >= 1024:
        out = {BLOCKS}(v, 64, REVERSE)
    else:
        out = tl.cumsum(v.to(tl.float32), axis=1, reverse=REVERSE)
    return out


@triton.jit
def {BLOCKS}(v, B: tl.constexpr, REVERSE: tl.constexpr):
    """The tile's rows cut into blocks of B lanes, each block scanned by a product by a B x B
    triangle, then the exclusive scan of the blocks' totals along each row added to them (the
    two-level scan of chunked linear-attention kernels)."""
    k = tl.arange(0, B)
    if REVERSE:
        ones = k[:, None] >= k[None, :]
    else:
        ones = k[:, None] <= k[None, :]
    blocks = tl.reshape(v, (v.shape[0] * v.shape[1] // B, B))
    within = tl.reshape(tl.dot(blocks, ones.to(v.dtype)), (v.shape[0], v.shape[1] // B, B))
    totals = tl.sum(tl.reshape(v.to(tl.float32), (v.shape[0], v.shape[1] // B, B)), axis=2)
    others = tl.cumsum(totals, axis=1, reverse=REVERSE) - totals
    return tl.reshape(within + others[:, :, None], (v.shape[0], v.shape[1]))
'''


class NoSite(Exception):
    """Why a scan is not a site."""


@dataclass
class Found:
    kernel: str
    line: int
    scan: cst.Call
    axis: int
    reverse: bool
    load: cst.Call | None  # the tl.load whose widened values are scanned
    assign: cst.Assign | None  # `A = tl.load(...).to(tl.float32)`, when A is a name
    raw: str = ""  # the name of the load itself, where A is `raw.to(tl.float32)`

    @property
    def node(self) -> cst.Call:
        return self.scan


def _widened(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """X of `X.to(tl.float32)`, else None."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    if node.func.attr.value != "to" or len(node.args) != 1 or node.args[0].keyword is not None:
        return None
    if dotted(node.args[0].value) not in ("tl.float32", "triton.language.float32"):
        return None
    return node.func.value


def _widened_load(node: cst.BaseExpression) -> cst.Call | None:
    """The tl.load of `tl.load(...).to(tl.float32)`, else None."""
    inner = _widened(node)
    if isinstance(inner, cst.Call) and dotted(inner.func).split(".")[-1] == "load":
        return inner
    return None


def _widened_name(node: cst.BaseExpression) -> str:
    """N of `N.to(tl.float32)`, else ""."""
    inner = _widened(node)
    return inner.value if isinstance(inner, cst.Name) else ""


def _loaded_once(name: str, assigns: dict[str, list[cst.CSTNode]]) -> bool:
    where = assigns.get(name, [])
    return (
        len(where) == 1
        and isinstance(where[0], cst.Assign)
        and isinstance(where[0].value, cst.Call)
        and dotted(where[0].value.func).split(".")[-1] == "load"
    )


def _literal(call: cst.Call, keyword: str, position: int, default: Any) -> Any:
    for i, a in enumerate(call.args):
        if (a.keyword and a.keyword.value == keyword) or (a.keyword is None and i == position):
            v = a.value
            if isinstance(v, cst.Integer):
                return int(v.value)
            if isinstance(v, cst.Name) and v.value in ("True", "False"):
                return v.value == "True"
            raise NoSite(f"{_code(call)}: {keyword} is not a literal")
    return default


def _assigns(fn: cst.FunctionDef) -> dict[str, list[cst.CSTNode]]:
    out: dict[str, list[cst.CSTNode]] = {}

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                for n in _names(t.target):
                    out.setdefault(n, []).append(node)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            for n in _names(node.target):
                out.setdefault(n, []).append(node)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            for n in _names(node.target):
                out.setdefault(n, []).append(node)

        def visit_For(self, node: cst.For) -> None:
            for n in _names(node.target):
                out.setdefault(n, []).append(node)

    fn.visit(V())
    return out


def _names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    return []


def _scans(fn: cst.FunctionDef) -> list[cst.Call]:
    out: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func) in ("tl.cumsum", "triton.language.cumsum"):
                out.append(node)

    fn.visit(V())
    return out


def _site(fn: cst.FunctionDef, scan: cst.Call, assigns: dict[str, list[cst.CSTNode]]) -> Found:
    if not scan.args or scan.args[0].keyword is not None:
        raise NoSite(f"{_code(scan)}: no scanned value")
    axis = _literal(scan, "axis", 1, 0)
    reverse = _literal(scan, "reverse", 2, False)
    if axis not in (0, 1) or not isinstance(reverse, bool):
        raise NoSite(f"{_code(scan)}: axis {axis} (0 or 1 only)")
    arg = scan.args[0].value
    load = _widened_load(arg)
    assign = None
    inline = _widened_name(arg)
    if load is None and inline and _loaded_once(inline, assigns):
        # `tl.cumsum(raw.to(tl.float32))`, raw loaded once (what the backward step writes)
        return Found(fn.name.value, 0, scan, axis, reverse, None, None, inline)
    if load is None and isinstance(arg, cst.Name):
        where = assigns.get(arg.value, [])
        if len(where) != 1 or not isinstance(where[0], cst.Assign):
            raise NoSite(f"{arg.value} is assigned {len(where)} times (once, from a load, only)")
        assign = where[0]
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            raise NoSite(f"{_code(assign)}: not one name assigned")
        load = _widened_load(assign.value)
        raw = _widened_name(assign.value)
        if load is None and raw and _loaded_once(raw, assigns):
            # `A = raw.to(tl.float32)`, raw loaded once: a second scan of A after a first
            # rewrite split its line, or code written that way
            return Found(fn.name.value, 0, scan, axis, reverse, None, None, raw)
    if load is None:
        raise NoSite(
            f"{_code(scan)}: the scanned values are not a load widened to fp32 "
            "(`tl.load(...).to(tl.float32)`), so their dtype is not a tensor's"
        )
    return Found(fn.name.value, 0, scan, axis, reverse, load, assign)


def analyse(source: str) -> tuple[cst.Module, list[Found | tuple[str, str]]]:
    module = parse(source)
    _, lines = positions(module)
    out: list[Found | tuple[str, str]] = []
    for stmt in scan_dot_undo.kernels(module, HELPERS):
        scans = _scans(stmt)
        if not scans:
            out.append((stmt.name.value, "no tl.cumsum"))
        assigns = _assigns(stmt)
        for scan in scans:
            try:
                found = _site(stmt, scan, assigns)
            except NoSite as e:
                out.append((stmt.name.value, str(e)))
                continue
            found.line = lines[scan].start.line if scan in lines else lines[stmt].start.line
            out.append(found)
    return module, out


def _fresh(module: cst.Module, base: str) -> str:
    taken = set(names_under(module))
    name, i = f"{base}_in", 2
    while name in taken:
        name, i = f"{base}_in{i}", i + 1
    return name


def rewrite(module: cst.Module, found: Found) -> str:
    """The scan through the helper, the load's own dtype kept in a name beside the widened
    values, and the helper added before the first kernel (once)."""
    call_args = f"{found.axis}, {found.reverse}"
    widened: cst.BaseExpression | None = None
    if found.raw:
        raw, scan_text = found.raw, f"{HELPER}({found.raw}, {call_args})"
    elif found.assign is not None:
        widened = found.assign.targets[0].target
        assert isinstance(widened, cst.Name)
        raw = _fresh(module, widened.value)
        scan_text = f"{HELPER}({raw}, {call_args})"
    else:
        assert found.load is not None
        raw, scan_text = "", f"{HELPER}({_code(found.load)}, {call_args})"
    new_scan = cst.parse_expression(scan_text)

    class T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            return new_scan if original is found.scan else updated

        def leave_SimpleStatementLine(
            self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
        ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.SimpleStatementLine]:
            if found.assign is None or found.assign not in original.body:
                return updated
            assert isinstance(widened, cst.Name)
            assert found.load is not None
            load = cst.parse_statement(f"{raw} = {_code(found.load)}")
            assert isinstance(load, cst.SimpleStatementLine)
            first = updated.with_changes(body=load.body)
            second = cst.parse_statement(f"{widened.value} = {raw}.to(tl.float32)")
            assert isinstance(second, cst.SimpleStatementLine)
            return cst.FlattenSentinel([first, second.with_changes(leading_lines=[])])

    out = module.visit(T())
    if any(isinstance(s, cst.FunctionDef) and s.name.value == HELPER for s in out.body):
        return out.code
    helpers = list(cst.parse_module(HELPER_SOURCE).body)
    at = next(
        i
        for i, s in enumerate(out.body)
        if isinstance(s, cst.FunctionDef) and any(is_triton_jit(d) for d in s.decorators)
    )
    first = out.body[at]
    # the helpers go between the kernel's own leading lines (comments) and what came before,
    # two blank lines between top-level definitions
    helpers[0] = helpers[0].with_changes(leading_lines=first.leading_lines)
    first = first.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    return out.with_changes(body=[*out.body[:at], *helpers, first, *out.body[at + 1 :]]).code


@register
class ScanDot(RewritePass):
    NAME = "scan_dot"
    DESCRIPTION = (
        "Scan a 16-bit tile (tl.cumsum of a load widened to fp32) as a product by a triangle "
        "of ones on the tensor cores (exact products, fp32 sums): one product for 16 rows or "
        "more of 16-128 lanes, blocks of 64 lanes and their totals for other tiles and 1-D "
        "chunks of 1024 elements or more; tl.cumsum elsewhere (fp32, small tiles)."
    )
    CATEGORY = "compute"
    ANCHOR = "tl.cumsum over a loaded tile widened to fp32"
    IN_PROGRAM = True

    def _at(self, direction: str, found: list[Any], kind: type[Any]) -> list[Site]:
        """A site for each analysed place of `kind` (a scan, or a call of the helper): its
        kernel and line, which apply and simplify look it up by."""
        return [
            self.site(
                direction,
                i,
                f.line,
                f.kernel,
                f"{f.kernel}: {_code(f.node)}",
                kernel=f.kernel,
                line=f.line,
            )
            for i, f in enumerate(x for x in found if isinstance(x, kind))
        ]

    def backward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(
            lambda: self._at(
                "backward", scan_dot_undo.calls(source, HELPER, HELPERS), scan_dot_undo.Call
            )
        )

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            found = scan_dot_undo.calls(source, HELPER, HELPERS)
            mine = [
                c
                for c in found
                if isinstance(c, scan_dot_undo.Call) and c.kernel == site.params.get("kernel")
            ]
            at = [c for c in mine if c.line == site.params.get("line")] or mine
            if not at:
                return RewriteResult.skip(f"no {HELPER} call in {site.params.get('kernel')}", site)
            return RewriteResult(
                True,
                f"{at[0].kernel}: {HELPER} back to tl.cumsum of the widened values",
                scan_dot_undo.undo(source, at[0], HELPER, HELPERS),
                site,
            )

        return self.safe(run)

    def forward_sites(self, source: str) -> list[Site]:
        return self.safe_sites(lambda: self._at("forward", analyse(source)[1], Found))

    def why_not(self, source: str) -> list[str]:
        return self.reasons(lambda: analyse(source)[1], Found)

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            module, found = analyse(source)
            mine = [
                f for f in found if isinstance(f, Found) and f.kernel == site.params.get("kernel")
            ]
            at = [f for f in mine if f.line == site.params.get("line")] or mine
            if not at:
                return RewriteResult.skip(
                    f"no tl.cumsum of a widened load in {site.params.get('kernel')}", site
                )
            f = at[0]
            return RewriteResult(
                True,
                f"{f.kernel}: tl.cumsum(axis={f.axis}, reverse={f.reverse}) through {HELPER}",
                rewrite(module, f),
                site,
            )

        return self.safe(run)

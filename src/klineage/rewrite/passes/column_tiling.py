"""A 2-D tiled column reduction for a one-column-per-program kernel: BLOCK_N columns a program.

A naive column reduction (sum, mean, max over dim 0, a softmax down the columns) launches
`kernel[(n_cols,)]`, and each program walks down its column B rows a step: every load gathers
B elements a row pitch apart (one useful element per 32-byte sector) and n_cols programs each
make n_rows / B dependent steps (issue 16: 49x slower than torch.compile at 16384 rows).

Backward, in an expert's shape (column_tiling_expert.py): the launcher variable that sets a
column-tiled kernel's columns per program (the colsum expert's BLOCK_N) becomes 1, and forward
at such a `= 1` restores the expert's expression. Forward on a naive kernel: the kernel takes
`n_cols` and `BLOCK_N: tl.constexpr`; its program's column becomes the row vector
`(tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]` (the original name keeps its
`.to(tl.int64)`), every `tl.arange` a column vector `[:, None]`, every 1-D reduction
`axis=0, keep_dims=True`, 1-D `tl.zeros`/`tl.full` shapes (B, BLOCK_N), and a carried
accumulator started from a literal `tl.full((1, BLOCK_N), literal, dtype)` (a loop-carried value
keeps one type in compiled Triton). So a per-column scalar is [1, BLOCK_N] and a row step is a
[B, BLOCK_N] tile, coalesced along the row-major inner dimension. Every load or store whose
pointer, mask or value depends on the column gets `& col_ok` (cols < n_cols). The launcher
computes BLOCK_N = min(MAX_BLOCK_N, max(1, TILE // B), next_power_of_2(n_cols)) (TILE 4096 and
MAX_BLOCK_N 256 as the colsum expert; params["tile"], params["max_block_n"], or
params["block_n"] fixed) and launches cdiv(n_cols, BLOCK_N) programs.

Why it is sound: after the rewrite a program's columns only meet in reductions along axis 0
(the rows), everything else broadcasts lane by lane, so each column computes what its own
program computed, in the same order (the kernel's own blocking, so the same rounding); columns
past n_cols compute on masked values and store nothing. The analysis that proves the shape and
skips everything else with its reason is column_tiling_analysis.py.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from klineage.rewrite.base import RewritePass, RewriteResult, Site, dotted
from klineage.rewrite.passes.column_tiling_analysis import Analysis, analyse
from klineage.rewrite.passes.column_tiling_expert import column_blocks, replaced
from klineage.rewrite.passes.multi_row import (
    _and,
    _fresh,
    _is_docstring,
    _kw,
    _pow2,
    _sep,
    _tl_alias,
    _with_args,
)
from klineage.rewrite.passes.multi_row_analysis import (
    REDUCTIONS,
    _depends,
    _row_dependent,
    _tl_roots,
)
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    _triton_alias,
    assignments,
    code,
    names_in,
    walk,
)
from klineage.rewrite.registry import register

TILE = 4096  # elements per [B, BLOCK_N] tile, the colsum expert's TILE_ELEMENTS
MAX_BLOCK_N = 256  # the colsum expert's: 512 contiguous bf16 bytes a row, four full lines


class _Kernel(cst.CSTTransformer):
    """The kernel's body, rewritten for a [B, BLOCK_N] tile (see the module docstring)."""

    def __init__(self, a: Analysis, dep: set[str], names: dict[str, str], roots: set[str], tl_mod: str) -> None:  # fmt: skip
        self.a = a
        self.dep = dep
        self.n = names
        self.roots = roots
        self.tl = tl_mod

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        dtype = self.a.widen.get(id(original))
        if dtype is None:
            return updated
        value = (
            f"{self.tl}.full((1, {self.n['BLOCK_N']}), {code(original.value)}, {self.tl}.{dtype})"
        )
        return updated.with_changes(value=cst.parse_expression(value))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        last = (
            dotted(original.func).split(".")[-1] if isinstance(original.func, cst.Attribute) else ""
        )
        head = dotted(original.func).rsplit(".", 1)[0] if last else ""
        if not head or head.split(".")[0] not in self.roots:
            return updated
        if last == "program_id":
            return cst.Name(self.n["cols"])
        if last == "arange":
            column_vector = [
                cst.SubscriptElement(cst.Slice(None, None), comma=_sep()),
                cst.SubscriptElement(cst.Index(cst.Name("None"))),
            ]
            return cst.Subscript(updated, column_vector)
        if last in REDUCTIONS:
            args = [a for i, a in enumerate(updated.args)
                    if not (i == 1 and a.keyword is None) and not (a.keyword and a.keyword.value == "axis")]  # fmt: skip
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            extra = [_kw("axis", "0"), _kw("keep_dims", "True")]
            return _with_args(updated.with_changes(args=args), extra)
        if last in ("zeros", "full"):
            shape = updated.args[0].value
            assert isinstance(shape, cst.Tuple | cst.List)
            el = shape.elements[0].with_changes(comma=_sep())
            new = shape.with_changes(elements=[el, cst.Element(cst.Name(self.n["BLOCK_N"]))])
            return updated.with_changes(
                args=[updated.args[0].with_changes(value=new), *updated.args[1:]]
            )
        if last in ("load", "store"):
            if not _depends(original, self.dep):
                return updated  # the same rows for every column: one [B, 1] load shared
            pos = 1 if last == "load" else 2
            args = list(updated.args)
            for i, a in enumerate(args):
                if (a.keyword and a.keyword.value == "mask") or (a.keyword is None and i == pos):
                    none = isinstance(a.value, cst.Name) and a.value.value == "None"
                    ok = cst.Name(self.n["ok"]) if none else _and(a.value, self.n["ok"])
                    args[i] = a.with_changes(value=ok)
                    return updated.with_changes(args=args)
            return _with_args(updated, [_kw("mask", self.n["ok"])])
        return updated


def rewrite(ctx: Ctx, a: Analysis, p: dict[str, Any]) -> str:
    la = a.launch
    kdef = ctx.kernels[la.kernel]
    roots = _tl_roots(ctx.module)
    tl_mod = _tl_alias(ctx.module) or f"{_triton_alias(ctx.module)}.language"
    used = set(names_in(kdef)) | {pp.name.value for pp in kdef.params.params}
    n = {
        "cols": _fresh("cols", used),
        "ok": _fresh("col_ok", used),
        "BLOCK_N": _fresh("BLOCK_N", used),
        "n_cols": _fresh("n_cols", used),
    }
    dep = _row_dependent(kdef)
    new_body = kdef.body.visit(_Kernel(a, dep, n, roots, tl_mod))
    assert isinstance(new_body, cst.IndentedBlock)
    pid = f"{tl_mod}.program_id(0)"
    prologue = [
        cst.parse_statement(
            f"{n['cols']} = ({pid} * {n['BLOCK_N']} + {tl_mod}.arange(0, {n['BLOCK_N']}))[None, :]"
        ),
        cst.parse_statement(f"{n['ok']} = {n['cols']} < {n['n_cols']}"),
    ]
    stmts = list(new_body.body)
    at = 1 if stmts and _is_docstring(stmts[0]) else 0
    new_body = new_body.with_changes(body=[*stmts[:at], *prologue, *stmts[at:]])
    annotation = next(
        (pp.annotation for pp in kdef.params.params if pp.annotation is not None
         and dotted(pp.annotation.annotation).endswith("constexpr")),
        cst.Annotation(cst.parse_expression(f"{tl_mod}.constexpr")),
    )  # fmt: skip
    params = list(kdef.params.params)
    last = params[-1]
    new = [cst.Param(cst.Name(n["n_cols"])), cst.Param(cst.Name(n["BLOCK_N"]), annotation=annotation)]  # fmt: skip
    if isinstance(last.comma, cst.Comma) and "\n" in code(last.comma):  # one a line
        inner = params[-2].comma if len(params) > 1 else last.comma
        params[-1] = last.with_changes(comma=inner)
        new = [new[0].with_changes(comma=inner), new[1].with_changes(comma=last.comma)]
    else:  # the whitespace before ")" moves to the new last parameter
        params[-1] = last.with_changes(comma=_sep(), whitespace_after_param=cst.SimpleWhitespace(""))  # fmt: skip
        new = [
            new[0].with_changes(comma=_sep()),
            new[1].with_changes(whitespace_after_param=last.whitespace_after_param),
        ]
    params += new
    new_kdef = kdef.with_changes(body=new_body, params=kdef.params.with_changes(params=params))

    # the launcher
    tr = _triton_alias(ctx.module)
    launcher_used = set(names_in(la.func)) | set(assignments(ctx.module))
    bn = _fresh("BLOCK_N", launcher_used)
    if "block_n" in p:
        value, why = str(int(p["block_n"])), "fixed"
    else:
        tile, cap = int(p.get("tile", TILE)), int(p.get("max_block_n", MAX_BLOCK_N))
        value = f"min({cap}, max(1, {tile} // {a.block}), {tr}.next_power_of_2({a.cols}))"
        if not _pow2(a.block, la.func):
            value = f"{tr}.next_power_of_2({value})"
        why = f"a [rows, BLOCK_N] tile of about {tile} elements, at most {cap} columns"
    comment = cst.Comment(f"# column_tiling: {why}; loads coalesced along the columns")
    assign = cst.parse_statement(f"{bn} = {value}")
    assign = assign.with_changes(leading_lines=[cst.EmptyLine(comment=comment)])
    grid = cst.parse_expression(f"({tr}.cdiv({a.cols}, {bn}),)")
    sub = la.call.func
    assert isinstance(sub, cst.Subscript)
    launch = la.call.with_changes(
        func=sub.with_changes(slice=[sub.slice[0].with_changes(slice=cst.Index(grid))])
    )
    new_call = _with_args(launch, [_kw(n["n_cols"], a.cols), _kw(n["BLOCK_N"], bn)])
    call = la.call

    class Launcher(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            return new_call if original is call else updated

        def leave_SimpleStatementLine(
            self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
        ) -> Any:
            if any(x is call for x in walk(original)):
                return cst.FlattenSentinel([assign, updated])
            return updated

        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
            return new_kdef if original is kdef else updated

    return ctx.module.visit(Launcher()).code


@register
class ColumnTiling(RewritePass):
    NAME = "column_tiling"
    DESCRIPTION = (
        "Turn a one-column-per-program reduction (grid (n_cols,), a serial loop down the column) "
        "into one where each program owns BLOCK_N adjacent columns and loads [rows, BLOCK_N] "
        "tiles coalesced along the row-major inner dimension (columns a row vector, aranges "
        "[:, None], reductions axis=0; masks & cols < n_cols; grid cdiv(n_cols, BLOCK_N))."
    )
    CATEGORY = "parallelism"
    ANCHOR = "one-column-per-program launch kernel[(n_cols,)] of a kernel adding its program id to pointers with unit stride"  # fmt: skip

    def _blocks(self, source: str, one: bool, direction: str) -> list[Site]:
        def run() -> list[Site]:
            found = [b for b in column_blocks(Ctx(source)) if (b.value == "1") == one]
            return [
                self.site(direction, i, b.line, b.func.name.value,
                          f"{b.name}={b.value}: columns per program of {', '.join(b.kernels)}",
                          kind="columns", name=b.name, value=b.value)
                for i, b in enumerate(found)
            ]  # fmt: skip

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def backward_sites(self, source: str) -> list[Site]:
        return self._blocks(source, one=False, direction="backward")

    def simplify(self, source: str, site: Site) -> RewriteResult:
        def run() -> RewriteResult:
            ctx = Ctx(source)
            b = next((x for x in column_blocks(ctx) if x.name == site.params.get("name")
                      and x.func.name.value == site.function and x.value != "1"), None)  # fmt: skip
            if b is None:
                return RewriteResult.skip(f"no column block {site.params.get('name')} here", site)
            return RewriteResult(
                True, f"{b.name} = 1: one column per program of {', '.join(b.kernels)}",
                replaced(ctx, b, "1"), site,
            )  # fmt: skip

        return self.safe(run)

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            _, found = analyse(source)
            return [
                self.site("forward", i, a.line, a.function,
                          f"{a.kernel}: one program per column of {a.cols}, row block {a.block}",
                          name=a.kernel, kernel=a.kernel, cols=a.cols, block=a.block)
                for i, a in enumerate(x for x in found if not x.problem)
            ]  # fmt: skip

        result = self.safe(run)
        naive = result if isinstance(result, list) else []
        restore = self._blocks(source, one=True, direction="forward")
        n = len(naive)
        return naive + [Site(x.pass_name, x.direction, n + x.index, x.line, x.function,
                             x.description, x.params) for x in restore]  # fmt: skip

    def _restore(self, source: str, site: Site, p: dict[str, Any]) -> RewriteResult:
        """Forward in the expert's shape: NAME = 1 back to the expert's expression."""
        value = p.get("value")
        if not isinstance(value, str) or value == "1":
            return RewriteResult.skip(
                f"{site.params.get('name')} = 1: the columns per program to restore are not "
                "given (params['value'])", site,
            )  # fmt: skip
        ctx = Ctx(source)
        b = next((x for x in column_blocks(ctx) if x.name == site.params.get("name")
                  and x.func.name.value == site.function and x.value == "1"), None)  # fmt: skip
        if b is None:
            return RewriteResult.skip(f"no column block {site.params.get('name')} = 1 here", site)
        return RewriteResult(True, f"{b.name} = {value}: columns per program", replaced(ctx, b, value), site)  # fmt: skip

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""

        def run() -> list[str]:
            return [
                "" if not a.problem else
                a.problem if a.problem.startswith(a.kernel) else f"{a.kernel}: {a.problem}"
                for a in analyse(source)[1]
            ]  # fmt: skip

        result = self.safe(run)
        return result if isinstance(result, list) else [result.reason]

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}

        def run() -> RewriteResult:
            if site.params.get("kind") == "columns":
                return self._restore(source, site, p)
            ctx, found = analyse(source)
            a = next((x for x in found if x.kernel == site.params.get("kernel")), None)
            if a is None:
                return RewriteResult.skip(f"no launch of {site.params.get('kernel')} here", site)
            if a.problem:
                return RewriteResult.skip(a.problem, site)
            if "block_n" in p:
                b = p["block_n"]
                if not isinstance(b, int) or isinstance(b, bool) or b < 1 or b & (b - 1):
                    return RewriteResult.skip(f"params['block_n']={b!r}: expected a power of two", site)  # fmt: skip
            out = rewrite(ctx, a, p)
            return RewriteResult(
                True, f"{a.kernel}: BLOCK_N columns per program (grid cdiv({a.cols}, BLOCK_N))", out, site
            )  # fmt: skip

        return self.safe(run)

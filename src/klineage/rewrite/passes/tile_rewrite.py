"""The rewrite multi_row and column_tiling share (not a pass): a one-program-per-index kernel
becomes one whose program owns P adjacent indices as one more tile axis, and its launcher
launches cdiv(n, P) programs.

Both passes give the program id's index a vector of P lanes, `(pid * P + tl.arange(0, P))`,
along one axis of a 2-D tile (`Tiling.axis`: 0 for multi_row's rows, a [ROWS, B] tile; 1 for
column_tiling's columns, a [B, BLOCK_N] tile), and put the kernel's own block along the other:
every `tl.arange` gains that axis, every 1-D reduction reduces it with keep_dims, 1-D
`tl.zeros`/`tl.full` shapes gain P, and a load or store that depends on the index is masked by
`index < n`. What differs is data: the names, the launcher's parameters and its comment
(`Tiling`). The passes' forward sites, why_not and apply are here too, on the launches their
analysis finds (`multi_row_analysis.Launched`); the analyses that prove a kernel has the shape
are the passes' own (multi_row_analysis.py, column_tiling_analysis.py), and P's value at the
launch from its params is tile_count.py's.

The pieces other forward passes (block_scan, split_k, tiled_transpose) share are here too: a
kernel's parameters appended in their layout (`with_params`), a prologue after its docstring
(`after_docstring`), a load or store masked (`masked`), a launch's grid replaced (`with_grid`)
and the file's edit at one launch (`Relaunch`); the site's launch (`launched`) and the forward
sites of analysed launches (`RewritePass.launch_sites`) are base.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import libcst as cst

from klineage.rewrite.base import RewritePass, RewriteResult, Site, dotted, launched
from klineage.rewrite.passes import tile_count
from klineage.rewrite.passes.multi_row_analysis import (
    REDUCTIONS,
    SCANS,
    Launched,
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


@dataclass(frozen=True)
class Tiling:
    """What one pass calls things: the program's index runs along tile axis `axis`."""

    pass_name: str  # the launcher comment's prefix
    axis: int  # 0: the index is a column vector [P, 1]; 1: a row vector [1, P]
    index: str  # the kernel's name for the P indices (rows, cols)
    ok: str  # its mask (row_ok, col_ok)
    block: str  # the constexpr P, in the kernel and the launcher (ROWS, BLOCK_N)
    count: str  # the kernel's new parameter for n (n_rows, n_cols)
    fixed: str  # params key that fixes P (rows, block_n)
    cap_key: str  # params key for P's cap (max_rows, max_block_n)
    tile: int  # default elements per tile
    cap: int  # default cap on P
    shape: str  # the tile, for the launcher comment ("[ROWS, BLOCK]")
    own: str  # the kernel's own block, for a site's description ("block", "row block")
    unit: str  # what P counts, for the launcher comment ("rows")
    effect: str  # what the launcher comment says it buys
    done: str  # what the rewrite's result says it did ("several rows per program")
    # Programs the default P leaves at least about (0: no floor): P is at most the power of two
    # that keeps count / P over this many, so a regime with few long rows keeps its programs.
    programs: int = 0
    # Default elements per tile for a kernel that walks its index's data in a loop, carrying
    # per-index totals into a scan (tl.cumsum/tl.cumprod) each step, without the programs
    # floor (a one-index [1, B] tile of such a scan measured far slower than the 1-D kernel);
    # 0: `tile` and `programs` for it too.
    scan_tile: int = 0


A = TypeVar("A", bound=Launched)  # a pass's analysis of one launch


def tl_alias(module: cst.Module) -> str | None:
    """The name triton.language is imported as (tl), None if it is not imported by name."""
    for n in walk(module):
        if isinstance(n, cst.Import):
            for a in n.names:
                if a.evaluated_name == "triton.language" and a.evaluated_alias:
                    return a.evaluated_alias
        elif (
            isinstance(n, cst.ImportFrom)
            and n.module is not None
            and dotted(n.module) == "triton"
            and not isinstance(n.names, cst.ImportStar)
        ):
            for a in n.names:
                if a.evaluated_name == "language":
                    return a.evaluated_alias or a.evaluated_name
    return None


def fresh(base: str, used: set[str]) -> str:
    name = base
    while name in used:
        name += "_"
    return name


def _paren(e: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(e, cst.Name | cst.Attribute | cst.Call | cst.Subscript) or e.lpar:
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _and(mask: cst.BaseExpression, ok: str) -> cst.BaseExpression:
    return cst.BinaryOperation(_paren(mask), cst.BitAnd(), cst.Name(ok))


def _sep() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _kw(name: str, value: str) -> cst.Arg:
    """The keyword argument name=value (no spaces around =)."""
    eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    return cst.Arg(cst.parse_expression(value), keyword=cst.Name(name), equal=eq)


def _with_args(call: cst.Call, extra: list[cst.Arg]) -> cst.Call:
    """call with `extra` appended, keeping the call's comma style (one a line stays so)."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=extra)
    last = args[-1]
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    comma = last.comma if isinstance(last.comma, cst.Comma) else None
    if comma is None or "\n" not in code(comma):  # the whitespace before ")" moves to the end
        args[-1] = last.with_changes(comma=space, whitespace_after_arg=cst.SimpleWhitespace(""))
        for i, e in enumerate(extra):
            end = i == len(extra) - 1
            args.append(
                e.with_changes(
                    comma=cst.MaybeSentinel.DEFAULT if end else space,
                    whitespace_after_arg=last.whitespace_after_arg
                    if end
                    else cst.SimpleWhitespace(""),
                )
            )
        return call.with_changes(args=args)
    inner = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else comma
    args[-1] = last.with_changes(comma=inner)
    news = [e.with_changes(comma=inner) for e in extra]
    news[-1] = news[-1].with_changes(comma=comma)
    return call.with_changes(args=args + news)


def _vector(axis: int) -> list[cst.SubscriptElement]:
    """`[:, None]` (a column vector, along axis 0) or `[None, :]` (a row vector, axis 1)."""
    whole = cst.SubscriptElement(cst.Slice(None, None))
    none = cst.SubscriptElement(cst.Index(cst.Name("None")))
    first, second = (whole, none) if axis == 0 else (none, whole)
    return [first.with_changes(comma=_sep()), second]


def masked(call: cst.Call, pos: int, ok: str) -> cst.Call:
    """A load (pos 1, its mask's position) or store (pos 2) masked by `ok` too: `mask & ok`,
    `ok` for a mask None, else `mask=ok` appended."""
    args = list(call.args)
    for i, a in enumerate(args):
        if (a.keyword and a.keyword.value == "mask") or (a.keyword is None and i == pos):
            none = isinstance(a.value, cst.Name) and a.value.value == "None"
            args[i] = a.with_changes(value=cst.Name(ok) if none else _and(a.value, ok))
            return call.with_changes(args=args)
    return _with_args(call, [_kw("mask", ok)])


def with_params(params: Sequence[cst.Param], new: Sequence[cst.Param]) -> list[cst.Param]:
    """params (at least one) with `new` appended, keeping one a line so; else the whitespace
    before ")" moves to the new last parameter."""
    params = list(params)
    last = params[-1]
    if isinstance(last.comma, cst.Comma) and "\n" in code(last.comma):  # one a line
        inner = params[-2].comma if len(params) > 1 else last.comma
        params[-1] = last.with_changes(comma=inner)
        added = [p.with_changes(comma=inner) for p in new]
        added[-1] = added[-1].with_changes(comma=last.comma)
    else:
        params[-1] = last.with_changes(
            comma=_sep(), whitespace_after_param=cst.SimpleWhitespace("")
        )
        added = [p.with_changes(comma=_sep()) for p in new[:-1]]
        added.append(new[-1].with_changes(whitespace_after_param=last.whitespace_after_param))
    return [*params, *added]


def constexpr(kdef: cst.FunctionDef, tl_mod: str) -> cst.Annotation:
    """The annotation of kdef's first constexpr parameter, else `tl.constexpr`."""
    return next(
        (
            pp.annotation
            for pp in kdef.params.params
            if pp.annotation is not None and dotted(pp.annotation.annotation).endswith("constexpr")
        ),
        cst.Annotation(cst.parse_expression(f"{tl_mod}.constexpr")),
    )


def after_docstring(
    body: cst.IndentedBlock, prologue: Sequence[cst.BaseStatement]
) -> cst.IndentedBlock:
    """body with `prologue` first, after its docstring if it has one."""
    stmts = list(body.body)
    at = 1 if stmts and _is_docstring(stmts[0]) else 0
    return body.with_changes(body=[*stmts[:at], *prologue, *stmts[at:]])


def index_lines(
    n: dict[str, str], tl_mod: str, pid_axis: int, axis: int, bound: str
) -> list[cst.BaseStatement]:
    """`index = (tl.program_id(pid_axis) * P + tl.arange(0, P))`, a vector along tile axis
    `axis`, and `ok = index < bound` (names n: index, ok, block)."""
    vector = "[:, None]" if axis == 0 else "[None, :]"
    pid = f"{tl_mod}.program_id({pid_axis})"
    return [
        cst.parse_statement(
            f"{n['index']} = ({pid} * {n['block']} + {tl_mod}.arange(0, {n['block']})){vector}"
        ),
        cst.parse_statement(f"{n['ok']} = {n['index']} < {bound}"),
    ]


def with_grid(call: cst.Call, grid: cst.BaseExpression) -> cst.Call:
    """The launch `kernel[...](...)` with the grid `grid`."""
    sub = call.func
    assert isinstance(sub, cst.Subscript)
    return call.with_changes(
        func=sub.with_changes(slice=[sub.slice[0].with_changes(slice=cst.Index(grid))])
    )


class Relaunch(cst.CSTTransformer):
    """A file's edit at one launch: `call` (by identity) becomes launch(updated), the statement
    line holding it line(updated), and the function `kdef` becomes `kernel`."""

    def __init__(
        self,
        call: cst.Call,
        launch: Callable[[cst.Call], cst.BaseExpression],
        line: Callable[[cst.SimpleStatementLine], Any],
        kdef: cst.FunctionDef,
        kernel: cst.FunctionDef | cst.FlattenSentinel[cst.BaseStatement],
    ) -> None:
        self.call, self.launch, self.line = call, launch, line
        self.kdef, self.kernel = kdef, kernel

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        return self.launch(updated) if original is self.call else updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> Any:
        if any(x is self.call for x in walk(original)):
            return self.line(updated)
        return updated

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        return self.kernel if original is self.kdef else updated


class _Kernel(cst.CSTTransformer):
    """The kernel's body, rewritten for the 2-D tile (see the module docstring); `widen` maps
    an Assign (by id) to the dtype of the `tl.full((1, P), start, dtype)` it starts from."""

    def __init__(
        self,
        t: Tiling,
        dep: set[str],
        names: dict[str, str],
        roots: set[str],
        tl_mod: str,
        widen: dict[int, str],
    ) -> None:
        self.t = t
        self.dep = dep
        self.n = names
        self.roots = roots
        self.tl = tl_mod
        self.widen = widen

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        dtype = self.widen.get(id(original))
        if dtype is None:
            return updated
        p = self.n["block"]
        shape = f"({p}, 1)" if self.t.axis == 0 else f"(1, {p})"  # one start per index
        value = f"{self.tl}.full({shape}, {code(original.value)}, {self.tl}.{dtype})"
        return updated.with_changes(value=cst.parse_expression(value))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        last = (
            dotted(original.func).split(".")[-1] if isinstance(original.func, cst.Attribute) else ""
        )
        head = dotted(original.func).rsplit(".", 1)[0] if last else ""
        if not head or head.split(".")[0] not in self.roots:
            return updated
        lanes = 1 - self.t.axis  # the axis of the kernel's own block
        if last == "program_id":
            return cst.Name(self.n["index"])
        if last == "arange":
            return cst.Subscript(updated, _vector(lanes))
        if last in REDUCTIONS or last in SCANS:
            args = [
                a
                for i, a in enumerate(updated.args)
                if not (i == 1 and a.keyword is None)
                and not (a.keyword and a.keyword.value == "axis")
            ]
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            extra = [_kw("axis", str(lanes))]
            if last in REDUCTIONS:  # a scan keeps its shape; a reduction keeps the index axis
                extra.append(_kw("keep_dims", "True"))
            return _with_args(updated.with_changes(args=args), extra)
        if last in ("zeros", "full"):
            shape = updated.args[0].value
            assert isinstance(shape, cst.Tuple | cst.List)
            own = shape.elements[0]
            p = cst.Name(self.n["block"])
            elements = (
                [cst.Element(p, _sep()), own.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
                if self.t.axis == 0
                else [own.with_changes(comma=_sep()), cst.Element(p)]
            )
            return updated.with_changes(
                args=[
                    updated.args[0].with_changes(value=shape.with_changes(elements=elements)),
                    *updated.args[1:],
                ]
            )
        if last in ("load", "store"):
            if not _depends(original, self.dep):
                return updated  # the same lanes for every index: one load shared by the P
            return masked(updated, 1 if last == "load" else 2, self.n["ok"])
        return updated


def _kernel(
    ctx: Ctx, t: Tiling, kdef: cst.FunctionDef, widen: dict[int, str], tl_mod: str
) -> tuple[cst.FunctionDef, dict[str, str]]:
    """The rewritten kernel and the names it uses (index, ok, block, count)."""
    used = set(names_in(kdef)) | {pp.name.value for pp in kdef.params.params}
    n = {k: fresh(getattr(t, k), used) for k in ("index", "ok", "block", "count")}
    dep = _row_dependent(kdef)  # for column_tiling: what depends on the column
    new_body = kdef.body.visit(_Kernel(t, dep, n, _tl_roots(ctx.module), tl_mod, widen))
    assert isinstance(new_body, cst.IndentedBlock)
    new_body = after_docstring(new_body, index_lines(n, tl_mod, 0, t.axis, n["count"]))
    annotation = constexpr(kdef, tl_mod)
    new = [cst.Param(cst.Name(n["count"])), cst.Param(cst.Name(n["block"]), annotation=annotation)]
    params = with_params(kdef.params.params, new)
    return kdef.with_changes(body=new_body, params=kdef.params.with_changes(params=params)), n


def rewrite(
    ctx: Ctx,
    t: Tiling,
    a: Launched,
    count: str,
    p: dict[str, Any],
) -> str:
    """The source with a's kernel tiled by P along t.axis and its launch over cdiv(count, P);
    params p: t.fixed (P itself), "tile", t.cap_key and "programs" (P's bounds; "programs" 0
    drops t.programs' floor)."""
    la = a.launch
    kdef = ctx.kernels[la.kernel]
    tl_mod = tl_alias(ctx.module) or f"{_triton_alias(ctx.module)}.language"
    new_kdef, n = _kernel(ctx, t, kdef, a.widen, tl_mod)

    tr = _triton_alias(ctx.module)
    launcher_used = set(names_in(la.func)) | set(assignments(ctx.module))
    block_name = fresh(t.block, launcher_used)
    value, why = tile_count.value(t, a, kdef, count, tr or "triton", p)
    comment = cst.Comment(f"# {t.pass_name}: {why}; {t.effect}")
    assign = cst.parse_statement(f"{block_name} = {value}")
    assign = assign.with_changes(leading_lines=[cst.EmptyLine(comment=comment)])
    grid = cst.parse_expression(f"({tr}.cdiv({count}, {block_name}),)")
    launch = with_grid(la.call, grid)
    new_call = _with_args(launch, [_kw(n["count"], count), _kw(n["block"], block_name)])
    edit = Relaunch(
        la.call, lambda _: new_call, lambda st: cst.FlattenSentinel([assign, st]), kdef, new_kdef
    )
    return ctx.module.visit(edit).code


def sites(rp: RewritePass, t: Tiling, found: Sequence[A], count: Callable[[A], str]) -> list[Site]:
    """rp's forward sites: the analysed launches without a problem; count(a) is the grid's n."""
    return rp.launch_sites(
        lambda: found,
        lambda a: (
            f"{a.kernel}: one program per {t.unit[:-1]} of {count(a)}, {t.own} {a.block}",
            {"name": a.kernel, "kernel": a.kernel, t.index: count(a), "block": a.block},
        ),
    )


def why_not(
    rp: RewritePass, analyse: Callable[[str], tuple[Ctx, Sequence[A]]], source: str
) -> list[str]:
    """The reason each launch analysed in source is not a site, prefixed by its kernel ("" for
    a site); rp's skip reason alone when the analysis fails."""

    def run() -> list[str]:
        return [
            ""
            if not a.problem
            else a.problem
            if a.problem.startswith(a.kernel)
            else f"{a.kernel}: {a.problem}"
            for a in analyse(source)[1]
        ]

    result = rp.safe(run)
    return result if isinstance(result, list) else [result.reason]


def apply(
    rp: RewritePass,
    t: Tiling,
    analyse: Callable[[str], tuple[Ctx, Sequence[A]]],
    source: str,
    site: Site,
    p: dict[str, Any],
    count: Callable[[A], str],
) -> RewriteResult:
    """rp's forward rewrite of the site's kernel's launch (count(a) is the grid's n), through
    rp.safe; the skip that says why not: no such launch, its problem, or params[t.fixed] that
    is not a power of two."""

    def run() -> RewriteResult:
        ctx, found = analyse(source)
        a = launched(found, site)
        if isinstance(a, RewriteResult):
            return a
        bad = tile_count.problem(t, p)
        if bad:
            return RewriteResult.skip(bad, site)
        out = rewrite(ctx, t, a, count(a), p)
        return RewriteResult(
            True, f"{a.kernel}: {t.done} (grid cdiv({count(a)}, {t.block}))", out, site
        )

    return rp.safe(run)


def _is_docstring(st: cst.BaseStatement) -> bool:
    return (
        isinstance(st, cst.SimpleStatementLine)
        and isinstance(st.body[0], cst.Expr)
        and isinstance(st.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )

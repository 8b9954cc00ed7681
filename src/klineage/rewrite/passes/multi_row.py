"""Several rows per program for a one-row-per-program kernel: rows become a column vector.

A naive row kernel (softmax, norms, log-sum-exp, a per-row loss) launches `kernel[(n_rows,)]`
and gives each program one row in one block `tl.arange(0, BLOCK)`. At short rows most of a
program idles: on the H200 an expert's several-rows-per-program kernel ran 6.2x faster at
65536x16, 4.5x at 65536x64 and 1.5x at 16384x256, and about 1.0x from 1024 columns up.

Forward only (rows_per_program's backward works on the expert's shape). The kernel takes
`ROWS: tl.constexpr` and the row count; its program's row becomes the column vector
`(tl.program_id(0) * ROWS + tl.arange(0, ROWS))[:, None]` (the original name keeps its
`.to(tl.int64)`), every `tl.arange` a row vector `[None, :]`, every 1-D reduction
`axis=1, keep_dims=True`, and 1-D `tl.zeros`/`tl.full` shapes (ROWS, B). So a value that was a
scalar per row is [ROWS, 1] and a row is [ROWS, B]; values that do not depend on the row (the
weight, its load) stay [1, B] and are shared by the program's rows. Every load or store whose
pointer, mask or value depends on the row gets `& row_ok` (rows < n_rows): ROWS need not divide
the row count. The launcher computes ROWS = min(MAX_ROWS, max(1, TILE // BLOCK),
next_power_of_2(n_rows)) (TILE 4096, MAX_ROWS 64; params["tile"], params["max_rows"], or
params["rows"] fixed) and launches cdiv(n_rows, ROWS) programs.

Why it is sound: after the rewrite a program's rows only meet in reductions along axis 1, and
everything else broadcasts lane by lane, so each row computes what its own program computed;
rows past n_rows compute on masked (undefined) values and store nothing. Nothing here reads
what a "row" means: a 1-D blocked elementwise kernel (offs = pid * BLOCK + arange) is a site
too and becomes ROWS blocks a program, which the gate then times like any other candidate.

The rewrite is sound only for straight-line code whose operations broadcast, so a kernel is
skipped, with the reason, for: loops, if/with/return, indexing (a 2-D tile already), program
ids other than axis 0 or tl.num_programs, atomics, tl.dot, any tl function not known to be
elementwise (scans, reshapes, softmax...), a helper that is not elementwise, a reduction with
an axis other than 0 or with return_indices/keep_dims, several block sizes, a store whose
pointer does not depend on the row, a grid that is not a literal 1-tuple, a kernel launched
from several places, autotuned, or with parameter defaults. That analysis is
multi_row_analysis.py; this module rewrites the kernel and its launcher.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from klineage.rewrite.base import RewritePass, RewriteResult, Site, dotted
from klineage.rewrite.passes.multi_row_analysis import (
    REDUCTIONS,
    Analysis,
    _depends,
    _row_dependent,
    _tl_roots,
    analyse,
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

TILE = 4096  # elements per [ROWS, BLOCK] tile, the expert's choice (6.2x at 65536x16)
MAX_ROWS = 64


def _tl_alias(module: cst.Module) -> str | None:
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


def _fresh(base: str, used: set[str]) -> str:
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
            args.append(e.with_changes(
                comma=cst.MaybeSentinel.DEFAULT if end else space,
                whitespace_after_arg=last.whitespace_after_arg if end else cst.SimpleWhitespace(""),
            ))  # fmt: skip
        return call.with_changes(args=args)
    inner = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else comma
    args[-1] = last.with_changes(comma=inner)
    news = [e.with_changes(comma=inner) for e in extra]
    news[-1] = news[-1].with_changes(comma=comma)
    return call.with_changes(args=args + news)


class _Kernel(cst.CSTTransformer):
    """The kernel's body, rewritten for a [ROWS, B] tile (see the module docstring)."""

    def __init__(self, dep: set[str], names: dict[str, str], roots: set[str]) -> None:
        self.dep = dep
        self.n = names
        self.roots = roots

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        last = (
            dotted(original.func).split(".")[-1] if isinstance(original.func, cst.Attribute) else ""
        )
        head = dotted(original.func).rsplit(".", 1)[0] if last else ""
        if not head or head.split(".")[0] not in self.roots:
            return updated
        if last == "program_id":
            return cst.Name(self.n["rows"])
        if last == "arange":
            row_vector = [
                cst.SubscriptElement(cst.Index(cst.Name("None")), comma=_sep()),
                cst.SubscriptElement(cst.Slice(None, None)),
            ]
            return cst.Subscript(updated, row_vector)
        if last in REDUCTIONS:
            args = [a for i, a in enumerate(updated.args)
                    if not (i == 1 and a.keyword is None) and not (a.keyword and a.keyword.value == "axis")]  # fmt: skip
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            extra = [_kw("axis", "1"), _kw("keep_dims", "True")]
            return _with_args(updated.with_changes(args=args), extra)
        if last in ("zeros", "full"):
            shape = updated.args[0].value
            assert isinstance(shape, cst.Tuple | cst.List)
            el = shape.elements[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            new = shape.with_changes(elements=[cst.Element(cst.Name(self.n["ROWS"]), _sep()), el])
            return updated.with_changes(
                args=[updated.args[0].with_changes(value=new), *updated.args[1:]]
            )
        if last in ("load", "store"):
            if not _depends(original, self.dep):
                return updated  # the same lanes for every row: one [1, B] load shared by the rows
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
        "rows": _fresh("rows", used),
        "ok": _fresh("row_ok", used),
        "ROWS": _fresh("ROWS", used),
        "n_rows": _fresh("n_rows", used),
    }
    dep = _row_dependent(kdef)
    new_body = kdef.body.visit(_Kernel(dep, n, roots))
    assert isinstance(new_body, cst.IndentedBlock)
    pid = f"{tl_mod}.program_id(0)"
    prologue = [
        cst.parse_statement(
            f"{n['rows']} = ({pid} * {n['ROWS']} + {tl_mod}.arange(0, {n['ROWS']}))[:, None]"
        ),
        cst.parse_statement(f"{n['ok']} = {n['rows']} < {n['n_rows']}"),
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
    new = [cst.Param(cst.Name(n["n_rows"])), cst.Param(cst.Name(n["ROWS"]), annotation=annotation)]
    if isinstance(last.comma, cst.Comma) and "\n" in code(last.comma):  # one a line
        inner = params[-2].comma if len(params) > 1 else last.comma
        params[-1] = last.with_changes(comma=inner)
        new = [new[0].with_changes(comma=inner), new[1].with_changes(comma=last.comma)]
    else:  # the whitespace before ")" moves to the new last parameter
        params[-1] = last.with_changes(
            comma=_sep(), whitespace_after_param=cst.SimpleWhitespace("")
        )
        new = [
            new[0].with_changes(comma=_sep()),
            new[1].with_changes(whitespace_after_param=last.whitespace_after_param),
        ]
    params += new
    new_kdef = kdef.with_changes(body=new_body, params=kdef.params.with_changes(params=params))

    # the launcher
    tr = _triton_alias(ctx.module)
    launcher_used = set(names_in(la.func)) | set(assignments(ctx.module))
    rows_name = _fresh("ROWS", launcher_used)
    if "rows" in p:
        value = str(int(p["rows"]))
        why = "fixed"
    else:
        tile, cap = int(p.get("tile", TILE)), int(p.get("max_rows", MAX_ROWS))
        block = a.block
        value = f"min({cap}, max(1, {tile} // {block}), {tr}.next_power_of_2({a.rows}))"
        if not _pow2(block, la.func):
            value = f"{tr}.next_power_of_2({value})"
        why = f"a [ROWS, BLOCK] tile of about {tile} elements, at most {cap} rows"
    comment = cst.Comment(f"# multi_row: {why}; short rows fill a program")
    assign = cst.parse_statement(f"{rows_name} = {value}")
    assign = assign.with_changes(leading_lines=[cst.EmptyLine(comment=comment)])
    grid = cst.parse_expression(f"({tr}.cdiv({a.rows}, {rows_name}),)")
    sub = la.call.func
    assert isinstance(sub, cst.Subscript)
    launch = la.call.with_changes(
        func=sub.with_changes(slice=[sub.slice[0].with_changes(slice=cst.Index(grid))])
    )
    new_call = _with_args(launch, [_kw(n["n_rows"], a.rows), _kw(n["ROWS"], rows_name)])
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


def _is_docstring(st: cst.BaseStatement) -> bool:
    return (
        isinstance(st, cst.SimpleStatementLine)
        and isinstance(st.body[0], cst.Expr)
        and isinstance(st.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def _pow2(block: str, func: cst.FunctionDef) -> bool:
    if block.isdigit():
        v = int(block)
        return v >= 1 and v & (v - 1) == 0
    e = cst.parse_expression(block)
    if isinstance(e, cst.Name):
        found = assignments(func).get(e.value, [])
        if len(found) != 1 or found[0].value is None:
            return False
        e = found[0].value
    return isinstance(e, cst.Call) and dotted(e.func).endswith("next_power_of_2")


@register
class MultiRow(RewritePass):
    NAME = "multi_row"
    DESCRIPTION = (
        "Turn a one-row-per-program kernel (grid (n_rows,), one tl.arange block, 1-D reductions) "
        "into one that handles ROWS rows per program as a [ROWS, BLOCK] tile (rows a column "
        "vector, reductions axis=1, masks & rows < n_rows; grid cdiv(n_rows, ROWS)): short "
        "rows fill a program instead of leaving most lanes idle."
    )
    CATEGORY = "parallelism"
    ANCHOR = "one-row-per-program launch kernel[(n_rows,)] of a loop-free row kernel"

    def backward_sites(self, source: str) -> list[Site]:
        return []  # rows_per_program's backward works on the expert's shape

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return RewriteResult.skip("multi_row is forward only: rows_per_program sets rows to 1")

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            _, found = analyse(source)
            return [
                self.site("forward", i, a.line, a.function,
                          f"{a.kernel}: one program per row of {a.rows}, block {a.block}",
                          name=a.kernel, kernel=a.kernel, rows=a.rows, block=a.block)
                for i, a in enumerate(x for x in found if not x.problem)
            ]  # fmt: skip

        result = self.safe(run)
        return result if isinstance(result, list) else []

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""

        def run() -> list[str]:
            return [
                "" if not a.problem else
                a.problem if a.problem.startswith(a.kernel) else f"{a.kernel}: {a.problem}"
                for a in analyse(source)[1]
            ]  # fmt: skip

        result = self.safe(run)
        return result if isinstance(result, list) else [result.reason]  # fmt: skip

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}

        def run() -> RewriteResult:
            ctx, found = analyse(source)
            a = next((x for x in found if x.kernel == site.params.get("kernel")), None)
            if a is None:
                return RewriteResult.skip(f"no launch of {site.params.get('kernel')} here", site)
            if a.problem:
                return RewriteResult.skip(a.problem, site)
            if "rows" in p:
                r = p["rows"]
                if not isinstance(r, int) or isinstance(r, bool) or r < 1 or r & (r - 1):
                    return RewriteResult.skip(
                        f"params['rows']={r!r}: expected a power of two", site
                    )
            out = rewrite(ctx, a, p)
            return RewriteResult(
                True, f"{a.kernel}: several rows per program (grid cdiv({a.rows}, ROWS))", out, site
            )

        return self.safe(run)

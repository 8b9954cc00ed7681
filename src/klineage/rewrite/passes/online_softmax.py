"""One online walk for a maximum and a sum of exponentials that two walks computed.

A naive softmax (or log-sum-exp) over data longer than one block walks it twice before it can
write: once for the maximum, once for the sum of exp(x - maximum). The expert's looped softmax
(`kernels/softmax/expert.py`, its online kernel) walks once, carrying the running maximum m and
the running sum d rescaled whenever a block raises the maximum:

    m_new = max(m, max(block));  d = d * exp(m - m_new) + sum(exp(block - m_new));  m = m_new

so x is read twice in all (this walk, then the write) instead of three times. Found by
structure, not by names: two top-level loops of one kernel with the same header whose bodies
are the same simple statements except the last one, the first ending `M = tl.maximum(M,
tl.max(E, ...))` and the second `S += tl.sum(tl.exp(E - M), ...)` with the same E and the same
reduction arguments (an axis, keep_dims: a row walk's scalar and a column tile's [1, BLOCK_N]
alike). The two loops become one, ending

    M_new = tl.maximum(M, tl.max(E, ...))
    M_ref = tl.where(M_new == float("-inf"), 0.0, M_new)
    S = S * tl.exp(M - M_ref) + tl.sum(tl.exp(E - M_ref), ...)
    M = M_new

and S's start moves before it. M_ref is the expert's guard: while every value so far is -inf (a
masked block, a column of -inf at its start), (-inf) - (-inf) would be NaN, and the sum must
stay 0.

Why it is sound: max is exact and order-free, so M ends the same; by induction S holds
sum(exp(E - M)) over the blocks so far (each rescale multiplies by exp(M_old - M_new), the
identity exp(a - b) = exp(a - c) * exp(c - b)), so S ends equal up to rounding, which the gate's
tolerance judges; the statements before the last are the same in both loops, so what they leave
after the loop is what the second loop left. Skipped, with the reason: loops whose bodies differ,
hold compound statements, store, or use M or S before their last statement; a sum whose
exponent is not the maximum's argument minus M; other statements between the loops than S's
start, or a start that reads what the first loop computes.

Forward only: the expert's online loop uses exp2 and its own guard name; splitting it back
(the backward) is not written yet, so no walk gives this pass a skill (docs/REWRITES.md).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, cast

import libcst as cst

from klineage.rewrite.base import (
    ForwardOnly,
    RewriteResult,
    Site,
    dotted,
    is_triton_jit,
    names_under,
    parse,
    positions,
)
from klineage.rewrite.passes.rows_per_program import code, walk
from klineage.rewrite.passes.tile_rewrite import fresh, tl_alias
from klineage.rewrite.registry import register


@dataclass
class Pair:
    """Two walks of one kernel that one online walk can replace."""

    kernel: str
    kdef: cst.FunctionDef
    first: cst.For  # ends with the maximum
    second: cst.For  # ends with the sum of exponentials
    peak: str  # M
    total: str  # S
    arg: cst.BaseExpression  # E
    max_args: list[cst.Arg]  # tl.max's arguments after E
    sum_args: list[cst.Arg]  # tl.sum's arguments after the exponential
    start: cst.SimpleStatementLine | None  # S's start between the loops (moved before them)
    line: int


def _tail(call: cst.BaseExpression, name: str) -> cst.Call | None:
    """The call if it is tl.<name>(...) (any module alias), else None."""
    callee = dotted(call.func) if isinstance(call, cst.Call) else ""
    return call if "." in callee and callee.split(".")[-1] == name else None  # type: ignore[return-value]


def _simple(block: cst.BaseSuite) -> list[cst.SimpleStatementLine] | None:
    if not isinstance(block, cst.IndentedBlock):
        return None
    body = list(block.body)
    if not body or not all(isinstance(s, cst.SimpleStatementLine) for s in body):
        return None
    return body  # type: ignore[return-value]


def _one(stmt: cst.SimpleStatementLine) -> cst.BaseSmallStatement | None:
    return stmt.body[0] if len(stmt.body) == 1 else None


def _maximum(stmt: cst.SimpleStatementLine) -> tuple[str, cst.BaseExpression, list[cst.Arg]] | None:
    """`M = tl.maximum(M, tl.max(E, *rest))` -> (M, E, rest)."""
    s = _one(stmt)
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1):
        return None
    target = s.targets[0].target
    outer = _tail(s.value, "maximum")
    if not isinstance(target, cst.Name) or outer is None or len(outer.args) != 2:
        return None
    first, second = outer.args
    inner = _tail(second.value, "max")
    if first.keyword or second.keyword or code(first.value) != target.value or inner is None:
        return None
    if not inner.args or inner.args[0].keyword:
        return None
    return target.value, inner.args[0].value, list(inner.args[1:])


def _sum_exp(
    stmt: cst.SimpleStatementLine, peak: str
) -> tuple[str, cst.BaseExpression, list[cst.Arg]] | None:
    """`S += tl.sum(tl.exp(E - M), *rest)` -> (S, E, rest)."""
    s = _one(stmt)
    if not (isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign)):
        return None
    if not isinstance(s.target, cst.Name):
        return None
    total = _tail(s.value, "sum")
    if total is None or not total.args or total.args[0].keyword:
        return None
    exp = _tail(total.args[0].value, "exp")
    if exp is None or len(exp.args) != 1 or exp.args[0].keyword:
        return None
    diff = exp.args[0].value
    if not (
        isinstance(diff, cst.BinaryOperation)
        and isinstance(diff.operator, cst.Subtract)
        and code(diff.right) == peak
    ):
        return None
    return s.target.value, diff.left, list(total.args[1:])


def _header(loop: cst.For) -> str:
    return f"{code(loop.target)} in {code(loop.iter)}"


def _args(args: list[cst.Arg]) -> str:
    return ", ".join(code(a).rstrip(", ") for a in args)


def _calls(stmts: list[cst.SimpleStatementLine], *tails: str) -> bool:
    return any(
        isinstance(n, cst.Call) and dotted(n.func).split(".")[-1].startswith(tails)
        for s in stmts
        for n in walk(s)
    )


def _assigned(stmt: cst.BaseStatement) -> set[str]:
    out: set[str] = set()
    for n in walk(stmt):
        if isinstance(n, cst.AssignTarget | cst.AugAssign | cst.AnnAssign):
            t = n.target
            out |= set(names_under(t))
        elif isinstance(n, cst.For):
            out |= set(names_under(n.target))
    return out


def _pair(kernel: str, kdef: cst.FunctionDef, i: int, j: int) -> Pair | str:
    """The pair of top-level loops i < j of kdef's body, or why not."""
    body = list(kdef.body.body)
    first, second = body[i], body[j]
    assert isinstance(first, cst.For) and isinstance(second, cst.For)
    if _header(first) != _header(second) or first.orelse or second.orelse:
        return "the two walks' loops differ"
    one, two = _simple(first.body), _simple(second.body)
    if one is None or two is None:
        return "a walk's body holds compound statements"
    if [code(s) for s in one[:-1]] != [code(s) for s in two[:-1]]:
        return "the two walks' bodies differ before their last statements"
    found = _maximum(one[-1])
    if found is None:
        return "the first walk does not end `M = tl.maximum(M, tl.max(E, ...))`"
    peak, arg, max_args = found
    summed = _sum_exp(two[-1], peak)
    if summed is None:
        return f"the second walk does not end `S += tl.sum(tl.exp(E - {peak}), ...)`"
    total, arg2, sum_args = summed
    if code(arg2) != code(arg) or _args(sum_args) != _args(max_args):
        return "the sum's exponent or its reduction is not the maximum's"
    if _calls(one, "store", "atomic"):
        return "a walk stores"
    used = {n for s in one[:-1] for n in names_under(s)}
    if peak in used or total in used or total == peak:
        return f"a walk reads {peak} or {total} before its last statement"
    if total in names_under(first):
        return f"the first walk reads {total}"
    start: cst.SimpleStatementLine | None = None
    loop_names = _assigned(first) | {peak}
    for stmt in body[i + 1 : j]:
        s = _one(stmt) if isinstance(stmt, cst.SimpleStatementLine) else None
        if not (
            isinstance(s, cst.Assign)
            and len(s.targets) == 1
            and code(s.targets[0].target) == total
            and start is None
        ):
            return f"statements between the two walks other than {total}'s start"
        if set(names_under(s.value)) & loop_names:
            return f"{total}'s start reads what the first walk computes"
        start = stmt  # type: ignore[assignment]
    return Pair(kernel, kdef, first, second, peak, total, arg, max_args, sum_args, start, 0)


def analyse(source: str) -> list[Pair | tuple[str, str]]:
    """Each kernel's first pair of walks (a Pair), or (kernel, why not) for a kernel with two
    top-level loops of the same header and no pair."""
    module = parse(source)
    _, pos = positions(module)
    out: list[Pair | tuple[str, str]] = []
    for kdef in module.body:
        if not (
            isinstance(kdef, cst.FunctionDef) and any(is_triton_jit(d) for d in kdef.decorators)
        ):
            continue
        body = list(kdef.body.body)
        loops = [k for k, s in enumerate(body) if isinstance(s, cst.For)]
        why = ""
        for a, b in itertools.pairwise(loops):
            if _header(body[a]) != _header(body[b]):  # type: ignore[arg-type]
                continue
            got = _pair(kdef.name.value, kdef, a, b)
            if isinstance(got, Pair):
                got.line = pos[body[a]].start.line
                out.append(got)
                why = ""
                break
            why = why or got
        if why:
            out.append((kdef.name.value, why))
    return out


def rewrite(source: str, pair: Pair) -> str:
    module = parse(source)
    tl = tl_alias(module) or "tl"
    used = set(names_under(pair.kdef))
    new, ref = (
        fresh(f"{pair.peak}_new", used),
        fresh(f"{pair.peak}_ref", used | {pair.peak + "_new"}),
    )
    m, s, e = pair.peak, pair.total, code(pair.arg)
    mx = _args([cst.Arg(pair.arg), *pair.max_args])
    rest = _args(pair.sum_args)
    lines = [
        f"{new} = {tl}.maximum({m}, {tl}.max({mx}))",
        f'{ref} = {tl}.where({new} == float("-inf"), 0.0, {new})',
        f"{s} = {s} * {tl}.exp({m} - {ref}) + {tl}.sum({tl}.exp({e} - {ref}){', ' + rest if rest else ''})",
        f"{m} = {new}",
    ]
    body = _simple(pair.first.body)
    assert body is not None
    merged_body = [*body[:-1], *(cst.parse_statement(x) for x in lines)]
    merged = pair.first.with_changes(body=pair.first.body.with_changes(body=merged_body))
    stmts: list[cst.BaseStatement] = []
    for stmt in pair.kdef.body.body:
        if stmt is pair.second or stmt is pair.start:
            continue
        if stmt is pair.first:
            if pair.start is not None:
                stmts.append(cast(cst.BaseStatement, pair.start.with_changes(leading_lines=[])))
            stmts.append(merged)
            continue
        stmts.append(cast(cst.BaseStatement, stmt))
    kdef = pair.kdef.with_changes(body=pair.kdef.body.with_changes(body=stmts))
    return module.deep_replace(pair.kdef, kdef).code  # type: ignore[union-attr]


@register
class OnlineSoftmax(ForwardOnly):
    NAME = "online_softmax"
    DESCRIPTION = (
        "Merge a walk for the maximum and a walk for the sum of exp(x - maximum) into one online "
        "walk (running maximum, sum rescaled by exp(m_old - m_new), guarded while every value is "
        "-inf): the data is read twice in all instead of three times, as the softmax expert's "
        "online kernel does."
    )
    CATEGORY = "memory"
    STRUCTURAL = True
    ANCHOR = "two walks of one kernel: a running maximum, then a running sum of exp(x - maximum)"
    NO_BACKWARD = "the expert's online loop is not split back yet"

    def forward_sites(self, source: str) -> list[Site]:
        def run() -> list[Site]:
            out: list[Site] = []
            for k, p in enumerate(x for x in analyse(source) if isinstance(x, Pair)):
                out.append(
                    self.site(
                        "forward",
                        k,
                        p.line,
                        p.kernel,
                        f"{p.kernel}: a walk for the maximum {p.peak}, then one for the sum "
                        f"{p.total} of exp(... - {p.peak})",
                        kernel=p.kernel,
                        peak=p.peak,
                        total=p.total,
                    )
                )
            return out

        return self.safe_sites(run)

    def why_not(self, source: str) -> list[str]:
        """Why each kernel with two walks of one header is not a site ("" for a site)."""

        def run() -> list[str]:
            return ["" if isinstance(x, Pair) else f"{x[0]}: {x[1]}" for x in analyse(source)]

        result = self.safe(run)
        return result if isinstance(result, list) else [result.reason]

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        def run() -> RewriteResult:
            found = [x for x in analyse(source) if isinstance(x, Pair)]
            pair = next((x for x in found if x.kernel == site.params.get("kernel")), None)
            if pair is None:
                return RewriteResult.skip(f"no pair of walks in {site.params.get('kernel')}", site)
            return RewriteResult(
                True,
                f"{pair.kernel}: the walks for {pair.peak} and {pair.total} merged into one online walk",
                rewrite(source, pair),
                site,
            )

        return self.safe(run)

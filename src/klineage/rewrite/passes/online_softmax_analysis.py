"""online_softmax's analysis (it registers no pass): a kernel's pair of walks, a maximum then a
sum of exponentials, that one online walk can replace (forward), and an online walk that two
walks can replace (backward). The conditions are the pass's docstring's
(rewrite/passes/online_softmax.py)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.base import dotted, is_call_to, is_triton_jit, names_under, parse, positions
from klineage.rewrite.passes.rows_per_program import bound_names, code, walk


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
    max_args: list[cst.Arg]  # tl.max's arguments after E (tl.sum's are the same)
    start: cst.SimpleStatementLine | None  # S's start between the loops (moved before them)
    scale: str  # C of the exp2 form tl.exp2(E * C - M * C), "" for tl.exp(E - M)
    line: int


def _tail(node: cst.CSTNode, name: str) -> cst.Call | None:
    """The node if it is a call of tl.<name> (base.is_call_to's aliases), else None."""
    return node if isinstance(node, cst.Call) and is_call_to(node, f"tl.{name}") else None


def _simple(block: cst.BaseSuite) -> list[cst.SimpleStatementLine] | None:
    if not isinstance(block, cst.IndentedBlock):
        return None
    body = list(block.body)
    if not body or not all(isinstance(s, cst.SimpleStatementLine) for s in body):
        return None
    return body  # type: ignore[return-value]


def _one(stmt: cst.SimpleStatementLine) -> cst.BaseSmallStatement | None:
    return stmt.body[0] if len(stmt.body) == 1 else None


def _running_max(
    s: cst.BaseSmallStatement | None,
) -> tuple[str, str, cst.BaseExpression, list[cst.Arg]] | None:
    """`T = tl.maximum(M, tl.max(E, *rest))` -> (T, M, E, rest)."""
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1):
        return None
    outer = _tail(s.value, "maximum")
    if outer is None or len(outer.args) != 2 or any(a.keyword for a in outer.args):
        return None
    inner = _tail(outer.args[1].value, "max")
    if not isinstance(outer.args[0].value, cst.Name) or inner is None:
        return None
    if not inner.args or inner.args[0].keyword:
        return None
    target = code(s.targets[0].target)
    return target, outer.args[0].value.value, inner.args[0].value, list(inner.args[1:])


def _maximum(stmt: cst.SimpleStatementLine) -> tuple[str, cst.BaseExpression, list[cst.Arg]] | None:
    """`M = tl.maximum(M, tl.max(E, *rest))` -> (M, E, rest)."""
    found = _running_max(_one(stmt))
    if found is None or found[0] != found[1]:
        return None
    return found[1], found[2], found[3]


def _sum_exp(
    stmt: cst.SimpleStatementLine, peak: str
) -> tuple[str, cst.BaseExpression, list[cst.Arg], str] | None:
    """`S += tl.sum(tl.exp(E - M), *rest)` -> (S, E, rest, ""); the exp2 form exp2_log2e writes,
    `S += tl.sum(tl.exp2(E * C - M * C), *rest)`, -> (S, E, rest, C)."""
    s = _one(stmt)
    if not (isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign)):
        return None
    if not isinstance(s.target, cst.Name):
        return None
    total = _tail(s.value, "sum")
    if total is None or not total.args or total.args[0].keyword:
        return None
    term = total.args[0].value
    exp, exp2 = _tail(term, "exp"), _tail(term, "exp2")
    call = exp or exp2
    if call is None or len(call.args) != 1 or call.args[0].keyword:
        return None
    diff = call.args[0].value
    if not (isinstance(diff, cst.BinaryOperation) and isinstance(diff.operator, cst.Subtract)):
        return None
    rest = list(total.args[1:])
    if exp is not None:
        return (s.target.value, diff.left, rest, "") if code(diff.right) == peak else None
    left, right = diff.left, diff.right
    if not (
        isinstance(left, cst.BinaryOperation)
        and isinstance(left.operator, cst.Multiply)
        and isinstance(right, cst.BinaryOperation)
        and isinstance(right.operator, cst.Multiply)
        and code(right.left) == peak
        and code(left.right) == code(right.right)
        and isinstance(left.right, cst.Float | cst.Integer | cst.Name)
        and code(left.right) != peak
    ):
        return None
    return s.target.value, left.left, rest, code(left.right)


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
        return (
            f"the second walk does not end `S += tl.sum(tl.exp(E - {peak}), ...)` "
            f"(or tl.exp2(E * C - {peak} * C))"
        )
    total, arg2, sum_args, scale = summed
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
    loop_names = bound_names(first) | {peak}
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
    return Pair(kernel, kdef, first, second, peak, total, arg, max_args, start, scale, 0)


def _kernels(module: cst.Module) -> list[cst.FunctionDef]:
    """The module's @triton.jit functions."""
    return [
        k
        for k in module.body
        if isinstance(k, cst.FunctionDef) and any(is_triton_jit(d) for d in k.decorators)
    ]


def analyse(source: str) -> list[Pair | tuple[str, str]]:
    """Each kernel's first pair of walks (a Pair), or (kernel, why not) for a kernel with two
    top-level loops of the same header and no pair."""
    module = parse(source)
    _, pos = positions(module)
    out: list[Pair | tuple[str, str]] = []
    for kdef in _kernels(module):
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


@dataclass
class Online:
    """An online walk (backward site): its last four statements are the running maximum
    `Mn = tl.maximum(M, tl.max(E, ...))`, a reference `R = g(Mn)`, the rescaled sum
    `S = S * EXP(...) + tl.sum(EXP(...), ...)` and `M = Mn`."""

    kernel: str
    kdef: cst.FunctionDef
    loop: cst.For
    peak: str
    total: str
    line: int


def _online(kernel: str, kdef: cst.FunctionDef, k: int) -> Online | str:
    """The top-level loop k of kdef as an online walk, or why not."""
    body = list(kdef.body.body)
    loop = body[k]
    assert isinstance(loop, cst.For)
    stmts = _simple(loop.body)
    if stmts is None or len(stmts) < 4 or loop.orelse:
        return "not an online walk (simple statements ending in four)"
    s_max, s_ref, s_sum, s_set = (_one(x) for x in stmts[-4:])
    found = _running_max(s_max)
    if found is None:
        return "no running maximum `Mn = tl.maximum(M, tl.max(E, ...))`"
    new, peak, _, max_args = found
    if not (
        isinstance(s_set, cst.Assign)
        and len(s_set.targets) == 1
        and code(s_set.targets[0].target) == peak
        and code(s_set.value) == new
        and new != peak
    ):
        return f"the walk does not end `{peak} = {new}`"
    if not (isinstance(s_ref, cst.Assign) and len(s_ref.targets) == 1):
        return "no reference computed from the new maximum"
    ref = code(s_ref.targets[0].target)
    prefix = stmts[:-4]
    prefix_names = {n for x in prefix for n in bound_names(x)}
    if new not in names_under(s_ref.value) or set(names_under(s_ref.value)) & (
        prefix_names | {peak, ref}
    ):
        return f"{ref} is not a function of {new} alone"
    if not (isinstance(s_sum, cst.Assign) and len(s_sum.targets) == 1):
        return "no rescaled sum"
    total = code(s_sum.targets[0].target)
    v = s_sum.value
    if not (
        isinstance(v, cst.BinaryOperation)
        and isinstance(v.operator, cst.Add)
        and isinstance(v.left, cst.BinaryOperation)
        and isinstance(v.left.operator, cst.Multiply)
        and code(v.left.left) == total
    ):
        return f"the sum is not `{total} = {total} * EXP(...) + tl.sum(...)`"
    scale, term = v.left.right, v.right
    fn = dotted(scale.func).split(".")[-1] if isinstance(scale, cst.Call) else ""
    summed = _tail(term, "sum")
    term_arg = summed.args[0].value if summed is not None and summed.args else None
    if fn not in ("exp", "exp2") or term_arg is None or _tail(term_arg, fn) is None:
        return "the rescale and the summed terms are not one exponential"
    if set(names_under(scale)) - {peak, ref} - _globals(kdef) or peak not in names_under(scale):
        return f"the rescale reads more than {peak} and {ref}"
    assert summed is not None
    if {peak, new, total} & set(names_under(term)) or ref not in names_under(term):
        return f"the summed terms do not read {ref} alone of the walk's totals"
    if _args(list(summed.args[1:])) != _args(max_args):
        return "the sum's reduction is not the maximum's"
    if {peak, new, ref, total} & {n for x in prefix for n in names_under(x)}:
        return "the walk reads its totals before its last four statements"
    if _calls(stmts, "store", "atomic"):
        return "the walk stores"
    after = [n for x in body[k + 1 :] for n in names_under(x)]
    if new in after or ref in after:
        return f"{new} or {ref} is read after the walk"
    return Online(kernel, kdef, loop, peak, total, 0)


def _globals(kdef: cst.FunctionDef) -> set[str]:
    """Names a kernel reads that it does not bind (module constants such as _LOG2E, tl)."""
    bound = bound_names(kdef) | {p.name.value for p in kdef.params.params}
    return {n for n in names_under(kdef.body) if n not in bound}


def analyse_online(source: str) -> list[Online | tuple[str, str]]:
    """Each kernel's online walks (Online), or (kernel, why not) for a top-level loop that ends
    in a running maximum and is not one."""
    module = parse(source)
    _, pos = positions(module)
    out: list[Online | tuple[str, str]] = []
    for kdef in _kernels(module):
        for k, stmt in enumerate(kdef.body.body):
            if not isinstance(stmt, cst.For) or not any(
                _tail(n, "maximum") is not None for n in walk(stmt.body)
            ):
                continue
            got = _online(kdef.name.value, kdef, k)
            if isinstance(got, Online):
                got.line = pos[stmt].start.line
            out.append(got if isinstance(got, Online) else (kdef.name.value, got))
    return out

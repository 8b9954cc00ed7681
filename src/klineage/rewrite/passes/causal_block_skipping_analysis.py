"""causal_block_skipping's analysis (not a pass): the causal key loops of a file's @triton.jit
functions and the helper calls around them, as candidate sites of either form ("split": an
off-diagonal call and a masked diagonal call of one helper; "loop": a key loop with the causal
mask in its body). rewrite/passes/causal_block_skipping.py describes the forms and rewrites
them; nothing is rewritten here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import libcst as cst

from klineage.rewrite.base import code_of as _code
from klineage.rewrite.base import dotted, is_call_to, is_triton_jit, kwarg

_ORDER = (cst.GreaterThanEqual, cst.LessThanEqual, cst.GreaterThan, cst.LessThan)


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in _walk(node) if isinstance(n, cst.Name)}


def _broadcast(node: cst.CSTNode, rows: bool) -> cst.Subscript | None:
    """The first x[:, None] (rows) or x[None, :] (columns) inside node."""
    for n in _walk(node):
        if isinstance(n, cst.Subscript) and len(n.slice) == 2:
            kinds = [
                "full"
                if isinstance(e.slice, cst.Slice)
                and e.slice.lower is None
                and e.slice.upper is None
                else "none"
                if isinstance(e.slice, cst.Index) and _code(e.slice.value) == "None"
                else ""
                for e in n.slice
            ]
            if kinds == (["full", "none"] if rows else ["none", "full"]):
                return n
    return None


def _causal_compare(node: cst.CSTNode) -> bool:
    """rows[:, None] >= cols[None, :] (any order operator, either side): a causal mask."""
    if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
        return False
    if not isinstance(node.comparisons[0].operator, _ORDER):
        return False
    left, right = node.left, node.comparisons[0].comparator
    return bool(
        (_broadcast(left, True) and _broadcast(right, False))
        or (_broadcast(left, False) and _broadcast(right, True))
    )


def _has_causal(node: cst.CSTNode) -> bool:
    return any(_causal_compare(n) for n in _walk(node))


def _params(fn: cst.FunctionDef) -> list[str]:
    return [p.name.value for p in fn.params.params]


def _range_call(loop: cst.For) -> cst.Call | None:
    it = loop.iter
    if not isinstance(it, cst.Call) or not (
        dotted(it.func) == "range" or is_call_to(it, "tl.range")
    ):
        return None
    return it if len(it.args) >= 2 and all(a.keyword is None for a in it.args[:2]) else None


def _truth(expr: cst.BaseExpression) -> bool | None:
    return {"True": True, "1": True, "False": False, "0": False}.get(_code(expr))


@dataclass
class _Helper:
    name: str
    params: list[str]
    lo: str
    hi: str
    flag: str
    length: str | None


def _helper(fn: cst.FunctionDef) -> _Helper | None:
    """A jit helper whose key loop runs over parameters [lo, hi) with the causal mask under
    `if FLAG:` (FLAG a parameter)."""
    params = _params(fn)
    for loop in (n for n in _walk(fn.body) if isinstance(n, cst.For)):
        call = _range_call(loop)
        if call is None:
            continue
        lo, hi = call.args[0].value, call.args[1].value
        if not all(isinstance(b, cst.Name) and b.value in params for b in (lo, hi)):
            continue
        flags = [
            n.test.value
            for n in _walk(loop.body)
            if isinstance(n, cst.If)
            and isinstance(n.test, cst.Name)
            and n.test.value in params
            and _has_causal(n.body)
        ]
        if not flags:
            continue
        var = _names(loop.target)
        length = next(
            (
                n.comparisons[0].comparator.value
                for n in _walk(loop.body)
                if isinstance(n, cst.Comparison)
                and len(n.comparisons) == 1
                and isinstance(n.comparisons[0].operator, cst.LessThan)
                and isinstance(n.comparisons[0].comparator, cst.Name)
                and n.comparisons[0].comparator.value in params
                and var & _names(n.left)
            ),
            None,
        )
        assert isinstance(lo, cst.Name) and isinstance(hi, cst.Name)
        return _Helper(fn.name.value, params, lo.value, hi.value, flags[0], length)
    return None


def _arg(call: cst.Call, h: _Helper, name: str | None) -> cst.Arg | None:
    if name is None:
        return None
    found = kwarg(call, name)
    if found is not None:
        return found
    positional = [a for a in call.args if a.keyword is None and not a.star]
    i = h.params.index(name)
    return positional[i] if i < len(positional) else None


def _helper_call(stmt: cst.CSTNode, helpers: dict[str, _Helper]) -> tuple[_Helper, cst.Call] | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    value = small.value if isinstance(small, cst.Assign | cst.Expr) else None
    if isinstance(value, cst.Call) and dotted(value.func) in helpers:
        return helpers[dotted(value.func)], value
    return None


@dataclass
class _Cand:
    form: str  # "split" or "loop"
    fn: cst.FunctionDef
    node: cst.CSTNode  # the line anchor: first call (split) or the loop
    params: dict[str, Any]
    description: str
    block: cst.IndentedBlock | None = None
    span: tuple[int, int] = (0, 0)  # split: statement indices of the two calls in block
    helper: _Helper | None = None
    target: cst.BaseExpression | None = None  # loop: the bound expression to replace


def _bound_target(fn: cst.FunctionDef, call: cst.Call) -> cst.BaseExpression | None:
    """The loop's upper bound, through one assignment `hi = ...` when it is a local name."""
    bound = call.args[1].value
    if not isinstance(bound, cst.Name) or bound.value in _params(fn):
        return bound
    values = []
    for n in _walk(fn.body):
        if isinstance(n, cst.Assign) and len(n.targets) == 1:
            t, v = n.targets[0].target, n.value
            if isinstance(t, cst.Name) and t.value == bound.value:
                values.append(v)
            elif isinstance(t, cst.Tuple) and isinstance(v, cst.Tuple):
                for te, ve in zip(t.elements, v.elements, strict=False):
                    if isinstance(te.value, cst.Name) and te.value.value == bound.value:
                        values.append(ve.value)
    return values[0] if len(values) == 1 else (bound if not values else None)


def _split_cands(fn: cst.FunctionDef, helpers: dict[str, _Helper], direction: str) -> list[_Cand]:
    """Backward: (flag False from key 0, later flag True) helper call pairs in one block.
    Forward: a helper call with the flag True from key 0 (the whole range, masked)."""
    out: list[_Cand] = []
    for block in (n for n in _walk(fn) if isinstance(n, cst.IndentedBlock)):
        calls = [(i, hc) for i, s in enumerate(block.body) if (hc := _helper_call(s, helpers))]
        for a, (i, (h, call)) in enumerate(calls):
            flag, lo = _arg(call, h, h.flag), _arg(call, h, h.lo)
            if flag is None or lo is None or _code(lo.value) != "0":
                continue
            if direction == "forward" and _truth(flag.value) is True:
                desc = f"{h.name} over all keys with the causal mask"
                out.append(_Cand("split", fn, block.body[i], {"form": "split"}, desc))
                out[-1].block, out[-1].span, out[-1].helper = block, (i, i), h
            if direction != "backward" or _truth(flag.value) is not False:
                continue
            nxt = next(((j, c) for j, (h2, c) in calls[a + 1 :] if h2 is h), None)
            flag2 = _arg(nxt[1], h, h.flag) if nxt else None
            if nxt is None or flag2 is None or _truth(flag2.value) is not True:
                continue
            seg = "".join(_code(s) for s in block.body[i : nxt[0] + 1])
            params = {"form": "split", "helper": h.name, "segment": seg}
            desc = f"off-diagonal {h.name} call + masked diagonal call"
            out.append(_Cand("split", fn, block.body[i], params, desc))
            out[-1].block, out[-1].span, out[-1].helper = block, (i, nxt[0]), h
    return out


def _loop_cands(fn: cst.FunctionDef, direction: str) -> list[_Cand]:
    """Key loops with a causal mask in their body; backward: bound `X if FLAG else LENGTH`,
    forward: any other bound (not a helper's loop over a caller-given [lo, hi))."""
    out: list[_Cand] = []
    for loop in (n for n in _walk(fn) if isinstance(n, cst.For)):
        call = _range_call(loop)
        if call is None or not _has_causal(loop.body):
            continue
        target = _bound_target(fn, call)
        if target is None or all(_code(a.value) in _params(fn) for a in call.args[:2]):
            continue  # ambiguous bound, or a helper's loop over a caller-given range
        skipping = isinstance(target, cst.IfExp) and bool(_names(target.test) & _names(loop.body))
        if skipping and direction == "backward":
            params = {"form": "loop", "bound": _code(target)}
            out.append(_Cand("loop", fn, loop, params, f"causal loop bound `{_code(target)}`"))
        elif not skipping and direction == "forward":
            desc = f"causal key loop up to `{_code(target)}`"
            out.append(_Cand("loop", fn, loop, {"form": "loop"}, desc))
        else:
            continue
        out[-1].target = target
    return out


def _candidates(module: cst.Module, direction: str) -> list[_Cand]:
    jit = [
        n
        for n in _walk(module)
        if isinstance(n, cst.FunctionDef) and any(is_triton_jit(d) for d in n.decorators)
    ]
    helpers = {h.name: h for h in map(_helper, jit) if h is not None}
    return [
        c for fn in jit for c in _split_cands(fn, helpers, direction) + _loop_cands(fn, direction)
    ]

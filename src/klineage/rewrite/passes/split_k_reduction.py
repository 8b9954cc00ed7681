"""split_k's reading of the K loop's accumulator (not a pass; split_k_analysis.py runs it): the
reduction its start and its updates make, read from the structure and never from names.

- "sum": started from an fp32 zero (tl.zeros(..., dtype=tl.float32), tl.full(..., 0,
  tl.float32), 0.0), updated only by `acc += e`, `acc -= e`, `acc = acc + e`, `acc = e + acc`,
  `acc = acc - e` or `acc = tl.dot(x, y, acc)`;
- "max": started from an fp32 -inf (float("-inf"), -float("inf"), tl.full(..., float("-inf"),
  tl.float32)), updated only by `acc = tl.maximum(acc, e)` or `acc = tl.maximum(e, acc)` with
  two arguments and no keyword: the default NaN handling (maxnum), under which a value that
  starts from -inf never becomes NaN;
- "min": the same with +inf (float("inf"), tl.full(..., float("inf"), tl.float32)) and
  tl.minimum;

e, x and y free of acc throughout. Each is an associative, commutative operation whose
identity is the start, so the chunks' accumulators, each started from it and combined by the
same operation, are the accumulator; an empty chunk's is the identity, which changes nothing.
"""

from __future__ import annotations

from typing import Literal

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.split_k_store import arg, fp32, reads

Reduction = Literal["sum", "max", "min"]

# Why a start does not fit the reduction its updates make.
START_WHY: dict[Reduction, str] = {
    "sum": "only one fp32 zero start (tl.zeros(..., dtype=tl.float32), tl.full(..., 0, tl.float32), 0.0) is split",
    "max": 'only one fp32 -inf start (float("-inf"), -float("inf"), tl.full(..., float("-inf"), tl.float32)) is split for a running maximum',
    "min": 'only one fp32 +inf start (float("inf"), tl.full(..., float("inf"), tl.float32)) is split for a running minimum',
}
# What an update of each reduction may do.
UPDATE_WHY: dict[Reduction, str] = {
    "sum": "than add to it",
    "max": "than take its maximum with a value free of it (tl.maximum, two arguments)",
    "min": "than take its minimum with a value free of it (tl.minimum, two arguments)",
}
_EXTREMA: dict[str, Reduction] = {"maximum": "max", "minimum": "min"}


def is_zero(e: cst.BaseExpression) -> bool:
    if isinstance(e, cst.Integer):
        return int(e.value, 0) == 0
    return isinstance(e, cst.Float) and float(e.value) == 0


def _infinity(e: cst.BaseExpression, local: set[str]) -> int:
    """+1 for `float("inf")` (any spelling Python's float accepts), -1 for -inf, 0 otherwise."""
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus | cst.Plus):
        sign = -1 if isinstance(e.operator, cst.Minus) else 1
        return sign * _infinity(e.expression, local)
    if not (
        isinstance(e, cst.Call)
        and isinstance(e.func, cst.Name)
        and e.func.value == "float"
        and "float" not in local
        and len(e.args) == 1
        and e.args[0].keyword is None
        and isinstance(e.args[0].value, cst.SimpleString)
    ):
        return 0
    text = e.args[0].value.evaluated_value
    if not isinstance(text, str):
        return 0
    text = text.strip().lower()
    sign = -1 if text.startswith("-") else 1
    body = text[1:] if text[:1] in ("+", "-") else text
    return sign if body in {"inf", "infinity"} else 0


def start_of(e: cst.BaseExpression, roots: set[str], local: set[str]) -> Reduction | None:
    """The reduction whose fp32 identity e is (None: it is none's). `local` holds the kernel's
    own names (a parameter or variable called `float` is not the builtin)."""
    if isinstance(e, cst.Float) and is_zero(e):
        return "sum"
    sign = _infinity(e, local)
    if sign:
        return "max" if sign < 0 else "min"
    if not isinstance(e, cst.Call) or dotted(e.func).split(".")[0] not in roots:
        return None
    last = dotted(e.func).split(".")[-1]
    if last == "zeros":
        return "sum" if fp32(arg(e, 1, "dtype")) else None
    value = arg(e, 1, "value")
    if last != "full" or value is None or not fp32(arg(e, 2, "dtype")):
        return None
    if is_zero(value):
        return "sum"
    sign = _infinity(value, local)
    return None if not sign else "max" if sign < 0 else "min"


def update_of(st: cst.BaseSmallStatement, acc: str, roots: set[str]) -> Reduction | None:
    """The reduction the assignment st to acc makes (None: st does more to acc than one does)."""
    if isinstance(st, cst.AugAssign):
        ok = isinstance(st.operator, cst.AddAssign | cst.SubtractAssign)
        return "sum" if ok and not reads(st.value, {acc}) else None
    if not isinstance(st, cst.Assign) or len(st.targets) != 1:
        return None
    v = st.value
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add | cst.Subtract):
        ends = [(v.left, v.right)] + (
            [(v.right, v.left)] if isinstance(v.operator, cst.Add) else []
        )
        found = any(
            isinstance(x, cst.Name) and x.value == acc and not reads(y, {acc}) for x, y in ends
        )
        return "sum" if found else None
    if not isinstance(v, cst.Call) or dotted(v.func).split(".")[0] not in roots:
        return None
    last = dotted(v.func).split(".")[-1]
    if last == "dot":
        c = arg(v, 2, "acc")
        rest = [a for a in v.args if a.value is not c]
        own = isinstance(c, cst.Name) and c.value == acc
        return "sum" if own and not any(reads(a, {acc}) for a in rest) else None
    if last not in _EXTREMA or len(v.args) != 2 or any(a.keyword is not None for a in v.args):
        return None  # a keyword (propagate_nan) is not followed
    x, y = (a.value for a in v.args)
    for mine, other in ((x, y), (y, x)):
        if isinstance(mine, cst.Name) and mine.value == acc and not reads(other, {acc}):
            return _EXTREMA[last]
    return None

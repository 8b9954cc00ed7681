"""The analysis behind tile_accumulator.py: the static shapes of a kernel's tensors (as far as
the code says them), a loop's per-step reductions into a carried total (forward sites) and a
tile-shaped accumulator reduced once after its loop (backward sites)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import libcst as cst

from klineage.rewrite.base import dotted, is_call_to, names_under, parse, positions
from klineage.rewrite.passes.online_softmax_analysis import _kernels
from klineage.rewrite.passes.rows_per_program import code, walk

Loop = cst.For | cst.While  # a top-level loop of a kernel
Shape = tuple[str, ...]  # one source expression per dimension, "1" where it broadcasts

# Elementwise tl functions: the broadcast of their tensor arguments.
ELEMENTWISE = {"exp", "exp2", "log", "log2", "abs", "sqrt", "sqrt_rn", "rsqrt", "sigmoid"}
ELEMENTWISE |= {"maximum", "minimum", "where", "fma", "cos", "sin", "erf", "floor", "ceil"}
ELEMENTWISE |= {"clamp", "fdiv", "div_rn"}
# kind -> (the tl reduction, the elementwise combine, the identity)
KINDS = {
    "sum": ("sum", "", "0.0"),
    "max": ("max", "maximum", 'float("-inf")'),
    "min": ("min", "minimum", 'float("inf")'),
}
_COMBINES = {"maximum": "max", "minimum": "min"}


def _broadcast(a: Shape | None, b: Shape | None) -> Shape | None:
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a, b = ("1",) * (n - len(a)) + a, ("1",) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x == "1" or x == y:
            out.append(y)
        elif y == "1":
            out.append(x)
        else:
            return None
    return tuple(out)


class Shapes:
    """Static shapes of a kernel's expressions: tl.arange(0, N) is (N,), `[:, None]` and
    `[None, :]` add a broadcast dimension, arithmetic, comparisons, tl.load (its pointer and
    mask) and elementwise tl functions broadcast, `.to(...)` keeps a shape, parameters, literals
    and loop indices are scalars (). None where the code does not say."""

    def __init__(self, kdef: cst.FunctionDef) -> None:
        self.constexpr = {
            p.name.value
            for p in kdef.params.params
            if p.annotation is not None and dotted(p.annotation.annotation).endswith("constexpr")
        }
        self.params = {p.name.value for p in kdef.params.params}
        self.values: dict[str, list[cst.BaseExpression]] = {}
        self.loop_indices: set[str] = set()
        for n in walk(kdef.body):
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    if isinstance(t.target, cst.Name):
                        self.values.setdefault(t.target.value, []).append(n.value)
                    else:  # a tuple target: its names' shapes are unknown
                        for name in names_under(t.target):
                            self.values.setdefault(name, []).append(cst.Name("__unknown__"))
            elif isinstance(n, cst.For) and isinstance(n.target, cst.Name):
                self.loop_indices.add(n.target.value)
        self._seen: set[str] = set()

    def of(self, e: cst.BaseExpression) -> Shape | None:
        if isinstance(e, cst.Integer | cst.Float):
            return ()
        if isinstance(e, cst.Name):
            return self._name(e.value)
        if isinstance(e, cst.UnaryOperation):
            return self.of(e.expression)
        if isinstance(e, cst.BinaryOperation):
            return _broadcast(self.of(e.left), self.of(e.right))
        if isinstance(e, cst.BooleanOperation):
            return _broadcast(self.of(e.left), self.of(e.right))
        if isinstance(e, cst.Comparison):
            shape = self.of(e.left)
            for c in e.comparisons:
                shape = _broadcast(shape, self.of(c.comparator))
            return shape
        if isinstance(e, cst.Subscript):
            return self._subscript(e)
        if isinstance(e, cst.Call):
            return self._call(e)
        return None

    def constant(self, dim: str) -> bool:
        """Whether a dimension is known when the kernel is compiled (tl.full needs it)."""
        return dim.isdigit() or dim in self.constexpr

    def tile(self, e: cst.BaseExpression, axis: int) -> Shape | str:
        """The shape of `e`, reduced along `axis`, as an accumulator of its shape needs it
        (stated by the code, more than one element along the axis, every dimension known at
        compile time), or why not."""
        shape = self.of(e)
        if not shape:
            return (
                "the reduced value's shape is not known statically (tl.arange, [:, None], tl.load)"
            )
        if not -len(shape) <= axis < len(shape) or shape[axis] == "1":
            return f"axis {axis} of a {list(shape)} tile reduces nothing"
        unknown = [d for d in shape if not self.constant(d)]
        if unknown:
            return f"the tile's dimension {unknown[0]} is not a tl.constexpr (tl.full needs it)"
        return shape

    def _name(self, name: str) -> Shape | None:
        if name in self.params or (name in self.loop_indices and name not in self.values):
            return ()
        values = self.values.get(name)
        if not values or name in self._seen:
            return None
        self._seen.add(name)
        try:
            shapes = {self.of(v) for v in values}
        finally:
            self._seen.discard(name)
        return shapes.pop() if len(shapes) == 1 else None

    def _subscript(self, e: cst.Subscript) -> Shape | None:
        base = self.of(e.value)
        if base is None:
            return None
        out: list[str] = []
        k = 0
        for el in e.slice:
            s = el.slice
            if (
                isinstance(s, cst.Index)
                and isinstance(s.value, cst.Name)
                and s.value.value == "None"
            ):
                out.append("1")
            elif (
                isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None
            ):
                if k >= len(base):
                    return None
                out.append(base[k])
                k += 1
            else:
                return None
        return tuple(out) if k == len(base) else None

    def _call(self, e: cst.Call) -> Shape | None:
        if isinstance(e.func, cst.Attribute) and e.func.attr.value == "to":
            return self.of(e.func.value)
        tail = dotted(e.func).split(".")[-1]
        args = [a for a in e.args if a.keyword is None]
        if tail == "arange" and len(args) == 2:
            lo = args[0].value
            if isinstance(lo, cst.Integer) and lo.value == "0":
                return (code(args[1].value),)
            return None
        if tail in ("program_id", "num_programs", "cdiv") or dotted(e.func) == "float":
            return ()
        if tail == "load" and args:
            ptr = self.of(args[0].value)
            mask = next((a for a in e.args if a.keyword and a.keyword.value == "mask"), None)
            if mask is None and len(args) > 1:
                mask = args[1]
            return _broadcast(ptr, self.of(mask.value)) if mask is not None else ptr
        if tail in ("zeros", "full") and args:
            dims = args[0].value
            if isinstance(dims, cst.Tuple | cst.List):
                return tuple(code(x.value) for x in dims.elements)
            return None
        if tail in ELEMENTWISE and args:
            shape: Shape | None = ()
            for a in args:
                shape = _broadcast(shape, self.of(a.value))
            return shape
        return None


def _loop_statements(
    kdef: cst.FunctionDef,
) -> Iterator[tuple[int, Loop, cst.SimpleStatementLine]]:
    """(index in the kernel's body, loop, statement) for each simple statement directly in one
    of the kernel's top-level loops."""
    for i, loop in enumerate(kdef.body.body):
        if isinstance(loop, cst.For | cst.While) and isinstance(loop.body, cst.IndentedBlock):
            for stmt in loop.body.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    yield i, loop, stmt


def _reduce_args(call: cst.Call) -> tuple[cst.BaseExpression, int] | None:
    """(the reduced tensor, the axis) of tl.sum/max/min(x, axis[, keep_dims]) with an int axis."""
    pos = [a for a in call.args if a.keyword is None]
    kw = {a.keyword.value: a for a in call.args if a.keyword is not None}
    if not pos or set(kw) - {"axis", "keep_dims"}:
        return None
    axis = kw["axis"].value if "axis" in kw else pos[1].value if len(pos) > 1 else None
    if (
        isinstance(axis, cst.UnaryOperation)
        and isinstance(axis.operator, cst.Minus)
        and isinstance(axis.expression, cst.Integer)
    ):
        return pos[0].value, -int(axis.expression.value)
    if not isinstance(axis, cst.Integer):
        return None
    return pos[0].value, int(axis.value)


@dataclass
class Reduction:
    """A loop's per-step reduction into a carried total (a forward site)."""

    kernel: str
    kdef: cst.FunctionDef
    loop: Loop
    stmt: cst.SimpleStatementLine  # the update, a direct statement of the loop's body
    acc: str
    kind: str  # sum | max | min
    reduce: cst.Call  # tl.sum/max/min(x, axis, ...) in the update
    tile: cst.BaseExpression  # x
    shape: Shape
    tl: str  # the tl module's name in this file
    line: int = 0


def _update(stmt: cst.SimpleStatementLine) -> tuple[str, str, cst.Call] | None:
    """(accumulator, kind, the reduction call) of `A += tl.sum(x, ...)`, `A = A + tl.sum(...)`,
    `A = tl.maximum(A, tl.max(x, ...))` (minimum/min), or None."""
    if len(stmt.body) != 1:
        return None
    s = stmt.body[0]
    if isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign):
        if isinstance(s.target, cst.Name) and _is_reduce(s.value, "sum"):
            return s.target.value, "sum", s.value  # type: ignore[return-value]
        return None
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1):
        return None
    target = s.targets[0].target
    if not isinstance(target, cst.Name):
        return None
    acc, v = target.value, s.value
    if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add):
        for mine, other in ((v.left, v.right), (v.right, v.left)):
            if isinstance(mine, cst.Name) and mine.value == acc and _is_reduce(other, "sum"):
                return acc, "sum", other  # type: ignore[return-value]
        return None
    if isinstance(v, cst.Call):
        combine = dotted(v.func).split(".")[-1]
        args = [a.value for a in v.args if a.keyword is None]
        if combine in _COMBINES and len(args) == 2 and len(v.args) == 2:
            for mine, other in ((args[0], args[1]), (args[1], args[0])):
                if (
                    isinstance(mine, cst.Name)
                    and mine.value == acc
                    and _is_reduce(other, _COMBINES[combine])
                ):
                    return acc, _COMBINES[combine], other  # type: ignore[return-value]
    return None


def _is_reduce(e: cst.BaseExpression, tail: str) -> bool:
    return is_call_to(e, f"tl.{tail}")


def _floaty(kdef: cst.FunctionDef, loop: Loop, acc: str, tile: cst.BaseExpression) -> bool:
    """Evidence the total is floating point: x cast to a float type, or the accumulator started
    from a float literal or with a float dtype (a float tile accumulator would change an
    integer total's type)."""
    if (
        isinstance(tile, cst.Call)
        and isinstance(tile.func, cst.Attribute)
        and tile.func.attr.value == "to"
    ) and any("float" in code(a.value) for a in tile.args):
        return True
    body = [cast(cst.BaseStatement, st) for st in kdef.body.body]
    start = last_assignment(body[: body.index(loop)], acc)
    return start is not None and (
        isinstance(start[1].value, cst.Float) or "float" in code(start[1].value)
    )


def analyse(source: str) -> list[Reduction | tuple[str, str]]:
    """Each kernel's per-step reductions into carried totals of its top-level loops (forward
    sites), or (kernel, why not) for an update that is not one."""
    module = parse(source)
    _, pos = positions(module)
    out: list[Reduction | tuple[str, str]] = []
    for kdef in _kernels(module):
        shapes = Shapes(kdef)
        for _, loop, stmt in _loop_statements(kdef):
            got = _update(stmt)
            if got is None:
                continue
            acc, kind, reduce = got
            why = _why_not(kdef, loop, stmt, acc, reduce, shapes)
            if isinstance(why, str):
                out.append((kdef.name.value, f"`{code(stmt).strip()}`: {why}"))
                continue
            tile, shape = why
            tl = dotted(reduce.func).rsplit(".", 1)[0]
            r = Reduction(kdef.name.value, kdef, loop, stmt, acc, kind, reduce, tile, shape, tl)
            r.line = pos[stmt].start.line
            out.append(r)
    return out


def _why_not(
    kdef: cst.FunctionDef,
    loop: Loop,
    stmt: cst.SimpleStatementLine,
    acc: str,
    reduce: cst.Call,
    shapes: Shapes,
) -> tuple[cst.BaseExpression, Shape] | str:
    got = _reduce_args(reduce)
    if got is None:
        return "the reduction's axis is not an int literal (or it has other arguments)"
    tile, axis = got
    if acc in names_under(tile):
        return f"the reduced value reads {acc}"
    for other in loop.body.body:
        if other is not stmt and acc in names_under(other):
            return f"{acc} is used elsewhere in the loop (its per-step value is needed)"
    shape = shapes.tile(tile, axis)
    if isinstance(shape, str):
        return shape
    if not _floaty(kdef, loop, acc, tile):
        return f"nothing says {acc} is a float (an integer total would change type)"
    return tile, shape


@dataclass
class TileAccumulator:
    """A tile-shaped accumulator reduced once after its loop (a backward site)."""

    kernel: str
    kdef: cst.FunctionDef
    init: cst.SimpleStatementLine  # `T = tl.zeros(SHAPE, ...)` / tl.full(SHAPE, IDENT, ...)
    loop: Loop
    stmt: cst.SimpleStatementLine  # `T += x` / `T = tl.maximum(T, x)`
    after: cst.SimpleStatementLine  # `R = tl.sum(T, axis=A)` (max/min)
    tile: str
    total: str
    kind: str
    x: cst.BaseExpression
    reduce: cst.Call  # the after statement's reduction
    shape: list[str]
    tl: str
    line: int = 0


def last_assignment(
    body: list[cst.BaseStatement], name: str
) -> tuple[cst.SimpleStatementLine, cst.Assign] | None:
    """The last statement of `body` that is `name = ...` alone, and its Assign (a kernel's
    top-level statements before a loop: where a carried value starts)."""
    for st in reversed(body):
        if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1:
            s = st.body[0]
            if isinstance(s, cst.Assign) and [code(t.target) for t in s.targets] == [name]:
                return st, s
    return None


def analyse_tiles(source: str) -> list[TileAccumulator]:
    """The tile accumulators of each kernel's top-level loops (backward sites)."""
    module = parse(source)
    _, pos = positions(module)
    out: list[TileAccumulator] = []
    for kdef in _kernels(module):
        body = [cast(cst.BaseStatement, st) for st in kdef.body.body]
        for i, loop, stmt in _loop_statements(kdef):
            found = _tile_update(stmt)
            if found is None:
                continue
            tile, kind, x = found
            got = _around(kdef, body, i, loop, stmt, tile, kind, x)
            if got is not None:
                got.line = pos[got.init].start.line
                out.append(got)
    return out


def _tile_update(stmt: cst.SimpleStatementLine) -> tuple[str, str, cst.BaseExpression] | None:
    """(T, kind, x) of `T += x` or `T = tl.maximum(T, x)` / minimum."""
    if len(stmt.body) != 1:
        return None
    s = stmt.body[0]
    if isinstance(s, cst.AugAssign) and isinstance(s.operator, cst.AddAssign):
        if isinstance(s.target, cst.Name):
            return s.target.value, "sum", s.value
        return None
    if (
        isinstance(s, cst.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0].target, cst.Name)
    ):
        t = s.targets[0].target.value
        v = s.value
        if (
            isinstance(v, cst.Call)
            and dotted(v.func).split(".")[-1] in _COMBINES
            and len(v.args) == 2
        ):
            a, b = (x.value for x in v.args)
            if isinstance(a, cst.Name) and a.value == t and t not in names_under(b):
                return t, _COMBINES[dotted(v.func).split(".")[-1]], b
    return None


def _around(
    kdef: cst.FunctionDef,
    body: list[cst.BaseStatement],
    i: int,
    loop: Loop,
    stmt: cst.SimpleStatementLine,
    tile: str,
    kind: str,
    x: cst.BaseExpression,
) -> TileAccumulator | None:
    """The init before loop i and the one reduction after it of the tile accumulator `tile`,
    or None where the shape is not one."""
    if tile in names_under(x):
        return None
    if any(o is not stmt and tile in names_under(o) for o in loop.body.body):
        return None
    found = last_assignment(body[:i], tile)
    if found is None:
        return None
    init, first = found
    v = first.value
    if not isinstance(v, cst.Call):
        return None
    tail = dotted(v.func).split(".")[-1]
    pos = [a for a in v.args if a.keyword is None]
    dims = pos[0].value if pos else None
    if not isinstance(dims, cst.List | cst.Tuple):
        return None
    if tail == "full":
        start = code(pos[1].value).replace(" ", "") if len(pos) > 1 else ""
        if start not in (KINDS[kind][2].replace(" ", ""), *(("0", "0.0") if kind == "sum" else ())):
            return None
    elif tail != "zeros" or kind != "sum":
        return None
    uses = [st for st in body[i + 1 :] if tile in names_under(st)]
    between = [st for st in body[body.index(init) + 1 : i] if tile in names_under(st)]
    if len(uses) != 1 or between:
        return None
    after = uses[0]
    if not isinstance(after, cst.SimpleStatementLine) or len(after.body) != 1:
        return None
    s = after.body[0]
    if not (isinstance(s, cst.Assign) and len(s.targets) == 1):
        return None
    target, red = s.targets[0].target, s.value
    if not isinstance(target, cst.Name) or not isinstance(red, cst.Call):
        return None
    total = target.value
    if not _is_reduce(red, KINDS[kind][0]) or not red.args or code(red.args[0].value) != tile:
        return None
    if _reduce_args(red) is None or any(
        total in names_under(st) for st in body[: body.index(after)]
    ):
        return None
    shape = [code(e.value) for e in dims.elements]
    tl = dotted(red.func).rsplit(".", 1)[0]
    return TileAccumulator(
        kdef.name.value, kdef, init, loop, stmt, after, tile, total, kind, x, red, shape, tl
    )

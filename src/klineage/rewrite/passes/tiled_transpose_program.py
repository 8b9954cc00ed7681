"""The kernel side of tiled_transpose_tile.py's proof (not a pass): a tile program's body read
as a pure copy, its two sides `r = c * B + tl.arange(0, B)` and their program coordinates, and
the shape of every value (which side lies on which tile axis). tiled_transpose_tile.py says
what makes a site and why it is sound; this module only reads the kernel.

Shapes (`Program.shape`): a value is a scalar (rank 0), one side's vector (rank 1; it
broadcasts along the last axis, 1), or a 2-D tile (rank 2) mapping each side it holds to its
axis. `[:, None]` puts a vector on axis 0, `[None, :]` on axis 1, tl.trans swaps the axes, and
an elementwise operation merges its operands' maps; a side on two axes, two sides on one axis,
two sides' vectors combined as vectors (their pairing would change with the tile), indexing a
tile again, an attribute of a vector (`.T`) or anything else unknown is a reason not to rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.block_scan_lanes import vector_axis
from klineage.rewrite.passes.rows_per_program import code, constexprs, walk
from klineage.rewrite.passes.tiled_transpose_analysis import _is_pid

CALLS = {"program_id", "arange", "cdiv", "load", "store", "trans"}


@dataclass
class Side:
    """One side of the tile: its index vector r = c * B + tl.arange(0, B)."""

    index: str  # r
    block: str  # the constexpr B
    coord: str  # "div", "mod" (of the program id by D) or "axis0", "axis1" (tl.program_id(a))
    bound: str = ""  # n of the masks `r < n`
    # the launch's nodes that carry B: the argument and the grid's cdiv(n, B) divisors
    nodes: list[cst.BaseExpression] = field(default_factory=list)


class Unfit(Exception):
    """Why the kernel is not a site (raised inside the checks, returned as the reason)."""


def stripped(e: cst.BaseExpression) -> cst.BaseExpression:
    """e without `.to(...)` casts and `[:, None]` / `[None, :]` around it."""
    for _ in range(8):
        if isinstance(e, cst.Subscript) and vector_axis(e) is not None:
            e = e.value
        elif (
            isinstance(e, cst.Call)
            and isinstance(e.func, cst.Attribute)
            and e.func.attr.value == "to"
        ):
            e = e.func.value
        else:
            break
    return e


def cdiv_args(e: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(n, B) of `cdiv(n, B)` (any module's cdiv), None for anything else."""
    if (
        isinstance(e, cst.Call)
        and dotted(e.func).endswith("cdiv")
        and len(e.args) == 2
        and all(a.keyword is None and not a.star for a in e.args)
    ):
        return e.args[0].value, e.args[1].value
    return None


class Program:
    """The checks on one kernel; each raises Unfit with the reason."""

    def __init__(self, kdef: cst.FunctionDef, roots: set[str]) -> None:
        self.kdef, self.roots = kdef, roots
        self.params = {p.name.value for p in kdef.params.params}
        self.values: dict[str, cst.BaseExpression] = {}
        self.calls: dict[str, list[cst.Call]] = {k: [] for k in CALLS}
        self.sides: list[Side] = []
        self.allowed: set[int] = set()  # ids of the nodes that may read the coordinates and Bs
        self._shapes: dict[str, tuple[int, dict[str, int]]] = {}
        self.divisor: cst.BaseExpression = cst.Integer("1")  # D of pid // D and pid % D
        self._splits: set[str] = set()  # the codes of the split's (pid, D)

    def tl(self, n: cst.Call) -> str:
        parts = dotted(n.func).split(".")
        return parts[-1] if len(parts) > 1 and parts[0] in self.roots else ""

    def statements(self) -> None:
        body = self.kdef.body.body if isinstance(self.kdef.body, cst.IndentedBlock) else ()
        for st in body:
            if not isinstance(st, cst.SimpleStatementLine):
                raise Unfit(
                    f"a {type(st).__name__.lower()} statement at `{code(st).splitlines()[0]}`"
                )
            for small in st.body:
                if isinstance(small, cst.Expr | cst.Pass):
                    continue
                if not (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                ):
                    raise Unfit(f"a `{code(small)}` statement (a pure copy assigns names only)")
                name = small.targets[0].target.value
                if name in self.values or name in self.params:
                    raise Unfit(f"`{name}` is assigned more than once")
                self.values[name] = small.value
        for n in walk(self.kdef.body):
            if isinstance(n, cst.Lambda | cst.IfExp | cst.ListComp | cst.GeneratorExp):
                raise Unfit(f"`{code(n)}`")
            if not isinstance(n, cst.Call):
                continue
            last = self.tl(n)
            if last in CALLS:
                self.calls[last].append(n)
            elif not (isinstance(n.func, cst.Attribute) and n.func.attr.value == "to" and not last):
                raise Unfit(
                    f"`{code(n)}`: a pure copy calls only tl.program_id, tl.arange, tl.cdiv, "
                    "tl.load, tl.store, tl.trans and .to"
                )
        loads, stores = self.calls["load"], self.calls["store"]
        if len(loads) != 1 or len(stores) != 1:
            raise Unfit(
                f"{len(loads)} loads and {len(stores)} stores (a pure copy has one of each)"
            )
        value = argument(stores[0], 1, "value")
        for _ in range(32):
            if value is loads[0]:
                return
            if isinstance(value, cst.Name) and value.value in self.values:
                value = self.values[value.value]
            elif isinstance(value, cst.Call) and self.tl(value) == "trans" and value.args:
                value = value.args[0].value
            elif isinstance(value, cst.Call) and stripped(value) is not value:
                value = stripped(value)
            else:
                break
        raise Unfit(
            f"`{code(stores[0])}`: the stored value is not the loaded one (not a pure copy)"
        )

    def resolve(self, e: cst.BaseExpression) -> cst.BaseExpression:
        for _ in range(16):
            if not (isinstance(e, cst.Name) and e.value in self.values):
                break
            e = self.values[e.value]
        return e

    def find_sides(self) -> None:
        aranges = self.calls["arange"]
        if len(aranges) != 2:
            raise Unfit(f"{len(aranges)} tl.arange calls: a 2-D tile has one a side")
        consts = constexprs(self.kdef)
        for ar in aranges:
            args = [a.value for a in ar.args]
            if not (
                len(args) == 2
                and isinstance(args[0], cst.Integer)
                and args[0].value == "0"
                and isinstance(args[1], cst.Name)
                and args[1].value in consts
            ):
                raise Unfit(
                    f"`{code(ar)}`: a side is not tl.arange(0, B) of a constexpr parameter B"
                )
            block = args[1].value
            index = next((k for k, v in self.values.items() if ar in _addends(v)), "")
            v = self.values.get(index)
            scaled = next((x for x in _addends(v) if x is not ar), None) if v is not None else None
            c = _times(scaled, block) if scaled is not None and len(_addends(v)) == 2 else None
            if c is None:
                raise Unfit(
                    f"`{code(ar)}`: the side is not `r = c * {block} + {code(ar)}` (c the program's coordinate)"
                )
            coord = self.coordinate(c)
            assert scaled is not None
            self.allowed |= {id(x) for x in walk(scaled)} | {id(x) for x in walk(ar)}
            self.sides.append(Side(index, block, coord))
        a, b = self.sides
        if a.block == b.block or a.index == b.index:
            raise Unfit("the two sides share their block or their name")
        if {a.coord, b.coord} not in ({"div", "mod"}, {"axis0", "axis1"}):
            raise Unfit(
                f"the sides' coordinates are {a.coord} and {b.coord}: not pid // D and pid % D, "
                "nor tl.program_id(0) and tl.program_id(1)"
            )
        if len(self._splits) > 1:
            raise Unfit(f"the program id split two ways ({', '.join(sorted(self._splits))})")
        guarded = {a.block, b.block}
        for n in walk(self.kdef.body):
            reads = _is_pid(n) or (isinstance(n, cst.Name) and n.value in guarded)
            if reads and id(n) not in self.allowed:
                raise Unfit(
                    f"`{code(n)}` is read besides the sides' `c * B` (the program's coordinates "
                    "and the blocks change with the tile)"
                )
        targets = {
            id(t.target)
            for n in walk(self.kdef.body)
            if isinstance(n, cst.Assign)
            for t in n.targets
        }
        guarded = {name for name, v in self.values.items() if id(v) in self.allowed}
        for n in walk(self.kdef.body):  # a name of a coordinate (or of D) read elsewhere
            if (
                isinstance(n, cst.Name)
                and n.value in guarded
                and id(n) not in self.allowed | targets
            ):
                raise Unfit(f"`{n.value}` is read besides the sides' `c * B`")

    def coordinate(self, c: cst.BaseExpression) -> str:
        """ "div"/"mod" (pid // D, pid % D), "axis0"/"axis1" (tl.program_id(a)); the nodes it
        reads through names join `allowed`."""
        seen = [c]
        e = c
        for _ in range(16):
            if not (isinstance(e, cst.Name) and e.value in self.values):
                break
            e = self.values[e.value]
            seen.append(e)
        kind = ""
        if _is_pid(e) and isinstance(e, cst.Call):
            arg = e.args[0].value if len(e.args) == 1 else None
            if isinstance(arg, cst.Integer) and arg.value in ("0", "1"):
                kind = f"axis{arg.value}"
        elif isinstance(e, cst.BinaryOperation) and isinstance(
            e.operator, cst.FloorDivide | cst.Modulo
        ):
            pid = self.resolve(e.left)
            if _is_pid(pid) and isinstance(pid, cst.Call) and code(pid.args[0].value) == "0":
                kind = "div" if isinstance(e.operator, cst.FloorDivide) else "mod"
                self.divisor = e.right
                self._splits.add(f"{code(pid)} by {code(self.resolve(e.right))}")
                seen += [e.left, pid, e.right, self.resolve(e.right)]
        if not kind:
            raise Unfit(
                f"`{code(c)}`: not a program coordinate (tl.program_id(a), pid // D or pid % D)"
            )
        for x in seen:
            self.allowed |= {id(y) for y in walk(x)}
        return kind

    def shape(self, e: cst.BaseExpression) -> tuple[int, dict[str, int]]:
        """(rank, side index -> axis) of e; a vector's side is on axis 1 (where it broadcasts)."""
        sides = {s.index for s in self.sides}
        if isinstance(e, cst.Name):
            if e.value in sides:
                return 1, {e.value: 1}
            if e.value in self.values:
                if e.value not in self._shapes:
                    self._shapes[e.value] = self.shape(self.values[e.value])
                return self._shapes[e.value]
            return 0, {}
        if isinstance(e, cst.Integer | cst.Float | cst.SimpleString):
            return 0, {}
        if isinstance(e, cst.Attribute):
            if self.shape(e.value)[0]:
                raise Unfit(f"`{code(e)}`: an attribute of a vector or a tile")
            return 0, {}
        if isinstance(e, cst.Subscript):
            axis = vector_axis(e)
            rank, of = self.shape(e.value)
            if axis is None or rank == 2:
                raise Unfit(
                    f"indexing `{code(e)}` (only [:, None] and [None, :] of a vector make the tile)"
                )
            return 2, {k: axis for k in of}
        parts: list[cst.BaseExpression] = []
        if isinstance(e, cst.BinaryOperation):
            parts = [e.left, e.right]
        elif isinstance(e, cst.Comparison):
            parts = [e.left, *(c.comparator for c in e.comparisons)]
        elif isinstance(e, cst.UnaryOperation):
            parts = [e.expression]
        elif isinstance(e, cst.Call):
            last = self.tl(e)
            if last == "trans":
                if len(e.args) != 1:
                    raise Unfit(f"`{code(e)}`: tl.trans of other than one tile")
                rank, of = self.shape(e.args[0].value)
                if rank != 2:
                    raise Unfit(f"`{code(e)}`: tl.trans of a vector")
                return 2, {k: 1 - ax for k, ax in of.items()}
            if last == "arange":
                raise Unfit(f"`{code(e)}` outside the sides' `r = c * B + tl.arange(0, B)`")
            if not last:  # .to(...)
                assert isinstance(e.func, cst.Attribute)
                return self.shape(e.func.value)
            parts = [a.value for a in e.args]
        else:
            raise Unfit(f"`{code(e)}`: an expression the tile's shapes are not followed through")
        out: tuple[int, dict[str, int]] = (0, {})
        for p in parts:
            out = _merge(out, self.shape(p), e)
        return out


def _merge(
    a: tuple[int, dict[str, int]], b: tuple[int, dict[str, int]], at: cst.CSTNode
) -> tuple[int, dict[str, int]]:
    if not a[0] or not b[0]:
        return b if not a[0] else a
    if a[0] == b[0] == 1:
        if a[1] != b[1]:
            raise Unfit(
                f"`{code(at)}`: the two sides' vectors combined without [:, None] / [None, :] "
                "(how they pair changes with the tile)"
            )
        return a
    out = dict(a[1])
    for k, ax in b[1].items():
        if out.get(k, ax) != ax:
            raise Unfit(f"`{code(at)}`: side {k} on both axes of the tile")
        out[k] = ax
    if len(set(out.values())) != len(out):
        raise Unfit(f"`{code(at)}`: both sides on one axis of the tile")
    return 2, out


def argument(call: cst.Call, pos: int, key: str) -> cst.BaseExpression | None:
    """The call's argument at position pos or keyword key."""
    for i, a in enumerate(call.args):
        if (a.keyword and a.keyword.value == key) or (a.keyword is None and i == pos):
            return a.value
    return None


def _addends(e: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
        return _addends(e.left) + _addends(e.right)
    return [e] if e is not None else []


def _times(e: cst.BaseExpression, block: str) -> cst.BaseExpression | None:
    """c of `c * block` or `block * c`, None for anything else."""
    if not (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply)):
        return None
    for mine, other in ((e.right, e.left), (e.left, e.right)):
        if isinstance(mine, cst.Name) and mine.value == block:
            return other
    return None

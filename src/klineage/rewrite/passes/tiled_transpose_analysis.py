"""tiled_transpose's analysis (not a pass): a file's one-line-per-program transposes and whether
each can become a 2-D tile a program (rewrite/passes/tiled_transpose.py says what is
rewritten). It reuses multi_row_analysis's launch checks (analyse_launches, launch_problem).

What makes a site, read from the structure and never from names:
- the grid is a literal 1-tuple `(G,)`; the program id (axis 0) is the program's index p, or
  is split into a batch and an index by `pid // D` and `pid % D` (D a kernel parameter, the
  grid `(X * D,)`, the pid used nowhere else);
- one lane block `tl.arange(0, B)` (B a constexpr used nowhere else) is the program's lanes q:
  either alone, with every load and store masked by `lane < bound` and the launch's B
  `next_power_of_2(bound)` (so the block covers [0, bound)), or offset by the variable of one
  top-level `for s in range(0, S, B)` loop that holds the load and the store, both masked by
  `s + lane < S` (so the chunks cover [0, S) at any B);
- the kernel is a pure copy: straight-line assignments to names (each assigned once), one
  tl.load, one tl.store whose value is the loaded value (maybe through `.to(...)`), and no
  other calls than tl.program_id(0), tl.arange, tl.load, tl.store and `.to(...)`;
- both addresses are `pointer parameter + offsets linear in p and q` (coefficients products of
  parameters; the batch index may enter the offsets too), from two different parameters, and
  they are a transpose: the load is unit-stride along one of p and q and the store along the
  other (a copy contiguous along the same index on both sides is coalesced already).

Anything else is not proven and `problem` says why. No rewriting here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.multi_row_analysis import Launched, analyse_launches, launch_problem
from klineage.rewrite.passes.rows_per_program import Ctx, Launch, bind, code, constexprs, same, walk

RANGES = {"range", "tl.range", "triton.language.range"}
# A linear form: atom -> the monomials of its coefficient (each a sorted tuple of parameter
# names or literals; () is 1). Atoms: "p" the program's index, "q" the lane, "s" the loop's
# chunk start, "b" the batch, "1" the part that depends on none of them.
Lin = dict[str, list[tuple[str, ...]]]
UNIT: list[tuple[str, ...]] = [()]


@dataclass
class Analysis(Launched):
    # block: the launch's value of the lane block B
    count: str = ""  # the launch's extent of p (the grid's G, or D's value when batched)
    lanes: str = ""  # the launch's extent of q (the mask's bound, or the loop's stop S)
    batches: str = ""  # the grid's X of (X * D,) when the program id is split ("" if not)
    lane_block: str = ""  # the kernel's constexpr B
    divisor: str = ""  # D (batched)
    p_is_row: bool = False  # p is the source's row (its load stride is not unit), q its column
    loop: cst.For | None = None
    split: dict[int, str] = field(default_factory=dict)  # id of pid // D, pid % D -> "b", "p"
    pid_assign: int = 0  # id of the `pid = tl.program_id(0)` Assign (batched), 0 if none


def _is_pid(e: cst.CSTNode) -> bool:
    return isinstance(e, cst.Call) and dotted(e.func).endswith("program_id")


def _mul(a: list[tuple[str, ...]], b: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return sorted(tuple(sorted(x + y)) for x in a for y in b)


class _Kernel:
    """The checks on one kernel; each returns why it is not a site, or None."""

    def __init__(self, kdef: cst.FunctionDef, roots: set[str]) -> None:
        self.kdef = kdef
        self.roots = roots
        self.params = {p.name.value for p in kdef.params.params}
        self.values: dict[str, cst.BaseExpression] = {}  # name -> its one assigned value
        self.loop: cst.For | None = None
        self.split: dict[int, str] = {}
        self.pid_assign = 0  # id of the `pid = tl.program_id(0)` Assign of a split pid
        self.divisor = ""
        self.loads: list[cst.Call] = []
        self.stores: list[cst.Call] = []
        self.aranges: list[cst.Call] = []

    def body(self) -> list[cst.BaseStatement]:
        return list(self.kdef.body.body) if isinstance(self.kdef.body, cst.IndentedBlock) else []

    def statements(self) -> str | None:
        body = self.body()
        for i, st in enumerate(body):
            if isinstance(st, cst.For):
                if self.loop is not None:
                    return "two loops (one loop over lane chunks is followed)"
                if i != len(body) - 1:
                    return f"statements after the loop `{code(st).splitlines()[0]}`"
                if st.orelse is not None or st.asynchronous is not None:
                    return f"`{code(st).splitlines()[0]}`: a loop with an else clause"
                if not isinstance(st.target, cst.Name):
                    return f"`for {code(st.target)} in ...`: only a plain loop variable is followed"
                self.loop = st
                assert isinstance(st.body, cst.IndentedBlock)
                for s in st.body.body:
                    if not isinstance(s, cst.SimpleStatementLine):
                        return f"a nested {type(s).__name__.lower()} statement in the loop"
                    why = self._small(s)
                    if why:
                        return why
            elif isinstance(st, cst.SimpleStatementLine):
                why = self._small(st)
                if why:
                    return why
            else:
                return f"a {type(st).__name__.lower()} statement at `{code(st).splitlines()[0]}`"
        return None

    def _small(self, st: cst.SimpleStatementLine) -> str | None:
        for small in st.body:
            if isinstance(small, cst.Expr | cst.Pass):
                continue
            if not isinstance(small, cst.Assign):
                return f"a `{code(small)}` statement (a pure copy assigns names only)"
            if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
                return f"an assignment to `{code(small.targets[0].target)}` (only one plain name is followed)"
            name = small.targets[0].target.value
            if name in self.values or name in self.params:
                return f"`{name}` is assigned more than once"
            self.values[name] = small.value
        return None

    def calls(self) -> str | None:
        header = id(self.loop.iter) if self.loop is not None else 0
        for n in walk(self.kdef.body):
            if isinstance(n, cst.Subscript):
                return f"indexing `{code(n)}` (a 2-D tile already?)"
            if isinstance(n, cst.Lambda | cst.IfExp | cst.ListComp | cst.GeneratorExp):
                return f"`{code(n)}`"
            if not isinstance(n, cst.Call) or id(n) == header:
                continue
            parts = dotted(n.func).split(".")
            last = n.func.attr.value if isinstance(n.func, cst.Attribute) else parts[-1]
            if parts[0] not in self.roots:
                if isinstance(n.func, cst.Attribute) and last == "to":
                    continue
                return f"`{code(n)}`: a pure copy calls only tl.program_id, tl.arange, tl.load, tl.store and .to"
            if last == "program_id":
                a = n.args[0].value if len(n.args) == 1 else None
                if not (isinstance(a, cst.Integer) and a.value == "0"):
                    return f"{code(n)}: a program id other than axis 0"
            elif last == "arange":
                self.aranges.append(n)
            elif last == "load":
                self.loads.append(n)
            elif last == "store":
                self.stores.append(n)
            else:
                return f"{dotted(n.func)}: a pure copy calls only tl.program_id, tl.arange, tl.load, tl.store and .to"
        return None

    def lanes(self) -> str | None:
        """One tl.arange(0, B), B a constexpr used nowhere else (but the loop's step)."""
        if len(self.aranges) != 1:
            return f"{len(self.aranges)} lane blocks (tl.arange); one is tiled"
        (ar,) = self.aranges
        args = [a.value for a in ar.args]
        if not (
            len(args) == 2
            and all(a.keyword is None for a in ar.args)
            and isinstance(args[0], cst.Integer)
            and args[0].value == "0"
            and isinstance(args[1], cst.Name)
            and args[1].value in constexprs(self.kdef)
        ):
            return f"`{code(ar)}`: the lanes are not tl.arange(0, B) of a constexpr parameter B"
        block = args[1].value
        allowed = {id(args[1])}
        if self.loop is not None and isinstance(self.loop.iter, cst.Call):
            allowed |= {id(a.value) for a in self.loop.iter.args[2:3]}  # the step
        for x in walk(self.kdef.body):
            if isinstance(x, cst.Name) and x.value == block and id(x) not in allowed:
                return f"{block} is used besides `{code(ar)}` (its value changes to the tile's)"
        return None

    def block(self) -> str:
        b = self.aranges[0].args[1].value
        assert isinstance(b, cst.Name)
        return b.value

    def loop_stop(self) -> tuple[str | None, str]:
        """Why the loop is not `for s in range(0, S, B)` over the lane chunks, and its S."""
        assert self.loop is not None
        it = self.loop.iter
        args = it.args if isinstance(it, cst.Call) else ()
        head = f"`for ... in {code(it)}`"
        if not (isinstance(it, cst.Call) and dotted(it.func) in RANGES and len(args) == 3):
            return f"{head}: only range(0, S, B) loops over lane chunks are followed", ""
        start, stop, step = (a.value for a in args)
        if any(a.keyword is not None for a in args) or not (
            isinstance(start, cst.Integer) and start.value == "0"
        ):
            return f"{head}: the loop does not start at 0", ""
        if not (isinstance(step, cst.Name) and step.value == self.block()):
            return f"{head}: the step is not the lane block {self.block()}", ""
        if not (
            isinstance(stop, cst.Integer)
            or (isinstance(stop, cst.Name) and stop.value in self.params)
        ):
            return f"{head}: the stop is not a parameter or a literal", ""
        loop_body = walk(self.loop.body)
        if not any(x is self.loads[0] for x in loop_body) or not any(
            x is self.stores[0] for x in loop_body
        ):
            return f"{head}: the load and the store are not in the loop", ""
        target = self.loop.target
        assert isinstance(target, cst.Name)
        if target.value in self.values or target.value in self.params:
            return f"the loop variable {target.value} is assigned elsewhere", ""
        return None, code(stop)

    def program_split(self) -> str | None:
        """Find `pid // D` and `pid % D`: the program id split into a batch and an index."""
        pids = {n for n, v in self.values.items() if _is_pid(v)}
        found: dict[str, list[cst.BinaryOperation]] = {"b": [], "p": []}
        for n in walk(self.kdef.body):
            if isinstance(n, cst.BinaryOperation) and isinstance(
                n.operator, cst.FloorDivide | cst.Modulo
            ):
                left = n.left
                if _is_pid(left) or (isinstance(left, cst.Name) and left.value in pids):
                    found["b" if isinstance(n.operator, cst.FloorDivide) else "p"].append(n)
        if not found["b"] and not found["p"]:
            return None
        if len(found["b"]) != 1 or len(found["p"]) != 1:
            return "the program id is divided other than once by // D and once by % D"
        div, mod = found["b"][0], found["p"][0]
        if not (
            isinstance(div.right, cst.Name)
            and isinstance(mod.right, cst.Name)
            and div.right.value == mod.right.value
            and div.right.value in self.params
        ):
            return f"`{code(div)}` and `{code(mod)}`: not one parameter D for // D and % D"
        if code(div.left) != code(mod.left):
            return f"`{code(div)}` and `{code(mod)}` split different program ids"
        allowed = {id(x) for x in walk(div) + walk(mod)}
        name = div.left.value if isinstance(div.left, cst.Name) else ""
        if name:
            assign = next(
                s
                for s in walk(self.kdef.body)
                if isinstance(s, cst.Assign) and s.value is self.values[name]
            )
            allowed |= {id(x) for x in walk(assign)}
            self.pid_assign = id(assign)
        for x in walk(self.kdef.body):
            if id(x) not in allowed and (
                _is_pid(x) or (name and isinstance(x, cst.Name) and x.value == name)
            ):
                return "the program id is used besides its split `// D` and `% D`"
        self.split = {id(div): "b", id(mod): "p"}
        self.divisor = div.right.value
        return None

    def lin(self, e: cst.BaseExpression, depth: int = 0) -> Lin | None:
        """e as a linear form in p, q, s and b, None when it is not one."""
        if depth > 32:
            return None
        if isinstance(e, cst.BinaryOperation):
            kind = self.split.get(id(e))
            if kind:
                return {kind: UNIT}
            left, right = self.lin(e.left, depth + 1), self.lin(e.right, depth + 1)
            if left is None or right is None:
                return None
            if isinstance(e.operator, cst.Add):
                return {k: sorted(left.get(k, []) + right.get(k, [])) for k in {*left, *right}}
            if isinstance(e.operator, cst.Multiply):
                if set(left) == {"1"}:
                    left, right = right, left
                if set(right) == {"1"}:
                    return {k: _mul(v, right["1"]) for k, v in left.items()}
            return None
        if isinstance(e, cst.Integer):
            return {"1": UNIT if e.value == "1" else [(e.value,)]}
        if isinstance(e, cst.Name):
            if (
                self.loop is not None
                and isinstance(self.loop.target, cst.Name)
                and e.value == self.loop.target.value
            ):
                return {"s": UNIT}
            if e.value in self.values:
                return self.lin(self.values[e.value], depth + 1)
            return {"1": [(e.value,)]} if e.value in self.params else None
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute):
            if e.func.attr.value == "to":
                return self.lin(e.func.value, depth + 1)
            if _is_pid(e) and not self.split:
                return {"p": UNIT}
            if any(e is a for a in self.aranges):
                return {"q": UNIT}
        return None

    def conjuncts(self, e: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression]:
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.BitAnd):
            return self.conjuncts(e.left, depth + 1) + self.conjuncts(e.right, depth + 1)
        if isinstance(e, cst.Name) and e.value in self.values and depth < 32:
            return self.conjuncts(self.values[e.value], depth + 1)
        return [e]

    def lane_bounds(self, call: cst.Call, pos: int) -> set[str]:
        """The bounds (parameters or literals) of the call's mask conjuncts `lane < bound`,
        the lane the arange alone, or the loop's start plus the arange."""
        lane = {"q": UNIT, "s": UNIT} if self.loop is not None else {"q": UNIT}
        mask = next(
            (
                a.value
                for i, a in enumerate(call.args)
                if (a.keyword and a.keyword.value == "mask") or (a.keyword is None and i == pos)
            ),
            None,
        )
        out: set[str] = set()
        for c in self.conjuncts(mask) if mask is not None else []:
            if not (
                isinstance(c, cst.Comparison)
                and len(c.comparisons) == 1
                and isinstance(c.comparisons[0].operator, cst.LessThan)
            ):
                continue
            bound = c.comparisons[0].comparator
            if (
                isinstance(bound, cst.Integer)
                or (isinstance(bound, cst.Name) and bound.value in self.params)
            ) and self.lin(c.left) == lane:
                out.add(code(bound))
        return out

    def copy(self) -> str | None:
        """One load, one store of the loaded value (through names and .to casts)."""
        if len(self.loads) != 1 or len(self.stores) != 1:
            return f"{len(self.loads)} loads and {len(self.stores)} stores (a pure copy has one of each)"
        store = self.stores[0]
        value = next(
            (
                a.value
                for i, a in enumerate(store.args)
                if (a.keyword and a.keyword.value == "value") or (a.keyword is None and i == 1)
            ),
            None,
        )
        depth = 0
        while value is not None and depth < 32:
            depth += 1
            if value is self.loads[0]:
                return None
            if isinstance(value, cst.Name) and value.value in self.values:
                value = self.values[value.value]
            elif (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "to"
            ):
                value = value.func.value
            else:
                break
        return f"`{code(store)}`: the stored value is not the loaded one (not a pure copy)"

    def addresses(self) -> tuple[str | None, bool]:
        """Why the load and store are not a transpose, and whether p is the source's row."""
        forms: list[Lin] = []
        bases: list[str] = []
        for call in (self.loads[0], self.stores[0]):
            ptr = call.args[0].value if call.args and call.args[0].keyword is None else None
            f = self.lin(ptr) if ptr is not None else None
            why = f"`{code(call)}`: the address is not a parameter plus offsets linear in the program's index and its lanes"
            if f is None or not set(f) <= {"p", "q", "s", "b", "1"}:
                return why, False
            if len(f.get("1", [])) != 1 or len(f["1"][0]) != 1 or f["1"][0][0] not in self.params:
                return why, False
            if "p" not in f or "q" not in f:
                return (
                    f"`{code(call)}`: the address does not move with both the program's index and its lanes",
                    False,
                )
            if self.loop is not None and f.get("s", []) != f["q"]:
                return (
                    f"`{code(call)}`: the loop's start and the lanes enter the address with different strides",
                    False,
                )
            forms.append(f)
            bases.append(f["1"][0][0])
        if bases[0] == bases[1]:
            return (
                f"the load and the store both address {bases[0]} (an in-place transpose races)",
                False,
            )
        load, store = forms
        for k, other in (("p", "q"), ("q", "p")):
            if (
                load[k] == UNIT
                and store[other] == UNIT
                and load[other] != UNIT
                and store[k] != UNIT
            ):
                return None, k == "q"
        return (
            "the load and the store are not contiguous along different indices (not a transpose; "
            "a copy contiguous along one index on both sides is coalesced already)",
            False,
        )


def analyse(source: str) -> tuple[Ctx, list[Analysis]]:
    return analyse_launches(source, Analysis, _problem)


def _problem(
    ctx: Ctx, la: Launch, kdef: cst.FunctionDef, roots: set[str], count: int, a: Analysis
) -> str:
    unfit, grid = launch_problem(ctx, la, kdef, count, "n_programs")
    if unfit:
        return unfit
    k = _Kernel(kdef, roots)
    why = k.statements() or k.calls() or k.copy() or k.lanes() or k.program_split()
    if why:
        return why
    if not any(_is_pid(n) for n in walk(kdef.body)):
        return f"{la.kernel} does not read tl.program_id(0)"
    args = bind(la.call, kdef)
    a.lane_block = k.block()
    if a.lane_block not in args:
        return f"the launch does not pass {a.lane_block}"
    a.block = code(args[a.lane_block])
    stop = ""
    if k.loop is not None:
        why, stop = k.loop_stop()
        if why:
            return why
    why, a.p_is_row = k.addresses()
    if why:
        return why
    bounds = k.lane_bounds(k.loads[0], 1) & k.lane_bounds(k.stores[0], 2)
    if k.loop is not None:
        # B changes to the tile's side: the lanes must not reach past S at any B
        if stop not in bounds:
            return (
                f"the load and the store are not both masked by `lane < {stop}` (the loop's "
                "stop): the chunks would cover other lanes at another chunk size"
            )
        a.lanes = code(args[stop]) if stop in args else stop if stop not in k.params else ""
        if not a.lanes:
            return f"the launch does not pass {stop}"
    else:
        of = _pow2_of(args[a.lane_block])
        covered = [b for b in sorted(bounds) if b in args and of and same(of, code(args[b]))]
        if not covered:
            return (
                "the lanes are not shown to cover [0, bound): the load and the store are not "
                f"both masked by `lane < bound` with {a.lane_block} = next_power_of_2(bound) "
                "at the launch"
            )
        a.lanes = code(args[covered[0]])
    a.loop = k.loop
    if k.split:
        d = k.divisor
        if d not in args:
            return f"the launch does not pass {d}"
        a.divisor, a.count, a.split, a.pid_assign = d, code(args[d]), k.split, k.pid_assign
        a.batches = _batches(grid, a.count)
        if not a.batches:
            return f"grid `({grid},)` is not (batches * {a.count},) for the program id split by // {d} and % {d}"
    else:
        a.count = grid
    return ""


def _pow2_of(e: cst.BaseExpression) -> str:
    """x of a `next_power_of_2(x)` call (any module alias), "" for anything else."""
    if isinstance(e, cst.Call) and dotted(e.func).endswith("next_power_of_2") and len(e.args) == 1:
        return code(e.args[0].value)
    return ""


def _batches(grid: str, count: str) -> str:
    """X of a grid count `X * count` or `count * X`, "" for anything else."""
    g = cst.parse_expression(grid)
    if isinstance(g, cst.BinaryOperation) and isinstance(g.operator, cst.Multiply):
        if same(code(g.right), count):
            return code(g.left)
        if same(code(g.left), count):
            return code(g.right)
    return ""

"""split_scan's checks on what a scan kernel reads and writes (not a pass; split_scan_analysis.py
runs them): that splitting its loop into segments run by concurrent programs changes no value
any load sees and no address's last write.

The segments of one row run in no fixed order, and the totals kernel reads the inputs before
the scan kernel writes anything, so both must hold, read from the structure:
- every store is inside the loop (split_scan_analysis checks that) and writes, at the step
  whose loop value is v, the addresses `base + c ± v ± tl.arange(0, W)`: the pointer, its
  names inlined through single assignments (and int64 casts), is a sum of exactly one `v` and
  one `tl.arange(0, W)` (each added or subtracted once), W the loop's STEP (the same constexpr
  parameter, or literals with W <= STEP), and terms c that are scalars fixed for the program
  (parameters never reassigned, literals, tl.program_id(0), casts, arithmetic of these and of
  names assigned once before the loop from them). A step's addresses then lie in a window of
  W <= STEP consecutive elements that moves by STEP each step: no two steps write one address,
  so no write's order across segments matters. Stores through one base parameter all use one
  offset (two stores at different offsets could overlap across steps);
- each store's base is one parameter that receives a tensor the launcher allocates
  uninitialised (torch.empty, empty_like, new_empty) for this launch: passed to it once, used
  before it only for its shape, strides or device, and the launch in no loop of its launcher;
  that parameter (and what is computed from it) is used for nothing but store pointers (its
  `.dtype` aside): no load reads what the kernel writes, and no other argument aliases it.

Anything else is not proven, and `problem` / `launcher` say why.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.rows_per_program import (
    Ctx,
    Launch,
    bind,
    code,
    names_in,
    walk,
)
from klineage.rewrite.passes.split_checks import allocated, early_use, launched_in_loop
from klineage.rewrite.passes.split_k_reduction import is_zero
from klineage.rewrite.passes.split_k_store import arg, smalls, targets, uses


@dataclass
class _Once:
    value: cst.BaseExpression
    in_loop: bool


def _int64(e: cst.BaseExpression) -> cst.BaseExpression | None:
    """x for `x.to(tl.int64)` (a cast that keeps an index's value), else None."""
    if (
        isinstance(e, cst.Call)
        and isinstance(e.func, cst.Attribute)
        and e.func.attr.value == "to"
        and len(e.args) == 1
        and dotted(e.args[0].value).split(".")[-1] == "int64"
    ):
        return e.func.value
    return None


class Memory:
    """The loads and stores of a kernel whose one top-level loop is `for var in range(0, K,
    step)`; `pre` and `inner` are the statements before the loop and in its body."""

    def __init__(
        self,
        kdef: cst.FunctionDef,
        roots: set[str],
        var: str,
        step: str,
        pre: list[cst.BaseStatement],
        inner: list[cst.BaseStatement],
    ) -> None:
        self.kdef, self.roots, self.var, self.step = kdef, roots, var, step
        self.params = [p.name.value for p in kdef.params.params]
        everywhere = smalls(pre) + smalls(inner)
        counts: dict[str, int] = {}
        for s in everywhere:
            for t in targets(s):
                counts[t] = counts.get(t, 0) + (2 if isinstance(s, cst.AugAssign) else 1)
        self.assigned = {t for n in walk(kdef.body) for t in targets(n)}
        loop_ids = {id(s) for s in smalls(inner)}
        self.once = {
            t: _Once(s.value, id(s) in loop_ids)
            for s in everywhere
            if isinstance(s, cst.Assign)
            for t in targets(s)
            if counts[t] == 1 and t not in self.params
        }
        self.stores = [
            n
            for st in inner
            for n in walk(st)
            if isinstance(n, cst.Call) and self._tl(n) == "store"
        ]
        self.candidates: list[set[str]] = []  # per store: the parameters its base may be
        self.offsets: list[str] = []  # per store: its offset's terms, the base's aside
        self.bases: list[str] = []  # per store: its base parameter (launcher)

    def _tl(self, n: cst.Call) -> str:
        """The tl function n calls ("" for anything else)."""
        parts = dotted(n.func).split(".")
        return parts[-1] if parts[0] in self.roots else ""

    def _invariant(self, e: cst.CSTNode, seen: frozenset[str] = frozenset()) -> set[str] | None:
        """The parameters e reads if it is a scalar fixed for the program (None if not)."""
        for n in walk(e):
            if isinstance(n, cst.Call):
                method = isinstance(n.func, cst.Attribute) and n.func.attr.value == "to"
                if not (self._tl(n) == "program_id" or (method and not self._tl(n))):
                    return None
            elif isinstance(n, cst.Subscript | cst.Lambda | cst.NamedExpr | cst.IfExp):
                return None
        found: set[str] = set()
        for name in names_in(e):
            if name in self.roots:
                continue
            if name in self.params and name not in self.assigned:
                found.add(name)
                continue
            once = self.once.get(name)
            if once is None or once.in_loop or name in seen:
                return None
            sub = self._invariant(once.value, seen | {name})
            if sub is None:
                return None
            found |= sub
        return found

    def _terms(
        self,
        e: cst.BaseExpression,
        sign: int,
        out: list[tuple[int, cst.BaseExpression]],
        seen: frozenset[str],
    ) -> None:
        """e as a signed sum of terms, names assigned once inlined, int64 casts dropped."""
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add | cst.Subtract):
            self._terms(e.left, sign, out, seen)
            flip = -1 if isinstance(e.operator, cst.Subtract) else 1
            self._terms(e.right, sign * flip, out, seen)
        elif isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
            self._terms(e.expression, -sign, out, seen)
        elif isinstance(e, cst.Name) and e.value in self.once and e.value not in seen:
            self._terms(self.once[e.value].value, sign, out, seen | {e.value})
        elif (inner := _int64(e)) is not None:
            self._terms(inner, sign, out, seen)
        else:
            out.append((sign, e))

    def _window(self, e: cst.BaseExpression) -> bool:
        """e is tl.arange(0, W), W the loop's STEP or a literal no wider."""
        if not (isinstance(e, cst.Call) and self._tl(e) == "arange" and len(e.args) == 2):
            return False
        lo, w = (x.value for x in e.args)
        if not (isinstance(lo, cst.Integer) and is_zero(lo)) or any(x.keyword for x in e.args):
            return False
        if isinstance(w, cst.Name):
            return w.value == self.step
        return (
            isinstance(w, cst.Integer) and self.step.isdigit() and int(w.value, 0) <= int(self.step)
        )

    def problem(self) -> str | None:
        shape = f"base + c ± {self.var} ± tl.arange(0, {self.step})"
        for store in self.stores:
            ptr = arg(store, 0, "pointer")
            if ptr is None:
                return f"`{code(store)}`: a store without a pointer"
            terms: list[tuple[int, cst.BaseExpression]] = []
            self._terms(ptr, 1, terms, frozenset())
            steps = [t for _, t in terms if isinstance(t, cst.Name) and t.value == self.var]
            windows = [t for _, t in terms if self._window(t)]
            params: set[str] = set()
            rest: list[str] = []
            for sign, t in terms:
                if any(t is x for x in steps + windows):
                    continue
                found = self._invariant(t)
                if found is None:
                    return f"`{code(store)}`: the store's pointer is not {shape} with c fixed for the program (`{code(t)}`), so the steps' addresses are not shown to be apart"
                params |= found
                rest.append(("-" if sign < 0 else "+") + code(t))
            if len(steps) != 1 or len(windows) != 1:
                return f"`{code(store)}`: the store's pointer is not {shape} ({len(steps)} `{self.var}` and {len(windows)} tl.arange(0, {self.step}) terms), so the steps' addresses are not shown to be apart"
            signs = [s for s, t in terms if t is steps[0] or t is windows[0]]
            self.candidates.append(params)
            self.offsets.append(" ".join(sorted(rest)) + f" {signs}")
        return None

    def launcher(self, ctx: Ctx, la: Launch, torch: str) -> tuple[str, str]:
        """Why a store's base is not a tensor allocated for this launch alone, or a load may read
        what the kernel writes ("" if neither), and the first store's base tensor."""
        args = bind(la.call, self.kdef)
        fresh = {
            p
            for p in set().union(*self.candidates)
            if isinstance(v := args.get(p), cst.Name) and allocated(la.func, v.value, torch)
        }
        offsets: dict[str, str] = {}
        for store, cands, offset in zip(self.stores, self.candidates, self.offsets, strict=True):
            bases = sorted(cands & fresh)
            if len(bases) != 1:
                return (
                    f"`{code(store)}`: the store's pointer is built from {', '.join(sorted(cands)) or 'no parameter'}, "
                    f"{'several' if bases else 'none'} of them a tensor the launcher allocates uninitialised "
                    "(torch.empty, empty_like, new_empty) for this launch alone"
                ), ""
            base = bases[0]
            if offsets.setdefault(base, offset) != offset:
                return (
                    f"`{code(store)}`: two stores through {base} at different offsets (their steps' windows may overlap)",
                    "",
                )
            self.bases.append(base)
        why = self._uses(set(offsets))
        if why:
            return why, ""
        for base in offsets:
            value = args[base]
            assert isinstance(value, cst.Name)
            why = self._alone(ctx, la, value.value, value)
            if why:
                return why, ""
        first = args[self.bases[0]]
        assert isinstance(first, cst.Name)
        return "", first.value

    def _uses(self, bases: set[str]) -> str | None:
        """Why a base parameter may reach anything but store pointers (None: it cannot)."""
        reach = set(bases)
        changed = True
        while changed:
            changed = False
            for n in walk(self.kdef.body):
                if (
                    isinstance(n, cst.Assign | cst.AugAssign | cst.AnnAssign)
                    and n.value is not None
                    and uses(n.value, reach)
                    and not set(targets(n)) <= reach
                ):
                    reach |= set(targets(n))
                    changed = True
        for n in walk(self.kdef.body):
            if not isinstance(n, cst.Call):
                continue
            ptr = arg(n, 0, "pointer") if self._tl(n) == "store" else None
            others = [x for x in n.args if x.value is not ptr]
            if any(uses(x.value, reach) for x in others) or (
                isinstance(n.func, cst.Attribute) and uses(n.func.value, reach)
            ):
                return f"`{code(n)}`: uses the output pointer {', '.join(sorted(bases))} but as a store's pointer (a load of what the kernel writes, in another order once split)"
        return None

    def _alone(self, ctx: Ctx, la: Launch, name: str, passed: cst.Name) -> str | None:
        """Why the output `name` may alias another argument or the launch may repeat."""
        if launched_in_loop(la):
            return "the launch is inside a loop of its launcher"
        line = early_use(ctx, la, name, passed)
        if line is not None:
            return f"`{name}` is used before the launch or passed to it twice (line {line}): another argument may alias the output"
        return None

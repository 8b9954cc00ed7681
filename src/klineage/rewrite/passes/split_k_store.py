"""split_k's checks on a kernel's one store (not a pass; split_k_analysis.py runs them): that
the stored value follows the K loop's accumulator through its chunks, so the chunks' values
combine into it, and which parameter brings the output pointer, used for nothing but that store.

For a sum, the value is linear in the accumulator, read from the structure: the accumulator
itself, a name assigned it once after the loop, tl.sum of it, -x, x * s, s * x and x / s with s
free of the accumulator, x indexed with None and `:` only, x.to(tl.float32). Anything else
(x + bias, tl.exp(x), tl.max(x), an inner cast to fp16) would not add up over chunks.

For a running maximum (minimum), the value is the accumulator itself, a name assigned it once
after the loop, x indexed with None and `:` only, x.to(tl.float32), or tl.max (tl.min) of x
over an axis: the maximum of the chunks' values is then the value. A scaled, negated or shifted
maximum is not (x * s is the maximum only for s >= 0, x + b is the chunks' maximum plus b).

In both, an outer `.to(...)` of the stored value is stripped by the rewrite (the partials are
fp32; the second kernel casts to the output's dtype).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from klineage.rewrite.base import dotted
from klineage.rewrite.passes.rows_per_program import assignments, code, walk

if TYPE_CHECKING:
    from klineage.rewrite.passes.split_k_reduction import Reduction

HINTS = {"multiple_of", "max_contiguous", "max_constancy"}  # pointer arithmetic, not a use
REDUCE_ARGS = {"axis", "keep_dims"}  # tl.max's and tl.min's arguments besides the value


def smalls(lines: list[cst.BaseStatement]) -> list[cst.BaseSmallStatement]:
    return [s for line in lines if isinstance(line, cst.SimpleStatementLine) for s in line.body]


def targets(st: cst.CSTNode) -> list[str]:
    if isinstance(st, cst.Assign):
        return [t.target.value for t in st.targets if isinstance(t.target, cst.Name)]
    if isinstance(st, cst.AugAssign | cst.AnnAssign) and isinstance(st.target, cst.Name):
        return [st.target.value]
    return []


def reads(node: cst.CSTNode, names: set[str]) -> bool:
    return any(isinstance(x, cst.Name) and x.value in names for x in walk(node))


def arg(call: cst.Call, pos: int, key: str) -> cst.BaseExpression | None:
    """The call's argument `key`, by keyword or at position pos."""
    for i, a in enumerate(call.args):
        if (a.keyword is not None and a.keyword.value == key) or (a.keyword is None and i == pos):
            return a.value
    return None


def fp32(e: cst.BaseExpression | None) -> bool:
    return e is not None and dotted(e).split(".")[-1] == "float32"


def _is_plain(s: cst.SubscriptElement) -> bool:
    """`:` or None: an index that only reshapes."""
    x = s.slice
    if isinstance(x, cst.Slice):
        return x.lower is None and x.upper is None and x.step is None
    return isinstance(x, cst.Index) and isinstance(x.value, cst.Name) and x.value.value == "None"


class _PointerUses(cst.CSTVisitor):
    """Names under a node, but not `p` in `p.dtype...` (the element type is no use of memory)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return not (node.attr.value == "dtype" and isinstance(node.value, cst.Name))

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def uses(node: cst.CSTNode, names: set[str]) -> bool:
    v = _PointerUses()
    node.visit(v)
    return bool(v.names & names)


class StoreCheck:
    """The checks on the kernel's store of the accumulator `acc` (after the K loop)."""

    def __init__(
        self,
        kdef: cst.FunctionDef,
        roots: set[str],
        acc: str,
        post: list[cst.BaseStatement],
        lines: list[cst.BaseSmallStatement],
        reduce: Reduction = "sum",
    ) -> None:
        self.kdef, self.roots, self.acc, self.lines = kdef, roots, acc, lines
        self.reduce = reduce
        self.readers = {acc}  # acc and the names after the loop computed from it
        changed = True
        while changed:
            found = {t for s in smalls(post) if reads(s, self.readers) for t in targets(s)}
            changed = not found <= self.readers
            self.readers |= found
        once = {k: v[0].value for k, v in assignments(kdef).items() if len(v) == 1}
        augmented = {t for s in walk(kdef.body) if isinstance(s, cst.AugAssign) for t in targets(s)}
        self.once = {k: v for k, v in once.items() if v is not None and k not in augmented}
        self.cast: cst.Call | None = None  # the stored value's outer `.to(...)`
        self.candidates: list[str] = []  # the parameters the store's pointer is built from

    def problem(self, store: cst.Call) -> str | None:
        ptr, value = arg(store, 0, "pointer"), arg(store, 1, "value")
        if ptr is None or value is None:
            return f"`{code(store)}`: a store without a pointer and a value"
        core = value
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "to"
            and dotted(value.func.value).split(".")[0] not in self.roots
        ):
            self.cast, core = value, value.func.value
        if self.reduce == "sum" and not self.linear(core, 0):
            return f"the stored value `{code(value)}` is not the accumulator summed, scaled or cast to fp32 (the chunks' values would not add up to it)"
        if self.reduce != "sum" and not self.extremum(core, 0):
            word = "maximum" if self.reduce == "max" else "minimum"
            return f"the stored value `{code(value)}` is not the running {word} itself or its tl.{self.reduce}, cast at most (a scaled or shifted {word} is not the {word} of the chunks' values)"
        for a in store.args:
            if a.value is not value and reads(a.value, self.readers):
                return f"`{code(a)}`: the store's pointer or mask reads the accumulator"
        params = [p.name.value for p in self.kdef.params.params]
        self.candidates = [p for p in params if uses(ptr, self.pointer_names(p))]
        return None

    def linear(self, e: cst.BaseExpression, depth: int) -> bool:
        """e is a linear function of the accumulator (a sum of its lanes, scaled)."""
        if depth > 16:
            return False
        if isinstance(e, cst.Name):
            v = self.once.get(e.value)
            return e.value == self.acc or (
                v is not None and e.value in self.readers and self.linear(v, depth + 1)
            )
        if isinstance(e, cst.Subscript):
            return all(_is_plain(s) for s in e.slice) and self.linear(e.value, depth + 1)
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
            return self.linear(e.expression, depth + 1)
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply | cst.Divide):
            if self.linear(e.left, depth + 1) and not reads(e.right, self.readers):
                return True
            return (
                isinstance(e.operator, cst.Multiply)
                and self.linear(e.right, depth + 1)
                and not reads(e.left, self.readers)
            )
        if not isinstance(e, cst.Call) or not e.args or not isinstance(e.func, cst.Attribute):
            return False
        if e.func.attr.value == "to" and dotted(e.func.value).split(".")[0] not in self.roots:
            # an inner cast keeps the sum only at fp32 (the outer one is stripped)
            return fp32(e.args[0].value) and self.linear(e.func.value, depth + 1)
        head = dotted(e.func).split(".")
        if head[0] in self.roots and head[-1] == "sum":
            rest = e.args[1:]
            return self.linear(e.args[0].value, depth + 1) and not any(
                reads(a.value, self.readers) for a in rest
            )
        return False

    def extremum(self, e: cst.BaseExpression, depth: int) -> bool:
        """e is the running maximum (minimum) reshaped, cast to fp32 or reduced by tl.max
        (tl.min) over an axis: the maximum (minimum) of its chunks' values."""
        if depth > 16:
            return False
        if isinstance(e, cst.Name):
            v = self.once.get(e.value)
            return e.value == self.acc or (
                v is not None and e.value in self.readers and self.extremum(v, depth + 1)
            )
        if isinstance(e, cst.Subscript):
            return all(_is_plain(s) for s in e.slice) and self.extremum(e.value, depth + 1)
        if not isinstance(e, cst.Call) or not e.args or not isinstance(e.func, cst.Attribute):
            return False
        if e.func.attr.value == "to" and dotted(e.func.value).split(".")[0] not in self.roots:
            return fp32(e.args[0].value) and self.extremum(e.func.value, depth + 1)
        head = dotted(e.func).split(".")
        rest = e.args[1:]
        return (
            head[0] in self.roots
            and head[-1] == self.reduce
            and e.args[0].keyword is None
            and self.extremum(e.args[0].value, depth + 1)
            and all(
                (a.keyword is None and i == 0)
                or (a.keyword is not None and a.keyword.value in REDUCE_ARGS)
                for i, a in enumerate(rest)
            )
            and not any(reads(a.value, self.readers) for a in rest)
        )

    def pointer_names(self, p: str) -> set[str]:
        """p and the names assigned, through any chain, a value that uses p as a pointer."""
        found = {p}
        changed = True
        while changed:
            changed = False
            for s in self.lines:
                if (
                    isinstance(s, cst.Assign | cst.AugAssign | cst.AnnAssign)
                    and s.value is not None
                    and uses(s.value, found)
                ):
                    for t in set(targets(s)) - found:
                        found.add(t)
                        changed = True
        return found

    def exclusive(self, p: str, store: cst.Call, header: cst.CSTNode) -> str | None:
        """Why the output pointer p has a use besides the store's pointer (None: it has not)."""
        names = self.pointer_names(p)
        ptr = arg(store, 0, "pointer")
        for small in self.lines:
            if isinstance(small, cst.Assign) and p in targets(small):
                return f"`{code(small)}`: the kernel reassigns its output pointer {p}"
            if (
                isinstance(small, cst.Assign | cst.AugAssign | cst.AnnAssign)
                and set(targets(small)) <= names
            ):
                calls = [c for c in walk(small) if isinstance(c, cst.Call) and uses(c, names)]
                if any(dotted(c.func).split(".")[-1] not in HINTS for c in calls):
                    return f"`{code(small)}`: the output pointer {p} is used besides its store"
                continue  # pointer arithmetic on the output pointer
            if any(n is store for n in walk(small)):
                if any(a.value is not ptr and uses(a, names) for a in store.args):
                    return f"`{code(store)}`: the output pointer {p} is also the value or mask"
                continue
            if uses(small, names):
                return f"`{code(small)}`: the output pointer {p} is used besides its store"
        if uses(header, names):
            return f"`{code(header)}`: the output pointer {p} is used besides its store"
        return None

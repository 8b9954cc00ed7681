"""Regime dispatch: two correct kernels, each measured faster on some of a problem's regimes,
made one candidate whose forward picks between them by the inputs' shape.

A launcher serves every regime, and a structural rewrite rarely pays on all of them: on the
reverse cumsum, rows packed several to a program pay where rows are short and many, a row
split into segments pays where rows are few and long, and each costs where the other pays. An
expert writes both paths and branches on the shape; so does this. When a trial's candidate is
correct and measured faster than the best kernel on some timed regimes (by WIN or more, beyond
the noise of its side-by-side timing) and not on others, the candidate is the two kernels in
one file:

- `separate` finds one shape feature of one input tensor (its last dimension, the rows before
  it, its element count, or another dimension) whose values split the regimes where the
  alternative won from the rest, and a threshold between them (the geometric midpoint of the
  two nearest values, as the skills' learned conditions are placed): the "when" of the trial,
  measured on this problem, as code.
- `combine` puts the alternative's kernels, helpers and ModelNew (renamed where a name is
  taken) after the best kernel's file and adds a ModelNew that runs the alternative where the
  split holds and the best kernel's forward elsewhere, with the same parameters on both paths
  (the alternative loads the best's state dict).

The result is gated like any candidate, beside the best kernel, and kept only if faster: the
split is a prediction for shapes between the regimes measured, not a measurement. Only a file
whose module-level statements are imports, functions, classes and assignments is combined; a
name the alternative's functions also use locally or as a parameter is not renamed under them,
and such a file is refused (DispatchError) rather than rewritten unsoundly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from klineage.errors import KLineageError
from klineage.rewrite.passes.tile_rewrite import _is_docstring, fresh

if TYPE_CHECKING:
    from klineage.optimize.policies import Proposal

DISPATCH = "regime_dispatch"  # a Proposal's pass_name for this candidate (not a registered pass)
WIN = 1.10  # the alternative must be this much faster on a regime it is chosen for
MODEL = "ModelNew"


class DispatchError(KLineageError):
    """The two files cannot be combined soundly; the message says why."""


@dataclass(frozen=True)
class Split:
    """`feature` of the forward's tensor input `input` against `threshold`: the alternative
    where it is <= threshold (alt_below) or >= threshold (else)."""

    input: int
    feature: str  # "last_dim", "rows" (elements / last dim), "numel", or "dim<k>"
    threshold: int
    alt_below: bool

    def value(self, shape: Sequence[int]) -> int:
        return _features(shape)[self.feature]

    def holds(self, shape: Sequence[int]) -> bool:
        v = self.value(shape)
        return v <= self.threshold if self.alt_below else v >= self.threshold

    def expr(self, tensors: str) -> str:
        t = f"{tensors}[{self.input}]"
        value = {
            "last_dim": f"{t}.shape[-1]",
            "rows": f"{t}.numel() // max(1, {t}.shape[-1])",
            "numel": f"{t}.numel()",
        }.get(self.feature) or f"{t}.shape[{int(self.feature.removeprefix('dim'))}]"
        return f"{value} {'<=' if self.alt_below else '>='} {self.threshold}"

    def text(self) -> str:
        what = {
            "last_dim": "last dimension",
            "rows": "rows (elements over the last dimension)",
            "numel": "elements",
        }.get(self.feature) or f"dimension {self.feature.removeprefix('dim')}"
        return f"input {self.input}'s {what} {'<=' if self.alt_below else '>='} {self.threshold}"

    def params(self) -> dict[str, Any]:
        return asdict(self)


def _features(shape: Sequence[int]) -> dict[str, int]:
    numel = math.prod(shape) if shape else 1
    last = shape[-1] if shape else 1
    out = {"last_dim": last, "rows": numel // max(1, last), "numel": numel}
    out.update({f"dim{k}": int(d) for k, d in enumerate(shape)})
    return out


def separate(
    wins: Sequence[str], rest: Sequence[str], shapes: Mapping[str, Sequence[Sequence[int]]]
) -> Split | None:
    """The first feature (input by input: last dimension, rows, elements, each dimension) whose
    values on the `wins` regimes all lie on one side of its values on the `rest`, with the
    threshold at the geometric midpoint of the two nearest; None when none separates them."""
    if not wins or not rest or any(r not in shapes for r in (*wins, *rest)):
        return None
    inputs = min(len(shapes[r]) for r in (*wins, *rest))
    for i in range(inputs):
        ranks = {len(shapes[r][i]) for r in (*wins, *rest)}
        if len(ranks) != 1:
            continue
        for feature in _features(shapes[wins[0]][i]):
            w = [_features(shapes[r][i])[feature] for r in wins]
            o = [_features(shapes[r][i])[feature] for r in rest]
            if min(w + o) <= 0:
                continue
            if max(w) < min(o):
                mid = math.floor(math.sqrt(max(w) * min(o)))
                return Split(i, feature, max(mid, max(w)), True)
            if min(w) > max(o):
                mid = math.ceil(math.sqrt(min(w) * max(o)))
                return Split(i, feature, min(mid, min(w)), False)
    return None


# combining two files -------------------------------------------------------------------------


def _defined(stmt: cst.CSTNode) -> list[str]:
    """The module-level names a statement binds (imports excluded)."""
    if isinstance(stmt, cst.FunctionDef | cst.ClassDef):
        return [stmt.name.value]
    if isinstance(stmt, cst.SimpleStatementLine):
        out: list[str] = []
        for small in stmt.body:
            targets: list[cst.BaseExpression] = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign | cst.AugAssign):
                targets = [small.target]
            for t in targets:
                if isinstance(t, cst.Name):
                    out.append(t.value)
        return out
    return []


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
    )


def _check_module(module: cst.Module, which: str) -> None:
    for stmt in module.body:
        if _is_import(stmt) or _is_docstring(stmt):
            continue
        if isinstance(stmt, cst.FunctionDef | cst.ClassDef):
            continue
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, cst.Assign | cst.AnnAssign | cst.Pass) for s in stmt.body
        ):
            continue
        shown = module.code_for_node(stmt).strip().splitlines()[0]
        raise DispatchError(
            f"the {which} kernel's file has a module-level statement `{shown}`; only imports, "
            "functions, classes and assignments are combined"
        )
    if not any(isinstance(s, cst.ClassDef) and s.name.value == MODEL for s in module.body):
        raise DispatchError(f"the {which} kernel's file defines no class {MODEL}")


class _Locals(cst.CSTVisitor):
    """Names bound inside functions (parameters, assignments, loop targets) of a module."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += 1
        for p in (*node.params.params, *node.params.kwonly_params, *node.params.posonly_params):
            self.names.add(p.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.depth -= 1

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self.depth:
            self.names.update(_target_names(node.target))

    def visit_For(self, node: cst.For) -> None:
        if self.depth:
            self.names.update(_target_names(node.target))


def _target_names(t: cst.BaseExpression) -> set[str]:
    if isinstance(t, cst.Name):
        return {t.value}
    if isinstance(t, cst.Tuple | cst.List):
        out: set[str] = set()
        for e in t.elements:
            out |= _target_names(e.value)
        return out
    return set()


class _Rename(cst.CSTTransformer):
    """Every Name in `names` renamed, but keyword arguments, parameters and attributes (which
    are not the module-level binding)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.map = names
        self.skip: set[int] = set()

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))

    def visit_Param(self, node: cst.Param) -> None:
        self.skip.add(id(node.name))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.attr))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if id(original) in self.skip or original.value not in self.map:
            return updated
        return updated.with_changes(value=self.map[original.value])


def _fresh(base: str, used: set[str]) -> str:
    """tile_rewrite.fresh, and the name taken from then on."""
    name = fresh(base, used)
    used.add(name)
    return name


def combine(best: str, alternative: str, split: Split, note: str = "") -> str:
    """One file: the best kernel's, the alternative's definitions after it (renamed where a name
    is taken, identical ones dropped), and a ModelNew that runs the alternative where `split`
    holds on the forward's tensor inputs, the best's forward elsewhere."""
    try:
        b, a = cst.parse_module(best), cst.parse_module(alternative)
    except cst.ParserSyntaxError as e:
        raise DispatchError(f"a kernel file does not parse: {e}") from e
    _check_module(b, "best")
    _check_module(a, "alternative")
    b_defs = {n: s for s in b.body for n in _defined(s)}
    a_defs = {n: s for s in a.body for n in _defined(s)}
    used = set(b_defs) | set(a_defs)
    base_model = _fresh("_ModelNewBase", used)
    alt_model = _fresh("_ModelNewAlternative", used)
    renames = {MODEL: alt_model}
    drop: set[int] = set()  # positions in a.body of definitions b has word for word
    for name, stmt in a_defs.items():
        if name == MODEL or name not in b_defs:
            continue
        if b.code_for_node(b_defs[name]) == a.code_for_node(stmt) and len(_defined(stmt)) == 1:
            drop.add(next(i for i, x in enumerate(a.body) if x is stmt))
        else:
            renames[name] = _fresh(f"{name}_alt", used)
    locals_ = _Locals()
    a.visit(locals_)
    clash = sorted(set(renames) & locals_.names - {MODEL})
    if clash:
        raise DispatchError(
            f"the alternative's functions also bind {', '.join(clash)} locally; renaming the "
            "module-level one would not be sound"
        )
    a = a.visit(_Rename(renames))
    b = b.visit(_Rename({MODEL: base_model}))
    b_imports = {b.code_for_node(s).strip() for s in b.body if _is_import(s)}
    imports = [s for s in a.body if _is_import(s) and a.code_for_node(s).strip() not in b_imports]
    # the rename keeps a.body's order and length: `drop` still names positions in it
    kept = [
        s
        for i, s in enumerate(a.body)
        if not _is_import(s) and not _is_docstring(s) and i not in drop
    ]
    last_import = max((i for i, s in enumerate(b.body) if _is_import(s)), default=-1)
    body = [*b.body[: last_import + 1], *imports, *b.body[last_import + 1 :], *kept]
    wrapper = list(cst.parse_module(_wrapper(base_model, alt_model, split, note)).body)
    wrapper[0] = wrapper[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    return b.with_changes(body=[*body, *wrapper]).code


def _wrapper(base: str, alt: str, split: Split, note: str) -> str:
    doc = f"Regime dispatch (klineage): the alternative where {split.text()}"
    if note:
        doc += f"; {note}"
    lines = [f"    {x}" for x in _wrap(doc + ".", 92)]
    return f'''class {MODEL}({base}):
    """{chr(10).join(lines).strip()}
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        alternative = {alt}(*args, **kwargs)
        alternative.load_state_dict(self.state_dict())  # the same parameters on both paths
        self.alternative = alternative

    def forward(self, *inputs):
        tensors = [v for v in inputs if hasattr(v, "shape") and hasattr(v, "numel")]
        if {split.expr("tensors")}:
            return self.alternative(*inputs)
        return super().forward(*inputs)
'''


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


# the optimize loop's side ---------------------------------------------------------------------


@dataclass(frozen=True)
class TrialView:
    """What the loop tells a policy of the trial it just gated (optimize/loop.py `_try`)."""

    candidate: str  # the gated candidate
    before: str  # the best kernel it was timed beside
    kept: bool
    ratios: Mapping[str, Any]  # timed regime -> metrics.Speedup (before / candidate)
    dispatch: bool  # the candidate was itself a dispatch


def proposal(
    view: TrialView | None, best: str, shapes: Mapping[str, Sequence[Sequence[int]]]
) -> Proposal | None:
    """The dispatch candidate a trial calls for, or None: (best kernel, alternative, split)
    where the alternative won by WIN or more on some timed regimes and not on the rest."""
    from klineage.lineage.walk import sha
    from klineage.optimize.policies import Proposal

    if view is None or view.dispatch or not view.ratios:
        return None
    measured = {r: s for r, s in view.ratios.items() if s.status == "measured"}
    if view.kept:  # the kernel before it stays better where the trial lost
        alt, gain = view.before, {r: 1.0 / s.value for r, s in measured.items() if s.value}
    else:  # the trial's kernel is better where it won
        alt, gain = view.candidate, {r: s.value for r, s in measured.items()}
    wins = sorted(r for r, g in gain.items() if g >= WIN)
    rest = sorted(r for r in view.ratios if r not in wins)
    split = separate(wins, rest, shapes)
    if split is None or alt == best:
        return None
    shown = ", ".join(f"{r} {gain[r]:.2f}x" for r in wins)
    note = f"measured faster there ({shown}), side by side with the other path"
    what = f"regime dispatch: {'the kernel before' if view.kept else 'the last candidate'} where {split.text()}"
    return Proposal(
        key=f"{DISPATCH}:{sha(best)[:12]}:{sha(alt)[:12]}",
        label=f"{what} ({shown}), the best kernel elsewhere",
        materializer="mechanical",
        pass_name=DISPATCH,
        params={"alternative": alt, "split": split.params(), "note": note},
        what=what,
    )


def materialize(source: str, params: Mapping[str, Any]) -> tuple[str | None, str]:
    """The dispatch candidate of `source` (the best kernel) and params["alternative"], or None
    and why not."""
    try:
        split = Split(**params["split"])
        out = combine(source, str(params["alternative"]), split, str(params.get("note", "")))
    except (DispatchError, KeyError, TypeError) as e:
        return None, f"{DISPATCH}: {e}"
    return out, f"{DISPATCH}: the alternative where {split.text()}, the best kernel elsewhere"

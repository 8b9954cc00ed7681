"""Rewrite passes: one optimization per pass, both directions, never raising.

A pass knows one optimization. Backward, it finds the sites where the optimization is present
in a kernel file and returns the source with exactly that optimization removed at one site,
meaning kept. Forward, it finds the sites where the optimization is absent but could apply and
returns the optimized source, given parameters (the values an expert used: block sizes, stages,
group size...). "Does not apply here" is a `RewriteResult` with `applied=False` and a reason,
never an exception (LibCST codemods' habit).

Passes work on source text and parse it with LibCST, so comments and formatting survive.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar, cast

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.memo import IdentityMemo, remember_sites

T = TypeVar("T")
N = TypeVar("N", bound=cst.CSTNode)


class Analysed(Protocol):
    """What an analysis says of one launch (multi_row_analysis.Launched and its kin)."""

    @property
    def kernel(self) -> str: ...

    @property
    def line(self) -> int: ...

    @property
    def function(self) -> str: ...

    @property
    def problem(self) -> str: ...  # why the launch is no site ("" for a site)


L = TypeVar("L", bound=Analysed)


@dataclass(frozen=True)
class Site:
    """One place a pass can act on: the index-th match of that pass in the file."""

    pass_name: str
    direction: str  # "backward" (optimization present) or "forward" (absent, could apply)
    index: int
    line: int
    function: str  # the enclosing function (kernel or launcher), "" at module level
    description: str
    # What the site holds now (backward: the expert's values, e.g. {"num_stages": 3}); forward
    # passes take their parameters from here when none are given.
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.pass_name}@{self.function or '<module>'}:{self.line}#{self.index}"


@dataclass
class RewriteResult:
    applied: bool
    reason: str
    source: str | None = None
    site: Site | None = None

    @classmethod
    def skip(cls, reason: str, site: Site | None = None) -> RewriteResult:
        return cls(False, reason, None, site)


class RewritePass(ABC):
    """Subclasses set NAME (the optimization it adds), DESCRIPTION, CATEGORY and ANCHOR."""

    NAME: ClassVar[str]
    DESCRIPTION: ClassVar[str]  # what the optimization does and why it helps (forward)
    CATEGORY: ClassVar[str]  # memory, parallelism, arithmetic, tuning, control-flow, hardware
    ANCHOR: ClassVar[str]  # the code construct it attaches to, e.g. "K-loop with tl.dot"
    # Structural: it changes how the work is split over programs or walked within one (the
    # grid, a loop over tiles, a scan), the largest gains on a naive kernel. Retrieval tries
    # such skills first among those whose gain it cannot tell apart (skills/retrieve.py).
    STRUCTURAL: ClassVar[bool] = False
    # Its gain depends on how many programs the kernel launches (split_k adds programs to a
    # kernel with too few to fill the GPU; a persistent grid folds too many onto the SMs): its
    # condition is learned on that count first (skills/conditions.py), read from the launcher
    # (rewrite/grid.py), and retrieval tries it after the structural skills that reshape the
    # grid, on the kernel they leave (optimize/policies.py).
    BY_PROGRAMS: ClassVar[bool] = False
    # It changes how one program walks its tile, not the grid (tile_accumulator, tile_online):
    # tried after the rewrites that set the grid, since a split over programs finds no place in
    # a walk it rewrote (split_online needs the online walk's four statements in its loop).
    IN_PROGRAM: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Sites depend only on the pass and the source (passes hold no state): remembered per
        # source text, so a walk, a probe and an optimize loop asking again pay once (memo.py).
        super().__init_subclass__(**kwargs)
        for name in ("backward_sites", "forward_sites"):
            if name in cls.__dict__:
                setattr(cls, name, remember_sites(cls.__dict__[name]))

    @abstractmethod
    def backward_sites(self, source: str) -> list[Site]:
        """Sites where the optimization is present."""

    @abstractmethod
    def simplify(self, source: str, site: Site) -> RewriteResult:
        """The source with the optimization removed at `site`, meaning kept."""

    def forward_sites(self, source: str) -> list[Site]:
        """Sites where the optimization is absent but could apply. Default: none."""
        return []

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        """The source with the optimization added at `site`. Default: not implemented."""
        return RewriteResult.skip(f"{self.NAME} has no forward rewrite")

    def scaled(self, params: dict[str, Any], factor: float) -> dict[str, Any] | None:
        """apply's params with the rewrite's structural value (split_k's programs per output,
        multi_row's rows per program) `factor` times what `params` give, for every site; None
        where the pass has no such value. A search measures the neighbours of a kept default
        instead of trusting it (optimize/policies.py): split_k's best split count on the
        long-K matmul was 256 on an H100 where its default is 512 (docs/benchmarks.md)."""
        return None

    # Helpers shared by passes -------------------------------------------------------------

    def site(
        self,
        direction: str,
        index: int,
        node_line: int,
        function: str,
        description: str,
        **params: Any,
    ) -> Site:
        return Site(self.NAME, direction, index, node_line, function, description, params)

    def safe(self, fn: Callable[..., T], *args: Any) -> T | RewriteResult:
        """Run a pass step; a parse or transform error becomes a skip, never an exception."""
        try:
            return fn(*args)
        except cst.ParserSyntaxError as e:
            return RewriteResult.skip(f"source does not parse: {e.message} (line {e.raw_line})")
        except Exception as e:  # a pass bug must not kill a walk; it is reported as a skip
            return RewriteResult.skip(f"{self.NAME} failed: {type(e).__name__}: {e}")

    def reasons(self, found: Callable[[], Sequence[Any]], site: type) -> list[str]:
        """why_not from an analysis that returns sites (instances of `site`) and (kernel, why
        not) pairs: "" for a site, "kernel: why" for the rest; the skip's reason if it fails."""

        def run() -> list[str]:
            return ["" if isinstance(x, site) else f"{x[0]}: {x[1]}" for x in found()]

        result = self.safe(run)
        return result if isinstance(result, list) else [result.reason]

    def safe_sites(self, fn: Callable[..., list[Site]], *args: Any) -> list[Site]:
        """Find sites through `safe`: a parse or transform error finds none."""
        result = self.safe(fn, *args)
        return result if isinstance(result, list) else []

    def launch_sites(
        self, find: Callable[[], Iterable[L]], describe: Callable[[L], tuple[str, dict[str, Any]]]
    ) -> list[Site]:
        """Forward sites through `safe_sites`: the launches find() analyses without a problem,
        each with the description and params describe(a) gives."""

        def run() -> list[Site]:
            out = []
            for i, a in enumerate(x for x in find() if not x.problem):
                description, params = describe(a)
                out.append(self.site("forward", i, a.line, a.function, description, **params))
            return out

        return self.safe_sites(run)

    def rewrite_at(
        self,
        find: Callable[[], tuple[cst.Module, Sequence[T]]],
        site: Site,
        what: str,
        rewrite: Callable[[cst.Module, T], RewriteResult],
    ) -> RewriteResult:
        """rewrite(module, found[site.index]) of what find() returns, through `safe`; a skip
        "no <what> #<index> here" when find() finds fewer (the source changed since)."""

        def run() -> RewriteResult:
            module, found = find()
            if site.index >= len(found):
                return RewriteResult.skip(f"no {what} #{site.index} here", site)
            return rewrite(module, found[site.index])

        return self.safe(run)


class ForwardOnly(RewritePass):
    """A pass with no backward direction: no backward sites, and simplify is the skip "<NAME>
    has no backward rewrite" (with NO_BACKWARD, when set, in parentheses after it)."""

    NO_BACKWARD: ClassVar[str] = ""

    def backward_sites(self, source: str) -> list[Site]:
        return []

    def simplify(self, source: str, site: Site) -> RewriteResult:
        why = f" ({self.NO_BACKWARD})" if self.NO_BACKWARD else ""
        return RewriteResult.skip(f"{self.NAME} has no backward rewrite{why}", site)


def launched(found: Sequence[L], site: Site) -> L | RewriteResult:
    """The analysed launch of the site's kernel, or the skip that says why not: no launch of it
    here, or its problem."""
    a = next((x for x in found if x.kernel == site.params.get("kernel")), None)
    if a is None:
        return RewriteResult.skip(f"no launch of {site.params.get('kernel')} here", site)
    if a.problem:
        return RewriteResult.skip(a.problem, site)
    return a


@functools.lru_cache(maxsize=64)
def parse(source: str) -> cst.Module:
    """The module of a source text, shared by every pass that parses the same text (LibCST
    trees are immutable: a rewrite builds a new tree, so sharing one is safe)."""
    return cst.parse_module(source)


def _positions(module: cst.Module) -> tuple[MetadataWrapper, Any]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return wrapper, wrapper.resolve(PositionProvider)


# The positions of a module's nodes, per module identity: passes sharing a parse share them.
positions = IdentityMemo(_positions, size=64)


def code_of(node: cst.CSTNode) -> str:
    """The source text of a node (as LibCST would print it)."""
    return cst.Module([]).code_for_node(node)


def replaced(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> str:
    """The module's source with node `old` (found by identity) replaced by `new`."""
    return cast(cst.Module, module.deep_replace(old, new)).code


def dotted(node: cst.BaseExpression) -> str:
    """'tl.load' for Attribute(Name('tl'), 'load'); '' for anything that is not a dotted name."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else ""
    return ""


def names_under(node: cst.CSTNode) -> list[str]:
    """Names under node, in order and with repeats: references, targets and parameters alike,
    but not attribute names (`x.shape` gives x) nor keyword names (`f(n=k)` gives f, k)."""
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return found


class _ReadsRenamed(cst.CSTTransformer):
    """Reads of the names in a mapping renamed (attribute and keyword names are not reads)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names
        self.keep: set[int] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.keep.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.keep.add(id(node.keyword))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if original.value in self.names and id(original) not in self.keep:
            return updated.with_changes(value=self.names[original.value])
        return updated


def reads_renamed(node: N, names: Mapping[str, str]) -> N:
    """node with every read of a name in `names` renamed to its value."""
    return cast(N, node.visit(_ReadsRenamed(names)))


def is_call_to(node: cst.CSTNode, *names: str) -> bool:
    """A call whose callee is one of `names` (matched on the last dotted parts, so an alias
    `import triton.language as lang` still matches 'tl.load' via 'load' + a module prefix)."""
    if not isinstance(node, cst.Call):
        return False
    callee = dotted(node.func)
    for name in names:
        if callee == name:
            return True
        tail = name.split(".")[-1]
        if callee.endswith("." + tail) and callee.split(".")[0] in (
            "tl",
            "triton",
            "lang",
            "language",
        ):
            return True
    return False


def is_triton_jit(decorator: cst.Decorator) -> bool:
    d = decorator.decorator
    target = d.func if isinstance(d, cst.Call) else d
    name = dotted(target)
    return name in ("triton.jit", "jit") or name.endswith(".jit")


def autotune_call(decorator: cst.Decorator) -> cst.Call | None:
    """The `triton.autotune(...)` call of a decorator (any alias of the module), else None."""
    d = decorator.decorator
    if isinstance(d, cst.Call) and (
        dotted(d.func) == "autotune" or dotted(d.func).endswith(".autotune")
    ):
        return d
    return None


def kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


def without_kwargs(call: cst.Call, names: set[str]) -> cst.Call:
    """The call with the named keyword arguments removed (and trailing commas fixed)."""
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in names)]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


class FunctionTracker(cst.CSTVisitor):
    """Base visitor that knows the enclosing function name and whether it is a @triton.jit."""

    def __init__(self) -> None:
        self.stack: list[tuple[str, bool]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append((node.name.value, any(is_triton_jit(d) for d in node.decorators)))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    @property
    def function(self) -> str:
        return self.stack[-1][0] if self.stack else ""

    @property
    def in_kernel(self) -> bool:
        return any(jit for _, jit in self.stack)


@dataclass
class CallMatch:
    node: cst.Call
    line: int
    function: str


class _CallCollector(FunctionTracker):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, predicate: Any, kernels_only: bool) -> None:
        super().__init__()
        self.predicate = predicate
        self.kernels_only = kernels_only
        self.found: list[CallMatch] = []

    def visit_Call(self, node: cst.Call) -> None:
        if self.kernels_only and not self.in_kernel:
            return
        if self.predicate(node):
            line = self.get_metadata(PositionProvider, node).start.line
            self.found.append(CallMatch(node, line, self.function))


def find_calls(source: str, predicate: Any, kernels_only: bool = True) -> list[CallMatch]:
    """Calls matching `predicate`, in source order (inside @triton.jit functions by default)."""
    wrapper = MetadataWrapper(parse(source))
    collector = _CallCollector(predicate, kernels_only)
    wrapper.visit(collector)
    return collector.found


class _NthCallReplacer(cst.CSTTransformer):
    def __init__(
        self,
        predicate: Callable[[cst.CSTNode], bool],
        kernels_only: bool,
        index: int,
        replace: Callable[[cst.Call], cst.BaseExpression],
    ) -> None:
        self.predicate = predicate
        self.kernels_only = kernels_only
        self.index = index
        self.replace = replace
        self.seen = -1
        self.depth_jit: list[bool] = []
        self.done = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth_jit.append(any(is_triton_jit(d) for d in node.decorators))

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        self.depth_jit.pop()
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.kernels_only and not any(self.depth_jit):
            return updated_node
        if not self.predicate(original_node):
            return updated_node
        self.seen += 1
        if self.seen != self.index:
            return updated_node
        self.done = True
        return self.replace(updated_node)


def replace_nth_call(
    source: str, predicate: Any, index: int, replace: Any, kernels_only: bool = True
) -> str | None:
    """The source with the index-th matching call replaced by replace(call); None if absent.

    Calls are counted in post-order (inner calls first), the order find_calls reports them in
    for non-nested matches; passes whose matches can nest must not rely on the index alone."""
    module = parse(source)
    t = _NthCallReplacer(predicate, kernels_only, index, replace)
    new = module.visit(t)
    return new.code if t.done else None

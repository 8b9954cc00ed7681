"""Launches of a file's own kernels and their tunable constants (rewrite/passes/tunables.py).

A launch `kernel[grid](...)` of a @triton.jit kernel defined in the file, with what can be
lifted into a config space: power-of-two constexpr block sizes (named as such, or a constexpr
that a loop steps by and a tl.arange spans; literals, or the launcher locals and module constants
bound to them, read nowhere else), num_warps and num_stages; which of them
the grid tiles by or a loop steps by (any value is then correct); the kernel's size arguments
(autotune's key); and why a launch cannot be lifted. No rewriting here.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from klineage.rewrite.base import autotune_call, dotted, is_triton_jit, parse
from klineage.rewrite.base import code_of as _code
from klineage.rewrite.blocks import _is_block_name, _literal, _tile_counts

WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4)
MIN_BLOCK, MAX_BLOCK = 16, 16384
MAX_TILE = 1 << 16  # elements of any two sizes together (a 2-D tile in registers)
DEFAULT_COUNT = 16
_IMPORTS_TRITON = re.compile(r"^import triton\s*(#.*)?$|^import triton\s*,", re.MULTILINE)


@dataclass
class Tunable:
    name: str  # the kernel's constexpr parameter: the config key
    value: int
    local: str | None  # the launcher local or module constant bound to the literal
    tiled: bool  # any value is correct: the grid tiles by it or a loop steps by it

    def values(self) -> list[int]:
        # A tiled size may also shrink, to 16 (or to its own value where smaller: 4 rows)
        lo = min(MIN_BLOCK, self.value) if self.tiled else self.value
        return [1 << k for k in range(16) if lo <= 1 << k <= MAX_BLOCK]


@dataclass
class Launch:
    kernel: str
    function: str
    line: int
    tunables: list[Tunable] = field(default_factory=list)
    warps: int = 4
    stages: int | None = None  # None: the kernel has no loop, stages do not matter
    keys: list[str] = field(default_factory=list)
    problem: str = ""
    # Block sizes the launcher computes (not lifted), by the most they can be, read from the
    # expression: `min(256, 4096 // 32, next_power_of_2(n))` is at most 128. A lifted row count
    # of a [ROWS, BLOCK_N] tile is sized with them: 16384 rows by 128 columns is 2M elements.
    fixed: dict[str, int] = field(default_factory=dict)

    def current(self) -> dict[str, int]:
        c = {t.name: t.value for t in self.tunables}
        c["num_warps"] = self.warps
        if self.stages is not None:
            c["num_stages"] = self.stages
        return c

    def space(self) -> list[dict[str, int]]:
        """Every config: sizes x warps x stages, within a register budget; the current first."""
        axes = [t.values() for t in self.tunables]
        stages = STAGES if self.stages is not None else (None,)
        out = [self.current()]
        for lifted in itertools.product(*axes):
            sizes = (*lifted, *self.fixed.values())
            if any(a * b > MAX_TILE for a, b in itertools.combinations(sizes, 2)):
                continue
            # Elements per program (the largest 2-D tile); unknown (a computed block) when
            # nothing is lifted, and then every warp count is worth a try.
            if not lifted:
                elements = MAX_TILE
            elif len(sizes) == 1:
                elements = sizes[0]
            else:
                elements = max(a * b for a, b in itertools.combinations(sizes, 2))
            for w, s in itertools.product(WARPS, stages):
                if elements < 32 * w and w > 1:  # fewer elements than threads
                    continue
                c = {t.name: v for t, v in zip(self.tunables, lifted, strict=True)}
                c["num_warps"] = w
                if s is not None:
                    c["num_stages"] = s
                if c != out[0]:
                    out.append(c)
        return out


def draw(space: list[dict[str, int]], count: int, seed: int | str) -> list[dict[str, int]]:
    """The current config and count - 1 others drawn from the space (a baseline's share)."""
    rest = list(space[1:])
    random.Random(str(seed)).shuffle(rest)
    return [space[0], *rest[: max(0, count - 1)]]


# -- analysis -----------------------------------------------------------------------------


class _KernelFacts(cst.CSTVisitor):
    """What a kernel's body says about its parameters."""

    def __init__(self, params: set[str]) -> None:
        self.params = params
        self.compared: set[str] = set()
        self.loop_steps: set[str] = set()
        self.aranged: set[str] = set()  # tl.arange(0, X)'s extents
        self.loops = False
        self.atomics = False
        self.loaded: set[str] = set()
        self.stored: set[str] = set()

    @staticmethod
    def _names(node: cst.CSTNode) -> set[str]:
        found: set[str] = set()

        class V(cst.CSTVisitor):
            def visit_Name(self, n: cst.Name) -> None:
                found.add(n.value)

        node.visit(V())
        return found

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self.compared |= self._names(node) & self.params

    def visit_For(self, node: cst.For) -> None:
        self.loops = True
        it = node.iter
        if isinstance(it, cst.Call) and dotted(it.func).split(".")[-1] in ("range", "static_range"):
            for a in it.args[:2]:
                self.compared |= self._names(a.value) & self.params
            if len(it.args) >= 3:
                self.loop_steps |= self._names(it.args[2].value) & self.params

    def visit_While(self, node: cst.While) -> None:
        self.loops = True

    def visit_Call(self, node: cst.Call) -> None:
        tail = dotted(node.func).split(".")[-1]
        if tail.startswith("atomic_"):
            self.atomics = True
        elif tail == "arange" and len(node.args) >= 2:
            self.aranged |= self._names(node.args[1].value) & self.params
        elif tail in ("load", "store") and node.args:
            names = _address_terms(node.args[0].value) & self.params
            (self.loaded if tail == "load" else self.stored).update(names)


def _address_terms(node: cst.BaseExpression) -> set[str]:
    """The names an address adds up: the pointer is one of them (`x_ptr + r * ld + col`: x_ptr
    and col, not the stride ld, which only scales an offset; a pointer cannot be multiplied)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        return _address_terms(node.left) | _address_terms(node.right)
    if isinstance(node, cst.Subscript):  # (x_ptr + offs)[:, None]
        return _address_terms(node.value)
    return {node.value} if isinstance(node, cst.Name) else set()


def _constexprs(fn: cst.FunctionDef) -> tuple[list[str], set[str]]:
    params = [p.name.value for p in fn.params.params]
    const = {
        p.name.value
        for p in fn.params.params
        if p.annotation is not None and dotted(p.annotation.annotation).endswith("constexpr")
    }
    return params, const


def _power_of_two(node: cst.BaseExpression | None) -> int | None:
    lit = _literal(node) if node is not None else None
    if lit is None:
        return None
    v = int(lit.evaluated_value)
    return v if v >= 1 and v & (v - 1) == 0 else None


def _at_most(node: cst.BaseExpression) -> int | None:
    """The largest value an integer expression of the launcher can take, where its literals
    bound it: a literal; `min(...)` of any argument bounded; `max(...)`, `a * b`, `a // k` of
    bounded parts. None where nothing bounds it (`next_power_of_2(n)` alone)."""
    lit = _literal(node)
    if lit is not None:
        return int(lit.evaluated_value)
    if isinstance(node, cst.Call) and dotted(node.func) in ("min", "max") and node.args:
        parts = [_at_most(a.value) for a in node.args if a.star == ""]
        known = [p for p in parts if p is not None]
        if dotted(node.func) == "min":
            return min(known) if known else None
        return max(known) if known and len(known) == len(node.args) else None
    if isinstance(node, cst.BinaryOperation):
        left, right = _at_most(node.left), _literal(node.right)
        if isinstance(node.operator, cst.FloorDivide) and left is not None and right is not None:
            return left // max(1, int(right.evaluated_value))
        r = _at_most(node.right)
        if isinstance(node.operator, cst.Multiply) and left is not None and r is not None:
            return left * r
    return None


class _Module(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.kernels: dict[str, cst.FunctionDef] = {}
        self.autotuned: set[str] = set()
        # each launch, the outermost function it is in (the node: a file with a regime
        # dispatch has two or three methods named forward) and its line
        self.launches: list[tuple[cst.Call, cst.FunctionDef | None, int]] = []
        self.constants: dict[str, cst.BaseExpression] = {}
        self.stack: list[str] = []
        self.outer: cst.FunctionDef | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if not self.stack:
            if any(is_triton_jit(d) for d in node.decorators):
                self.kernels[node.name.value] = node
                if any(autotune_call(d) for d in node.decorators):
                    self.autotuned.add(node.name.value)
            self.outer = node
        self.stack.append(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()
        if not self.stack:
            self.outer = None

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Subscript) and isinstance(node.func.value, cst.Name):
            line = self.get_metadata(PositionProvider, node).start.line
            self.launches.append((node, self.outer, line))

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.stack:
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.constants[t.target.value] = node.value


def _bindings(fn: cst.FunctionDef | None) -> dict[str, list[cst.BaseExpression]]:
    """name -> the values assigned to it in a function (tuple assignments unpacked)."""
    out: dict[str, list[cst.BaseExpression]] = {}
    if fn is None:
        return out

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                target, value = t.target, node.value
                if isinstance(target, cst.Name):
                    out.setdefault(target.value, []).append(value)
                elif (
                    isinstance(target, cst.Tuple)
                    and isinstance(value, cst.Tuple)
                    and len(target.elements) == len(value.elements)
                ):
                    for te, ve in zip(target.elements, value.elements, strict=True):
                        if isinstance(te.value, cst.Name):
                            out.setdefault(te.value.value, []).append(ve.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    fn.visit(V())
    return out


def _reads(node: cst.CSTNode, name: str) -> int:
    """How often `name` is read in node (assignment targets and keywords not counted)."""
    count = 0

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal count
            if n.value == name:
                count += 1

        def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return count


def _unlift_shared_literals(launch: Launch, grid: cst.BaseExpression) -> None:
    """Literal sizes of one value that the grid counts tiles of, e.g. `(cdiv(M, 64), cdiv(N,
    64))` with BLOCK_M=64, BLOCK_N=64: which count is whose cannot be read from the grid, and
    lifting them apart left tiles unlaunched. On the H200 (2026-12-03) a table of the tiled
    transpose was refused (non-finite output): its grid had become `(cdiv(M, META["BLOCK_M"]),
    cdiv(N, META["BLOCK_M"]), B)`, so with BLOCK_N=16 three quarters of the columns were never
    written. They keep their value."""
    counted = [t for t in launch.tunables if t.local is None and _tile_counts(grid, t.value)]
    shared = Counter(t.value for t in counted)
    for t in counted:
        if shared[t.value] > 1:
            launch.tunables.remove(t)
            launch.fixed[t.name] = t.value


FEW = 16  # the largest computed count a table lifts (see _lift_computed)


def _read_elsewhere(fn: cst.FunctionDef, grid: cst.BaseExpression | None, local: str) -> bool:
    """Whether the launcher reads a local besides in the launch's keyword and its grid (a
    buffer size, a second grid), which would keep the old value once the table holds it."""
    return _reads(fn, local) - 1 - (_reads(grid, local) if grid is not None else 0) > 0


def launch_of(module: cst.Module, kernel: str) -> tuple[cst.Call, cst.FunctionDef | None]:
    """A kernel's launch in a module and the outermost function it is in (analyse's reading)."""
    facts = _Module()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(facts)
    for call, outer, _ in facts.launches:
        if isinstance(call.func, cst.Subscript) and dotted(call.func.value) == kernel:
            return call, outer
    raise ValueError(f"no launch of {kernel}")


def _lift_computed(
    launch: Launch,
    computed: list[tuple[str, str, int]],
    fn: cst.FunctionDef,
    grid: cst.BaseExpression,
) -> None:
    """A size the launcher computes, that the grid tiles by and nothing else reads, is lifted
    too, from the most its expression allows: any value is correct (the grid follows it), and
    the launcher's formula was sized for the other constants it had, which the table changes.
    multi_row's `ROWS = min(64, max(1, 256 // 64), next_power_of_2(rows))` packs 4 rows of the
    reverse cumsum's 64-column chunk; with CHUNK alone lifted, a table widened the chunk at 4
    rows and short rows stayed at 30% of the floor on an H100 (2026-12-07; side by side there,
    more rows turned out slower on that scan: the table finds that out). Only where every other
    size and every tl.arange extent of the kernel is bounded, so the table's tiles are sized
    with all of them: beside a softmax row's SPAN = next_power_of_2(n), a lifted ROWS would
    put up to 16384 whole rows in a program. And only a count of at most FEW: the table's first
    config (the kernel as it was) takes the most, which the launcher computes for any shape
    with at least that many rows; a matmul's `TILE_M = min(64, max(16, next_power_of_2(M)))`
    is 16 at the long-K matmul's M = 16, and its table would have started at 64."""
    for key, local, most in computed:
        if most > FEW or _read_elsewhere(fn, grid, local):
            continue
        del launch.fixed[key]
        launch.tunables.append(Tunable(key, most, local, True))


def _grid(
    call: cst.Call, binds: dict[str, list[cst.BaseExpression]]
) -> tuple[cst.BaseExpression | None, str | None]:
    assert isinstance(call.func, cst.Subscript)
    if len(call.func.slice) != 1 or not isinstance(call.func.slice[0].slice, cst.Index):
        return None, None
    grid = call.func.slice[0].slice.value
    if isinstance(grid, cst.Name):
        values = binds.get(grid.value, [])
        return (values[0] if len(values) == 1 else None), grid.value
    return grid, None


def analyse(source: str) -> list[Launch]:
    """Every launch of a kernel of this file, with its tunables (or why it has none)."""
    module = parse(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    facts = _Module()
    wrapper.visit(facts)
    counts: dict[str, int] = {}
    for call, _, _ in facts.launches:
        assert isinstance(call.func, cst.Subscript) and isinstance(call.func.value, cst.Name)
        counts[call.func.value.value] = counts.get(call.func.value.value, 0) + 1
    out: list[Launch] = []
    for call, outer, line in facts.launches:
        assert isinstance(call.func, cst.Subscript) and isinstance(call.func.value, cst.Name)
        name = call.func.value.value
        kernel = facts.kernels.get(name)
        if kernel is None:
            continue
        launch = Launch(name, outer.name.value if outer is not None else "", line)
        out.append(launch)
        params, const = _constexprs(kernel)
        body = _KernelFacts(set(params))
        kernel.body.visit(body)
        if name in facts.autotuned:
            launch.problem = f"{name} is autotuned already (autotune_table's forward adds configs)"
            continue
        if counts[name] > 1:
            launch.problem = f"{name} is launched from {counts[name]} places"
            continue
        if body.atomics or body.loaded & body.stored:
            both = ", ".join(sorted(body.loaded & body.stored)) or "atomics"
            launch.problem = (
                f"{name} writes what it reads ({both}): autotune's trial runs "
                "would apply it more than once"
            )
            continue
        if not _IMPORTS_TRITON.search(source):
            launch.problem = "no `import triton` for triton.autotune"
            continue
        fn = outer
        binds = _bindings(fn)
        grid, _ = _grid(call, binds)
        computed: list[tuple[str, str, int]] = []  # bounded sizes the launcher computes
        unbounded = False  # a size computed from the shape alone (next_power_of_2(n))
        for a in call.args:
            if a.keyword is None:
                continue
            key = a.keyword.value
            local = a.value.value if isinstance(a.value, cst.Name) else None
            bound: cst.BaseExpression | None = a.value
            if local is not None:
                values = binds.get(local) or (
                    [facts.constants[local]] if local in facts.constants else []
                )
                bound = values[0] if len(values) == 1 else None
            if key in ("num_warps", "num_stages"):
                v = _power_of_two(bound)
                lit = _literal(bound) if bound is not None else None
                if v is None and key == "num_stages" and lit is not None:
                    v = int(lit.evaluated_value)
                if v is None:
                    launch.problem = f"{key}={_code(a.value)} is computed at run time"
                    break
                if key == "num_warps":
                    launch.warps = v
                else:
                    launch.stages = v
                continue
            # A block size by its name, or by what the kernel does with it: a loop steps by
            # it and a tl.arange spans it (STEP, CHUNK: one block of the loop's axis).
            if key not in const or not (
                _is_block_name(key) or (key in body.loop_steps and key in body.aranged)
            ):
                continue
            value = _power_of_two(bound)
            if value is None:  # computed at run time (next_power_of_2(n)): it follows the shape
                most = _at_most(bound) if bound is not None else None
                if most is None:
                    unbounded = True
                    continue
                launch.fixed[key] = most
                if local is not None and grid is not None and _reads(grid, local):
                    computed.append((key, local, most))
                continue
            uses_in_grid = 0
            if grid is not None:
                uses_in_grid = _reads(grid, local) if local else len(_tile_counts(grid, value))
            # A local is read by the launch keyword and the grid only; anything else (a buffer
            # size, a second grid) would keep the old value.
            if local is not None and fn is not None and _read_elsewhere(fn, grid, local):
                continue
            tiled = uses_in_grid > 0 or key in body.loop_steps
            launch.tunables.append(Tunable(key, value, local, tiled))
        spans = body.aranged & const  # every tile extent the kernel has
        sized = {t.name for t in launch.tunables} | set(launch.fixed)
        if not unbounded and spans <= sized and fn is not None and grid is not None:
            _lift_computed(launch, computed, fn, grid)
        if grid is not None:
            _unlift_shared_literals(launch, grid)
        if launch.problem:
            continue
        if body.loops and launch.stages is None:
            launch.stages = 3  # Triton's default on CUDA
        if not body.loops:
            launch.stages = None
        launch.keys = [p for p in params if p in body.compared and p not in const]
    return out

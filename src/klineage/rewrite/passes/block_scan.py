"""A row scan (cumsum) as a loop of block scans with a carried prefix, BLOCK_N columns a step.

A naive row cumsum (one program per row) comes in two shapes (issue 16), and both are slow:
(a) a serial loop, one element a step: `for j in range(n): acc += load(j); store(j, acc)`,
n dependent scalar loads and adds a row; (b) one tile of next_power_of_2(n) columns scanned
once: fine while the row fits in registers, spilling on long rows (the cumsum corpus naive).
The cumsum expert's looped kernel walks the row in tiles instead: each tile is scanned in
registers and the fp32 sum of the tiles before it (the carry) is added.

Forward on (a): `for start in range(lo, n, BLOCK_N)`, the loop's variable becomes the block's
columns `j = start + tl.arange(0, BLOCK_N)` with `j_ok = j < n`, every load and store at the
column gets `mask=j_ok` (`& j_ok` on a mask it had), the update `acc += e` becomes
`acc_scan = tl.cumsum(e, axis=0) + acc`, the statements after it read acc_scan (the running sum
at each column) for acc, and the block ends with `acc += tl.sum(e, axis=0)` (`tl.where(j_ok, e,
0.0)` when the kernel reads the total after the loop: masked lanes of the last block must not
enter it). The kernel takes `BLOCK_N: tl.constexpr`; the launcher passes BLOCK_N =
min(4096, next_power_of_2(n)) (the expert's LOOP_BLOCK_N; params["block_n"] fixes it, a power
of two; 4096 alone when n is not a kernel parameter), and the grid is unchanged (one program
per row). Forward on (b): the statements from the tile's `cols = tl.arange(0, B)` on move into
`for start in range(0, n, B)` with `cols = start + tl.arange(0, B)`, the scan becomes
`tl.cumsum(x, axis=0) + carry` and the block ends with `carry += tl.sum(x, axis=0)`, `carry =
0.0` before the loop; the launch's B = next_power_of_2(n) becomes min(4096, that) (or fixed).
A [1, B] tile (one row a program with a unit row axis: the cumsum expert's tile kernel walked
back to BLOCK_M = 1, its CPU walk's simplest kernel) is blocked the same way along axis 1: the
carry is `tl.zeros([R, 1], dtype=tl.float32)` (R the row side's block, 1 at the launch; a
tensor from the start, so its type does not change in the loop) and each block adds
`tl.sum(x, axis=1, keep_dims=True)`, which broadcasts over the block's columns as the scalar
carry does over a 1-D block.

Why it is sound (block_scan_analysis.py proves the shape and says why not for anything else):
the loop carries exactly one value, the prefix, in fp32 (the element is `.to(tl.float32)`);
every other value is lane by lane on a block (loads, stores, `.to`, elementwise tl calls, no
indexing), so lane i of the block at `start` computes what step start + i (or column start + i
of the tile) computed, loads and stores at the same addresses, and its scan plus the carry is
the same prefix sum, added in another order (the gate's fp64 bound grows with the reduction
length: a changed order passes, a dropped term does not). Loads and stores at the column must
add it once with unit stride (`base + j`): that is what makes the kernel a row scan, the row
read and written in order (coalesced once blocked); a strided or reversed column is skipped.
Blocks cover the columns the original covered: (a) the loop's own range; (b) [0, n), masked by
`cols < n` as the tile was, whose B = next_power_of_2(n) covered the row. Lanes past n exist
only in the last block, after every valid lane, so they never enter a valid lane's scan.

Skipped, with the reason: a loop that carries no or two values (or reads the sum before adding:
an exclusive scan), a running sum not started from a float literal or not fp32, a load or store
not at the column (a store elsewhere, a reversed or strided column), a reduction, a second scan
or any call not known to be lane by lane, indexing (a 2-D tile), branches and nested loops, a
reversed scan, a tile whose launch does not make it cover the row, a kernel already looping
over blocks (the held-out reverse cumsum). No backward sites: the cumsum expert's looped kernel
has its one-tile form already, `_cumsum_tile_kernel`, and online_reduction's backward site on
the launcher's dispatch (`if BLOCK_N <= MAX_FUSED_N: tile else: looped`) is that inverse;
undoing the loop inside the looped kernel as well would count one optimization twice, and its
chunk split (HAS_PREFIX, chunks of whole tiles) has no one-tile form.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from klineage.rewrite.base import ForwardOnly, RewriteResult, Site, dotted, launched, reads_renamed
from klineage.rewrite.passes.block_scan_analysis import Analysis, _added, analyse
from klineage.rewrite.passes.rows_per_program import Ctx, _triton_alias, assignments, code, names_in
from klineage.rewrite.passes.tile_rewrite import (
    Relaunch,
    _kw,
    _with_args,
    constexpr,
    fresh,
    masked,
    tl_alias,
    with_params,
)
from klineage.rewrite.registry import register

# The cumsum expert's LOOP_BLOCK_N: 8 KB of bf16, 32 fp32 a thread at 4 warps. Measured on an
# H200 (Triton 3.6, do_bench, one run, 2026-12-01), blocked at 4096: the corpus naive 749 -> 87 us
# at 1024 x 65536 bf16 (expert 79), 234 -> 53 us at 128 x 131072 (expert 33: its row split),
# 69 -> 71 us at 8192 x 8192; the serial loop 3452 -> 47 us at 256 x 65536 fp32.
LOOP_BLOCK_N = 4096


class _Mask(cst.CSTTransformer):
    """The loads and stores in `calls` (by identity) masked by `ok` too."""

    def __init__(self, calls: list[cst.Call], ok: str) -> None:
        self.ids, self.ok = {id(c) for c in calls}, ok

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if id(original) not in self.ids:
            return updated
        return masked(updated, 1 if dotted(original.func).endswith("load") else 2, self.ok)


def _with_param(kdef: cst.FunctionDef, name: str, tl_mod: str) -> cst.FunctionDef:
    """kdef with a trailing `name: tl.constexpr` parameter, in the parameters' layout."""
    new = [cst.Param(cst.Name(name), annotation=constexpr(kdef, tl_mod))]
    params = with_params(kdef.params.params, new) if kdef.params.params else new
    return kdef.with_changes(params=kdef.params.with_changes(params=params))


def _line(st: cst.SimpleStatementLine, small: str) -> cst.SimpleStatementLine:
    """st (its comments and blank lines kept) holding the statement `small` instead."""
    new = cst.parse_statement(small)
    assert isinstance(new, cst.SimpleStatementLine)
    return st.with_changes(body=new.body)


def _serial_kernel(ctx: Ctx, a: Analysis, tl_mod: str) -> tuple[cst.FunctionDef, str]:
    kdef = ctx.kernels[a.kernel]
    loop, update, element = a.loop, a.update, a.element
    assert loop is not None and update is not None and element is not None
    assert isinstance(loop.body, cst.IndentedBlock) and isinstance(loop.iter, cst.Call)
    used = set(names_in(kdef))
    start, ok = fresh("start", used), fresh(f"{a.index}_ok", used)
    scan, block = fresh(f"{a.acc}_scan", used), fresh("BLOCK_N", used)
    masked = loop.body.visit(_Mask(a.memory, ok))
    assert isinstance(masked, cst.IndentedBlock)
    inner = list(masked.body)
    at = list(loop.body.body).index(update)
    up = inner[at]
    assert isinstance(up, cst.SimpleStatementLine)
    e = _added(up.body[0], a.acc)
    assert e is not None
    head: list[cst.BaseStatement] = [
        cst.parse_statement(f"{a.index} = {start} + {tl_mod}.arange(0, {block})"),
        cst.parse_statement(f"{ok} = {a.index} < {a.bound}"),
    ]
    if isinstance(e, cst.Name):
        v = e.value
    else:  # the element once, for the scan and the carry
        v = fresh(f"{a.acc}_in", used | {start, ok, scan, block})
        head_e = _line(up, f"{v} = {code(e)}")
        up = up.with_changes(leading_lines=[])
        inner[at:at] = [head_e]
        at += 1
    inner[at] = _line(up, f"{scan} = {tl_mod}.cumsum({v}, axis=0) + {a.acc}")
    inner[at + 1 :] = [reads_renamed(st, {a.acc: scan}) for st in inner[at + 1 :]]
    lanes = f"{tl_mod}.where({ok}, {v}, 0.0)" if a.total_read else v
    inner.append(cst.parse_statement(f"{a.acc} += {tl_mod}.sum({lanes}, axis=0)"))
    args = loop.iter.args
    lo = code(args[0].value) if len(args) > 1 else "0"
    it = cst.parse_expression(f"{dotted(loop.iter.func)}({lo}, {a.bound}, {block})")
    new_loop = loop.with_changes(
        target=cst.Name(start), iter=it, body=masked.with_changes(body=[*head, *inner])
    )
    body = kdef.body
    assert isinstance(body, cst.IndentedBlock)
    stmts = [new_loop if st is loop else st for st in body.body]
    new = kdef.with_changes(body=body.with_changes(body=stmts))
    return _with_param(new, block, tl_mod), block


def _tile_kernel(ctx: Ctx, a: Analysis, tl_mod: str) -> cst.FunctionDef:
    kdef = ctx.kernels[a.kernel]
    assert a.arange is not None and isinstance(kdef.body, cst.IndentedBlock)
    used = set(names_in(kdef))
    carry, start = fresh("carry", used), fresh("start", used)
    body = list(kdef.body.body)
    at = body.index(a.arange)
    scan = a.scan

    class Scan(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if original is not scan:
                return updated
            return cst.BinaryOperation(updated, cst.Add(), cst.Name(carry))

    small = a.arange.body[0]
    assert isinstance(small, cst.Assign)
    arange = a.arange.with_changes(
        body=[small.with_changes(value=cst.parse_expression(f"{start} + {code(small.value)}"))]
    )
    tile = [st.visit(Scan()) for st in body[at + 1 :]]
    loop = cst.parse_statement(f"for {start} in range(0, {a.bound}, {a.block_param}):\n    pass\n")
    assert isinstance(loop, cst.For) and isinstance(loop.body, cst.IndentedBlock)
    if a.carry_rows:  # a [1, B] tile: the carry is a [rows, 1] column, its type fixed in the loop
        total = f"{tl_mod}.sum({a.scanned}, axis=1, keep_dims=True)"
        start_at = f"{tl_mod}.zeros([{a.carry_rows}, 1], dtype={tl_mod}.float32)"
    else:
        total, start_at = f"{tl_mod}.sum({a.scanned}, axis=0)", "0.0"
    step = cst.parse_statement(f"{carry} += {total}")
    loop = loop.with_changes(body=loop.body.with_changes(body=[arange, *tile, step]))
    init = cst.parse_statement(f"{carry} = {start_at}")
    new_body = [*body[:at], init, loop]
    return kdef.with_changes(body=kdef.body.with_changes(body=new_body))


def rewrite(ctx: Ctx, a: Analysis, p: dict[str, Any]) -> str:
    """The source with a's kernel scanning its row in blocks and its launch passing BLOCK_N."""
    la = a.launch
    kdef = ctx.kernels[la.kernel]
    tr = _triton_alias(ctx.module)
    tl_mod = tl_alias(ctx.module) or f"{tr}.language"
    if a.shape == "serial":
        new_kdef, block = _serial_kernel(ctx, a, tl_mod)
        covered = f"{tr}.next_power_of_2({a.launch_bound})" if a.launch_bound else ""
    else:
        new_kdef, block = _tile_kernel(ctx, a, tl_mod), a.block_param
        covered = a.block
    if "block_n" in p:
        value, why = str(int(p["block_n"])), "fixed"
    else:
        value = f"min({LOOP_BLOCK_N}, {covered})" if covered else str(LOOP_BLOCK_N)
        why = f"at most {LOOP_BLOCK_N} columns, the cumsum expert's looped tile"
    name = fresh(block, set(names_in(la.func)) | set(assignments(ctx.module)))
    comment = cst.Comment(f"# block_scan: {why}; blocks of {name} columns, an fp32 carried prefix")
    assign = cst.parse_statement(f"{name} = {value}")
    assign = assign.with_changes(leading_lines=[cst.EmptyLine(comment=comment)])
    old_arg = a.block_arg

    class Launcher(Relaunch):
        def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
            if old_arg is not None and original.value is old_arg:
                return updated.with_changes(value=cst.Name(name))
            return updated

    def launch(updated: cst.Call) -> cst.Call:
        return _with_args(updated, [_kw(block, name)]) if old_arg is None else updated

    edit = Launcher(la.call, launch, lambda st: cst.FlattenSentinel([assign, st]), kdef, new_kdef)
    return ctx.module.visit(edit).code


@register
class BlockScan(ForwardOnly):
    NAME = "block_scan"
    DESCRIPTION = (
        "Scan a row (cumsum) in blocks of BLOCK_N columns: each block's tl.cumsum in registers "
        "plus the fp32 sum of the blocks before it (one carried prefix), instead of a serial "
        "loop one element a step or one tile of next_power_of_2(n) columns that spills on long "
        "rows (BLOCK_N = min(4096, next_power_of_2(n)), the cumsum expert's looped tile)."
    )
    CATEGORY = "control-flow"
    STRUCTURAL = True
    ANCHOR = "one-row-per-program scan: a loop carrying one running sum, or one tl.cumsum tile"

    # no backward sites: the looped -> one-tile inverse is online_reduction's (module docstring)
    NO_BACKWARD = "online_reduction removes the expert's looped scan at its dispatch"

    def forward_sites(self, source: str) -> list[Site]:
        return self.launch_sites(
            lambda: analyse(source)[1],
            lambda a: (
                f"{a.kernel}: a row scan as "
                + (
                    "a serial loop"
                    if a.shape == "serial"
                    else f"one tile of {a.block}"
                    + (f" ([{a.carry_rows}, {a.block}], one row a program)" if a.carry_rows else "")
                ),
                {"kernel": a.kernel, "shape": a.shape, "n": a.bound},
            ),
        )

    def why_not(self, source: str) -> list[str]:
        """The reason each launch in the file is not a site (empty string for a site)."""

        def run() -> list[str]:
            return [f"{a.kernel}: {a.problem}" if a.problem else "" for a in analyse(source)[1]]

        result = self.safe(run)
        return result if isinstance(result, list) else [result.reason]

    def apply(self, source: str, site: Site, params: dict[str, Any] | None = None) -> RewriteResult:
        p = params or {}

        def run() -> RewriteResult:
            if "block_n" in p:
                r = p["block_n"]
                if not isinstance(r, int) or isinstance(r, bool) or r < 1 or r & (r - 1):
                    return RewriteResult.skip(
                        f"params['block_n']={r!r}: expected a power of two", site
                    )
            ctx, found = analyse(source)
            a = launched(found, site)
            if isinstance(a, RewriteResult):
                return a
            out = rewrite(ctx, a, p)
            return RewriteResult(
                True,
                f"{a.kernel}: the row scanned in blocks of BLOCK_N with a carried prefix",
                out,
                site,
            )

        return self.safe(run)

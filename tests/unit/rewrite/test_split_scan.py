"""The split_scan pass (rewrite/passes/split_scan.py): source rewrites only, no kernels run.
A golden rewrite of a forward prefix cumsum written for these tests (one program per row, a
tl.range loop with num_stages, `total = total + tl.sum(...)`, one argument a line); the sites
in the held-out reverse cumsum naive and in block_scan's looped form of the cumsum corpus
naive; the skips a kernel gets when the split is not proven, with their reasons."""

from __future__ import annotations

import pytest

from klineage.rewrite import all_passes
from klineage.rewrite.base import ForwardOnly
from klineage.rewrite.passes.split_scan import SplitScan
from tests.conftest import ROOT

SRC = ROOT / "src" / "klineage"
PASS = SplitScan()

HEAD = '''import torch
import triton
import triton.language as tl


@triton.jit
def prefix_scan_row(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    """y[r, :] = cumsum(x[r, :]), one program per row r, BLOCK columns a step."""
'''
BODY = """    r = tl.program_id(0).to(tl.int64)
    total = 0.0  # the row's sum so far, in fp32
    for c in tl.range(0, n_cols, BLOCK, num_stages=2):
        cols = c + tl.arange(0, BLOCK)
        ok = cols < n_cols
        x = tl.load(x_ptr + r * stride + cols, mask=ok, other=0.0).to(tl.float32)
        y = total + tl.cumsum(x, axis=0)
        tl.store(y_ptr + r * stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
        total = total + tl.sum(x, axis=0)
"""
TAIL = """

def row_cumsum(x):
    y = torch.empty_like(x)
    prefix_scan_row[(x.shape[0],)](
        x,
        y,
        x.shape[1],
        x.stride(0),
        BLOCK=1024,
    )
    return y
"""
PREFIX = HEAD + BODY + TAIL

PREFIX_AFTER = '''import torch
import triton
import triton.language as tl


@triton.jit
def prefix_scan_row(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, totals, n_seg, seg_len, SEG_P2: tl.constexpr, HAS_PREFIX: tl.constexpr):
    """y[r, :] = cumsum(x[r, :]), one program per row r, BLOCK columns a step."""
    # split_scan: program (i, s) runs segment s of the loop over n_cols (seg_len elements,
    # whole steps of BLOCK), total started from the fp32 totals of segments 0..s-1
    seg = tl.program_id(1)
    r = tl.program_id(0).to(tl.int64)
    total = 0.0  # the row's sum so far, in fp32
    # split_scan: the totals of the segments before this one, added in segment order
    if HAS_PREFIX:
        earlier = tl.arange(0, SEG_P2)
        at = totals + tl.program_id(0).to(tl.int64) * n_seg + earlier
        total += tl.sum(tl.load(at, mask=earlier < seg, other=0.0), axis=0)
    for c in tl.range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n_cols), BLOCK, num_stages=2):
        cols = c + tl.arange(0, BLOCK)
        ok = cols < n_cols
        x = tl.load(x_ptr + r * stride + cols, mask=ok, other=0.0).to(tl.float32)
        y = total + tl.cumsum(x, axis=0)
        tl.store(y_ptr + r * stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)
        total = total + tl.sum(x, axis=0)


@triton.jit
def _split_scan_totals_prefix_scan_row(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, totals, n_seg, seg_len):
    """split_scan's first kernel: totals[i, s] = the fp32 sum of what prefix_scan_row's loop
    adds to total over segment s of row i (program (i, s)), from the statements that value
    depends on."""
    seg = tl.program_id(1)
    r = tl.program_id(0).to(tl.int64)
    total = 0.0  # the row's sum so far, in fp32
    for c in tl.range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n_cols), BLOCK, num_stages=2):
        cols = c + tl.arange(0, BLOCK)
        ok = cols < n_cols
        x = tl.load(x_ptr + r * stride + cols, mask=ok, other=0.0).to(tl.float32)
        total = total + tl.sum(x, axis=0)
    tl.store(totals + tl.program_id(0).to(tl.int64) * n_seg + seg, total)


def row_cumsum(x):
    y = torch.empty_like(x)
    # split_scan: each row's loop over x.shape[1] split into SEG segments of seg_len
    # elements (whole steps of SCAN_STEP) over a second grid axis;
    # _split_scan_totals_prefix_scan_row writes each segment's fp32 total to seg_totals,
    # from which a segment's scan starts (none when SEG == 1). SEG: about 8 programs for
    # each of the 132 SMs of an H200, at least one step and at most 64 segments a row.
    # SCAN_STEP: the step of both kernels, at least 1024 and up to 4096 elements (the row's
    # next power of two if shorter).
    SCAN_STEP = max(1024, min(4096, triton.next_power_of_2(x.shape[1])))
    SEG = max(1, min(triton.cdiv(8 * 132, max(1, x.shape[0])), triton.cdiv(x.shape[1], SCAN_STEP), 64))
    seg_len = SCAN_STEP * max(1, triton.cdiv(triton.cdiv(x.shape[1], SCAN_STEP), SEG))
    SEG = max(1, triton.cdiv(x.shape[1], seg_len))
    seg_totals = torch.empty((x.shape[0], SEG), dtype=torch.float32, device=y.device)
    if SEG > 1:
        _split_scan_totals_prefix_scan_row[(x.shape[0], SEG)](
            x,
            y,
            x.shape[1],
            x.stride(0),
            BLOCK=SCAN_STEP,
            totals=seg_totals,
            n_seg=SEG,
            seg_len=seg_len,
        )
    prefix_scan_row[(x.shape[0], SEG)](
        x,
        y,
        x.shape[1],
        x.stride(0),
        BLOCK=SCAN_STEP,
        totals=seg_totals,
        n_seg=SEG,
        seg_len=seg_len,
        SEG_P2=triton.next_power_of_2(SEG),
        HAS_PREFIX=SEG > 1,
    )
    return y
'''


def rewritten(source: str, **params: object) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, dict(params))
    assert r.applied, r.reason
    assert r.source is not None and r.source != source
    compile(r.source, "<split_scan>", "exec")
    return r.source


def test_golden_prefix_cumsum_at_the_default_segments() -> None:
    assert PREFIX_AFTER != PREFIX
    assert rewritten(PREFIX) == PREFIX_AFTER


def test_segments_given_as_an_int_or_a_launcher_expression() -> None:
    default = "    SEG = max(1, min(triton.cdiv(8 * 132, max(1, x.shape[0])), triton.cdiv(x.shape[1], SCAN_STEP), 64))\n"
    out = rewritten(PREFIX, segments=4)
    # the kernels as at the default; the launcher's first SEG is the one given
    cut = "    SEG = max(1, triton.cdiv("
    assert out[out.index(cut) :] == PREFIX_AFTER[PREFIX_AFTER.index(cut) :]
    kernels = PREFIX_AFTER[: PREFIX_AFTER.index("    # split_scan: each row")]
    assert out.startswith(kernels)
    assert "    SEG = 4\n" in out and default not in out and " SEG given. " in out
    out = rewritten(PREFIX, segments="min(8, x.shape[1] // 4096 + 1)")
    assert "    SEG = min(8, x.shape[1] // 4096 + 1)\n" in out
    (site,) = PASS.forward_sites(PREFIX)
    assert "NOPE, not defined here" in PASS.apply(PREFIX, site, {"segments": "NOPE"}).reason
    for bad in (0, 2.5, True, 65536, "max(1,"):
        r = PASS.apply(PREFIX, site, {"segments": bad})
        assert not r.applied and "params['segments']" in r.reason, bad


def test_registered_forward_only_by_programs() -> None:
    p = all_passes()["split_scan"]
    assert isinstance(p, SplitScan) and isinstance(p, ForwardOnly)
    assert (p.CATEGORY, p.BY_PROGRAMS, p.STRUCTURAL) == ("parallelism", True, True)
    assert p.backward_sites(PREFIX_AFTER) == []
    (site,) = p.forward_sites(PREFIX)
    assert "has no backward rewrite" in p.simplify(PREFIX, site).reason
    assert site.params == {
        "kernel": "prefix_scan_row",
        "programs": "x.shape[0]",
        "k": "x.shape[1]",
        "step": "1024",
    }


def test_the_rewritten_kernels_are_no_sites_again() -> None:
    assert PASS.forward_sites(PREFIX_AFTER) == []
    assert PASS.why_not(PREFIX_AFTER) == [
        "_split_scan_totals_prefix_scan_row: grid `(x.shape[0], SEG)` is not a literal 1-D tuple (programs,)",
        "prefix_scan_row: grid `(x.shape[0], SEG)` is not a literal 1-D tuple (programs,)",
    ]


def test_the_held_out_reverse_cumsum_naive_is_a_site() -> None:
    source = (SRC / "heldout" / "reverse_cumsum_rows" / "naive.py").read_text(encoding="utf-8")
    out = rewritten(source, segments=3)
    # the split is over the loop variable `done`: the walk back from the row's end is kept
    for line in [
        "    for done in range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n), CHUNK):",
        "        pos = (n - 1 - done) - tl.arange(0, CHUNK)",
        "        carried += tl.sum(tl.load(at, mask=earlier < seg, other=0.0), axis=0)",
        "    tl.store(totals + tl.program_id(0).to(tl.int64) * n_seg + seg, carried)",
        "        SEG = 3",
        "        seg_totals = torch.empty((rows, SEG), dtype=torch.float32, device=y.device)",
        "            _split_scan_totals_suffix_scan_row[(rows, SEG)](x, y, n, x.stride(0), CHUNK=SCAN_STEP, totals=seg_totals, n_seg=SEG, seg_len=seg_len)",
        # CHUNK is free (the loop's step and every tl.arange's extent, loads and stores
        # masked): the walk widens from the naive's 64 to the expert's 4096-element tile
        "        SCAN_STEP = max(64, min(4096, triton.next_power_of_2(n)))",
        "        seg_len = SCAN_STEP * max(1, triton.cdiv(triton.cdiv(n, SCAN_STEP), SEG))",
    ]:
        assert line in out, line
    totals = out[out.index("def _split_scan_totals_") : out.index("class ModelNew")]
    assert "tl.store(dst" not in totals and "dst = " not in totals  # the slice: no stores
    assert PASS.forward_sites(out) == []


def test_block_scans_looped_cumsum_is_a_site() -> None:
    naive = (SRC / "kernels" / "cumsum" / "naive.py").read_text(encoding="utf-8")
    assert PASS.forward_sites(naive) == []
    assert "no K loop" in PASS.why_not(naive)[0]
    bs = all_passes()["block_scan"]
    (site,) = bs.forward_sites(naive)
    looped = bs.apply(naive, site)
    assert looped.applied and looped.source is not None, looped.reason
    assert "        carry += tl.sum(x, axis=0)\n" in looped.source
    out = rewritten(looped.source)
    for line in [
        "    for start in range(seg * seg_len, tl.minimum(seg * seg_len + seg_len, n_cols), BLOCK_N):",
        "    SCAN_STEP = max(BLOCK_N, min(4096, triton.next_power_of_2(n_cols)))",
        "    SEG = max(1, min(triton.cdiv(8 * 132, max(1, x2.shape[0])), triton.cdiv(n_cols, SCAN_STEP), 64))",
        "    seg_totals = torch.empty((x2.shape[0], SEG), dtype=torch.float32, device=y2.device)",
        "        HAS_PREFIX=SEG > 1,",
    ]:
        assert line in out, line


def _reason(source: str) -> str:
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    return why


LOOP = "    for c in range(0, n_cols, BLOCK):\n        cols = c + tl.arange(0, BLOCK)\n"
LOAD = "        x = tl.load(x_ptr + r * stride + cols, mask=cols < n_cols, other=0.0)\n"
STORE = "        tl.store(y_ptr + r * stride + cols, y, mask=cols < n_cols)\n"
SCAN = "        y = total + tl.cumsum(x, axis=0)\n"
ADD = "        total += tl.sum(x, axis=0)\n"
START = "    r = tl.program_id(0)\n    total = 0.0\n"
OK = START + LOOP + LOAD + SCAN + STORE + ADD


@pytest.mark.parametrize(
    ("body", "old", "new", "reason"),
    [
        # an exclusive scan: the total read after its update
        (START + LOOP + LOAD + ADD + "        y = total - tl.sum(x, axis=0) + tl.cumsum(x, axis=0) - x\n" + STORE,
         "", "", "total is read after its update"),
        (START + LOOP + LOAD + ADD + "        tl.store(y_ptr + r * stride + cols, total - tl.sum(x, axis=0) + tl.cumsum(x, axis=0))\n",
         "", "", "total is read after its update"),
        (START + LOOP + LOAD + SCAN + ADD + "        tl.store(y_ptr + r * stride + cols, x)\n",
         "", "", "is not the loop's last statement"),
        (START + "    count = 0\n" + LOOP + LOAD + SCAN + STORE + "        count += 1\n" + ADD,
         "", "", "the loop carries count, total"),
        (START + LOOP + LOAD + SCAN + STORE + "        total = total * 0.5 + tl.sum(x, axis=0)\n",
         "", "", "total is updated by more than adding tl.sum(e, axis=0) of a value e free of it"),
        (START + LOOP + LOAD + SCAN + STORE + "        total += tl.sum(x * total, axis=0)\n",
         "", "", "of a value e free of it"),
        (START + LOOP + LOAD + SCAN + STORE + "        total += tl.max(x, axis=0)\n", "", "", "free of it"),
        (START + LOOP + LOAD + SCAN + STORE + "        z = x + total\n        total += tl.sum(z, axis=0)\n",
         "", "", "the added value depends on the running total total (through `z = x + total`)"),
        (OK, "[(x.shape[0],)]", "[(x.shape[0], 1)]", "is not a literal 1-D tuple"),
        ("    r = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n    x = tl.load(x_ptr + r * stride + cols)\n"
         "    tl.store(y_ptr + r * stride + cols, tl.cumsum(x, axis=0))\n", "", "", "no K loop"),
        (OK.replace("range(0, n_cols", "range(BLOCK, n_cols"), "", "", "is not range(0, K, STEP)"),
        (START + "    c = 0\n    while c < n_cols:\n        cols = c + tl.arange(0, BLOCK)\n" + LOAD[4:].replace("    ", "        ", 1)
         + SCAN + STORE + ADD + "        c += BLOCK\n", "", "", "a while loop"),
        ("    r = tl.program_id(0)\n    total = 1.0\n" + LOOP + LOAD + SCAN + STORE + ADD, "", "", "fp32 scalar zero start"),
        ("    r = tl.program_id(0)\n    total = tl.zeros([BLOCK], dtype=tl.float32)\n" + LOOP + LOAD + SCAN + STORE + ADD,
         "", "", "fp32 scalar zero start"),
        # the same address every step: the steps' last write would race across segments
        (START + LOOP + LOAD + SCAN + "        tl.store(y_ptr + r * stride, tl.sum(y, axis=0))\n" + ADD,
         "", "", "0 `c` and 0 tl.arange(0, BLOCK) terms"),
        (START + LOOP + LOAD + SCAN + "        tl.store(y_ptr + r * stride + 2 * cols, y)\n" + ADD, "", "",
         "the store's pointer is not base + c ± c ± tl.arange(0, BLOCK)"),
        (OK + "    tl.store(y_ptr + r * stride, 0.0)\n", "", "", "a store outside the loop"),
        (START + LOOP + LOAD.replace("x_ptr", "y_ptr") + SCAN + STORE + ADD, "", "", "uses the output pointer y_ptr"),
        (START + LOOP + LOAD + "        y = tl.exp(total) + tl.cumsum(x, axis=0)\n" + STORE + ADD,
         "", "", "is used other than linearly in a stored value"),
        (START + LOOP + LOAD + SCAN + "        tl.store(y_ptr + r * stride + cols, y, mask=total < 10.0)\n" + ADD,
         "", "", "is used other than linearly in a stored value"),
        (START + LOOP + LOAD + SCAN + STORE + "        tl.atomic_add(y_ptr + r, 1.0)\n" + ADD, "", "", "atomics"),
        (START + LOOP + LOAD + SCAN + "        if c > 0:\n    " + STORE + ADD, "", "", "a nested if statement"),
        (OK, "def row_cumsum(x):\n    y = torch.empty_like(x)\n", "def row_cumsum(x, y):\n",
         "none of them a tensor the launcher allocates uninitialised"),
        (OK, "    prefix_scan_row[", "    y.zero_()\n    prefix_scan_row[", "`y` is used before the launch"),
        (OK, "        x,\n        y,\n", "        y,\n        y,\n", "`y` is used before the launch or passed to it twice"),
        (OK, "        x.shape[1],\n", "        len(x.tolist()[0]),\n", "may not be evaluated twice"),
    ],
)  # fmt: skip
def test_what_it_cannot_prove_is_skipped_with_the_reason(
    body: str, old: str, new: str, reason: str
) -> None:
    assert old in TAIL
    source = HEAD + body + TAIL.replace(old, new)
    compile(source, "<case>", "exec")
    why = _reason(source)
    assert why.startswith("prefix_scan_row: ") and reason in why, why


def test_the_cases_kernel_without_a_change_is_a_site() -> None:
    # the kernel the cases above change, unchanged: each skip is the change's
    assert len(PASS.forward_sites(HEAD + OK + TAIL)) == 1


# -- the step both kernels take (SCAN_STEP) ------------------------------------------------


def test_a_free_step_widens_to_the_chunk_and_chunk_0_keeps_it() -> None:
    wide = rewritten(PREFIX)
    assert "    SCAN_STEP = max(1024, min(4096, triton.next_power_of_2(x.shape[1])))\n" in wide
    assert "    SCAN_STEP = max(1024, min(8192, " in rewritten(PREFIX, chunk=8192)
    kept = rewritten(PREFIX, chunk=0)
    assert "    SCAN_STEP = 1024\n" in kept and "4096" not in kept
    # either way both launches pass the one local, and nothing else passes the step
    for out in (wide, kept):
        assert out.count("        BLOCK=SCAN_STEP,\n") == 2 and "BLOCK=1024" not in out


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the step read besides the loop's step and the tl.arange extent
        ("        ok = cols < n_cols\n", "        ok = (cols < n_cols) & (cols < c + BLOCK)\n"),
        # another tl.arange extent in the kernel
        ("        ok = cols < n_cols\n", "        ok = cols < n_cols + 0 * tl.arange(0, 8)[0]\n"),
        # an unmasked store: right only where each step ends inside the row
        ("y.to(y_ptr.dtype.element_ty), mask=ok)", "y.to(y_ptr.dtype.element_ty))"),
    ],
    ids=["read-elsewhere", "other-arange", "unmasked"],
)
def test_a_step_that_is_not_free_is_kept(old: str, new: str) -> None:
    source = PREFIX.replace(old, new)
    assert source != PREFIX
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site)
    assert r.applied and r.source is not None, r.reason
    assert "    SCAN_STEP = 1024\n" in r.source and "min(4096" not in r.source


def test_tunables_tables_no_step_of_the_split_kernels() -> None:
    """The segments are whole steps of SCAN_STEP: a step tabled apart in each kernel would let
    the two autotuners split a row two ways (as the 2026-12-06 H200 run's table could).
    Both kernels keep their warps and stages to tune."""
    tun = all_passes()["tunables"]
    for out in (rewritten(PREFIX), rewritten(PREFIX, chunk=0)):
        sites = tun.forward_sites(out)
        assert {s.params["kernel"] for s in sites} == {
            "prefix_scan_row",
            "_split_scan_totals_prefix_scan_row",
        }
        for s in sites:
            assert set(s.params["current"]) == {"num_warps", "num_stages"}, s.params


def test_scaled_segments() -> None:
    assert PASS.scaled({}, 2.0) == {"programs_per_sm": 16, "max_segments": 128}
    assert PASS.scaled({"programs_per_sm": 8, "max_segments": 64}, 0.5) == {
        "programs_per_sm": 4,
        "max_segments": 32,
    }
    assert PASS.scaled({"segments": 3}, 2.0) == {"segments": 6}
    out = rewritten(PREFIX, **PASS.scaled({}, 2.0))
    assert "triton.cdiv(16 * 132, max(1, x.shape[0]))" in out and ", 128))\n" in out


@pytest.mark.parametrize(
    ("key", "bad"),
    [("chunk", 48), ("chunk", -1), ("chunk", True), ("programs_per_sm", 0), ("max_segments", 1.5)],
)
def test_bad_structural_values_are_refused(key: str, bad: object) -> None:
    (site,) = PASS.forward_sites(PREFIX)
    r = PASS.apply(PREFIX, site, {key: bad})
    assert not r.applied and f"params[{key!r}]" in r.reason, r.reason

"""Golden tests for causal_block_skipping: both recognised forms, forward, and skips."""

from __future__ import annotations

from klineage.rewrite import get_pass

SPLIT = """import triton
import triton.language as tl


@triton.jit
def _inner(acc, q, lo, hi, n, CAUSAL: tl.constexpr):
    rows = tl.arange(0, 16)
    for s in range(lo, hi, 16):
        cols = tl.arange(0, 16)
        valid = (s + cols) < n
        if CAUSAL:
            acc += tl.where(rows[:, None] >= (s + cols[None, :]), q, 0.0)
        acc += tl.where(valid[None, :], q, 0.0)
    return acc


@triton.jit
def _kernel(Q, n, CAUSAL: tl.constexpr):
    start = tl.program_id(0)
    acc = tl.zeros([16, 16], dtype=tl.float32)
    q = tl.load(Q)
    if CAUSAL:
        # off-diagonal blocks: no mask
        acc = _inner(acc, q, 0, start * 16, n, False)
        # the diagonal block
        lo = start * 16
        if n % 16 == 0:
            hi = lo + 16
        else:
            hi = tl.minimum(lo + 16, n)
        acc = _inner(acc, q, lo, hi, n, True)
    else:
        acc = _inner(acc, q, 0, n, n, False)
    tl.store(Q, acc)
"""

SPLIT_AFTER = SPLIT.replace(
    """        # off-diagonal blocks: no mask
        acc = _inner(acc, q, 0, start * 16, n, False)
        # the diagonal block
        lo = start * 16
        if n % 16 == 0:
            hi = lo + 16
        else:
            hi = tl.minimum(lo + 16, n)
        acc = _inner(acc, q, lo, hi, n, True)
""",
    """        acc = _inner(acc, q, 0, n, n, True)
""",
)

LOOP = """import triton
import triton.language as tl


@triton.jit
def _attn(O, n, BLOCK: tl.constexpr, CAUSAL: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    hi = (pid + 1) * BLOCK if CAUSAL else n  # stop at the diagonal
    for start in range(0, hi, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        keep = cols[None, :] < n
        if CAUSAL:
            keep = keep & (rows[:, None] >= cols[None, :])
        acc += tl.sum(tl.where(keep, 1.0, 0.0), 1)
    tl.store(O + rows, acc)
"""

LOOP_AFTER = LOOP.replace("(pid + 1) * BLOCK if CAUSAL else n  #", "n  #")


def test_split_backward_drops_the_off_diagonal_call_and_dead_bounds() -> None:
    p = get_pass("causal_block_skipping")
    (site,) = p.backward_sites(SPLIT)
    assert (site.function, site.line, site.params["form"]) == ("_kernel", 24, "split")
    assert site.params["helper"] == "_inner"
    r = p.simplify(SPLIT, site)
    assert r.applied and r.source == SPLIT_AFTER


def test_split_forward_restores_the_segment() -> None:
    p = get_pass("causal_block_skipping")
    (backward,) = p.backward_sites(SPLIT)
    (site,) = p.forward_sites(SPLIT_AFTER)
    assert (site.function, site.params["form"]) == ("_kernel", "split")
    r = p.apply(SPLIT_AFTER, site, backward.params)
    assert r.applied and r.source == SPLIT
    r = p.apply(SPLIT_AFTER, site)
    assert not r.applied and "needs the expert's params" in r.reason


def test_split_keeps_bounds_that_are_still_read() -> None:
    p = get_pass("causal_block_skipping")
    source = SPLIT.replace("    tl.store(Q, acc)\n", "    tl.store(Q + lo, acc)\n")
    r = p.simplify(source, p.backward_sites(source)[0])
    assert r.applied and r.source is not None
    assert "        lo = start * 16\n        acc = _inner(acc, q, 0, n, n, True)" in r.source
    assert "hi = " not in r.source


def test_split_without_a_key_length_is_skipped() -> None:
    p = get_pass("causal_block_skipping")
    source = SPLIT.replace("valid = (s + cols) < n", "valid = cols >= 0")
    (site,) = p.backward_sites(source)
    r = p.simplify(source, site)
    assert not r.applied and "cannot tell the key length" in r.reason


def test_loop_backward_takes_the_non_causal_bound() -> None:
    p = get_pass("causal_block_skipping")
    (site,) = p.backward_sites(LOOP)
    assert (site.function, site.line) == ("_attn", 11)
    assert site.params == {"form": "loop", "bound": "(pid + 1) * BLOCK if CAUSAL else n"}
    r = p.simplify(LOOP, site)
    assert r.applied and r.source == LOOP_AFTER


def test_loop_inline_negated_bound() -> None:
    p = get_pass("causal_block_skipping")
    source = LOOP.replace("(pid + 1) * BLOCK if CAUSAL else n", "n").replace(
        "range(0, hi, BLOCK)", "range(0, n if not CAUSAL else (pid + 1) * BLOCK, BLOCK)"
    )
    (site,) = p.backward_sites(source)
    r = p.simplify(source, site)
    assert r.applied and r.source == LOOP_AFTER.replace("range(0, hi,", "range(0, n,")


def test_loop_forward_restores_params_or_infers_the_diagonal() -> None:
    p = get_pass("causal_block_skipping")
    (backward,) = p.backward_sites(LOOP)
    (site,) = p.forward_sites(LOOP_AFTER)
    assert (site.function, site.line) == ("_attn", backward.line)
    r = p.apply(LOOP_AFTER, site, backward.params)
    assert r.applied and r.source == LOOP
    r = p.apply(LOOP_AFTER, site)
    inferred = "tl.minimum(pid * BLOCK + BLOCK, n) if CAUSAL else n  #"
    assert r.applied and r.source == LOOP_AFTER.replace("n  #", inferred)
    assert "(inferred)" in r.reason


def test_skips_have_reasons() -> None:
    p = get_pass("causal_block_skipping")
    (site,) = p.backward_sites(LOOP)
    r = p.simplify(LOOP_AFTER, site)
    assert not r.applied and "no backward causal-skipping site #0 (loop)" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
    opaque = LOOP_AFTER.replace("rows = pid * BLOCK + tl.arange(0, BLOCK)", "rows = tl.load(O)")
    (fwd,) = p.forward_sites(opaque)
    r = p.apply(opaque, fwd)
    assert not r.applied and "cannot infer the diagonal" in r.reason


def test_loops_without_a_causal_mask_are_not_sites() -> None:
    p = get_pass("causal_block_skipping")
    plain = LOOP.replace("keep = keep & (rows[:, None] >= cols[None, :])", "keep = keep")
    assert p.backward_sites(plain) == []
    assert p.forward_sites(plain.replace("(pid + 1) * BLOCK if CAUSAL else n", "n")) == []

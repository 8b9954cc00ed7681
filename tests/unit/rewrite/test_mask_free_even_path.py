"""Golden tests for mask_free_even_path: before/after snippets, forward, skips with reasons."""

from __future__ import annotations

from klineage.rewrite import get_pass
from klineage.rewrite.base import Site

BEFORE = """import triton
import triton.language as tl


@triton.autotune(configs=[], key=["K"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _k(a_ptr, out_ptr, K, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    offs = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptr + k * BLOCK_K + offs)
        else:
            rem = K - k * BLOCK_K
            a = tl.load(a_ptr + k * BLOCK_K + offs, mask=offs < rem, other=0.0)
        acc += a
    tl.store(out_ptr + offs, acc)
"""

AFTER = """import triton
import triton.language as tl


@triton.autotune(configs=[], key=["K"])
@triton.jit
def _k(a_ptr, out_ptr, K, BLOCK_K: tl.constexpr):
    offs = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        rem = K - k * BLOCK_K
        a = tl.load(a_ptr + k * BLOCK_K + offs, mask=offs < rem, other=0.0)
        acc += a
    tl.store(out_ptr + offs, acc)
"""

# A heuristic named DIVISIBLE, negated branches, `lang` alias, two sites sharing the flag.
TWO_SITES = """import triton
import triton.language as lang


@triton.heuristics(values={"DIVISIBLE": lambda m: m["n"] % m["TILE"] == 0, "W": lambda m: 4})
@triton.jit
def _row(x, y, n, TILE: lang.constexpr, DIVISIBLE: lang.constexpr, W: lang.constexpr):
    i = lang.arange(0, TILE)
    # masked unless TILE divides n
    if not DIVISIBLE:
        v = lang.load(x + i, mask=i < n, other=0.0)
    else:
        v = lang.load(x + i)
    if DIVISIBLE:
        lang.store(y + i, v * W)
    else:
        lang.store(y + i, v * W, mask=i < n)
"""

TWO_SITES_FIRST = TWO_SITES.replace(
    """    # masked unless TILE divides n
    if not DIVISIBLE:
        v = lang.load(x + i, mask=i < n, other=0.0)
    else:
        v = lang.load(x + i)
""",
    """    v = lang.load(x + i, mask=i < n, other=0.0)
""",
)

TWO_SITES_BOTH = """import triton
import triton.language as lang


@triton.heuristics(values={"W": lambda m: 4})
@triton.jit
def _row(x, y, n, TILE: lang.constexpr, W: lang.constexpr):
    i = lang.arange(0, TILE)
    v = lang.load(x + i, mask=i < n, other=0.0)
    lang.store(y + i, v * W, mask=i < n)
"""

INLINE = """import triton
import triton.language as tl


@triton.jit
def _q(Q, Out, N_CTX: tl.constexpr, BLOCK_M: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    if N_CTX % BLOCK_M == 0:
        q = tl.load(Q + offs_m)
    else:
        q = tl.load(Q + offs_m, mask=offs_m < N_CTX, other=0.0)
    tl.store(Out + offs_m, q, mask=offs_m < N_CTX)
"""


def test_backward_keeps_the_masked_path_and_drops_the_flag() -> None:
    p = get_pass("mask_free_even_path")
    sites = p.backward_sites(BEFORE)
    assert [(s.function, s.line) for s in sites] == [("_k", 12)]
    assert sites[0].params == {
        "kind": "heuristic",
        "flag": "EVEN_K",
        "heuristic": 'lambda args: args["K"] % args["BLOCK_K"] == 0',
        "param_index": 4,
        "negated": False,
        "statements": 2,  # what the masked branch held, for forward to wrap the same run
        "leading_helpers": 1,
    }
    r = p.simplify(BEFORE, sites[0])
    assert r.applied and r.source == AFTER


def test_forward_restores_the_expert_text_from_the_backward_params() -> None:
    p = get_pass("mask_free_even_path")
    (backward,) = p.backward_sites(BEFORE)
    (site,) = p.forward_sites(AFTER)
    assert (site.function, site.line, site.params) == ("_k", 11, {"dim": "K", "block": "BLOCK_K"})
    r = p.apply(AFTER, site, backward.params)
    assert r.applied and r.source == BEFORE


def test_forward_without_params_infers_the_flag_from_the_masks() -> None:
    p = get_pass("mask_free_even_path")
    (site,) = p.forward_sites(AFTER)
    r = p.apply(AFTER, site)
    assert r.applied and r.source is not None
    assert (
        '@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})' in r.source
    )
    assert "BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):" in r.source
    assert "        if EVEN_K:\n            a = tl.load(a_ptr + k * BLOCK_K + offs)\n" in r.source


def test_a_shared_flag_goes_only_with_its_last_use() -> None:
    p = get_pass("mask_free_even_path")
    sites = p.backward_sites(TWO_SITES)
    assert [(s.line, s.params["negated"]) for s in sites] == [(10, True), (14, False)]
    first = p.simplify(TWO_SITES, sites[0])
    assert first.applied and first.source == TWO_SITES_FIRST  # flag still used below
    (second,) = p.backward_sites(first.source)
    both = p.simplify(first.source, second)
    assert both.applied and both.source == TWO_SITES_BOTH  # other heuristic entries stay
    # Forward puts the negated branch back the way the expert wrote it.
    fwd = next(s for s in p.forward_sites(TWO_SITES_FIRST) if s.line == 9)
    r = p.apply(TWO_SITES_FIRST, fwd, {**sites[0].params})
    assert r.applied and r.source is not None
    assert r.source == TWO_SITES.replace("    # masked unless TILE divides n\n", "")


def test_inline_divisibility_test_round_trips() -> None:
    p = get_pass("mask_free_even_path")
    (site,) = p.backward_sites(INLINE)
    assert site.params == {
        "kind": "inline",
        "test": "N_CTX % BLOCK_M == 0",
        "negated": False,
        "statements": 1,
        "leading_helpers": 0,
    }
    r = p.simplify(INLINE, site)
    assert r.applied and r.source is not None
    assert "if N_CTX" not in r.source
    assert "    q = tl.load(Q + offs_m, mask=offs_m < N_CTX, other=0.0)\n" in r.source
    fwd = p.forward_sites(r.source)
    assert [s.line for s in fwd] == [8]  # one site per run of masked statements
    back = p.apply(r.source, fwd[0], site.params)
    assert back.applied and back.source == INLINE  # the expert's `if` held the load only
    both = p.apply(r.source, fwd[0], {"kind": "inline", "test": "N_CTX % BLOCK_M == 0"})
    assert both.applied and both.source is not None  # without the shape: the whole run
    assert "        q = tl.load(Q + offs_m)\n        tl.store(Out + offs_m, q)\n" in both.source


def test_masks_on_two_dimensions_are_not_a_forward_site() -> None:
    src = """import triton
import triton.language as tl


@triton.jit
def _k(X, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(X + rm[:, None] * N + rn[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N))
    tl.store(X + rm[:, None] * N + rn[None, :], x + 1, mask=(rm[:, None] < M) & (rn[None, :] < N))
"""
    assert get_pass("mask_free_even_path").forward_sites(src) == []


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("mask_free_even_path")
    (site,) = p.backward_sites(BEFORE)
    r = p.simplify(AFTER, site)
    assert not r.applied and "no even/ragged `if` #0" in r.reason
    # A constexpr flag the launcher passes (no heuristic, no divisibility test) is not a site.
    launcher_flag = BEFORE.replace(
        '@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})\n', ""
    )
    assert p.backward_sites(launcher_flag) == []
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
    fwd = Site("mask_free_even_path", "forward", 3, 1, "_k", "")
    r = p.apply(AFTER, fwd, {})
    assert not r.applied and "no masked load/store run #3" in r.reason


def test_an_experts_flag_on_another_dimension_is_rebuilt_for_this_kernel() -> None:
    row = """import triton
import triton.language as tl


@triton.jit
def _row(x, y, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    v = tl.load(x + i, mask=i < n, other=0.0)
    tl.store(y + i, v, mask=i < n)
"""
    p = get_pass("mask_free_even_path")
    (expert,) = p.backward_sites(BEFORE)  # EVEN_K on K % BLOCK_K: not this kernel's names
    (site,) = p.forward_sites(row)
    assert site.params == {"dim": "n", "block": "BLOCK"}
    r = p.apply(row, site, expert.params)
    assert r.applied and r.source == row.replace(
        "@triton.jit\ndef _row(x, y, n, BLOCK: tl.constexpr):",
        '@triton.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})\n'
        "@triton.jit\ndef _row(x, y, n, BLOCK: tl.constexpr, EVEN_N: tl.constexpr):",
    ).replace(
        "    v = tl.load(x + i, mask=i < n, other=0.0)\n    tl.store(y + i, v, mask=i < n)\n",
        "    if EVEN_N:\n        v = tl.load(x + i)\n        tl.store(y + i, v)\n    else:\n"
        "        v = tl.load(x + i, mask=i < n, other=0.0)\n        tl.store(y + i, v, mask=i < n)\n",
    )


def test_masks_over_other_blocks_of_one_dimension_get_their_own_flag() -> None:
    # On the H200 one EVEN_SEQLEN (seqlen % BLOCK_KV) also guarded the BLOCK_Q-tiled query load
    # and output store: with BLOCK_Q not dividing seqlen the store ran past the output.
    from klineage.optimize.materialize import mechanical

    two = """import triton
import triton.language as tl


@triton.jit
def _two(x, y, n, BQ: tl.constexpr, BK: tl.constexpr):
    q = tl.program_id(0) * BQ + tl.arange(0, BQ)
    a = tl.load(x + q, mask=q < n, other=0.0)
    acc = tl.zeros((BQ,), dtype=tl.float32)
    for k0 in range(0, n, BK):
        kk = k0 + tl.arange(0, BK)
        b = tl.load(x + kk, mask=kk < n, other=0.0)
        acc += tl.sum(b, 0)
    tl.store(y + q, a + acc, mask=q < n)
"""
    m = mechanical(two, "mask_free_even_path")
    assert m.source is not None and m.sites == 3, m.reason
    assert '"EVEN_N": lambda args: args["n"] % args["BK"] == 0' in m.source
    assert '"EVEN_N_BQ": lambda args: args["n"] % args["BQ"] == 0' in m.source
    assert "        if EVEN_N:\n            b = tl.load(x + kk)\n" in m.source
    assert "    if EVEN_N_BQ:\n        a = tl.load(x + q)\n" in m.source
    assert "    if EVEN_N_BQ:\n        tl.store(y + q, a + acc)\n" in m.source

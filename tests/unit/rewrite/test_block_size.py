"""Golden tests for block_size: before/after on snippets, forward, skips with reasons."""

from __future__ import annotations

from klineage.rewrite import get_pass

BEFORE = """import triton
import triton.language as tl

TILE_ELEMENTS = 4096
SMALL_TILE = tl.constexpr(16)
NUM_BLOCKS = 64
UNUSED_BLOCK = 512

_CONFIGS = [triton.Config({"BLOCK_M": 128, "GROUP_SIZE_M": 8}, num_warps=4)]


@triton.autotune(configs=_CONFIGS, key=["n"])
@triton.jit
def _k(X, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr = 64, tile_k: tl.constexpr = 33):
    pass


def launch(x, n):
    block_m, BLOCK_N = 32, 64
    ROWS = triton.next_power_of_2(n)
    _k[(1,)](x, n, BLOCK_N=BLOCK_N, ROWS=ROWS, BLOCK_K=256, TILE=TILE_ELEMENTS // 2)
    return block_m + NUM_BLOCKS + SMALL_TILE
"""

# (name, value, line, function) of every site, and BEFORE with that one site halved.
EXPECTED = [
    ("TILE_ELEMENTS", 4096, 4, "", "TILE_ELEMENTS = 2048\n"),
    ("SMALL_TILE", 16, 5, "", None),  # 8 would be below 16
    ("BLOCK_M", 128, 9, "", '{"BLOCK_M": 64, "GROUP_SIZE_M": 8}'),
    ("BLOCK_N", 64, 14, "_k", "BLOCK_N: tl.constexpr = 32,"),
    ("tile_k", 33, 14, "_k", None),  # odd
    ("block_m", 32, 19, "launch", "block_m, BLOCK_N = 16, 64"),
    ("BLOCK_N", 64, 19, "launch", "block_m, BLOCK_N = 32, 32"),
    ("ROWS", None, 20, "launch", None),  # computed at run time
    ("BLOCK_K", 256, 21, "launch", "BLOCK_K=128,"),
    ("TILE", None, 21, "launch", None),  # computed at run time
]
ORIGINAL = {
    "TILE_ELEMENTS = 2048\n": "TILE_ELEMENTS = 4096\n",
    '{"BLOCK_M": 64, "GROUP_SIZE_M": 8}': '{"BLOCK_M": 128, "GROUP_SIZE_M": 8}',
    "BLOCK_N: tl.constexpr = 32,": "BLOCK_N: tl.constexpr = 64,",
    "block_m, BLOCK_N = 16, 64": "block_m, BLOCK_N = 32, 64",
    "block_m, BLOCK_N = 32, 32": "block_m, BLOCK_N = 32, 64",
    "BLOCK_K=128,": "BLOCK_K=256,",
}


def test_backward_finds_block_bindings_and_not_counts_or_unused_names() -> None:
    p = get_pass("block_size")
    sites = p.backward_sites(BEFORE)
    got = [(s.params["name"], s.params["value"], s.line, s.function) for s in sites]
    assert got == [e[:4] for e in EXPECTED]
    assert "NUM_BLOCKS" not in {s.params["name"] for s in sites}
    assert "GROUP_SIZE_M" not in {s.params["name"] for s in sites}


def test_each_literal_is_halved_alone() -> None:
    p = get_pass("block_size")
    for site, (_, _, _, _, halved) in zip(p.backward_sites(BEFORE), EXPECTED, strict=True):
        r = p.simplify(BEFORE, site)
        if halved is None:
            continue
        assert r.applied, r.reason
        assert r.source == BEFORE.replace(ORIGINAL[halved], halved, 1)


def test_skips_say_why() -> None:
    p = get_pass("block_size")
    reasons = {s.index: p.simplify(BEFORE, s).reason for s in p.backward_sites(BEFORE)}
    assert reasons[1] == "SMALL_TILE=16: halving would give 8, below the minimum 16"
    assert reasons[4] == "tile_k=33 is odd: it cannot be halved"
    assert reasons[7] == (
        "ROWS = triton.next_power_of_2(n) is computed at run time, not a literal to resize"
    )
    assert "TILE_ELEMENTS // 2 is computed at run time" in reasons[9]


def test_forward_sets_the_experts_value() -> None:
    p = get_pass("block_size")
    for backward in p.backward_sites(BEFORE):
        r = p.simplify(BEFORE, backward)
        if not r.applied:
            continue
        assert r.source is not None
        site = next(s for s in p.forward_sites(r.source) if s.index == backward.index)
        assert (site.line, site.params["name"]) == (backward.line, backward.params["name"])
        back = p.apply(r.source, site, backward.params)
        assert back.applied and back.source == BEFORE


def test_forward_grows_by_default_and_rejects_bad_params() -> None:
    p = get_pass("block_size")
    site = p.forward_sites(BEFORE)[0]
    assert site.params == {"name": "TILE_ELEMENTS", "value": 8192}
    r = p.apply(BEFORE, site)
    assert r.applied and r.source is not None and "TILE_ELEMENTS = 8192\n" in r.source
    r = p.apply(BEFORE, site, {"name": "TILE_ELEMENTS", "value": "big"})
    assert not r.applied and "must be a positive int" in r.reason
    r = p.apply(BEFORE, site, {"name": "BLOCK_Q", "value": 64})
    assert not r.applied and "is TILE_ELEMENTS, not BLOCK_Q" in r.reason
    assert all(s.params["value"] is not None for s in p.forward_sites(BEFORE))


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("block_size")
    site = p.backward_sites(BEFORE)[0]
    halved = p.simplify(BEFORE, site).source
    assert halved is not None
    r = p.simplify(halved, site)  # the recorded 4096 is 2048 now
    assert not r.applied and "is 2048 here, the site recorded 4096" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
    r = p.simplify("x = 1\n", site)
    assert not r.applied and "no block size #0" in r.reason

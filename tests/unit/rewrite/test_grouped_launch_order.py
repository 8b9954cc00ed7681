"""Golden tests for grouped_launch_order: before/after snippets, forward, skips with reasons."""

from __future__ import annotations

from klineage.rewrite import get_pass
from klineage.rewrite.base import Site

# The Triton tutorial's form, inside a helper as the matmul expert writes it.
BEFORE = """import triton
import triton.language as tl


@triton.jit
def _pid(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
"""

AFTER = """import triton
import triton.language as tl


@triton.jit
def _pid(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    return pid_m, pid_n
"""

# Other names, operand orders swapped, a literal group, the older `pid % size` form, and a
# tile-row count that is used elsewhere (so it stays).
INLINE = """import triton
import triton.language as lang


@triton.jit
def _mm(C, M, N, BM: lang.constexpr, BN: lang.constexpr):
    t = lang.program_id(axis=0)
    rows = lang.cdiv(M, BM)
    cols = lang.cdiv(N, BN)
    width = cols * 4
    band = t // width
    top = 4 * band
    h = min(4, rows - top)
    tm = (t % h) + top
    tn = (t % width) // h
    lang.store(C + tm * cols + tn, rows)
"""


def test_backward_gives_row_major_order_and_drops_the_group_arithmetic() -> None:
    p = get_pass("grouped_launch_order")
    (site,) = p.backward_sites(BEFORE)
    assert (site.function, site.line) == ("_pid", 13)
    assert site.params == {
        "group": "GROUP_SIZE_M",
        "num_pid_m": "num_pid_m",
        "num_pid_m_expr": "tl.cdiv(M, BLOCK_M)",
        "min_fn": "tl.minimum",
        "names": {
            "group": "num_pid_in_group",
            "gid": "group_id",
            "first": "first_pid_m",
            "size": "group_size_m",
        },
    }
    r = p.simplify(BEFORE, site)
    assert r.applied and r.source == AFTER


def test_forward_restores_the_expert_text_from_the_backward_params() -> None:
    p = get_pass("grouped_launch_order")
    (backward,) = p.backward_sites(BEFORE)
    (site,) = p.forward_sites(AFTER)
    assert (site.line, site.params) == (8, {"group": "GROUP_SIZE_M"})  # found in the signature
    r = p.apply(AFTER, site, backward.params)
    assert r.applied and r.source == BEFORE


def test_structure_not_names_is_recognised() -> None:
    p = get_pass("grouped_launch_order")
    (site,) = p.backward_sites(INLINE)
    assert site.params["group"] == "4" and site.params["names"]["size"] == "h"
    r = p.simplify(INLINE, site)
    assert r.applied and r.source == INLINE.replace(
        """    width = cols * 4
    band = t // width
    top = 4 * band
    h = min(4, rows - top)
    tm = (t % h) + top
    tn = (t % width) // h
""",
        """    tm = t // cols
    tn = t % cols
""",
    )
    (fwd,) = p.forward_sites(r.source)
    back = p.apply(r.source, fwd, site.params)
    assert back.applied and back.source is not None
    assert "    h = min(rows - top, 4)\n    tm = top + ((t % width) % h)\n" in back.source


def test_a_helper_given_the_tile_counts_round_trips() -> None:
    src = """import triton
import triton.language as tl


@triton.jit
def _pid(pid, num_pid_m, num_pid_n, G: tl.constexpr):
    num_pid_in_group = G * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * G
    group_size_m = min(num_pid_m - first_pid_m, G)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
"""
    p = get_pass("grouped_launch_order")
    (site,) = p.backward_sites(src)
    r = p.simplify(src, site)
    assert r.applied and r.source is not None
    assert r.source.endswith(
        "    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n    return pid_m, pid_n\n"
    )
    (fwd,) = p.forward_sites(r.source)  # num_pid_n is a parameter, like pid
    back = p.apply(r.source, fwd, site.params)
    assert back.applied and back.source == src


def test_forward_needs_a_group_size() -> None:
    src = """import triton
import triton.language as tl


@triton.jit
def _k(C, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    tl.store(C + pid_m * num_pid_n + pid_n, pid)
"""
    p = get_pass("grouped_launch_order")
    (site,) = p.forward_sites(src)
    r = p.apply(src, site)
    assert not r.applied and "pass params={'group': 8}" in r.reason
    r = p.apply(src, site, {"group": "GROUP_SIZE_M"})  # the expert's name, absent here
    assert not r.applied and "neither a literal nor a parameter of _k" in r.reason
    r = p.apply(src, site, {"group": "8"})
    assert r.applied and r.source == src.replace(
        """    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
""",
        """    num_pid_m = tl.num_programs(0) // num_pid_n
    num_pid_in_group = 8 * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * 8
    group_size_m = tl.minimum(num_pid_m - first_pid_m, 8)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
""",
    )


def test_non_tile_decompositions_and_errors_are_not_sites() -> None:
    p = get_pass("grouped_launch_order")
    heads = """import triton
import triton.language as tl


@triton.jit
def _attn(O, H):
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    tl.store(O + off_z * H + off_h, 0.0)
"""
    assert p.forward_sites(heads) == []  # H is not a tile count (no cdiv)
    assert p.backward_sites(AFTER) == []
    (site,) = p.backward_sites(BEFORE)
    r = p.simplify(AFTER, site)
    assert not r.applied and "no grouped pid computation #0" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
    r = p.apply(BEFORE, Site("grouped_launch_order", "forward", 0, 1, "_pid", ""), {})
    assert not r.applied and "no row-major pid mapping #0" in r.reason

"""block_size keeps a launch's grid consistent with the block size it changes (issue 15): a
naive kernel launched with BLOCK=64 and grid cdiv(n, 64), set to 128 at the launch alone, ran
twice the programs it needed on the H200; halved alone, it would cover half the elements."""

from __future__ import annotations

from klineage.rewrite import all_passes

SRC = """import torch, triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def run(x):
    y = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, 64),)
    _k[grid](x, y, n, BLOCK=64)
    _k[((n + 63) // 64,)](x, y, n, BLOCK=64)
    _k[(n // 64,)](x, y, n, BLOCK=64)
    return y
"""


def _lines(src: str) -> list[str]:
    return [line.strip() for line in src.splitlines() if "grid" in line or "_k[" in line]


def test_forward_sets_the_block_and_the_grids_tile_count_together() -> None:
    p = all_passes()["block_size"]
    sites = p.forward_sites(SRC)
    assert len(sites) == 3
    got = [_lines(p.apply(SRC, s, {"value": 1024}).source) for s in sites]
    assert got[0][:2] == ["grid = (triton.cdiv(n, 1024),)", "_k[grid](x, y, n, BLOCK=1024)"]
    assert got[1][2] == "_k[((n + 1023) // 1024,)](x, y, n, BLOCK=1024)"
    assert got[2][3] == "_k[(n // 1024,)](x, y, n, BLOCK=1024)"
    assert "tile count" in p.apply(SRC, sites[0], {"value": 1024}).reason


def test_backward_halves_both() -> None:
    p = all_passes()["block_size"]
    first = p.backward_sites(SRC)[0]
    r = p.simplify(SRC, first)
    assert r.applied and _lines(r.source)[:2] == [
        "grid = (triton.cdiv(n, 32),)",
        "_k[grid](x, y, n, BLOCK=32)",
    ]


def test_a_grid_shared_by_two_launches_is_not_resized_under_one_of_them() -> None:
    p = all_passes()["block_size"]
    shared = SRC.replace(
        "    _k[((n + 63) // 64,)](x, y, n, BLOCK=64)\n", "    _k[grid](x, y, n, BLOCK=64)\n"
    )
    r = p.apply(shared, p.forward_sites(shared)[0], {"value": 128})
    assert not r.applied and "shared with 1 other launch" in r.reason


def test_a_grid_that_does_not_count_tiles_of_the_block_is_left_alone() -> None:
    p = all_passes()["block_size"]
    src = SRC.replace("grid = (triton.cdiv(n, 64),)", "grid = (triton.cdiv(n, 256),)")
    r = p.apply(src, p.forward_sites(src)[0], {"value": 128})
    assert (
        r.applied
        and _lines(r.source)[0] == "grid = (triton.cdiv(n, 256),)"
        and "tile count" not in r.reason
    )

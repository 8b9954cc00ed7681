"""split_online (rewrite/passes/split_online.py): source rewrites only, no kernels run;
tests/interp/test_split_online.py runs them."""

from __future__ import annotations

import pytest

from klineage.optimize.materialize import mechanical
from klineage.rewrite import all_passes
from tests.conftest import ROOT

PASS = all_passes()["split_online"]
NAIVE = (ROOT / "src" / "klineage" / "heldout" / "column_softmax" / "naive.py").read_text()


def online(tiled: bool) -> str:
    source = mechanical(NAIVE, "column_tiling").source if tiled else NAIVE
    made = mechanical(source or "", "online_softmax").source
    assert made is not None
    return made


def split(source: str, params: dict | None = None) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site, params)
    assert r.applied and r.source, r.reason
    return r.source


def test_the_column_tiled_online_softmax_becomes_two_kernels_over_segments() -> None:
    out = split(online(tiled=True))
    stats, write = out.split("def softmax_down_stats(")[1].split("def softmax_down(")
    # the stats kernel: the online walk over its segment, its partials stored one slot a program
    assert "for r0 in range(seg_lo, tl.minimum(seg_lo + seg_len, M), CHUNK):" in stats
    assert "peak_new = tl.maximum(peak, tl.max(" in stats and "tl.store(y_ptr" not in stats
    assert (
        "slot = (seg * tl.num_programs(0) + tl.program_id(0)) * (BLOCK_N) + tl.arange(0, BLOCK_N)"
        in stats
    )
    assert "tl.store(stats_ptr + n_stats + slot, tl.reshape(denom, (BLOCK_N,)))" in stats
    # the write kernel: the partials combined by the walk's own rescale, then its segment written
    assert "peak = tl.maximum(peak, tl.reshape(tl.load(stats_ptr + slot), (1, BLOCK_N)))" in write
    assert 'peak_ref = tl.where(peak == float("-inf"), 0.0, peak)' in write
    assert (
        "denom += tl.reshape(tl.load(stats_ptr + n_stats + slot), (1, BLOCK_N)) * tl.exp(part_peak - peak_ref)"
        in write
    )
    assert "for r0 in range(seg_lo, tl.minimum(seg_lo + seg_len, M), CHUNK):" in write
    assert "tl.store(y_ptr" in write and "peak_new" not in write
    # the launcher: split_k's default split, one workspace, both kernels over (n, SEGMENTS)
    assert (
        "SEGMENTS = max(1, min(512, triton.cdiv(4 * 132, triton.cdiv(N, BLOCK_N)), triton.cdiv(M, 32)))"
        in out
    )
    assert (
        "stats = torch.empty(2 * SEGMENTS * triton.cdiv(N, BLOCK_N) * (BLOCK_N), device=y.device, dtype=torch.float32)"
        in out
    )
    assert out.index("softmax_down_stats[(triton.cdiv(N, BLOCK_N), SEGMENTS)]") < out.index(
        "softmax_down[(triton.cdiv(N, BLOCK_N), SEGMENTS)]"
    )
    assert PASS.forward_sites(out) == []  # not again


def test_a_scalar_walk_per_program_stores_one_value_a_program() -> None:
    out = split(online(tiled=False))
    assert "slot = seg * tl.num_programs(0) + tl.program_id(0)\n" in out
    assert "tl.store(stats_ptr + slot, peak)" in out
    assert "peak = tl.maximum(peak, tl.load(stats_ptr + slot))" in out
    assert "stats = torch.empty(2 * SEGMENTS * N * 1, device=y.device" in out


def test_params_set_the_split_and_scaled_halves_it() -> None:
    assert "SEGMENTS = 8\n" in split(online(tiled=True), {"split": 8})
    half = PASS.scaled({}, 0.5)
    assert half == {"programs": 264, "max_split": 256}
    assert "min(256, triton.cdiv(264," in split(online(tiled=True), half)
    site = PASS.forward_sites(online(tiled=True))[0]
    bad = PASS.apply(online(tiled=True), site, {"split": 0})
    assert not bad.applied and "expected an int >= 1 and <= 65535" in bad.reason


def _variant(old: str, new: str) -> str:
    source = online(tiled=True)
    assert old in source, old
    return source.replace(old, new)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("        return y\n", "        return y\n", ""),  # unchanged: a site
        ('peak = tl.full((1, BLOCK_N), float("-inf"), tl.float32)', "peak = tl.full((1, BLOCK_N), 0.0, tl.float32)",
         "does not start at -inf"),
        ("denom = tl.full((1, BLOCK_N), 0.0, tl.float32)", "denom = tl.full((1, BLOCK_N), 1.0, tl.float32)",
         "does not start at 0"),
        ("p.to(y_ptr.dtype.element_ty), mask=(r < M) & col_ok)\n",
         "p.to(y_ptr.dtype.element_ty), mask=(r < M) & col_ok)\n    tl.store(y_ptr, 0.0)\n",
         "nothing after them"),
        ("    for r0 in range(0, M, CHUNK):\n        r = r0 + lanes\n        a = tl.load(x_ptr + r * ld + col, mask=(r < M) & col_ok, other=0.0)",
         "    for r0 in range(0, M, 2 * CHUNK):\n        r = r0 + lanes\n        a = tl.load(x_ptr + r * ld + col, mask=(r < M) & col_ok, other=0.0)",
         "headers are not one"),
        ("softmax_down[(triton.cdiv(N, BLOCK_N),)]", "softmax_down[lambda meta: (triton.cdiv(N, BLOCK_N),)]",
         "not a literal 1-D tuple"),
    ],
)  # fmt: skip
def test_skips_say_why(old: str, new: str, reason: str) -> None:
    source = _variant(old, new)
    if not reason:
        assert PASS.forward_sites(source)
        return
    assert PASS.forward_sites(source) == []
    (why,) = PASS.why_not(source)
    assert reason in why, why


def test_the_split_k_skill_is_written_by_split_online_on_the_online_column_softmax() -> None:
    """retrieve's OTHER_FORMS: the same optimization (a long walk split over programs, learned
    from the colsum expert with its condition on the program count) for this code's shape."""
    from klineage.problem.shapes import features, regime_shapes
    from klineage.skills.library import load_library
    from klineage.skills.retrieve import retrieve

    where = ROOT / "src" / "klineage" / "heldout" / "column_softmax"
    shipped, _ = load_library(None)
    shapes = regime_shapes(where / "problem.py")
    gpu = ("tall_fp16", "wide_bf16")
    found = retrieve(shipped, where / "problem.py", where / "naive.py", "cuda", "9.0",
                     source=online(tiled=True), target={r: features(shapes[r]) for r in gpu},
                     shapes={r: shapes[r]["shapes"] for r in gpu})  # fmt: skip
    r = next(x for x in found if x.skill.rewrite.pass_name == "split_k")
    assert r.selected and r.pass_name == "split_online" and r.materializer == "mechanical", (
        r.reasons
    )
    assert any("written by split_online" in x for x in r.reasons)

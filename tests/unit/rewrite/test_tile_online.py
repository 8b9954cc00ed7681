"""tile_online (rewrite/passes/tile_online.py): source rewrites only, no kernels run;
tests/interp/test_tile_online.py runs them."""

from __future__ import annotations

import pytest

from klineage.rewrite import all_passes
from tests.conftest import ROOT
from tests.unit.rewrite.test_split_online import online, split

PASS = all_passes()["tile_online"]
WHERE = ROOT / "src" / "klineage" / "heldout" / "column_softmax"


def forward(source: str) -> str:
    (site,) = PASS.forward_sites(source)
    r = PASS.apply(source, site)
    assert r.applied and r.source, r.reason
    return r.source


def test_golden_the_split_column_softmax_keeps_its_pair_per_element_of_the_tile() -> None:
    out = forward(split(online(tiled=True)))
    stats, write = out.split("def softmax_down_stats(")[1].split("def softmax_down(")
    assert (
        '    peak_tile = tl.full((CHUNK, BLOCK_N), float("-inf"), tl.float32)\n'
        "    denom_tile = tl.full((CHUNK, BLOCK_N), 0.0, tl.float32)\n"
        "    for r0 in range(seg_lo, tl.minimum(seg_lo + seg_len, M), CHUNK):\n"
    ) in stats
    assert (
        "        x_step = a.to(tl.float32)\n"
        "        peak_step = tl.maximum(peak_tile, x_step)\n"
        '        ref_step = tl.where(peak_step == float("-inf"), 0.0, peak_step)\n'
        "        e_step = tl.exp(tl.minimum(peak_tile, x_step) - ref_step)\n"
        "        denom_tile = tl.where(x_step > peak_tile, denom_tile * e_step + 1.0, denom_tile + e_step)\n"
        "        peak_tile = peak_step\n"
        "    peak_new = tl.maximum(peak, tl.max(peak_tile, axis=0, keep_dims=True))\n"
        '    peak_ref = tl.where(peak_new == float("-inf"), 0.0, peak_new)\n'
        "    denom = denom * tl.exp(peak - peak_ref) + tl.sum(denom_tile * tl.exp(peak_tile - peak_ref), axis=0, keep_dims=True)\n"
        "    peak = peak_new\n"
    ) in stats
    # one exp an element a step in the loop, none of the walk's reductions left in it
    loop = stats.split("for r0 in range(")[1].split("    peak_new =")[0]
    assert loop.count("tl.exp(") == 1 and "tl.max(" not in loop and "tl.sum(" not in loop
    assert write == split(online(tiled=True)).split("def softmax_down(")[1]  # the write kernel
    assert PASS.forward_sites(out) == []  # not twice


def test_the_untiled_online_walk_keeps_a_1d_tile() -> None:
    out = forward(online(tiled=False))
    assert '    peak_tile = tl.full((CHUNK,), float("-inf"), tl.float32)\n' in out


def _variant(old: str, new: str) -> str:
    source = split(online(tiled=True))
    assert old in source, old
    return source.replace(old, new)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ('tl.where(peak_new == float("-inf"), 0.0, peak_new)', "peak_new",
         "is not `tl.where(peak_new"),
        ("tl.sum(tl.exp(a.to(tl.float32) - peak_ref)", "tl.sum(tl.exp(a - peak_ref)",
         "of the maximum's E"),
        ("lanes = tl.arange(0, CHUNK)[:, None]\n    peak", "lanes = tl.arange(0, M)[:, None]\n    peak",
         "dimension M is not a tl.constexpr"),
    ],
)  # fmt: skip
def test_skips_say_why(old: str, new: str, reason: str) -> None:
    source = _variant(old, new)
    assert PASS.forward_sites(source) == []
    why = [w for w in PASS.why_not(source) if "softmax_down_stats" in w]
    assert len(why) == 1 and reason in why[0], why


def test_the_walk_exp2_log2e_wrote_is_not_matched() -> None:
    from klineage.optimize.materialize import mechanical

    source = mechanical(split(online(tiled=True)), "exp2_log2e").source
    assert source is not None and "tl.exp2(" in source
    assert PASS.forward_sites(source) == []
    why = [w for w in PASS.why_not(source) if "softmax_down_stats" in w]
    assert len(why) == 1 and "exp2_log2e's forms are not matched" in why[0], why


def test_the_tile_accumulator_skill_is_written_by_tile_online_on_the_split_walk() -> None:
    """retrieve's OTHER_FORMS: the shipped tile_accumulator skill finds no per-step update of
    one accumulator in the online walk; tile_online writes it there."""
    from klineage.problem.shapes import features, regime_shapes
    from klineage.skills.library import load_library
    from klineage.skills.retrieve import retrieve

    shipped, _ = load_library(None)
    shapes = regime_shapes(WHERE / "problem.py")
    gpu = ("tall_fp16", "wide_bf16")
    source = split(online(tiled=True))
    assert all_passes()["tile_accumulator"].forward_sites(source) == []
    found = retrieve(shipped, WHERE / "problem.py", WHERE / "naive.py", "cuda", "9.0",
                     source=source, target={r: features(shapes[r]) for r in gpu},
                     shapes={r: shapes[r]["shapes"] for r in gpu})  # fmt: skip
    r = next(x for x in found if x.skill.rewrite.pass_name == "tile_accumulator")
    assert r.pass_name == "tile_online" and r.materializer == "mechanical", r.reasons
    assert any("written by tile_online" in x for x in r.reasons)

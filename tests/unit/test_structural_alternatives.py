"""An alternative to a kept structural rewrite (no kernels run): the skill passed over when
another was kept first, tried on the kernel it was selected on."""

from __future__ import annotations

from collections.abc import Iterator

from klineage.lineage.walk import sha
from klineage.optimize.materialize import mechanical
from klineage.optimize.policies import Context, Proposal, get_policy
from tests.conftest import ROOT, heldout_context

TRANSPOSE = ROOT / "src" / "klineage" / "heldout" / "batched_transpose_last2"


def _context() -> Context:
    return heldout_context("batched_transpose_last2", ("heads", "few_large_fp16"))


def _until(
    proposals: Iterator[Proposal], ctx: Context, name: str, gains: dict[str, float]
) -> tuple[Proposal, list[Proposal]]:
    """Proposals up to the first of pass `name`, each gated as correct and not faster."""
    seen = []
    for prop in proposals:
        seen.append(prop)
        if prop.pass_name == name:
            return prop, seen
        ctx.last_accepted = True
        ctx.gains.update(gains)
    raise AssertionError(f"{name} never proposed: {[p.key for p in seen]}")


def _prop(name: str, predicted: float | None, materializer: str = "mechanical") -> Proposal:
    """A passed-over proposal of pass `name` with its predicted gain."""
    return Proposal(key=f"skill:{name}", label=name, materializer=materializer,
                    pass_name=name, predicted=predicted)  # fmt: skip


def test_a_skill_passed_over_by_a_kept_rewrite_is_tried_on_the_kernel_before_it() -> None:
    ctx = _context()
    naive = ctx.best_source
    proposals = get_policy("klineage").proposals(ctx)
    first = next(proposals)
    # Predicted 5.4x from the softmax lineages' short rows: ranked first on the naive kernel.
    assert first.pass_name == "multi_row" and not first.source, first.key
    packed = mechanical(naive, first.pass_name, first.params).source
    assert packed is not None
    # Kept, 3.76x (as on the H200, 2026-12-02); tiled_transpose has no place in its kernel.
    assert mechanical(packed, "tiled_transpose").source is None
    ctx.best_source, ctx.last_accepted = packed, True
    gains = {sha(naive): 1.0, sha(packed): 3.76}
    ctx.gains.update(gains)
    alt, seen = _until(proposals, ctx, "tiled_transpose", gains)
    assert alt.source == naive and alt.key.endswith("@" + sha(naive)[:12])
    assert "alternative" in alt.label and "3.76x faster since" in alt.label
    assert all(p.pass_name != "tiled_transpose" for p in seen[:-1])
    tiled = mechanical(alt.source, alt.pass_name or "", alt.params).source
    assert tiled is not None and tiled != naive
    # Kept: the structural skills are read again on the tiled kernel, none of them twice.
    ctx.best_source = tiled
    ctx.gains[sha(tiled)] = 14.3
    rest = [p.key for p in proposals]
    assert alt.key not in rest and first.key not in rest
    assert any(k.startswith("tunables:") for k in rest), rest


def test_an_alternative_known_to_gain_less_than_the_kept_path_is_not_tried() -> None:
    from klineage.optimize.structural import _alternatives

    ctx = _context()
    naive, packed = ctx.best_source, ctx.best_source + "# packed\n"
    ctx.best_source = packed
    ctx.gains.update({sha(naive): 1.0, sha(packed): 3.76})

    over = [(naive, _prop("less", 2.0)), (naive, _prop("more", 5.0)), (naive, _prop("unknown", None)),
            (naive, _prop("by_llm", None, "llm")), (naive, _prop("tried", None))]  # fmt: skip
    got = [(key, p.pass_name, p.source) for key, p in _alternatives(ctx, over, {"skill:tried"})]
    # 2.0x predicted cannot beat the 3.76x the kept rewrite measured; 5x and unknown may.
    assert got == [("skill:more", "more", naive), ("skill:unknown", "unknown", naive)]


def test_an_unknown_alternative_far_behind_the_best_is_not_tried() -> None:
    from klineage.optimize.structural import UNKNOWN_ALTERNATIVE_BEHIND, _alternatives

    ctx = _context()
    naive, tiled = ctx.best_source, ctx.best_source + "# tiled, split\n"
    ctx.best_source = tiled
    # As the column softmax on an H100 (2026-12-06): three kept steps, 26.8x over the start.
    ctx.gains.update({sha(naive): 1.0, sha(tiled): 26.83})
    assert UNKNOWN_ALTERNATIVE_BEHIND < 26.83

    over = [(naive, _prop("unknown", None)), (naive, _prop("predicted_more", 30.0))]
    got = [key for key, _ in _alternatives(ctx, over, set())]
    # An unknown gain would have to make up 26.8x in one rewrite; a predicted 30x may.
    assert got == ["skill:predicted_more"]


def test_tile_online_comes_after_the_split_it_would_hide() -> None:
    """IN_PROGRAM: on the column softmax, tile_online (how one program walks its tile) has a
    site in the merged walk before the split, and split_online finds none in a walk it rewrote;
    it is proposed after the split, on the stats kernel (kept there on an H100, 2026-12-07)."""
    ctx = heldout_context("column_softmax", ("tall_fp16", "wide_bf16"))
    proposals = get_policy("klineage").proposals(ctx)
    names = []
    for prop in proposals:
        names.append(prop.pass_name)
        made = mechanical(prop.source or ctx.best_source, prop.pass_name or "", prop.params,
                          then=prop.then).source  # fmt: skip
        assert made is not None, prop.key
        if prop.pass_name == "online_softmax":
            assert mechanical(made, "tile_online").source is not None  # a site before the split
            assert (
                mechanical(mechanical(made, "tile_online").source or "", "split_online").source
                is None
            )
        if prop.pass_name == "tile_online":
            assert "def softmax_down_stats(" in ctx.best_source and "_tile = tl.full((" in made
            break
        ctx.last_accepted = True
        if "*" not in prop.key:  # every rewrite kept, its neighbours not
            ctx.best_source = made
            ctx.gains[sha(made)] = 2.0 * (len(ctx.gains) + 1)
    assert names[:3] == ["column_tiling", "online_softmax", "split_online"], names
    assert names[-1] == "tile_online", names

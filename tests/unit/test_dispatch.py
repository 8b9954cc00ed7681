"""Regime dispatch (optimize/dispatch.py): the split learned from per-regime wins, two kernel
files combined into one, and the proposal the klineage policy makes after a mixed trial. Source
rewrites and fakes only; tests/interp/test_dispatch_gate.py runs the combined files."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from klineage.metrics import Speedup
from klineage.optimize import loop as loop_mod
from klineage.optimize.dispatch import (
    DISPATCH,
    DispatchError,
    Split,
    TrialView,
    combine,
    proposal,
    separate,
)
from klineage.optimize.materialize import mechanical
from klineage.optimize.policies import Context, Proposal
from klineage.optimize.structural import dispatching
from klineage.rewrite import all_passes
from tests.conftest import ROOT, heldout_context

HELDOUT = ROOT / "src" / "klineage" / "heldout"
CUMSUM = {
    "tiny": [[3, 45]],
    "short_rows_fp16": [[524288, 160]],
    "long_rows_bf16": [[384, 200000]],
    "mid_fp32": [[6144, 12000]],
}


def test_the_split_is_the_first_feature_that_separates_the_wins_at_their_geometric_midpoint() -> (
    None
):
    s = separate(["short_rows_fp16"], ["long_rows_bf16", "mid_fp32"], CUMSUM)
    assert s == Split(0, "last_dim", 1385, True)  # sqrt(160 * 12000) = 1385.6
    assert s.holds([3, 45]) and s.holds([524288, 160]) and not s.holds([6144, 12000])
    assert s.expr("t") == "t[0].shape[-1] <= 1385"
    # the long rows won: their last dimension is the largest, so the split is from above
    s = separate(["long_rows_bf16"], ["short_rows_fp16", "mid_fp32"], CUMSUM)
    assert s == Split(0, "last_dim", 48990, False)  # ceil(sqrt(200000 * 12000))
    # one last dimension for all: the rows decide
    rows = {"a": [[64, 4096]], "b": [[65536, 4096]], "c": [[16384, 4096]]}
    s = separate(["a"], ["b", "c"], rows)
    assert s is not None and s.feature == "rows" and s.alt_below and 64 <= s.threshold < 16384
    assert s.expr("t") == f"t[0].numel() // max(1, t[0].shape[-1]) <= {s.threshold}"


def test_no_split_where_no_feature_separates_or_a_side_is_empty() -> None:
    # the square regime won alone: each dimension puts it between the others, and the element
    # counts are equal
    middle = {"square": [[100, 100]], "tall": [[1000, 10]], "wide": [[10, 1000]]}
    assert separate(["square"], ["tall", "wide"], middle) is None
    # three regimes are few: the element count alone may separate one (a prediction the gate
    # then measures, not a finding)
    assert separate(["mid_fp32"], ["short_rows_fp16", "long_rows_bf16"], CUMSUM) == Split(
        0, "numel", 75248324, True
    )
    assert separate([], ["mid_fp32"], CUMSUM) is None
    assert separate(["mid_fp32"], [], CUMSUM) is None
    assert separate(["nowhere"], ["mid_fp32"], CUMSUM) is None


def _multi_row(problem: str, rows: int) -> tuple[str, str]:
    naive = (HELDOUT / problem / "naive.py").read_text(encoding="utf-8")
    p = all_passes()["multi_row"]
    (site,) = p.forward_sites(naive)
    r = p.apply(naive, site, {"rows": rows})
    assert r.source is not None, r.reason
    return naive, r.source


def test_combine_renames_what_is_taken_and_keeps_keywords_and_shared_constants() -> None:
    naive, packed = _multi_row("add_layernorm", 4)
    out = combine(naive, packed, Split(0, "rows", 10, False), "measured 2.0x on short_rows")
    tree = ast.parse(out)
    top = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert top == [
        "add_ln_row_kernel",
        "_ModelNewBase",
        "add_ln_row_kernel_alt",
        "_ModelNewAlternative",
        "ModelNew",
    ]
    assert out.count("EPS = ") == 1  # the same constant in both files: one copy
    assert "add_ln_row_kernel_alt[(triton.cdiv(" in out  # the alternative launches its own
    assert "ROWS=ROWS" in out and "ROWS_alt" not in out  # keywords and parameters keep names
    assert "if tensors[0].numel() // max(1, tensors[0].shape[-1]) >= 10:" in out
    assert "alternative.load_state_dict(self.state_dict())" in out
    assert "measured 2.0x on short_rows" in out
    # a dispatch of a dispatch: the names taken get fresh ones again
    again = combine(out, packed, Split(0, "last_dim", 64, True))
    names = [n.name for n in ast.parse(again).body if isinstance(n, ast.ClassDef)]
    assert names.count("ModelNew") == 1 and "_ModelNewBase_" in names


def test_combine_refuses_what_it_cannot_rewrite_soundly() -> None:
    naive, packed = _multi_row("reverse_cumsum_rows", 2)
    split = Split(0, "last_dim", 1000, True)
    with pytest.raises(DispatchError, match=r"module-level statement `print\('side effect'\)`"):
        combine(naive, packed + "\nprint('side effect')\n", split)
    with pytest.raises(DispatchError, match="defines no class ModelNew"):
        combine(naive, packed.replace("class ModelNew", "class Other"), split)
    # the alternative's kernel name is taken in the best file and also a local in a function
    clash = packed.replace(
        "y = torch.empty_like(x)", "suffix_scan_row = 1\n        y = torch.empty_like(x)"
    )
    with pytest.raises(DispatchError, match="bind suffix_scan_row locally"):
        combine(naive, clash, split)
    with pytest.raises(DispatchError, match="does not parse"):
        combine(naive, "def (:\n", split)


def _s(regime: str, ratio: float, noise: float = 0.01) -> Speedup:
    return Speedup(regime, ratio, ratio * (1 - noise), ratio * (1 + noise), 1.0, 1.0 / ratio,
                   True, False, "device")  # fmt: skip


def test_a_mixed_trial_calls_for_a_dispatch_and_a_uniform_one_does_not() -> None:
    naive, packed = _multi_row("reverse_cumsum_rows", 2)
    ratios = {"short_rows_fp16": _s("short_rows_fp16", 3.1), "long_rows_bf16": _s("long_rows_bf16", 0.8),
              "mid_fp32": _s("mid_fp32", 0.9)}  # fmt: skip
    # not kept (geomean 1.31 < ... by hypothesis): the candidate where it won
    p = proposal(TrialView(packed, naive, False, ratios, False), naive, CUMSUM)
    assert isinstance(p, Proposal) and p.pass_name == DISPATCH
    assert p.params["alternative"] == packed and p.params["split"]["threshold"] == 1385
    assert "short_rows_fp16 3.10x" in p.label
    made = mechanical(naive, DISPATCH, p.params)
    assert made.source is not None and "class _ModelNewAlternative" in made.source
    # kept: the kernel before it, where the candidate lost by WIN or more (long 1.25x, mid 1.11x)
    p = proposal(TrialView(packed, naive, True, ratios, False), packed, CUMSUM)
    assert p is not None and p.params["alternative"] == naive
    assert p.params["split"] == Split(0, "last_dim", 1386, False).params()
    # within noise or not by WIN: nothing to dispatch; a dispatch is not dispatched again
    flat = {r: _s(r, 1.05) for r in ratios}
    assert proposal(TrialView(packed, naive, False, flat, False), naive, CUMSUM) is None
    assert proposal(TrialView(packed, naive, False, ratios, True), naive, CUMSUM) is None
    assert proposal(None, naive, CUMSUM) is None


def test_the_klineage_policy_follows_a_mixed_trial_with_its_dispatch_once() -> None:
    naive, packed = _multi_row("reverse_cumsum_rows", 2)
    ctx = Context(Path("p.py"), Path("k.py"), "cuda", [], False, 0, {}, shapes=CUMSUM)
    ctx.best_source = naive
    ratios = {"short_rows_fp16": _s("short_rows_fp16", 3.1), "mid_fp32": _s("mid_fp32", 0.9)}
    first = Proposal(key="a", label="a", materializer="mechanical", pass_name="multi_row")
    again = Proposal(key="b", label="b", materializer="mechanical", pass_name="num_warps")
    seen: list[str] = []
    for prop in dispatching(ctx, iter([first, again])):
        seen.append(prop.key)
        # each trial of this fake run gates the same mixed candidate
        ctx.last_trial = TrialView(packed, naive, False, ratios, prop.pass_name == DISPATCH)
    assert seen[0] == "a" and seen[1].startswith(DISPATCH) and seen[2:] == ["b"]


def test_the_loop_hands_the_policy_the_trial_it_gated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A GPU trial's per-regime side-by-side ratios reach the policy (Context.last_trial)."""
    from klineage.gate.records import GateResult, Stage, StageResult, Status
    from klineage.optimize import Settings, optimize
    from klineage.store import open_store

    problem = tmp_path / "problem.py"
    problem.write_text("REGIMES = {'short': {}, 'long': {}}\n")
    kernel = tmp_path / "kernel.py"
    kernel.write_text("# start\n")

    def gate(self: Any, source: str, config: Any, base: str | None = None) -> GateResult:
        ratio = {"short": 2.0, "long": 0.7} if "packed" in source else {"short": 1.0, "long": 1.0}
        rows = {
            r: {"kernel_ms": 1.0 / x, "kernel_p20_ms": 1.0 / x, "kernel_p80_ms": 1.0 / x,
                "basis": "device", "host_ms": 1.0, "host_p20_ms": 1.0, "host_p80_ms": 1.0,
                "base_ms": 1.0, "ratio": x, "ratio_lo": x * 0.99, "ratio_hi": x * 1.01}
            for r, x in ratio.items()
        }  # fmt: skip
        stages = [StageResult(stage=Stage.PROFILE, status=Status.PASSED, numbers={"regimes": rows})]
        return GateResult(problem="p", candidate="c", device="cuda", accepted=True, stages=stages)

    views: list[Any] = []

    class Policy:
        name, knowledge = "fake", "none"

        def proposals(self, ctx: Any) -> Any:
            yield Proposal(key="pack", label="pack", materializer="mechanical", pass_name="pack")
            views.append(ctx.last_trial)

    monkeypatch.setattr(loop_mod.Optimizer, "gate", gate)
    monkeypatch.setattr(loop_mod, "get_policy", lambda name: Policy())
    monkeypatch.setattr(loop_mod, "problem_shapes", lambda p, o=None: {
        "short": {"shapes": [[4096, 16]], "dtypes": ["float32"]},
        "long": {"shapes": [[8, 65536]], "dtypes": ["float32"]}})  # fmt: skip
    monkeypatch.setattr(
        loop_mod,
        "mechanical",
        lambda source, name, params=None, then=(): __import__(
            "klineage.optimize.materialize", fromlist=["Materialized"]
        ).Materialized(source + "# packed\n", "packed", 1),
    )
    optimize(problem, kernel, store=open_store(tmp_path / "k.db"), skills=[], device="cuda",
             settings=Settings(budget=2))  # fmt: skip
    (view,) = views
    assert isinstance(view, TrialView) and view.kept and not view.dispatch  # geomean 1.18x
    assert view.before == "# start\n" and view.candidate == "# start\n# packed\n"
    assert {r: round(s.value, 2) for r, s in view.ratios.items()} == {"short": 2.0, "long": 0.7}


def _column_mean_context() -> Context:
    return heldout_context("column_mean_tall", ("tall_fp32_gpu", "tall_fp16_gpu", "wide_fp32_gpu"))


# column_tiling alone on the naive column mean (H100, 2026-12-06): faster with many columns only
TILED = {"tall_fp32_gpu": 0.23, "tall_fp16_gpu": 0.08, "wide_fp32_gpu": 9.81}


@pytest.mark.parametrize("composite_kept", [False, True])
def test_a_tiling_faster_on_some_regimes_is_tried_with_its_split_before_its_dispatch(
    composite_kept: bool,
) -> None:
    from klineage.optimize.policies import get_policy

    ctx = _column_mean_context()
    naive = ctx.best_source
    proposals = get_policy("klineage").proposals(ctx)
    tiling = next(proposals)
    assert tiling.pass_name == "column_tiling" and not tiling.then, tiling.key
    tiled = mechanical(naive, "column_tiling").source
    assert tiled is not None
    ctx.last_accepted = True
    ctx.last_trial = TrialView(tiled, naive, False, {r: _s(r, x) for r, x in TILED.items()}, False)
    both = next(proposals)
    assert both.key == tiling.key + "+" + both.key.split("+", 1)[1]
    assert [name for name, _ in both.then] == ["split_k"], both.key
    made = mechanical(naive, both.pass_name or "", both.params, then=both.then).source
    assert made is not None
    flat = {r: _s(r, 12.0 if composite_kept else 0.5) for r in TILED}  # no dispatch of its own
    ctx.last_trial = TrialView(made, naive, composite_kept, flat, False)
    if composite_kept:
        ctx.best_source = made
    after = next(proposals)
    if composite_kept:  # the held dispatch was made against the naive kernel: dropped
        assert after.pass_name != DISPATCH, after.key
    else:
        assert after.pass_name == DISPATCH and after.params["alternative"] == tiled, after.key

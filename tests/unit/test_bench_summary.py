"""The bench's summary numbers, from rows as run_job writes them (BenchRow), and bench.json's
shape: the typed records write the same keys the dicts did."""

from __future__ import annotations

import math

import pytest

from klineage.bench.records import BenchFile, BenchRow
from klineage.bench.summary import summarize
from klineage.metrics import best_after, calls_to_95


def row(policy: str, curve: list[list[float]], speedup: float | None = None) -> BenchRow:
    final = max([1.0] + [s for _, s in curve])
    return BenchRow.model_validate(
        {
            "policy": policy,
            "problem": "p",
            "success": True,
            "curve": curve,
            "speedup": final if speedup is None else speedup,
            "calls_to_95": calls_to_95(curve),
        }
    )


def test_best_after_ignores_the_start_and_later_calls() -> None:
    curve = [[0, 1.0], [1, 1.0], [3, 2.0], [5, 2.5]]
    assert [best_after(curve, n) for n in range(1, 7)] == [1.0, 1.0, 2.0, 2.0, 2.5, 2.5]
    assert best_after([], 3) == 1.0  # a failed run: no gain


def test_anytime_separates_policies_that_end_equal() -> None:
    # Both reach 2x on both problems; "early" gets there on the first candidate.
    early = [row("early", [[0, 1.0], [1, 2.0]]), row("early", [[0, 1.0], [1, 2.0]])]
    late = [row("late", [[0, 1.0], [4, 2.0]]), row("late", [[0, 1.0], [1, 1.0], [2, 2.0]])]
    s = summarize(early + late, ["early", "late"])
    assert s["early"].geomean_speedup == s["late"].geomean_speedup == pytest.approx(2.0)
    assert s["early"].anytime == pytest.approx([2.0] * 4)
    # late after 1, 2, 3, 4 calls: (1,1), (1,2), (1,2), (2,2) -> geomeans 1, sqrt2, sqrt2, 2
    r2 = math.sqrt(2.0)
    assert s["late"].anytime == pytest.approx([1.0, r2, r2, 2.0])
    assert s["late"].anytime_mean == pytest.approx((3.0 + 2 * r2) / 4)
    assert (s["early"].anytime_mean or 0) > (s["late"].anytime_mean or 0)


def test_summary_without_curves_has_no_anytime() -> None:
    failed = BenchRow.model_validate({"policy": "x", "problem": "p", "success": False, "curve": []})
    s = summarize([failed], ["x"])
    assert "anytime" not in s["x"].model_fields_set and s["x"].success_rate == 0.0


def test_seeds_of_one_problem_are_one_problem() -> None:
    rows = [row("random", [[0, 1.0], [1, 1.21]]), row("random", [[0, 1.0], [1, 1.0]])]
    rows += [row("random", [[0, 1.0]]).model_copy(update={"problem": "q"})]
    s = summarize(rows, ["random"])["random"]
    assert s.problems == 2 and s.runs == 3
    # p: geomean(1.21, 1.0) = 1.1 counts as improved; q did not improve.
    assert s.improved == 1


def test_random_order_is_drawn_per_problem_and_reproducible() -> None:
    from pathlib import Path

    from klineage.optimize.policies import Context, shuffled_passes

    def order(problem: str, seed: int = 0) -> list[str]:
        p = Path("/anywhere") / problem / "problem.py"
        return shuffled_passes(
            Context(problem=p, kernel=p, device="cuda", skills=[], llm=False, seed=seed, target={})
        )

    assert order("gemv") == order("gemv")  # the same problem and seed: the same order, anywhere
    assert sorted(order("gemv")) == sorted(order("linear_nt"))
    # On the H200 one seed-0 order put block_size first for all 22 problems; now each differs.
    names = ["gemv", "linear_nt", "attention_gqa", "matmul_bias_gelu", "row_l2_normalize"]
    assert len({tuple(order(n)) for n in names}) == len(names)
    assert order("gemv", 0) != order("gemv", 1)


def test_bench_json_keeps_its_shape() -> None:
    """Written through the models, a bench.json has the keys the bench set, no more: a failed
    run's row has no speedup key, and a summary without curves no anytime."""
    failed = {"problem": "p", "policy": "random", "seed": 0, "error": "start refused",
              "success": False, "gate_calls": 0, "curve": [], "label": ""}  # fmt: skip
    ok = row("klineage", [[0, 1.0], [2, 1.5]])
    assert set(BenchRow.model_validate(failed).model_dump(exclude_unset=True)) == set(failed)
    bench = {"schema": 1, "id": "x", "rows": [failed], "summary": {"random": {"problems": 1}},
             "skills": [], "notes": [], "environment": {"gpu_name": "H200"}, "extra": "old"}  # fmt: skip
    out = BenchFile.model_validate(bench).to_json()
    assert out == {k: v for k, v in bench.items() if k != "extra"}  # unknown keys: ignored
    bench["rows"] = [ok]
    assert BenchFile.model_validate(bench).to_json()["rows"][0]["curve"] == [[0, 1.0], [2, 1.5]]


def test_old_and_broken_bench_files_load() -> None:
    """Lenient on purpose: what is not a number reads as None, malformed points and rows drop."""
    b = BenchFile.model_validate(
        {"schema": "2", "budget": None, "rows": [
            "not a row",
            {"problem": "p", "policy": "random", "speedup": "fast", "vs_eager": float("nan"),
             "curve": [[2, 1.5], [0, 1.0], ["x", 1.0], [1]], "applied": ["by hand", None],
             "success": "yes", "regimes": {"r": {"speedup": 1.2, "new_key": 3}}},
        ]}
    )  # fmt: skip
    (r,) = b.rows
    assert r.speedup is None and r.vs_eager is None and r.success is None
    assert r.curve == [(0, 1.0), (2, 1.5)]
    assert [a.label for a in r.applied] == ["by hand"]
    assert r.regimes["r"].speedup == 1.2 and r.regimes["r"].model_dump()["new_key"] == 3
    assert b.schema_ == "2" and b.budget is None and b.summary == {}


def test_the_h200_bench_files_round_trip() -> None:
    """Every bench.json in benchmarks/results reads into the models and writes back as it was."""
    import json
    from pathlib import Path

    files = [
        p
        for p in sorted((Path(__file__).parents[2] / "benchmarks" / "results").glob("*.json"))
        if isinstance(d := json.loads(p.read_text()), dict) and "summary" in d
    ]
    assert len(files) >= 3
    for p in files:
        data = json.loads(p.read_text())
        assert BenchFile.model_validate(data).to_json() == data, p

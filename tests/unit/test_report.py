"""The HTML report: built from a bench dict made here, checked as text and in headless Chromium."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from klineage.bench.records import BenchFile, BenchRow
from klineage.errors import LoadError
from klineage.metrics import anytime
from klineage.report import load_bench, render_report, write_report
from klineage.report.charts import log_ticks
from klineage.report.verdict import empty_reason, headline
from klineage.skills import read_json
from klineage.skills.library import shipped_library_path
from tests.browser import INSTALL, chromium, console_messages, load_page

EVIL = "<script>alert(1)</script>"
SECTIONS = (
    "summary",
    "curves",
    "speedups",
    "predicted",
    "roofline",
    "problems",
    "lineages",
    "skills",
)


def _skills() -> list[dict[str, Any]]:
    by_name = {s.name: s for s in read_json(shipped_library_path())}
    rows, grid, block = (
        by_name["rows_per_program"],
        by_name["persistent_grid"],
        by_name["block_size"],
    )
    # One effect not measured (as on the CPU), to see it shown as such in the lineage.
    effects = [e.model_copy(update={"measured": False, "speedup": None}) for e in grid.effects[:1]]
    grid = grid.model_copy(update={"effects": effects + grid.effects[1:]})
    assert block.failures_avoided, "block_size should carry a failure it avoids"
    return [s.model_dump(mode="json") for s in (rows, grid, block)]


def bench() -> dict[str, Any]:
    def row(problem: str, policy: str, **kw: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "problem": problem, "policy": policy, "run_id": f"{policy}-{problem}", "success": True,
            "label": "measured", "speedup": 1.5, "vs_eager": 2.0, "vs_compile": 0.9,
            "fraction_of_expert": 0.8, "pct_of_floor": 55.0, "gate_calls": 6, "calls_to_95": 2,
            "curve": [[0, 1.0], [2, 1.5]], "stop_reason": "budget spent",
            "applied": [{"label": "rows_per_program (4 rows)", "materializer": "mechanical", "speedup": 1.5}],
            "error": None,
        }  # fmt: skip
        return base | kw

    return {
        "schema": 1, "id": "a1b2c3", "suite": "heldout", "device": "cuda", "budget": 4,
        "policies": ["klineage", "random"],
        "environment": {"device": "cuda", "gpu_name": "NVIDIA H200", "compute_capability": "9.0",
                        "torch": "2.11.0", "triton": "3.6.0", "date": "2026-11-30T18:00:00+00:00"},
        "created": "2026-11-30T18:00:00+00:00",
        "rows": [
            row("heldout/rmsnorm_gemma", "klineage", stop_reason=f"no more skills {EVIL}"),
            row("heldout/rmsnorm_gemma", "random", speedup=None, vs_eager=None, vs_compile=None,
                curve=[[0, 1.0], [3, 1.1]], calls_to_95=None, applied=[]),
            row("heldout/softmax_wide", "klineage", speedup=3.0, curve=[[0, 1.0], [1, 3.0]]),
            row("heldout/softmax_wide", "random", success=False, speedup=None, curve=[], gate_calls=0,
                calls_to_95=None, applied=[], stop_reason="start refused",
                error="the gate rejected the start: correctness <mismatch> at [3, 7]"),
        ],
        "summary": {
            "klineage": {"problems": 2, "success_rate": 1.0, "geomean_speedup": 2.12,
                         "geomean_vs_eager": 2.0, "geomean_vs_compile": 0.9,
                         "geomean_fraction_of_expert": None, "mean_calls_to_95": 2.0},
        },  # "random" has no summary: the page computes it from the rows
        "skills": _skills(),
    }  # fmt: skip


def reason(bench: dict[str, Any], row: dict[str, Any], field: str) -> str:
    """empty_reason on the dicts a bench.json holds, read as the report reads them."""
    return empty_reason(BenchFile.model_validate(bench), BenchRow.model_validate(row), field)


def section(page: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert m, f"no section {sid}"
    return m.group(1)


def test_report_page(tmp_path: Path) -> None:
    (tmp_path / "bench.json").write_text(json.dumps(bench()))
    out = write_report(tmp_path, tmp_path / "out" / "report.html")  # a directory holding bench.json
    page = out.read_text()
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in page
    assert 'id="summary-table"' in page and 'id="problems-table"' in page
    summary = section(page, "summary")
    assert "klineage" in summary and "random" in summary and "NVIDIA H200" in summary
    assert "2.12×" in summary  # the producer's geomean
    assert "predicted" not in summary  # every row measured: no banner
    assert "<svg" in section(page, "curves")
    # Escaping: the payload is text, never markup.
    assert EVIL not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    problems = section(page, "problems")
    assert "&lt;mismatch&gt;" in problems and "error:" in problems  # the error row shows its error
    assert "–" in problems  # null speedups
    # Lineages: rows_per_program removed at softmax's step 14 cost 8.85x on tiny rows (the 2026-12-03 re-walk).
    lineages = section(page, "lineages")
    assert "softmax/expert.py" in lineages and "rows_per_program" in lineages
    assert 'tiny_rows_gpu: <span class="up">8.85×</span>' in lineages
    assert "not measured" in lineages  # persistent_grid's first effect
    skills = section(page, "skills")
    assert skills.count('<details class="card"') == 3 and "persistent_grid" in skills
    assert '<pre class="diff">' in skills
    # Self-contained: nothing to fetch, no script.
    assert not re.search(r"<script|<link|<img|\bsrc=|@import|url\(", page)
    assert set(re.findall(r"https?://[^\s\"'<]+", page)) == {"http://www.w3.org/2000/svg"}


def test_anytime_curve_is_the_geomean_of_step_functions() -> None:
    rows = [{"curve": [[0, 1.0], [2, 4.0]]}, {"curve": [[0, 1.0], [1, 1.0]]}, {"curve": []}]
    # At 2 calls: geomean(4, 1, 1) = 4 ** (1/3); before, all 1; a failed run stays at 1.
    curves = [r["curve"] for r in rows]
    assert anytime(curves, range(4)) == pytest.approx([1.0, 1.0, 4 ** (1 / 3), 4 ** (1 / 3)])


def test_nulls_predicted_and_broken_fields_render() -> None:
    b = bench()
    for r in b["rows"]:
        r.update(label="predicted, not measured", gate_calls=None, curve=None, applied=None)
        r.update({k: None for k in ("speedup", "vs_eager", "fraction_of_expert", "pct_of_floor")})
    b["summary"] = {}
    b["budget"] = None
    b["environment"] = {}
    b["skills"].append({"name": "half a skill"})
    page = render_report(b)
    assert "predicted, not measured" in section(page, "summary")
    assert "Not shown, does not match the skill schema" in page
    assert "<svg" in section(page, "curves")


def test_load_bench_errors(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="not found"):
        load_bench(tmp_path)
    (tmp_path / "bench.json").write_text("{")
    with pytest.raises(LoadError, match="not JSON"):
        load_bench(tmp_path / "bench.json")


# --------------------------------------------------------------------------- in a browser


def need_chromium() -> None:
    if chromium() is None:
        if os.environ.get("KLINEAGE_SKIP_BROWSER") == "1":
            pytest.skip("chromium not installed and KLINEAGE_SKIP_BROWSER=1")
        pytest.fail(f"chromium not found: install it (`{INSTALL}`), or set KLINEAGE_SKIP_BROWSER=1")


def test_report_loads_in_chromium_without_console_errors(tmp_path: Path) -> None:
    need_chromium()
    (tmp_path / "bench.json").write_text(json.dumps(bench()))
    out = write_report(tmp_path / "bench.json", tmp_path / "report.html")
    dom, console = load_page(out, tmp_path / "profile")
    assert console == []
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in dom
    assert 'id="summary-table"' in dom and "<svg" in dom and "rows_per_program" in dom
    assert 'id="verdict"' in dom and 'class="problem"' in dom and 'class="why"' in dom
    assert "<script" not in dom.lower()


def test_chromium_check_can_fail(tmp_path: Path) -> None:
    need_chromium()
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><p id="x">x</p>'
        '<script>console.error("deliberate");</script>'
        '<script>throw new Error("deliberate boom");</script></body></html>'
    )
    dom, console = load_page(bad, tmp_path / "profile1")
    assert 'id="x"' in dom
    assert any(m.startswith('"deliberate", source: file://') for m in console), console
    assert any("Uncaught Error: deliberate boom" in m for m in console), console
    # A report that fetched anything would be caught too: its CSP blocks and logs the fetch.
    page = render_report(bench()).replace(
        "<main>", '<main><img src="https://example.invalid/a.png">'
    )
    leaky = tmp_path / "leaky.html"
    leaky.write_text(page)
    _, console = load_page(leaky, tmp_path / "profile2")
    assert any("Content Security Policy" in m for m in console), console


def test_console_lines_are_parsed() -> None:
    stderr = (
        "/usr/bin/chromium: 9: [: 25276514304: unexpected operator\n"
        "[1:1:1130/172216.681543:ERROR:dbus/bus.cc:405] Failed to connect to the bus\n"
        '[1:1:1130/172217.335603:INFO:CONSOLE:2] "x", source: file:///t.html (2)\n'
        '[1:1:1130/172217.336941:INFO:CONSOLE(3)] "multi\n'
        'line", source: file:///t.html (3)\n'
        "[1:1:1130/172217.4:WARNING:sandbox.cc:405] not a console line\n"
    )
    assert console_messages(stderr) == [
        '"x", source: file:///t.html (2)',
        '"multi\nline", source: file:///t.html (3)',
    ]


# --------------------------------------------------------------------------- the claim


def made_up(speedups: dict[str, list[float]], **bench_kw: Any) -> dict[str, Any]:
    """A bench of one problem per value: policy -> final speedup per problem (no summary, so
    the page computes the geomeans from these rows)."""
    rows = [
        {"problem": f"heldout/p{i}", "policy": pol, "success": True, "label": "measured",
         "speedup": v, "vs_eager": 1.0, "vs_compile": None, "fraction_of_expert": None,
         "pct_of_floor": 40.0, "gate_calls": 3, "calls_to_95": 1, "curve": [[0, 1.0], [1, v]],
         "applied": []}
        for pol, vals in speedups.items()
        for i, v in enumerate(vals)
    ]  # fmt: skip
    return {"schema": 1, "suite": "heldout", "device": "cuda", "budget": 3,
            "policies": list(speedups), "rows": rows} | bench_kw  # fmt: skip


def test_headline_says_ahead_behind_or_within_the_spread() -> None:
    ahead = headline(
        made_up({"klineage": [2.0, 2.0], "random": [1.5, 1.5], "what-only": [1.0, 1.0]})
    )
    assert ahead.startswith("klineage: 2.00× geomean over the naive starts on 2 held-out problems")
    assert "1.33× ahead of the best baseline (random, 1.50×)" in ahead
    assert "torch.compile not timed in this bench (--no-compile)" in ahead
    behind = headline(made_up({"klineage": [1.0], "random": [1.2]}))
    assert "1.20× behind the best baseline (random, 1.20×)" in behind
    tie = headline(made_up({"klineage": [1.30], "random": [1.28]}))
    assert "no policy is ahead by more than the spread (5%; one seed" in tie
    alone = headline(made_up({"klineage": [1.5]}))
    assert "no baseline in this bench" in alone


def test_headline_uses_the_spread_across_seeds() -> None:
    # random's geomean ranges 1.0x..1.5x over its seeds: klineage's 1.3x lead is inside it.
    b = made_up({"klineage": [1.3 * 1.22], "random": [1.0, 1.5]}, seeds=2)
    b["rows"][1].update(problem="heldout/p0", seed=0)
    b["rows"][2].update(problem="heldout/p0", seed=1)
    text = headline(b)
    assert "within the spread" in text or "no policy is ahead" in text
    assert "random's range across seeds" in text
    page = render_report(b)
    assert "1.00–1.50×" in section(page, "problems")  # the seed range in the fold
    summary = section(page, "summary")
    assert "geomean per seed: min–max" in summary and "1.00–1.50×" in summary
    assert "klineage does not depend on the seed: it runs once" in summary


def test_headline_on_the_cpu_claims_nothing() -> None:
    b = made_up({"klineage": [1.0], "random": [1.0]}, device="cpu")
    for r in b["rows"]:
        r.update(label="predicted, not measured", speedup=None, vs_eager=None, pct_of_floor=None)
    assert headline(b).startswith("Predicted, not measured (the CPU): no kernel was timed")
    page = render_report(b)
    assert "No measured speedup in this bench" in section(page, "speedups")
    assert "nothing was timed" in section(page, "predicted")
    assert "not measured on the CPU: predicted only" in section(page, "problems")
    for r in b["rows"]:
        r.update(success=False, label="", error="start refused")
    assert headline(b).startswith("No run finished with a correct kernel: all 2 failed")
    assert "every run failed" in section(render_report(b), "speedups")
    assert headline({"rows": []}) == "No results in this bench."


def test_every_empty_cell_says_why() -> None:
    b = bench()
    b["rows"][1]["fraction_of_expert"] = None
    page = render_report(b)
    problems = section(page, "problems")
    # vs compile and fraction of expert: the reasons held-out rows have.
    assert "no expert kernel for held-out problems" in page
    assert "the run failed: no final kernel to time" in problems
    assert "one seed per run (--seeds 1)" in problems
    # Every dash in a table cell carries a title and a note number.
    for td in re.findall(r'<td class="num na">(.*?)</td>', page):
        assert 'class="why" title="' in td, td
    assert 'id="why-problems-1"' in problems and 'id="why-summary-1"' in section(page, "summary")
    reasons = {
        (field, reason(b, b["rows"][1], field))
        for field in ("speedup", "vs_compile", "fraction_of_expert", "calls_to_95")
    }
    assert (
        "vs_compile",
        "torch.compile of this problem's reference was not timed (it failed to compile)",
    ) in reasons
    corpus = b | {"suite": "corpus"}
    assert reason(corpus, b["rows"][0] | {"fraction_of_expert": None}, "fraction_of_expert") == (
        "no expert kernel (expert.py) for this problem"
    )
    nothing = b["rows"][0] | {"speedup": 1.0, "calls_to_95": None}
    assert (
        reason(b, nothing, "calls_to_95") == "nothing gained over the start: no 95% mark to reach"
    )


def test_claim_sections_render() -> None:
    b = bench()
    b["rows"][0]["applied"][0]["predicted"] = 1.3
    page = render_report(b)
    assert 'id="verdict"' in page and "klineage: " in page.split('id="verdict"')[1][:200]
    assert "<circle" in section(page, "speedups") and "final speedup" in section(page, "speedups")
    predicted = section(page, "predicted")
    assert "<svg" in predicted and "1 kept trials with a prediction" in predicted
    assert (
        "rows_per_program on rmsnorm_gemma (klineage): predicted 1.30×, measured 1.50×" in predicted
    )
    assert "<svg" in section(page, "roofline")
    problems = section(page, "problems")
    assert problems.count('<details class="problem"') == 2
    assert '<a href="#problem-heldout-softmax_wide">' in problems
    # No predictions at all: the reason replaces the chart.
    assert "no kept trial carries a skill&#x27;s predicted speedup" in section(
        render_report(bench()), "predicted"
    )


def test_log_ticks_cover_narrow_and_wide_ranges() -> None:
    assert log_ticks(0.926, 1.62) == [1.0, 1.25, 1.5]
    assert log_ticks(0.5, 30) == [0.5, 1.0, 2.0, 5.0, 10.0, 20.0]


def test_an_empty_compile_column_says_whether_compile_was_asked_for() -> None:
    bench = made_up({"klineage": [1.2]})
    row = bench["rows"][0]
    asked = reason(bench | {"compile": True}, row, "vs_compile")
    assert asked == "torch.compile of this problem's reference was not timed (it failed to compile)"
    assert "--no-compile" in reason(bench | {"compile": False}, row, "vs_compile")
    assert "--no-compile" in reason(bench, row, "vs_compile")  # older bench.json: inferred


def test_old_h200_bench_files_load_typed_and_render() -> None:
    """The report reads bench.json through bench/records.py; the H200 files written before the
    models (no seeds, runs or anytime in the held-out one) load and state their claim."""
    results = Path(__file__).parents[2] / "benchmarks" / "results"
    heldout = load_bench(results / "bench-h200-2026-11-30-final-heldout.json")
    assert isinstance(heldout, BenchFile) and len(heldout.rows) == 110
    assert heldout.summary["klineage"].anytime_mean is None  # not in the file: computed
    text = headline(heldout)
    assert text.startswith("klineage: 1.28× geomean over the naive starts on 22 held-out problems")
    assert "accelopt gains fastest: 1.27× anytime against klineage's 1.20×" in text
    page = render_report(load_bench(results / "search-h200-2026-12-01-bench.json"))
    for sid in SECTIONS:
        assert f'<section id="{sid}">' in page


def test_a_missing_summary_is_the_benchs_own() -> None:
    """A policy without a summary in the file gets the one the bench would have written
    (bench/summary.py), not a second definition of the geomeans in the report."""
    from klineage.bench.summary import summarize
    from klineage.report.verdict import policy_summary

    b = BenchFile.model_validate(bench())
    computed, marked = policy_summary(b, "random")
    assert marked and computed == summarize(b.rows, ["random"])["random"]
    given, marked = policy_summary(b, "klineage")
    assert not marked and given.geomean_speedup == 2.12  # the producer's, as written
    assert given.anytime_mean == summarize(b.rows, ["klineage"])["klineage"].anytime_mean

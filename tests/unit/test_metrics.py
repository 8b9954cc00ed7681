"""Each metric has one definition, in klineage.metrics (issue 13): a test imports it from there,
and no other module of the library defines it again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import klineage
from klineage import metrics

SRC = Path(klineage.__file__).parent
# Functions and constants that are metrics: defined in metrics.py and nowhere else.
FUNCTIONS = (
    "geomean",
    "timed_geomean",
    "anytime",
    "anytime_mean",
    "best_after",
    "calls_to_95",
    "speedups",
)
CONSTANTS = ("PAYS_OFF", "IMPROVED", "CALLS_TO_FRACTION")


def test_each_metric_is_importable_from_metrics() -> None:
    for name in FUNCTIONS:
        assert callable(getattr(metrics, name)), name
    assert metrics.PAYS_OFF == 1.05 and metrics.IMPROVED == 1.03


def _definitions(path: Path) -> list[tuple[str, str]]:
    """(where, name) of each metric function or constant defined in `path`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in FUNCTIONS:
            out.append((f"{path.relative_to(SRC)}:{node.lineno}", node.name))
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for t in targets:
            if isinstance(t, ast.Name) and t.id in CONSTANTS:
                out.append((f"{path.relative_to(SRC)}:{node.lineno}", t.id))
    return out


def test_no_second_definition_of_a_metric() -> None:
    others = [p for p in sorted(SRC.rglob("*.py")) if p != SRC / "metrics.py"]
    found = [d for p in others for d in _definitions(p)]
    assert not found, "metrics defined outside klineage/metrics.py:\n" + "\n".join(
        f"{w}: {n}" for w, n in found
    )


def test_the_scan_finds_a_definition() -> None:
    # The scan is not vacuous: metrics.py itself has every name.
    names = {name for _, name in _definitions(SRC / "metrics.py")}
    assert names >= set(FUNCTIONS) | set(CONSTANTS)


@pytest.mark.parametrize(
    ("curve", "calls"),
    [
        ([[0, 1.0], [1, 1.0], [3, 2.0]], [1.0, 1.0, 1.0, 2.0]),
        ([], [1.0] * 4),
        ([[0, 1.0]], [1.0] * 4),
    ],
)
def test_best_after_is_a_step_function_from_the_start(
    curve: list[list[float]], calls: list[float]
) -> None:
    assert [metrics.best_after(curve, n) for n in range(4)] == calls


def test_anytime_horizons_share_one_definition() -> None:
    curves = [[(0.0, 1.0), (2.0, 4.0)], []]
    # The report's 0..budget is the bench's 1..N with the start (1.0x) in front.
    assert metrics.anytime(curves, range(4)) == [1.0, *metrics.anytime(curves, range(1, 4))]
    assert metrics.anytime_mean(curves, 3) == pytest.approx((1.0 + 2.0 + 2.0) / 3)
    assert metrics.anytime_mean(curves, 0) is None
    assert metrics.calls_to_95([[0, 1.0], [1, 1.5], [2, 2.0]]) == 2
    assert metrics.calls_to_95([[0, 1.0]]) is None
    assert metrics.geomean([None, 4.0, 1.0, float("nan"), 0.0]) == 2.0

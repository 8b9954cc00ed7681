"""The regime shapes shipped with the package (data/regime-shapes.json) are current for every
problem a shipped skill came from, and are read instead of running the problem: a newcomer's
first `klineage skills list` ran nine problems in child processes (40 s)."""

from __future__ import annotations

from typing import Any

import pytest

import klineage.skills.conditions as conditions
from klineage.skills.export import read_json
from klineage.skills.library import shipped_library_path


def _problems() -> set[str]:
    named = set()
    for skill in read_json(shipped_library_path()):
        named |= {p.problem for p in skill.provenance if p.problem}
        named |= {c.source_problem for c in skill.conditions if c.source_problem}
    return named


def test_every_problem_the_shipped_skills_name_has_current_shapes() -> None:
    shipped = conditions._shipped()
    named = _problems()
    assert len(named) >= 5, named
    stale = []
    for problem in sorted(named):
        located = conditions.locate_problem(problem)
        if located is None:
            continue  # a problem of another checkout only; nothing here could read it either
        if conditions.shapes_key(located.read_text(encoding="utf-8")) not in shipped:
            stale.append(str(located))
    assert not stale, (
        f"regime shapes missing or stale for {stale}: run python benchmarks/build_regime_shapes.py"
    )


def test_shipped_shapes_are_read_without_running_the_problem(monkeypatch: Any) -> None:
    def no_child(*_: Any, **__: Any) -> Any:
        raise AssertionError("a shipped problem's shapes were read by running it")

    monkeypatch.setattr(conditions, "regime_shapes", no_child)
    monkeypatch.setattr(conditions, "_INPUTS", {})
    problem = str(conditions.SHIPPED_SHAPES.parents[1] / "kernels" / "softmax" / "problem.py")
    inputs = conditions.regime_inputs(problem)
    assert inputs and all(e["shapes"] for e in inputs.values())


def test_an_edited_problem_misses_the_table_and_is_read_again(
    tmp_path: Any, monkeypatch: Any
) -> None:
    source = (
        conditions.SHIPPED_SHAPES.parents[1] / "kernels" / "softmax" / "problem.py"
    ).read_text()
    edited = tmp_path / "problem.py"
    edited.write_text(source + "\n# edited\n")
    calls: list[str] = []

    def child(path: Any, *_: Any, **__: Any) -> dict[str, Any]:
        calls.append(str(path))
        return {"only": {"shapes": [[2, 3]], "dtypes": ["float32"]}}

    monkeypatch.setattr(conditions, "regime_shapes", child)
    monkeypatch.setattr(conditions, "_INPUTS", {})
    monkeypatch.setenv("KLINEAGE_CACHE_DIR", str(tmp_path / "cache"))
    assert conditions.regime_inputs(str(edited)) == {
        "only": {"shapes": [[2, 3]], "dtypes": ["float32"]}
    }
    assert calls == [str(edited)]


@pytest.mark.parametrize("broken", ["", "{", '{"shapes": 3}', "[]"])
def test_a_damaged_table_is_no_table(tmp_path: Any, monkeypatch: Any, broken: str) -> None:
    bad = tmp_path / "regime-shapes.json"
    bad.write_text(broken)
    monkeypatch.setattr(conditions, "SHIPPED_SHAPES", bad)
    conditions._shipped.cache_clear()
    try:
        assert conditions._shipped() == {}
    finally:
        conditions._shipped.cache_clear()

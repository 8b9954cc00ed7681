"""The held-out set: 29 problems outside the corpus, each with a naive start, CPU and GPU
regimes, and none textually close to a corpus kernel."""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

from klineage.bench import suite_problems
from klineage.optimize.decide import cpu_regimes_of, regime_names_of
from tests.conftest import KERNELS

HELDOUT = suite_problems("heldout")
CORPUS = sorted(p for p in KERNELS.glob("*/*.py") if p.name != "__init__.py")


def test_there_are_at_least_29_held_out_problems_none_in_the_corpus() -> None:
    names = {p.workload for p in HELDOUT}
    assert len(names) >= 29
    assert not names & {p.parent.name for p in CORPUS}


@pytest.mark.parametrize("bp", HELDOUT, ids=lambda b: b.workload)
def test_each_has_a_naive_start_and_cpu_and_gpu_regimes(bp) -> None:  # type: ignore[no-untyped-def]
    src = bp.problem.read_text()
    regimes, cpu = regime_names_of(src), cpu_regimes_of(src)
    assert cpu and set(cpu) <= set(regimes), f"{bp.problem}: CPU_REGIMES must name REGIMES keys"
    assert len(set(regimes) - set(cpu)) >= 2, f"{bp.problem}: needs two GPU regimes"
    tree = ast.parse(bp.naive.read_text())
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    assert "triton.jit" in bp.naive.read_text()


def _normalized(path: Path) -> list[str]:
    """Code lines without comments, docstrings or blank lines, every identifier replaced by
    one token: a copy with renamed variables is as close as the copy itself."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            node.id = "v"
        elif isinstance(node, ast.arg):
            node.arg = "v"
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.name = "v"
            if (
                node.body
                and isinstance(node.body[0], ast.Expr)
                and isinstance(getattr(node.body[0], "value", None), ast.Constant)
            ):
                node.body = node.body[1:] or [ast.Pass()]
    if tree.body and isinstance(tree.body[0], ast.Expr):
        tree.body = tree.body[1:]
    return [line.strip() for line in ast.unparse(tree).splitlines() if line.strip()]


def test_no_held_out_kernel_is_textually_close_to_a_corpus_kernel() -> None:
    corpus = {p: _normalized(p) for p in CORPUS}
    worst = (0.0, "", "")  # (line similarity, held-out file, corpus file)
    for bp in HELDOUT:
        for f in (bp.problem, bp.naive):
            mine = _normalized(f)
            for c, lines in corpus.items():
                r = difflib.SequenceMatcher(None, mine, lines, autojunk=False).ratio()
                worst = max(
                    worst, (r, str(f.relative_to(f.parents[2])), str(c.relative_to(c.parents[2])))
                )
    assert worst[0] < 0.8, f"{worst[1]} is {worst[0]:.0%} similar to {worst[2]}"


def test_the_closeness_check_catches_a_renamed_copy(tmp_path: Path) -> None:
    original = KERNELS / "rmsnorm" / "naive.py"
    copy = tmp_path / "naive.py"
    text = original.read_text()
    for old, new in (
        ("_rms_norm_kernel", "_my_norm"),
        ("rms_norm_forward", "launch"),
        ("rstd", "inv"),
        ("cols", "offs"),
    ):
        text = text.replace(old, new)
    copy.write_text("# my own kernel\n" + text)
    a, b = _normalized(copy), _normalized(original)
    assert difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.95

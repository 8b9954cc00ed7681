"""`klineage bench --suite FOLDER`: a user's problems with starting kernels, in either layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.bench.suites import folder_problems, label, suite_problems
from klineage.errors import UsageError


def _touch(p: Path) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("# a file\n")
    return p


def test_both_layouts_are_found_and_problems_without_a_start_are_left_out(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    _touch(root / "relu" / "problem.py")
    _touch(root / "relu" / "naive.py")
    _touch(root / "gelu" / "problem.py")
    _touch(root / "gelu" / "start.py")
    _touch(root / "gelu" / "expert.py")
    _touch(root / "nostart" / "problem.py")
    _touch(root / "19_ReLU.py")  # KernelBench's flat layout
    _touch(root / "19_ReLU_start.py")
    _touch(root / "23_Softmax.py")
    _touch(root / "kernels" / "23_Softmax.py")
    _touch(root / "40_LayerNorm.py")  # no starting kernel: not a job
    got = {
        p.name: (p.problem.name, p.naive.relative_to(root).as_posix(), p.expert is not None)
        for p in folder_problems(root)
    }
    assert got == {
        "mine/gelu": ("problem.py", "gelu/start.py", True),
        "mine/relu": ("problem.py", "relu/naive.py", False),
        "mine/19_ReLU": ("19_ReLU.py", "19_ReLU_start.py", False),
        "mine/23_Softmax": ("23_Softmax.py", "kernels/23_Softmax.py", False),
    }
    assert [p.workload for p in suite_problems(str(root), ["relu"])] == ["relu"]
    assert label(str(root)) == "mine" and label("heldout") == "heldout"


def test_a_folder_without_problems_or_a_missing_one_says_what_layout_is_expected(
    tmp_path: Path,
) -> None:
    with pytest.raises(
        UsageError, match="no problem with a starting kernel found; expected a folder of problems"
    ):
        folder_problems(tmp_path)
    with pytest.raises(UsageError, match="expected corpus, heldout, or a folder"):
        suite_problems(str(tmp_path / "missing"))


def test_set_over_a_suite_rebinds_the_problems_that_assign_the_name_and_names_the_rest(
    tmp_path: Path,
) -> None:
    from klineage.bench.run import suite_overrides

    root = tmp_path / "kb"
    (root / "19_ReLU.py").parent.mkdir(parents=True)
    (root / "19_ReLU.py").write_text("batch_size = 4096\ndim = 393216\n")
    (root / "19_ReLU_start.py").write_text("# start\n")
    (root / "23_Softmax.py").write_text("batch_size = 4096\nfeatures = 16384\n")
    (root / "23_Softmax_start.py").write_text("# start\n")
    probs = folder_problems(root)
    per, notes = suite_overrides(probs, {"batch_size": 8, "dim": 300})
    assert per == {"kb/19_ReLU": {"batch_size": 8, "dim": 300}, "kb/23_Softmax": {"batch_size": 8}}
    assert notes == ["--set dim: not assigned by kb/23_Softmax (their own value kept)"]
    with pytest.raises(UsageError, match="--set batch: no problem of the suite assigns it"):
        suite_overrides(probs, {"batch": 8})
    assert suite_overrides(probs, {}) == ({}, [])

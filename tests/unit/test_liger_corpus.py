"""`klineage corpus liger`: Liger-Kernel's ops as problem + expert pairs, read at run time."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from klineage.errors import UsageError
from tests.liger_ops import liger_op_path


def test_each_pair_is_the_module_unchanged_a_wrapper_a_problem_and_where_it_came_from(
    tmp_path: Path,
) -> None:
    from klineage.liger import OPS, write_pairs

    module = liger_op_path("softmax")  # skips without liger_kernel
    folders = write_pairs(tmp_path, ["softmax", "swiglu"])
    assert [f.name for f in folders] == ["liger_softmax", "liger_swiglu"]
    expert = (tmp_path / "liger_softmax" / "expert.py").read_text()
    assert expert.startswith(module.read_text()) and "LigerSoftmaxFunction.apply(x)" in expert
    problem = (tmp_path / "liger_swiglu" / "problem.py").read_text()
    assert "torch.sigmoid" in problem and "CPU_REGIMES" in problem
    prov = json.loads((tmp_path / "liger_softmax" / "PROVENANCE.json").read_text())
    assert prov["sha256"] == hashlib.sha256(module.read_bytes()).hexdigest()
    assert prov["library"] == "liger-kernel" and prov["cpu_interpreter"] is OPS["softmax"].cpu
    with pytest.raises(UsageError, match="known Liger ops are softmax"):
        write_pairs(tmp_path, ["softmaxx"])

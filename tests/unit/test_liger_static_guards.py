"""Real library kernels pass the static guards unchanged: Liger-Kernel's ops, read at run time.

The installed liger_kernel (the `liger` extra) is located, never copied; a test skips, saying
why, where it is not installed. Each op is checked twice: its module source as it ships, and a
candidate file in the gate's form (that source plus a ModelNew calling the op's autograd
Function), read back the way the gate reads a candidate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.gate.static_guards import check_static
from klineage.problem.loader import parse_source, read_source
from tests.liger_ops import OPS, WRAPPERS, liger_candidate, liger_op_path


def _violations(path: Path) -> list[str]:
    return [v.render(path.name) for v in check_static(parse_source(path, read_source(path)))]


def test_the_five_ops_are_covered() -> None:
    assert set(OPS) == {"softmax", "layer_norm", "rms_norm", "swiglu", "geglu"}


@pytest.mark.parametrize("op", OPS)
def test_liger_op_module_passes_every_static_guard(op: str) -> None:
    assert _violations(liger_op_path(op)) == []


@pytest.mark.parametrize("op", OPS)
def test_liger_op_as_a_candidate_passes_every_static_guard(op: str, tmp_path: Path) -> None:
    path = tmp_path / f"liger_{op}.py"
    path.write_text(liger_candidate(op), encoding="utf-8")
    assert _violations(path) == []


@pytest.mark.parametrize("op", OPS)
def test_a_bare_liger_import_is_refused_only_for_defining_no_kernel(
    op: str, tmp_path: Path
) -> None:
    """Importing and calling the op is allowed; a file with no @triton.jit of its own is not a
    Triton kernel candidate (launches_triton), and that is the only objection. Needs no Liger:
    the guards only read the text."""
    function, wrapper = WRAPPERS[op]
    path = tmp_path / f"import_{op}.py"
    path.write_text(
        f"import torch\nimport torch.nn as nn\n\nfrom liger_kernel.ops.{op} import {function}\n"
        f"\n{wrapper}",
        encoding="utf-8",
    )
    found = check_static(parse_source(path, read_source(path)))
    assert [v.guard for v in found] == ["launches_triton"], [v.render(path.name) for v in found]

"""Static guards on small snippets: each must fire on its pattern and stay quiet on clean code."""

from __future__ import annotations

import ast
import textwrap

import pytest

from klineage.gate.static_guards import check_static

CLEAN = """
import torch, triton, triton.language as tl
import torch.nn as nn

@triton.jit
def _k(x_ptr, BLOCK: tl.constexpr):
    pass

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x).view(-1)
        _k[(1,)](y, BLOCK=16)
        return y.reshape(x.shape)
"""


def guards(src: str) -> list[str]:
    return [v.guard for v in check_static(ast.parse(textwrap.dedent(src)))]


def test_clean_candidate_has_no_violation() -> None:
    assert guards(CLEAN) == []


@pytest.mark.parametrize(
    ("edit", "guard"),
    [
        (("@triton.jit\n", ""), "launches_triton"),
        (
            (
                "        return y.reshape(x.shape)",
                "        try:\n            return y\n        except Exception:\n            return x",
            ),
            "no_try_except",
        ),
        (
            (
                "        return y.reshape(x.shape)",
                "        with contextlib.suppress(Exception):\n            return y",
            ),
            "no_try_except",
        ),
        (("class ModelNew(nn.Module):", "class ModelNew(Model):"), "no_reference_model"),
        (("        return y.reshape(x.shape)", "        return Model()(x)"), "no_reference_model"),
        (
            ("import torch.nn as nn", "import torch.nn as nn\nfrom problem import Model"),
            "no_reference_model",
        ),
        (
            ("        return y.reshape(x.shape)", "        return torch.softmax(x, -1)"),
            "no_torch_compute",
        ),
        (("        return y.reshape(x.shape)", "        return F.gelu(x)"), "no_torch_compute"),
        (
            ("        return y.reshape(x.shape)", "        return torch.compile(lambda t: t)(y)"),
            "no_side_effects",
        ),
        (
            (
                "        y = torch.empty_like",
                "        s = torch.cuda.Stream()\n        y = torch.empty_like",
            ),
            "no_side_effects",
        ),
    ],
)
def test_each_guard_fires(edit: tuple[str, str], guard: str) -> None:
    old, new = edit
    assert old in CLEAN
    assert guard in guards(CLEAN.replace(old, new))


def test_violation_names_the_line() -> None:
    src = CLEAN.replace("        return y.reshape(x.shape)", "        return torch.exp(x)")
    (v,) = check_static(ast.parse(src))
    assert v.line == src.splitlines().index("        return torch.exp(x)") + 1
    assert v.render("cand.py").startswith(f"cand.py:{v.line}: [no_torch_compute] torch.exp()")


def test_allocation_calls_in_forward_are_allowed() -> None:
    src = CLEAN.replace(
        "y = torch.empty_like(x).view(-1)",
        "y = torch.zeros(4, dtype=torch.float32); z = torch.empty((2, 2))",
    )
    assert guards(src) == []

"""Loading errors name the file, the line and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from klineage.errors import LoadError, UsageError
from klineage.problem.loader import check_overrides, load_problem, parse_source


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

batch = 4
REGIMES = {"a": dict(n=3), "b": dict(batch=2, n=5)}
CPU_REGIMES = ("a",)

def get_inputs(n=8):
    return [torch.randn(batch, n)]

def get_init_inputs():
    return []
"""


def test_syntax_error_has_line_column_and_caret(tmp_path: Path) -> None:
    p = write(tmp_path, "bad.py", "x = 1\ny = (2 +\n")
    with pytest.raises(LoadError) as e:
        parse_source(p)
    text = str(e.value)
    assert (
        f"{p}:2" in text
        and "syntax error" in text
        and "^" in text
        and "expected: valid Python" in text
    )


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="file not found"):
        parse_source(tmp_path / "nope.py")


def test_regimes_split_into_kwargs_and_global_overrides(tmp_path: Path) -> None:
    problem = load_problem(write(tmp_path, "p1.py", PROBLEM))
    assert problem.regimes["b"].kwargs == {"n": 5}
    assert problem.regimes["b"].overrides == {"batch": 2}
    assert problem.select_regimes(None, "cpu") == ["a"]
    assert problem.select_regimes(None, "cuda") == ["a", "b"]
    (x,) = problem.make_inputs("b", "cpu")
    assert tuple(x.shape) == (2, 5)
    assert problem.module.batch == 4  # restored after the regime


def test_unknown_regime_key_is_named(tmp_path: Path) -> None:
    src = PROBLEM.replace("dict(n=3)", "dict(n=3, widht=7)")
    with pytest.raises(LoadError) as e:
        load_problem(write(tmp_path, "p2.py", src))
    assert "REGIMES['a'] sets 'widht'" in str(e.value) and "get_inputs(n)" in str(e.value)


def test_cpu_regimes_must_name_known_regimes(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="CPU_REGIMES names unknown regimes: zz"):
        load_problem(write(tmp_path, "p3.py", PROBLEM.replace('("a",)', '("zz",)')))


def test_problem_tolerances_replace_the_gate_default_for_their_dtype(tmp_path: Path) -> None:
    from klineage.gate.checker import Checker
    from klineage.gate.protocol import RefRegime
    from klineage.gate.request import GateRequest

    path = write(tmp_path, "tol.py", PROBLEM + '\nTOLERANCES = {"bfloat16": 2e-2}\n')
    problem = load_problem(path)
    assert problem.tolerances == {"bfloat16": 0.02}
    checker = Checker(GateRequest(problem=str(path), candidate="c.py"), None, None, tmp_path)  # type: ignore[arg-type]
    regime = RefRegime(
        name="a", init="i.pt", cases=[], dtype="bfloat16", tolerance=problem.tolerances["bfloat16"]
    )
    tol = checker.tolerance_for(regime)
    assert tol("bfloat16") == 0.02
    assert tol("float32") == 1e-4  # undeclared: the gate's default
    assert load_problem(write(tmp_path, "plain.py", PROBLEM)).tolerances == {}


@pytest.mark.parametrize(
    "decl, shown",
    [
        ('{"bfloat16": 0.2}', "TOLERANCES['bfloat16'] = 0.2"),  # over the 5e-2 ceiling
        ('{"bfloat16": 0}', "TOLERANCES['bfloat16'] = 0"),
        ('{"bf16": 0.02}', "TOLERANCES['bf16'] = 0.02"),  # not a dtype name
        ('{"float16": "1e-2"}', "TOLERANCES['float16'] = '1e-2'"),
        ("0.02", "TOLERANCES is float"),
    ],
)
def test_bad_problem_tolerances_are_named(tmp_path: Path, decl: str, shown: str) -> None:
    with pytest.raises(LoadError) as e:
        load_problem(write(tmp_path, "badtol.py", PROBLEM + f"\nTOLERANCES = {decl}\n"))
    assert shown in str(e.value) and "(0, 0.05]" in str(e.value)


def test_set_override_of_missing_global_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="--set nope: no module-level assignment to nope") as e:
        load_problem(write(tmp_path, "p4.py", PROBLEM), {"nope": 1})
    assert "assignable globals: batch, REGIMES, CPU_REGIMES" in str(e.value)


def test_set_of_a_name_with_no_assignment_is_a_usage_error_before_running(tmp_path: Path) -> None:
    p = write(tmp_path, "p4.py", PROBLEM + "\nraise SystemExit('ran')\n")
    with pytest.raises(UsageError) as e:
        check_overrides(p, {"get_inputs": 1, "n": 2})
    text = str(e.value)
    assert str(p) in text and "--set get_inputs, n:" in text and "assignable globals: batch" in text


DERIVED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, out_features, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(bias_shape))
    def forward(self, x):
        return x + self.bias

batch_size = 128
out_features: int = 512
bias_shape = (out_features,)
scale = out_features * 2

def get_inputs():
    return [torch.randn(batch_size, out_features)]

def get_init_inputs():
    return [out_features, bias_shape]
"""


def test_set_rebinds_the_assignment_so_derived_globals_follow(tmp_path: Path) -> None:
    problem = load_problem(write(tmp_path, "d.py", DERIVED), {"out_features": 8, "batch_size": 3})
    assert problem.module.bias_shape == (8,) and problem.module.scale == 16
    assert problem.init_inputs("default") == [8, (8,)]
    x = problem.make_inputs("default", "cpu")[0]
    assert tuple(x.shape) == (3, 8)
    assert "__klineage_overrides__" not in vars(problem.module)
    model = problem.model_cls(*problem.init_inputs("default"))
    assert tuple(model(x).shape) == (3, 8)  # the reference no longer crashes on a stale shape


def test_set_keeps_line_numbers_of_errors(tmp_path: Path) -> None:
    src = DERIVED.replace("scale = out_features * 2", "scale = 1 // (out_features - 8)")
    p = write(tmp_path, "z.py", src)
    with pytest.raises(LoadError) as e:
        load_problem(p, {"out_features": 8})
    line = src.splitlines().index("scale = 1 // (out_features - 8)") + 1
    assert f"{p}:{line}" in str(e.value) and "ZeroDivisionError" in str(e.value)


def test_a_regime_value_is_set_over_a_set_value(tmp_path: Path) -> None:
    problem = load_problem(write(tmp_path, "r.py", PROBLEM), {"batch": 7})
    assert problem.module.batch == 7
    assert tuple(problem.make_inputs("a", "cpu")[0].shape) == (7, 3)
    assert tuple(problem.make_inputs("b", "cpu")[0].shape) == (2, 5)


def test_missing_model_lists_the_classes_found(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no class Model defined .classes here: Modle"):
        load_problem(write(tmp_path, "p5.py", PROBLEM.replace("class Model(", "class Modle(")))


def test_import_error_names_the_line(tmp_path: Path) -> None:
    p = write(tmp_path, "p1.py", "import os\nimport klineage_missing_mod\n" + PROBLEM)
    with pytest.raises(LoadError) as e:
        load_problem(p)
    assert f"{p}:2" in str(e.value) and "ModuleNotFoundError" in str(e.value)


def test_get_inputs_error_is_reported_with_regime_kwargs(tmp_path: Path) -> None:
    problem = load_problem(
        write(
            tmp_path,
            "p6.py",
            PROBLEM.replace(
                "return [torch.randn(batch, n)]", "return [torch.randn(batch, n)[100]]"
            ),
        )
    )
    with pytest.raises(LoadError, match=r"get_inputs\(n=3\) raised IndexError"):
        problem.make_inputs("a", "cpu")

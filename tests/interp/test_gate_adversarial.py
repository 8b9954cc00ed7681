"""The gate on the bundled softmax problem: one correct kernel accepted, every cheat or bug
rejected at the right stage with a message that names the cause."""

from __future__ import annotations

import pytest

from klineage.config import GateConfig
from klineage.gate import GateResult, Stage, Status, run_gate
from tests.conftest import CANDIDATES, EXAMPLE, PROBLEMS

pytestmark = pytest.mark.interpreter

PROBLEM = EXAMPLE / "problem.py"


def gate(candidate: str, problem=PROBLEM, **kw) -> GateResult:
    config = GateConfig(cache=False, timeout_s=kw.pop("timeout_s", 120.0))
    return run_gate(
        problem,
        CANDIDATES / f"{candidate}.py" if "/" not in candidate else candidate,
        config=config,
        **kw,
    )


def test_correct_candidate_is_accepted() -> None:
    r = run_gate(PROBLEM, EXAMPLE / "candidate.py", config=GateConfig(cache=False))
    assert r.accepted, r.message
    assert [s.status for s in r.stages] == [Status.PASSED] * 5 + [Status.NOT_MEASURED]
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    assert [o.regime for o in correctness.regimes] == ["tiny_rows", "odd", "half"]
    assert all(o.trials == 5 for o in correctness.regimes)
    assert r.environment is not None and r.environment.interpreter
    assert "not measured" in r.environment.timing_method


REJECTIONS = [
    # (candidate, stage, words the message must contain)
    ("wrong_result", Stage.CORRECTNESS, ["beyond tolerance", "worst at"]),
    ("nan_output", Stage.CORRECTNESS, ["NaN"]),
    ("partial_write", Stage.CORRECTNESS, ["NaN-poisoned"]),
    ("input_mutation", Stage.CORRECTNESS, ["input 0 was modified in place"]),
    (
        "torch_compute",
        Stage.RUNTIME_GUARDS,
        ["PyTorch computed in forward", "aten.exp", "aten.log"],
    ),
    ("torch_compute_in_forward", Stage.STATIC_GUARDS, ["torch.softmax", "no_torch_compute"]),
    ("calls_reference", Stage.STATIC_GUARDS, ["imports the reference Model"]),
    ("calls_reference_hidden", Stage.STATIC_GUARDS, ["imports sys"]),
    ("try_except", Stage.STATIC_GUARDS, ["try/except"]),
    ("cached_by_pointer", Stage.CORRECTNESS, ["output unchanged although the inputs changed"]),
    ("os_exit", Stage.STATIC_GUARDS, ["os._exit"]),
    ("segfault", Stage.COMPILE, ["SIGSEGV"]),
    ("syntax_error", Stage.LOAD, ["syntax_error.py:6", "syntax error", "^"]),
    ("missing_modelnew", Stage.LOAD, ["no class ModelNew", "Model2"]),
    (
        "import_error",
        Stage.LOAD,
        ["ModuleNotFoundError", "klineage_no_such_module", "import_error.py:3"],
    ),
    ("wrong_init", Stage.LOAD, ["ModelNew(*get_init_inputs()) failed", "wrong_init.py:"]),
    ("autotune_one_wrong_config", Stage.CORRECTNESS, ["autotune config 2/2", "BLOCK=512", "odd"]),
]


@pytest.mark.parametrize(
    ("candidate", "stage", "words"), REJECTIONS, ids=[r[0] for r in REJECTIONS]
)
def test_adversarial_candidate_is_rejected_at_the_right_stage(
    candidate: str, stage: Stage, words: list[str]
) -> None:
    r = gate(candidate)
    assert not r.accepted
    assert r.failed_stage is stage, r.message
    failing = r.stage(stage)
    assert failing is not None
    text = failing.message + " ".join(o.message for o in failing.regimes)
    for word in words:
        assert word in text, f"{word!r} not in: {text}"
    later = [s for s in r.stages if s.stage.value != stage.value][list(Stage).index(stage) :]
    assert all(s.status is not Status.PASSED for s in later if s.stage is Stage.PROFILE)


@pytest.mark.parametrize(
    ("candidate", "stage", "words"),
    [
        # The reference is in another process: the lookup finds nothing to call.
        ("calls_reference_hidden", Stage.COMPILE, ["KeyError"]),
        ("os_exit", Stage.COMPILE, ["exited with code 3"]),
    ],
)
def test_past_the_static_guards_the_harness_still_rejects(
    candidate: str, stage: Stage, words: list[str]
) -> None:
    r = run_gate(
        PROBLEM, CANDIDATES / f"{candidate}.py", config=GateConfig(cache=False), static_guards=False
    )
    assert r.failed_stage is stage, r.message
    assert all(w in r.message for w in words), r.message


def test_hardcoded_shape_passes_one_regime_and_fails_the_others() -> None:
    r = gate("hardcoded_shape")
    assert r.failed_stage is Stage.CORRECTNESS
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    status = {o.regime: o.status for o in correctness.regimes}
    assert status == {"tiny_rows": Status.PASSED, "odd": Status.FAILED, "half": Status.FAILED}


def test_infinite_loop_times_out_and_the_parent_survives() -> None:
    # The candidate's clock starts after the reference's (gate/drive.py), and its harness is
    # forked warm: 10 s is several times what the compile stage of the example takes loaded.
    r = gate("infinite_loop", timeout_s=10.0)
    assert not r.accepted
    assert r.failed_stage is Stage.COMPILE
    assert "timed out after 10 s" in r.message


def test_every_autotune_config_is_checked_when_all_are_correct() -> None:
    r = gate("autotune_all_good")
    assert r.accepted, r.message
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    assert all(o.configs_checked == 2 for o in correctness.regimes)
    assert "under every launchable config of the 2-config autotune table" in correctness.message
    assert all(
        "under each of 2 launchable autotune configs" in o.message for o in correctness.regimes
    )


def test_problem_whose_inputs_are_not_tensors_is_a_load_error() -> None:
    r = run_gate(
        PROBLEMS / "nontensor_inputs.py", EXAMPLE / "candidate.py", config=GateConfig(cache=False)
    )
    assert r.failed_stage is Stage.LOAD
    assert "get_inputs() element 1 is str" in r.message
    assert "nontensor_inputs.py:12" in r.message


def test_kernelbench_file_unchanged_shrunk_with_set() -> None:
    r = run_gate(
        PROBLEMS / "kernelbench_globals.py",
        EXAMPLE / "candidate.py",
        overrides={"batch_size": 5, "dim": 77},
        config=GateConfig(cache=False),
    )
    assert r.accepted, r.message
    assert r.regimes == ["default"]


def test_unknown_regime_is_a_load_error_naming_the_known_ones() -> None:
    r = run_gate(
        PROBLEM, EXAMPLE / "candidate.py", regimes=["nope"], config=GateConfig(cache=False)
    )
    assert r.failed_stage is Stage.LOAD
    assert "unknown regime nope" in r.message and "tiny_rows" in r.message


def test_bf16_regime_is_reported_not_verified_on_cpu() -> None:
    r = run_gate(
        PROBLEM,
        EXAMPLE / "candidate.py",
        regimes=["tiny_rows", "large"],
        config=GateConfig(cache=False),
    )
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    by = {o.regime: o for o in correctness.regimes}
    assert by["large"].status is Status.NOT_MEASURED and "bfloat16" in by["large"].message
    assert by["tiny_rows"].status is Status.PASSED
    assert "NOT verified here: large" in correctness.message


def test_second_identical_call_is_served_from_the_cache(tmp_path) -> None:
    config = GateConfig(cache=True)
    first = run_gate(
        PROBLEM, EXAMPLE / "candidate.py", regimes=["tiny_rows"], config=config, cache_dir=tmp_path
    )
    second = run_gate(
        PROBLEM, EXAMPLE / "candidate.py", regimes=["tiny_rows"], config=config, cache_dir=tmp_path
    )
    assert first.accepted and not first.cached
    assert second.cached and second.accepted and second.cache_key == first.cache_key
    other = run_gate(
        PROBLEM, EXAMPLE / "candidate.py", regimes=["odd"], config=config, cache_dir=tmp_path
    )
    assert not other.cached and other.cache_key != first.cache_key


def test_a_config_the_autotuner_would_skip_is_skipped_and_the_rest_checked() -> None:
    r = gate("autotune_unlaunchable_config")
    assert r.accepted, r.message
    correctness = r.stage(Stage.CORRECTNESS)
    assert correctness is not None
    for o in correctness.regimes:
        assert o.configs_checked == 1
        assert (
            "skipped, as the autotuner skips them: config 2" in o.message
            and "OutOfResources" in o.message
        )

"""The optimize loop without kernels: materializers on source text, and the loop's decisions
(keep only faster by the margin on a GPU, budget, duplicates, resume) with a fake gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from klineage.errors import KLineageError, UsageError
from klineage.gate import GateResult, RegimeOutcome, Stage, StageResult, Status
from klineage.optimize import Settings, optimize
from klineage.optimize import loop as loop_mod
from klineage.optimize.decide import cpu_regimes_of
from klineage.optimize.materialize import adapt_params, extract_code, mechanical
from klineage.optimize.policies import Proposal
from klineage.store import open_store
from tests.conftest import KERNELS

NAIVE_MM = (KERNELS / "matmul" / "naive.py").read_text()


def test_extract_code_takes_the_fenced_file_that_defines_modelnew() -> None:
    reply = "Plan first.\n```python\nx = 1\n```\nThen:\n```python\nclass ModelNew:\n    pass\n```\n"
    code, why = extract_code(reply)
    assert code == "class ModelNew:\n    pass\n" and "ModelNew" in why
    assert extract_code("no code at all")[0] is None
    code, why = extract_code("```python\nclass ModelNew(:\n```")
    assert code is None and "does not parse" in why
    assert extract_code("```diff\n-class ModelNew\n```")[0] is None  # a diff is not a file


def test_adapt_params_drops_what_names_the_experts_helpers() -> None:
    kept, notes = adapt_params({"expr": "_num_warps(BLOCK_N)", "kind": "launch"}, NAIVE_MM)
    assert kept == {} and "_num_warps" in notes[0]  # the site's kind is the target's to say
    kept, notes = adapt_params({"name": "BLOCK_V", "value": 4096}, NAIVE_MM)
    assert kept == {} and "value dropped with name" in notes[-1]  # a size belongs to its name
    assert adapt_params({"name": "BLOCK_M", "value": 128}, NAIVE_MM)[0] == {
        "name": "BLOCK_M",
        "value": 128,
    }
    configs = "[triton.Config({'BLOCK_SIZE_M': 128, 'GROUP_SIZE_M': 8}, num_warps=8)]"
    assert adapt_params({"configs": configs}, NAIVE_MM)[0] == {}  # the naive kernel says BLOCK_M
    ok = "[triton.Config({'BLOCK_M': 128, 'BLOCK_N': 64}, num_warps=8)]"
    assert adapt_params({"configs": ok}, NAIVE_MM)[0] == {"configs": ok}


def test_mechanical_applies_at_every_site_once() -> None:
    m = mechanical(NAIVE_MM, "block_size")
    assert m.source is not None and m.sites == 3
    assert "BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64" in m.source  # each tile doubled once
    e = mechanical(NAIVE_MM, "cache_eviction_hints")
    assert e.source is not None and e.source.count("eviction_policy") == 2
    # The expert's site shape (a Config's num_warps) does not bind the target (a launch).
    w = mechanical(
        NAIVE_MM, "num_warps", {"kind": "config", "expr": "8", "position": 1, "keyword": True}
    )
    assert w.source is not None and "num_warps=8" in w.source
    none = mechanical(NAIVE_MM, "causal_block_skipping")
    assert none.source is None and "no place to add it" in none.reason
    assert "not registered" in mechanical(NAIVE_MM, "nope").reason


def test_mechanical_puts_a_heuristic_flag_after_the_targets_positional_arguments() -> None:
    # On the H200 the expert's flag position (16th parameter) was carried into held-out kernels
    # launched positionally: Triton then bound `seq` to the wrong slot (KeyError: 'seq').
    import ast

    naive = (KERNELS.parent / "heldout" / "attention_scaled_custom" / "naive.py").read_text()
    expert = {"kind": "heuristic", "flag": "EVEN_K", "param_index": 16, "negated": False,
              "heuristic": 'lambda args: args["K"] % args["BLOCK_SIZE_K"] == 0'}  # fmt: skip
    m = mechanical(naive, "mask_free_even_path", expert)
    assert m.source is not None, m.reason
    kernel = next(
        f for f in ast.parse(m.source).body if isinstance(f, ast.FunctionDef) and f.decorator_list
    )
    names = [a.arg for a in kernel.args.args]
    before = [
        a.arg
        for a in next(f for f in ast.parse(naive).body if isinstance(f, ast.FunctionDef)).args.args
    ]
    added = names[len(before) :]
    assert names[: len(before)] == before  # the target's own parameters keep their slots
    assert added and all(n.startswith("EVEN_") for n in added)


def _gate_result(ok: bool, ms: dict[str, float]) -> GateResult:
    stages = [
        StageResult(stage=s, status=Status.PASSED)
        for s in (Stage.LOAD, Stage.STATIC_GUARDS, Stage.COMPILE, Stage.RUNTIME_GUARDS)
    ]
    stages.append(StageResult(stage=Stage.CORRECTNESS, status=Status.PASSED if ok else Status.FAILED, message="" if ok else "wrong values",
                              regimes=[RegimeOutcome(regime=r, status=Status.PASSED) for r in ms]))  # fmt: skip
    if ok:
        rows = {
            r: {
                "kernel_ms": v,
                "kernel_p20_ms": v,
                "kernel_p80_ms": v,
                "basis": "device",
                "host_ms": v,
                "host_p20_ms": v,
                "host_p80_ms": v,
                "eager_ms": 2.0,
                "speedup_vs_eager": 2.0 / v,
                "floor_ms": 0.1,
            }
            for r, v in ms.items()
        }
        stages.append(
            StageResult(stage=Stage.PROFILE, status=Status.PASSED, numbers={"regimes": rows})
        )
    return GateResult(problem="p", candidate="c", device="cuda", accepted=ok, stages=stages)


class FakePolicy:
    """Proposes passes by name; the fake gate reads '# speed: X' / '# broken' markers."""

    name, knowledge = "fake", "none"

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def proposals(self, ctx: Any) -> Any:
        for n in self.names:
            yield Proposal(key=f"pass:{n}", label=n, materializer="mechanical", pass_name=n)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """A problem with one GPU regime 'big' (and a CPU one), a kernel, passes that append
    markers, and a gate timing 'big' as 1 / (product of speed markers)."""
    problem = tmp_path / "problem.py"
    problem.write_text("REGIMES = {'small': {}, 'big': {}}\nCPU_REGIMES = ('small',)\n")
    kernel = tmp_path / "kernel.py"
    kernel.write_text("# kernel\n")
    effects = {
        "fast": "# speed: 1.5\n",
        "tiny": "# speed: 1.01\n",
        "bad": "# broken\n",
        "fast_again": "# speed: 1.5\n",
    }
    calls: list[str] = []
    limits: list[float] = []

    def fake_mechanical(source: str, name: str, params: Any = None, then: Any = ()) -> Any:
        from klineage.optimize.materialize import Materialized

        if name not in effects:
            return Materialized(None, f"{name}: no place to add it")
        return Materialized(source + effects[name], f"added {name}", 1)

    def fake_gate(self: Any, source: str, config: Any, base: str | None = None) -> GateResult:
        calls.append(source)
        limits.append(config.max_speedup_vs_reference)
        speed = 1.0
        for line in source.splitlines():
            if line.startswith("# speed:"):
                speed *= float(line.split(":")[1])
        return _gate_result("# broken" not in source, {"small": 1.0, "big": 1.0 / speed})

    monkeypatch.setattr(loop_mod, "mechanical", fake_mechanical)
    monkeypatch.setattr(loop_mod.Optimizer, "gate", fake_gate)
    monkeypatch.setattr(loop_mod, "problem_shapes", lambda p, o=None: {"small": {"shapes": [[2]], "dtypes": ["float32"]},
                                                               "big": {"shapes": [[4096]], "dtypes": ["float32"]}})  # fmt: skip
    return {
        "problem": problem,
        "kernel": kernel,
        "calls": calls,
        "limits": limits,
        "store": open_store(tmp_path / "k.db"),
    }


def _run(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch, names: list[str], **kw: Any
) -> dict[str, Any]:
    monkeypatch.setattr(loop_mod, "get_policy", lambda name: FakePolicy(names))
    return optimize(
        fake["problem"], fake["kernel"], store=fake["store"], skills=[], device="cuda", **kw
    )


def test_keeps_only_correct_and_faster_by_the_margin(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _run(
        fake,
        monkeypatch,
        ["tiny", "bad", "none", "fast", "fast_again"],
        settings=Settings(budget=10),
    )
    trials = fake["store"].trials(s["run_id"])
    verdicts = [(t.proposal, t.gated, t.accepted, t.kept) for t in trials]
    assert verdicts == [
        ("pass:tiny", True, True, False),  # 1.01x < 1.03
        ("pass:bad", True, False, False),  # wrong: rejected
        ("pass:none", False, False, False),  # did not apply: no gate call spent
        ("pass:fast", True, True, True),
        ("pass:fast_again", True, True, True),  # stacks on the new best: 1.5x again
        ("pass:tiny", True, True, False),  # budget left: again on the changed best, still 1.01x
    ]
    assert trials[-1].label == "tiny [again, on the new best kernel]"
    assert (
        s["gate_calls"] == 5
        and s["measured"]
        and s["regimes"]["big"]["speedup"] == pytest.approx(2.25)
    )
    assert "small" not in s["regimes"]  # CPU regimes are checked, not timed
    assert list(s["curve"][-1]) == [5, pytest.approx(2.25)]


def test_a_proposal_that_did_not_pay_is_tried_again_once_the_kernel_changed(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # "late" pays (1.2x) only once "fast" is in the kernel, as exp2 did after a tile change.
    real_gate = loop_mod.Optimizer.gate

    def gate(self: Any, source: str, config: Any, base: str | None = None) -> GateResult:
        if "# late" in source and "# speed: 1.5" in source:
            source += "# speed: 1.2\n"
        return real_gate(self, source, config)  # type: ignore[no-any-return]

    monkeypatch.setattr(loop_mod.Optimizer, "gate", gate)
    real_mech = loop_mod.mechanical

    def mech(source: str, name: str, params: Any = None, then: Any = ()) -> Any:
        from klineage.optimize.materialize import Materialized

        return (
            Materialized(source + "# late\n", "added late", 1)
            if name == "late"
            else real_mech(source, name, params)
        )

    monkeypatch.setattr(loop_mod, "mechanical", mech)
    s = _run(fake, monkeypatch, ["late", "fast", "bad"], settings=Settings(budget=10))
    verdicts = [(t.proposal, t.accepted, t.kept) for t in fake["store"].trials(s["run_id"])]
    assert verdicts == [("pass:late", True, False), ("pass:fast", True, True), ("pass:bad", False, False),
                        ("pass:late", True, True)]  # fmt: skip
    assert s["regimes"]["big"]["speedup"] == pytest.approx(1.8) and s["gate_calls"] == 4
    # Kept, so never again; "bad" failed the gate, so it is not retried either.
    assert "no proposal left" in s["stop_reason"]
    # The stored trajectory replays without a gate call.
    n = len(fake["calls"])
    again = _run(fake, monkeypatch, ["late", "fast", "bad"], settings=Settings(budget=10))
    assert again["speedup"] == s["speedup"] and len(fake["calls"]) == n


def test_the_budget_stops_the_loop_and_a_larger_budget_resumes(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _run(fake, monkeypatch, ["tiny", "fast", "fast_again"], settings=Settings(budget=1))
    assert s["gate_calls"] == 1 and "budget of 1 gate calls spent" in s["stop_reason"]
    n = len(fake["calls"])
    s2 = _run(fake, monkeypatch, ["tiny", "fast", "fast_again"], settings=Settings(budget=3))
    assert s2["gate_calls"] == 3 and s2["run_id"] == s["run_id"]
    # The start is re-gated on resume? No: its verdict is stored. Only the two new trials ran.
    assert len(fake["calls"]) == n + 2


def test_a_changed_policy_is_a_divergence_not_a_silent_mixup(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(fake, monkeypatch, ["tiny", "fast"], settings=Settings(budget=1))
    with pytest.raises(KLineageError, match="diverges at trial 1"):
        _run(fake, monkeypatch, ["fast", "tiny"], settings=Settings(budget=2))
    s = _run(fake, monkeypatch, ["fast", "tiny"], settings=Settings(budget=2), fresh=True)
    assert s["trials"] == 2


def test_identical_candidates_are_not_gated_twice(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _run(fake, monkeypatch, ["tiny", "tiny"], settings=Settings(budget=5))
    t = fake["store"].trials(s["run_id"])
    assert [x.gated for x in t] == [True, False] and "same kernel as trial 1" in t[1].message


def test_bad_settings_are_usage_errors(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UsageError, match="--budget"):
        _run(fake, monkeypatch, [], settings=Settings(budget=0))
    with pytest.raises(UsageError, match="--margin"):
        _run(fake, monkeypatch, [], settings=Settings(margin=1.5))
    from klineage.optimize.policies import get_policy

    with pytest.raises(UsageError, match="--policy nope: expected one of klineage, what-only"):
        get_policy("nope")


def test_suspicion_is_judged_against_the_start_not_eager(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start (2x eager on 'small' in the fake gate) is never flagged for speed; candidates
    are flagged only past 10x the start's own speedup over eager."""
    _run(fake, monkeypatch, ["fast"], settings=Settings(budget=1))
    start_limit, candidate_limit = fake["limits"]
    assert start_limit >= 1e9 and candidate_limit == pytest.approx(10.0 * 2.0)


def test_klineage_tries_skills_whose_conditions_fail_only_after_those_that_hold() -> None:
    """With budget left, applicable skills the conditions rule out come last, labelled so."""
    from klineage.optimize.policies import Context, get_policy
    from klineage.problem.shapes import features, regime_shapes
    from klineage.skills import read_json
    from klineage.skills.library import shipped_library_path

    d = KERNELS.parent / "heldout" / "attention_d32"
    # The regimes a GPU run is judged on (optimize matches skills to them, not to the CPU's).
    cpu = cpu_regimes_of((d / "problem.py").read_text())
    target = {r: features(e) for r, e in regime_shapes(d / "problem.py").items() if r not in cpu}
    from tests.unit.test_skills import as_measured

    library = [as_measured(s) for s in read_json(shipped_library_path())]
    ctx = Context(d / "problem.py", d / "naive.py", "cuda", library, False, 0, target, "9.0",
                  (d / "naive.py").read_text())  # fmt: skip
    keys = [p.key.split(":")[0] for p in get_policy("klineage").proposals(ctx)]
    assert "skill" in keys and "skill-explore" in keys
    assert keys == sorted(keys, key=lambda k: k == "skill-explore")  # every held skill first


def test_memory_baselines_learn_from_rollouts_and_tell_the_llm(tmp_path: Path) -> None:
    """Failure rules (AdaExplore-style) and slow->fast pairs (AccelOpt-style) are built from a
    random rollout's trials; mechanically they reorder or skip passes, with an LLM they are the
    prompt's 'What earlier attempts taught'."""
    from klineage.bench.memory import build_memory
    from klineage.optimize.materialize import build_prompt
    from klineage.optimize.policies import Context, get_policy

    store = open_store(tmp_path / "k.db")
    store.create_run(
        "r1",
        "/x/kernels/softmax/problem.py",
        "/x/kernels/softmax/naive.py",
        "p",
        "k",
        "cuda",
        "random",
        {},
    )
    for seq, (name, gated, ok, kept, sp) in enumerate(
        [
            ("block_size", True, False, False, None),
            ("block_size", True, False, False, None),
            ("exp2_log2e", True, True, True, 1.3),
        ],
        1,
    ):
        store.add_trial("r1", seq, f"pass:{name}", name, None, "mechanical", "base", candidate=f"# {seq}\n", candidate_sha=f"s{seq}",
                        gated=gated, accepted=ok, kept=kept, failed_stage=None if ok else "compile",
                        message="kept" if ok else "compile: out of shared memory", speedup=sp)  # fmt: skip
    store.update_run("r1", status="done")
    mem = build_memory(store, {"softmax"})
    assert [(r.pass_name, r.stage, r.count) for r in mem.active_rules()] == [
        ("block_size", "compile", 2)
    ]
    assert mem.gain("exp2_log2e") == pytest.approx(1.3) and "1.30x faster" in mem.pairs[0].insight
    ctx = Context(tmp_path, tmp_path, "cuda", [], False, 0, {}, memory=mem)
    ada = [p.pass_name for p in get_policy("adaexplore").proposals(ctx)]
    assert "block_size" not in ada and "exp2_log2e" in ada
    acc = [p.pass_name for p in get_policy("accelopt").proposals(ctx)]
    assert acc[0] == "exp2_log2e"
    ctx.llm = True
    first = next(iter(get_policy("adaexplore").proposals(ctx)))
    prompt = build_prompt("problem", "kernel", None, "regimes", "", first.notes)[1].content
    assert (
        first.materializer == "llm"
        and "What earlier attempts taught" in prompt
        and "You cannot add block_size" in prompt
    )


def test_a_gpu_run_is_judged_and_its_skills_matched_on_the_regimes_sized_for_it() -> None:
    from klineage.optimize.decide import timed_regimes

    src = 'REGIMES = {"tiny": {}, "big": {}}\nCPU_REGIMES = ("tiny",)\n'
    assert timed_regimes(src, ["tiny", "big"], "cuda") == ["big"]
    assert timed_regimes(src, ["tiny", "big"], "cpu") == []  # nothing is timed on a CPU
    assert timed_regimes("REGIMES = {}\n", ["a"], "cuda") == ["a"]  # no CPU_REGIMES: all


def test_an_alternative_is_built_on_its_own_kernel_and_kept_only_if_faster_than_the_best(
    fake: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    start = fake["kernel"].read_text()

    class Alternatives:
        name, knowledge = "fake", "none"

        def proposals(self, ctx: Any) -> Any:
            yield Proposal(
                key="pass:fast", label="fast", materializer="mechanical", pass_name="fast"
            )
            # On the start, not the best: "tiny" (1.01x) there is slower than the kept 1.5x.
            yield Proposal(key="alt:tiny", label="tiny", materializer="mechanical",
                           pass_name="tiny", source=start)  # fmt: skip
            yield Proposal(key="alt:both", label="fast twice", materializer="mechanical",
                           pass_name="fast_again", source=start + "# speed: 1.5\n# speed: 1.5\n")  # fmt: skip

    monkeypatch.setattr(loop_mod, "get_policy", lambda name: Alternatives())
    s = optimize(fake["problem"], fake["kernel"], store=fake["store"], skills=[], device="cuda",
                 settings=Settings(budget=3))  # fmt: skip
    trials = fake["store"].trials(s["run_id"])
    assert [(t.proposal, t.kept) for t in trials] == [
        ("pass:fast", True),
        ("alt:tiny", False),
        ("alt:both", True),
    ]
    assert trials[1].candidate == start + "# speed: 1.01\n"  # built on the start kernel...
    assert trials[1].base_sha == trials[0].candidate_sha  # ...and judged beside the best
    assert s["regimes"]["big"]["speedup"] == pytest.approx(1.5**3)

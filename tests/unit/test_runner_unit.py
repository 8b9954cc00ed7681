"""Parent-side pieces that need no child: verdict assembly, reply validation, cache keys, config."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from klineage.config import MAX_TOLERANCE, GateConfig
from klineage.gate.cache import cache_key
from klineage.gate.protocol import CallReply
from klineage.gate.records import Fault, Stage, Status
from klineage.gate.request import GateRequest, failed, passed
from klineage.gate.runner import assemble
from klineage.gate.session import CandidateDied, Clock, Harness, load_outputs


def req() -> GateRequest:
    return GateRequest(problem="p.py", candidate="c.py")


def test_a_failure_is_the_candidates_unless_said_otherwise() -> None:
    r = assemble(req(), {Stage.STATIC_GUARDS: passed(Stage.STATIC_GUARDS, "ok"),
                         Stage.COMPILE: failed(Stage.COMPILE, "boom")})  # fmt: skip
    assert not r.accepted and r.failed_stage is Stage.COMPILE and r.fault is Fault.CANDIDATE
    assert [s.status for s in r.stages][-3:] == [Status.SKIPPED] * 3
    assert r.stages[-1].message == "not reached: an earlier stage failed"
    p = assemble(req(), {Stage.LOAD: failed(Stage.LOAD, "x")}, fault=Fault.PROBLEM)
    assert p.fault is Fault.PROBLEM


def test_accepted_needs_compile_guards_and_correctness_passed() -> None:
    stages = {
        s: passed(s, "ok")
        for s in (Stage.LOAD, Stage.STATIC_GUARDS, Stage.COMPILE, Stage.RUNTIME_GUARDS)
    }
    r = assemble(req(), stages)
    assert not r.accepted  # correctness never reported
    stages[Stage.CORRECTNESS] = passed(Stage.CORRECTNESS, "ok")
    ok = assemble(req(), stages)
    assert ok.accepted and ok.fault is None


def test_cache_key_depends_on_every_part() -> None:
    assert cache_key({"a": 1, "b": 2}) == cache_key({"b": 2, "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})


def test_tolerance_can_never_exceed_the_ceiling() -> None:
    with pytest.raises(ValidationError, match="must be in"):
        GateConfig(tolerances={"float16": MAX_TOLERANCE * 2})
    with pytest.raises(ValidationError):
        GateConfig(trials=3)
    assert GateConfig().tolerance_for("float16") == 1e-2


def test_a_reply_must_validate() -> None:
    assert CallReply.model_validate_json('{"id": 3, "ok": true, "launches": 2}').launches == 2
    with pytest.raises(ValidationError):
        CallReply.model_validate_json('{"id": "x", "ok": "maybe"}')


def _fake_harness(tmp_path: Path, script: str, timeout_s: float = 5.0, *args: str) -> Harness:
    """A Harness whose process is `script` (plain Python reading fd argv[1], writing argv[2]),
    unsandboxed: what is tested here is the parent's side of the channel."""
    h = Harness.__new__(Harness)
    h.clock = Clock(timeout_s)
    h.log = tmp_path / "log"
    h.out = tmp_path
    h.timed_out = False
    h._buf, h._next = b"", 1
    cmd_r, h._cmd_w = os.pipe()
    h._rep_r, rep_w = os.pipe()
    with open(h.log, "wb") as log:
        h.proc = subprocess.Popen([sys.executable, *args, *(["-c", script] if script else []), str(cmd_r), str(rep_w)],
                                  pass_fds=(cmd_r, rep_w), stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    os.close(cmd_r)
    os.close(rep_w)
    return h


@pytest.mark.parametrize(
    ("script", "words"),
    [
        (
            "import os,sys; os.read(int(sys.argv[1]), 99); os.write(int(sys.argv[2]), b'not json\\n')",
            "malformed reply",
        ),
        (
            'import os,sys; os.read(int(sys.argv[1]), 99); os.write(int(sys.argv[2]), b\'{"id": 7, "ok": true}\\n\')',
            "answered command 7",
        ),
        (
            "import os,sys; os.read(int(sys.argv[1]), 99); os.write(int(sys.argv[2]), b'x' * (2 << 20))",
            "flooded",
        ),
        ("import os; os._exit(4)", "exited with code 4"),
        ("import time; time.sleep(60)", "timed out after 1 s"),
    ],
    ids=["malformed", "wrong-id", "flood", "exit", "hang"],
)
def test_a_bad_harness_is_a_rejection_with_its_reason(
    tmp_path: Path, script: str, words: str
) -> None:
    h = _fake_harness(tmp_path, script, timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(CandidateDied, match=words):
        h.request({"op": "call"}, CallReply)
    assert time.monotonic() - t0 < 10
    h.close()


def test_outputs_are_read_as_plain_tensors_only(tmp_path: Path) -> None:
    import torch

    good = tmp_path / "good.pt"
    torch.save({"outputs": [torch.ones(2), 3], "tuple": False}, good)
    outs = load_outputs(good)
    assert torch.equal(outs[0], torch.ones(2)) and outs[1] == 3
    evil = tmp_path / "evil.pt"
    evil.write_bytes(b"\x80\x04cos\nsystem\n(S'echo pwned'\ntR.")  # a pickle that runs a command
    with pytest.raises(CandidateDied, match="could not be read as tensors"):
        load_outputs(evil)
    torch.save({"nope": 1}, tmp_path / "shape.pt")
    with pytest.raises(CandidateDied, match="does not hold an output list"):
        load_outputs(tmp_path / "shape.pt")


def test_the_real_harness_names_a_modelnew_that_is_not_a_module(tmp_path: Path) -> None:
    from klineage.gate.protocol import LoadReply
    from klineage.gate.session import HARNESS

    cand = tmp_path / "c.py"
    cand.write_text("ModelNew = 3\n")
    h = _fake_harness(tmp_path, "", 60.0, "-I", str(HARNESS))
    reply = h.request({"op": "load", "candidate": str(cand), "device": "cpu", "seed": 0}, LoadReply)
    h.close()
    assert not reply.ok and "ModelNew is int, not an nn.Module subclass" in (reply.error or "")

"""gate/sandbox.py: each isolation level available here keeps (or, at the process level, plainly
does not keep) its promises, checked by running small Python snippets through the spec."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from klineage.errors import UsageError
from klineage.gate import isolation, sandbox
from klineage.gate.sandbox import (
    IsolationLevel,
    Limits,
    SandboxSpec,
    available_levels,
    sandbox_command,
)

BWRAP, UID, PROCESS = IsolationLevel.BWRAP, IsolationLevel.UID, IsolationLevel.PROCESS
LIMITS = Limits(memory_bytes=256 << 20, file_size_bytes=1 << 20, cpu_seconds=20, processes=256)

# The uid level needs an interpreter that uid 65534 can reach; a pyenv under a 0700 /root is
# not, so fall back to the system's Python (the snippets use the standard library only).
PYTHONS = [sys.executable, *(p for p in ("/usr/bin/python3",) if os.path.exists(p))]


def _level_param(level: IsolationLevel) -> Any:
    reason = f"{level} isolation not available here: {isolation._probe().missing.get(level, '')}"
    return pytest.param(
        level,
        id=str(level),
        marks=pytest.mark.skipif(level not in available_levels(), reason=reason),
    )


ALL_LEVELS = [_level_param(lv) for lv in IsolationLevel]


@dataclass
class Box:
    """A directory under /tmp (searchable by uid 65534, unlike pytest's 0700 tmp_path root) with
    the workdir and, next to it, files of the parent's the child must not touch."""

    base: Path
    work: Path
    outside: Path  # 0644, root's (the parent's)
    secret: Path  # 0600, the parent's


@pytest.fixture
def box() -> Iterator[Box]:
    base = Path(tempfile.mkdtemp(prefix="kl-sandbox-test-", dir="/tmp"))
    os.chmod(base, 0o755)
    outside, secret = base / "outside.txt", base / "secret.txt"
    outside.write_text("original")
    os.chmod(outside, 0o644)
    secret.write_text("s3cret")
    os.chmod(secret, 0o600)
    try:
        yield Box(base=base, work=base / "work", outside=outside, secret=secret)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _spec(
    level: IsolationLevel, code: str, box: Box, limits: Limits = LIMITS, **kw: Any
) -> SandboxSpec:
    last: UsageError | None = None
    for exe in PYTHONS:
        try:
            return sandbox_command(
                [exe, "-c", code], workdir=box.work, limits=limits, level=level, **kw
            )
        except UsageError as e:  # this interpreter is not reachable at this level; try the next
            last = e
    pytest.skip(f"no interpreter usable at the {level} level: {last}")


def _run(spec: SandboxSpec) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        spec.argv, env=spec.env, cwd=spec.cwd, preexec_fn=spec.preexec_fn, pass_fds=spec.pass_fds,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def _json(level: IsolationLevel, code: str, box: Box, **kw: Any) -> Any:
    r = _run(_spec(level, code, box, **kw))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


# A snippet that reports the outcome of one action: "ok", or the exception's class name.
TRY = """
import json, os, sys
def attempt(f):
    try:
        f()
        return "ok"
    except BaseException as e:
        return type(e).__name__
"""


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_environment_is_minimal_and_private(
    level: IsolationLevel, box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KLINEAGE_LLM_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nowhere")
    monkeypatch.setenv("SOME_PARENT_SETTING", "1")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    env = _json(level, code, box, env_keep={"KLINEAGE_DB": "/x.db", "KEPT": "yes"})
    assert env["HOME"] == str(box.work / "home") and (box.work / "home").is_dir()
    assert env["TMPDIR"] == str(box.work / "tmp") and (box.work / "tmp").is_dir()
    assert env["TRITON_CACHE_DIR"] == str(box.work / "home" / ".triton")
    assert env["KEPT"] == "yes"
    assert env["PYTHONNOUSERSITE"] == env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert not [k for k in env if k.startswith(("KLINEAGE_", "XDG_"))]
    assert "SOME_PARENT_SETTING" not in env


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_files_outside_the_workdir(level: IsolationLevel, box: Box) -> None:
    code = TRY + (
        f"print(json.dumps({{"
        f"'outside': attempt(lambda: open({str(box.outside)!r}, 'w').write('overwritten')),"
        f"'secret': attempt(lambda: open({str(box.secret)!r}).read()),"
        f"'inside': attempt(lambda: open('made-inside.txt', 'w').write('x')),"
        f"'tmpdir': attempt(lambda: open(os.path.join(os.environ['TMPDIR'], 't'), 'w').write('x')),"
        f"}}))"
    )
    seen = _json(level, code, box)
    assert seen["inside"] == "ok" and (box.work / "made-inside.txt").read_text() == "x"
    assert seen["tmpdir"] == "ok"
    if level is PROCESS:
        # The documented weakness: the child is the parent's user and can write and read its files.
        assert box.outside.read_text() == "overwritten"
        assert seen["secret"] == "ok"
    else:
        # bwrap: /tmp is a private tmpfs (the write may land there, never in the parent's file);
        # uid: the file is root's and the child is nobody.
        assert box.outside.read_text() == "original"
        assert seen["secret"] in ("FileNotFoundError", "PermissionError")


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_readonly_paths(level: IsolationLevel, box: Box) -> None:
    box.work.mkdir()
    given = box.work / "given.txt"  # readonly inside the writable workdir: still read-only
    given.write_text("given")
    os.chmod(given, 0o644)
    code = TRY + (
        f"print(json.dumps({{"
        f"'read': attempt(lambda: open({str(box.outside)!r}).read()),"
        f"'write': attempt(lambda: open({str(box.outside)!r}, 'a').write('!')),"
        f"'inner': attempt(lambda: open({str(given)!r}, 'a').write('!')),"
        f"}}))"
    )
    seen = _json(level, code, box, readonly=[box.outside, given])
    assert seen["read"] == "ok"
    if level is PROCESS:  # readonly is not enforced at the process level
        assert seen["write"] == seen["inner"] == "ok"
    else:
        assert seen["write"] in ("OSError", "PermissionError")  # EROFS under bwrap
        assert seen["inner"] in ("OSError", "PermissionError")
        assert box.outside.read_text() == "original" and given.read_text() == "given"


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_signalling_the_parent(level: IsolationLevel, box: Box) -> None:
    code = TRY + f"print(json.dumps(attempt(lambda: os.kill({os.getpid()}, 0))))"
    outcome = _json(level, code, box)
    expected = {BWRAP: "ProcessLookupError", UID: "PermissionError", PROCESS: "ok"}[level]
    assert outcome == expected  # process level: the documented weakness


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_network(level: IsolationLevel, box: Box) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        code = TRY + (
            "import socket\n"
            f"print(json.dumps(attempt(lambda: socket.create_connection(('127.0.0.1', {port}), timeout=5))))"
        )
        outcome = _json(level, code, box)
    if level is BWRAP:
        assert outcome in ("ConnectionRefusedError", "OSError")
    else:  # the documented weakness of the uid and process levels
        assert outcome == "ok"


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_file_size_limit(level: IsolationLevel, box: Box) -> None:
    code = TRY + (
        "import errno\n"
        "def write():\n"
        f"    with open('big', 'wb') as f: f.write(b'x' * {2 * LIMITS.file_size_bytes})\n"
        "try:\n"
        "    write(); print(json.dumps('ok'))\n"
        "except OSError as e:\n"
        "    print(json.dumps(errno.errorcode[e.errno]))\n"
    )
    assert _json(level, code, box) == "EFBIG"
    assert (box.work / "big").stat().st_size <= LIMITS.file_size_bytes


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_memory_limit_on_cpu(level: IsolationLevel, box: Box) -> None:
    code = TRY + "print(json.dumps(attempt(lambda: bytearray(1 << 30))))"
    assert _json(level, code, box) == "MemoryError"


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_pass_fds_reach_the_child(level: IsolationLevel, box: Box) -> None:
    r, w = os.pipe()
    try:
        spec = _spec(level, f"import os; os.write({w}, b'hello')", box, pass_fds=(w,))
        assert spec.pass_fds == (w,)
        proc = _run(spec)
        os.close(w)
        w = -1
        assert proc.returncode == 0, proc.stderr
        assert os.read(r, 100) == b"hello"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


@pytest.mark.parametrize("level", [_level_param(BWRAP)])
def test_bwrap_hides_user_dirs_and_keeps_root_read_only(level: IsolationLevel, box: Box) -> None:
    code = TRY + (
        "print(json.dumps({"
        "'root': sorted(os.listdir('/root')),"
        "'tmp': sorted(os.listdir('/tmp')),"
        f"'prefix': attempt(lambda: open(os.path.join({sys.prefix!r}, 'kl-probe'), 'w')),"
        "'hidden': attempt(lambda: open('/root/kl-probe', 'w')),"
        "'uid': os.getuid(),"
        "}))"
    )
    seen = _json(level, code, box)
    # Only mount points of what was bound back: the interpreter where it lives under /root or
    # /tmp, and (in /tmp) the way to the workdir.
    needed = [Path(p) for p in (sys.prefix, sys.base_prefix, *sys.path) if p and os.path.isabs(p)]

    def firsts(top: str) -> set[str]:
        return {p.parts[2] for p in needed if p.parts[1:2] == (top,) and len(p.parts) > 2}

    assert set(seen["root"]) <= firsts("root")
    assert set(seen["tmp"]) <= firsts("tmp") | {box.base.name}
    assert box.base.name in seen["tmp"]
    assert seen["prefix"] in ("OSError", "PermissionError")  # read-only root (EROFS)
    assert seen["hidden"] in ("OSError", "PermissionError")
    assert not (Path(sys.prefix) / "kl-probe").exists()
    if os.geteuid() == 0 and isolation._probe().bwrap_drop_uid:
        assert seen["uid"] == sandbox.NOBODY


def test_cpu_limit_kills_the_child(box: Box) -> None:
    # One level is enough (a second of CPU each); the strongest, whose return code differs.
    level = available_levels()[0]
    limits = Limits(memory_bytes=None, file_size_bytes=1 << 20, cpu_seconds=1, processes=None)
    proc = _run(_spec(level, "while True: pass", box, limits=limits))
    # SIGXCPU at the soft limit; bubblewrap reports a child killed by signal N as 128 + N.
    assert proc.returncode == (128 + 24 if level is BWRAP else -24), proc.stderr


def test_cuda_refuses_a_memory_limit(box: Box) -> None:
    with pytest.raises(ValueError, match="memory_bytes must be None on CUDA"):
        sandbox_command(["true"], workdir=box.work, limits=LIMITS, device="cuda")


def test_available_levels_are_probed_once_and_ordered() -> None:
    levels = available_levels()
    assert levels[-1] is PROCESS
    assert levels == [lv for lv in IsolationLevel if lv in levels]  # declared strongest first
    assert isolation._probe() is isolation._probe()  # cached: bwrap is run once per process
    assert sandbox.strongest_level() is levels[0]


def test_forcing_a_level_stronger_than_available(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = {
        BWRAP: f"bubblewrap not installed: {sandbox.INSTALL_HINT}",
        UID: "the uid level needs root (running as uid 1000)",
    }
    monkeypatch.setattr(
        isolation, "_probe", lambda: isolation._Probe(levels=(PROCESS,), missing=missing)
    )
    with pytest.raises(UsageError, match="bubblewrap not installed: apt-get install bubblewrap"):
        sandbox_command(["true"], workdir=box.work, limits=LIMITS, level=BWRAP)
    with pytest.raises(UsageError, match="needs root"):
        sandbox_command(["true"], workdir=box.work, limits=LIMITS, level=UID)
    monkeypatch.setenv("KLINEAGE_ISOLATION", "bwrap")
    with pytest.raises(UsageError, match="bubblewrap not installed"):
        sandbox_command(["true"], workdir=box.work, limits=LIMITS)
    monkeypatch.setenv("KLINEAGE_ISOLATION", "sandboxed")
    with pytest.raises(UsageError, match="expected one of bwrap|uid|process"):
        sandbox_command(["true"], workdir=box.work, limits=LIMITS)
    monkeypatch.setenv("KLINEAGE_ISOLATION", "process")
    spec = sandbox_command(["true"], workdir=box.work, limits=LIMITS)
    assert spec.level is PROCESS and spec.argv == ["true"]
    assert "can read and write" in spec.description


def test_env_var_forces_a_weaker_level(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KLINEAGE_ISOLATION", "process")
    spec = sandbox_command([sys.executable, "-c", "pass"], workdir=box.work, limits=LIMITS)
    assert spec.level is PROCESS
    assert spec.argv == [sys.executable, "-c", "pass"]
    assert _run(spec).returncode == 0


def test_the_reference_compiles_in_its_own_process(monkeypatch) -> None:
    """Inductor's default is a pool of one worker per core for each compile: twelve gate calls
    on one host would start a pool each. The reference gets one thread unless the user set it."""
    from klineage.gate.session import _child_env

    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    assert _child_env("cuda", with_src=True)["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in _child_env("cuda", with_src=False)
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "4")
    assert _child_env("cuda", with_src=True)["TORCHINDUCTOR_COMPILE_THREADS"] == "4"

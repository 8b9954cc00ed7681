"""Command lines and process settings that run untrusted Python (a candidate kernel, or a problem
file's reference code) isolated, with the strongest isolation this machine offers.

`sandbox_command` builds a `SandboxSpec`; the caller passes its fields to `subprocess.Popen`
(`argv`, `env`, `cwd`, `preexec_fn`, `pass_fds`). Nothing is started here except the one-time
probes of `available_levels`. Levels, strongest first:

`bwrap` (bubblewrap) promises: a read-only view of the root filesystem; a private, size-capped
  /tmp, /var/tmp and /dev/shm; /root, /home, the running user's home, /run, $XDG_CACHE_HOME,
  $XDG_DATA_HOME, $KLINEAGE_CACHE_DIR and the directory of $KLINEAGE_DB replaced by empty,
  read-only directories (so the parent's cache, store and keys are not there to read); writes
  only to the workdir and the `writable` paths; no network (its own network namespace, loopback
  only); its own PID namespace (it cannot see or signal any process outside); its own IPC, UTS and
  cgroup namespaces; a minimal /dev (plus the NVIDIA device nodes on CUDA); no capabilities; when
  we are root, uid 65534 inside. It does NOT promise: secrecy of files that stay visible (the rest
  of the filesystem is readable, and inside a user namespace the child's uid maps to the parent's,
  so mode bits do not hide the parent's own files that are not under a hidden directory); a
  separate kernel (a kernel bug is an escape); anything about the GPU (another process's memory on
  the device, timing side channels); limits on GPU memory.

`uid` (root, no bubblewrap) promises: the child runs as uid/gid 65534 (nobody) with no
  supplementary groups, so it cannot read or write files private to the parent (mode 0600/0700
  cache, store and key files), cannot signal the parent's processes, and cannot write outside the
  workdir and `writable` paths unless something is world-writable (/tmp is: it can leave files
  there). It does NOT promise: hiding world-readable files; any network restriction; hiding other
  processes (it can list them in /proc). Every path the child needs (the interpreter, the workdir,
  the readonly paths) must be reachable by uid 65534 through world-traversable directories;
  `sandbox_command` checks the mode bits and raises `UsageError` naming the first path that is not
  (a pyenv interpreter under a 0700 /root is the usual case). A readonly path inside the workdir
  cannot be changed in place but can be deleted and replaced (the directory is the child's).

`process` promises only: a separate process in its own session, resource limits, and a minimal
  environment (no API keys or KLINEAGE_ settings inherited). It does NOT protect anything else:
  the child runs as the parent's user and can read and write every file the parent can (the gate
  cache, the store, keys), use the network, and signal the parent's processes.

All levels set RLIMIT_CORE 0, RLIMIT_FSIZE, RLIMIT_CPU, RLIMIT_NOFILE, and RLIMIT_AS on the CPU.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pwd
import re
import resource
import shutil
import site
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from klineage.errors import UsageError
from klineage.gate import isolation
from klineage.gate.isolation import (  # re-exported: the levels are part of this module's API
    _DESCRIPTIONS,
    INSTALL_HINT,
    ISOLATION_ENV,
    IsolationLevel,
    available_levels,
    strongest_level,
)

NOBODY = 65534  # uid and gid of `nobody` / `nogroup` on Debian; used at the uid and bwrap levels

# Environment variables copied from os.environ when set (the child needs them to find CUDA and
# ptxas). TRITON_CACHE_DIR is not among them: it is pointed inside the workdir instead.
_KEPT_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH")

# The NVIDIA device nodes a CUDA process opens; /dev/nvidia-caps is a directory.
_NVIDIA_NODE = re.compile(r"nvidia(ctl|-uvm|-uvm-tools|\d+|-caps)")


@dataclass(frozen=True)
class Limits:
    """Resource limits of the child (setrlimit; a value above the parent's hard limit is lowered
    to it, since only the hard limit can be kept, never raised, without privileges).

    memory_bytes: RLIMIT_AS; must be None on CUDA (the driver reserves huge virtual ranges).
    file_size_bytes: RLIMIT_FSIZE; also the size of each private tmpfs under bwrap.
    cpu_seconds: RLIMIT_CPU (SIGXCPU at the limit, SIGKILL one second later).
    processes: RLIMIT_NPROC, applied at the uid level only: it counts every process and thread
        of the child's real uid on the machine (all sandboxes at once at the uid level; all of
        the parent's user's processes otherwise, which is why it is not applied there).
    open_files: RLIMIT_NOFILE. RLIMIT_CORE is always 0.
    """

    memory_bytes: int | None
    file_size_bytes: int
    cpu_seconds: int
    processes: int | None
    open_files: int = 1024

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "file_size_bytes", "cpu_seconds", "processes", "open_files"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {value}")


@dataclass(frozen=True)
class SandboxSpec:
    """What to pass to subprocess.Popen: `Popen(spec.argv, env=spec.env, cwd=spec.cwd,
    preexec_fn=spec.preexec_fn, pass_fds=spec.pass_fds)`. Do not also pass
    `start_new_session` (harmless) or `user=`/`group=` (the preexec_fn already drops the uid).

    Under bwrap, `argv` starts bubblewrap, whose exit status is the child's; a child killed by
    signal N shows as return code 128+N (bubblewrap's PID-1 reports it so), not -N. Killing
    bubblewrap (or its process group) kills the child: --die-with-parent, and the child's PID
    namespace ends with its init. --die-with-parent fires when the *thread* that started
    bubblewrap exits, so start it from a thread that outlives the child.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: str
    # Sets the rlimits, starts a new session and (uid level) drops to uid/gid 65534. It only
    # calls os functions on values computed beforehand, so it is safe in the forked child.
    preexec_fn: Callable[[], None] | None
    level: IsolationLevel
    pass_fds: tuple[int, ...]
    description: str  # one line for the verdict: what this level does and does not promise


# -- building the command --------------------------------------------------------------------------


def _minimal_env(workdir: Path, env_keep: Mapping[str, str]) -> dict[str, str]:
    home = workdir / "home"
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(workdir / "tmp"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONNOUSERSITE": "1",
        # Triton compiles into the workdir, not into a cache the next candidate would trust.
        "TRITON_CACHE_DIR": str(home / ".triton"),
    }
    env.update({k: os.environ[k] for k in _KEPT_VARIABLES if k in os.environ})
    env.update(env_keep)
    # Settings and keys of klineage itself (KLINEAGE_LLM_API_KEY, KLINEAGE_DB, ...) never reach
    # untrusted code, whoever asked for them.
    return {k: v for k, v in env.items() if not k.startswith("KLINEAGE_")}


def _rlimits(limits: Limits, level: IsolationLevel) -> tuple[tuple[int, int, int], ...]:
    """(resource, soft, hard) triples, computed in the parent so preexec_fn only calls setrlimit."""
    wanted: list[tuple[int, int, int]] = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
        # Soft below hard: SIGXCPU first (a named death), SIGKILL a second later if ignored.
        (resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
    ]
    if limits.memory_bytes is not None:
        wanted.append((resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes))
    if limits.processes is not None and level is IsolationLevel.UID:
        wanted.append((resource.RLIMIT_NPROC, limits.processes, limits.processes))
    out = []
    for res, soft, hard in wanted:
        _, cur_hard = resource.getrlimit(res)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        out.append((res, soft, hard))
    return tuple(out)


def _make_preexec(rlimits: tuple[tuple[int, int, int], ...], drop_uid: bool) -> Callable[[], None]:
    def preexec() -> None:
        # EPERM if already a session leader (the caller passed start_new_session): fine.
        with contextlib.suppress(OSError):
            os.setsid()
        for res, soft, hard in rlimits:
            resource.setrlimit(res, (soft, hard))
        if drop_uid:
            # Groups, then gid, then uid: after setuid we could no longer change the others.
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

    return preexec


def _is_under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _variants(path: Path) -> list[Path]:
    """The absolute path and, when a symlink is on the way, the real one too."""
    absolute = Path(os.path.abspath(path))
    real = absolute.resolve()
    return [absolute] if real == absolute else [absolute, real]


def _hidden_dirs(needed: Sequence[Path], private: Sequence[Path]) -> list[Path]:
    """Directories replaced by an empty read-only tmpfs, shallowest first, none inside another
    or inside a `private` tmpfs (/tmp: already empty)."""
    candidates = [Path("/root"), Path("/home"), Path("/run")]
    with contextlib.suppress(KeyError):  # a uid without a passwd entry has no home to hide
        candidates.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    for var in ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "KLINEAGE_CACHE_DIR"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]))
    if os.environ.get("KLINEAGE_DB"):
        db = Path(os.environ["KLINEAGE_DB"])
        candidates.append(db if db.is_dir() else db.parent)
    found: list[Path] = []
    for c in candidates:
        for d in _variants(c):
            # A directory the caller exposes (or one inside it) stays as it is: hiding it and
            # binding it back would be the same, and hiding part of a writable tree would break it.
            if d == Path("/") or not d.is_dir() or any(_is_under(d, n) for n in needed):
                continue
            found.append(d)
    found.sort(key=lambda p: len(p.parts))
    out: list[Path] = []
    for d in found:
        if not any(_is_under(d, o) for o in [*private, *out]):
            out.append(d)
    return out


@functools.cache
def _interpreter_sys_path() -> tuple[str, ...]:
    """The parent interpreter's own sys.path (stdlib, site-packages, .pth entries such as an
    editable install), without this process's script directory or PYTHONPATH, which the child
    does not get: asked of a fresh `python -I` once (~30 ms), else approximated by sys.path."""
    code = "import json, sys; print(json.dumps(sys.path))"
    try:
        r = subprocess.run(
            [sys.executable, "-I", "-c", code],
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", os.defpath)},
        )
        paths = json.loads(r.stdout)
        if r.returncode == 0 and isinstance(paths, list):
            return tuple(str(p) for p in paths)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    return tuple(p for p in sys.path if p != user_site)


def _interpreter_paths(argv0: str, env: Mapping[str, str]) -> list[Path]:
    """What the parent's Python (and CUDA, ptxas) needs to run: prefixes, the executable's
    directory, the interpreter's sys.path, library paths. Another interpreter as `argv0` gets
    only its directory: what else it needs goes in `readonly`."""
    raw: list[str] = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    raw += [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    if os.path.isabs(argv0):
        raw += [os.path.dirname(argv0), os.path.dirname(os.path.realpath(argv0))]
    raw += [p for p in _interpreter_sys_path() if p]
    raw += [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    raw += [env[k] for k in ("CUDA_HOME", "TRITON_PTXAS_PATH") if env.get(k)]
    out: list[Path] = []
    for p in raw:
        path = Path(p)
        if path.is_absolute() and path.exists():
            out.extend(v for v in _variants(path) if v not in out)
    return out


def _bwrap_argv(
    bwrap: str,
    argv: list[str],
    *,
    workdir: Path,
    readonly: Sequence[Path],
    writable: Sequence[Path],
    device: str,
    drop_uid: bool,
    tmp_bytes: int,
    env: Mapping[str, str],
) -> list[str]:
    args = [bwrap, "--die-with-parent", "--unshare-all", "--cap-drop", "ALL"]
    if drop_uid:
        args += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    else:
        args += ["--unshare-user-try"]
    args += ["--ro-bind", "/", "/"]

    writable_tmpfs = [d for d in (Path("/tmp"), Path("/var/tmp")) if d.is_dir()]
    # The caller's paths are mounted at their real path; a symlink to one is left on the
    # read-only root, except where a tmpfs would hide the symlink: then the given path too.
    given: dict[Path, str] = {}
    for p in readonly:
        given[p] = "--ro-bind"
    for p in [workdir, *writable]:
        given[p] = "--bind"
    hidden = _hidden_dirs([v for p in given for v in _variants(p)], writable_tmpfs)
    masks = [*hidden, *writable_tmpfs]
    binds: dict[Path, str] = {}
    for p, how in given.items():
        real = p.resolve()
        binds[real] = how
        if p != real and any(_is_under(p, m) for m in masks):
            binds[p] = how

    # The parent's interpreter stays readable where a tmpfs would hide it (a pyenv under /root,
    # a venv under /tmp), unless a mount of the caller's decides what is there. Shallowest
    # first, so a directory inside one already bound back is not bound again.
    for p in sorted(_interpreter_paths(argv[0], env), key=lambda q: len(q.parts)):
        covering = [c for c in [*masks, *binds] if _is_under(p, c)]
        deepest = max(covering, key=lambda c: len(c.parts), default=None)
        if deepest is not None and deepest not in binds:
            binds[p] = "--ro-bind"

    # Shallowest first so a deeper mount is laid over a shallower one (a readonly file inside
    # the writable workdir stays read-only; a bind inside a tmpfs stays visible).
    mounts: list[tuple[Path, list[str]]] = []
    for d in writable_tmpfs:
        mounts.append((d, ["--size", str(tmp_bytes), "--tmpfs", str(d)]))
    for d in hidden:
        mounts.append((d, ["--tmpfs", str(d)]))
    for p, how in binds.items():
        mounts.append((p, [how, str(p), str(p)]))
    mounts.sort(key=lambda m: len(m[0].parts))  # stable: tmpfs before a bind of the same depth
    for _, flags in mounts:
        args += flags
    # Hidden directories become read-only once the binds inside them have their mount points.
    for d in hidden:
        args += ["--remount-ro", str(d)]

    args += ["--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/dev/shm"]
    if device.startswith("cuda"):
        for node in sorted(Path("/dev").glob("nvidia*")):
            if _NVIDIA_NODE.fullmatch(node.name):
                args += ["--dev-bind", str(node), str(node)]
    args += ["--proc", "/proc", "--chdir", str(workdir), "--", *argv]
    return args


def _nobody_may(path: Path, want: int) -> bool:
    """Whether uid/gid 65534 (no supplementary groups) has `want` (an R_OK|W_OK|X_OK mask) on
    `path` by its mode bits (ACLs are not consulted)."""
    st = os.stat(path)
    if st.st_uid == NOBODY:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid == NOBODY:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits & want == want


def _check_reachable(path: Path, want: int, what: str) -> None:
    """UsageError unless uid 65534 can walk to `path` and has `want` on it."""
    for v in _variants(path):
        for parent in reversed(v.parents):
            if not _nobody_may(parent, os.X_OK):
                raise UsageError(
                    f"{what} {path} is not reachable by uid {NOBODY} (the uid isolation level): "
                    f"{parent} is not world-searchable; make it so (chmod o+x), put the file "
                    f"elsewhere, install bubblewrap ({INSTALL_HINT}) for the bwrap level, or set "
                    f"{ISOLATION_ENV}=process to run without isolation"
                )
    if not _nobody_may(path, want):
        kind = {os.R_OK: "readable", os.X_OK: "executable"}.get(want, "accessible")
        raise UsageError(f"{what} {path} is not {kind} by uid {NOBODY} (the uid isolation level)")


def _chown_tree(root: Path, keep: Sequence[Path]) -> None:
    """chown -R 65534 `root`, except the `keep` paths (readonly ones inside it) and below them."""
    if any(_is_under(root, k) for k in keep):
        return
    os.chown(root, NOBODY, NOBODY, follow_symlinks=False)
    if root.is_dir() and not root.is_symlink():
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if here / d not in keep]
            for name in [*dirnames, *filenames]:
                if here / name not in keep:
                    os.chown(here / name, NOBODY, NOBODY, follow_symlinks=False)


def sandbox_command(
    argv: list[str],
    *,
    workdir: Path,
    readonly: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    device: str = "cpu",
    limits: Limits,
    level: IsolationLevel | None = None,
    env_keep: Mapping[str, str] = {},  # read, never mutated
    pass_fds: Sequence[int] = (),
) -> SandboxSpec:
    """How to run `argv` isolated at `level` (default: $KLINEAGE_ISOLATION, else the strongest).

    Contract:
    - `argv[0]` should be an absolute path (under bwrap it is looked up in the sandbox's PATH).
    - `workdir` is created if missing, with `home/` (HOME) and `tmp/` (TMPDIR) in it; it is the
      child's cwd and is writable. `writable` paths must exist and are writable too; `readonly`
      paths must exist and are readable. Everything else is what the level promises (module
      docstring): at bwrap, the parent's interpreter (sys.prefix, sys.base_prefix, sys.path) is
      kept readable; at uid level the workdir and `writable` paths are chowned to 65534
      (recursively, except readonly paths inside them) here, and every path the child needs must be reachable by uid 65534
      (UsageError names the first that is not).
    - The environment is built from scratch: PATH, LANG/LC_ALL=C.UTF-8, HOME, TMPDIR,
      PYTHONDONTWRITEBYTECODE/PYTHONUNBUFFERED/PYTHONNOUSERSITE=1, TRITON_CACHE_DIR under HOME,
      CUDA_VISIBLE_DEVICES/CUDA_HOME/LD_LIBRARY_PATH/TRITON_PTXAS_PATH when set here, then
      `env_keep` on top. Variables named KLINEAGE_* are dropped silently, even from `env_keep`.
    - `device` "cuda" (or "cuda:N") exposes the NVIDIA device nodes; `limits.memory_bytes` must
      then be None (ValueError otherwise).
    - A `level` (or $KLINEAGE_ISOLATION) stronger than available raises UsageError saying what
      is missing; an unknown $KLINEAGE_ISOLATION value raises UsageError too.
    - `pass_fds` are kept open in the child (through bubblewrap too).
    """
    cuda = device.startswith("cuda")
    if cuda and limits.memory_bytes is not None:
        raise ValueError(
            "Limits.memory_bytes must be None on CUDA: the driver reserves far more virtual "
            "memory than any RLIMIT_AS a CPU run would use"
        )
    chosen = isolation._resolve_level(level)
    workdir = Path(os.path.abspath(workdir))
    readonly = [Path(os.path.abspath(p)) for p in readonly]
    writable = [Path(os.path.abspath(p)) for p in writable]
    for p in [*readonly, *writable]:
        if not p.exists():
            raise UsageError(f"{p}: does not exist, so it cannot be exposed to the sandbox")
    both = {p.resolve() for p in readonly} & {p.resolve() for p in [workdir, *writable]}
    if both:
        raise ValueError(f"paths both readonly and writable: {sorted(map(str, both))}")

    for d in (workdir, workdir / "home", workdir / "tmp"):
        d.mkdir(parents=True, exist_ok=True)
    env = _minimal_env(workdir, env_keep)
    rlimits = _rlimits(limits, chosen)
    probe = isolation._probe()

    if chosen is IsolationLevel.BWRAP:
        assert probe.bwrap is not None  # _resolve_level checked it
        full = _bwrap_argv(
            probe.bwrap,
            argv,
            workdir=workdir,
            readonly=readonly,
            writable=writable,
            device=device,
            drop_uid=probe.bwrap_drop_uid,
            tmp_bytes=limits.file_size_bytes,
            env=env,
        )
        preexec = _make_preexec(rlimits, drop_uid=False)
    elif chosen is IsolationLevel.UID:
        exe = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=env["PATH"])
        if exe is None:
            raise UsageError(f"{argv[0]}: not found on PATH")
        _check_reachable(Path(exe), os.X_OK, "the program")
        for p in readonly:
            _check_reachable(p, os.R_OK | (os.X_OK if p.is_dir() else 0), "the readonly path")
        # Owned by 65534 so the child can write there; ancestors must still be searchable.
        for p in [workdir, *writable]:
            _chown_tree(p, keep=readonly)
            _check_reachable(p, os.X_OK if p.is_dir() else os.R_OK, "the workdir or writable path")
        full = list(argv)
        preexec = _make_preexec(rlimits, drop_uid=True)
    else:
        full = list(argv)
        preexec = _make_preexec(rlimits, drop_uid=False)

    return SandboxSpec(
        argv=full,
        env=env,
        cwd=str(workdir),
        preexec_fn=preexec,
        level=chosen,
        pass_fds=tuple(pass_fds),
        description=_DESCRIPTIONS[chosen],
    )


__all__ = [
    "IsolationLevel",
    "Limits",
    "SandboxSpec",
    "available_levels",
    "sandbox_command",
    "strongest_level",
]

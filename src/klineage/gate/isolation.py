"""Which isolation levels this machine offers (gate/sandbox.py builds the commands): bubblewrap
that really builds a sandbox here, root that can drop to uid 65534, or a bare process; probed
once per process. What each level promises is in gate/sandbox.py's docstring."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from klineage.errors import UsageError

# The environment variable that forces a weaker level (for debugging: bwrap|uid|process).
ISOLATION_ENV = "KLINEAGE_ISOLATION"

INSTALL_HINT = "apt-get install bubblewrap"  # `make isolation` in a checkout does it


class IsolationLevel(StrEnum):
    """How strongly a child is isolated; see the module docstring for what each one promises."""

    BWRAP = "bwrap"  # bubblewrap: read-only root, private /tmp, no network, own PID namespace
    UID = "uid"  # root without bubblewrap: the child drops to uid/gid 65534, plus rlimits
    PROCESS = "process"  # a separate process, rlimits and a stripped environment only


_DESCRIPTIONS = {
    IsolationLevel.BWRAP: (
        "bubblewrap: read-only root, private /tmp, user data dirs hidden, writes only to its "
        "workdir, no network, own PID namespace, no capabilities; does not hide the rest of the "
        "filesystem, and shares the kernel and the GPU"
    ),
    IsolationLevel.UID: (
        "uid 65534 + rlimits: cannot read or write the parent's private files or signal its "
        "processes; can read world-readable files, use the network and see other processes"
    ),
    IsolationLevel.PROCESS: (
        "separate process + rlimits + minimal environment only: runs as the parent's user and can "
        "read and write its files (cache, store, keys), use the network and signal its processes"
    ),
}


# -- probing ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Probe:
    """What this machine offers, found once per process by `_probe`."""

    levels: tuple[IsolationLevel, ...]  # strongest first; always ends with PROCESS
    bwrap: str | None = None  # absolute path of a working bwrap
    bwrap_drop_uid: bool = False  # `--unshare-user --uid 65534 --gid 65534` works (we are root)
    missing: Mapping[IsolationLevel, str] = field(default_factory=dict)  # why a level is absent


def _run_quietly(argv: list[str]) -> tuple[bool, str]:
    try:
        r = subprocess.run(
            argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
    return r.returncode == 0, last


def _can_drop_to_nobody() -> str:
    """'' when we can chown paths and setuid/setgid to 65534, else why not."""
    if os.geteuid() != 0:
        return f"the uid level needs root (running as uid {os.geteuid()})"
    # Root in a container may lack the capabilities; CapEff is a hex mask (CAP_CHOWN is bit 0,
    # CAP_SETGID bit 6, CAP_SETUID bit 7).
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            caps = next((line.split()[1] for line in f if line.startswith("CapEff:")), None)
    except OSError:
        caps = None
    if caps is not None and (int(caps, 16) & 0b11000001) != 0b11000001:
        return "the uid level needs CAP_SETUID, CAP_SETGID and CAP_CHOWN, which this root lacks"
    return ""


@functools.cache
def _probe() -> _Probe:
    """Run bubblewrap for real (a few milliseconds) and check for root; once per process."""
    missing: dict[IsolationLevel, str] = {}
    levels: list[IsolationLevel] = []
    bwrap = shutil.which("bwrap")
    true = shutil.which("true") or "/bin/true"
    drop_uid = False
    if bwrap is None:
        missing[IsolationLevel.BWRAP] = f"bubblewrap not installed: {INSTALL_HINT}"
    else:
        # `bwrap --ro-bind / / --unshare-all --die-with-parent true`, plus the other kinds of
        # mount sandbox_command uses, so a bwrap that cannot mount /proc here (some containers
        # forbid it) is not reported as working.
        base = [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent"]
        base += ["--cap-drop", "ALL", "--dev", "/dev", "--proc", "/proc"]
        base += ["--size", "1048576", "--tmpfs", "/tmp", "--remount-ro", "/tmp"]
        ok, why = _run_quietly([*base, true])
        if ok:
            levels.append(IsolationLevel.BWRAP)
            if os.geteuid() == 0:
                # As root, --unshare-user-try makes a user namespace where the child is root with
                # every capability in it; --uid 65534 drops them. bwrap refuses --uid without a
                # user namespace, so where none can be made this stays off.
                drop_uid = _run_quietly(
                    [*base, "--unshare-user", "--uid", "65534", "--gid", "65534", true]
                )[0]
        else:
            missing[IsolationLevel.BWRAP] = (
                f"bubblewrap ({bwrap}) is installed but cannot build a sandbox here: {why}"
            )
    why_not_uid = _can_drop_to_nobody()
    if why_not_uid:
        missing[IsolationLevel.UID] = why_not_uid
    else:
        levels.append(IsolationLevel.UID)
    levels.append(IsolationLevel.PROCESS)
    return _Probe(
        levels=tuple(levels),
        bwrap=bwrap if IsolationLevel.BWRAP in levels else None,
        bwrap_drop_uid=drop_uid,
        missing=missing,
    )


def available_levels() -> list[IsolationLevel]:
    """The levels that work on this machine, strongest first; PROCESS is always last.

    Probed once per process: bwrap counts only if `bwrap --ro-bind / / --unshare-all
    --die-with-parent` (with the /dev, /proc and tmpfs mounts used here) really runs `true`;
    uid counts if we are root with the capabilities to chown and setuid.
    """
    return list(_probe().levels)


def strongest_level() -> IsolationLevel:
    """The strongest available level (what `sandbox_command` uses unless told otherwise)."""
    return available_levels()[0]


def _resolve_level(
    level: IsolationLevel | None, environ: Mapping[str, str] = os.environ
) -> IsolationLevel:
    """`level`, else $KLINEAGE_ISOLATION, else the strongest; UsageError if it is not available."""
    if level is None:
        raw = environ.get(ISOLATION_ENV, "").strip().lower()
        if raw:
            try:
                level = IsolationLevel(raw)
            except ValueError:
                names = "|".join(str(v) for v in IsolationLevel)
                raise UsageError(f"{ISOLATION_ENV}={raw!r}: expected one of {names}") from None
    probe = _probe()
    if level is None:
        return probe.levels[0]
    if level not in probe.levels:
        why = probe.missing.get(level, "not available on this machine")
        raise UsageError(f"isolation level {level} requested but {why}")
    return IsolationLevel(level)

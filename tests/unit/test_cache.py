"""The verdict cache authenticates its entries: only this cache's secret can make a hit."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest

from klineage.gate.cache import KEY_BYTES, KEY_FILE, GateCache, cache_key
from klineage.gate.records import GateResult, ProfileRow, Stage, StageNumbers, StageResult, Status

KEY = cache_key({"candidate": "a"})
OTHER = cache_key({"candidate": "b"})


def _row(ms: float, host_ms: float) -> ProfileRow:
    return ProfileRow(kernel_ms=ms, kernel_p20_ms=ms, kernel_p80_ms=ms, basis="device",
                      host_ms=host_ms, host_p20_ms=host_ms, host_p80_ms=host_ms)  # fmt: skip


def _result(accepted: bool = False) -> GateResult:
    status = Status.PASSED if accepted else Status.FAILED
    return GateResult(
        problem="p.py",
        candidate="c.py",
        device="cpu",
        regimes=["tiny"],
        accepted=accepted,
        stages=[
            StageResult(
                stage=Stage.CORRECTNESS,
                status=status,
                message="beyond tolerance",
                numbers=StageNumbers(
                    launches=2**60, launch_ms=math.nan, regimes={"tiny": _row(0.1, -0.0)}
                ),
            )
        ],
        seconds=1.25,
    )


def _entry_path(root: Path, key: str) -> Path:
    return root / "gate" / key[:2] / f"{key}.json"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_round_trip(tmp_path: Path) -> None:
    cache = GateCache(tmp_path)
    assert cache.get(KEY) is None and cache.rejected == 0  # a plain miss is not a rejection
    result = _result()
    cache.put(KEY, result)
    got = GateCache(tmp_path).get(KEY)  # a second instance reads the same key file
    # Exactly what a JSON round trip of the result gives (NaN is stored as null, as before).
    assert got == GateResult.model_validate(result.model_dump(mode="json"))
    numbers = got.stages[0].numbers
    assert numbers.launches == 2**60 and numbers.launch_ms is None
    assert (
        numbers.regimes["tiny"].kernel_ms == 0.1
        and math.copysign(1, numbers.regimes["tiny"].host_ms) < 0
    )
    entry = json.loads(_entry_path(tmp_path, KEY).read_text())
    assert set(entry) == {"key", "mac", "result"} and entry["key"] == KEY
    assert cache.rejected == 0


def test_key_file_is_private(tmp_path: Path) -> None:
    root = tmp_path / "fresh" / "klineage"
    GateCache(root).put(KEY, _result())
    key_file = root / KEY_FILE
    assert _mode(key_file) == 0o600 and key_file.stat().st_size == KEY_BYTES
    assert _mode(root) == 0o700 and _mode(root.parent) == 0o700
    assert not list(root.glob(".tmp-*"))  # the atomic write left no temporary behind


@pytest.mark.parametrize(
    "mac",
    [None, "", "0" * 64, "not hex at all \u00e9"],
    ids=["no-mac", "empty", "zeros", "non-ascii"],
)
def test_forged_accepted_entry_is_a_miss(tmp_path: Path, mac: str | None) -> None:
    cache = GateCache(tmp_path)
    cache.put(OTHER, _result())  # the key file exists, as in a cache in use
    forged: dict[str, object] = {
        "key": KEY,
        "result": _result(accepted=True).model_dump(mode="json"),
    }
    if mac is not None:
        forged["mac"] = mac
    path = _entry_path(tmp_path, KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(forged))
    assert cache.get(KEY) is None
    assert cache.rejected == 1


def test_old_format_entry_is_a_miss(tmp_path: Path) -> None:
    """What the unauthenticated cache wrote (and what a planter writes): a bare GateResult."""
    path = _entry_path(tmp_path, KEY)
    path.parent.mkdir(parents=True)
    path.write_text(_result(accepted=True).model_dump_json())
    cache = GateCache(tmp_path)
    assert cache.get(KEY) is None and cache.rejected == 1
    cache.put(KEY, _result())  # and it is overwritten by the next verdict
    assert cache.get(KEY) is not None


def test_entry_copied_to_another_key_is_a_miss(tmp_path: Path) -> None:
    cache = GateCache(tmp_path)
    cache.put(OTHER, _result(accepted=True))
    dst = _entry_path(tmp_path, KEY)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(_entry_path(tmp_path, OTHER).read_bytes())
    assert cache.get(KEY) is None and cache.rejected == 1
    # Rewriting the stored key to match the path breaks the MAC instead.
    entry = json.loads(dst.read_text())
    entry["key"] = KEY
    dst.write_text(json.dumps(entry))
    assert cache.get(KEY) is None and cache.rejected == 2
    assert cache.get(OTHER) is not None  # the original is untouched


def test_tampered_result_is_a_miss(tmp_path: Path) -> None:
    cache = GateCache(tmp_path)
    cache.put(KEY, _result(accepted=False))
    path = _entry_path(tmp_path, KEY)
    entry = json.loads(path.read_text())
    entry["result"]["accepted"] = True
    entry["result"]["stages"][0]["status"] = "passed"
    path.write_text(json.dumps(entry))
    assert cache.get(KEY) is None and cache.rejected == 1


@pytest.mark.parametrize(
    "text", ["", "{", "[1, 2]", '"x"', "[" * 100_000, '{"key": 1, "mac": 2, "result": 3}']
)
def test_unparsable_entry_is_a_miss(tmp_path: Path, text: str) -> None:
    path = _entry_path(tmp_path, KEY)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    cache = GateCache(tmp_path)
    assert cache.get(KEY) is None and cache.rejected == 1


def test_entry_under_another_secret_is_a_miss(tmp_path: Path) -> None:
    """An entry MACed with a key the attacker made up (or an old key) is not trusted."""
    GateCache(tmp_path / "attacker").put(KEY, _result(accepted=True))
    mine = GateCache(tmp_path / "mine")
    mine.put(OTHER, _result())
    planted = _entry_path(tmp_path / "mine", KEY)
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_bytes(_entry_path(tmp_path / "attacker", KEY).read_bytes())
    assert mine.get(KEY) is None and mine.rejected == 1


@pytest.mark.parametrize(
    "corrupt",
    ["short", "long", "loose-mode", "symlink", "directory"],
)
def test_corrupt_key_file_is_regenerated(tmp_path: Path, corrupt: str) -> None:
    GateCache(tmp_path).put(KEY, _result())
    key_file = tmp_path / KEY_FILE
    old = key_file.read_bytes()
    if corrupt == "short":
        key_file.write_bytes(b"x" * 7)
    elif corrupt == "long":
        key_file.write_bytes(old + b"\n")
    elif corrupt == "loose-mode":
        key_file.chmod(0o644)  # readable by others: whoever read it could forge entries
    elif corrupt == "symlink":
        target = tmp_path / "elsewhere.key"
        target.write_bytes(old)
        target.chmod(0o600)
        key_file.unlink()
        key_file.symlink_to(target)
    else:
        key_file.unlink()
        key_file.mkdir()
    cache = GateCache(tmp_path)
    if corrupt == "directory":
        # Cannot be replaced by a file: the secret lives in this process only, never a crash.
        assert cache.get(KEY) is None
        cache.put(OTHER, _result())
        assert cache.get(OTHER) is not None
        return
    assert cache.get(KEY) is None  # the new secret invalidates the old entries
    assert cache.rejected == 1
    assert not key_file.is_symlink() and _mode(key_file) == 0o600
    new = key_file.read_bytes()
    assert len(new) == KEY_BYTES and new != old
    cache.put(KEY, _result())
    assert GateCache(tmp_path).get(KEY) is not None


def test_missing_key_file_is_created_and_old_entries_are_misses(tmp_path: Path) -> None:
    GateCache(tmp_path).put(KEY, _result())
    os.unlink(tmp_path / KEY_FILE)
    cache = GateCache(tmp_path)
    assert cache.get(KEY) is None and cache.rejected == 1
    assert (tmp_path / KEY_FILE).stat().st_size == KEY_BYTES

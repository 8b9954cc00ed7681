"""Content-addressed cache of gate results: same problem, candidate, regimes, config and
environment give the same verdict, so the gate is not run twice.

One JSON file per key, written to a temporary name and renamed, so a crash never leaves a torn
entry. Entries are authenticated: each carries an HMAC-SHA256 over its key and the canonical
JSON of its result, under a secret in `<root>/gate.key` (32 random bytes, mode 0600, in a 0700
directory). Anything that can write the cache directory but not read that key (a candidate, a
stray process) cannot plant a verdict: an entry whose MAC is missing or wrong, whose stored key
is not the one asked for, or that does not parse is ignored, counted in `rejected`, and
overwritten by the next put. Entries of the older, unauthenticated format are such misses.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from klineage.gate.records import GateResult

KEY_FILE = "gate.key"
KEY_BYTES = 32
MAX_ENTRY_BYTES = 32 << 20  # a verdict is a few KiB; a planted giant is not read into memory


def cache_key(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def _canonical(key: str, result: Any) -> bytes:
    """The bytes the MAC covers: the key and the result, in one unambiguous JSON document."""
    return json.dumps(
        {"key": key, "result": result}, sort_keys=True, separators=(",", ":"), ensure_ascii=True
    ).encode()


def _private_dir(path: Path) -> None:
    """Create `path` and any missing parents as 0700 (mkdir(parents=True) would ignore the mode
    for the parents); tighten `path` if it is ours and group- or world-writable."""
    for p in [*reversed(path.parents), path]:
        if not p.is_dir():
            p.mkdir(mode=0o700, exist_ok=True)
    try:
        st = path.stat()
        if st.st_mode & 0o022 and st.st_uid == os.getuid():
            path.chmod(0o700)
    except OSError:
        pass


def _read_key(path: Path) -> bytes | None:
    """The key, if `path` is a regular file of ours, readable by us only, of exactly KEY_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_mode & 0o077
            or st.st_uid != os.getuid()
            or st.st_size != KEY_BYTES
        ):
            return None
        data = os.read(fd, KEY_BYTES + 1)
        return data if len(data) == KEY_BYTES else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_key(path: Path) -> None:
    """Write a fresh key atomically: a 0600 temporary file, then linked into place if there is
    no key yet (a concurrent creator wins and its key is read back) or renamed over a bad one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".key")  # mode 0600
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
        os.close(fd)
        fd = -1
        try:
            os.link(tmp, path)
        except FileExistsError:
            if _read_key(path) is None:  # present but unusable: loose mode, wrong size, a link
                os.replace(tmp, path)
        except OSError:  # no hard links on this file system: still atomic, last writer wins
            os.replace(tmp, path)
    finally:
        if fd >= 0:
            os.close(fd)
        Path(tmp).unlink(missing_ok=True)


def load_or_create_key(root: Path) -> bytes:
    """The cache's secret, created on first use and regenerated (invalidating every existing
    entry) when the file is unusable. Never raises: with no writable key file the secret lives
    in this process only, and entries it writes are misses for everyone else."""
    path = Path(root) / KEY_FILE
    for _ in range(3):
        key = _read_key(path)
        if key is not None:
            return key
        try:
            _private_dir(path.parent)
            _write_key(path)
        except OSError:
            break
    return _read_key(path) or os.urandom(KEY_BYTES)


class GateCache:
    def __init__(self, root: Path) -> None:
        self.key_root = Path(root)
        self.root = self.key_root / "gate"
        self.rejected = 0  # entries present but not trusted (forged, moved, corrupt, old format)
        self._secret: bytes | None = None

    @property
    def secret(self) -> bytes:
        if self._secret is None:
            self._secret = load_or_create_key(self.key_root)
        return self._secret

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _mac(self, key: str, result: Any) -> str:
        return hmac.new(self.secret, _canonical(key, result), hashlib.sha256).hexdigest()

    def get(self, key: str) -> GateResult | None:
        path = self._path(key)
        try:
            with path.open("rb") as f:
                raw = f.read(MAX_ENTRY_BYTES + 1)
            if len(raw) > MAX_ENTRY_BYTES:
                raise ValueError("oversized cache entry")
            text = raw.decode("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # unreadable, oversized, not UTF-8
            self.rejected += 1
            return None
        try:
            entry = json.loads(text)
            if not (
                isinstance(entry, dict)
                and entry.get("key") == key
                and isinstance(entry.get("mac"), str)
                and isinstance(entry.get("result"), dict)
                and hmac.compare_digest(entry["mac"], self._mac(key, entry["result"]))
            ):
                self.rejected += 1
                return None
            return GateResult.model_validate(entry["result"])
        except (ValueError, TypeError, RecursionError):
            # Not JSON, absurdly nested, or an authentic result this version cannot read.
            self.rejected += 1
            return None

    def put(self, key: str, result: GateResult) -> None:
        data = result.model_dump(mode="json")
        entry = {"key": key, "mac": self._mac(key, data), "result": data}
        path = self._path(key)
        _private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(entry, sort_keys=True))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

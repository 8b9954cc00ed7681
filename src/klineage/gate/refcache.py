"""The reference's cases, kept between gate calls: inputs, expected outputs and the manifest do
not depend on the candidate, so a walk or an optimize loop computes them once per problem.

One private folder per key under `<cache>/reference-cases/`, written by the parent only and
mounted in no sandbox. The manifest and the sha256 of every tensor file are authenticated with
the verdict cache's key (gate/cache.py); an entry that fails any check is a miss. The positions
that "changed in place" cases move were drawn from os.urandom when the entry was made: the
candidate never sees them before it sees the inputs, in any call.

The cache holds GBs per problem on a GPU (a regime's inputs, expected outputs and float64
evaluations, for every case), so it is bounded: at most `KLINEAGE_REFCACHE_GB` (default: a
quarter of what the disk could give it, at most 16 GiB), least recently used entries first out;
and it yields to live gate calls: a call that finds the disk short evicts entries before it waits
(docs/benchmarks.md, "Under load": twelve calls' entries filled the H200 machine's 64 GB and every
later call waited for free disk).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from klineage.gate.cache import GateCache
from klineage.gate.protocol import RefManifest


class _Entry(BaseModel):
    key: str
    manifest: RefManifest
    files: dict[str, str]  # file name -> sha256
    # file name -> (size, mtime_ns, inode) of the stored file when it was hashed: a get whose
    # file still has them links it without reading it again (a warm call on the H200 spent 5.5 s
    # of its 32 hashing GBs); any other file is hashed, as before. Entries written without them
    # are hashed on every get.
    stats: dict[str, tuple[int, int, int]] = Field(default_factory=dict)


def _stat(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _copy_hashed(src: Path, dst: Path) -> str:
    """Put `src` at `dst` and return the sha256 of what is there. A hard link where both are
    on one filesystem (a large regime's tensors are GBs, and twelve gate calls at once filled
    the H200 machine's disk with copies); a copy, hashed in the same pass, otherwise. A linked
    file that someone later changes fails its hash on the next get: a miss, never a wrong case."""
    try:
        os.link(src, dst)
        return _hash(dst)
    except OSError:
        pass
    h = hashlib.sha256()
    with src.open("rb") as fin, dst.open("wb") as fout:
        for chunk in iter(lambda: fin.read(1 << 22), b""):
            h.update(chunk)
            fout.write(chunk)
    return h.hexdigest()


DEFAULT_CAP_BYTES = 16 << 30


def cap_bytes(root: Path, held: int) -> int:
    """The cache's size limit: KLINEAGE_REFCACHE_GB, or a quarter of the free disk plus what the
    cache already holds, at most DEFAULT_CAP_BYTES."""
    raw = os.environ.get("KLINEAGE_REFCACHE_GB", "")
    if raw:
        try:
            return max(0, int(float(raw) * (1 << 30)))
        except ValueError:
            pass  # a setting that is not a number: the default, as for the other settings
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        return DEFAULT_CAP_BYTES
    return min(DEFAULT_CAP_BYTES, (free + held) // 4)


def _size(folder: Path) -> int:
    total = 0
    for f in folder.iterdir():
        with contextlib.suppress(OSError):
            total += f.stat().st_size
    return total


def _files(manifest: RefManifest) -> list[str]:
    names = []
    for r in manifest.regimes:
        names.append(r.init)
        for c in r.cases:
            names += [c.inputs, c.expected] + ([c.float64] if c.float64 else [])
    return names


class ReferenceCache:
    def __init__(self, root: Path) -> None:
        self._macs = GateCache(root)  # its secret, created 0600 in a 0700 folder
        self.root = Path(root) / "reference-cases"
        self.rejected = 0

    def _mac(self, entry: _Entry) -> str:
        blob = json.dumps(entry.model_dump(mode="json"), sort_keys=True).encode()
        return hmac.new(self._macs.secret, blob, hashlib.sha256).hexdigest()

    def get(self, key: str, into: Path) -> RefManifest | None:
        """Link (or copy) the entry's files into `into` (a new folder), check each against its
        sha256, and return the manifest."""
        folder = self.root / key
        try:
            raw = json.loads((folder / "entry.json").read_text(encoding="utf-8"))
            entry = _Entry.model_validate(raw["entry"])
            ok = entry.key == key and hmac.compare_digest(str(raw["mac"]), self._mac(entry))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, ValidationError):
            ok = False
        if not ok:
            self.rejected += 1
            return None
        with contextlib.suppress(OSError):  # used: the last to go when the cache is full
            os.utime(folder / "entry.json")
        into.mkdir()
        for name, digest in entry.files.items():
            if "/" in name or name.startswith("."):
                self.rejected += 1
                return None
            src, dst = folder / name, into / name
            if not self._linked_unchanged(src, dst, entry.stats.get(name)) and (
                _copy_hashed(src, dst) != digest
            ):
                self.rejected += 1
                return None
        return entry.manifest

    @staticmethod
    def _linked_unchanged(src: Path, dst: Path, stat: tuple[int, int, int] | None) -> bool:
        """Hard-link `src` to `dst` when it is the very file that was hashed: same inode, size
        and modification time. Any write changes the time; only a writer who sets it back by
        hand passes, and one who can write here can read the cache's secret as well."""
        if stat is None:
            return False
        try:
            if tuple(_stat(src)) != tuple(stat):
                return False
            os.link(src, dst)
        except OSError:
            return False
        return True

    def put(self, key: str, manifest: RefManifest, ref_dir: Path) -> None:
        """Keep the reference's files (before the gate moves them) under `key`."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".tmp-"))
        try:
            files, stats = {}, {}
            for name in _files(manifest):
                files[name] = _copy_hashed(ref_dir / name, tmp / name)
                stats[name] = _stat(tmp / name)  # os.replace below keeps inode and times
            entry = _Entry(key=key, manifest=manifest, files=files, stats=stats)
            (tmp / "entry.json").write_text(
                json.dumps({"entry": entry.model_dump(mode="json"), "mac": self._mac(entry)}),
                encoding="utf-8",
            )
            final = self.root / key
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # a cache that cannot be written is no cache
            return
        self.trim(keep=key)

    def _entries(self) -> list[tuple[float, Path, int]]:
        """(last used, folder, bytes) of every entry, least recently used first."""
        out = []
        try:
            folders = [f for f in self.root.iterdir() if not f.name.startswith(".")]
        except OSError:
            return []
        for folder in folders:
            try:
                used = (folder / "entry.json").stat().st_mtime
            except OSError:
                used = 0.0  # no entry file: a broken entry, the first to go
            out.append((used, folder, _size(folder)))
        return sorted(out, key=lambda e: e[0])

    def trim(self, keep: str = "") -> int:
        """Remove least recently used entries (never `keep`) until the cache is within its cap;
        the bytes removed."""
        entries = self._entries()
        held = sum(e[2] for e in entries)
        cap = cap_bytes(self.root, held)
        freed = 0
        for _, folder, size in entries:
            if held - freed <= cap:
                break
            if folder.name != keep:
                shutil.rmtree(folder, ignore_errors=True)
                freed += size
        return freed

    def make_room(self, need_free: int, under: Path, keep: str = "") -> int:
        """Remove least recently used entries (never `keep`) until `need_free` bytes are free
        under `under`, or no entry is left: a live gate call comes before a cached one. Files
        an entry shares (hard links) with a running call free their space when that call ends."""
        freed = 0
        for _, folder, size in self._entries():
            try:
                if shutil.disk_usage(under).free >= need_free:
                    break
            except OSError:
                break
            if folder.name != keep:
                shutil.rmtree(folder, ignore_errors=True)
                freed += size
        return freed

"""The reference-case cache: round trip, and any tampering is a miss."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

from klineage.gate.protocol import RefCase, RefManifest, RefRegime
from klineage.gate.records import Environment
from klineage.gate.refcache import ReferenceCache


def _entry(tmp_path: Path) -> tuple[RefManifest, Path]:
    ref = tmp_path / "ref"
    ref.mkdir()
    torch.save({"init": []}, ref / "init.pt")
    torch.save({"inputs": [torch.ones(3)]}, ref / "in.pt")
    torch.save({"outputs": [torch.zeros(3)]}, ref / "want.pt")
    env = Environment(device="cpu", torch="t", triton="t", klineage="k", python="p", interpreter=True,
                      timing_method="none", date="d")  # fmt: skip
    case = RefCase(label="trial 1/5", kind="get_inputs", inputs="in.pt", expected="want.pt")
    return RefManifest(
        regimes=[RefRegime(name="a", init="init.pt", cases=[case])], environment=env
    ), ref


def test_round_trip_and_tampering(tmp_path: Path) -> None:
    manifest, ref = _entry(tmp_path)
    cache = ReferenceCache(tmp_path / "cache")
    cache.put("k1", manifest, ref)
    assert cache.get("k1", tmp_path / "a") == manifest
    assert torch.equal(torch.load(tmp_path / "a" / "want.pt")["outputs"][0], torch.zeros(3))
    assert cache.get("other", tmp_path / "b") is None and cache.rejected == 0  # a plain miss
    stored = tmp_path / "cache" / "reference-cases" / "k1"
    torch.save({"outputs": [torch.ones(3)]}, stored / "want.pt")  # the expected output swapped
    assert cache.get("k1", tmp_path / "c") is None and cache.rejected == 1
    cache.put("k2", manifest, ref)
    entry = json.loads((stored.parent / "k2" / "entry.json").read_text())
    entry["entry"]["manifest"]["regimes"][0]["tolerance"] = 0.05  # a looser tolerance planted
    (stored.parent / "k2" / "entry.json").write_text(json.dumps(entry))
    assert cache.get("k2", tmp_path / "d") is None and cache.rejected == 2


def test_the_float64_evaluation_is_kept_and_authenticated_too(tmp_path: Path) -> None:
    manifest, ref = _entry(tmp_path)
    torch.save({"deltas": [torch.full((3,), 1e-3)]}, ref / "f64.pt")
    case = manifest.regimes[0].cases[0].model_copy(update={"float64": "f64.pt"})
    manifest.regimes[0].cases[0] = case
    cache = ReferenceCache(tmp_path / "cache")
    cache.put("k", manifest, ref)
    assert cache.get("k", tmp_path / "a") == manifest
    assert torch.equal(torch.load(tmp_path / "a" / "f64.pt")["deltas"][0], torch.full((3,), 1e-3))
    stored = tmp_path / "cache" / "reference-cases" / "k"
    torch.save({"deltas": [torch.ones(3)]}, stored / "f64.pt")  # a wider PyTorch error planted
    assert cache.get("k", tmp_path / "b") is None and cache.rejected == 1


def test_the_cache_is_bounded_and_yields_to_live_calls(tmp_path: Path, monkeypatch) -> None:
    """Least recently used entries go first, past the cap and when a live call needs the disk;
    the entry a call is using never goes."""
    import os
    import shutil

    manifest, ref = _entry(tmp_path)
    cache = ReferenceCache(tmp_path / "cache")
    for k in ("old", "used", "new"):
        cache.put(k, manifest, ref)
    root = tmp_path / "cache" / "reference-cases"
    for age, k in ((300, "old"), (200, "used"), (100, "new")):
        t = os.path.getmtime(root / k / "entry.json") - age
        os.utime(root / k / "entry.json", (t, t))
    assert cache.get("used", tmp_path / "a") == manifest  # now the most recently used
    one = sum(f.stat().st_size for f in (root / "new").iterdir())
    monkeypatch.setenv("KLINEAGE_REFCACHE_GB", str(2.5 * one / (1 << 30)))
    cache.trim()
    assert sorted(p.name for p in root.iterdir()) == ["new", "used"]

    free = {"bytes": 0}
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: type("U", (), {"free": free["bytes"]}))
    monkeypatch.delenv("KLINEAGE_REFCACHE_GB")
    cache.make_room(1 << 30, tmp_path, keep="new")  # the disk never frees: all but `keep` go
    assert [p.name for p in root.iterdir()] == ["new"]
    free["bytes"] = 2 << 30
    cache.put("more", manifest, ref)
    cache.make_room(1 << 30, tmp_path)  # enough free already: nothing goes
    assert sorted(p.name for p in root.iterdir()) == ["more", "new"]


def test_an_unchanged_file_is_linked_without_rehashing_and_a_changed_one_is_hashed(
    tmp_path: Path, monkeypatch
) -> None:
    """A get reads no byte of a stored file that still has the inode, size and mtime it was
    hashed with; a file written since (same size, new contents) is hashed and misses."""
    import os

    from klineage.gate import refcache

    manifest, ref = _entry(tmp_path)
    cache = ReferenceCache(tmp_path / "cache")
    cache.put("k", manifest, ref)
    hashed: list[str] = []
    real = refcache._copy_hashed
    monkeypatch.setattr(refcache, "_copy_hashed", lambda s, d: hashed.append(s.name) or real(s, d))
    assert cache.get("k", tmp_path / "a") == manifest and hashed == []
    stored = tmp_path / "cache" / "reference-cases" / "k" / "want.pt"
    assert os.stat(stored).st_ino == os.stat(tmp_path / "a" / "want.pt").st_ino  # a link
    torch.save({"outputs": [torch.ones(3)]}, stored)  # same size, other values, a new mtime
    assert cache.get("k", tmp_path / "b") is None and cache.rejected == 1
    assert hashed == ["want.pt"]  # init.pt and in.pt were linked unread, as before


def test_no_verdict_cache_still_reuses_the_reference_and_no_cache_turns_both_off(
    tmp_path: Path, monkeypatch
) -> None:
    from klineage.config import GateConfig
    from klineage.gate import drive, runner
    from tests.conftest import PROBLEMS

    roots: list[Path | None] = []

    def fake_drive(req, workdir, static_ok, on_event, secret, cache_root):  # type: ignore[no-untyped-def]
        roots.append(cache_root)
        raise RuntimeError("stop here")

    monkeypatch.setattr(drive, "drive", fake_drive)
    problem, candidate = PROBLEMS / "column_sum.py", tmp_path / "k.py"
    candidate.write_text("import triton\n")
    for config in (GateConfig(cache=False), GateConfig(cache=False, reference_cache=False)):
        with contextlib.suppress(RuntimeError):
            runner.run_gate(
                problem, candidate, config=config, cache_dir=tmp_path / "c", static_guards=False
            )
    assert roots == [tmp_path / "c", None]
    monkeypatch.setenv("KLINEAGE_NO_CACHE", "1")
    env = GateConfig.from_env()
    assert not env.cache and not env.reference_cache

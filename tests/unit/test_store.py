"""The SQLite store: migrations on open, clear errors for files it cannot use."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from klineage.store import open_store
from klineage.store.db import StoreError
from klineage.store.migrations import MIGRATIONS


def test_a_new_database_is_migrated_to_the_latest_schema(tmp_path: Path) -> None:
    store = open_store(tmp_path / "k.db")
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()
    open_store(tmp_path / "k.db").close()  # reopening migrates nothing and keeps the data


def test_a_file_that_is_not_a_database_is_a_clear_error_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not SQLite" * 100)
    with pytest.raises(StoreError, match="not a usable klineage database"):
        open_store(path)
    assert path.read_bytes().startswith(b"these are my notes")


def test_a_database_from_a_newer_klineage_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as c:
        c.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    with pytest.raises(StoreError, match="newer than this klineage"):
        open_store(path)


def test_unknown_and_ambiguous_lineage_ids(tmp_path: Path) -> None:
    store = open_store(tmp_path / "k.db")
    for lid in ("abc111", "abc222"):
        store.create_lineage(lid, "p", "e", "1", "2", "cpu", "first", [])
    assert store.get_lineage("zzz") is None
    assert store.get_lineage("abc1") is not None
    with pytest.raises(StoreError, match="ambiguous"):
        store.get_lineage("abc")


def _open_at_once(path: str, barrier: object) -> str:
    from klineage.store import open_store

    barrier.wait()  # type: ignore[attr-defined]
    try:
        open_store(Path(path)).close()
        return "ok"
    except Exception as e:  # reported to the test, which names it
        return f"{type(e).__name__}: {e}"


def test_processes_opening_a_new_database_at_once_migrate_it_once(tmp_path: Path) -> None:
    """Bench workers open the same new database together: each migration runs exactly once
    (the version is read inside the write transaction), and every process gets a store."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("spawn")
    n = 6
    with ctx.Manager() as m, ProcessPoolExecutor(n, mp_context=ctx) as pool:
        barrier = m.Barrier(n)
        results = list(pool.map(_open_at_once, [str(tmp_path / "k.db")] * n, [barrier] * n))
    assert results == ["ok"] * n
    from klineage.store.migrations import MIGRATIONS

    with sqlite3.connect(tmp_path / "k.db") as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)

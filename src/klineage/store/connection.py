"""The database connection under the Store: one SQLite file (WAL, foreign keys), migrated on
open; every write is one transaction (`tx`), committed before the call returns."""

from __future__ import annotations

import datetime as _dt
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from klineage.errors import KLineageError
from klineage.store.migrations import MIGRATIONS


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class StoreError(KLineageError):
    pass


class Database:
    """An open klineage database, migrated to this klineage's schema; the Store's queries
    (store/db.py, store/runs.py) write through `tx`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._wal()
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"{self.path}: not a usable klineage database ({e}); move it aside or set KLINEAGE_DB"
            ) from e
        self.conn.row_factory = sqlite3.Row

    def close(self) -> None:
        self.conn.close()

    def _wal(self) -> None:
        """Switch to WAL. Another process switching at the same moment makes SQLite answer
        "database is locked" at once, without its busy timeout: retry for up to 10 s."""
        for attempt in range(100):
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or attempt == 99:
                    raise
                time.sleep(0.1)

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _migrate(self) -> None:
        # The version is read inside each write transaction: several processes opening a new
        # database at once (bench workers) apply each migration exactly once.
        while True:
            with self.tx() as c:
                version = c.execute("PRAGMA user_version").fetchone()[0]
                if version > len(MIGRATIONS):
                    raise StoreError(
                        f"{self.path} has schema version {version}, newer than this klineage ({len(MIGRATIONS)}): upgrade klineage"
                    )
                if version == len(MIGRATIONS):
                    return
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        c.execute(statement)
                c.execute(f"PRAGMA user_version = {version + 1}")

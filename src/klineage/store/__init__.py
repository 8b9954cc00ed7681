"""SQLite storage: schema, ordered migrations and every query (SQL lives only here)."""

from klineage.store.db import Store, default_db_path, open_store

__all__ = ["Store", "default_db_path", "open_store"]

"""Content-addressed cache of gate results: same problem, candidate, regimes, config and
environment give the same verdict, so the gate is not run twice.

One JSON file per key, written to a temporary name and renamed, so a crash never leaves a torn
entry; an unreadable entry is ignored (and overwritten), never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from klineage.gate.records import GateResult


def cache_key(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


class GateCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root) / "gate"

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> GateResult | None:
        path = self._path(key)
        try:
            return GateResult.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, result: GateResult) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(result.model_dump_json())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

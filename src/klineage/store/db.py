"""The klineage database: one SQLite file (WAL, foreign keys), migrated on open.

Every write is its own transaction, committed before the call returns, so a walk killed with
SIGKILL loses at most the gate call that was running.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from klineage.store.connection import StoreError, now
from klineage.store.rows import (
    AttemptRow,
    LineageRow,
    NodeRow,
    ProbeRow,
    RunRow,
    SkillRow,
    TrialRow,
)
from klineage.store.runs import RunTables

# The rows and StoreError are imported from here by the rest of klineage.
__all__ = [
    "AttemptRow",
    "LineageRow",
    "NodeRow",
    "ProbeRow",
    "RunRow",
    "SkillRow",
    "Store",
    "StoreError",
    "TrialRow",
    "default_db_path",
    "open_store",
]


def default_db_path() -> Path:
    """$KLINEAGE_DB, else $XDG_DATA_HOME/klineage/klineage.db (~/.local/share/klineage/klineage.db)."""
    raw = os.environ.get("KLINEAGE_DB")
    if raw:
        return Path(raw)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "klineage" / "klineage.db"


class Store(RunTables):
    """Every query klineage makes: lineages, their nodes, attempts and probes, and skills here;
    optimize runs and trials in RunTables (store/runs.py); the connection in Database
    (store/connection.py)."""

    # lineages -------------------------------------------------------------------------------

    def create_lineage(
        self,
        lid: str,
        problem: str,
        expert: str,
        problem_sha: str,
        expert_sha: str,
        device: str,
        policy: str,
        regimes: list[str],
    ) -> None:
        with self.tx() as c:
            c.execute(
                "INSERT INTO lineages (id, problem_path, expert_path, problem_sha, expert_sha, device, policy, regimes, status, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)",
                (
                    lid,
                    problem,
                    expert,
                    problem_sha,
                    expert_sha,
                    device,
                    policy,
                    json.dumps(regimes),
                    now(),
                    now(),
                ),
            )

    def set_lineage_status(
        self,
        lid: str,
        status: str,
        stop_reason: str = "",
        environment: dict[str, Any] | None = None,
    ) -> None:
        with self.tx() as c:
            c.execute(
                "UPDATE lineages SET status = ?, stop_reason = ?, updated = ? WHERE id = ?",
                (status, stop_reason, now(), lid),
            )
            if environment is not None:
                c.execute(
                    "UPDATE lineages SET environment = ? WHERE id = ?",
                    (json.dumps(environment), lid),
                )

    def get_lineage(self, lid: str) -> LineageRow | None:
        row = self.conn.execute(
            "SELECT * FROM lineages WHERE id = ? OR id LIKE ?", (lid, f"{lid}%")
        ).fetchall()
        if len(row) > 1:
            raise StoreError(
                f"lineage id {lid!r} is ambiguous: {', '.join(r['id'][:12] for r in row)}"
            )
        return self._lineage(row[0]) if row else None

    def list_lineages(self) -> list[LineageRow]:
        return [
            self._lineage(r) for r in self.conn.execute("SELECT * FROM lineages ORDER BY created")
        ]

    @staticmethod
    def _lineage(r: sqlite3.Row) -> LineageRow:
        return LineageRow(
            id=r["id"],
            problem_path=r["problem_path"],
            expert_path=r["expert_path"],
            device=r["device"],
            policy=r["policy"],
            regimes=json.loads(r["regimes"]),
            status=r["status"],
            stop_reason=r["stop_reason"],
            environment=json.loads(r["environment"]) if r["environment"] else None,
            created=r["created"],
            updated=r["updated"],
        )

    # nodes ----------------------------------------------------------------------------------

    def add_node(
        self,
        lid: str,
        step: int,
        parent_id: int | None,
        via_attempt: int | None,
        source: str,
        source_sha: str,
        gate: dict[str, Any],
    ) -> int:
        with self.tx() as c:
            cur = c.execute(
                "INSERT INTO nodes (lineage_id, step, parent_id, via_attempt, source, source_sha, gate, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (lid, step, parent_id, via_attempt, source, source_sha, json.dumps(gate), now()),
            )
            c.execute("UPDATE lineages SET updated = ? WHERE id = ?", (now(), lid))
            return int(cur.lastrowid or 0)

    def nodes(self, lid: str) -> list[NodeRow]:
        rows = self.conn.execute("SELECT * FROM nodes WHERE lineage_id = ? ORDER BY step", (lid,))
        return [
            NodeRow(
                r["id"],
                r["lineage_id"],
                r["step"],
                r["parent_id"],
                r["via_attempt"],
                r["source"],
                json.loads(r["gate"]),
            )
            for r in rows
        ]

    # attempts -------------------------------------------------------------------------------

    def add_attempt(
        self,
        lid: str,
        parent_id: int,
        step: int,
        pass_name: str,
        site_key: str,
        site: dict[str, Any],
        *,
        applied: bool,
        accepted: bool,
        reason: str,
        failed_stage: str | None = None,
        message: str = "",
        candidate: str | None = None,
        candidate_sha: str | None = None,
        gate: dict[str, Any] | None = None,
        seconds: float = 0.0,
    ) -> int:
        with self.tx() as c:
            cur = c.execute(
                "INSERT OR REPLACE INTO attempts (lineage_id, parent_id, step, pass_name, site_key, site, applied, accepted, reason, failed_stage, message,"
                " candidate, candidate_sha, gate, seconds, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    lid,
                    parent_id,
                    step,
                    pass_name,
                    site_key,
                    json.dumps(site),
                    int(applied),
                    int(accepted),
                    reason,
                    failed_stage,
                    message,
                    candidate,
                    candidate_sha,
                    json.dumps(gate) if gate is not None else None,
                    seconds,
                    now(),
                ),
            )
            return int(cur.lastrowid or 0)

    def attempts(self, lid: str, parent_id: int | None = None) -> list[AttemptRow]:
        if parent_id is None:
            rows = self.conn.execute(
                "SELECT * FROM attempts WHERE lineage_id = ? ORDER BY id", (lid,)
            )
        else:
            rows = self.conn.execute(
                "SELECT * FROM attempts WHERE lineage_id = ? AND parent_id = ? ORDER BY id",
                (lid, parent_id),
            )
        return [
            AttemptRow(
                r["id"],
                r["parent_id"],
                r["step"],
                r["pass_name"],
                r["site_key"],
                json.loads(r["site"]),
                bool(r["applied"]),
                bool(r["accepted"]),
                r["reason"],
                r["failed_stage"],
                r["message"],
                r["candidate"],
                json.loads(r["gate"]) if r["gate"] else None,
                r["seconds"],
            )
            for r in rows
        ]

    # probes ---------------------------------------------------------------------------------

    def add_probe(self, p: ProbeRow) -> None:
        with self.tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO probes (lineage_id, step, pass_name, base_node, applied, accepted, failed_stage, message, candidate,"
                " gate, seconds, created, forward_only, base_source)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    p.lineage_id,
                    p.step,
                    p.pass_name,
                    p.base_node,
                    int(p.applied),
                    int(p.accepted),
                    p.failed_stage,
                    p.message,
                    p.candidate,
                    json.dumps(p.gate) if p.gate is not None else None,
                    p.seconds,
                    now(),
                    int(p.forward_only),
                    p.base_source,
                ),
            )

    def probes(self, lid: str) -> list[ProbeRow]:
        """Every probe of a lineage: the steps' in step order, then the forward-only passes'."""
        rows = self.conn.execute(
            "SELECT * FROM probes WHERE lineage_id = ? ORDER BY forward_only, step, pass_name",
            (lid,),
        )
        return [
            ProbeRow(
                r["lineage_id"],
                r["step"],
                r["pass_name"],
                r["base_node"],
                bool(r["applied"]),
                bool(r["accepted"]),
                r["failed_stage"],
                r["message"],
                r["candidate"],
                json.loads(r["gate"]) if r["gate"] else None,
                r["seconds"],
                bool(r["forward_only"]),
                r["base_source"],
            )
            for r in rows
        ]

    # skills ---------------------------------------------------------------------------------

    def get_skill(self, pass_name: str, anchor: str) -> SkillRow | None:
        r = self.conn.execute(
            "SELECT * FROM skills WHERE pass_name = ? AND anchor = ?", (pass_name, anchor)
        ).fetchone()
        return self._skill(r) if r else None

    def put_skill(
        self, sid: str, pass_name: str, anchor: str, record: dict[str, Any], confidence: int
    ) -> None:
        with self.tx() as c:
            c.execute(
                "INSERT INTO skills (id, pass_name, anchor, record, confidence, updated) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(pass_name, anchor) DO UPDATE SET record = excluded.record, confidence = excluded.confidence,"
                " updated = excluded.updated",
                (sid, pass_name, anchor, json.dumps(record), confidence, now()),
            )

    def skills(self) -> list[SkillRow]:
        return [
            self._skill(r)
            for r in self.conn.execute("SELECT * FROM skills ORDER BY confidence DESC, pass_name")
        ]

    @staticmethod
    def _skill(r: sqlite3.Row) -> SkillRow:
        return SkillRow(
            r["id"], r["pass_name"], r["anchor"], json.loads(r["record"]), r["confidence"]
        )


def open_store(path: Path | None = None) -> Store:
    return Store(path or default_db_path())

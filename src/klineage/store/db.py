"""The klineage database: one SQLite file (WAL, foreign keys), migrated on open.

Every write is its own transaction, committed before the call returns, so a walk killed with
SIGKILL loses at most the gate call that was running.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klineage.errors import KLineageError
from klineage.store.migrations import MIGRATIONS


def default_db_path() -> Path:
    """$KLINEAGE_DB, else $XDG_DATA_HOME/klineage/klineage.db (~/.local/share/klineage/klineage.db)."""
    raw = os.environ.get("KLINEAGE_DB")
    if raw:
        return Path(raw)
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "klineage" / "klineage.db"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class StoreError(KLineageError):
    pass


@dataclass
class LineageRow:
    id: str
    problem_path: str
    expert_path: str
    device: str
    policy: str
    regimes: list[str]
    status: str
    stop_reason: str
    environment: dict[str, Any] | None
    created: str
    updated: str


@dataclass
class NodeRow:
    id: int
    lineage_id: str
    step: int
    parent_id: int | None
    via_attempt: int | None
    source: str
    gate: dict[str, Any]


@dataclass
class AttemptRow:
    id: int
    parent_id: int
    step: int
    pass_name: str
    site_key: str
    site: dict[str, Any]
    applied: bool
    accepted: bool
    reason: str
    failed_stage: str | None
    message: str
    candidate: str | None
    gate: dict[str, Any] | None
    seconds: float


@dataclass
class ProbeRow:
    lineage_id: str
    step: int
    pass_name: str
    base_node: int
    applied: bool
    accepted: bool
    failed_stage: str | None
    message: str
    candidate: str | None
    gate: dict[str, Any] | None
    seconds: float


@dataclass
class SkillRow:
    id: str
    pass_name: str
    anchor: str
    record: dict[str, Any]
    confidence: int


@dataclass
class RunRow:
    id: str
    problem_path: str
    kernel_path: str
    device: str
    policy: str
    settings: dict[str, Any]
    status: str
    stop_reason: str
    start_gate: dict[str, Any] | None
    summary: dict[str, Any] | None
    created: str
    updated: str


@dataclass
class TrialRow:
    id: int
    run_id: str
    seq: int
    proposal: str
    label: str
    skill_id: str | None
    materializer: str
    base_sha: str
    candidate: str | None
    candidate_sha: str | None
    gated: bool
    accepted: bool
    kept: bool
    failed_stage: str | None
    message: str
    gate: dict[str, Any] | None
    speedup: float | None
    predicted: float | None
    tokens_in: int
    tokens_out: int
    reply: str | None
    seconds: float


class Store:
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
                    _now(),
                    _now(),
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
                (status, stop_reason, _now(), lid),
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
                (lid, step, parent_id, via_attempt, source, source_sha, json.dumps(gate), _now()),
            )
            c.execute("UPDATE lineages SET updated = ? WHERE id = ?", (_now(), lid))
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
                    _now(),
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
                " gate, seconds, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    _now(),
                ),
            )

    def probes(self, lid: str) -> list[ProbeRow]:
        rows = self.conn.execute("SELECT * FROM probes WHERE lineage_id = ? ORDER BY step", (lid,))
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
                (sid, pass_name, anchor, json.dumps(record), confidence, _now()),
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

    # optimize runs ---------------------------------------------------------------------------

    def create_run(
        self,
        rid: str,
        problem: str,
        kernel: str,
        problem_sha: str,
        kernel_sha: str,
        device: str,
        policy: str,
        settings: dict[str, Any],
    ) -> None:
        with self.tx() as c:
            c.execute(
                "INSERT INTO runs (id, problem_path, kernel_path, problem_sha, kernel_sha, device, policy, settings, status, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)",
                (
                    rid,
                    problem,
                    kernel,
                    problem_sha,
                    kernel_sha,
                    device,
                    policy,
                    json.dumps(settings),
                    _now(),
                    _now(),
                ),
            )

    def update_run(self, rid: str, **fields: Any) -> None:
        """Set status, stop_reason, settings, start_gate or summary (JSON fields serialized)."""
        allowed = {"status", "stop_reason", "settings", "start_gate", "summary"}
        bad = set(fields) - allowed
        if bad:
            raise StoreError(f"update_run: unknown fields {sorted(bad)}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        values = [
            json.dumps(v) if k in ("settings", "start_gate", "summary") else v
            for k, v in fields.items()
        ]
        with self.tx() as c:
            c.execute(f"UPDATE runs SET {sets}, updated = ? WHERE id = ?", (*values, _now(), rid))

    def get_run(self, rid: str) -> RunRow | None:
        rows = self.conn.execute(
            "SELECT * FROM runs WHERE id = ? OR id LIKE ?", (rid, f"{rid}%")
        ).fetchall()
        if len(rows) > 1:
            raise StoreError(
                f"run id {rid!r} is ambiguous: {', '.join(r['id'][:12] for r in rows)}"
            )
        return self._run(rows[0]) if rows else None

    def list_runs(self) -> list[RunRow]:
        return [self._run(r) for r in self.conn.execute("SELECT * FROM runs ORDER BY created")]

    def delete_run(self, rid: str) -> None:
        with self.tx() as c:
            c.execute("DELETE FROM trials WHERE run_id = ?", (rid,))
            c.execute("DELETE FROM runs WHERE id = ?", (rid,))

    @staticmethod
    def _run(r: sqlite3.Row) -> RunRow:
        def j(v: str | None) -> Any:
            return json.loads(v) if v else None

        return RunRow(
            id=r["id"],
            problem_path=r["problem_path"],
            kernel_path=r["kernel_path"],
            device=r["device"],
            policy=r["policy"],
            settings=json.loads(r["settings"]),
            status=r["status"],
            stop_reason=r["stop_reason"],
            start_gate=j(r["start_gate"]),
            summary=j(r["summary"]),
            created=r["created"],
            updated=r["updated"],
        )

    def add_trial(
        self,
        run_id: str,
        seq: int,
        proposal: str,
        label: str,
        skill_id: str | None,
        materializer: str,
        base_sha: str,
        *,
        candidate: str | None = None,
        candidate_sha: str | None = None,
        gated: bool = False,
        accepted: bool = False,
        kept: bool = False,
        failed_stage: str | None = None,
        message: str = "",
        gate: dict[str, Any] | None = None,
        speedup: float | None = None,
        predicted: float | None = None,
        tokens_in: int = 0,
        tokens_out: int = 0,
        reply: str | None = None,
        seconds: float = 0.0,
    ) -> int:
        with self.tx() as c:
            cur = c.execute(
                "INSERT INTO trials (run_id, seq, proposal, label, skill_id, materializer, base_sha, candidate, candidate_sha, gated, accepted, kept,"
                " failed_stage, message, gate, speedup, predicted, tokens_in, tokens_out, reply, seconds, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    seq,
                    proposal,
                    label,
                    skill_id,
                    materializer,
                    base_sha,
                    candidate,
                    candidate_sha,
                    int(gated),
                    int(accepted),
                    int(kept),
                    failed_stage,
                    message,
                    json.dumps(gate) if gate is not None else None,
                    speedup,
                    predicted,
                    tokens_in,
                    tokens_out,
                    reply,
                    seconds,
                    _now(),
                ),
            )
            c.execute("UPDATE runs SET updated = ? WHERE id = ?", (_now(), run_id))
            return int(cur.lastrowid or 0)

    def trials(self, run_id: str) -> list[TrialRow]:
        rows = self.conn.execute("SELECT * FROM trials WHERE run_id = ? ORDER BY seq", (run_id,))
        return [
            TrialRow(
                r["id"],
                r["run_id"],
                r["seq"],
                r["proposal"],
                r["label"],
                r["skill_id"],
                r["materializer"],
                r["base_sha"],
                r["candidate"],
                r["candidate_sha"],
                bool(r["gated"]),
                bool(r["accepted"]),
                bool(r["kept"]),
                r["failed_stage"],
                r["message"],
                json.loads(r["gate"]) if r["gate"] else None,
                r["speedup"],
                r["predicted"],
                r["tokens_in"],
                r["tokens_out"],
                r["reply"],
                r["seconds"],
            )
            for r in rows
        ]


def open_store(path: Path | None = None) -> Store:
    return Store(path or default_db_path())

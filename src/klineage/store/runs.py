"""The optimize runs' tables (`runs` and their `trials`, migration 3): the Store's part that
klineage optimize reads and writes."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from klineage.store.connection import Database, StoreError, now
from klineage.store.rows import RunRow, TrialRow


class RunTables(Database):
    """An optimize run (its identity, settings, status, start gate and summary) and its trials
    in order; deleting a run deletes its trials."""

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
                    now(),
                    now(),
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
            c.execute(f"UPDATE runs SET {sets}, updated = ? WHERE id = ?", (*values, now(), rid))

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
                    now(),
                ),
            )
            c.execute("UPDATE runs SET updated = ? WHERE id = ?", (now(), run_id))
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

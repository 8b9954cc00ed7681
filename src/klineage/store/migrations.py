"""Ordered schema migrations. Never edit a released migration: append a new one.

PRAGMA user_version holds the number of migrations applied.
"""

MIGRATIONS: list[str] = [
    # 1: lineages, their nodes (every kernel on the chain) and every gated attempt.
    """
    CREATE TABLE lineages (
        id TEXT PRIMARY KEY,
        problem_path TEXT NOT NULL,
        expert_path TEXT NOT NULL,
        problem_sha TEXT NOT NULL,
        expert_sha TEXT NOT NULL,
        device TEXT NOT NULL,
        policy TEXT NOT NULL,
        regimes TEXT NOT NULL,          -- JSON list ([] = the device's default set)
        status TEXT NOT NULL,           -- running | done | refused
        stop_reason TEXT NOT NULL DEFAULT '',
        environment TEXT,               -- JSON Environment of the expert's gate result
        created TEXT NOT NULL,
        updated TEXT NOT NULL
    );
    CREATE TABLE nodes (
        id INTEGER PRIMARY KEY,
        lineage_id TEXT NOT NULL REFERENCES lineages(id) ON DELETE CASCADE,
        step INTEGER NOT NULL,          -- 0 = the expert
        parent_id INTEGER REFERENCES nodes(id),
        via_attempt INTEGER,            -- the accepted attempt that produced it
        source TEXT NOT NULL,
        source_sha TEXT NOT NULL,
        gate TEXT NOT NULL,             -- JSON GateResult
        created TEXT NOT NULL,
        UNIQUE (lineage_id, step)
    );
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        lineage_id TEXT NOT NULL REFERENCES lineages(id) ON DELETE CASCADE,
        parent_id INTEGER NOT NULL REFERENCES nodes(id),
        step INTEGER NOT NULL,          -- the step this attempt competed for (parent step + 1)
        pass_name TEXT NOT NULL,
        site_key TEXT NOT NULL,
        site TEXT NOT NULL,             -- JSON Site
        applied INTEGER NOT NULL,       -- 0: the pass did not apply (reason says why)
        accepted INTEGER NOT NULL,      -- 1: the gate accepted the simpler kernel
        reason TEXT NOT NULL,
        failed_stage TEXT,
        message TEXT NOT NULL DEFAULT '',
        candidate TEXT,                 -- the simplified source, when the pass applied
        candidate_sha TEXT,
        gate TEXT,                      -- JSON GateResult
        seconds REAL NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        UNIQUE (parent_id, pass_name, site_key)
    );
    CREATE INDEX attempts_by_parent ON attempts(parent_id);
    """,
    # 2: the skill library: one row per (pass, anchor), the merged record as JSON.
    """
    CREATE TABLE skills (
        id TEXT PRIMARY KEY,
        pass_name TEXT NOT NULL,
        anchor TEXT NOT NULL,
        record TEXT NOT NULL,           -- JSON Skill (merged evidence)
        confidence INTEGER NOT NULL,    -- independent source kernels that confirm it
        updated TEXT NOT NULL,
        UNIQUE (pass_name, anchor)
    );
    """,
]

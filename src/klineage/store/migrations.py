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
    # 3: optimize runs and their trials (the trajectory), replayed on resume.
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        problem_path TEXT NOT NULL,
        kernel_path TEXT NOT NULL,
        problem_sha TEXT NOT NULL,
        kernel_sha TEXT NOT NULL,
        device TEXT NOT NULL,
        policy TEXT NOT NULL,
        settings TEXT NOT NULL,         -- JSON: budget, regimes, margin, llm, skills
        status TEXT NOT NULL,           -- running | done | refused
        stop_reason TEXT NOT NULL DEFAULT '',
        start_gate TEXT,                -- JSON GateResult of the starting kernel
        summary TEXT,                   -- JSON RunSummary when done
        created TEXT NOT NULL,
        updated TEXT NOT NULL
    );
    CREATE TABLE trials (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,           -- order in the run, from 1
        proposal TEXT NOT NULL,         -- what was tried: policy's key (skill or pass, materializer)
        label TEXT NOT NULL DEFAULT '', -- the same, in words
        skill_id TEXT,
        materializer TEXT NOT NULL,     -- mechanical | llm | llm-repair
        base_sha TEXT NOT NULL,         -- the kernel it was applied to
        candidate TEXT,
        candidate_sha TEXT,
        gated INTEGER NOT NULL,         -- 1: a gate call was spent
        accepted INTEGER NOT NULL,
        kept INTEGER NOT NULL,          -- 1: became the new best
        failed_stage TEXT,
        message TEXT NOT NULL DEFAULT '',
        gate TEXT,                      -- JSON GateResult
        speedup REAL,                   -- geomean over regimes vs the best before it (GPU)
        predicted REAL,                 -- the skill's predicted speedup (CPU)
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        reply TEXT,                     -- the LLM reply, kept for replay
        seconds REAL NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        UNIQUE (run_id, seq)
    );
    CREATE INDEX trials_by_run ON trials(run_id);
    """,
    # 4: forward probes: each accepted step's optimization added back to the walk's simplest
    #    kernel, gated, so a skill's effect is also known in the context optimize starts from.
    """
    CREATE TABLE probes (
        id INTEGER PRIMARY KEY,
        lineage_id TEXT NOT NULL REFERENCES lineages(id) ON DELETE CASCADE,
        step INTEGER NOT NULL,          -- the accepted step whose optimization was added back
        pass_name TEXT NOT NULL,
        base_node INTEGER NOT NULL REFERENCES nodes(id),  -- the simplest kernel
        applied INTEGER NOT NULL,
        accepted INTEGER NOT NULL,
        failed_stage TEXT,
        message TEXT NOT NULL DEFAULT '',
        candidate TEXT,
        gate TEXT,                      -- JSON GateResult
        seconds REAL NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        UNIQUE (lineage_id, step)
    );
    """,
    # 5: forward-only probes: a forward-only pass (no backward rewrite, so no step removes it)
    #    added to the walk's simplest kernel, stored at the simplest kernel's step beside that
    #    step's own probe. SQLite cannot alter a UNIQUE constraint: the table is rebuilt, rows
    #    and ids kept.
    """
    CREATE TABLE probes_new (
        id INTEGER PRIMARY KEY,
        lineage_id TEXT NOT NULL REFERENCES lineages(id) ON DELETE CASCADE,
        step INTEGER NOT NULL,          -- the step added back, or the simplest kernel's step
        pass_name TEXT NOT NULL,
        base_node INTEGER NOT NULL REFERENCES nodes(id),  -- the simplest kernel
        applied INTEGER NOT NULL,
        accepted INTEGER NOT NULL,
        failed_stage TEXT,
        message TEXT NOT NULL DEFAULT '',
        candidate TEXT,
        gate TEXT,                      -- JSON GateResult
        seconds REAL NOT NULL DEFAULT 0,
        created TEXT NOT NULL,
        forward_only INTEGER NOT NULL DEFAULT 0,  -- 1: a forward-only pass, not a step's
        UNIQUE (lineage_id, step, pass_name, forward_only)
    );
    INSERT INTO probes_new (id, lineage_id, step, pass_name, base_node, applied, accepted,
        failed_stage, message, candidate, gate, seconds, created)
    SELECT id, lineage_id, step, pass_name, base_node, applied, accepted, failed_stage, message,
        candidate, gate, seconds, created FROM probes;
    DROP TABLE probes;
    ALTER TABLE probes_new RENAME TO probes;
    """,
    # 6: the kernel a forward-only pass was added to when the walk's simplest kernel has no place
    #    for it: the family's naive kernel (naive.py beside the expert). NULL: the simplest kernel.
    """
    ALTER TABLE probes ADD COLUMN base_source TEXT;
    """,
]

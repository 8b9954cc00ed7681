"""Build the skill library klineage ships (src/klineage/data/skills-h200.json).

The one command that regenerates it, on the H200 (docs/SKILLS.md):

    python3 benchmarks/build_library.py --distill     # distill every corpus expert, then build

distills the six corpus experts with measured effects (two GPU regimes each, `--policy first`,
the database in $OUT/library.db so an interrupted run resumes) and writes the merged library
to $OUT/skills-h200.json; copy it to src/klineage/data/. Without --distill it builds from stored
lineages and skill files. The shipped file (2026-12-03) is built from the re-walk of the six
experts (benchmarks/rewalk_h200.sh; two of its walks cut before their end, hence --partial), the
softmax sweep, the colsum probe lineage and the CPU walks: the exact command is in docs/SKILLS.md
("The shipped library"). The 2026-11-30 build, whose effects now read as old timing, was:

    PYTHONPATH=src python benchmarks/build_library.py \
        --db benchmarks/results/distill-gpu-2026-11-30-run2-g0.db \
        --db benchmarks/results/distill-gpu-2026-11-30-run2-g1.db \
        --db benchmarks/results/distill-sweep-h200-2026-12-01.db \
        --skills benchmarks/results/skills-h200-2026-11-30.json \
        --out src/klineage/data/skills-h200.json

(the third database is the softmax sweep walked with side-by-side device timing:
`benchmarks/measurement_h200.py distill`; the others' effects read as "old timing").

With --probe, every finished lineage of the databases first gets its forward probes (each
step's optimization added back to the walk's simplest kernel and gated: the effect where
optimize starts; lineage/probe.py), one process per lineage, writing into the databases:

    python3 benchmarks/build_library.py --probe \
        --db benchmarks/results/distill-gpu-2026-11-30-run2-g0.db \
        --db benchmarks/results/distill-gpu-2026-11-30-run2-g1.db \
        --skills benchmarks/results/skills-h200-2026-11-30.json

(rmsnorm and softmax exist only as skills files from the first run: `--distill --probe`
re-walks them too.)

With --base, the skills are added to a library built before (its merged skills, and its
unmerged steps from the -steps.json beside it) instead of an empty one: the forward-only
probes of 2026-12-02 (one-step walks of the colsum, cumsum and transpose experts on the H200,
each forward-only pass added to the family's naive kernel; benchmarks/forward_probes_h200.sh)
were added to the shipped file so:

    PYTHONPATH=src python benchmarks/build_library.py --base src/klineage/data/skills-h200.json \
        --db benchmarks/results/forward-probes-h200-2026-12-02.db --out src/klineage/data/skills-h200.json

With --reextract (and --base), the lineages of --db that the base already holds are extracted
again and the library is merged again from its unmerged steps, those lineages' replaced: how the
colsum lineage's split_k condition was re-learned on the program count (2026-12-03):

    cp benchmarks/results/forward-probes-h200-2026-12-02/colsum.db /tmp/colsum.db
    PYTHONPATH=src python benchmarks/build_library.py --base src/klineage/data/skills-h200.json \
        --db /tmp/colsum.db --reextract --out src/klineage/data/skills-h200.json

(a copy: opening a database migrates it, and the committed raw results stay as they came back).

With --cpu-db, the skills of CPU lineages whose pass no GPU lineage gave are added, correctness
only (the colsum, cumsum and transpose walks of 2026-12-02, before any of them was walked on
the H200: column_tiling, block_scan, tiled_transpose):

    PYTHONPATH=src python benchmarks/build_library.py ... --cpu-db benchmarks/results/distill-cpu-2026-12-02.db

Skills are merged as the library merges them (same pass and anchor: one skill, more evidence).
The unmerged skills (one per lineage step) are written beside it as *-steps.json: the
leave-one-out libraries of `klineage bench --suite corpus` are merged from them without the
held-out workload's steps, so no exemplar or parameter of its expert leaks in.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from _common import out_dir

from klineage.skills import extract_skills, read_json, to_json
from klineage.skills.library import add_to_library, library_skills, without_old_timing
from klineage.store import open_store

HERE = Path(__file__).resolve().parent
# Two GPU regimes per workload that differ in kind (short vs long rows, square vs skinny...).
REGIMES = "llama,short_rows,large,tiny_rows_gpu,llama2,gemma_vocab,hidden_4096,square_4096,skinny_m16,causal_d64,short_d64,wgrad_bf16,tall_k_fp16"


def _probe(job: tuple[Path, str]) -> str:
    """One lineage's probes (a worker process: gate calls share the GPU through its lock)."""
    from klineage.config import GateConfig
    from klineage.lineage.probe import probe_lineage

    db, lid = job
    config = GateConfig(profile_compile=False, allow_suspicious=True, warmup_ms=10, rep_ms=40)
    probes = probe_lineage(open_store(db), lid, config=config)
    ok = sum(p.accepted for p in probes)
    return f"{db.name} {lid}: {len(probes)} probes, {ok} correct on the simplest kernel"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--distill", action="store_true", help="distill every corpus expert on the GPU first"
    )
    ap.add_argument(
        "--db", action="append", default=[], type=Path, help="a database of distilled lineages"
    )
    ap.add_argument(
        "--skills", action="append", default=[], type=Path, help="a skills JSON file to merge"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="where to write (default $OUT/skills-h200.json)"
    )
    ap.add_argument(
        "--cpu-db",
        action="append",
        default=[],
        type=Path,
        help="a database of CPU lineages: their skills of passes no GPU lineage gave are added, correctness only",
    )
    ap.add_argument(
        "--base",
        type=Path,
        default=None,
        help="a built library (and its -steps.json beside it) to add to instead of starting empty",
    )
    ap.add_argument(
        "--reextract",
        action="store_true",
        help="with --base: the lineages of --db it already holds are extracted again (after a "
        "change in how skills are extracted) and the library merged again from the unmerged steps",
    )
    ap.add_argument(
        "--partial",
        action="store_true",
        help="also extract GPU lineages cut before their end (status running): every step they "
        "hold was accepted by the gate as any; the steps not walked are missing, not guessed",
    )
    ap.add_argument(
        "--probe",
        action="store_true",
        help="gate the forward probes of every finished GPU lineage first (writes into --db)",
    )
    args = ap.parse_args()
    dbs = list(args.db)
    if args.distill:
        out = out_dir()
        subprocess.run([sys.executable, str(HERE / "distill_corpus.py"), "--device", "cuda", "--regimes", REGIMES,
                        "--policy", "first", *(["--probe"] if args.probe else [])], check=True,
                       env={**__import__("os").environ, "OUT": str(out)})  # fmt: skip
        dbs.append(out / "distill.db")
    if args.probe:
        jobs = [(db, lin.id) for db in dbs for lin in open_store(db).list_lineages()
                if lin.status == "done" and lin.device == "cuda"]  # fmt: skip
        with ProcessPoolExecutor(max_workers=max(1, len(jobs))) as pool:
            for line in pool.map(_probe, jobs):
                print(line, flush=True)
    steps: list = []  # every step's skill before merging: leave-one-out libraries start here
    with tempfile.TemporaryDirectory() as tmp:
        library = open_store(Path(tmp) / "library.db")
        if args.base is not None:
            # The skills as built before (merged), and their unmerged steps for leave-one-out.
            base_steps = args.base.with_name(args.base.stem + "-steps.json")
            steps += read_json(base_steps) if base_steps.exists() else []
            if args.reextract:
                # Merging the unmerged steps gives the merged file again (checked on the
                # shipped one): so the base's steps of a lineage read again here are replaced.
                again = {lin.id for db in dbs for lin in open_store(db).list_lineages()}
                kept = [s for s in steps if not {p.lineage_id for p in s.provenance} & again]
                print(f"{args.base.name}: {len(steps) - len(kept)} step skills to extract again")
                steps = kept
                created, _ = add_to_library(library, steps)
            else:
                created, _ = add_to_library(library, read_json(args.base))
            print(f"{args.base.name}: {created} skills to start from")
        for db in dbs:
            store = open_store(db)
            for lin in store.list_lineages():
                cut = args.partial and lin.status == "running"
                if (lin.status != "done" and not cut) or lin.device != "cuda":
                    print(f"skipped lineage {lin.id} ({lin.status}, {lin.device})")
                    continue
                skills = extract_skills(store, lin.id)
                steps += skills
                created, updated = add_to_library(library, skills)
                print(
                    f"{Path(lin.problem_path).parent.name}: {len(skills)} skills ({created} new, "
                    f"{updated} merged){' from a walk cut before its end' if cut else ''}"
                )
        for path in args.skills:
            # Skill files of earlier runs carry conditions learned from the old timing: dropped.
            from_file = [without_old_timing(s) for s in read_json(path)]
            steps += from_file
            created, updated = add_to_library(library, from_file)
            print(f"{path.name}: {created} new, {updated} merged")
        # CPU lineages (correctness only, nothing timed) for optimizations no H200 walk has
        # reached yet: their skills are selected wherever their pass finds a site, gain
        # unknown, until a GPU walk measures the "when". Passes the GPU gave are not diluted.
        known = {s.rewrite.pass_name for s in steps}
        for db in args.cpu_db:
            store = open_store(db)
            for lin in store.list_lineages():
                if lin.status != "done" or lin.device != "cpu":
                    continue
                new = [s for s in extract_skills(store, lin.id) if s.rewrite.pass_name not in known]
                steps += new
                created, updated = add_to_library(library, new)
                print(
                    f"{Path(lin.problem_path).parent.name} (cpu): {', '.join(s.name for s in new) or 'nothing new'}"
                )
        skills = library_skills(library)
    out_path = args.out or out_dir() / "skills-h200.json"
    out_path.write_text(to_json(skills), encoding="utf-8")
    steps_path = out_path.with_name(out_path.stem + "-steps.json")
    steps_path.write_text(to_json(steps), encoding="utf-8")
    print(
        f"{len(skills)} skills written to {out_path}; the {len(steps)} unmerged step skills to {steps_path}"
    )


if __name__ == "__main__":
    main()

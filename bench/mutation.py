"""Mutation score of the modules that decide a number: answer parsing, the benchmarks' scorers, statistics,
aggregation, frame plans and cache keys.

    python bench/mutation.py [--sample 40] [--seed 0] [--modules answers aggregate ...] [--jobs 2]

A mutation test asks whether the suite notices a plausible one-line bug: Cosmic Ray (the `cosmic-ray` package
from PyPI, in the dev extra) makes each mutant of a module (an operator, a comparison, a constant, a boolean
swapped) and runs that module's own tests against it; a mutant the tests still pass on "survived". The score is
killed / (killed + survived), per module, with a 95% Wilson interval when the mutants were sampled.

The modules and the functions in them that decide a number are listed in TARGETS with the tests that cover them
(a mutant outside those functions, e.g. in an error message, says little). Each module's mutants are drawn at
random (``--sample`` per module, ``--seed``; 0 = all of them) and run in a scratch copy of ``src/`` and
``tests/`` (Cosmic Ray edits the file it mutates), never in this checkout. Survivors are printed with their diff,
so each one is either a test to write or an equivalent mutant to note. Sessions are kept under
``results/bench/mutation/``; a second invocation with the same arguments reruns nothing finished.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    """One module to mutate: the functions in it that decide a number, and the tests that cover them."""

    name: str
    module: str
    functions: tuple[str, ...]
    tests: str


TARGETS = (
    Target("answers", "src/senri/answers.py",
           ("split_reasoning", "parse_answer", "_letter_from_value", "_declared_letters", "_normalise",
            "_option_from_text", "json_objects", "best_letter", "debiased_scores", "cyclic_order"),
           "tests/test_answers.py"),
    Target("scoring", "src/senri/benchmarks/scoring.py", (),
           "tests/test_scoring.py tests/test_scorer_cases.py tests/test_benchmark_tables.py"),
    Target("percent", "src/senri/percent.py", ("display_percent", "percent_value", "round_half_up"),
           "tests/test_aggregate.py tests/test_layouts.py"),
    Target("aggregate", "src/senri/aggregate.py",
           ("score", "main_table", "layout_scored", "per_video_table", "run_health_table", "store_health_table",
            "answer_positions"),
           "tests/test_aggregate.py"),
    Target("stats", "src/senri/stats.py", (), "tests/test_stats.py"),
    Target("frame_plans", "src/senri/decode.py",
           ("uniform", "at_fps", "at_times", "targets", "choose_accuracy", "nearest_frame", "nearest_keyframe",
            "keyframe_between", "frame_index", "_nearest", "_pick_frames"),
           "tests/test_decode.py -k 'not real and not carrier and not store'"),
    Target("cache_keys", "src/senri/backends/cache.py", ("request_key", "get", "put", "complete_many"),
           "tests/test_backends.py -k 'cache_key or cached_backend or response_cache'"),
)


def wilson(killed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion, in percent (a sampled score is an estimate)."""
    if n == 0:
        return (math.nan, math.nan)
    p = killed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (100 * max(0.0, centre - half), 100 * min(1.0, centre + half))


def scratch_copy(workdir: Path) -> Path:
    """A copy of the sources and tests for Cosmic Ray to edit (refreshed on every invocation)."""
    tree = workdir / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(REPO / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "config", "workflow", "rules", "Snakefile"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tree / name)
        elif source.is_file():
            shutil.copy2(source, tree / name)
    return tree


def test_command(target: Target) -> str:
    return f"{sys.executable} -m pytest -x -q -p no:cacheprovider {target.tests}"


def write_config(tree: Path, target: Target, timeout_s: float) -> Path:
    config = tree / f"{target.name}.toml"
    command = test_command(target)
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{target.module}"\n'
        f"timeout = {timeout_s}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    return config


def annotation_spans(module: Path) -> list[tuple[int, int, int, int]]:
    """Where type annotations sit, as (row, col, end row, end col): with ``from __future__ import annotations``
    they are never evaluated, so a mutant inside one (``X | None`` -> ``X & None``) is equivalent by
    construction and says nothing about the tests."""
    spans = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        notes = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            notes.append(node.returns)
        if isinstance(node, ast.arg) and node.annotation is not None:
            notes.append(node.annotation)
        if isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
        spans += [(n.lineno, n.col_offset, n.end_lineno or n.lineno, n.end_col_offset or 0) for n in notes]
    return spans


def keep_sample(session: Path, tree: Path, target: Target, sample: int, seed: int) -> int:
    """Drop every work item outside the target's functions or inside an annotation, then all but ``sample``
    drawn at random."""
    db = sqlite3.connect(session)
    rows = db.execute("SELECT job_id, definition_name, start_pos_row, start_pos_col, end_pos_row, end_pos_col"
                      " FROM mutation_specs").fetchall()
    notes = annotation_spans(tree / target.module)
    wanted = [job for job, where, row, col, _, _ in rows
              if (not target.functions or (where or "").split(".")[-1] in target.functions)
              and not any((r, c) <= (row, col) < (er, ec) for r, c, er, ec in notes)]
    wanted.sort()
    if sample:
        wanted = random.Random(f"{seed}:{target.name}").sample(wanted, min(sample, len(wanted)))
    keep = set(wanted)
    drop = [(row[0],) for row in rows if row[0] not in keep]
    db.executemany("DELETE FROM mutation_specs WHERE job_id = ?", drop)
    db.executemany("DELETE FROM work_items WHERE job_id = ?", drop)
    db.commit()
    db.close()
    return len(keep)


def results(session: Path) -> list[tuple[str, str, str, str]]:
    db = sqlite3.connect(session)
    rows = db.execute(
        "SELECT s.definition_name, s.operator_name, r.test_outcome, r.diff FROM mutation_specs s "
        "JOIN work_results r ON r.job_id = s.job_id").fetchall()
    db.close()
    return rows


def run_target(tree: Path, workdir: Path, target: Target, sample: int, seed: int, timeout_s: float) -> dict:
    env_path = f"{Path(sys.executable).parent}"
    config = write_config(tree, target, timeout_s)
    session = workdir / f"{target.name}-s{sample}-seed{seed}.sqlite"
    if not session.exists():
        subprocess.run([env_path + "/cosmic-ray", "init", str(config), str(session)], cwd=tree, check=True)
        keep_sample(session, tree, target, sample, seed)
    baseline = subprocess.run(test_command(target), shell=True, cwd=tree, capture_output=True, text=True,
                              env=_env(tree))
    if baseline.returncode != 0:
        raise SystemExit(f"{target.name}: its tests fail before any mutation:\n{baseline.stdout[-2000:]}")
    subprocess.run([env_path + "/cosmic-ray", "exec", str(config), str(session)], cwd=tree, check=True,
                   env=_env(tree))
    rows = results(session)
    outcome = [(r[0], r[1], (r[2] or "").lower(), r[3]) for r in rows]
    killed = sum(1 for r in outcome if r[2] == "killed")
    survived = [r for r in outcome if r[2] == "survived"]
    incompetent = sum(1 for r in outcome if r[2] == "incompetent")
    return {"target": target, "mutants": len(rows), "killed": killed, "survived": survived,
            "incompetent": incompetent}


def _env(tree: Path) -> dict[str, str]:
    """The scratch tree's sources first on the path, so the tests import the mutated copy."""
    return {**os.environ, "PYTHONPATH": str(tree / "src"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=40, help="mutants drawn per module (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modules", nargs="*", default=[t.name for t in TARGETS],
                        choices=[t.name for t in TARGETS])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one mutant's tests may take")
    parser.add_argument("--workdir", default=str(REPO / "results" / "bench" / "mutation"))
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    tree = scratch_copy(workdir)
    summary = [run_target(tree, workdir, t, args.sample, args.seed, args.timeout)
               for t in TARGETS if t.name in args.modules]
    print(f"\nmutation score per module ({'all mutants' if not args.sample else f'{args.sample} drawn per module'},"
          f" seed {args.seed})\n")
    print("| module | file | mutants | killed | survived | incompetent | score % | 95% CI |")
    print("|---|---|---|---|---|---|---|---|")
    for s in summary:
        decided = s["killed"] + len(s["survived"])
        low, high = wilson(s["killed"], decided)
        score = 100 * s["killed"] / decided if decided else math.nan
        print(f"| {s['target'].name} | {s['target'].module} | {s['mutants']} | {s['killed']} | {len(s['survived'])}"
              f" | {s['incompetent']} | {score:.1f} | {low:.1f}–{high:.1f} |")
    for s in summary:
        for where, operator, _, diff in s["survived"]:
            print(f"\nsurvived in {s['target'].module}::{where} ({operator}):\n{diff}")


if __name__ == "__main__":
    main()

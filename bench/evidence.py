"""`make evidence`: do the memory methods beat blind on a model that can read the memory?

Runs the workflow twice on the reading model (config/model/qwen15_coder.yaml) with `blind`, `memory_search` and
`videolucy`: on the demo questions (results/evidence/demo/) and on the CPU-sized needle benchmark
(dataset=needle, results/evidence/needle/), each with its report (report=evidence: the paired comparisons of
each memory method with blind). Then prints where the time went (Snakemake's per-job benchmarks, summed per
rule, and wall time per answer run) and the numbers the README quotes: needle accuracy per run with the
paired Δ and 95% CI against blind, and the demo's L questions. The same text goes to
results/evidence/summary.md.

By default the runs are sized for 45 minutes on 2 cores (see CPU_NEEDLE below); `--full` runs everything.
Generated videos carry no faces, so anonymization is off (`anonymize=off`), and no frame store is built
(`sampling.build=[]`): no selected method reads frames. Extra Hydra overrides go to both runs:

    python bench/evidence.py                       # what `make evidence` runs
    python bench/evidence.py --overrides "dataset.needle.haystack_s=[400]" --only needle
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import polars as pl

from senri.needle import GENERATED_TASKS

ROOT = Path(__file__).resolve().parents[1]
MODEL = "qwen15_coder"
METHODS = ("blind", "memory_search", "videolucy")
#: `reason_first`: the reading model has no thinking phase, so VideoLucy's answering agent writes its Reason
#: before its letter (docs/protocol.md, VideoLucy deviations; config/method/videolucy.yaml).
BASE_OVERRIDES = f"model=[{MODEL}] report=evidence anonymize=off sampling.build=[] method.videolucy.reason_first=true"
#: The CPU sizing, measured on 2 idle cores with this model (README): model seconds per question blind ≈ 1.3,
#: videolucy ≈ 27 (demo) to 39 (needle), its memory-first prompts sharing the memory across a video's calls;
#: memory_search ≈ 110 (demo) to 140–175 (needle), because this 1.5B controller never answers before the forced
#: round and writes long queries (6 calls a question). All three methods on the demo's 6 location (L)
#: questions (15.8 min) and blind and videolucy on the four questions of each needle in a 200 and a 400 s
#: haystack (40: enough for a +27-point paired difference to clear zero; 30.8 min): 46.6 min measured, a
#: little over the 45-minute target. `--full`: all 32 demo questions, the needle dataset's defaults (400 and
#: 800 s) and memory_search on them too (≈ 5 h).
CPU_NEEDLE = "dataset.needle.haystack_s=[200,400]"
CPU_DEMO_TASKS = ("L",)
#: The demo as it was before `make demo` was cut to 5 minutes (issue #28, config/dataset/demo.yaml): seven
#: 24-s places joined by 6-s turns at 30 fps, the generator's 16 questions a video. The numbers the README quotes
#: for the demo's L questions were measured on these videos.
LARGE_DEMO = ("dataset.demo.places_per_video=7 dataset.demo.place_s=24 dataset.demo.turn_s=6 dataset.demo.fps=30 "
              "dataset.demo.questions_per_task={L:3,RR:2,OC:3,NP:2,RER:3,TER:3}")
RUNS = {"needle": "dataset=needle", "demo": f"dataset=demo {LARGE_DEMO}"}   # the needle first: it decides the question
#: Methods per run at the CPU sizing (`--full`: METHODS everywhere).
CPU_METHODS = {"demo": METHODS, "needle": ("blind", "videolucy")}
DEMO_SUBSET = "results/demo/questions.evidence.jsonl"


def snakemake(run_dir: Path, overrides: str, cores: int, targets: tuple[str, ...] = ()) -> None:
    command = ["snakemake", f"-c{cores}", "-s", str(ROOT / "Snakefile"), "--directory", str(run_dir),
               "--config", f"overrides={overrides}", *(("--", *targets) if targets else ())]
    print(f"$ {shlex.join(command)}", flush=True)
    subprocess.run(command, check=True)


def question_subset(run_dir: Path, overrides: str, cores: int, tasks: tuple[str, ...], questions: str,
                    subset: str, limit: int | None = None) -> str:
    """Generate the dataset's question file (``questions``, a workflow output), keep the questions of ``tasks``
    (the first ``limit`` of them, in file order, when given) in ``subset`` and return the override that makes
    the run ask only those (the videos stay whole)."""
    snakemake(run_dir, overrides, cores, (questions,))
    lines = (run_dir / questions).read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["task_type"] in tasks][:limit]
    (run_dir / subset).write_text("".join(line + "\n" for line in kept))
    print(f"{Path(questions).parent.name}: asking the {len(kept)} {'/'.join(tasks)} questions of {len(lines)}",
          flush=True)
    return f"dataset.questions=[{subset}]"


def run_workflow(name: str, out: Path, extra: str, cores: int, full: bool) -> float:
    started = time.perf_counter()
    methods = METHODS if full else CPU_METHODS[name]
    overrides = " ".join(x for x in (RUNS[name], f"method=[{','.join(methods)}]", BASE_OVERRIDES,
                                     "" if full or name != "needle" else CPU_NEEDLE,
                                     extra) if x)
    if name == "demo" and not full:
        overrides += " " + question_subset(out / name, overrides, cores, CPU_DEMO_TASKS,
                                           "results/demo/questions.jsonl", DEMO_SUBSET)
    snakemake(out / name, overrides, cores)
    return time.perf_counter() - started


def job_seconds(run_dir: Path) -> list[tuple[str, str, float, float]]:
    """(rule, job, wall s, CPU s) of every job with a Snakemake benchmark file (results/benchmarks/<rule>/<job>.tsv;
    the job is the rest of the path, e.g. ``videolucy/smollm2/demo_01``)."""
    jobs = []
    bench = run_dir / "results" / "benchmarks"
    for tsv in sorted(bench.rglob("*.tsv")) if bench.is_dir() else []:
        rule, *job = tsv.relative_to(bench).with_suffix("").parts
        with tsv.open() as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                jobs.append((rule, "/".join(job), float(row["s"]), float(row.get("cpu_time") or 0.0)))
    return jobs


def rule_seconds(run_dir: Path) -> dict[str, tuple[float, float]]:
    """Wall and CPU seconds per rule, summed over its jobs, from Snakemake's benchmark files (CPU seconds
    do not grow when other work shares the machine; wall seconds do)."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for rule, _, wall, cpu in job_seconds(run_dir):
        totals[rule][0] += wall
        totals[rule][1] += cpu
    return {rule: (wall, cpu) for rule, (wall, cpu) in totals.items()}


def answer_costs(run_dir: Path) -> list[dict]:
    rows = []
    for method in METHODS:
        files = sorted((run_dir / "results" / "predictions" / method / MODEL).glob("*.parquet"))
        if not files:
            continue
        preds = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
        rows.append({"run": f"{method}/{MODEL}", "questions": preds.height,
                     "model_s": float(preds["latency_s"].sum()),
                     "s_per_question": float(preds["latency_s"].sum()) / max(1, preds.height),
                     "calls_per_question": float(preds["n_llm_calls"].sum()) / max(1, preds.height),
                     "parse_failures": int((~preds["parse_ok"]).sum()), "errors": int(preds["error"].is_not_null().sum())})
    return rows


def paired(run_dir: Path, category: str) -> list[dict]:
    path = run_dir / "results" / "report" / "tables" / "paired_stats.parquet"
    if not path.is_file():
        return []
    stats = pl.read_parquet(path).filter(pl.col("category") == category)
    return stats.to_dicts()


def summarize(out: Path, walls: dict[str, float]) -> str:
    lines = ["# make evidence", ""]
    total_wall = sum(walls.values())
    lines.append(f"Wall time: {total_wall / 60:.1f} min (" + ", ".join(f"{k} {v / 60:.1f} min" for k, v in walls.items())
                 + ") on this machine.")
    for name in RUNS:
        run_dir = out / name
        if not (run_dir / "results").is_dir():
            continue
        lines += ["", f"## {name}: where the time went (job seconds per rule)", "",
                  "| rule | wall s | share | CPU s |", "|---|---|---|---|"]
        seconds = rule_seconds(run_dir)
        whole = sum(wall for wall, _ in seconds.values()) or 1.0
        for rule, (wall, cpu) in sorted(seconds.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"| {rule} | {wall:.0f} | {100 * wall / whole:.0f} % | {cpu:.0f} |")
        lines += ["", "| run | questions | model s | s / question | LLM calls / question | parse failures | errors |",
                  "|---|---|---|---|---|---|---|"]
        for r in answer_costs(run_dir):
            lines.append(f"| {r['run']} | {r['questions']} | {r['model_s']:.0f} | {r['s_per_question']:.1f} | "
                         f"{r['calls_per_question']:.1f} | {r['parse_failures']} | {r['errors']} |")
        category = "total" if name == "needle" else "l"
        lines += ["", f"## {name}: {'all needle' if name == 'needle' else 'location (L)'} questions, paired against blind", "",
                  "| treatment | n | blind correct | treatment correct | Δ points | 95% CI | McNemar p | CI above 0 |",
                  "|---|---|---|---|---|---|---|---|"]
        for s in paired(run_dir, category):
            lines.append(f"| {s['treatment']} | {s['n']} | {s['baseline_correct']} | {s['treatment_correct']} | "
                         f"{s['delta_pp']:+.1f} | [{s['ci_low_pp']:+.1f}, {s['ci_high_pp']:+.1f}] | "
                         f"{s['mcnemar_p']:.2g} | {'yes' if s['ci_low_pp'] > 0 else 'no'} |")
        if name == "needle":
            by_task = [s for task in GENERATED_TASKS for s in paired(run_dir, task.lower())]
            if by_task:
                lines += ["", "By question kind (L sign, RER what I did, OC board count, TER what passed by):", "",
                          "| kind | treatment | n | blind | treatment | Δ [95% CI] |", "|---|---|---|---|---|---|"]
                for s in by_task:
                    lines.append(f"| {s['category'].upper()} | {s['treatment']} | {s['n']} | {s['baseline_correct']} | "
                                 f"{s['treatment_correct']} | {s['delta_pp']:+.1f} [{s['ci_low_pp']:+.1f}, "
                                 f"{s['ci_high_pp']:+.1f}] |")
        if name == "demo":
            lines += ["", "All demo questions:", "", "| treatment | n | blind | treatment | Δ [95% CI] |", "|---|---|---|---|---|"]
            for s in paired(run_dir, "total"):
                lines.append(f"| {s['treatment']} | {s['n']} | {s['baseline_correct']} | {s['treatment_correct']} | "
                             f"{s['delta_pp']:+.1f} [{s['ci_low_pp']:+.1f}, {s['ci_high_pp']:+.1f}] |")
        needle_table = run_dir / "results" / "report" / "tables" / "needle.csv"
        if needle_table.is_file():
            lines += ["", "Needle accuracy by haystack length and position (correct/n):", ""]
            table = pl.read_csv(needle_table)
            for (axis,), part in table.group_by("axis", maintain_order=True):
                for (run,), rows in part.with_columns(run=pl.col("method") + "/" + pl.col("model")).group_by(
                        "run", maintain_order=True):
                    cells = ", ".join(f"{v:g}: {c}/{n}" for v, c, n in zip(rows["value"], rows["correct"], rows["n"]))
                    lines.append(f"- {axis}, {run}: {cells}")
        lines.append(f"\nReport: {run_dir / 'results' / 'report.html'}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "evidence")
    parser.add_argument("--overrides", default="", help="extra Hydra overrides for both runs")
    parser.add_argument("--only", choices=sorted(RUNS), action="append", help="run only this part (repeatable)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--full", action="store_true", help="all demo questions and the needle dataset's defaults")
    parser.add_argument("--summary-only", action="store_true", help="summarize finished runs, run nothing")
    args = parser.parse_args()
    walls: dict[str, float] = {}
    if not args.summary_only:
        for name in args.only or list(RUNS):
            walls[name] = run_workflow(name, args.out, args.overrides, args.cores, args.full)
    text = summarize(args.out, walls)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()

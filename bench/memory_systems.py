"""The memory systems on the reading model: do their workflows beat blind on the needle questions, and at what cost?

Runs the workflow once on the CPU needle benchmark (dataset=needle) with the reading model
(config/model/qwen15_coder.yaml) and four methods side by side, on the same questions:

- ``blind``: question and options only (the baseline);
- ``memory_search``: the original-workflow controller over senri's caption memory (``memory_system=captions``);
- ``worldmm``: WorldMM's original workflow (W-L1..L4) over the WorldMM store the pipeline builds
  (multiscale episodic, semantic triples; no visual memory without an image-text embedder);
- ``magic_video``: MAGIC-Video's original workflow (G-L1..L3) over its graph store.

Every store's builder roles run on the same reading model (``memory_system.*.models``), with the perception
captioner writing the base captions. Then it prints, per run: accuracy, the paired Δ against blind with its 95 %
bootstrap interval (questions resampled within videos) and McNemar's exact p, model seconds and LLM calls per
question, and the one-off cost of building each video's store (Snakemake's job benchmarks). The same text goes to
``<out>/summary.md``.

Sizing: the default asks the location (L) questions of one 200-s haystack (5 questions; about 30 min on 2 idle
cores — memory_search on this model costs 140–175 s a question, see bench/evidence.py), which shows the costs
but cannot separate the systems from blind; ``--full`` asks every question of the needle dataset's defaults.

    python bench/memory_systems.py                 # 200-s haystack, L questions
    python bench/memory_systems.py --tasks L RER --haystack 200 400
    python bench/memory_systems.py --full
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evidence import MODEL, job_seconds, question_subset, snakemake  # noqa: E402  (the same runner and readers)

from senri.stats import compare  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("blind", "memory_search", "worldmm", "magic_video")
BASELINE = "blind"
SUBSET = "results/needle/questions.bench.jsonl"
#: The stores' builder roles default to the reading model (config/memory_system/{worldmm,magic_video}.yaml).
BASE_OVERRIDES = f"dataset=needle model=[{MODEL}] anonymize=off sampling.build=[] memory_system=[captions]"


def predictions(run_dir: Path, method: str) -> pl.DataFrame | None:
    files = sorted((run_dir / "results" / "predictions" / method / MODEL).glob("*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed") if files else None


def summarize(run_dir: Path, methods: tuple[str, ...], wall_s: float | None) -> str:
    lines = ["# Memory systems on the reading model (needle)", ""]
    if wall_s is not None:
        lines.append(f"Wall time: {wall_s / 60:.1f} min on this machine.\n")
    base = predictions(run_dir, BASELINE)
    lines += ["| run | memory | n | correct | accuracy | Δ vs blind [95% CI] | McNemar p | model s / question | "
              "LLM calls / question | errors |", "|---|---|---|---|---|---|---|---|---|---|"]
    for method in methods:
        preds = predictions(run_dir, method)
        if preds is None:
            lines.append(f"| {method} | | 0 | | | not run | | | | |")
            continue
        n = preds.height
        correct = int(preds["correct"].sum())
        paired = "—"
        p = ""
        if base is not None and method != BASELINE:
            joined = base.select("qid", "video_id", base_ok="correct").join(
                preds.select("qid", ok="correct"), on="qid", how="inner").sort("qid")
            c = compare(joined["base_ok"].to_list(), joined["ok"].to_list(), joined["video_id"].to_list())
            paired = f"{c.delta_pp:+.1f} [{c.ci_low_pp:+.1f}, {c.ci_high_pp:+.1f}] (n {c.n})"
            p = f"{c.mcnemar_p:.2g}"
        memory = preds["memory"][0] if "memory" in preds.columns else ""
        lines.append(f"| {method} | {memory or ''} | {n} | {correct} | {100 * correct / max(1, n):.1f} % | {paired} | {p} | "
                     f"{float(preds['latency_s'].sum()) / max(1, n):.1f} | "
                     f"{float(preds['n_llm_calls'].sum()) / max(1, n):.1f} | {int(preds['error'].is_not_null().sum())} |")
    builds = [(job, wall, cpu) for rule, job, wall, cpu in job_seconds(run_dir) if rule == "memory_system"]
    captions = [(job, wall, cpu) for rule, job, wall, cpu in job_seconds(run_dir) if rule == "memory"]
    lines += ["", "Building the memories (one job per system × video; wall / CPU s):", ""]
    lines += [f"- caption memory {job}: {wall:.0f} / {cpu:.0f}" for job, wall, cpu in captions]
    lines += [f"- {job}: {wall:.0f} / {cpu:.0f}" for job, wall, cpu in builds]
    lines.append(f"\nReport: {run_dir / 'results' / 'report.html'}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench_memory_systems")
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--tasks", nargs="+", default=["L"], help="needle question kinds to ask (L RER OC TER)")
    parser.add_argument("--haystack", nargs="+", type=int, default=[200], help="haystack lengths in seconds")
    parser.add_argument("--full", action="store_true", help="every question of the needle dataset's defaults")
    parser.add_argument("--overrides", default="", help="extra Hydra overrides")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--summary-only", action="store_true", help="summarize a finished run, run nothing")
    args = parser.parse_args()
    methods = tuple(args.methods)
    overrides = " ".join(x for x in (BASE_OVERRIDES, f"method=[{','.join(methods)}]",
                                     "" if args.full else f"dataset.needle.haystack_s=[{','.join(map(str, args.haystack))}]",
                                     args.overrides) if x)
    wall = None
    if not args.summary_only:
        import time

        started = time.perf_counter()
        if not args.full:
            # the haystacks stay whole, so every store is built over the full video
            overrides += " " + question_subset(args.out, overrides, args.cores, tuple(args.tasks),
                                               "results/needle/questions.jsonl", SUBSET)
        snakemake(args.out, overrides, args.cores)
        wall = time.perf_counter() - started
    text = summarize(args.out, methods, wall)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()

"""The memory systems on the reading model: do their workflows beat blind on the needle questions, and at what cost?

Runs the workflow once on the CPU needle benchmark (dataset=needle) with the reading model
(config/model/qwen15_coder.yaml) and four methods side by side, on the same questions:

- ``blind``: question and options only (the baseline);
- ``memory_search``: the original-workflow controller over senri's caption memory (``memory_system=captions``);
- ``worldmm``: WorldMM's original workflow (W-L1..L4) over the WorldMM store the pipeline builds
  (multiscale episodic, semantic triples; visual memory by time range only without an image-text embedder);
- ``magic_video``: MAGIC-Video's original workflow (G-L1..L3) over its graph store;
- ``egagent``: EG-Agent's original workflow (E-L1..L8) over its entity-graph store (no transcript: the needle
  videos have no speech, so only the fused-caption graph is built; no frame vectors without an embedder).

Every store's builder roles run on the same reading model (``memory_system.*.models``), with the perception
captioner writing the base captions. Then it prints, per run: accuracy, the paired Δ against blind with its 95 %
bootstrap interval (questions resampled within videos) and McNemar's exact p, model seconds and LLM calls per
question, and the one-off cost of building each video's store (Snakemake's job benchmarks). The same text goes to
``<out>/summary.md``.

Sizing: the default asks the location (L) questions of one 200-s haystack (5 questions; about 30 min on 2 idle
cores — memory_search on this model costs 140–175 s a question, see bench/evidence.py), which shows the costs
but cannot separate the systems from blind; ``--full`` asks every question of the needle dataset's defaults.

Besides accuracy and cost it prints what each method did (controller rounds, searches, memories returned and QA
calls per question, questions answered without retrieval, failed search calls, bypasses, forced answers, context
trims, the store's builder losses) and each store's builder calls and tokens per role. ``--cost-arm release`` first
runs an arm with the cost savings turned off (every WorldMM W8 call up front, cut builder replies repaired instead
of resent: :data:`RELEASE_COST`; any other value is taken as the arm's overrides), then the defaults over a copy of
its results, and prints both side by side with how many answers agree.

    python bench/memory_systems.py                 # 200-s haystack, L questions
    python bench/memory_systems.py --tasks L RER --haystack 200 400
    python bench/memory_systems.py --haystack 100 --tasks L --cost-arm release
    python bench/memory_systems.py --haystack 60 --tasks L --questions 2 --methods blind worldmm --cost-arm release
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
METHODS = ("blind", "memory_search", "worldmm", "magic_video", "egagent")
BASELINE = "blind"
SUBSET = "results/needle/questions.bench.jsonl"
#: The stores' builder roles default to the reading model (config/memory_system/{worldmm,magic_video}.yaml). The
#: two systems are selected (so a cost arm can override their settings) and memory_search is pinned to the captions.
BASE_OVERRIDES = (f"dataset=needle model=[{MODEL}] anonymize=off sampling.build=[] "
                  "memory_system=[captions,worldmm,magic_video,egagent]")
#: memory_search reads the caption memory (only when it runs: the override would otherwise add a bare method entry)
MEMORY_SEARCH_PIN = "+method.memory_search.memory_system=captions"
#: The cost savings of issue 34 turned off: every W8 call up front and cut builder replies repaired (the arm
#: ``--cost-arm release`` runs), so they are measured side by side with the defaults on the same questions.
RELEASE_COST = ("memory_system.worldmm.cut_reply_resends=0 "
                "memory_system.worldmm.episodic.put_off_single_passage_filter=false")


def predictions(run_dir: Path, method: str) -> pl.DataFrame | None:
    files = sorted((run_dir / "results" / "predictions" / method / MODEL).glob("*.parquet"))
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed") if files else None


def _per_question(preds: pl.DataFrame, column: str) -> float:
    return float(preds[column].sum()) / max(1, preds.height) if column in preds.columns else 0.0


def run_rows(run_dir: Path, methods: tuple[str, ...]) -> list[dict]:
    """Per method: accuracy, the paired Δ against blind, cost per question and what the method did."""
    base = predictions(run_dir, BASELINE)
    rows = []
    for method in methods:
        preds = predictions(run_dir, method)
        if preds is None:
            rows.append({"run": method, "n": 0})
            continue
        row = {"run": method, "memory": preds["memory"][0] if "memory" in preds.columns else "", "n": preds.height,
               "correct": int(preds["correct"].sum()), "errors": int(preds["error"].is_not_null().sum()),
               "preds": dict(zip(preds["qid"], preds["pred"])), "delta": "—", "p": ""}
        if base is not None and method != BASELINE:
            joined = base.select("qid", "video_id", base_ok="correct").join(
                preds.select("qid", ok="correct"), on="qid", how="inner").sort("qid")
            c = compare(joined["base_ok"].to_list(), joined["ok"].to_list(), joined["video_id"].to_list())
            row["delta"] = f"{c.delta_pp:+.1f} [{c.ci_low_pp:+.1f}, {c.ci_high_pp:+.1f}] (n {c.n})"
            row["p"] = f"{c.mcnemar_p:.2g}"
        for name, column in (("model_s", "latency_s"), ("calls", "n_llm_calls"), ("prompt_tokens", "prompt_tokens"),
                             ("rounds", "rounds"), ("searches", "searches"), ("memories", "memories_returned"),
                             ("qa_calls", "qa_calls")):
            row[name] = _per_question(preds, column)
        for name in ("answered_without_retrieval", "failed_search_calls", "bypasses", "forced_answers",
                     "context_trims"):
            row[name] = int(preds[name].sum()) if name in preds.columns else 0
        row["builder_losses"] = int(preds["builder_losses"].max() or 0) if "builder_losses" in preds.columns else 0
        rows.append(row)
    return rows


def store_records(run_dir: Path) -> list[tuple[str, dict]]:
    """(system/captioner/video, the store's config.yaml record) of every store the run built."""
    import yaml

    root = run_dir / "results" / "memory_system"
    return [(str(path.parent.relative_to(root)), yaml.safe_load(path.read_text()) or {})
            for path in sorted(root.glob("*/*/*/config.yaml"))] if root.is_dir() else []


def build_lines(run_dir: Path) -> list[str]:
    """Each store's one-off cost: the job's wall / CPU seconds and its builder calls and tokens per role."""
    seconds = {job: (wall, cpu) for rule, job, wall, cpu in job_seconds(run_dir) if rule == "memory_system"}
    lines = []
    for job, record in store_records(run_dir):
        wall, cpu = seconds.get(job, (float("nan"), float("nan")))
        roles = record.get("llm") or {}
        builder = record.get("builder") or {}
        if roles:  # WorldMM: per role calls, failures, repairs and tokens
            calls = "; ".join(f"{role} {s.get('calls', 0)} calls ({s.get('malformed', 0)} unreadable, "
                              f"{s.get('prompt_tokens', 0) + s.get('completion_tokens', 0)} tokens)"
                              for role, s in sorted(roles.items()))
        else:  # MAGIC-Video: its one builder role
            calls = ", ".join(f"{k} {v}" for k, v in builder.items())
        lines.append(f"- {job}: {wall:.0f} s wall / {cpu:.0f} s CPU; {calls or 'no builder calls'}")
    return lines


def summarize(run_dir: Path, methods: tuple[str, ...], wall_s: float | None) -> str:
    lines = ["# Memory systems on the reading model (needle)", ""]
    if wall_s is not None:
        lines.append(f"Wall time: {wall_s / 60:.1f} min on this machine.\n")
    lines += ["| run | memory | n | correct | accuracy | Δ vs blind [95% CI] | McNemar p | model s / q | LLM calls / q | "
              "prompt tokens / q | errors |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = run_rows(run_dir, methods)
    for r in rows:
        if not r["n"]:
            lines.append(f"| {r['run']} | | 0 | | | not run | | | | | |")
            continue
        lines.append(f"| {r['run']} | {r['memory']} | {r['n']} | {r['correct']} | {100 * r['correct'] / r['n']:.1f} % | "
                     f"{r['delta']} | {r['p']} | {r['model_s']:.1f} | {r['calls']:.1f} | {r['prompt_tokens']:.0f} | "
                     f"{r['errors']} |")
    lines += ["", "What each method did (per question; the last columns count questions or events in all):", "",
              "| run | rounds | searches | memories returned | QA calls | answered without retrieval | "
              "failed search calls | bypasses | forced answers | context trims | builder losses (store) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['rounds']:.1f} | {r['searches']:.1f} | {r['memories']:.1f} | {r['qa_calls']:.1f} | "
              f"{r['answered_without_retrieval']} | {r['failed_search_calls']} | {r['bypasses']} | {r['forced_answers']} | "
              f"{r['context_trims']} | {r['builder_losses']} |" for r in rows if r["n"]]
    captions = [(job, wall, cpu) for rule, job, wall, cpu in job_seconds(run_dir) if rule == "memory"]
    lines += ["", "Building the memories (one job per system × video):", ""]
    lines += [f"- caption memory {job}: {wall:.0f} s wall / {cpu:.0f} s CPU" for job, wall, cpu in captions]
    lines += build_lines(run_dir)
    lines.append(f"\nReport: {run_dir / 'results' / 'report.html'}")
    return "\n".join(lines) + "\n"


def agreement_lines(before: list[dict], after: list[dict], label_before: str, label_after: str) -> list[str]:
    """Per method: the two arms' accuracy and cost per question side by side, and how many answers agree."""
    lines = [f"| run | correct ({label_before} → {label_after}) | same answers | LLM calls / q | prompt tokens / q | "
             "model s / q |", "|---|---|---|---|---|---|"]
    arms = {r["run"]: r for r in before if r["n"]}
    for r in after:
        b = arms.get(r["run"])
        if not r["n"] or b is None:
            continue
        same = sum(b["preds"].get(q) == p for q, p in r["preds"].items())
        lines.append(f"| {r['run']} | {b['correct']} → {r['correct']} | {same} / {r['n']} | {b['calls']:.1f} → "
                     f"{r['calls']:.1f} | {b['prompt_tokens']:.0f} → {r['prompt_tokens']:.0f} | {b['model_s']:.1f} → "
                     f"{r['model_s']:.1f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench_memory_systems")
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--tasks", nargs="+", default=["L"], help="needle question kinds to ask (L RER OC TER)")
    parser.add_argument("--haystack", nargs="+", type=int, default=[200], help="haystack lengths in seconds")
    parser.add_argument("--full", action="store_true", help="every question of the needle dataset's defaults")
    parser.add_argument("--questions", type=int, default=None,
                        help="ask only the first N questions of those kinds (the stores are still built whole)")
    parser.add_argument("--overrides", default="", help="extra Hydra overrides")
    parser.add_argument("--cost-arm", default="",
                        help="overrides of a first arm run before the defaults (e.g. a cost-saving option turned off): "
                             "it runs in <out>/arm, the defaults in <out> over a copy of it (its stores and response "
                             "caches), and both are printed side by side with how many answers agree")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--summary-only", action="store_true", help="summarize a finished run, run nothing")
    args = parser.parse_args()
    methods = tuple(args.methods)
    overrides = " ".join(x for x in (BASE_OVERRIDES, MEMORY_SEARCH_PIN if "memory_search" in methods else "",
                                     f"method=[{','.join(methods)}]",
                                     "" if args.full else f"dataset.needle.haystack_s=[{','.join(map(str, args.haystack))}]",
                                     args.overrides) if x)
    cost_arm = RELEASE_COST if args.cost_arm == "release" else args.cost_arm
    arm = args.out / "arm" if cost_arm else None
    walls: dict[str, float] = {}
    if not args.summary_only:
        import shutil
        import time

        if not args.full:
            # the haystacks stay whole, so every store is built over the full video
            overrides += " " + question_subset(arm or args.out, overrides, args.cores, tuple(args.tasks),
                                               "results/needle/questions.jsonl", SUBSET, args.questions)
        if arm is not None:
            started = time.perf_counter()
            snakemake(arm, f"{overrides} {cost_arm}", args.cores)
            walls["arm"] = time.perf_counter() - started
            shutil.copytree(arm / "results", args.out / "results", dirs_exist_ok=True, symlinks=True)
            # Snakemake's records of how each output was made: without them a changed config reruns nothing
            shutil.copytree(arm / ".snakemake" / "metadata", args.out / ".snakemake" / "metadata", dirs_exist_ok=True)
        started = time.perf_counter()
        snakemake(args.out, overrides, args.cores)
        walls["defaults"] = time.perf_counter() - started
    text = summarize(args.out, methods, walls.get("defaults"))
    if arm is not None and (arm / "results").is_dir():
        text += "\n".join(["", f"## The defaults against the arm `{cost_arm}` (same questions)", "",
                           f"The arm ran first ({walls.get('arm', float('nan')) / 60:.1f} min); the defaults ran over "
                           f"a copy of its results, so calls both make are answered from the response cache there "
                           f"and cost it no model time (the model seconds are those recorded when each call was "
                           f"first made).", "",
                           *agreement_lines(run_rows(arm, methods), run_rows(args.out, methods), "arm", "defaults"),
                           "", "The arm's stores:", "", *build_lines(arm), ""])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()

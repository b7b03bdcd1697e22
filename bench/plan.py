"""Planning and reporting at benchmark scale (issue 53): ``snakemake -n`` over N tiny SENRI-format videos, and the
aggregate and report stages over a fabricated benchmark's predictions.

Planning reads the question files (for the video ids), checks that each video file exists and asks each job's
input functions for its files and params; it never opens a video (probing is a job). So the benchmark is one
1-s ffmpeg clip, linked under N video ids, with ``--questions`` SENRI-format questions per video. For each N the
bench times ``snakemake -n -c2`` (the whole command, start-up included) for two runs, printed side by side with
the job count of the same DAG:

* ``default``: the shipped defaults (``config/config.yaml``: five methods on SmolLM2) on the bench's videos;
* ``table3``: ``experiment=table3 model=[qwen25vl7b_vllm]`` on them (stores of WorldMM and MAGIC-Video per video).

``ms/job`` is the whole command's CPU time over its jobs (CPU, not wall: on a shared machine the wall clock
measures the neighbours); ``marginal`` is the CPU time per job added between two sizes (what one more video
costs, start-up left out).

``--report`` then fabricates predictions of ``--runs`` runs (the paper's 14 method variants' size) for every
question of the largest N (900 videos × 3 questions = 2,700 questions × 14 runs = 37,800 rows), each with a
prompt-and-reply trace as the prompted methods write, and times the two rules' commands (``senri aggregate``,
``senri report``: tables, figures and the question browser) as the rules run them, then opens the browser's list
in headless Chromium when it is installed (a page; sorted; every row at once, as it was drawn before paging).

    python bench/plan.py                                   # plan N = 10, 100, 900
    python bench/plan.py --videos 900 --settings --report  # only the report over 900 videos
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

TASKS = ("L", "RR", "OC", "NP", "RER", "TER")
SETTINGS = {"default": "", "table3": "experiment=table3 model=[qwen25vl7b_vllm]"}


def make_benchmark(folder: Path, n_videos: int, questions_per_video: int) -> dict[str, Path]:
    """``folder/videos/v0001.mp4`` … (links to one 1-s clip) and ``folder/questions.json``; made once per N."""
    videos, questions = folder / "videos", folder / "questions.json"
    if questions.is_file() and len(list(videos.glob("*.mp4"))) == n_videos:
        return {"videos": videos, "questions": questions}
    shutil.rmtree(folder, ignore_errors=True)
    videos.mkdir(parents=True)
    clip = folder / "clip.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=320x180:r=30:d=1",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "veryfast", str(clip)],
                   check=True, stdin=subprocess.DEVNULL)
    records = []
    for v in range(1, n_videos + 1):
        video_id = f"v{v:04d}"
        (videos / f"{video_id}.mp4").symlink_to(clip.resolve())
        for q in range(questions_per_video):
            records.append({"video_id": video_id, "qid": f"{video_id}_q{q}", "task_type": TASKS[q % len(TASKS)],
                            "question": f"Which sign did I pass {q + 1} time(s)?",
                            "options": ["a red sign", "a blue sign", "a green sign", "a white sign"],
                            "answer": "ABCD"[(v + q) % 4], "evidence_start_s": 0.0, "evidence_end_s": 1.0})
    questions.write_text(json.dumps(records))
    return {"videos": videos, "questions": questions}


#: Snakemake's own floor, planned with the same command for as many jobs as the run beside it: ``one-rule`` is one
#: trivial rule (an output, a log, a constant param), ``answer-shaped`` one rule with every directive senri's
#: answer rule has (two named outputs, an unpacked input function, three params functions and a string, log,
#: benchmark, threads and two resources from functions, a shell line of the same fields) whose functions return
#: constants at once. What senri's own plan costs above the second is senri's; the rest is Snakemake's.
FLOOR_SNAKEFILES = {
    "one-rule": """
IDS = [f"j{i:05d}" for i in range(int(config["jobs"]))]

rule all:
    input: expand("out/{v}.txt", v=IDS)

rule one:
    output: "out/{v}.txt"
    params: config="x"
    log: "logs/{v}.log"
    shell: "echo {params.config:q} > {output} 2> {log}"
""",
    "answer-shaped": """
IDS = [f"j{i:05d}" for i in range(int(config["jobs"]))]
SLICE = '{"method": {"name": "blind", "frames": 0, "prompt": "config/prompts/blind.txt"}, "model": {"name": '
SLICE += '"smollm2", "backend": "llama_cpp", "n_ctx": 8192, "temperature": 0.0, "seed": 0}, "scoring": "strict"}'

def inputs(wildcards):
    return {"questions": "in/questions.parquet", "video": "in/video.parquet"}

def config_param(wildcards):
    return SLICE

def code_param(wildcards):
    return "4f1c2d9e0b7a"

def media(wildcards, input):
    return f"--video {input.video}"

def threads_of(wildcards):
    return 2

def mem_of(wildcards, threads):
    return 2000

def gpu_of(wildcards):
    return 0

rule all:
    input: expand("out/{v}.parquet", v=IDS)

rule answer:
    input: unpack(inputs)
    output: table="out/{v}.parquet", config="out/{v}.config.yaml"
    params: config=config_param, code=code_param, media=media, cache="cache/{v}.sqlite"
    log: "logs/{v}.log"
    benchmark: "benchmarks/{v}.tsv"
    threads: threads_of
    resources: mem_mb=mem_of, runtime=240, gpu=gpu_of
    shell:
        "python -m senri answer --config {params.config:q} --questions {input.questions}"
        " --video-info {input.video} --method blind --model smollm2 --video-id {wildcards.v}"
        " {params.media} --cache {params.cache} --out {output.table} > {log} 2>&1"
""",
}


def plan_floor(workdir: Path, shape: str, jobs: int) -> tuple[int, float, float]:
    """(jobs, wall s, CPU s) of the same ``snakemake -n`` command over a ``FLOOR_SNAKEFILES`` workflow of ``jobs``
    jobs (+ ``all``)."""
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "in").mkdir(parents=True)
    for name in ("questions.parquet", "video.parquet"):
        (workdir / "in" / name).write_bytes(b"")
    (workdir / "Snakefile").write_text(FLOOR_SNAKEFILES[shape])
    return run_dry(workdir, workdir / "Snakefile", ["--config", f"jobs={jobs - 1}"])


def dataset_overrides(bench: dict[str, Path]) -> str:
    return f"dataset=senri dataset.questions=[{bench['questions']}] dataset.videos_dir={bench['videos']}"


def child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def plan(workdir: Path, overrides: str) -> tuple[int, float, float]:
    """(jobs, wall seconds, CPU seconds) of ``snakemake -n`` in a fresh ``workdir`` (nothing built: every job
    planned). Planning is one process on one core: its CPU time is its wall time on an idle machine, and the
    number to compare on a shared one."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    return run_dry(workdir, ROOT / "Snakefile", ["--config", f"overrides={overrides}"])


def run_dry(workdir: Path, snakefile: Path, config_args: list[str]) -> tuple[int, float, float]:
    """(jobs, wall s, CPU s) of ``snakemake -n -c2 --quiet rules`` of ``snakefile`` in ``workdir``."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    cpu = child_cpu_s()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(snakefile), "-d", str(workdir),
                           "-n", "-c2", "--quiet", "rules", *config_args],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    seconds, cpu = time.perf_counter() - start, child_cpu_s() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"snakemake -n failed ({config_args}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    total = re.search(r"^total\s+(\d+)$", proc.stdout + proc.stderr, re.MULTILINE)
    if total is None:
        raise SystemExit(f"no job count in snakemake's output:\n{proc.stdout[-3000:]}")
    return int(total.group(1)), seconds, cpu


#: The paper-sized run set of bench/serving_plan.py: 14 method variants (``random`` under ``none``).
REPORT_METHODS = ["random", "blind", "blind_letter", "blind_debiased", "direct", "memory_search", "senri_agent",
                  "senri_agent_no_pv", "senri_agent_no_tg", "senri_agent_no_wm", "videoarm", "videoarm_text_only",
                  "videolucy", "videolucy_release"]


def fabricate_run_set(folder: Path, bench: dict[str, Path], runs: int) -> dict:
    """``folder/results``: the question and videos tables the upstream stages would write, and ``runs`` runs'
    prediction files (one per run and video, as the answer rule writes them) with their config sidecars. Each
    prediction carries a one-call trace as a prompted method writes it; letters cycle so runs differ."""
    import polars as pl

    from senri import config as cfgmod
    from senri.ingest import ingest
    from senri.probe import probe
    from senri.records import Prediction, Question, VideoInfo, to_frame, write_table

    results = folder / "results"
    shutil.rmtree(results, ignore_errors=True)
    cfg = cfgmod.compose(f"{dataset_overrides(bench)} method=[{','.join(REPORT_METHODS)}] model=[qwen25vl7b_vllm]")
    pairs = cfgmod.runs(cfg)[:runs]
    questions = ingest([bench["questions"]], bench["videos"], [".mp4"])
    write_table(questions, results / "questions.parquet", Question)
    clip = probe(bench["videos"] / f"{questions['video_id'][0]}.mp4", questions["video_id"][0])
    video_ids = questions["video_id"].unique(maintain_order=True).to_list()
    videos = pl.DataFrame([{**clip.__dict__, "video_id": v, "path": str(bench["videos"] / f"{v}.mp4")}
                           for v in video_ids])
    write_table(videos, results / "videos.parquet", VideoInfo)
    by_video = questions.partition_by("video_id", as_dict=True, maintain_order=True)
    paths = []
    for k, (method, model) in enumerate(pairs):
        stage = cfgmod.stage_slice(cfg, "answer", method=method, model=model)
        sidecar = None  # one run's sidecars are one text: written once, copied
        for (video_id,), rows in by_video.items():
            preds = []
            for j, q in enumerate(rows.iter_rows(named=True)):
                letter = "ABCD"[(k + j + len(video_id)) % 4]
                trace = {"answer_format": "letter", "parse_rule": "first letter", "calls": [
                    {"call": "answer", "attempts": 1, "prompt": f"{q['question']}\nA. …\nB. …\nC. …\nD. …",
                     "reply": letter, "prompt_tokens": 120, "completion_tokens": 1, "seconds": 0.4}]}
                preds.append(Prediction(video_id, q["qid"], q["task_type"], method, model, letter, q["answer"],
                                        letter == q["answer"], True, letter, 1, 0, 120, 1, 0.4, None,
                                        json.dumps(trace)))
            path = results / "predictions" / method / model / f"{video_id}.parquet"
            write_table(to_frame(preds, Prediction), path, Prediction)
            if sidecar is None:
                sidecar = cfgmod.write_sidecar(path, "answer", stage)
            else:
                shutil.copyfile(sidecar, cfgmod.sidecar_path(path))
            paths.append(str(path.relative_to(folder)))
    return {"cfg": cfg, "predictions": paths, "runs": len(pairs), "questions": questions.height}


def report_bench(folder: Path, bench: dict[str, Path], runs: int) -> None:
    """Time the aggregate and report rules' commands over a fabricated run set of the benchmark's questions."""
    from senri import config as cfgmod

    work = folder / "report-work"
    start = time.perf_counter()
    made = fabricate_run_set(work, bench, runs)
    print(f"\nreport over {made['questions']:,} questions × {made['runs']} runs = "
          f"{made['questions'] * made['runs']:,} prediction rows in {len(made['predictions']):,} files "
          f"(fabricated in {time.perf_counter() - start:.0f} s)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    commands = {
        "aggregate": ["aggregate", "--config", cfgmod.canonical_json(cfgmod.stage_slice(made["cfg"], "aggregate")),
                      "--predictions", *made["predictions"], "--questions", "results/questions.parquet",
                      "--out", "results/tables"],
        "report": ["report", "--config", cfgmod.canonical_json(cfgmod.stage_slice(made["cfg"], "report")),
                   "--predictions", *made["predictions"], "--questions", "results/questions.parquet",
                   "--videos", "results/videos.parquet", "--out", "results"],
    }
    for name, args in commands.items():
        cpu, start = child_cpu_s(), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "senri", *args], cwd=work, env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        seconds, cpu = time.perf_counter() - start, child_cpu_s() - cpu
        if proc.returncode != 0:
            raise SystemExit(f"senri {name} failed:\n{proc.stderr[-3000:]}")
        print(f"  {name:<10} wall {seconds:6.1f} s, CPU {cpu:6.1f} s", flush=True)
    browser = work / "results" / "report" / "questions"
    sizes = {p.name: p.stat().st_size for p in (browser / "index.html", browser / "grid.html", browser / "rows.js")}
    pages = sum(1 for _ in (browser / "q").glob("*.html"))
    print("  browser: " + ", ".join(f"{name} {size / 2**20:.1f} MiB" for name, size in sizes.items())
          + f", {pages:,} question pages")
    browser_open(browser / "index.html", folder / "chromium-profile")


def browser_open(index: Path, profile: Path) -> None:
    """Open the list in headless Chromium (as tests/test_browser.py does): a page of rows, the same sorted by
    seconds, and every row at once (``rows=``: what the list drew before it paged), each timed with the rows
    the page holds once its script ran."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("  (no chromium on PATH: the list's opening time is not measured)")
        return
    for label, query in (("a page", ""), ("a page, sorted by seconds", "?sort=seconds&order=desc"),
                         ("every row at once", "?rows=100000")):
        cpu, start = child_cpu_s(), time.perf_counter()
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", index.as_uri() + query],
            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        seconds, cpu = time.perf_counter() - start, child_cpu_s() - cpu
        rows = len(re.findall(r"<tr data-i=", proc.stdout))
        print(f"  list, {label:<26} wall {seconds:6.1f} s, CPU {cpu:6.1f} s, {rows:,} table rows", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, nargs="+", default=[10, 100, 900])
    parser.add_argument("--questions", type=int, default=3, help="questions per video")
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=list(SETTINGS),
                        help="runs to plan (none: only --report)")
    parser.add_argument("--no-floor", action="store_true", help="skip Snakemake's floor rows")
    parser.add_argument("--report", action="store_true", help="also time aggregate and report at the largest N")
    parser.add_argument("--runs", type=int, default=14, help="runs fabricated for --report")
    parser.add_argument("--dir", type=Path, default=ROOT / "results" / "bench" / "plan")
    args = parser.parse_args(argv)
    print(f"snakemake -n -c2 over N tiny videos ({args.questions} questions each); one row per N and run "
          "(CPU: the planner's user + system time; ms/job and marginal from it), then Snakemake's own floor for the "
          "first run's job count (FLOOR_SNAKEFILES) and the first run's CPU over it")
    print(f"{'N':>5} {'run':<20} {'jobs':>6} {'wall s':>7} {'CPU s':>6} {'ms/job':>7} {'marginal ms/job':>15}"
          f" {'× floor':>7}")
    previous: dict[str, tuple[int, float]] = {}
    for n in sorted(args.videos):
        bench = make_benchmark(args.dir / f"n{n}", n, args.questions)
        measured = []
        for setting in args.settings:
            measured.append((setting, *plan(args.dir / f"n{n}" / f"work-{setting}",
                                            f"{dataset_overrides(bench)} {SETTINGS[setting]}".strip())))
        if measured and not args.no_floor:
            for shape in FLOOR_SNAKEFILES:
                measured.append((f"floor: {shape}", *plan_floor(args.dir / f"n{n}" / f"floor-{shape}", shape,
                                                                measured[0][1])))
        floor = next((cpu for name, _, _, cpu in measured if name == "floor: answer-shaped"), None)
        for name, jobs, seconds, cpu in measured:
            before = previous.get(name)
            marginal = (f"{1000 * (cpu - before[1]) / (jobs - before[0]):15.2f}" if before and jobs > before[0]
                        else f"{'':>15}")
            ratio = f"{cpu / floor:7.2f}" if floor else f"{'':>7}"
            print(f"{n:>5} {name:<20} {jobs:>6} {seconds:>7.1f} {cpu:>6.1f} {1000 * cpu / jobs:>7.2f} {marginal}"
                  f" {ratio}", flush=True)
            previous[name] = (jobs, cpu)
    if args.report:
        n = max(args.videos)
        report_bench(args.dir / f"n{n}", make_benchmark(args.dir / f"n{n}", n, args.questions), args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python bench/demo.py`: run `make demo` from an empty results folder and print where the time went, per rule.

`make demo` is `snakemake -c2` on the embedded defaults (config/config.yaml, config/dataset/demo.yaml); its
target is 5 minutes on 2 idle cores (issue #28). This runs the same command in a fresh folder and prints the
whole run's wall time and CPU seconds (Snakemake and every job, from the operating system's accounting of the
finished process tree), then per rule the jobs, their wall and CPU seconds summed from Snakemake's benchmark
files (results/benchmarks/) and the longest job. CPU seconds barely grow when other work shares the machine;
wall seconds do, so the load average before and after is printed too: on a shared machine read the CPU
column, and total CPU / cores as the wall time the run would take on idle cores (each stage's jobs keep both
cores busy, one 2-thread job or two 1-thread jobs at a time). The text also goes to <workdir>/demo_timing.md.

    python bench/demo.py                               # a fresh temporary folder, kept for inspection
    python bench/demo.py --workdir /tmp/demo           # this folder (its results/ must be absent or empty)
    python bench/demo.py --overrides "method=[random,blind]" --cores 2

Measured on 2 nearly idle cores, 1 Dec 2026 (load average 0.6 before, 2.2 after, with the run-health and
browser report): 137 s wall, 209 CPU s; answer (10 jobs) 71.0 / 91.0 wall / CPU s, track 25.7 / 42.8,
anonymize 22.4 / 36.8, demo_video 7.4 / 6.3, frames 3.8 / 3.3, report 2.7 / 2.5, the rest under 2 s each.
Measured on the shared 2-core development machine, 1 Dec 2026 (commit 0efc226's demo: two 57-s walks at 10 fps,
8 questions each, random, blind, blind_letter, blind_debiased and memory_search on SmolLM2): 273 s wall
(load average 0.9 before, 4.3 after: other work joined), 288 CPU s in all; per rule, wall / CPU s summed over
its jobs: answer (10 jobs) 143.5 / 128.6, anonymize (2) 54.4 / 32.8, track (2) 54.0 / 32.1, demo_video (2)
12.6 / 6.6, frames (2) 5.3 / 4.0, report 2.1 / 1.5, memory (2) 1.3 / 1.0, probe (2) 1.6 / 0.8,
demo_questions, aggregate, ingest, videos_table under 1 s each. The answer jobs: 10–22 s each on SmolLM2
(random 0.5 s). Before issue #28 (seven 24-s places at 30 fps, 16 questions, videolucy): 30 min 22 s and 41
CPU-minutes on an idle 2-core machine. Under a load average of 10–15 the same demo took 1,406 s wall and
401 CPU s (llama.cpp's threads spin while they wait for a core, so CPU seconds grow with load too); at a load
average near 2.5, tests/test_workflow.py's demo fixture (the same `snakemake -c2`) took 107.5 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evidence import job_seconds  # noqa: E402  (bench/ is a folder of scripts, not a package)

ROOT = Path(__file__).resolve().parents[1]
#: issue #28: `make demo` within 5 minutes on 2 idle cores.
TARGET_S = 300.0


def fresh_workdir(workdir: Path | None, prefix: str, script: str) -> Path:
    """The folder a timed run starts in: ``workdir`` (its results/ absent or empty), or a fresh temporary one."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix=prefix))
    results = workdir / "results"
    if results.is_dir() and any(results.iterdir()):
        raise SystemExit(f"{script}: {results} is not empty; the run is timed from an empty results folder")
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def run_demo(workdir: Path, cores: int, overrides: str) -> tuple[float, float]:
    """Run the demo's Snakemake command in ``workdir``; return (wall s, CPU s of Snakemake and all its jobs)."""
    command = ["snakemake", f"-c{cores}", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir)]
    if overrides:
        command += ["--config", f"overrides={overrides}"]
    print(f"$ {shlex.join(command)}", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # The jobs call `python -m senri`: the Python running this script comes first on their path.
    env = dict(os.environ, PATH=os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", ""))))
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def summarize(workdir: Path, wall: float, cpu: float, cores: int, load: tuple[float, float]) -> str:
    per_rule: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for rule, _, job_wall, job_cpu in job_seconds(workdir):
        entry = per_rule[rule]
        entry[0] += 1
        entry[1] += job_wall
        entry[2] += job_cpu
        entry[3] = max(entry[3], job_wall)
    jobs_cpu = sum(cpu_s for _, _, cpu_s, _ in per_rule.values())
    lines = [
        "# make demo: time per rule", "",
        f"Whole run: {wall:.0f} s wall ({wall / 60:.1f} min; target {TARGET_S / 60:.0f} min on {cores} idle cores), "
        f"{cpu:.0f} CPU s in all (Snakemake and every job), {cpu / cores:.0f} s of CPU per core. "
        f"Load average (1 min) {load[0]:.1f} before, {load[1]:.1f} after, on {os.cpu_count()} cores.",
        "",
        "| rule | jobs | wall s | CPU s | share of job CPU | longest job s |",
        "|---|---|---|---|---|---|",
    ]
    for rule, (jobs, job_wall, job_cpu, longest) in sorted(per_rule.items(), key=lambda kv: -kv[1][2]):
        share = 100 * job_cpu / jobs_cpu if jobs_cpu else 0.0
        lines.append(f"| {rule} | {jobs} | {job_wall:.1f} | {job_cpu:.1f} | {share:.0f} % | {longest:.1f} |")
    total_jobs = sum(int(j) for j, *_ in per_rule.values())
    lines += [f"| all | {total_jobs} | {sum(w for _, w, _, _ in per_rule.values()):.1f} | {jobs_cpu:.1f} | 100 % | |",
              "", "Jobs without a benchmark file (rule `all`) and Snakemake's own planning count in the whole run's "
              "CPU only.", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="run here (default: a fresh temporary folder)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--overrides", default="", help="Hydra overrides, as `snakemake --config overrides=...`")
    args = parser.parse_args()
    workdir = fresh_workdir(args.workdir, "senri-demo-", "bench/demo.py")
    results = workdir / "results"
    load_before = os.getloadavg()[0]
    wall, cpu = run_demo(workdir, args.cores, args.overrides)
    text = summarize(workdir, wall, cpu, args.cores, (load_before, os.getloadavg()[0]))
    (workdir / "demo_timing.md").write_text(text)
    sys.stdout.write(text + f"\nResults: {results}\n")


if __name__ == "__main__":
    main()

"""Cluster jobs per stage and their resources for a benchmark's videos, as the SLURM profile submits them.

    python bench/cluster_plan.py                       # the paper-scale runs: SENRI and Video-MME
    python bench/cluster_plan.py --videos 1300 --duration-s 720 --width 1280 --height 720 --fps 30

For each per-video stage: how many Snakemake jobs, how many cluster jobs (the profile's `groups` and
`group-components`: N jobs to a cluster job, run in layers of at most the profile's `cores` threads, a
layer's threads and memory summed, the layers' runtimes added), the
largest single job's request (senri.cluster, sized to its video at the benches' rates in config `cluster`),
the largest grouped job's request, and whether each fits the profile's partitions.yaml. Nothing runs: the
arithmetic of rules/common.smk's resource functions and of Snakemake's group resources
(tests/test_cluster.py checks both against the installed Snakemake).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from senri import cluster  # noqa: E402

PROFILE = REPO / "workflow" / "profiles" / "slurm"
#: Per-video stages in the order they run; `frames` once per built plan (config/sampling: build).
STAGES = ("probe", "anonymize", "frames", "track", "memory")

#: Paper-scale runs. SENRI: 10 videos, 25.3 h (spec benchmark.md); frame size not in the spec: 1080p 30 fps
#: assumed (egocentric cameras). Video-MME: 300 short / medium / long videos averaging 80.8 s, 515.8 s and
#: 2,466.7 s (the paper's Table 1); 720p 30 fps assumed (YouTube sources vary).
SCENARIOS = {
    "SENRI (10 videos × 2.53 h, 1080p 30 fps)": [cluster.VideoSize(2.53 * 3600, 1920, 1080, 30)] * 10,
    "Video-MME (900 videos, 300 each of 81 s / 516 s / 2,467 s, 720p 30 fps)":
        [cluster.VideoSize(s, 1280, 720, 30) for s in (80.8, 515.8, 2466.7) for _ in range(300)],
}


def rule_settings(rule: str) -> tuple[int, int, int]:
    """A rule's ``threads`` and its fixed ``runtime``/``mem_mb`` (the fallbacks of sized rules) from rules/*.smk."""
    text = "".join(p.read_text() for p in sorted((REPO / "rules").glob("*.smk")))
    block = re.search(rf"^\s*rule {rule}:\n(.*?)(?=^\s*rule |\Z)", text, re.MULTILINE | re.DOTALL).group(1)
    threads = re.search(r"threads: (\d+)", block)
    runtime = re.search(r"runtime=(?:\w+\(\"\w+\", fallback=)?(\d+)", block)
    mem = re.search(r"mem_mb=(?:\w+\(\"\w+\", fallback=)?(\d+)", block)
    return (int(threads.group(1)) if threads else 1, int(runtime.group(1)) if runtime else 720,
            int(mem.group(1)) if mem else 2000)


def plan(videos: list[cluster.VideoSize], sizing: cluster.Sizing, plans: int) -> list[tuple]:
    components = cluster.group_components(PROFILE / "config.yaml")
    groups = cluster.profile_groups(PROFILE / "config.yaml")
    partitions = cluster.read_partitions(PROFILE / "partitions.yaml")
    cores = cluster.profile_cores(PROFILE / "config.yaml")
    limit = cluster.runtime_limit(partitions, 0)
    rows = []
    for stage in STAGES:
        threads, runtime, mem = rule_settings(stage)
        if stage in cluster.SIZED_STAGES:
            members = [cluster.job_resources(sizing, stage, v, threads) for v in videos]
        else:
            members = [cluster.JobResources(runtime, mem) for _ in videos]
        members *= plans if stage == "frames" else 1
        per_job = components.get(groups.get(stage, ""), 1)
        grouped = cluster.grouped_jobs(stage, members, threads, per_job, max_threads=cores)
        largest = max(members, key=lambda r: (r.runtime_min, r.mem_mb))
        fits = grouped.runtime_min <= limit.max_runtime_min
        rows.append((stage, grouped.jobs, grouped.cluster_jobs, per_job, threads, largest.runtime_min,
                     largest.mem_mb, grouped.threads, grouped.mem_mb, grouped.runtime_min,
                     "yes" if fits else f"NO (> {limit.max_runtime_min:g} min, {limit.name})"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--videos", type=int, help="a benchmark of this many videos of one size instead")
    parser.add_argument("--duration-s", type=float, default=600.0)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--plans", type=int, help="frame stores built per video (default: config sampling.build)")
    args = parser.parse_args()
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    sizing = cluster.Sizing.from_config(config)
    plans = args.plans or len(yaml.safe_load((REPO / "config" / "sampling" / "default.yaml").read_text())["build"])
    scenarios = SCENARIOS if args.videos is None else {
        f"{args.videos} videos × {args.duration_s:g} s, {args.width}x{args.height} {args.fps:g} fps":
            [cluster.VideoSize(args.duration_s, args.width, args.height, args.fps)] * args.videos}
    for name, videos in scenarios.items():
        print(f"\n{name}; {plans} frame plan(s)\n")
        print("| stage | jobs | cluster jobs | jobs per cluster job | threads | largest job: runtime min | mem MB "
              "| largest cluster job: CPUs | mem MB | runtime min | fits the partition |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for row in plan(videos, sizing, plans):
            print("| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in row) + " |")


if __name__ == "__main__":
    main()

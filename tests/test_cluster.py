"""Cluster requests sized to each video, the plan-time limit check, and the SLURM profile's job groups."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import polars as pl
import pytest
import yaml

from conftest import REPO
from senri import cluster

SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"
#: Rules that stay one cluster job each: long per-video stages (issue 53) and the served batches (rules/serving.smk).
LONG_STAGES = ("anonymize", "memory", "memory_system")


@pytest.fixture(scope="module")
def sizing() -> cluster.Sizing:
    """The shipped config's section (read directly: composing the whole config costs a second)."""
    return cluster.Sizing.from_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))


def test_a_six_hour_1080p_video_asks_anonymize_for_the_bench_rate_scaled_by_pixels_and_threads(sizing):
    # bench/anonymize.py (README): 22.6 frames/s at 1280x720, stride 5, on 2 cores.
    assert sizing.stages["anonymize"].frames_per_s == 22.6 and sizing.stages["anonymize"].bench_threads == 2
    day = cluster.VideoSize(duration_s=6 * 3600, width=1920, height=1080, fps=30)
    bench_seconds = 6 * 3600 * 30 * (1920 * 1080) / (1280 * 720) / 22.6  # 17.9 h of work on 2 cores
    request = cluster.job_resources(sizing, "anonymize", day, threads=2)
    assert request.runtime_min == math.ceil(sizing.startup_min + sizing.margin * bench_seconds / 60)
    assert 1500 < request.runtime_min < 1700  # ~27 h: neither the old 600 min nor a wasteful day limit
    assert cluster.job_resources(sizing, "anonymize", day, threads=4).runtime_min < request.runtime_min * 0.51 + 2
    one_second = cluster.VideoSize(1, 1280, 720, 30)
    assert cluster.job_resources(sizing, "anonymize", one_second, threads=2).runtime_min == 3  # 2 + 2 s × 1.5
    # Memory follows the frame above 720p and never drops under the floor.
    assert request.mem_mb == math.ceil(sizing.margin * 673 * 2.25)
    small = cluster.job_resources(sizing, "anonymize", cluster.VideoSize(60, 320, 240, 30), threads=2)
    assert small.mem_mb == math.ceil(sizing.margin * 673)
    assert cluster.job_resources(sizing, "frames", one_second, 2).mem_mb == sizing.min_mem_mb


def test_every_sized_stage_has_its_bench_rate_and_doubling_the_video_doubles_the_work(sizing):
    assert set(sizing.stages) == set(cluster.SIZED_STAGES)
    short, long_ = cluster.VideoSize(600, 1280, 720, 30), cluster.VideoSize(1200, 1280, 720, 30)
    for stage in cluster.SIZED_STAGES:
        a, b = (cluster.stage_seconds(sizing, stage, v, 2) for v in (short, long_))
        assert b == pytest.approx(2 * a)
        assert cluster.stage_seconds(sizing, stage, cluster.VideoSize(600, 1280, 720, 60), 2) == pytest.approx(2 * a)


def test_a_job_over_its_partition_limit_is_named_with_its_estimate_and_the_limit(sizing, tmp_path):
    partitions = cluster.read_partitions(SLURM_PROFILE / "partitions.yaml")
    assert {p.name: (p.max_runtime_min, p.max_gpu) for p in partitions} == {"cpu": (2880, 0), "gpu": (2880, 8)}
    week = cluster.VideoSize(24 * 3600, 1920, 1080, 30)
    request = cluster.job_resources(sizing, "anonymize", week, threads=2)
    message = cluster.over_limit_message("anonymize (day_1)", request, week, partitions, 0, "partitions.yaml")
    assert "anonymize (day_1)" in message and f"runtime={request.runtime_min} min" in message
    assert "exceed the 2880-min limit of partition 'cpu' (partitions.yaml)" in message
    day = cluster.job_resources(sizing, "anonymize", cluster.VideoSize(6 * 3600, 1920, 1080, 30), 2)
    assert cluster.over_limit_message("anonymize (x)", day, week, partitions, 0, "p.yaml") is None
    assert "none takes gpu=9" in cluster.over_limit_message("memory (x)", day, week, partitions, 9, "p.yaml")

    requests = cluster.Requests(sizing, cluster.VideoSizes(tmp_path / "none.parquet", lambda v: str(tmp_path / v)),
                                partitions, "partitions.yaml")
    requests.sizes._sizes["day_1"] = week
    fallback = cluster.JobResources(600, 2000)
    first, said = requests.of("anonymize", "day_1", 2, fallback)
    assert first == request and "anonymize (day_1)" in said
    assert requests.of("anonymize", "day_1", 2, fallback) == (request, None)  # named once per process
    assert requests.of("anonymize", "not_there_yet", 2, fallback) == (fallback, None)


def test_a_partitions_file_with_a_time_string_is_refused_naming_the_file_and_field(tmp_path):
    bad = tmp_path / "partitions.yaml"
    bad.write_text("partitions:\n  short:\n    max_runtime: '2-00:00:00'\n")
    with pytest.raises(ValueError, match=r"partitions\.yaml: partitions\.short\.max_runtime"):
        cluster.read_partitions(bad)
    with pytest.raises(FileNotFoundError, match="cluster.partitions"):
        cluster.read_partitions(tmp_path / "missing.yaml")


def test_a_video_s_size_comes_from_the_probe_table_else_its_header_and_a_missing_file_is_not_cached(tmp_path):
    video = tmp_path / "clip.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25",
                    "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", str(video)], check=True)
    table = tmp_path / "videos.parquet"
    pl.DataFrame({"video_id": ["probed"], "duration_s": [9000.0], "width": [1920], "height": [1080],
                  "avg_fps": [29.97], "r_fps": [30.0]}).write_parquet(table)
    sizes = cluster.VideoSizes(table, lambda v: str(tmp_path / f"{v}.mp4"))
    assert sizes.get("probed") == cluster.VideoSize(9000.0, 1920, 1080, 29.97)
    assert sizes.get("clip") == cluster.VideoSize(1.0, 320, 240, 25.0)
    assert sizes.get("later") is None
    (tmp_path / "later.mp4").write_bytes(video.read_bytes())
    assert sizes.get("later") == cluster.VideoSize(1.0, 320, 240, 25.0)  # looked up again once it exists
    (tmp_path / "broken.mp4").write_bytes(b"not a video")
    assert sizes.get("broken") is None  # its own stage fails on it, naming the file


def test_snakemake_packs_a_group_s_jobs_into_layers_of_at_most_cores_threads_as_cluster_plan_computes():
    """The installed Snakemake's arithmetic that the profile's groups and the README's numbers rely on: a layer
    sums its jobs' threads and memory and lasts as long as its longest job; layers run one after the other."""
    from snakemake.resources import GroupResources, Resources

    class Job:  # what basic_layered reads of a job
        pipe_group = None

        def __init__(self, resources: dict) -> None:
            self.resources = resources

    members = [cluster.JobResources(10, 1000), cluster.JobResources(30, 3000), cluster.JobResources(5, 1000),
               cluster.JobResources(20, 500), cluster.JobResources(8, 800)]
    level = [Job({"_cores": 2, "mem_mb": r.mem_mb, "runtime": r.runtime_min}) for r in members]
    for cores, expected in ((None, (10, 6300, 30)), (4, (4, 3500, 30 + 10 + 5)), (2, (2, 3000, 73))):
        constraints = Resources.from_mapping({"_cores": cores, "_nodes": 100})  # a cluster run: the profile's cores
        group = GroupResources.basic_layered([level], constraints, run_local=False)
        ours = cluster.grouped_jobs("frames", members, threads=2, per_job=5, max_threads=cores)
        assert (group["_cores"], group["mem_mb"], group["runtime"]) == expected, cores
        assert (ours.threads, ours.runtime_min) == expected[::2], cores
        assert ours.mem_mb >= group["mem_mb"] and ours.cluster_jobs == 1  # the worst layer's memory, at least
    # Jobs that depend on each other inside a group run one after the other too.
    chained = GroupResources.basic_layered([level, level[:1]], Resources.from_mapping({"_cores": None}), False)
    assert chained["runtime"] == 30 + 10


def test_the_slurm_profile_groups_only_short_per_video_stages_in_at_most_50_jobs_each_for_900_videos():
    groups = cluster.profile_groups(SLURM_PROFILE / "config.yaml")
    components = cluster.group_components(SLURM_PROFILE / "config.yaml")
    rules = set(re.findall(r"^\s*rule (\w+):", "".join(p.read_text() for p in (REPO / "rules").glob("*.smk")),
                           re.MULTILINE))
    assert set(groups) <= rules, set(groups) - rules
    assert not set(groups) & set(LONG_STAGES)
    assert {"probe", "frames", "track"} <= set(groups)
    assert set(components) == set(groups.values())
    cores = cluster.profile_cores(SLURM_PROFILE / "config.yaml")
    assert cores and cores >= 2  # a group job asks at most this many CPUs: its jobs run in layers that fit
    for group, per_job in components.items():
        stage = cluster.grouped_jobs(group, [cluster.JobResources(3, 1000)] * 900, 2, per_job, max_threads=cores)
        assert stage.cluster_jobs <= 50 and stage.threads <= cores, (group, stage)
    assert cluster.grouped_jobs("probe", [cluster.JobResources(3, 1000)] * 10, 1, components["probe"]).cluster_jobs == 1

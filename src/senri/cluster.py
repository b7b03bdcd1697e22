"""Cluster jobs sized to each video, and how many jobs a grouped SLURM run submits per stage.

Why: one fixed ``runtime``/``mem_mb`` per rule either wastes the queue (a 1-s clip asking 10 h) or kills a 6-h
day at its limit. A per-video stage's work is, to first order, its video's frames × pixels (decode, detect,
blur, encode, track), so each job asks for what its stage's bench measured on this kind of machine (2 cores,
1280×720, 30 fps; the rates are ``cluster.stages`` in the config), for its own video's duration, frame rate and
resolution, scaled by the job's threads, times a safety ``margin``, plus ``startup_min``. Memory is the bench's
peak RSS, scaled with the frame's pixels above the bench's 720p (never below it: the models load whatever the
video), times the margin.

The video's size comes from ``results/videos.parquet`` once a run has probed it, else from the container's
header (one read per video per Snakemake process, cached), so an anonymize job, which runs before the probe,
is sized too. Snakemake evaluates these resources when a job is about to be scheduled (its upstream jobs done),
and for every job in a dry run: a job whose request exceeds its partition's limit (``cluster.partitions``, the
SLURM profile's partitions.yaml) is named at plan time with its estimate and the limit.

Grouping (the SLURM profile's ``groups`` and ``group-components``): Snakemake packs that many jobs of one
group into one cluster job and runs them in layers of at most ``--cores`` threads (the profile's ``cores``):
a layer's threads and memory add up, its runtime is its longest job's, and layers (like jobs that depend on
each other) run one after the other, so their runtimes add up (snakemake.resources.GroupResources
.basic_layered). :func:`grouped_jobs` is that arithmetic, for the README's numbers and ``bench/cluster_plan.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml


#: Stages whose jobs are sized to their video (rules of the same names).
SIZED_STAGES: tuple[str, ...] = ("anonymize", "frames", "track", "memory")


@dataclass(frozen=True)
class VideoSize:
    """What a per-video job's cost follows: length, frame rate and frame size."""

    duration_s: float
    width: int
    height: int
    fps: float

    @property
    def frames(self) -> float:
        return self.duration_s * self.fps

    @property
    def pixels(self) -> int:
        return self.width * self.height


@dataclass(frozen=True)
class StageRate:
    """One stage's bench figures: frames per wall-second at the reference frame size on ``bench_threads`` cores,
    and the stage's peak resident memory there."""

    frames_per_s: float
    bench_threads: int
    peak_rss_mb: float


@dataclass(frozen=True)
class Sizing:
    """The ``cluster`` config section: how requests follow the benches."""

    reference_pixels: int
    margin: float
    startup_min: float
    min_mem_mb: int
    stages: Mapping[str, StageRate]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "Sizing":
        cluster = cfg["cluster"]
        return cls(
            reference_pixels=int(cluster["reference_width"]) * int(cluster["reference_height"]),
            margin=float(cluster["margin"]),
            startup_min=float(cluster["startup_min"]),
            min_mem_mb=int(cluster["min_mem_mb"]),
            stages={stage: StageRate(float(spec["frames_per_s"]), int(spec["bench_threads"]),
                                     float(spec["peak_rss_mb"]))
                    for stage, spec in cluster["stages"].items()},
        )


@dataclass(frozen=True)
class JobResources:
    runtime_min: int
    mem_mb: int


def stage_seconds(sizing: Sizing, stage: str, video: VideoSize, threads: int) -> float:
    """Wall seconds the stage's bench rate predicts for ``video`` on ``threads`` cores (linear in threads: the
    benches ran on 2; more cores than measured is an optimistic extrapolation, hence the margin)."""
    rate = sizing.stages[stage]
    frames_per_s = rate.frames_per_s * max(1, threads) / rate.bench_threads
    return video.frames * (video.pixels / sizing.reference_pixels) / frames_per_s


def job_resources(sizing: Sizing, stage: str, video: VideoSize, threads: int) -> JobResources:
    """The ``runtime`` (minutes) and ``mem_mb`` one job of ``stage`` asks for its video."""
    rate = sizing.stages[stage]
    runtime = sizing.startup_min + sizing.margin * stage_seconds(sizing, stage, video, threads) / 60
    mem = sizing.margin * rate.peak_rss_mb * max(1.0, video.pixels / sizing.reference_pixels)
    return JobResources(runtime_min=math.ceil(runtime), mem_mb=max(sizing.min_mem_mb, math.ceil(mem)))


@dataclass(frozen=True)
class Partition:
    name: str
    max_runtime_min: float
    max_gpu: int


def read_partitions(path: str | Path) -> list[Partition]:
    """The partitions of a SLURM profile's partitions.yaml (snakemake-executor-plugin-slurm's format); runtimes
    in minutes. A missing file or a malformed limit is an error naming the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such partitions file (config cluster.partitions)")
    data = yaml.safe_load(path.read_text()) or {}
    partitions = data.get("partitions")
    if not isinstance(partitions, dict) or not partitions:
        raise ValueError(f"{path}: no `partitions:` mapping")
    found = []
    for name, limits in partitions.items():
        limits = limits or {}
        runtime = limits.get("max_runtime", math.inf)
        if not isinstance(runtime, (int, float)) or runtime <= 0:
            raise ValueError(f"{path}: partitions.{name}.max_runtime must be a positive number of minutes, "
                             f"got {runtime!r}")
        found.append(Partition(str(name), float(runtime), int(limits.get("max_gpu", 0))))
    return found


def runtime_limit(partitions: Sequence[Partition], gpu: int) -> Partition | None:
    """The most lenient partition a job with ``gpu`` GPUs may go to (None: none takes it): a job over its
    limit fits nowhere."""
    fitting = [p for p in partitions if p.max_gpu >= gpu]
    return max(fitting, key=lambda p: p.max_runtime_min) if fitting else None


def over_limit_message(job: str, estimate: JobResources, video: VideoSize, partitions: Sequence[Partition],
                       gpu: int, source: str) -> str | None:
    """The plan-time message for a job whose runtime exceeds every partition it may go to (None when it fits)."""
    partition = runtime_limit(partitions, gpu)
    if partition is not None and estimate.runtime_min <= partition.max_runtime_min:
        return None
    where = (f"the {partition.max_runtime_min:g}-min limit of partition {partition.name!r}" if partition
             else f"every partition (none takes gpu={gpu})")
    return (f"cluster job {job} would exceed {where} ({source}): it asks runtime={estimate.runtime_min} min for "
            f"{video.duration_s / 3600:.2f} h of {video.width}x{video.height} at {video.fps:g} fps. Give it more "
            f"threads (--set-threads), a partition with a longer limit, or split the video.")


def header_size(path: str | Path) -> VideoSize | None:
    """A video's size from its container header (no decoding; a few ms), None when the file is not there yet
    (a generated demo video before its job ran) or has no usable video stream (its own stage then fails, naming
    the file)."""
    if not Path(path).is_file():
        return None
    import av  # noqa: PLC0415 - only Snakemake's resource functions need it

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            if stream.duration is not None and stream.time_base:
                duration = float(stream.duration * stream.time_base)
            else:
                duration = (container.duration or 0) / 1e6
            fps = float(stream.average_rate or stream.base_rate or 0)
            width, height = int(stream.codec_context.width), int(stream.codec_context.height)
    except (av.FFmpegError, IndexError, OSError, ValueError):
        return None
    if duration <= 0 or fps <= 0 or width <= 0 or height <= 0:
        return None
    return VideoSize(duration, width, height, fps)


class VideoSizes:
    """Each video's size for the resource functions, looked up once per video: the probe's row when
    ``results/videos.parquet`` has one (a run probed it before), else the container header of its source file.
    Unknown sizes (the file is not there yet) are not cached, so a later look-up, when the job is scheduled,
    finds the file."""

    def __init__(self, table: str | Path, source_path: Callable[[str], str]) -> None:
        self._table = Path(table)
        self._source_path = source_path
        self._probed: dict[str, VideoSize] | None = None
        self._sizes: dict[str, VideoSize] = {}

    def _probed_sizes(self) -> dict[str, VideoSize]:
        if self._probed is None:
            self._probed = {}
            if self._table.is_file():
                import polars as pl  # noqa: PLC0415

                frame = pl.read_parquet(self._table, columns=["video_id", "duration_s", "width", "height",
                                                              "avg_fps", "r_fps"])
                for row in frame.iter_rows(named=True):
                    fps = row["avg_fps"] or row["r_fps"]
                    if row["duration_s"] and fps and row["width"] and row["height"]:
                        self._probed[row["video_id"]] = VideoSize(float(row["duration_s"]), int(row["width"]),
                                                                  int(row["height"]), float(fps))
        return self._probed

    def get(self, video_id: str) -> VideoSize | None:
        size = self._sizes.get(video_id) or self._probed_sizes().get(video_id) \
            or header_size(self._source_path(video_id))
        if size is not None:
            self._sizes[video_id] = size
        return size


class Requests:
    """The resource functions' state in one Snakemake process: the sizing, each video's size, the partitions,
    and which over-limit jobs were already named (a dry run evaluates a job's runtime more than once)."""

    def __init__(self, sizing: Sizing, sizes: VideoSizes, partitions: Sequence[Partition],
                 partitions_source: str = "") -> None:
        self.sizing, self.sizes, self.partitions = sizing, sizes, list(partitions)
        self.partitions_source = partitions_source
        self._named: set[str] = set()

    def of(self, stage: str, video_id: str, threads: int, fallback: JobResources,
           gpu: int = 0) -> tuple[JobResources, str | None]:
        """A job's request, and the message to show the first time it is over its partitions' limit. A video not
        there yet (a generated one, in a dry run) gets ``fallback``: sized again when its job is scheduled."""
        video = self.sizes.get(video_id)
        if video is None:
            return fallback, None
        request = job_resources(self.sizing, stage, video, threads)
        job = f"{stage} ({video_id})"
        if not self.partitions or job in self._named:
            return request, None
        message = over_limit_message(job, request, video, self.partitions, gpu, self.partitions_source)
        if message:
            self._named.add(job)
        return request, message


def group_components(profile: str | Path) -> dict[str, int]:
    """``group-components`` of a Snakemake profile's config.yaml as {group: jobs per cluster job}."""
    data = yaml.safe_load(Path(profile).read_text()) or {}
    components = data.get("group-components") or []
    if isinstance(components, dict):
        return {str(k): int(v) for k, v in components.items()}
    return {group: int(n) for group, n in (str(item).split("=", 1) for item in components)}


def profile_groups(profile: str | Path) -> dict[str, str]:
    """``groups`` of a Snakemake profile's config.yaml as {rule: group}."""
    data = yaml.safe_load(Path(profile).read_text()) or {}
    groups = data.get("groups") or []
    if isinstance(groups, dict):
        return {str(k): str(v) for k, v in groups.items()}
    return dict(str(item).split("=", 1) for item in groups)


def profile_cores(profile: str | Path) -> int | None:
    """``cores`` of a Snakemake profile's config.yaml: on a cluster, the most threads one (group) job asks."""
    cores = (yaml.safe_load(Path(profile).read_text()) or {}).get("cores")
    return int(cores) if cores is not None else None


@dataclass(frozen=True)
class GroupedStage:
    """A stage's cluster jobs when its jobs (all independent of each other) are packed ``per_job`` at a time."""

    stage: str
    jobs: int
    cluster_jobs: int
    threads: int
    mem_mb: int
    runtime_min: int


def grouped_jobs(stage: str, members: Sequence[JobResources], threads: int, per_job: int,
                 max_threads: int | None = None) -> GroupedStage:
    """Snakemake's group arithmetic (``GroupResources.basic_layered``) for one stage's independent jobs:
    ``ceil(n / per_job)`` cluster jobs; inside one, layers of as many jobs as ``max_threads`` (``--cores``) holds,
    run one after the other, longest jobs together. Which jobs share a cluster job is Snakemake's choice, so the
    worst case: the ``per_job`` longest jobs (runtime: the sum of each layer's longest), the largest memories of
    one layer summed."""
    per_job = max(1, per_job)
    in_group = min(per_job, len(members))
    per_layer = max(1, min(in_group, (max_threads or threads * in_group) // max(1, threads)))
    longest = sorted((r.runtime_min for r in members), reverse=True)[:per_job]
    largest = sorted((r.mem_mb for r in members), reverse=True)[:per_layer]
    return GroupedStage(stage=stage, jobs=len(members), cluster_jobs=math.ceil(len(members) / per_job),
                        threads=threads * per_layer, mem_mb=sum(largest),
                        runtime_min=sum(longest[i] for i in range(0, len(longest), per_layer)))

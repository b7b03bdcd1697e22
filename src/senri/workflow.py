"""What the Snakemake rules need from the package: job planning and code digests.

Snakemake reruns a job when its params change. Each rule's params carry its config slice *and* a digest of
the code its job runs, derived from what the job imports (:mod:`senri.code_identity`), so editing ``probe.py``
reruns probing (and what depends on it) while editing a scorer reruns only the tables and the report, never an
answer job: "rerun when inputs, code or parameters change". The digest hashes content, not modification times, so a fresh clone or a ``git
checkout`` reruns nothing.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from senri import code_identity
from senri.config import run_captioner
from senri.demo import DemoConfig, video_ids as demo_video_ids
from senri.ingest import find_video, locate_video, video_ids_in
from senri.memory.store import CAPTIONS
from senri.subset import Subset, SubsetError, question_video_pairs, subset_video_ids

if TYPE_CHECKING:
    from senri.benchmarks.base import NativeSet, NativeVideo
    from senri.registry import Registry

#: Backends that run the model on this job's own GPU(s); every other backend (a remote server, llama.cpp on
#: CPU, no model at all) needs none, so its jobs never wait for a GPU.
GPU_BACKENDS = frozenset({"vllm", "transformers"})


def _registered_module(registry: "Registry", name: str) -> str:
    """The module a registered name (or a ``module:Class`` given directly) lives in."""
    return (name if ":" in name else registry.target(name)).partition(":")[0]


def job_modules(stage: str, method_implementation: str | None = None, backend: str | None = None,
                memory_store: str | None = None) -> tuple[str, ...]:
    """The package modules one job of ``stage`` runs: the stage's command (:func:`code_identity.stage_modules`)
    plus what the job selects by name (:data:`code_identity.PER_JOB_REGISTRIES`): the method's, the backend's and
    the memory system's modules, each with what it imports."""
    roots = []
    if method_implementation is not None:
        from senri.methods import METHODS

        roots.append(_registered_module(METHODS, method_implementation))
    if backend is not None and backend != "none":
        from senri.backends import BACKENDS

        roots.append(_registered_module(BACKENDS, backend))
    if memory_store is not None:
        from senri.memory.store import MEMORY_SYSTEMS

        roots.append(_registered_module(MEMORY_SYSTEMS, memory_store))
    own = code_identity.stage_modules(stage)
    return tuple(sorted({*own, *code_identity.module_closure(tuple(roots))})) if roots else own


@functools.cache
def code_digest(stage: str, method_implementation: str | None = None, backend: str | None = None,
                memory_store: str | None = None) -> str:
    """A short hash of the code one job runs and the data files it reads (:func:`job_modules`): editing the vLLM
    backend does not rerun llama.cpp runs, editing WorldMM's retrieval reruns the runs over WorldMM and not those
    over the captions, and editing a scorer reruns the report and no answer job."""
    modules = job_modules(stage, method_implementation, backend, memory_store)
    return code_identity.modules_digest(modules)


@dataclass(frozen=True)
class AnswerJobFiles:
    """Where one answer job's files lie: the one definition the in-process rule (through :meth:`pattern`), the
    served batches, the tables and the report read."""

    method: str
    model: str
    video_id: str

    @classmethod
    def pattern(cls) -> "AnswerJobFiles":
        """The rule's paths: the fields as Snakemake wildcards."""
        return cls("{method}", "{model}", "{video_id}")

    @property
    def stem(self) -> str:
        return f"{self.method}/{self.model}/{self.video_id}"

    @property
    def out(self) -> str:
        """The prediction table."""
        return f"results/predictions/{self.stem}.parquet"

    @property
    def sidecar(self) -> str:
        """The answer stage's config the table was made with (the report reads approach and budgets there)."""
        return f"results/predictions/{self.stem}.config.yaml"

    @property
    def cache(self) -> str:
        """Every model call's response, kept across failed and killed jobs (not an output)."""
        return f"results/cache/answer/{self.stem}.sqlite"

    @property
    def log(self) -> str:
        return f"results/logs/answer/{self.stem}.log"

    @property
    def benchmark(self) -> str:
        return f"results/benchmarks/answer/{self.stem}.tsv"


def prediction_files(runs: list[tuple[str, str]], video_ids: list[str]) -> list[str]:
    """The prediction tables of ``runs`` (method, model) over ``video_ids``, in run order."""
    return [AnswerJobFiles(method, model, video).out for method, model in runs for video in video_ids]


def is_demo(cfg: Mapping[str, Any]) -> bool:
    return cfg["dataset"].get("demo") is not None


def is_needle(cfg: Mapping[str, Any]) -> bool:
    """The dataset is built by the needle stage (``dataset=needle``): its videos are outputs, not inputs."""
    return cfg["dataset"].get("needle") is not None


def needle_config(cfg: Mapping[str, Any]) -> "NeedleConfig":
    from senri.needle import NeedleConfig

    return NeedleConfig.from_mapping(cfg["dataset"]["needle"])


def planned_video_ids(cfg: Mapping[str, Any]) -> list[str]:
    """Videos to plan per-video jobs for, known before any job runs.

    The demo's ids follow from its config. Otherwise the dataset's ``video_ids``, or the ids named in the
    question files, keeping those whose video file exists: a missing video is reported by the ingest job,
    with every other problem of the question files, instead of stopping the planner on the first one.
    """
    dataset = cfg["dataset"]
    if is_demo(cfg):
        return demo_video_ids(DemoConfig.from_mapping(dataset["demo"]))
    if is_needle(cfg):
        from senri.needle import video_ids as needle_video_ids

        return needle_video_ids(needle_config(cfg))
    subset = Subset.from_config(dataset.get("subset"))
    if is_native(cfg):
        from senri.benchmarks.base import NativeFileError

        try:
            native = native_set(cfg)
        except NativeFileError:
            return []  # no video is planned; the ingest job refuses the files with every problem named
        ids = list(dataset["video_ids"]) or list(native.videos)
        splits = set(dataset.get("splits") or ())
        ids = [v for v in ids if v in native.videos and (not splits or native.videos[v].split in splits)
               and locate_video(dataset, native.videos[v]) is not None]
        # the pairs ingest draws from: the questions whose video is there (ingest_dataset keeps exactly those)
        kept = set(ids)
        return only_drawn(ids, lambda: [(q.qid, q.video_id) for q in native.questions if q.video_id in kept], subset)
    ids = list(dataset["video_ids"]) or video_ids_in(dataset["questions"])
    ids = only_drawn(ids, lambda: question_video_pairs(dataset["questions"]), subset)
    return [v for v in ids if find_video(dataset["videos_dir"], v, dataset["video_ext"]) is not None]


def only_drawn(ids: list[str], pairs, subset: "Subset | None") -> list[str]:
    """``ids`` cut to the videos of the questions ``dataset.subset`` draws from ``pairs()`` (``(qid, video_id)``),
    so no job is planned for a video none of the drawn questions is on; the ingest job reports a subset that
    cannot be drawn."""
    if subset is None:
        return ids
    try:
        drawn = set(subset_video_ids(pairs(), subset))
    except SubsetError:
        return ids
    return [v for v in ids if v in drawn]


def is_native(cfg: Mapping[str, Any]) -> bool:
    """The dataset is a benchmark read from its native files (``dataset.benchmark`` other than senri)."""
    from senri.benchmarks import benchmark_name

    return benchmark_name(cfg["dataset"]) != "senri"


def native_set(cfg: Mapping[str, Any]) -> "NativeSet":
    """A native benchmark's questions and videos (file candidates, split, stated duration), read once per
    process: the planner asks for every video's file and preset."""
    from senri.config import canonical_json, stage_slice

    return _native_set(canonical_json(stage_slice(cfg, "ingest")))


def native_videos(cfg: Mapping[str, Any]) -> dict[str, "NativeVideo"]:
    return native_set(cfg).videos


@functools.lru_cache(maxsize=4)
def _native_set(ingest_slice: str) -> "NativeSet":
    from senri.benchmarks import load_benchmark

    dataset = json.loads(ingest_slice)
    return load_benchmark(dataset).read(dataset)


def video_path(cfg: Mapping[str, Any], video_id: str) -> str:
    dataset = cfg["dataset"]
    if is_native(cfg):
        video = native_videos(cfg).get(video_id)
        if video is None:
            raise ValueError(f"video {video_id!r} is not in the question files of benchmark "
                             f"{dataset.get('benchmark')!r}")
        return str(locate_video(dataset, video) or Path(dataset["videos_dir"]) / video.files[0])
    generated = is_demo(cfg) or is_needle(cfg)
    found = None if generated else find_video(dataset["videos_dir"], video_id, dataset["video_ext"])
    return str(found or Path(dataset["videos_dir"]) / f"{video_id}{dataset['video_ext'][0]}")


def video_preset(cfg: Mapping[str, Any], video_id: str) -> str | None:
    """The memory preset the benchmark module gives a video (VideoLucy's appendix: by the benchmark's split or
    duration bin), or None where ``memory.preset`` decides (SENRI-format data: ``auto``). A preset named in the
    config (``memory.preset=<name>``) overrides the benchmark's choice."""
    if not is_native(cfg) or cfg["memory"].get("preset", "auto") != "auto":
        return None
    from senri.benchmarks import load_benchmark

    video = native_videos(cfg).get(video_id)
    return None if video is None else load_benchmark(cfg["dataset"]).preset(cfg["dataset"], video)


def preset_args(cfg: Mapping[str, Any], video_id: str) -> list[str]:
    """``--preset NAME`` for the memory and answer CLIs when the benchmark sets the video's preset."""
    name = video_preset(cfg, video_id)
    return ["--preset", name] if name else []


def model_job_resources(spec: Mapping[str, Any] | None, cpu_mem_mb: int) -> dict[str, int]:
    """GPUs, host memory and threads a job that holds a model asks the scheduler for, from the model's config.

    A model config may set ``gpus``, ``mem_mb`` and ``threads``; otherwise a GPU backend asks for one GPU and 16 GB
    of host memory, other backends for no GPU and ``cpu_mem_mb`` (what the stage itself needs). An in-process
    llama.cpp model computes on the job's own cores: it gets two (its threads follow the allocation); everything
    else waits on a remote server or a GPU and needs one.
    """
    spec = spec or {}
    on_gpu = spec.get("backend") in GPU_BACKENDS
    in_process_cpu = spec.get("backend") == "llamacpp"
    return {
        "gpu": int(spec.get("gpus", 1 if on_gpu else 0)),
        "mem_mb": int(spec.get("mem_mb", 16000 if on_gpu else cpu_mem_mb)),
        "threads": int(spec.get("threads") or (2 if in_process_cpu else 1)),
    }


def answer_resources(cfg: Mapping[str, Any], model: str) -> dict[str, int]:
    """GPUs, memory and threads of an answer job (``model_job_resources`` of its model; 2 GB on a CPU). Rules pass
    them as the generic ``gpu`` / ``mem_mb`` resources: locally ``--resources gpu=N`` caps concurrent GPU jobs, on
    SLURM the profile maps them."""
    return model_job_resources(cfg["model"].get(model, {}), cpu_mem_mb=2000)


def pixel_video(cfg: Mapping[str, Any], video_id: str) -> str:
    """The video every pixel-reading stage uses: the anonymized one when anonymization is on."""
    if cfg["anonymize"]["enabled"]:
        return f"results/anonymized/{video_id}.mp4"
    return video_path(cfg, video_id)


def memory_inputs(cfg: Mapping[str, Any], video_id: str, captioner: str | None = None) -> dict[str, str]:
    """What a captioner of ``video_id`` reads (``captioner``: one of several; None: the only one): the video,
    the track and OCR tables (perception captioner) and the anonymization stage's detections (when
    anonymization is on)."""
    inputs = {"info": f"results/probe/{video_id}.parquet", "pixels": pixel_video(cfg, video_id)}
    if (captioner or run_captioner(cfg)) == "perception":
        inputs["track"] = f"results/track/{video_id}.parquet"
        inputs["ocr"] = f"results/track/{video_id}.ocr.parquet"
    if cfg["anonymize"]["enabled"]:
        inputs["detections"] = f"results/anonymized/{video_id}.detections.parquet"
    return inputs


def memory_table(cfg: Mapping[str, Any], video_id: str, captioner: str | None = None) -> str:
    return f"results/memory/{captioner or run_captioner(cfg)}/{video_id}.parquet"


def caption_cache_dir(cfg: Mapping[str, Any], video_id: str, captioner: str | None = None) -> str:
    return f"results/cache/captions/{captioner or run_captioner(cfg)}/{video_id}"


def method_memory_system(cfg: Mapping[str, Any], method: str) -> str | None:
    """The memory system a run reads through a MemoryStore (None for a method that reads none)."""
    system = cfg["method"][method].get("memory_system")
    return str(system) if system else None


def memory_store_dir(cfg: Mapping[str, Any], system: str, video_id: str, captioner: str | None = None) -> str:
    """A video's store folder of a memory system (issue 25 decision 2): one per (system, captioner, video)."""
    return f"results/memory_system/{system}/{captioner or run_captioner(cfg)}/{video_id}"


def memory_system_inputs(cfg: Mapping[str, Any], video_id: str, captioner: str | None = None) -> dict[str, str]:
    """What a store's build job reads: the caption table (the finest captions senri has) and what a captioner
    reads, so a builder can caption at its own base scale through the shared caption cache."""
    return {"captions": memory_table(cfg, video_id, captioner), **memory_inputs(cfg, video_id, captioner)}


def memory_system_store(cfg: Mapping[str, Any], system: str) -> str:
    from senri.config import memory_systems

    return str(memory_systems(cfg)[system].get("store") or system)


def answer_code_selection(cfg: Mapping[str, Any], method: str, model: str) -> dict[str, str | None]:
    """What one answer job selects by name, for its code (:func:`job_modules`): the method's implementation,
    the model's backend and the store the method reads (a memory method without a memory system reads senri's
    captions)."""
    spec = cfg["method"][method]
    system = method_memory_system(cfg, method)
    store = memory_system_store(cfg, system) if system else CAPTIONS if spec.get("uses_memory") else None
    return {"method_implementation": spec["implementation"],
            "backend": cfg["model"].get(model, {}).get("backend"), "memory_store": store}


def answer_inputs(cfg: Mapping[str, Any], method: str, model: str, video_id: str) -> dict[str, str]:
    """Input files of one answer job: questions, the video's probe table, the frame store (plus its carrier
    when the model takes video) of the method's sampling plan if the method reads frames, and the memory
    table plus the captioner's inputs if it is a memory method."""
    inputs = {"questions": "results/questions.parquet", "video": f"results/probe/{video_id}.parquet"}
    spec = cfg["method"][method]
    if spec.get("uses_memory"):
        captioner = run_captioner(cfg, method)  # of several captioners, this run's
        inputs["memory"] = memory_table(cfg, video_id, captioner)
        inputs.update({k: v for k, v in memory_inputs(cfg, video_id, captioner).items() if k != "info"})
        system = method_memory_system(cfg, method)
        if system not in (None, CAPTIONS):
            inputs["store"] = memory_store_dir(cfg, system, video_id, captioner)
    if spec.get("uses_pixels"):
        inputs["pixels"] = pixel_video(cfg, video_id)
    if spec.get("plan"):
        inputs["frames"] = f"results/frames/{spec['plan']}/{video_id}.parquet"
        model_spec = cfg["model"].get(model, {})
        if model_spec.get("video") and spec.get("visual_input", "auto") != "images":
            inputs["carrier"] = f"results/frames/{spec['plan']}/{video_id}.carrier.mp4"
    return inputs


#: The answer CLI's option for each named input of an answer job (:func:`answer_inputs`).
ANSWER_INPUT_OPTIONS = {"frames": "frames", "carrier": "carrier", "memory": "memory", "pixels": "video",
                        "track": "track", "ocr": "ocr", "detections": "detections", "store": "memory-store"}


def answer_media_args(cfg: Mapping[str, Any], inputs: Mapping[str, str], video_id: str,
                      method: str | None = None) -> list[str]:
    """``--frames``/``--carrier`` (frame methods) and ``--memory``, ``--video``, … (memory methods) arguments of
    the answer CLI for the inputs an answer job has: the answer rule and the served batch build them alike.
    A memory method gets the captioner's shared caption cache; a method that captions on its own
    (``Method.caches_captions``: LongVideo-R1's tree nodes) gets one shared by all its runs over the video."""
    args: list[str] = []
    for name, option in ANSWER_INPUT_OPTIONS.items():
        if name in inputs:
            args += [f"--{option}", str(inputs[name])]
    if "memory" in inputs:
        args += ["--caption-cache", caption_cache_dir(cfg, video_id, run_captioner(cfg, method)),
                 *preset_args(cfg, video_id)]
    elif method is not None:
        from senri.methods import METHODS

        implementation = str(cfg["method"][method]["implementation"])
        if METHODS.load(implementation).caches_captions:
            args += ["--caption-cache", f"results/cache/captions/{implementation}/{video_id}"]
    return args


def richness_predictions(cfg: Mapping[str, Any], runs: list[tuple[str, str]], video_ids: list[str]) -> list[str]:
    """The prediction files the richness analysis reads (VideoLucy's runs), or none when the analysis is off
    (no ``analysis.richness.evaluator``) or no VideoLucy run is planned: the stage is then not planned."""
    from senri.analysis.richness import videolucy_runs

    if not ((cfg.get("analysis") or {}).get("richness") or {}).get("evaluator"):
        return []
    return prediction_files(videolucy_runs(cfg, runs), video_ids)

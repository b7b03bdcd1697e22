# Shared by all rule files (the config, composed with Hydra and validated once per run; the config
# slice and code digest each rule gets as params; the input functions). No rule logic lives here.

import functools
import inspect
import os
import re
import sys
from pathlib import Path

SENRI_SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SENRI_SRC))

from senri import cluster as senri_cluster  # noqa: E402
from senri import config as senri_config  # noqa: E402
from senri import serving as senri_serving  # noqa: E402
from senri import workflow as senri_workflow  # noqa: E402
from snakemake.logging import logger  # noqa: E402

_unknown = sorted(set(config) - {"overrides"})
if _unknown:
    raise ValueError(
        f"unknown Snakemake config key(s) {_unknown}: senri takes Hydra overrides in one key, e.g. "
        '--config overrides="method=[random] seed=3"'
    )

SENRI = senri_config.compose(config.get("overrides"), config_dir=Path(workflow.basedir) / "config")
RUNS = senri_config.runs(SENRI)
VIDEO_IDS = senri_workflow.planned_video_ids(SENRI)
IS_DEMO = senri_workflow.is_demo(SENRI)
#: Where each answer job's files lie, as the answer rule's patterns (the served batches read the same class).
ANSWER_FILES = senri_workflow.AnswerJobFiles.pattern()
IS_NEEDLE = senri_workflow.is_needle(SENRI)
# Served answer batches (rules/serving.smk): the models of serving.models answer there, all others in-process.
SERVED_BATCHES = senri_serving.batches(SENRI, VIDEO_IDS)
IN_PROCESS_MODEL = senri_serving.in_process_model_pattern(SENRI)
# Per-video cluster requests (senri.cluster): each video's size read once, when a resource is first evaluated.
_PARTITIONS_FILE = SENRI["cluster"]["partitions"]
CLUSTER_REQUESTS = senri_cluster.Requests(
    senri_cluster.Sizing.from_config(SENRI),
    senri_cluster.VideoSizes("results/videos.parquet", lambda video_id: senri_workflow.video_path(SENRI, video_id)),
    senri_cluster.read_partitions(Path(workflow.basedir) / _PARTITIONS_FILE) if _PARTITIONS_FILE else [],
    partitions_source=_PARTITIONS_FILE or "",
)

# Every rule calls the package of this checkout (what the code digests hash) as `python -m senri`, in
# whatever Python the job runs: the active virtual environment, a conda env of envs/, or a cluster node's.
# The checkout's src/ goes on the path of every job's shell here, once: each cluster job parses this file
# again, so the setting holds there too, and rules name no variable from outside themselves (snakemake --lint).
os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (str(SENRI_SRC), os.environ.get("PYTHONPATH", "")) if p))

wildcard_constraints:
    video_id=r"[A-Za-z0-9_-][A-Za-z0-9_.-]*",  # YouTube ids of Video-MME and LVBench may start with - or _
    # <method>@<system>: over a memory system; <method>+<captioner>: over one of several captioners' memories
    method=r"[A-Za-z0-9][A-Za-z0-9_.-]*(@[A-Za-z0-9][A-Za-z0-9_.-]*)?(\+[A-Za-z0-9][A-Za-z0-9_.-]*)?",
    system=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    model=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    plan=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    # the memory stage runs the configured captioners only
    captioner="|".join(re.escape(c) for c in senri_config.captioner_names(SENRI)),


def per_job(func):
    """Mark a function Snakemake calls once per job (an input function, a params, threads or resources
    function): its signature is handed to Snakemake once (``overwrite_function_params``) instead of being
    read by ``inspect.signature`` at every call, which at 10,000 jobs and a dozen functions a job was seconds
    of planning (issue 53). A Snakemake without that hook reads the signature itself, as before."""
    try:
        from snakemake.common import overwrite_function_params
    except ImportError:
        return func
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


def _resource_wrapper_signature_once():
    """Snakemake wraps every resource of every job in ``Resource.evaluate(*args, **kwargs)`` and reads that
    wrapper's signature at each call (seven resources a job: 70,000 ``inspect.signature`` calls at 9,000 jobs,
    2 s of planning). The wrapper takes any keyword, so its parameters are handed over once, the same answer;
    a Snakemake without the wrapper or the hook is left as it is."""
    try:
        from snakemake.common import overwrite_function_params
        from snakemake.resources import Resource
    except ImportError:
        return
    evaluate = getattr(Resource, "evaluate", None)
    if evaluate is not None:
        overwrite_function_params(evaluate, inspect.signature(evaluate).parameters)


_resource_wrapper_signature_once()


def stage_config(stage):
    """A stage's config slice as canonical JSON: the params value that makes Snakemake rerun on change."""
    return senri_config.canonical_json(senri_config.stage_slice(SENRI, stage))


def stage_code(stage):
    return senri_workflow.code_digest(stage)


def demo_videos(wildcards):
    """Videos the workflow generates itself (dataset=demo or dataset=needle): ingest waits for them."""
    if IS_NEEDLE:
        return [f"results/needle/videos/{v}.mp4" for v in VIDEO_IDS]
    return [f"results/demo/videos/{v}.mp4" for v in VIDEO_IDS] if IS_DEMO else []


def question_files(wildcards):
    return list(SENRI["dataset"]["questions"])


@per_job
def original_video_file(wildcards):
    return senri_workflow.video_path(SENRI, wildcards.video_id)


@per_job
def video_file(wildcards):
    """The video every pixel-reading stage uses: the anonymized one when anonymization is on."""
    return senri_workflow.pixel_video(SENRI, wildcards.video_id)


@per_job
def memory_inputs(wildcards):
    return senri_workflow.memory_inputs(SENRI, wildcards.video_id, wildcards.captioner)


@functools.cache
def _memory_config(captioner):
    return senri_config.canonical_json(senri_config.stage_slice(SENRI, "memory", captioner=captioner))


@per_job
def memory_config(wildcards):
    """The memory stage's slice for one captioner (of several, each its own memory)."""
    return _memory_config(wildcards.captioner)


@per_job
def memory_options(wildcards, input):
    """``--track/--ocr/--detections`` for the captioner's optional inputs that this config has."""
    return " ".join(f"--{name} {input[name]}" for name in ("track", "ocr", "detections") if name in input.keys())


@per_job
def memory_preset(wildcards):
    """``--preset NAME`` where the benchmark sets a video's memory preset (VideoLucy's appendix, by split)."""
    return " ".join(senri_workflow.preset_args(SENRI, wildcards.video_id))


@functools.cache
def _captioner_resources(captioner):
    """A captioner model's GPUs and held host memory (a GPU model's host side; none of its own on a CPU)."""
    return senri_workflow.model_job_resources(senri_config.captioner_config(SENRI, captioner), cpu_mem_mb=0)


@per_job
def memory_gpus(wildcards):
    """A VLM captioner on a GPU backend asks for its GPU; the perception captioner for none."""
    return _captioner_resources(wildcards.captioner)["gpu"]


@per_job
def memory_mem_mb(wildcards, threads):
    """The captioner model's memory or the stage's sized memory, the larger."""
    held = _captioner_resources(wildcards.captioner)["mem_mb"]
    return max(held, sized_request("memory", wildcards, threads, 0, 2000, gpu=memory_gpus(wildcards)).mem_mb)


@per_job
def memory_runtime(wildcards, threads):
    return sized_request("memory", wildcards, threads, 720, 0, gpu=memory_gpus(wildcards)).runtime_min


def memory_files(wildcards):
    """Memory tables (and the track's path plots) when a selected method reads the memory."""
    if not any(spec.get("uses_memory") for spec in SENRI["method"].values()):
        return []
    captioners = senri_config.planned_captioners(SENRI)
    files = [senri_workflow.memory_table(SENRI, v, c) for c in captioners for v in VIDEO_IDS]
    if "perception" in captioners:
        files += [f"results/track/{v}.png" for v in VIDEO_IDS]
    return files


def sized_request(stage, wildcards, threads, fallback_runtime, fallback_mem_mb, gpu=0):
    """The job's (runtime, mem_mb) for its video; a job over its partitions' limit is named once, at plan time."""
    request, message = CLUSTER_REQUESTS.of(stage, wildcards.video_id, threads,
                                           senri_cluster.JobResources(fallback_runtime, fallback_mem_mb), gpu=gpu)
    if message:
        logger.warning(message)
    return request


def sized_runtime(stage, fallback):
    """A ``runtime`` resource function of ``stage`` (minutes; ``fallback`` until the video's size is known)."""
    return per_job(lambda wildcards, threads: sized_request(stage, wildcards, threads, fallback, 0).runtime_min)


def sized_mem_mb(stage, fallback):
    """A ``mem_mb`` resource function of ``stage`` (``fallback`` until the video's size is known)."""
    return per_job(lambda wildcards, threads: sized_request(stage, wildcards, threads, 0, fallback).mem_mb)


def probe_tables(wildcards):
    return [f"results/probe/{v}.parquet" for v in VIDEO_IDS]


# Params that depend on the method, model, plan or memory system but never on the video are worked out once
# per planning run, not once per job: at 900 videos a config slice and a code digest per job were most of the
# plan's time (issue 53; bench/plan.py). SENRI and the checkout's code do not change while Snakemake plans.
@functools.cache
def _frames_config(plan):
    return senri_config.canonical_json(senri_config.stage_slice(SENRI, "frames", plan=plan))


@per_job
def frames_config(wildcards):
    return _frames_config(wildcards.plan)


def frame_stores(wildcards):
    """Frame stores (and carriers, if asked for) of the plans the config says to build, for every video."""
    sampling = SENRI["sampling"]
    suffixes = [".parquet", ".carrier.mp4"] if sampling["carriers"] else [".parquet"]
    return [f"results/frames/{plan}/{video}{suffix}" for plan in sampling["build"] for video in VIDEO_IDS
            for suffix in suffixes]


@functools.cache
def _answer_params(method, model):
    return senri_serving.answer_params(SENRI, method, model)


@per_job
def answer_config(wildcards):
    return _answer_params(wildcards.method, wildcards.model)["config"]


@per_job
def answer_code(wildcards):
    return _answer_params(wildcards.method, wildcards.model)["code"]


@per_job
def answer_inputs(wildcards):
    return senri_workflow.answer_inputs(SENRI, wildcards.method, wildcards.model, wildcards.video_id)


@per_job
def answer_media_options(wildcards, input):
    """``--frames``/``--carrier`` (frame methods) and ``--memory``, ``--video``, … (memory methods) options
    for the answer CLI, for the inputs this job has."""
    inputs = {name: str(input[name]) for name in input.keys()}
    return " ".join(senri_workflow.answer_media_args(SENRI, inputs, wildcards.video_id, wildcards.method))


@functools.cache
def _memory_system_params(system, captioner):
    return {"config": senri_config.canonical_json(senri_config.stage_slice(SENRI, "memory_system", system=system,
                                                                           captioner=captioner)),
            "code": senri_workflow.code_digest("memory_system",
                                               memory_store=senri_workflow.memory_system_store(SENRI, system))}


@per_job
def memory_system_config(wildcards):
    return _memory_system_params(wildcards.system, wildcards.captioner)["config"]


@per_job
def memory_system_code(wildcards):
    return _memory_system_params(wildcards.system, wildcards.captioner)["code"]


@per_job
def memory_system_inputs(wildcards):
    return senri_workflow.memory_system_inputs(SENRI, wildcards.video_id, wildcards.captioner)


@per_job
def memory_system_action(wildcards):
    """``import`` when the system's config names a release folder (``import_dir``), else ``build``."""
    return "import" if senri_config.memory_systems(SENRI)[wildcards.system].get("import_dir") else "build"


@per_job
def answer_threads(wildcards):
    return senri_workflow.answer_resources(SENRI, wildcards.model)["threads"]


@per_job
def answer_gpus(wildcards):
    return senri_workflow.answer_resources(SENRI, wildcards.model)["gpu"]


@per_job
def answer_mem_mb(wildcards):
    return senri_workflow.answer_resources(SENRI, wildcards.model)["mem_mb"]


def prediction_files(wildcards):
    return senri_workflow.prediction_files(RUNS, VIDEO_IDS)


def prediction_sidecars(wildcards):
    """The config each prediction file was made with: the report reads approach and frame budget from it."""
    return [path.replace(".parquet", ".config.yaml") for path in prediction_files(wildcards)]


def needle_user_inputs(wildcards):
    """The user's needle clips, their question files and haystack videos: editing one rebuilds the videos."""
    if not IS_NEEDLE:
        return []
    needle = SENRI["dataset"]["needle"]
    files = list(needle.get("clip_questions") or [])
    for folder in (needle.get("clips_dir"), needle.get("haystacks_dir")):
        if folder and Path(folder).is_dir():
            files += sorted(str(p) for p in Path(folder).iterdir() if p.suffix.lower() in needle["clip_ext"])
    return files


def richness_predictions(wildcards):
    return senri_workflow.richness_predictions(SENRI, RUNS, VIDEO_IDS)


def richness_curves(wildcards):
    """The richness analysis's curves when it is planned (the report draws Fig. 5 from them), else none."""
    return ["results/analysis/richness/curves.parquet"] if richness_predictions(wildcards) else []


def report_richness_args(wildcards, input):
    return f"--richness {input.richness}" if input.richness else ""


def report_needle_args(wildcards, input):
    """The report's needle option: the needle table when the dataset is a needle benchmark."""
    return f"--needles {input.needles}" if input.needles else ""

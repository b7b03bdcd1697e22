"""Shared fixtures: a small generated demo (short videos, same generator as the real demo)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from hashed_encoder import hashed_words  # noqa: F401 - the memory systems' tests import it from here
from senri import demo

REPO = Path(__file__).resolve().parents[1]
# Short walks keep unit tests quick; the end-to-end workflow test renders the full-size demo.
SMALL_DEMO = demo.DemoConfig(n_videos=2, seed=7, places_per_video=5, place_s=12, turn_s=2, width=640, height=360,
                             fps=30, gop_s=1)


def render_demo(cfg: demo.DemoConfig, out: Path) -> dict:
    """A generated demo's videos, questions and walks under ``out``: what a demo fixture hands its tests."""
    ids = demo.video_ids(cfg)
    with ThreadPoolExecutor(max_workers=2) as pool:  # one single-threaded encoder per core, as the workflow does
        paths = pool.map(lambda v: demo.render_video(demo.plan_walk(cfg, v), out / "videos" / f"{v}.mp4"), ids)
    videos = dict(zip(ids, paths))
    questions = out / "questions.jsonl"
    demo.write_questions(cfg, questions, out / "walks.json")
    return {"dir": out, "videos": videos, "questions": questions, "videos_dir": out / "videos"}


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory) -> dict:
    return render_demo(SMALL_DEMO, tmp_path_factory.mktemp("demo"))


#: The two-video demo of make demo's run as test_workflow.py's end-to-end tests run it, and of the agent and
#: perception DAG tests: make demo's two 57-s walks at 4 questions a video (one each of L, RR, OC and NP: the demo
#: balances letters per video, so 4 is its smallest question set, and NP is what the memory's navigation check
#: reads) instead of make demo's 8. Every check there holds per question and per video, and the answer jobs, most of
#: that run's time, cost per question; make demo's own size is timed by bench/demo.py, and its config's plan is
#: checked against that run's. Its upstream stages (demo videos, anonymize, track, perception captions) are
#: prepared once for all of these tests (:func:`prepared_demo`). The face detector runs on every 30th frame
#: instead of every 5th (as on :data:`ONE_VIDEO_DEMO`): the demo's walks show no face, so the anonymized video
#: and its empty detections are the same, and both of the stage's paths (detected and propagated frames) still
#: run; the detector was two thirds of the stage's CPU (15.9 CPU s a video at stride 5, 5.2 at 30)
#: (its check reads the stride from the composed config).
DAG_DEMO = ("dataset.demo.questions_per_task.L=1 dataset.demo.questions_per_task.RR=1 "
            "dataset.demo.questions_per_task.OC=1 dataset.demo.questions_per_task.NP=1 "
            "dataset.demo.questions_per_task.RER=0 dataset.demo.questions_per_task.TER=0 anonymize.stride=30")
#: make demo's run as test_workflow.py runs it: config/config.yaml's every stage, method and model on
#: :data:`DAG_DEMO`, SmolLM2 on one llama.cpp thread, so -c2 runs two answer jobs side by side (two threads of one
#: engine wait for each other at every layer: 4x the CPU of one on a busy 2-core machine; the thread count is in
#: no stage's slice before the answers' and in no cache identity; tests/test_slurm.py and tests/test_serving.py
#: run it so too).
DEMO_RUN = DAG_DEMO + " model.smollm2.threads=1"
#: Environment of the jobs that prepare a demo setting's upstream stages: make demo's run logs the modules each
#: job imported (test_workflow.py checks them against the job's code digest), its prepared stages included.
PREPARE_ENV = {DAG_DEMO: {"PYTHONPROFILEIMPORTTIME": "1"}}
#: One video of four places and 4 questions (the demo balances letters per video, so 4 is its smallest question
#: set), 54 s: the memory-system DAG tests (build, stores, Table 3 and 4).
ONE_VIDEO_DEMO = ("dataset.demo.n_videos=1 dataset.demo.places_per_video=4 dataset.demo.turn_s=2 "
                  "dataset.demo.questions_per_task.L=1 dataset.demo.questions_per_task.RR=1 "
                  "dataset.demo.questions_per_task.OC=1 dataset.demo.questions_per_task.RER=1 "
                  "dataset.demo.questions_per_task.NP=0 dataset.demo.questions_per_task.TER=0 "
                  "sampling.build=[] anonymize.stride=30")


#: Fields of a prediction row or trace that measure the run's clock: two runs that decided the same differ there.
CLOCK_FIELDS = ("latency_s", "seconds", "wall_s")


def clock_free(frame):  # noqa: ANN001, ANN201 - polars DataFrame in and out
    """Prediction rows without their clock: ``latency_s`` dropped and every ``seconds`` / ``wall_s`` removed from
    the traces (each model call records its seconds), so served and in-process rows compare as equal."""
    import polars as pl

    def strip(value):  # noqa: ANN001, ANN202
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in CLOCK_FIELDS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return frame.drop("latency_s").with_columns(pl.col("trace").map_elements(
        lambda t: json.dumps(strip(json.loads(t)), sort_keys=True), return_dtype=pl.String))


def upstream_targets(demo_overrides: str) -> list[str]:
    """What every answer job reads before its method's own stages: questions, the videos table, and for each of
    the demo's videos (as the workflow names them) the anonymized video, the track table and the perception
    captions."""
    from senri import config as senri_config

    cfg = demo.DemoConfig.from_mapping(senri_config.compose(demo_overrides)["dataset"]["demo"])
    per_video = [path for v in demo.video_ids(cfg) for path in (
        f"results/anonymized/{v}.mp4", f"results/track/{v}.parquet", f"results/memory/perception/{v}.parquet")]
    return ["results/questions.parquet", "results/videos.parquet", *per_video]


def snakemake(workdir: Path, *args: str, check: bool = True, env: dict | None = None,
              snakefile: Path = REPO / "Snakefile") -> subprocess.CompletedProcess:
    """The repository's workflow in ``workdir`` (the test's interpreter and its scripts first on PATH; ``env``
    adds or replaces environment variables; ``snakefile``: another checkout's)."""
    env = {**os.environ, **(env or {})}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(snakefile), "-d", str(workdir), *args],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


#: A prepared upstream's per-video stages on one core each where the demo has several videos (their rules ask for
#: 2): ``-c2`` then runs two videos' anonymize and track jobs side by side instead of one after the other (a
#: one-video demo's jobs keep their 2 threads: nothing would run beside them). Their outputs do not depend on
#: it (the track's OCR reads are the same on 1 or 2 threads; the face detector and the encoder do not read the
#: rule's thread count), and a rule's thread count is in no params, so Snakemake never reruns a job for it.
PREPARE_THREADS = ("anonymize=1", "track=1")


@pytest.fixture(scope="session")
def prepared_demo(tmp_path_factory):
    """A workdir whose demo and upstream stages (demo video, ingest, probe, anonymize, track, perception captions)
    already ran, copied from one run per demo setting made once per session.

    The DAG tests of the answer methods differ only downstream (methods, models, memory systems); each running
    its own copy of the same upstream stages cost the suite minutes. A copy keeps file times and Snakemake's
    metadata, so Snakemake sees finished jobs and runs only what the test's overrides add or change (a test that
    changes an upstream slice still reruns it)."""
    templates: dict[str, Path] = {}

    def prepare(workdir: Path, demo_overrides: str) -> Path:
        if demo_overrides not in templates:
            template = tmp_path_factory.mktemp("prepared_demo")
            targets = upstream_targets(demo_overrides)
            side_by_side = sum(t.startswith("results/track/") for t in targets) > 1  # one video: its jobs keep 2
            threads = ("--set-threads", *PREPARE_THREADS) if side_by_side else ()
            snakemake(template, "-c2", *targets, *threads, "--config", f"overrides={demo_overrides}",
                      env=PREPARE_ENV.get(demo_overrides))
            templates[demo_overrides] = copy_workdir(template, template)
        return copy_workdir(templates[demo_overrides], workdir)

    return prepare


def copy_workdir(source: Path, workdir: Path, ignore=None) -> Path:  # noqa: ANN001 - shutil.copytree's ignore
    """A copy of a finished run's workdir that Snakemake reads as finished: file times and Snakemake's metadata
    kept (it runs only what the next overrides add or change), its run logs left out (each run's are its own).
    ``source`` itself: only its logs removed. ``ignore``: as :func:`shutil.copytree`'s."""
    if workdir != source:
        shutil.copytree(source, workdir, symlinks=True, dirs_exist_ok=True, ignore=ignore)
    shutil.rmtree(workdir / ".snakemake" / "log", ignore_errors=True)
    return workdir


@pytest.fixture(scope="session")
def table2_workdir(tmp_path_factory, prepared_demo, tiny_clip) -> Path:  # noqa: ANN001 - pytest fixtures
    """``experiment=table2``'s DAG run on the one-video demo (tests/test_experiments.py::table2_run), made once
    per session: Table 2's test checks it, the direct specialists' and Table 3's tests run over copies of it."""
    from test_experiments import table2_run

    return table2_run(tmp_path_factory, prepared_demo, tiny_clip)


@pytest.fixture(scope="session")
def table2_omni_workdir(tmp_path_factory, prepared_demo) -> Path:  # noqa: ANN001 - pytest fixtures
    """``experiment=table2_omni``'s DAG run, both rows (tests/test_experiments.py::table2_omni_run), made once
    per session: M3-Agent's row is checked in tests/test_experiments.py, Light-Omni's in tests/test_light_omni.py."""
    from test_experiments import table2_omni_run

    return table2_omni_run(tmp_path_factory, prepared_demo)


def gray_frames(video: Path, indices: list[int], width: int, height: int, pix_fmt: str = "gray") -> list[list[bytes]]:
    """Decode the given frame indices exactly (ffmpeg select on the frame number) as rows of pixel bytes."""
    expr = "+".join(f"eq(n\\,{i})" for i in indices)
    raw = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-i", str(video), "-vf", f"select={expr}", "-vsync", "0",
         "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"],
        check=True, capture_output=True, stdin=subprocess.DEVNULL,
    ).stdout
    row = width * {"gray": 1, "rgb24": 3}[pix_fmt]
    size = row * height
    assert len(raw) == size * len(indices), "ffmpeg returned a different number of frames"
    return [[raw[k * size + r * row : k * size + (r + 1) * row] for r in range(height)] for k in range(len(indices))]


@pytest.fixture
def senri_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def make_indexed_video(path: Path, *, seconds: int = 12, fps: int = 30, gop: int = 30, codec: str = "libx264",
                       vfr: bool = False) -> Path:
    """A test video whose every frame carries its own presentation index in the demo's index strip."""
    from senri.demo import index_strip_source

    graph = (f"testsrc2=s=640x360:r={fps}:d={seconds}[bg];{index_strip_source(fps, seconds, 'strip')};"
             "[bg][strip]overlay=0:0:shortest=1")
    if vfr:  # irregular frame durations (1.45, 1.45, 0.1 frame periods, repeating), still monotonic
        # settb first: under the default 1/fps time base the fractional stamps round back to whole frames (CFR)
        graph += f",settb=1/90000,setpts='(N+0.45*mod(N\\,3))/({fps}*TB)'"
    args = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-filter_complex", graph + "[v]", "-map", "[v]",
            "-c:v", codec, "-pix_fmt", "yuv420p", "-g", str(gop), "-bf", "2"]
    if codec == "libx264":
        args += ["-keyint_min", str(gop), "-sc_threshold", "0", "-preset", "veryfast"]
    else:
        args += ["-x265-params", f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=2:log-level=error",
                 "-tag:v", "hvc1", "-preset", "veryfast"]
    if vfr:
        args += ["-fps_mode", "passthrough", "-enc_time_base", "1/90000", "-video_track_timescale", "90000"]
    args += ["-movflags", "+faststart"]  # index first, as cameras and phones write it
    subprocess.run([*args, str(path)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return path


def set_display_rotation(path: Path, matrix: tuple[int, ...] = (0, 65536, 0, -65536, 0, 0, 0, 0, 1 << 30)) -> Path:
    """Write an MP4 display matrix into the first track header (default: shown rotated 90° clockwise).

    Done by hand because Debian's ffmpeg 5.1 has no ``-display_rotation`` and ignores ``rotate`` metadata."""
    import struct

    data = bytearray(path.read_bytes())
    box = data.find(b"tkhd")
    offset = box + 4 + (52 if data[box + 4] == 1 else 40)
    data[offset : offset + 36] = struct.pack(">9i", *matrix)
    path.write_bytes(bytes(data))
    return path


def ffprobe_frames(path: Path) -> tuple[list[float], set[float]]:
    """(every frame's pts in seconds, sorted; the keyframes' pts) according to ffprobe, independently of senri.

    Integer pts × the stream's time base, not ffprobe's 6-decimal ``pts_time``: in a 1/90000 time base two
    frames can lie within a microsecond of equally near a target, and a rounded reference would pick wrong."""
    from fractions import Fraction

    def probe(*args: str) -> str:
        return subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", *args, "-of", "csv=p=0", str(path)],
                              check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout

    time_base = Fraction(probe("-show_entries", "stream=time_base").split()[0].strip(","))
    rows = [line.split(",") for line in probe("-show_entries", "packet=pts,flags").split()
            if line and not line.startswith("N/A")]
    seconds = [(float(int(r[0]) * time_base), "K" in r[1]) for r in rows]
    return sorted(t for t, _ in seconds), {t for t, key in seconds if key}


def make_probed_clip(folder: Path, video_id: str):  # noqa: ANN201 - (video path, VideoInfo)
    """A 120 s, 160×120, 4 fps H.264 test clip with a keyframe every second, and its probe facts: the video
    the memory and agent tests caption and verify."""
    from senri.media import run_ffmpeg
    from senri.probe import probe

    video = folder / f"{video_id}.mp4"
    if video.exists():  # a second job over the same video: the same bytes, not a re-encode (x264 may differ)
        return video, probe(video, video_id)
    run_ffmpeg(["-y", "-f", "lavfi", "-i", "testsrc2=s=160x120:r=4:d=120", "-c:v", "libx264", "-g", "4",
                "-pix_fmt", "yuv420p", str(video)], what="test video")
    return video, probe(video, video_id)


class JsonHandler(BaseHTTPRequestHandler):
    """Base of the tests' local OpenAI-compatible servers: one way to send a JSON reply."""

    def _send(self, status, payload, headers=None):  # noqa: ANN001
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # noqa: ANN002 - quiet test servers
        pass


def fill_hub_cache(cache: Path, model_ids) -> Path:  # noqa: ANN001 - iterable of "org/name"
    """A Hugging Face hub cache (its own layout: ``models--org--name/refs/main`` naming a snapshot that holds a
    ``config.json``) with an entry for each id: what a node that downloaded the weights beforehand has, as far
    as senri's check that nothing is downloaded by a job reads it (:func:`senri.backends.vllm.require_local_weights`)."""
    for model_id in model_ids:
        folder = cache / ("models--" + model_id.replace("/", "--"))
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / "main").write_text("0" * 40)
        snapshot = folder / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "config.json").write_text("{}")
    return cache


@pytest.fixture(scope="session", autouse=True)
def shipped_models_in_the_hub_cache(tmp_path_factory):
    """Every shipped vLLM model config's weights "downloaded beforehand" into a test hub cache (HF_HUB_CACHE, which
    the workflow's jobs and servers inherit): the fake-engine tests of those configs pass the no-download check,
    and a test of the check itself points HF_HUB_CACHE elsewhere."""
    import yaml

    ids = {"deepseek-r1", "qwen"}  # the fake-engine tests' own model names
    for path in (REPO / "config" / "model").glob("*.yaml"):
        spec = yaml.safe_load(path.read_text()) or {}
        if spec.get("backend") == "vllm" and "/" in str(spec.get("model", "")):
            ids.add(str(spec["model"]))
    cache = fill_hub_cache(tmp_path_factory.mktemp("hub_cache"), sorted(ids))
    previous = os.environ.get("HF_HUB_CACHE")
    os.environ["HF_HUB_CACHE"] = str(cache)
    yield cache
    if previous is None:
        os.environ.pop("HF_HUB_CACHE", None)
    else:
        os.environ["HF_HUB_CACHE"] = previous


@pytest.fixture(scope="session")
def tiny_clip(tmp_path_factory):
    """A randomly initialised CLIP: the real transformers path of the image-text embedder, on the CPU (its model
    config, ``kind: image_text``)."""
    pytest.importorskip("torch")
    from tiny_vlm import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny_clip"))

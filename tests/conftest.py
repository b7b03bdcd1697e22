"""Shared fixtures: a small generated demo (short videos, same generator as the real demo)."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from senri import demo

REPO = Path(__file__).resolve().parents[1]
# Short walks keep unit tests quick; the end-to-end workflow test renders the full-size demo.
SMALL_DEMO = demo.DemoConfig(n_videos=2, seed=7, places_per_video=5, place_s=12, turn_s=2, width=640, height=360,
                             fps=30, gop_s=1)


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("demo")
    ids = demo.video_ids(SMALL_DEMO)
    with ThreadPoolExecutor(max_workers=2) as pool:  # one single-threaded encoder per core, as the workflow does
        paths = pool.map(lambda v: demo.render_video(demo.plan_walk(SMALL_DEMO, v), out / "videos" / f"{v}.mp4"), ids)
    videos = dict(zip(ids, paths))
    questions = out / "questions.jsonl"
    demo.write_questions(SMALL_DEMO, questions, out / "walks.json")
    return {"dir": out, "videos": videos, "questions": questions, "videos_dir": out / "videos"}


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

"""Needle-in-a-video-haystack builder (senri.needle): positions, exact splicing, questions and windows."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from senri import needle
from senri.demo import INDEX_STRIP_ROWS
from senri.media import run_ffmpeg

ROOT = Path(__file__).resolve().parents[1]


def _cfg(**overrides) -> needle.NeedleConfig:
    base = dict(seed=3, haystack_s=[30], videos_per_length=1, positions=[0.0, 0.5, 1.0], needle_s=2,
                width=320, height=180, fps=5, gop_s=1, place_s=12, turn_s=2)
    return needle.NeedleConfig.from_mapping({**base, **overrides})


def _frames(path: Path, cfg: needle.NeedleConfig) -> np.ndarray:
    """Every frame of ``path`` as RGB (below the frame-index strip)."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                         capture_output=True, check=True).stdout
    frames = np.frombuffer(raw, np.uint8).reshape(-1, cfg.height, cfg.width, 3)
    return frames[:, INDEX_STRIP_ROWS + 2:].astype(np.int16)


def test_positions_spread_from_beginning_to_end_and_shift_later_needles():
    assert needle.insertion_frames(1000, [0.0, 0.25, 0.5, 0.75, 1.0]) == [0, 250, 500, 750, 1000]
    placed = needle.placements(1000, [100] * 5, [0.0, 0.25, 0.5, 0.75, 1.0])
    assert [p.start_frame for p in placed] == [0, 350, 700, 1050, 1400]
    assert [p.window_s(10) for p in placed] == [(0.0, 10.0), (35.0, 45.0), (70.0, 80.0), (105.0, 115.0),
                                                 (140.0, 150.0)]
    assert placed[-1].start_frame + placed[-1].n_frames == 1000 + 500  # the last needle ends the video


def test_questions_four_per_needle_balanced_same_kind_and_seeded():
    cfg = _cfg(positions=[0.0, 0.25, 0.5, 0.75, 1.0])
    needles = needle.plan_needles(cfg, "needle_0030s_01")
    questions = needle.generated_questions(needles, "needle_0030s_01", cfg.seed)
    assert len(questions) == 20 and len({q["qid"] for q in questions}) == 20
    assert Counter(q["answer"] for q in questions) == {"A": 5, "B": 5, "C": 5, "D": 5}
    assert Counter(q["task_type"] for q in questions) == {"L": 5, "RER": 5, "OC": 5, "TER": 5}
    places = {n.place.title() for n in needles}
    for q in questions:
        correct = q["options"]["ABCD".index(q["answer"])]
        k = q["needle_position"]
        assert len(set(q["options"])) == 4
        if q["task_type"] == "L":  # every option is a place of another needle of this video: same kind
            assert correct == needles[k].place.title() and set(q["options"]) <= places
        if q["task_type"] == "OC":
            assert correct == str(needles[k].count) and all(o.isdigit() for o in q["options"])
    assert questions == needle.generated_questions(needle.plan_needles(cfg, "needle_0030s_01"),
                                                   "needle_0030s_01", cfg.seed)
    other = needle.generated_questions(needle.plan_needles(_cfg(seed=4), "needle_0030s_01"), "needle_0030s_01", 4)
    assert other != questions


def test_needle_names_never_come_from_the_haystack():
    from senri import demo

    assert not set(needle.NEEDLE_PLACES) & set(demo.PLACES)
    assert not {a for a, _ in needle.NEEDLE_ACTIVITIES} & {e for e, _ in demo.EVENTS}
    assert not set(needle.NEEDLE_PASSERS) & set(demo.PASSERS)


def test_splice_keeps_exact_timestamps_and_evidence_windows(tmp_path):
    cfg = _cfg()
    out = tmp_path / "needle"
    path = needle.build(cfg, out, "needle_0030s_01")
    questions = [json.loads(line) for line in path.read_text().splitlines()]
    video = out / "videos" / "needle_0030s_01.mp4"
    frames = _frames(video, cfg)
    per_needle = cfg.needle_s * cfg.fps
    assert len(frames) == 30 * cfg.fps + 3 * per_needle
    starts = {q["needle_position"]: (q["needle_start_s"], q["needle_end_s"]) for q in questions}
    # 30 s haystack: needles before frame 0, at 15 s, after the end; each earlier needle shifts the next.
    assert starts == {0: (0.0, 2.0), 1: (17.0, 19.0), 2: (34.0, 36.0)}
    for q in questions:
        assert (q["evidence_start_s"], q["evidence_end_s"]) == starts[q["needle_position"]]
        assert q["haystack_s"] == 30.0 and q["needle_positions"] == 3
    for k, n in enumerate(needle.plan_needles(cfg, "needle_0030s_01")):
        clip = _frames(out / "clips" / f"{n.needle_id}.mp4", cfg)
        first = round(starts[k][0] * cfg.fps)
        inside = np.abs(frames[first:first + per_needle] - clip).mean(axis=(1, 2, 3))
        assert inside.max() < 4, f"needle {k} frames differ from its clip: {inside}"
        # The frames just outside the window are haystack, not the needle's first or last frame.
        if first > 0:
            assert np.abs(frames[first - 1] - clip[0]).mean() > 10
        if first + per_needle < len(frames):
            assert np.abs(frames[first + per_needle] - clip[-1]).mean() > 10
    table = needle.merge(cfg, out)
    assert table.height == 12 and set(table["needle_position"]) == {0, 1, 2}
    assert pl.read_parquet(out / "needles.parquet").equals(table)


def _clip(path: Path, seconds: float, color: str) -> None:
    run_ffmpeg(["-y", "-f", "lavfi", "-i", f"color=c={color}:s=160x90:r=25:d={seconds}", "-pix_fmt", "yuv420p",
                str(path)], what="test clip")


def test_user_clips_and_questions_rotate_over_positions(tmp_path):
    clips, hay = tmp_path / "clips", tmp_path / "hay"
    clips.mkdir()
    hay.mkdir()
    for i, color in enumerate(["red", "green", "blue"]):
        _clip(clips / f"c{i}.mp4", 1.5, color)
    for name in ("a", "b"):
        _clip(hay / f"{name}.mp4", 8, "gray")
    rows = [{"video_id": f"c{i}", "qid": f"c{i}_q{j}", "task_type": "L", "question": f"clip {i} q {j}?",
             "options": ["w", "x", "y", "z"], "answer": "ABCD"[j],
             **({"evidence_start_s": 0.5, "evidence_end_s": 9.0} if j == 0 else {})}
            for i in range(3) for j in range(4)]
    qfile = tmp_path / "clip_questions.jsonl"
    qfile.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _cfg(clips_dir=str(clips), clip_questions=[str(qfile)], haystacks_dir=str(hay))
    assert needle.video_ids(cfg) == ["needle_a", "needle_b"]
    orders = {}
    for video_id in needle.video_ids(cfg):
        questions = [json.loads(line) for line in needle.build(cfg, tmp_path / "out", video_id).read_text().splitlines()]
        assert len(questions) == 12
        orders[video_id] = [q["needle_id"] for q in questions if q["qid"].endswith("_q1")]
        first = questions[0]  # clip at position 0: starts the video; its evidence is clamped into the needle
        assert (first["needle_start_s"], first["needle_end_s"]) == (0.0, 1.6)  # 1.5 s at 5 fps → 8 frames
        assert (first["evidence_start_s"], first["evidence_end_s"]) == (0.5, 1.6)
        assert questions[4]["needle_start_s"] == 1.6 + 4.0  # after half of the 8 s haystack
        assert len(_frames(tmp_path / "out" / "videos" / f"{video_id}.mp4", cfg)) == 8 * 5 + 3 * 8
    assert orders == {"needle_a": ["c0", "c1", "c2"], "needle_b": ["c1", "c2", "c0"]}


def test_user_clips_need_one_per_position(tmp_path):
    with pytest.raises(ValueError, match="3 user clips for 5 positions"):
        needle.user_clip_order(_cfg(positions=[0, 0.25, 0.5, 0.75, 1]), ["a", "b", "c"], 0)
    with pytest.raises(ValueError, match="clips_dir and clip_questions go together"):
        _cfg(clips_dir="x")


def test_needle_dataset_plans_its_own_videos_before_ingest(tmp_path):
    """The DAG of dataset=needle: one needle_video job per planned video, then the question file, then ingest."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(ROOT / "Snakefile"), "--directory",
                           str(tmp_path), "--config", "overrides=dataset=needle method=[random]",
                           "--", "results/questions.parquet"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    assert "needle_video" in text and "needle_questions" in text
    assert "results/needle/videos/needle_0400s_01.mp4" in text


def test_needle_figure_counts_per_length_and_position(tmp_path):
    from senri.report import figures

    needles = pl.DataFrame({"video_id": ["v1"] * 2 + ["v2"] * 2, "qid": ["a", "b", "c", "d"],
                            "haystack_s": [400.0, 400.0, 800.0, 800.0], "needle_position": [0, 1, 0, 1],
                            "needle_fraction": [0.0, 1.0, 0.0, 1.0]})
    scored = pl.DataFrame({"method": ["blind"] * 4 + ["memory_search"] * 4, "model": ["m"] * 8,
                           "video_id": ["v1", "v1", "v2", "v2"] * 2, "qid": ["a", "b", "c", "d"] * 2,
                           "correct": [False, True, False, False, True, True, True, False]})
    table = figures.needle_accuracy(scored, needles)
    by_length = table.filter((pl.col("axis") == "haystack_s") & (pl.col("method") == "memory_search"))
    assert by_length.select("value", "correct", "n").rows() == [(400.0, 2, 2), (800.0, 1, 2)]
    by_position = table.filter((pl.col("axis") == "needle_position") & (pl.col("method") == "blind"))
    assert by_position.select("value", "correct", "n").rows() == [(0.0, 0, 2), (1.0, 1, 2)]
    png = figures.needle_curves(table, tmp_path)
    assert png is not None and png.is_file() and (tmp_path / "needle.svg").is_file()
    assert figures.needle_curves(pl.DataFrame(), tmp_path) is None


def test_task_subset_keeps_letters_balanced():
    cfg = _cfg(positions=[0.0, 0.25, 0.5, 0.75, 1.0], tasks=["L", "RER"])
    questions = needle.generated_questions(needle.plan_needles(cfg, "v"), "v", cfg.seed, cfg.tasks)
    assert Counter(q["task_type"] for q in questions) == {"L": 5, "RER": 5}
    assert sorted(Counter(q["answer"] for q in questions).values()) == [2, 2, 3, 3]
    with pytest.raises(ValueError, match="tasks"):
        _cfg(tasks=["NP"])

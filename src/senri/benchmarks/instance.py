"""Demo-sized instances of the native benchmarks: a few short generated videos, named by each benchmark's
file rule, and a question file in its native format, laid out under one folder as the benchmark ships
(``dataset.root``). For tests and for trying ``dataset=<benchmark> dataset.root=<folder>`` without a download.

The questions are placeholders about test patterns (the answers follow no content); each instance carries one
record of the benchmark's known quirks (a repeated option, an answer that is not an option, …) unless
``quirks=False``, so a run shows how it is kept, flagged and scored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import polars as pl

from senri.media import run_ffmpeg
from senri.records import LETTERS

#: YouTube-like ids, two of them starting with "-" and "_" as 24 of Video-MME's do.
YOUTUBE_IDS = ("-ApL8d6tX5U", "_tvmjsKXTu8", "fFjv93ACGo8")


@dataclass(frozen=True)
class InstanceSize:
    videos: int = 2                # videos (MLVU: per task folder of the shared file name, see write_mlvu)
    questions_per_video: int = 2
    seconds: float = 6.0           # video length; each video is a second longer than the one before
    fps: int = 4
    size: str = "160x120"
    #: False: empty files named by the file rule instead of encoded videos (planning and ingest tests only).
    encode: bool = True


def make_video(path: Path, seconds: float, size: InstanceSize) -> Path:
    """A small H.264 test-pattern video with a keyframe every second."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not size.encode:
        path.touch()
        return path
    run_ffmpeg(["-y", "-f", "lavfi", "-i", f"testsrc2=s={size.size}:r={size.fps}:d={seconds:g}", "-c:v", "libx264",
                "-g", str(size.fps), "-pix_fmt", "yuv420p", "-threads", "1", str(path)], what=f"instance video {path}")
    return path


def _letter(k: int) -> str:
    return LETTERS[k % len(LETTERS)]


def write_videomme(root: Path, size: InstanceSize, quirks: bool = True, layout: str = "parquet") -> Path:
    """``videomme/test-00000-of-00001.parquet`` (or the nested ``videomme_json_file.json``) and ``data/<id>.mp4``."""
    ids = [YOUTUBE_IDS[i % len(YOUTUBE_IDS)] + ("" if i < len(YOUTUBE_IDS) else str(i)) for i in range(size.videos)]
    splits = ("short", "medium", "long")
    rows, nested = [], []
    for i, youtube in enumerate(ids):
        number = f"{i + 1:03d}"
        video = {"video_id": number, "duration": splits[i % 3], "domain": "Knowledge",
                 "sub_category": "Humanity & History", "url": f"https://www.youtube.com/watch?v={youtube}",
                 "videoID": youtube}
        questions = []
        for k in range(size.questions_per_video):
            options = [f"{letter}. Pattern {k + j}." for j, letter in enumerate(LETTERS)]
            if quirks and i == 0 and k == 0:
                options[3] = "D. Pattern 2."  # VM8: two options with the same text after the letter
                options[2] = "C. Pattern 2."
            questions.append({"question_id": f"{number}-{k + 1}", "task_type": "Counting Problem",
                              "question": f"How many colour bars are shown ({k + 1})?", "options": options,
                              "answer": _letter(i + k)})
        rows += [{**video, **q} for q in questions]
        nested.append({**{k: v for k, v in video.items() if k != "videoID"}, "url": youtube, "questions":
                       [{**q, "response": ""} for q in questions]})
        make_video(root / "data" / f"{youtube}.mp4", size.seconds + i, size)
    if layout == "json":
        path = root / "videomme_json_file.json"
        path.write_text(json.dumps(nested, indent=2))
        return path
    path = root / "videomme" / "test-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(rows).select("video_id", "duration", "domain", "sub_category", "url", "videoID", "question_id",
                              "task_type", "question", "options", "answer").write_parquet(path)
    return path


def lvbench_question(stem: str, options: list[str]) -> str:
    """LV3/LV4: the stem, then one "(X) text" line per option."""
    return "\n".join([stem, *(f"({letter}) {text}" for letter, text in zip("ABCDEF", options))])


def write_lvbench(root: Path, size: InstanceSize, quirks: bool = True, layout: str = "key") -> Path:
    """``video_info.meta.jsonl`` and ``videos/<key>.mp4`` (``layout="index"``: video2dataset's
    ``videos/00000/0000000<i>.mp4``)."""
    kinds = ["entity recognition", "event understanding", "key information retrieval", "temporal grounding",
             "reasoning", "summarization"]
    lines, uid = [], 0
    for i in range(size.videos):
        key = YOUTUBE_IDS[i % len(YOUTUBE_IDS)] + ("" if i < len(YOUTUBE_IDS) else str(i))
        seconds = size.seconds + i
        qa = []
        for k in range(size.questions_per_video):
            options = [f"pattern {k + j} (bars)" for j in range(4)]
            if quirks and i == 0 and k == 0:
                options[3] = options[2]
            qa.append({"uid": str(uid) if uid % 2 else uid, "question": lvbench_question(f"What is shown at {k} s?", options),
                       "answer": _letter(i + k), "question_type": [kinds[uid % 6], kinds[(uid + 2) % 6]][: 1 + uid % 2],
                       "time_reference": f"00:0{k}-00:0{k + 1}"})
            uid += 1
        lines.append({"key": key, "type": "documentary", "qa": qa,
                      "video_info": {"duration_minutes": seconds / 60, "fps": float(size.fps),
                                     "resolution": {"width": 160, "height": 120}}})
        file = f"videos/{i // 10000:05d}/{i:08d}.mp4" if layout == "index" else f"videos/{key}.mp4"
        make_video(root / file, seconds, size)
    path = root / "video_info.meta.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


#: MLVU's seven multiple-choice task files (dev), by folder name and question_type.
MLVU_TASKS = (("1_plotQA", "plotQA"), ("2_needle", "findNeedle"), ("3_ego", "ego"), ("4_count", "count"),
              ("5_order", "order"), ("6_anomaly_reco", "anomaly_reco"), ("7_topic_reasoning", "topic_reasoning"))


def write_mlvu(root: Path, size: InstanceSize, quirks: bool = True) -> Path:
    """``MLVU/json/<n>_<task>.json`` (all seven; questions in plotQA and topic_reasoning, the others empty) and
    ``MLVU/video/<task folder>/movie101_<i>.mp4``: the same file names in both folders, as in the real set (ML5)."""
    json_dir = root / "MLVU" / "json"
    json_dir.mkdir(parents=True, exist_ok=True)
    for t, (folder, task) in enumerate(MLVU_TASKS):
        records = []
        if folder in ("1_plotQA", "7_topic_reasoning"):
            for i in range(size.videos):
                name = f"movie101_{i + 1}.mp4"
                seconds = size.seconds + i + t
                for k in range(size.questions_per_video):
                    candidates = [f"Pattern {k + j}" for j in range(4)]
                    answer = candidates[(i + k) % 4]
                    if quirks and folder == "1_plotQA" and i == 0 and k == 0:
                        candidates[3] = candidates[1]  # ML8: the answer text occurs twice (the last counts)
                        answer = candidates[1]
                    records.append({"video": name, "duration": seconds, "question": f"What is shown ({k})?",
                                    "candidates": candidates, "answer": answer, "question_type": task})
                make_video(root / "MLVU" / "video" / folder / name, seconds, size)
        (json_dir / f"{folder}.json").write_text(json.dumps(records, indent=2))
    return json_dir


def write_egomem(root: Path, size: InstanceSize, quirks: bool = True) -> Path:
    """``EgoMem.json`` (Detail questions first, then Event, as the release orders them) and
    ``videos/<videoID>.mp4``."""
    names = ("JAKE", "ALICE", "TASHA", "LUCIA", "KATRINA", "SHURE")
    ids = [f"A{i % 6 + 1}_{names[i % 6]}_DAY{i // 6 + 1}" for i in range(size.videos)]
    records = []
    for kind in ("Detail", "Event"):
        for i, video_id in enumerate(ids):
            for k in range(size.questions_per_video):
                answer = _letter(i + k)
                if quirks and kind == "Event" and i == 0 and k == 0:
                    answer = "E"  # EM6: an answer that is not an option
                records.append({"videoID": video_id, "question_id": str(len(records)), "type": kind,
                                "question": f"Which pattern did I see ({kind}, {k})?",
                                "options": [f"{letter}. Pattern {k + j}." for j, letter in enumerate(LETTERS)],
                                "answer": answer})
    for i, video_id in enumerate(ids):
        make_video(root / "videos" / f"{video_id}.mp4", size.seconds + i, size)
    path = root / "EgoMem.json"
    path.write_text(json.dumps(records, indent=4))
    return path


WRITERS: dict[str, Callable[..., Path]] = {"videomme": write_videomme, "lvbench": write_lvbench,
                                           "mlvu": write_mlvu, "egomem": write_egomem}


def write_instance(benchmark: str, root: str | Path, size: InstanceSize = InstanceSize(), quirks: bool = True,
                   **layout: str) -> Path:
    """Write a demo-sized instance of ``benchmark`` under ``root``; returns its question file (or folder).
    ``dataset=<benchmark> dataset.root=<root>`` reads it with the shipped config."""
    if benchmark not in WRITERS:
        raise ValueError(f"no instance writer for benchmark {benchmark!r}; known: {', '.join(WRITERS)}")
    return WRITERS[benchmark](Path(root), size, quirks, **layout)

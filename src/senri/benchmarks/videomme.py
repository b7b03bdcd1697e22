"""Video-MME (w/o subtitles): the official parquet (one row per question) or the nested JSON the official scorer
reads (one object per video with its ``questions``), spec VM1–VM8.

The video file is the YouTube id (``videoID``, or the ``url``'s ``v=`` parameter or bare id):
``data/<id>.mp4|.MP4|.mkv`` under ``dataset.videos_dir``; the three-digit ``video_id`` names the file only where a
file has no YouTube id (the official template). The preset is VideoLucy's by the official split label.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Mapping
from urllib.parse import parse_qs, urlparse

import polars as pl

from senri.benchmarks.layouts import Breakdown, Column, Figure, Layout
from senri.benchmarks.base import (MISSING, Benchmark, NativeSet, NativeVideo, answer_flags, describe, facet,
                                   file_error, id_field, load_json, make_question, note_unread_fields, option_flags,
                                   option_list, question_files, strip_letter_prefixes, text_field, unusable_video_id,
                                   with_id)

SPLITS = ("short", "medium", "long")
#: VM5's twelve task types, in the order the official scorer lists them.
TASK_TYPES = ("Temporal Perception", "Spatial Perception", "Attribute Perception", "Action Recognition",
              "Object Recognition", "OCR Problems", "Counting Problem", "Temporal Reasoning", "Spatial Reasoning",
              "Action Reasoning", "Object Reasoning", "Information Synopsis")
VIDEO_EXTENSIONS = (".mp4", ".MP4", ".mkv")  # VM6: lmms-eval tries these three
YOUTUBE_ID = re.compile(r"^[A-Za-z0-9_-]{6,}$")


def youtube_id(row: Mapping[str, Any]) -> str | None:
    """VM6: ``videoID`` (parquet), else the ``url``: its ``v=`` parameter, its last path part (youtu.be), or the
    bare id some copies store there (the 900-video nested JSON)."""
    if isinstance(row.get("videoID"), str) and row["videoID"].strip():
        return row["videoID"].strip()
    url = row.get("url")
    if not isinstance(url, str) or not url.strip():
        return None
    url = url.strip()
    if YOUTUBE_ID.match(url):
        return url
    parsed = urlparse(url)
    if "v" in parse_qs(parsed.query):
        return parse_qs(parsed.query)["v"][0]
    tail = parsed.path.rstrip("/").rpartition("/")[2]
    return tail if YOUTUBE_ID.match(tail) else None


#: The fields senri reads (VM1): the video's and the question's; ``response`` (the scorer's input) and ``url`` too.
VIDEO_FIELDS = {"video_id", "duration", "domain", "sub_category", "url", "videoID", "questions"}
QUESTION_FIELDS = {"question_id", "task_type", "question", "options", "answer", "response"}


def _rows(path: Path, dataset: Mapping[str, Any], native: NativeSet) -> Iterator[tuple[str, dict, dict]]:
    """(record name, video fields, question fields) per question, from the parquet or the nested JSON; a video
    or question that is not an object is a problem (the rest are still read)."""
    if path.suffix.lower() == ".parquet":
        try:
            rows = pl.read_parquet(path).iter_rows(named=True)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise file_error(path, f"cannot be read as Parquet ({' '.join(str(exc).split())[:200]})") from None
        for index, row in enumerate(rows):
            yield f"row [{index}]", row, row
        return
    data = load_json(path, bool(dataset.get("repair_json", False)), native)
    if not isinstance(data, list):
        raise file_error(path, f"expected a JSON list of videos (Video-MME's nested layout), got {describe(data)}")
    for index, video in enumerate(data):
        where = f"item [{index}]"
        if not isinstance(video, dict):
            native.problem(str(path), where, None, f"expected a video object, got {describe(video)}")
            continue
        questions = video.get("questions", MISSING)
        if questions is MISSING:  # a flat row, as in the parquet
            yield where, video, video
            continue
        where = f"{where} (video_id {video.get('video_id')!r})"
        if not isinstance(questions, list):
            native.problem(str(path), where, "questions", f"expected a list of questions, got {describe(questions)}")
            continue
        for k, question in enumerate(questions):
            if not isinstance(question, dict):
                native.problem(str(path), f"{where}, questions [{k}]", None,
                               f"expected a question object, got {describe(question)}")
                continue
            yield f"{where}, questions [{k}]", video, question


def read(dataset: Mapping[str, Any]) -> NativeSet:
    native = NativeSet()
    for path in question_files(dataset):
        file = str(path)
        if not path.exists():
            raise file_error(path, "file not found (Video-MME: videomme/test-00000-of-00001.parquet or the nested "
                                   "JSON)")
        without_youtube_id, records = 0, 0
        fields: Counter[str] = Counter()
        for where, video, row in _rows(path, dataset, native):
            records += 1
            fields.update(set(video) | set(row))
            qid = id_field(native, file, where, row, "question_id")
            where = with_id(where, "question_id", qid)
            question = text_field(native, file, where, row, "question")
            options = option_list(native, file, where, row, "options")
            answer = text_field(native, file, where, row, "answer")
            split = text_field(native, file, where, video, "duration", required=False)
            task_type = text_field(native, file, where, row, "task_type", required=False)
            domain = text_field(native, file, where, video, "domain", required=False)
            sub_category = text_field(native, file, where, video, "sub_category", required=False)
            if None in (qid, question, options, answer):
                continue
            number = str(video.get("video_id", "")).strip()
            file_id = youtube_id(video)
            if file_id is None:
                without_youtube_id += 1
                file_id = number
            if unusable_video_id(native, file, qid, file_id):
                continue
            options = strip_letter_prefixes(options)
            flags = []
            for flag, detail in option_flags(options) + answer_flags(answer, len(options)):
                flags.append(native.flag(file, qid, file_id, flag, detail))
            if len(options) != 4:
                flags.append(native.flag(file, qid, file_id, "option_count",
                                         f"{len(options)} options; Video-MME's have four (VM4)"))
            if split not in SPLITS:
                flags.append(native.flag(file, qid, file_id, "unknown_split",
                                         f"duration {split!r} is not one of {', '.join(SPLITS)}"))
            absent = [k for k, v in (("task_type", task_type), ("domain", domain), ("sub_category", sub_category))
                      if not v]
            if absent:
                flags.append(native.flag(file, qid, file_id, "missing_field",
                                         f"no {', '.join(absent)}: not counted in those breakdowns"))
            native.questions.append(make_question(
                benchmark="videomme", video_id=file_id, qid=qid,
                categories=([task_type] if task_type else []) + facet("domain", domain)
                + facet("sub_category", sub_category),
                question=question, options=options, answer=answer, flags=flags, split=split or None))
            if file_id not in native.videos:
                native.videos[file_id] = NativeVideo(file_id, tuple(f"data/{file_id}{ext}" for ext in VIDEO_EXTENSIONS),
                                                     split=split or None)
        if not records:
            native.problem(file, "", None, "holds no questions")
        note_unread_fields(native, file, fields, VIDEO_FIELDS | QUESTION_FIELDS)
        if without_youtube_id:
            native.note(file, f"{without_youtube_id} question(s) without a YouTube id (no videoID or url): "
                              f"their video file is named by the three-digit video_id")
    return native.check()


def preset(dataset: Mapping[str, Any], video: NativeVideo) -> str | None:
    """VideoLucy's appendix: ``videomme_<split>`` by the official split label (not the measured length)."""
    return f"videomme_{video.split}" if video.split in SPLITS else None


#: The official scorer's video domains and sub-categories, in the order it prints them (eval_your_results.py).
DOMAINS = ("Knowledge", "Film & Television", "Sports Competition", "Artistic Performance", "Life Record",
           "Multilingual")
SUB_CATEGORIES = ("Humanity & History", "Literature & Art", "Biology & Medicine", "Finance & Commerce", "Astronomy",
                  "Geography", "Law", "Life Tip", "Technology", "Animation", "Movie & TV Show", "Documentary",
                  "News Report", "Esports", "Basketball", "Football", "Athletics", "Other Sports", "Stage Play",
                  "Magic Show", "Variety Show", "Acrobatics", "Handicraft", "Food", "Fashion", "Daily Life", "Travel",
                  "Pet & Animal", "Exercise", "Multilingual")

#: VideoLucy's Table 1 (micro per split, Avg over every answered question, VM11), and the official scorer's
#: per-split and whole-set breakdowns by domain, sub-category and task type.
LAYOUT = Layout(
    "videomme", "Video-MME w/o subtitles (VideoLucy Table 1 layout)",
    (Column("short", "Short", "split", ("short",)), Column("medium", "Medium", "split", ("medium",)),
     Column("long", "Long", "split", ("long",)), Column("avg", "Avg", "all")),
    headline="avg",
    scorers=("videomme_official", "videomme_old", "lmms_eval_2025", "lmms_eval_2026", "vlmevalkit_videomme",
             "senri_prereading", "senri_strict", "method"),
    published="videolucy_table1_videomme.csv",
    figure=Figure(("short", "medium", "long"), "Accuracy by duration split (official scorer)"),
    breakdowns=(Breakdown("domain", "Video domains", "domain", by_split=True, order=DOMAINS),
                Breakdown("sub_category", "Video sub-categories", "sub_category", by_split=True,
                          order=SUB_CATEGORIES),
                Breakdown("task_type", "Task categories", "category", by_split=True, order=TASK_TYPES)))

VIDEOMME = Benchmark(name="videomme", title="Video-MME (w/o subtitles)", categories=TASK_TYPES, splits=SPLITS,
                     official_scorer="videomme_official", layout=LAYOUT, read=read, preset=preset,
                     options=("root", "video_ids", "splits", "repair_json"))

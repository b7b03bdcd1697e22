"""LVBench: ``video_info.meta.jsonl``, one video object per line with its ``qa`` list (spec LV1–LV5).

The options live inside the question text ("(A) text" lines after the stem) and are split out; the multi-label
``question_type`` becomes the leaderboard's ER/EU/KIR/TG/Rea/Sum; ``uid`` is kept as a string. Video files are
``<key>.mp4`` (``dataset.video_layout: key``) or video2dataset's index-named shards (``index``: the line order of
the meta file, ``dataset.index_pattern``). The preset is VideoLucy's by duration bin (``dataset.preset_bins`` on
the meta file's ``video_info.duration_minutes``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Mapping

from senri.benchmarks.layouts import Breakdown, Column, Figure, Layout
from senri.benchmarks.base import (MISSING, NATIVE_VIDEO_ID, Benchmark, NativeSet, NativeVideo, answer_flags,
                                   describe, duration_field, facet, file_error, id_field, make_question,
                                   note_unread_fields, option_flags, preset_by_bins, question_files, read_text,
                                   text_field, unusable_video_id, with_id)

#: LV3/LV6: question_type text → the leaderboard's abbreviation, in Table 2's column order.
CATEGORY_CODES: dict[str, str] = {"entity recognition": "ER", "event understanding": "EU",
                                  "key information retrieval": "KIR", "temporal grounding": "TG",
                                  "reasoning": "Rea", "summarization": "Sum"}
CATEGORIES = tuple(CATEGORY_CODES.values())
#: VideoLucy's appendix bins (1800–3600 / 3600–5400 / > 5400 s); shorter videos take lvbench_short (open edge).
DEFAULT_BINS: dict[str, float | None] = {"lvbench_short": 3600.0, "lvbench_medium": 5400.0, "lvbench_long": None}
DEFAULT_INDEX_PATTERN = "videos/{shard:05d}/{index:08d}.mp4"
OPTION_LINE = re.compile(r"\n\s*\(([A-F])\)\s?")
TIME_SPAN = re.compile(r"^\s*((?:\d+:)?\d+:\d+(?:\.\d+)?)\s*-\s*((?:\d+:)?\d+:\d+(?:\.\d+)?)\s*$")


def split_options(text: str) -> tuple[str, list[str]] | None:
    """LV4: the stem and the option texts of a question whose options are "(A) …" lines, or None when its
    lines do not run A, B, C, … from the first line break before "(A)"."""
    marks = list(OPTION_LINE.finditer(text))
    start = next((i for i, m in enumerate(marks) if m.group(1) == "A"), None)
    if start is None:
        return None
    marks = marks[start:]
    expected = "ABCDEF"
    kept = []
    for i, mark in enumerate(marks):
        if mark.group(1) != expected[len(kept)]:
            continue  # "(B)" inside an option's own text, not at a new option
        kept.append(mark)
        if len(kept) == len(expected):
            break
    stem = text[: kept[0].start()].strip()
    options = [text[m.end(): (kept[i + 1].start() if i + 1 < len(kept) else len(text))].strip()
               for i, m in enumerate(kept)]
    return stem, options


def seconds(clock: str) -> float:
    parts = [float(p) for p in clock.split(":")]
    total = 0.0
    for part in parts:
        total = total * 60 + part
    return total


def time_reference(value: Any) -> tuple[float, float] | None:
    """LV3: "MM:SS-MM:SS" (minutes may exceed 59) or "H:MM:SS-H:MM:SS" → seconds; None if absent or unreadable."""
    match = TIME_SPAN.match(value) if isinstance(value, str) else None
    return (seconds(match.group(1)), seconds(match.group(2))) if match else None


def video_files(dataset: Mapping[str, Any], key: str, index: int) -> tuple[str, ...]:
    """LV5: ``<key><ext>`` (and ``videos/<key><ext>``), or the index-named video2dataset file."""
    if dataset.get("video_layout", "key") == "index":
        per_shard = int(dataset.get("samples_per_shard") or 10000)
        pattern = str(dataset.get("index_pattern") or DEFAULT_INDEX_PATTERN)
        return (pattern.format(index=index, shard=index // per_shard, index_in_shard=index % per_shard),)
    return tuple(f"{folder}{key}{ext}" for folder in ("", "videos/") for ext in dataset.get("video_ext", [".mp4"]))


#: LV2/LV3: the video's and the question's fields senri reads.
VIDEO_FIELDS = {"key", "type", "qa", "video_info"}
QUESTION_FIELDS = {"uid", "question", "answer", "question_type", "time_reference"}


def read(dataset: Mapping[str, Any]) -> NativeSet:
    native = NativeSet()
    bins = dataset.get("preset_bins") or DEFAULT_BINS
    for path in question_files(dataset):
        file = str(path)
        if not path.exists():
            raise file_error(path, "file not found (LVBench: video_info.meta.jsonl)")
        index, records = -1, 0
        fields: Counter[str] = Counter()
        for line_no, line in enumerate(read_text(path).splitlines(), start=1):
            if not line.strip():
                continue
            index += 1  # video2dataset numbers the meta file's videos in line order
            try:
                video = json.loads(line)
            except json.JSONDecodeError as exc:
                raise file_error(path, f"line {line_no}, column {exc.colno}: invalid JSON ({exc.msg})") from None
            where = f"line {line_no}"
            if not isinstance(video, dict):
                native.problem(file, where, None, f"expected a video object, got {describe(video)}")
                continue
            fields.update(list(video))
            key = text_field(native, file, where, video, "key")
            if key is None:
                continue
            where = f"{where} (key {key!r})"
            qa = video.get("qa", MISSING)
            if not isinstance(qa, list):
                native.problem(file, where, "qa", "missing" if qa is MISSING else
                               f"expected a list of question objects, got {describe(qa)}")
                continue
            info = video.get("video_info") if isinstance(video.get("video_info"), dict) else {}
            minutes, duration_flags = duration_field(native, file, "", key, info.get("duration_minutes"),
                                                     "video_info.duration_minutes")
            duration = minutes * 60 if minutes is not None else None
            split = preset_by_bins(bins, duration).removeprefix("lvbench_") if duration is not None else None
            if NATIVE_VIDEO_ID.match(key):  # else each of its questions is left out as bad_video_id
                native.videos[key] = NativeVideo(key, video_files(dataset, key, index), split=split, duration_s=duration)
            for k, item in enumerate(qa):
                records += 1
                if not isinstance(item, dict):
                    native.problem(file, f"{where}, qa [{k}]", None, f"expected a question object, got {describe(item)}")
                    continue
                fields.update(list(item))
                _question(native, file, f"{where}, qa [{k}]", key, split, item, facet("video_type", video.get("type")),
                          duration_flags)
        if not records:
            native.problem(file, "", None, "holds no questions")
        note_unread_fields(native, file, fields, VIDEO_FIELDS | QUESTION_FIELDS)
    return native.check()


def _question(native: NativeSet, file: str, where: str, key: str, split: str | None, item: Mapping[str, Any],
              facets: list[str], video_flags: list[str]) -> None:
    uid = id_field(native, file, where, item, "uid")
    where = with_id(where, "uid", uid)
    text = text_field(native, file, where, item, "question")
    answer = text_field(native, file, where, item, "answer")
    if None in (uid, text, answer) or unusable_video_id(native, file, uid, key):
        return
    flags = list(video_flags)
    parts = split_options(text)
    if parts is None:
        stem, options = text.strip(), []
        flags.append(native.flag(file, uid, key, "no_options", "no '(A) …' option lines in the question text"))
    else:
        stem, options = parts
    for flag, detail in option_flags(options) + answer_flags(answer, len(options)):
        flags.append(native.flag(file, uid, key, flag, detail))
    types = item.get("question_type")
    if types is None or types == []:
        types = []
        flags.append(native.flag(file, uid, key, "missing_field", "no question_type: in no category column"))
    elif isinstance(types, str):
        # LVBench's scorer iterates the list; a string would count once per character: kept whole and said
        flags.append(native.flag(file, uid, key, "question_type_not_a_list",
                                 f"question_type is the text {types!r}, not a list: read as one category"))
        types = [types]
    elif not isinstance(types, list):
        native.problem(file, where, "question_type", f"expected a list of category names, got {describe(types)}")
        return
    categories = []
    for kind in types:
        code = CATEGORY_CODES.get(str(kind).strip().lower())
        if code is None:
            flags.append(native.flag(file, uid, key, "unknown_category", f"question_type {kind!r}"))
            code = str(kind).strip()
        if code not in categories:
            categories.append(code)
    evidence = time_reference(item.get("time_reference"))
    if item.get("time_reference") and evidence is None:
        flags.append(native.flag(file, uid, key, "bad_time_reference", f"{item.get('time_reference')!r}"))
    native.questions.append(make_question(benchmark="lvbench", video_id=key, qid=uid, categories=categories + facets,
                                          question=stem, options=options, answer=answer, flags=flags, split=split,
                                          evidence=evidence))


def preset(dataset: Mapping[str, Any], video: NativeVideo) -> str | None:
    """VideoLucy's appendix: the duration bin of the meta file's ``duration_minutes``; a video whose meta has no
    duration takes ``memory.preset`` (``auto``: by measured length, whose bins above 1800 s have the same
    settings)."""
    if video.duration_s is None:
        return None
    return preset_by_bins(dataset.get("preset_bins") or DEFAULT_BINS, video.duration_s)


#: VideoLucy's Table 2 (multi-label categories, Overall over questions, LV6/LV10); compute_accuracy's own
#: per-category accuracies (every category a question names, each counted once per question).
LAYOUT = Layout(
    "lvbench", "LVBench (VideoLucy Table 2 layout)",
    tuple(Column(k.lower(), k, "category", (k,)) for k in CATEGORIES) + (Column("overall", "Overall", "all"),),
    headline="overall",
    scorers=("lvbench_official", "lvbench_polish", "lmms_eval_2025", "lmms_eval_2026", "senri_prereading",
             "senri_strict", "method"),
    published="videolucy_table2_lvbench.csv",
    figure=Figure(tuple(k.lower() for k in CATEGORIES), "Accuracy by question category (official scorer)"),
    breakdowns=(Breakdown("category", "Question categories (compute_accuracy)", "category", order=CATEGORIES),))

LVBENCH = Benchmark(name="lvbench", title="LVBench", categories=CATEGORIES, splits=("short", "medium", "long"),
                    official_scorer="lvbench_official", layout=LAYOUT, read=read, preset=preset,
                    options=("root", "video_ids", "splits", "video_layout", "samples_per_shard", "index_pattern",
                             "preset_bins"),
                    glossary=(("question categories", {code: name for name, code in CATEGORY_CODES.items()}),))

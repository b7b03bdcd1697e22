"""EgoMem (VideoLucy's benchmark on EgoLife): ``EgoMem.json``, a list of 504 questions (spec EM1–EM7).

Categories: the question's ``type`` (Event, Detail) and, for Event questions, the positional subtype as a facet
``subtype=…`` (EM4: the k-th Event question of a video). Videos ``videos/<videoID>.mp4``; one preset, ``egomem``.
"""

from __future__ import annotations

from typing import Any, Mapping

from senri.benchmarks.layouts import Breakdown, Column, Figure, Layout
from senri.benchmarks.base import (Benchmark, NativeFileError, NativeSet, NativeVideo, answer_flags, facet, load_json,
                                   make_question, option_flags, question_files, strip_letter_prefixes,
                                   unusable_video_id)

TYPES = ("Event", "Detail")
#: EM4: the subtype of a video's k-th Event question (k = 0…5), in file order.
EVENT_SUBTYPES = ("Event Order", "Temporal Judge", "Temporal Align", "Event Context", "Event Rectification",
                  "Event Reconstruction")
#: EM6: records whose released answer or stem disagrees with the annotation files (annos.zip); kept as released
#: and flagged when the record still reads as described ((video, question_id) → (released answer, detail)).
KNOWN_DISPUTES: dict[tuple[str, str], tuple[str, str]] = {
    ("A6_SHURE_DAY1", "211"): ("D", "answer D; annos/detail and the paper's Table 10 evidence say C"),
    ("A1_JAKE_DAY1", "252"): ("", "stem's times (12:40 AM … 18:30 AM) differ from annos/event (12:40 PM … 6:30 PM)"),
}


def read(dataset: Mapping[str, Any]) -> NativeSet:
    native = NativeSet()
    for path in question_files(dataset):
        if not path.is_file():
            raise NativeFileError(f"{path}: file not found (EgoMem: EgoMem.json)")
        data = load_json(path, bool(dataset.get("repair_json", False)), native)
        if not isinstance(data, list):
            raise NativeFileError(f"{path}: expected a JSON list of questions (EgoMem.json)")
        events_seen: dict[str, int] = {}
        for index, record in enumerate(data):
            if not isinstance(record, dict):
                raise NativeFileError(f"{path}: item {index} is not an object")
            video_id = str(record.get("videoID", "")).strip()
            qid = str(record.get("question_id", index)).strip()
            if unusable_video_id(native, str(path), qid, video_id):
                continue
            options = strip_letter_prefixes([str(o).strip() for o in record.get("options") or []])
            answer = str(record.get("answer") or "").strip()
            flags = [native.flag(str(path), qid, video_id, flag, detail)
                     for flag, detail in option_flags(options) + answer_flags(answer, len(options))]
            dispute = KNOWN_DISPUTES.get((video_id, qid))
            if dispute and (not dispute[0] or dispute[0] == answer):
                flags.append(native.flag(str(path), qid, video_id, "disputed", dispute[1]))
            kind = str(record.get("type") or "").strip()
            categories = [kind] if kind else []
            if kind == "Event":
                k = events_seen.get(video_id, 0)
                events_seen[video_id] = k + 1
                if k < len(EVENT_SUBTYPES):
                    categories += facet("subtype", EVENT_SUBTYPES[k])
            elif kind not in TYPES:
                flags.append(native.flag(str(path), qid, video_id, "unknown_category", f"type {kind!r}"))
            native.questions.append(make_question(
                benchmark="egomem", video_id=video_id, qid=qid, categories=categories,
                question=str(record.get("question") or "").strip(), options=options, answer=answer, flags=flags))
            native.videos.setdefault(video_id, NativeVideo(video_id, (f"videos/{video_id}.mp4",)))
    return native


def preset(dataset: Mapping[str, Any], video: NativeVideo) -> str | None:
    """VideoLucy's appendix: one setting for every EgoMem video (≈ 6.33 h days)."""
    return "egomem"


#: VideoLucy's Table 4: Event, Detail and their mean (EM8); the accuracies per type and per Event subtype (EM4).
LAYOUT = Layout(
    "egomem", "EgoMem (VideoLucy Table 4 layout)",
    (Column("event", "Event", "category", ("Event",)), Column("detail", "Detail", "category", ("Detail",)),
     Column("avg", "Avg", "macro", ("event", "detail"))),
    headline="avg",
    scorers=("egomem_official", "videomme_official", "lmms_eval_2026", "senri_prereading", "senri_strict", "method"),
    published="videolucy_table4_egomem.csv",
    figure=Figure(("event", "detail"), "Accuracy by question type (official scorer)"),
    breakdowns=(Breakdown("type", "Question types", "category", order=TYPES),
                Breakdown("subtype", "Event subtypes", "subtype", order=EVENT_SUBTYPES)))

EGOMEM = Benchmark(name="egomem", title="EgoMem", categories=TYPES, splits=(), official_scorer="egomem_official",
                   layout=LAYOUT, read=read, preset=preset, options=("root", "video_ids", "splits", "repair_json"))

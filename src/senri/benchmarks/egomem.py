"""EgoMem (VideoLucy's benchmark on EgoLife): ``EgoMem.json``, a list of 504 questions (spec EM1–EM7).

Categories: the question's ``type`` (Event, Detail) and, for Event questions, the positional subtype as a facet
``subtype=…`` (EM4: the k-th Event question of a video). Videos ``videos/<videoID>.mp4``; one preset, ``egomem``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, Mapping

from senri.benchmarks.layouts import Breakdown, Column, Figure, Layout
from senri.benchmarks.base import (Benchmark, NativeSet, NativeVideo, answer_flags, describe, facet, file_error,
                                   id_field, load_json, make_question, note_unread_fields, option_flags, option_list,
                                   question_files, strip_letter_prefixes, text_field, unusable_video_id, with_id)
from senri.records import Question

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


#: EM1: exactly these keys.
RECORD_FIELDS = {"videoID", "question_id", "type", "question", "options", "answer"}


def read(dataset: Mapping[str, Any]) -> NativeSet:
    native = NativeSet()
    for path in question_files(dataset):
        file = str(path)
        if not path.exists():
            raise file_error(path, "file not found (EgoMem: EgoMem.json)")
        data = load_json(path, bool(dataset.get("repair_json", False)), native)
        if not isinstance(data, list):
            raise file_error(path, f"expected a JSON list of questions (EgoMem.json), got {describe(data)}")
        if not data:
            native.problem(file, "", None, "holds no questions")
        fields: Counter[str] = Counter()
        events: dict[str, list[Question]] = {}  # each video's Event questions in file order (EM4)
        for index, record in enumerate(data):
            where = f"item [{index}]"
            if not isinstance(record, dict):
                native.problem(file, where, None, f"expected a question object, got {describe(record)}")
                continue
            fields.update(list(record))
            qid = id_field(native, file, where, record, "question_id")
            where = with_id(where, "question_id", qid)
            video_id = text_field(native, file, where, record, "videoID")
            question = text_field(native, file, where, record, "question")
            options = option_list(native, file, where, record, "options")
            answer = text_field(native, file, where, record, "answer")
            kind = text_field(native, file, where, record, "type")
            if kind is not None and kind not in TYPES:
                # the subtypes are positional among a day's Event questions: a type read wrongly would shift them
                native.problem(file, where, "type", f"{kind!r} is not one of {', '.join(TYPES)}"
                               + (" (case matters)" if kind.capitalize() in TYPES else ""))
                kind = None
            if None in (qid, video_id, question, options, answer, kind):
                continue
            if unusable_video_id(native, file, qid, video_id):
                continue
            options = strip_letter_prefixes(options)
            flags = [native.flag(file, qid, video_id, flag, detail)
                     for flag, detail in option_flags(options) + answer_flags(answer, len(options))]
            if len(options) != 4:
                flags.append(native.flag(file, qid, video_id, "option_count",
                                         f"{len(options)} options; EgoMem's have four (EM1)"))
            dispute = KNOWN_DISPUTES.get((video_id, qid))
            if dispute and (not dispute[0] or dispute[0] == answer):
                flags.append(native.flag(file, qid, video_id, "disputed", dispute[1]))
            native.questions.append(make_question(
                benchmark="egomem", video_id=video_id, qid=qid, categories=[kind], question=question,
                options=options, answer=answer, flags=flags))
            if kind == "Event":
                events.setdefault(video_id, []).append(native.questions[-1])
            native.videos.setdefault(video_id, NativeVideo(video_id, (f"videos/{video_id}.mp4",)))
        _event_subtypes(native, file, events)
        note_unread_fields(native, file, fields, RECORD_FIELDS)
    return native.check()


def _event_subtypes(native: NativeSet, file: str, events: Mapping[str, list[Question]]) -> None:
    """EM4: the k-th Event question of a day (file order) is the k-th subtype; a seventh or later Event question
    of a day has no position among the six and is flagged ``no_subtype`` instead. (An unknown ``type`` is refused
    before this, so no question shifts the positions of the others.)"""
    by_id = {id(q): i for i, q in enumerate(native.questions)}
    for video_id, questions in events.items():
        for k, question in enumerate(questions):
            i = by_id[id(question)]
            if k < len(EVENT_SUBTYPES):
                native.questions[i] = replace(question, categories=[*question.categories,
                                                                    *facet("subtype", EVENT_SUBTYPES[k])])
            else:
                flag = native.flag(file, question.qid, video_id, "no_subtype",
                                   f"Event question {k + 1} of the day ({len(questions)} in all; EgoMem has "
                                   f"{len(EVENT_SUBTYPES)}): no positional subtype (EM4)")
                native.questions[i] = replace(question, flags=sorted({*question.flags, flag}))


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

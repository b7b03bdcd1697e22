"""MLVU (multiple-choice tasks): one JSON file per task, each a list of questions whose ``answer`` is the text of
a candidate (spec ML1–ML9); dev has four candidates, test up to six (A–F) and its own ``question_id``.

A question's letter is the position of its answer text among the candidates (ML7: the release's template keeps
the last position when the text occurs twice; ``dataset.mlvu_answer_position: first`` takes the first); a record
without candidates (the generation tasks sub_scene, summary) is left out and counted. Ids are stable where the
file has none: ``<task file stem>:<index>``. The video is ``video/<task folder>/<file>`` under
``dataset.videos_dir`` — the same file name in two task folders is two videos, so the video id is
``<task folder>__<file stem>``. The preset is VideoLucy's by duration bin (the record's ``duration``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from senri.benchmarks.layouts import Breakdown, Column, Figure, Layout
from senri.benchmarks.base import (Benchmark, NativeSet, NativeVideo, answer_flags, describe, duration_field,
                                   file_error, id_field, load_json, make_question, note_unread_fields, option_flags,
                                   option_list, preset_by_bins, question_files, text_field, unusable_video_id,
                                   with_id)
from senri.records import OPTION_LETTERS

#: The seven M-Avg tasks (dev), by the name every scorer uses (the file's "findNeedle" is "needle").
TASKS = ("plotQA", "needle", "ego", "count", "order", "anomaly_reco", "topic_reasoning")
#: Test-set task names beyond the dev seven (ML9).
TEST_TASKS = ("sportsQA", "tutorialQA")
TASK_NAMES = {"findNeedle": "needle", "needleQA": "needle"}
#: VideoLucy's appendix bins (0–600 / 600–1200 / 1200–3600 / > 3600 s); an edge takes the shorter bin.
DEFAULT_BINS: dict[str, float | None] = {"mlvu_short": 600.0, "mlvu_medium": 1200.0, "mlvu_long": 3600.0,
                                         "mlvu_extra_long": None}
VIDEO_ID_JOIN = "__"


def task_files(dataset: Mapping[str, Any]) -> list[Path]:
    """The task files: each ``questions`` entry is a file, or a folder whose ``*.json`` files are read in name
    order (``MLVU/json``); a folder without any, or a ``*.json`` that is itself a folder, is refused (a task
    never vanishes unsaid)."""
    files: list[Path] = []
    for path in question_files(dataset):
        if path.is_dir() and path.suffix.lower() == ".json":
            raise file_error(path, "is a folder, not a task file (MLVU: MLVU/json/<n>_<task>.json)")
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise file_error(path, "folder holds no *.json task file")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise file_error(path, "file not found (MLVU: MLVU/json/<n>_<task>.json)")
    return files


def answer_letter(answer: str, candidates: list[str], position: str) -> tuple[str, list[tuple[str, str]]]:
    """ML7: the letter of the candidate whose text is the answer; a test file's letter answer is taken as is."""
    hits = [i for i, c in enumerate(candidates) if c == answer]
    if len(hits) > 1:
        chosen = hits[-1] if position == "last" else hits[0]
        return OPTION_LETTERS[chosen], [("answer_text_repeated", f"answer text {answer!r} is candidate "
                                         f"{', '.join(OPTION_LETTERS[i] for i in hits)}; the {position} is taken")]
    if hits:
        return OPTION_LETTERS[hits[0]], []
    if answer in OPTION_LETTERS[: len(candidates)]:
        return answer, []
    if not answer:
        return "", []
    return "", [("answer_text_not_in_candidates", f"answer {answer!r} is no candidate's text: scored wrong")]


#: ML2 (dev) and ML9 (test): the fields senri reads.
RECORD_FIELDS = {"video", "video_name", "duration", "question", "candidates", "answer", "question_type",
                 "question_id", "scoring_points"}


def read(dataset: Mapping[str, Any]) -> NativeSet:
    native = NativeSet()
    bins = dataset.get("preset_bins") or DEFAULT_BINS
    position = str(dataset.get("mlvu_answer_position") or "last")
    for path in task_files(dataset):
        file = str(path)
        data = load_json(path, bool(dataset.get("repair_json", False)), native)
        if not isinstance(data, list):
            raise file_error(path, f"expected a JSON list of questions (an MLVU task file), got {describe(data)}")
        if not data:  # stated (ingest report, console, report's coverage block), the task's column empty
            native.flag(file, "", "", "empty_task_file", "the task file holds no questions: its task is absent from "
                                                         "this run's table")
            continue
        folder = path.stem
        left_out = 0
        fields: Counter[str] = Counter()
        # ML4: dev files have no ids (``<task file stem>:<index>``); a file with ids (test) needs one on every record
        with_ids = any(isinstance(r, dict) and r.get("question_id") is not None for r in data)
        for index, record in enumerate(data):
            where = f"item [{index}]"
            if not isinstance(record, dict):
                native.problem(file, where, None, f"expected a question object, got {describe(record)}")
                continue
            fields.update(list(record))
            if "candidates" not in record:
                left_out += 1
                continue
            if with_ids:
                qid = id_field(native, file, where, record, "question_id")
            else:
                qid = f"{folder}:{index}"
                qid = qid if native.claim_id(file, where, "question_id", qid) else None
            where = with_id(where, "question_id", qid)
            video_key = "video" if "video" in record or "video_name" not in record else "video_name"
            file_name = text_field(native, file, where, record, video_key)
            candidates = option_list(native, file, where, record, "candidates")
            answer_text = text_field(native, file, where, record, "answer")
            question = text_field(native, file, where, record, "question")
            if None in (qid, file_name, candidates, answer_text, question):
                continue
            video_id = f"{folder}{VIDEO_ID_JOIN}{Path(file_name).stem}"
            if unusable_video_id(native, file, qid, video_id):
                continue
            letter, notes = "", []
            if not question and not any(candidates) and not answer_text:
                notes.append(("empty_record", "empty question, candidates and answer: scored wrong"))
            else:
                letter, answer_notes = answer_letter(answer_text, candidates, position)
                notes += option_flags(candidates) + (answer_notes or answer_flags(letter, len(candidates)))
            task = text_field(native, file, where, record, "question_type", required=False) or ""
            task = TASK_NAMES.get(task, task)
            if not task:
                notes.append(("missing_field", "no question_type: in no task column"))
            elif task not in TASKS + TEST_TASKS:
                notes.append(("unknown_category", f"question_type {task!r} is not one of {', '.join(TASKS + TEST_TASKS)}"))
            flags = [native.flag(file, qid, video_id, flag, detail) for flag, detail in notes]
            duration, duration_flags = duration_field(native, file, qid, video_id, record.get("duration"), "duration")
            flags += duration_flags
            split = preset_by_bins(bins, duration).removeprefix("mlvu_") if duration is not None else None
            native.questions.append(make_question(
                benchmark="mlvu", video_id=video_id, qid=qid, categories=[task] if task else [], question=question,
                options=candidates, answer=letter, flags=flags, split=split))
            if video_id not in native.videos:
                native.videos[video_id] = NativeVideo(video_id, (f"video/{folder}/{file_name}",), split=split,
                                                      duration_s=duration)
        note_unread_fields(native, file, fields, RECORD_FIELDS)
        if left_out:
            native.note(file, f"{left_out} record(s) without candidates (a generation task) left out")
    if not native.questions and not native.problems:
        native.problem(", ".join(map(str, question_files(dataset))), "", None, "the task files hold no questions")
    return native.check()


def preset(dataset: Mapping[str, Any], video: NativeVideo) -> str | None:
    """VideoLucy's appendix: the duration bin of the record's ``duration`` (seconds)."""
    if video.duration_s is None:
        return None
    return preset_by_bins(dataset.get("preset_bins") or DEFAULT_BINS, video.duration_s)


#: The abbreviations of MLVU's own tables for the seven multiple-choice dev tasks (the reader's category names,
#: ML3; needle as "needle").
TASK_LABELS = {"plotQA": "PQA", "needle": "NQA", "ego": "ER", "count": "AC", "order": "AO", "anomaly_reco": "AR",
               "topic_reasoning": "TR"}
#: VideoLucy's Table 3: the seven tasks and M-Avg, their macro mean (ML11); the official per-task accuracies.
LAYOUT = Layout(
    "mlvu", "MLVU dev (VideoLucy Table 3 layout)",
    tuple(Column(task.lower(), TASK_LABELS[task], "category", (task,)) for task in TASKS)
    + (Column("m_avg", "M-Avg", "macro", tuple(task.lower() for task in TASKS)),),
    headline="m_avg",
    scorers=("mlvu_official", "lmms_eval_2025_mlvu", "lmms_eval_2026", "vlmevalkit_mlvu", "senri_prereading",
             "senri_strict", "method"),
    published="videolucy_table3_mlvu.csv",
    figure=Figure(tuple(task.lower() for task in TASKS), "Accuracy by task (official scorer)"),
    breakdowns=(Breakdown("task", "Tasks", "category", order=TASKS + TEST_TASKS),))

MLVU = Benchmark(name="mlvu", title="MLVU (M-Avg)", categories=TASKS + TEST_TASKS,
                 splits=("short", "medium", "long", "extra_long"), official_scorer="mlvu_official", layout=LAYOUT,
                 read=read, preset=preset, options=("root", "video_ids", "splits", "repair_json", "mlvu_answer_position",
                                                     "preset_bins"),
                 glossary=(("tasks", {label: task for task, label in TASK_LABELS.items()}),))

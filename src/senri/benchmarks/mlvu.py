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

from pathlib import Path
from typing import Any, Mapping

from senri.benchmarks.layouts import Breakdown, Column, Figure, Layout
from senri.benchmarks.base import (Benchmark, NativeFileError, NativeSet, NativeVideo, answer_flags, load_json,
                                   make_question, option_flags, preset_by_bins, question_files, unusable_video_id)
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
    order (``MLVU/json``)."""
    files: list[Path] = []
    for path in question_files(dataset):
        if path.is_dir():
            files += sorted(path.glob("*.json"))
        elif path.is_file():
            files.append(path)
        else:
            raise NativeFileError(f"{path}: file not found (MLVU: MLVU/json/<n>_<task>.json)")
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


def read(dataset: Mapping[str, Any]) -> NativeSet:
    native = NativeSet()
    bins = dataset.get("preset_bins") or DEFAULT_BINS
    position = str(dataset.get("mlvu_answer_position") or "last")
    for path in task_files(dataset):
        data = load_json(path, bool(dataset.get("repair_json", False)), native)
        if not isinstance(data, list):
            raise NativeFileError(f"{path}: expected a JSON list of questions (an MLVU task file)")
        folder = path.stem
        left_out = 0
        for index, record in enumerate(data):
            if not isinstance(record, dict):
                raise NativeFileError(f"{path}: item {index} is not an object")
            qid = str(record.get("question_id") or f"{folder}:{index}")
            file_name = str(record.get("video") or record.get("video_name") or "").strip()
            if "candidates" not in record:
                left_out += 1
                continue
            stem = Path(file_name).stem if file_name else f"missing_{index}"
            video_id = f"{folder}{VIDEO_ID_JOIN}{stem}"
            if unusable_video_id(native, str(path), qid, video_id):
                continue
            candidates = [str(c).strip() for c in record.get("candidates") or []]
            answer_text = str(record.get("answer") or "").strip()
            question = str(record.get("question") or "").strip()
            letter, notes = "", []
            if not question and not any(candidates) and not answer_text:
                notes.append(("empty_record", "empty question, candidates and answer: scored wrong"))
            else:
                letter, answer_notes = answer_letter(answer_text, candidates, position)
                notes += option_flags(candidates) + (answer_notes or answer_flags(letter, len(candidates)))
            flags = []
            if len(candidates) > len(OPTION_LETTERS):
                notes.append(("too_many_options", f"{len(candidates)} candidates; the first six are kept"))
                candidates = candidates[: len(OPTION_LETTERS)]
            for flag, detail in notes:
                flags.append(native.flag(str(path), qid, video_id, flag, detail))
            task = str(record.get("question_type") or "").strip()
            task = TASK_NAMES.get(task, task)
            duration = record.get("duration")
            duration = float(duration) if isinstance(duration, (int, float)) else None
            split = preset_by_bins(bins, duration).removeprefix("mlvu_") if duration is not None else None
            native.questions.append(make_question(
                benchmark="mlvu", video_id=video_id, qid=qid, categories=[task] if task else [], question=question,
                options=candidates, answer=letter, flags=flags, split=split))
            if video_id not in native.videos:
                native.videos[video_id] = NativeVideo(video_id, (f"video/{folder}/{file_name}",), split=split,
                                                      duration_s=duration)
        if left_out:
            native.note(str(path), f"{left_out} record(s) without candidates (a generation task) left out")
    return native


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

"""SENRI-Bench (and any question file in its format: the generated demo and needle sets) as one benchmark module:
its strict reader (:mod:`~senri.benchmarks.senri.reader`: JSON, JSONL, CSV or Parquet records, videos
``<videos_dir>/<video_id><ext>``), its taxonomy (:mod:`~senri.benchmarks.senri.taxonomy`: six task types in two
directions), its main table (the paper's Table 2: Total, ES, L, NP, OC, RR, SE, RER, TER under the method's own
letter), its bar figure (accuracy by task type) and its glossary; ``memory.preset`` (``auto``: by measured
length)."""

from __future__ import annotations

from typing import Any, Mapping

from senri.benchmarks.base import Benchmark, NativeSet, NativeVideo, no_preset
from senri.benchmarks.layouts import Column, Figure, Layout
from senri.benchmarks.senri.taxonomy import DIRECTION_NAMES, DIRECTIONS, TASK_DIRECTION, TASK_NAMES, TASK_TYPES

__all__ = ["DIRECTIONS", "DIRECTION_NAMES", "LAYOUT", "SENRI", "TASK_DIRECTION", "TASK_NAMES", "TASK_TYPES", "read",
           "video"]


def read(dataset: Mapping[str, Any]) -> NativeSet:
    from senri.benchmarks.senri.reader import validated_questions

    questions = validated_questions(dataset["questions"], dataset["videos_dir"], dataset["video_ext"])
    native = NativeSet(questions=questions)
    for question in questions:
        if question.video_id not in native.videos:
            native.videos[question.video_id] = video(dataset, question.video_id)
    return native


def video(dataset: Mapping[str, Any], video_id: str) -> NativeVideo:
    """``<videos_dir>/<video_id><ext>`` for each of ``dataset.video_ext`` in order."""
    return NativeVideo(video_id, tuple(f"{video_id}{ext}" for ext in dataset["video_ext"]))


def _direction_members(direction: str) -> tuple[str, ...]:
    """A direction's task types, in label order (the column counts a question of any of them)."""
    return tuple(sorted(t for t, d in TASK_DIRECTION.items() if d == direction))


#: The paper's Table 2: Total, then each direction followed by its task types, under the method's own letter
#: (scorer ``method``; ``senri_strict`` re-reads the replies beside it).
LAYOUT = Layout(
    "senri", "SENRI-Bench (Table 2 layout)",
    (Column("total", "Total", "all"),
     *(column for direction in DIRECTIONS for column in (
         Column(direction.lower(), direction, "category", _direction_members(direction)),
         *(Column(t.lower(), t, "category", (t,)) for t in _direction_members(direction))))),
    headline="total", scorers=("method", "senri_strict"),
    figure=Figure(tuple(t.lower() for t in TASK_TYPES), "Accuracy by task type", chance=25.0))

SENRI = Benchmark(name="senri", title="SENRI-Bench", categories=TASK_TYPES, splits=(), official_scorer="senri_strict",
                  layout=LAYOUT, read=read, preset=no_preset, strict=True,
                  glossary=(("task types", TASK_NAMES), ("directions", DIRECTION_NAMES)))

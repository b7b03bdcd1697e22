"""SENRI-Bench (and any question file in its format: the generated demo and needle sets): JSON, JSONL, CSV or
Parquet records validated strictly (:mod:`senri.ingest`), videos ``<videos_dir>/<video_id><ext>``, the six task
types, ``memory.preset`` (``auto``: by measured length)."""

from __future__ import annotations

from typing import Any, Mapping

from senri.benchmarks.base import Benchmark, NativeSet, NativeVideo, no_preset
from senri.records import TASK_TYPES


def read(dataset: Mapping[str, Any]) -> NativeSet:
    from senri.ingest import validated_questions

    questions = validated_questions(dataset["questions"], dataset["videos_dir"], dataset["video_ext"])
    native = NativeSet(questions=questions)
    for question in questions:
        if question.video_id not in native.videos:
            native.videos[question.video_id] = video(dataset, question.video_id)
    return native


def video(dataset: Mapping[str, Any], video_id: str) -> NativeVideo:
    """``<videos_dir>/<video_id><ext>`` for each of ``dataset.video_ext`` in order."""
    return NativeVideo(video_id, tuple(f"{video_id}{ext}" for ext in dataset["video_ext"]))


SENRI = Benchmark(name="senri", title="SENRI-Bench", categories=TASK_TYPES, splits=(), official_scorer="senri_strict",
                  layout="senri", read=read, preset=no_preset, strict=True)

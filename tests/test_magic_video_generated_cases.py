"""MAGIC-Video against cases generated from its release's own functions (MAGIC-video @ 0f2273f) on
Hypothesis-drawn inputs (``tests/reference/generated/magic_video/``; ``bench/release_cases/magic_video.py`` made
them): the QA frames of a clip (``VisualMemory._extract_frames``) and the time-extraction reply (G13,
``parse_time_reference``). The suite reads a deterministic sample; ``python bench/generated_cases.py
magic_video`` reads all."""

from __future__ import annotations

import math

import pytest

from release_generated import book, generated_cases, sample
from senri.answers import json_objects
from senri.memory.magic_video.search import parse_time_range
from senri.methods.magic_video import qa_frame_plan, release_frame_indices

SYSTEM = "magic_video"


@pytest.fixture(scope="module")
def cases() -> dict:
    return generated_cases(SYSTEM)


def test_qa_frames_of_a_clip_are_the_release_s(cases):
    """The indices decord is asked for; ``[]`` where the release returns no frame (its exceptions included)."""
    for case in sample(cases["kinds"]["extract_frames"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        ours = release_frame_indices(inp["start_sec"], inp["end_sec"], inp["video_fps"], inp["n_frames"],
                                     inp["fps"], inp["max_frames"])
        assert ours == out["value"]["indices"], case
        book(SYSTEM, "extract_frames")


def test_the_time_extractor_s_reply_is_read_as_the_release_reads_it(cases):
    """A range where the release finds one (non-finite values passed on, as there); where it finds none, senri
    finds none either — or, for a reply that is neither a range nor ``null``, raises the ValueError its store
    books as a failed search call before PageRank serves (the release serves PageRank silently): the named
    deviation ``unreadable_time_reply_counted``."""
    for case in sample(cases["kinds"]["time_reference_reply"]):
        reply, out = case["input"]["reply"], case["output"]
        assert "raised" not in out, case
        try:
            ours = parse_time_range(reply, json_objects)
        except ValueError:
            assert out["value"] is None, case
            book(SYSTEM, "time_reference_reply", "deviation:unreadable_time_reply_counted")
            continue
        if out["value"] is None:
            assert ours is None, case
        else:
            assert ours is not None and all(a == b or (math.isnan(a) and math.isnan(b))
                                            for a, b in zip(ours, out["value"])), case
        book(SYSTEM, "time_reference_reply")


def test_the_qa_frame_budget_is_spent_clip_by_clip_as_the_release_spends_it(cases):
    """Each retrieved clip in order gets at most min(per clip, what the total has left) frames; a clip the budget
    has no frame left for is not read (the release skips it before decoding)."""
    for case in sample(cases["kinds"]["qa_frame_budget"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        ours = qa_frame_plan([tuple(c) for c in inp["clips"]], inp["video_fps"], inp["n_frames"], 1.0,
                             inp["per_clip"], inp["total"], inp["used"])
        # the release decodes the clips in order until the total is spent (the total only grows): a prefix
        read = out["value"]
        assert [start for start, _ in read] == [start for start, _ in inp["clips"][:len(read)]], case
        theirs = [indices for _, indices in read] + [[]] * (len(inp["clips"]) - len(read))
        assert ours == theirs, case
        book(SYSTEM, "qa_frame_budget")


def test_every_generated_kind_is_read(cases):
    assert set(cases["kinds"]) == {"extract_frames", "time_reference_reply", "qa_frame_budget"}
    assert cases["meta"]["commit"] == "0f2273f7f07360cc58588399553b5a6ea758b084"

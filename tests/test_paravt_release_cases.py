"""ParaVT (cf55249) as its release computes it: every case of tests/reference/release_cases/paravt/cases.json
(README §5.1) fed to senri's corresponding function. Equal where senri follows the release; where senri offers
another behaviour, it is a named option and its test checks the deviation."""

from __future__ import annotations

import json
import math

import pytest

from reference import release_cases
from seeker_replay import Replay, seeker
from senri.methods.paravt import (MalformedCall, call_window, crop_plan, extract_letter, parse_time, plan_calls,
                                  read_calls)
from senri.resample import (fixed_nframes, frame_bounds, overview_indices, smart_nframes, smart_resize,
                                    torch_linspace, torchvision_window)

CASES = release_cases("paravt")["kinds"]
COUNTS = {"overview_frames": 12, "crop_frames": 30, "parse_time_val": 21, "extract_letter": 26,
          "tool_call_parse": 24, "episode": 9, "qvu_smart_resize": 18, "qvu_smart_nframes": 17,
          "qvu_frame_range": 11}
OVERVIEW = (100352, 602112)  # P-I2
CROP = (784, 50176)  # P-T1


def test_every_case_of_every_kind_is_read():
    assert {kind: len(cases) for kind, cases in CASES.items()} == COUNTS


def _returned(indices: list[int], video: dict, pixels: tuple[int, int]) -> tuple[int, list | None]:
    """How many frames the release returns and their size: none where the frame resizes to a side of 0."""
    if not indices:
        return 0, None
    h, w = smart_resize(video["height"], video["width"], 28, *pixels)
    return (0, None) if min(h, w) <= 0 else (len(indices), [h, w])


def _check_linspace(case: dict, got: list[int]) -> None:
    """float32 as torch computes it; where the case lists float64's other frames, float64 would give them."""
    spec = case["output"].get("linspace")
    if spec:
        assert spec["float32_variants_agree"], case["id"]
        for position, f32, f64 in spec["float64_differs_at"]:
            assert got[position] == f32 != f64, case["id"]


def test_overview_frames():
    for case in CASES["overview_frames"]:
        video, out = case["input"]["video"], case["output"]
        try:
            got = overview_indices(video["n_frames"], case["input"]["nframes"])
        except ValueError:  # under 64 frames both backends refuse: the question goes without images
            got = []
        assert got == (out["torchcodec_indices"] or []), case["id"]
        assert _returned(got, video, OVERVIEW) == (out["returned_frames"], out["resize_hw"]), case["id"]
        _check_linspace(case, got)


def test_crop_frames_with_torchvision_s_fallback_and_thin_frames():
    for case in CASES["crop_frames"]:
        video, out, start, end = case["input"]["video"], case["output"], case["input"]["start"], case["input"]["end"]
        got = crop_plan(start, end, video["avg_fps"], video["n_frames"])
        fallback = out["torchvision_fallback"]
        if fallback is None:
            assert got == out["torchcodec_indices"], case["id"]
            _check_linspace(case, got)
        else:  # torchcodec refused the window: torchvision decoded these frames, qwen-vl-utils kept them if >= 2
            if fallback["error"]:
                with pytest.raises(ValueError):
                    torchvision_window(start, end, video["avg_fps"], video["n_frames"])
            else:
                assert torchvision_window(start, end, video["avg_fps"], video["n_frames"]) == \
                    fallback["decoded_frame_indices"], case["id"]
        assert _returned(got, video, CROP) == (out["returned_frames"], out["resize_hw"]), case["id"]


def test_float32_linspace_is_what_torch_computes_and_float64_is_a_frame_off_in_a_3_hour_overview():
    import numpy as np

    (case,) = [c for c in CASES["overview_frames"] if (c["output"].get("linspace") or {}).get("float64_differs_at")]
    position, f32, f64 = case["output"]["linspace"]["float64_differs_at"][0]
    n = case["input"]["video"]["n_frames"]
    assert round(float(torch_linspace(0, n - 1, 64)[position])) == f32
    assert int(np.round(np.linspace(0, n - 1, 64))[position]) == f64  # what senri computed before


def test_parse_time_val():
    for case in CASES["parse_time_val"]:
        got, expected = parse_time(case["input"]["value"]), case["output"]["seconds"]
        if isinstance(expected, str):  # "nan" / "inf", JSON has no such numbers
            assert str(got) == expected, case["id"]
        else:
            assert got == expected, case["id"]


def test_extract_letter():
    for case in CASES["extract_letter"]:
        assert extract_letter(case["input"]["text"]) == case["output"]["letter"], case["id"]


def _run_calls(calls: list, lenient: bool = False) -> tuple[list[list[float]], str | None]:
    """The crops eval_one runs for the calls a turn keeps (:func:`plan_calls`, max_parallel 5 as the cases were
    run), until a call it cannot run (the sample's error)."""
    windows = []
    for call in calls:
        try:
            windows.append(list(call_window(call, lenient)))
        except MalformedCall as exc:
            return windows, str(exc)
    return windows, None


def test_tool_call_parse():
    for case in CASES["tool_call_parse"]:
        out, video = case["output"], case["input"]["video"]
        calls, _ = read_calls(case["input"]["reply"])
        assert calls == out["parse_tool_calls"], case["id"]
        assert (not calls) == out["ends_episode"], case["id"]
        windows, error = _run_calls(plan_calls(case["input"]["reply"], 5)[0])
        assert windows == out["crops_run"], case["id"]
        assert error == out["sample_error"], case["id"]
        returned = [_returned(crop_plan(s, e, video["avg_fps"], video["n_frames"]), video, CROP)[0] for s, e in windows]
        assert returned == out["crop_frames_returned"], case["id"]


def test_malformed_tool_calls_drop_is_senri_s_deviation():
    """``malformed_tool_calls: drop``: where the release loses the sample, the call is left out (and a JSON
    string of arguments is read)."""
    lost = [c for c in CASES["tool_call_parse"] if c["output"]["sample_error"]]
    assert lost
    for case in lost:
        calls, _ = read_calls(case["input"]["reply"])
        with pytest.raises(MalformedCall):
            call_window(calls[0])
        with pytest.raises(MalformedCall):  # a list, a number, null arguments: dropped by the loop under `drop`
            call_window(calls[0], lenient=True)
    assert call_window({"arguments": '{"start_time": 3, "end_time": 9}'}, lenient=True) == (3.0, 9.0)


def test_qwen_vl_utils_functions():
    for case in CASES["qvu_smart_resize"]:
        args, out = case["input"], case["output"]
        call = (args["height"], args["width"], args["factor"], args["min_pixels"], args["max_pixels"])
        if "error" in out:
            with pytest.raises(ValueError, match="aspect ratio"):
                smart_resize(*call)
        else:
            assert list(smart_resize(*call)) == out["hw"], case["id"]
    for case in CASES["qvu_smart_nframes"]:
        ele, total, fps, out = case["input"]["ele"], case["input"]["total_frames"], case["input"]["video_fps"], \
            case["output"]
        try:
            got = (fixed_nframes(ele["nframes"], total) if "nframes" in ele else
                   smart_nframes(total, fps, ele.get("fps", 2), ele.get("min_frames", 4), ele.get("max_frames", 768)))
        except ValueError:
            got = None
        assert got == out.get("nframes"), case["id"]
    for case in CASES["qvu_frame_range"]:
        a, out = case["input"], case["output"]
        start = 0.0 if a["video_start"] is None else a["video_start"]
        end = a["total_frames"] / a["video_fps"] if a["video_end"] is None else a["video_end"]
        first, last = frame_bounds(start, end, a["video_fps"], a["total_frames"])
        if "error" in out:
            assert first >= last, case["id"]  # torchcodec's range check raises
        else:
            assert [first, last, last - first + 1] == out["start_end_count"], case["id"]


# ------------------------------------------------------------------------------------------------- episodes
def _question(text: str):
    import re

    from senri.records import Question

    options = dict(re.findall(r"\(([A-D])\) ([^(]+?)(?= \(|$)", text))
    stem = text.split(" (A)")[0]
    return Question("pv", "q", "L", "none", stem, *(options.get(x, "-") for x in "ABCD"), "B")


def _layout(message, method) -> dict:
    """A sent message summarised as the release case summarises its messages."""
    from senri.backends.base import ImagePart

    parts = message.content if isinstance(message.content, tuple) else (message.content,)
    images = [p for p in parts if isinstance(p, ImagePart)]
    texts = [p for p in parts if isinstance(p, str)]
    return {"role": message.role, "images": len(images), "text": texts[-1] if texts else ""}


def _expected(message: dict, method, replies: list) -> dict:
    text = message.get("text") or {}
    texts = message.get("texts") or [text]
    role = texts[0].get("prompt") if texts else None
    rendered = {"P1": lambda t: method.text.render("system"),
                "P3": lambda t: method.text.render("crop_result", n=t["n"], start=t["start"], end=t["end"]),
                "P3b": lambda t: method.text.render("crop_error", start=t["start"], end=t["end"]),
                "P4": lambda t: method.text.render("forced")}
    if message["role"] == "assistant":
        body = replies[text["reply"]]
    elif role in rendered:
        body = rendered[role](texts[0])
    else:  # the question block: its suffix names the video's basename unless the question names a video path
        body = texts[0]["suffix_basename"]
    return {"role": message["role"], "images": message.get("images", 0), "text": body}


@pytest.fixture(scope="module")
def paravt():
    """One ParaVT over the ``pv`` clip for the module (its overview is decoded once), answering through a
    :class:`Replay` loaded per episode."""
    backend = Replay()
    return seeker("paravt", backend), backend


def test_episodes_with_scripted_replies(paravt):
    method, backend = paravt
    for case in CASES["episode"]:
        given, out = case["input"], case["output"]
        backend.load(given["replies"])
        method.max_turns, method.max_parallel = given["max_turns"], given["max_parallel"]
        answer = method.answer(_question(given["question"]))
        # the release's client retries a failed call 3 times, each a completion; senri's backend retries inside
        completions = [c for i, c in enumerate(out["completions"])
                       if i == 0 or c["messages"] != out["completions"][i - 1]["messages"]]
        assert len(backend.requests) == len(completions), case["id"]
        for request, completion in zip(backend.requests, completions):
            assert request.max_tokens == completion["max_tokens"] and request.temperature == 0, case["id"]
            got = [_layout(m, method) for m in request.messages]
            expected = [_expected(m, method, given["replies"]) for m in completion["messages"]]
            for g, e in zip(got, expected):
                if e["role"] == "user" and e["text"] in ("pv.mp4", None):
                    assert g["text"].endswith(" The video path for this video is: pv.mp4") == (e["text"] is not None)
                    g = {**g, "text": e["text"]}
                assert g == e, case["id"]
            assert len(got) == len(expected), case["id"]
        crops = [{"start": c["start_s"], "end": c["end_s"], "frames": c["frames"]} for c in answer.trace["crops"]]
        assert crops == out["crops"], case["id"]
        result = out["result"]
        assert answer.tally.behaviour.get("tool_calls", 0) == result["tool_calls"], case["id"]
        release_pred = result["pred"] if result["pred"] in ("A", "B", "C", "D") else None
        assert answer.pred == release_pred, case["id"]
        if result["error"]:  # the release loses the sample: senri records it as the question's error
            assert answer.error and result["error"] in answer.error, case["id"]
        else:
            assert answer.error is None or "replay" in answer.error, case["id"]


def test_answer_reader_senri_reads_the_reply_with_the_project_s_parser(paravt):
    """``answer_reader: senri``: "The answer is a" is A (the release's cascade gives T, counted wrong)."""
    from senri.records import Question

    method, backend = paravt
    method.max_turns, method.max_parallel = 3, 5
    question = Question("pv", "q", "L", "none", "Which room?", "hall", "kitchen", "garden", "street", "A")
    backend.load(["The answer is a"])
    assert method.answer(question).pred is None
    backend.load(["The answer is a"])
    method.answer_reader = "senri"
    try:
        assert method.answer(question).pred == "A"
    finally:
        method.answer_reader = "release"


def test_a_malformed_call_loses_the_question_by_default_and_is_dropped_under_the_option(paravt):
    from senri.records import Question

    method, backend = paravt
    method.max_turns, method.max_parallel = 3, 5
    question = Question("pv", "q", "L", "none", "Which room?", "hall", "kitchen", "garden", "street", "B")
    reply = '<tool_call>{"name": "crop_video", "arguments": "{\\"start_time\\": 1}"}</tool_call> B'
    backend.load([reply])
    lost = method.answer(question)
    assert lost.pred is None and "the release loses the question" in lost.error
    backend.load([reply, "<answer>B</answer>"])
    method.malformed_calls = "drop"
    try:
        kept = method.answer(question)
    finally:
        method.malformed_calls = "lose_question"
    assert kept.pred == "B" and kept.error is None and kept.trace["crops"][0]["start_s"] == 1.0


def test_the_options_are_checked_when_the_method_is_made():
    with pytest.raises(ValueError, match="malformed_tool_calls must be one of"):
        seeker("paravt", Replay(), malformed_tool_calls="crop")


@pytest.mark.parametrize("method", ["paravt", "video_o3", "longvideo_r1"])
def test_each_deviation_option_defaults_to_the_release_and_the_schema_knows_its_values(method):
    """The seekers' deviation options (each module's DEVIATIONS: option -> the release's value) default to the
    release in config/method/<method>.yaml, and the config schema lists the release's value among the allowed."""
    import importlib

    import yaml

    deviations = importlib.import_module(f"senri.methods.{method}").DEVIATIONS
    defaults = yaml.safe_load(open(f"config/method/{method}.yaml"))
    schema = json.load(open("workflow/schemas/config.schema.json"))["$defs"][f"method_{method}"]["properties"]
    for option, release in deviations.items():
        assert defaults[option] == release, option
        assert release in schema[option]["enum"] and len(schema[option]["enum"]) >= 2, option

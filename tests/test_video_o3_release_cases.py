"""Video-o3 (a6e0973) as its release computes it: every case of tests/reference/release_cases/video_o3/cases.json
(README §5.2) fed to senri's corresponding function. Equal where senri follows the release; where senri offers
another behaviour, it is a named option and its test checks the deviation."""

from __future__ import annotations

import math

import pytest

from reference import release_cases
from seeker_replay import Replay, seeker
from senri.answers import videomme_official_letter
from senri.backends.base import VideoPart
from senri.resample import (capped_rate_indices, header_numbers, qwen25_video_tokens, smart_resize,
                                    video_frame_max_pixels)
from senri.methods.video_o3 import (MAIN_FRAME_FACTOR, GroundingError, crop_plan, cut_reply, parse_grounding,
                                    read_turn)

CASES = release_cases("video_o3")["kinds"]
COUNTS = {"main_video_frames": 12, "main_video_resize": 12, "crop": 24, "grounding_parse": 20,
          "videomme_extract": 20, "episode": 14, "reply_reading": 21}
QUOTAS = {"coarse": 2048, "medium": 4096, "fine": 6144}  # O-T2, tokens (× 784 px)
MIN_PIXELS, MAX_PIXELS, MAIN_TOKENS = 15680, 602112, 16384
PV = (4.0, 480)  # the reply_reading cases' crops are of the pv clip (4 fps, 480 frames)


def test_every_case_of_every_kind_is_read():
    assert {kind: len(cases) for kind, cases in CASES.items()} == COUNTS


def test_main_video_frames_and_header():
    for case in CASES["main_video_frames"]:
        video, out = case["input"]["video"], case["output"]
        indices, rate = capped_rate_indices(video["n_frames"], video["avg_fps"], case["input"]["fps"],
                                            case["input"]["frames_limit"])
        assert indices == out["indices"] and math.isclose(rate, out["sample_fps"]), case["id"]
        fields = header_numbers(len(indices), rate, 0, video["n_frames"] / video["avg_fps"])
        header = out["header_fields"]
        assert (fields[0], fields[1], fields[3]) == (header["sample_fps"], header["total_frames"],
                                                     header["max_duration"]), case["id"]


def test_main_video_resize_at_factor_56_then_the_video_budget():
    for case in CASES["main_video_resize"]:
        given, out = case["input"], case["output"]
        per_frame = smart_resize(given["frame_height"], given["frame_width"], MAIN_FRAME_FACTOR, MIN_PIXELS,
                                 MAX_PIXELS)
        padded = given["n_frames"] + given["n_frames"] % 2
        ceiling = video_frame_max_pixels(MAIN_TOKENS * 784, padded, MAX_PIXELS)
        video_hw = smart_resize(*per_frame, 28, MIN_PIXELS, ceiling)
        assert [list(per_frame), padded, list(video_hw)] == [out["per_frame_hw"], out["padded_frames"],
                                                             out["video_hw"]], case["id"]
        assert qwen25_video_tokens(padded, *video_hw) == out["video_tokens_derived"], case["id"]


def test_crop_frames_rate_header_and_budget():
    for case in CASES["crop"]:
        given, out = case["input"], case["output"]
        video, strategy = given["video"], given["sampling_strategy"]
        if strategy not in QUOTAS:  # the release's _prepare_content fails before any frame is read
            assert out["error_type"] == "KeyError", case["id"]
            continue
        assert QUOTAS[strategy] * 784 == out["total_pixels"], case["id"]
        if "error_type" in out:
            with pytest.raises(ValueError):
                crop_plan(given["start"], given["end"], video["avg_fps"], video["n_frames"])
            continue
        indices, rate = crop_plan(given["start"], given["end"], video["avg_fps"], video["n_frames"])
        assert indices == out["indices"] and math.isclose(rate, out["sample_fps"]), case["id"]
        for position, f32, f64 in out["linspace"]["float64_differs_at"]:
            assert indices[position] == f32 != f64, case["id"]
        header = out["header_fields"]
        assert header_numbers(len(indices), rate, given["start"], given["end"]) == (
            header["sample_fps"], header["total_frames"], header["start_time"], header["end_time"]), case["id"]
        ceiling = video_frame_max_pixels(out["total_pixels"], len(indices), MAX_PIXELS)
        video_hw = smart_resize(video["height"], video["width"], 28, MIN_PIXELS, ceiling)
        assert list(video_hw) == out["video_hw"], case["id"]
        assert qwen25_video_tokens(len(indices), *video_hw) == out["video_tokens_derived"], case["id"]


def test_grounding_parse():
    for case in CASES["grounding_parse"]:
        out = case["output"]
        if "error_type" in out:
            with pytest.raises(GroundingError):
                parse_grounding(case["input"]["reply"])
            continue
        start, end, strategy = parse_grounding(case["input"]["reply"])
        assert [str(start) if math.isnan(start) else start, end, strategy] == out["parsed"], case["id"]


def test_videomme_extract_is_the_official_letter_rule():
    for case in CASES["videomme_extract"]:
        assert (videomme_official_letter(case["input"]["prediction"]) or "") == case["output"]["extracted"], \
            case["id"]


def test_reply_reading():
    for case in CASES["reply_reading"]:
        given, out = case["input"], case["output"]
        turn = read_turn(cut_reply(given["reply"], given["forced_mode"]), given["forced_mode"])
        if out["ended"]:
            kind = "apology" if out["apology"] else ("answer", "raw")
            assert turn.kind in kind if isinstance(kind, tuple) else turn.kind == kind, case["id"]
            if not out["apology"]:
                assert turn.text == out["final_response"], case["id"]
            continue
        if out["repeat"]:
            assert turn.kind == "repeat" and out["appended"] == [], case["id"]
            continue
        assistant = [a["assistant_text"] for a in out["appended"] if "assistant_text" in a]
        assert set(assistant) == {cut_reply(given["reply"], given["forced_mode"])}, case["id"]
        (user,) = [a for a in out["appended"] if "user" in a or "user_prompt" in a]
        if user.get("user_prompt") in ("O5", "O6b"):  # an error turn: a parse error (the reply once) or a crop
            if turn.kind == "parse_error":  # the release refused (the reply twice, then the error)
                assert len(assistant) == 1, case["id"]
                continue
            assert turn.kind == "grounding" and len(assistant) == 2, case["id"]
            start, end, strategy = turn.window
            if strategy in QUOTAS:  # not a strategy error: senri's crop refuses the window too
                with pytest.raises(ValueError):
                    crop_plan(start, end, *PV)
            continue
        assert turn.kind == "grounding", case["id"]
        start, end, strategy = turn.window
        assert len(assistant) == 1 and strategy in QUOTAS, case["id"]
        header, clip = user["user"]
        indices, rate = crop_plan(start, end, *PV)
        assert header_numbers(len(indices), rate, start, end) == (
            header["sample_fps"], header["total_frames"], header["start_time"], header["end_time"]), case["id"]
        assert (clip["start"], clip["end"], clip["strategy"], clip["total_pixels"]) == (
            start, end, strategy, QUOTAS[strategy] * 784), case["id"]


# ------------------------------------------------------------------------------------------------- episodes
@pytest.fixture(scope="module")
def video_o3():
    """One Video-o3 over the ``pv`` clip for the module (its main video is decoded once)."""
    backend = Replay(video=True)
    return seeker("video_o3", backend, model={"video": True}), backend


def _texts(message) -> str:
    parts = message.content if isinstance(message.content, tuple) else (message.content,)
    return "".join(p for p in parts if isinstance(p, str))


def _videos(message) -> int:
    parts = message.content if isinstance(message.content, tuple) else ()
    return sum(isinstance(p, VideoPart) for p in parts)


def _matches_template(method, role: str, text: str) -> bool:
    """``text`` is the prompt role's template with an error text of senri's own in its ``{error}`` field."""
    before, _, after = method.text.render(role, error="\x00").partition("\x00")
    return text.startswith(before.replace("<video>", "")) and text.endswith(after.replace("<video>", ""))


def _expected_user(method, content: list, question) -> tuple[str, int]:
    """(the text senri renders for the case's summarised user turn, or the role for an error turn; videos)."""
    from senri.answers import format_options

    fields = next(c for c in content if "prompt" in c)
    videos = sum("video" in c for c in content)
    role = fields["prompt"]
    if role == "O3":
        return method.text.render("question", fps=fields["sample_fps"], n_frames=fields["total_frames"],
                                  duration=fields["max_duration"], question=question.question,
                                  options=format_options(question.options)).replace("<video>", ""), videos
    if role in ("O4", "O6"):
        assert fields["action_turn"] == fields["observation_turn"]
        return method.text.render("observation" if role == "O4" else "forced", step=int(fields["action_turn"]),
                                  fps=fields["sample_fps"], n_frames=fields["total_frames"],
                                  start=fields["start_time"], end=fields["end_time"]).replace("<video>", ""), videos
    return role, videos


def test_episodes_with_scripted_replies(video_o3):
    from senri.records import Question

    method, backend = video_o3
    for case in CASES["episode"]:
        given, out = case["input"], case["output"]
        options = [c.split(". ", 1)[1] for c in given["candidates"]]
        question = Question("pv", "q", "L", "none", given["question"], *options, "B")
        backend.load(given["replies"], stop=given["replies_end_at_first_closing_tag"])
        answer = method.answer(question)
        assert len(backend.requests) == len(out["generations"]) == answer.trace["generations"] == \
            out["turn_count"], case["id"]
        for request, generation in zip(backend.requests, out["generations"]):
            assert tuple(request.stop) == ("</grounding>", "</answer>"), case["id"]
            assert [m.role for m in request.messages] == [m["role"] for m in generation["messages"]], case["id"]
            assert sum(_videos(m) for m in request.messages) == generation["videos"], case["id"]
            for sent, expected in zip(request.messages[1:], generation["messages"][1:]):
                if expected["role"] == "assistant":
                    assert _texts(sent) == expected["text"], case["id"]
                    continue
                if "content" not in expected:  # O5 / O6b: the error turn, with senri's own error text
                    role = {"O5": "error", "O6b": "forced_error"}[expected["prompt"]]
                    assert _matches_template(method, role, _texts(sent)), case["id"]
                    continue
                text, videos = _expected_user(method, expected["content"], question)
                assert _texts(sent) == text and _videos(sent) == videos, case["id"]
        assert answer.raw_output == out["final_response"], case["id"]
        assert answer.pred == videomme_official_letter(out["final_response"]), case["id"]


def test_answer_reader_senri_reads_the_final_text_with_the_project_s_parser(video_o3):
    from senri.records import Question

    method, backend = video_o3
    question = Question("pv", "q", "L", "none", "Which room?", "hall", "kitchen", "garden", "street", "D")
    backend.load(["<think>x</think><answer>Best answer: D</answer>"])
    assert method.answer(question).pred == "B"  # the release's reading: the B of "Best"
    method.answer_reader = "senri"
    try:
        backend.load(["<think>x</think><answer>Best answer: D</answer>"])
        assert method.answer(question).pred == "D"
    finally:
        method.answer_reader = "release"

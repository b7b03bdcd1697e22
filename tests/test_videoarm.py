"""VideoARM (spec videoarm.md, A-*): the tools' arithmetic and pixels, and whole episodes against scripted
controllers in both tool-call forms (OpenAI function calls and the JSON action form)."""

import copy
import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import JsonHandler, ffprobe_frames, make_indexed_video
from reference import release_cases
from senri.backends.base import ChatRequest, Message
from senri.backends.openai_format import chat_body, parse_chat_response
from senri.config import compose
from senri.decode import read_frames
from senri.demo import read_frame_index
from senri.methods.base import RunContext
from senri.methods.videoarm import FORCED_FALLBACK, VideoARM
from senri.methods.videoarm_tools import (FrameClock, clip_range, draw_index, is_error_like, json_actions, mosaic,
                                          mosaics, parse_arguments, parse_clip_reply, sample_indices,
                                          snapshot_counts, snapshot_summary, split_frames, text_tool_calls)
from senri.probe import probe
from senri.records import Question

QUESTION = Question(video_id="v", qid="q1", task_type="ES", direction="forward", question="Where did I put the cup?",
                    option_a="on the table", option_b="in the sink", option_c="on the shelf", option_d="in the bag",
                    answer="B")


# ---------------------------------------------------------------------------------------------- tools


def test_frames_are_split_over_ranges_in_proportion_with_the_remainder_to_the_last():
    def counts(ranges, total, frames=3000):
        return [len(part) for part in split_frames(ranges, total, frames)]

    # 100 + 300 frames, 30 wanted: int(30·100/400) = 7, the last range gets 30 − 7 = 23.
    assert counts([(0, 99), (100, 399)], 30) == [7, 23]
    # Three ranges: int(60·10/160) = 3, int(60·50/160) = 18, the last 60 − 21 = 39; a tiny range still gets 1.
    assert counts([(0, 9), (10, 59), (60, 159)], 60) == [3, 18, 39]
    assert counts([(0, 0), (1, 999)], 30) == [1, 29]
    # The release stops at N: 40 one-frame ranges give 30 frames (the code before issue 35 gave 40).
    assert sum(counts([(10 * k, 10 * k) for k in range(40)], 30)) == 30
    # The denominator is the ranges as written: a range past the video's end keeps its share small.
    assert counts([(2900, 3500), (0, 99)], 30) == [4, 26]
    with pytest.raises(ValueError, match="Invalid frame range"):
        split_frames([(600, 500)], 30, 3000)
    # A-T1: n = min(wanted, length), indices truncated, both ends included.
    assert sample_indices(0, 10, 4) == [0, 3, 6, 10]
    assert sample_indices(5, 7, 30) == [5, 6, 7]
    assert sample_indices(3, 3, 5) == [3]


def test_a_mosaic_is_three_columns_by_two_rows_row_major_with_black_padding():
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]
    tiles = [np.full((40, 60, 3), c, dtype=np.uint8) for c in colours]
    tiles[1] = np.full((50, 70, 3), colours[1], dtype=np.uint8)  # a bigger tile is resized to the smallest
    grid = mosaic(tiles)
    assert grid.shape == (2 * 40, 3 * 60, 3)
    for k in range(6):
        row, col = divmod(k, 3)
        cell = grid[row * 40:(row + 1) * 40, col * 60:(col + 1) * 60]
        expected = colours[k] if k < len(colours) else (0, 0, 0)
        assert (cell[5:-5, 5:-5] == expected).all(), k
    with pytest.raises(ValueError):
        mosaic(tiles * 2)




def _release_cases() -> dict:
    return release_cases("videoarm")


def test_every_release_frame_split_case_of_scene_snapper():
    """shared/reference/release_cases/videoarm: the frames the release sends to the caption model and attaches
    for the controller, the mosaic counts, the result's fields and the errors, for all 10 splits."""
    cases = _release_cases()
    total = cases["video_fixture"]["total_frames"]
    fps = cases["video_fixture"]["fps"]
    limit = cases["pipeline_defaults_used"]["total_frames_limit"]
    assert len(cases["scene_snapper_frame_split"]) == 10
    for case in cases["scene_snapper_frame_split"]:
        ranges = [tuple(r) for r in case["frame_ranges"]]
        caption_n, controller_n = snapshot_counts(case["num_frames_arg"], limit)
        if "scene_snapper_exception" in case:
            for n in (caption_n, controller_n):
                with pytest.raises(ValueError, match="Invalid frame range"):
                    split_frames(ranges, n, total)
            continue
        caption = [i for part in split_frames(ranges, caption_n, total) for i in part]
        shown = [i for part in split_frames(ranges, controller_n, total) for i in part]
        assert caption == case["caption_model_frame_indices"], case["name"]
        assert shown == case["controller_attached_frame_indices"], case["name"]
        assert (caption_n, controller_n) == (case["caption_model_total_frames"],
                                             case["controller_attached_total_frames"]), case["name"]
        assert len(mosaics([np.zeros((4, 4, 3), np.uint8)] * len(caption))) == case["caption_model_n_mosaic_images"]
        assert len(mosaics([np.zeros((4, 4, 3), np.uint8)] * len(shown))) == \
            case["controller_attached_n_mosaic_images"]
        expected = {k: v for k, v in case["scene_snapper_result"].items() if k != "caption"}
        assert snapshot_summary(ranges, len(caption), fps) == expected, case["name"]


def test_every_release_reply_parser_case_of_clip_analyzer():
    cases = _release_cases()["clip_analyzer_reply_parser"]["cases"]
    assert len(cases) == 14
    for case in cases:
        answer, confidence, _ = parse_clip_reply(case["reply"])
        assert (answer, confidence) == (case["answer"], pytest.approx(case["confidence"])), case["reply"]
    # The named lenient parser differs where the release is poor: "**Answer:**", "2 cups", "80%", empty.
    lenient = {c["reply"]: c for c in cases}
    assert parse_clip_reply(lenient["**Answer:** red\n**Confidence:** 0.9"]["reply"], "lenient")[:2] == ("red", 0.9)
    assert parse_clip_reply(lenient["Answer: red\nConfidence: 80%"]["reply"], "lenient")[:2] == ("red", 0.8)
    assert parse_clip_reply(lenient["Answer: 2 cups"]["reply"], "lenient")[1] == 0.5


def test_every_release_frame_sampling_case_of_clip_analyzer():
    cases = _release_cases()
    total = cases["video_fixture"]["total_frames"]
    n = cases["pipeline_defaults_used"]["frame_analysis_max_frames"]
    for case in cases["clip_analyzer_frame_sampling"]:
        if case["error"]:
            with pytest.raises(ValueError) as refused:
                clip_range(*case["frame_range"], total)
            assert str(refused.value).startswith(case["error"]), case["frame_range"]
            continue
        start, end = clip_range(*case["frame_range"], total)
        assert {"start_frame": start, "end_frame": end} == case["result_frame_range"]
        indices = sample_indices(start, end, n)
        assert indices == case["sampled_indices"] and len(indices) == case["sampled_frames"]


def test_every_release_mosaic_layout_case():
    """Tiles row-major, 2 rows × 3 columns, black padding, every tile at the chunk's smallest height and width,
    an unreadable frame (None) left out of its chunk so the later frames move left."""
    cases = _release_cases()["mosaic_layout"]
    colour = [((10 + 18 * i) % 256, (240 - 17 * i) % 256, (53 * i + 30) % 256) for i in range(16)]
    for case in cases["cases"]:
        frames = [None if i in case["unreadable_inputs"] else np.full((h, w, 3), colour[i], dtype=np.uint8)
                  for i, (h, w) in enumerate(case["input_sizes_hw"])]
        grids = mosaics(frames)
        assert len(grids) == case["n_grids"], case["name"]
        for grid, want in zip(grids, case["grids"]):
            assert list(grid.shape[:2]) == want["grid_hw"], case["name"]
            th, tw = want["tile_hw"]
            for r, row in enumerate(want["tiles_row_major"]):
                for c, tile in enumerate(row):
                    centre = grid[r * th + th // 2, c * tw + tw // 2]
                    expected = (0, 0, 0) if tile.startswith("pad") else colour[int(tile[len("frame"):])]
                    assert tuple(int(v) for v in centre) == expected, (case["name"], r, c)


def test_the_frame_index_is_drawn_white_in_the_top_left_corner():
    black = np.zeros((256, 320, 3), dtype=np.uint8)
    labelled = draw_index(black, 1234)
    corner, rest = labelled[:80, :160], labelled[120:, 180:]
    assert (corner == 255).all(axis=2).sum() > 50  # white text pixels near the corner
    assert not rest.any()  # nothing elsewhere
    assert not (draw_index(black, 7)[:80, :160] == corner).all()  # another index, other pixels
    assert not black.any()  # the input is left alone


def test_clip_analyzer_replies_parse_with_the_fallbacks():
    assert parse_clip_reply("Answer: the cup is in the sink\nConfidence: 0.8") == \
        ("the cup is in the sink", 0.8, "lines")
    # The release does not know "**Answer:**": the whole reply is the answer (the code before issue 35 gave "red").
    assert parse_clip_reply("**Answer:** red\n**Confidence:** 1.5") == \
        ("**Answer:** red\n**Confidence:** 1.5", 1.0, "first_number+whole_text")
    # No Confidence line: the first number in the text; no Answer line: the whole text.
    assert parse_clip_reply("I think 0.3 of the frames show a cup") == \
        ("I think 0.3 of the frames show a cup", 0.3, "first_number+whole_text")
    assert parse_clip_reply("Answer: nothing visible") == ("nothing visible", 0.5, "default")
    assert parse_clip_reply("Answer: 7 people")[1] == 1.0  # the first number, clamped
    assert parse_clip_reply("Answer: red\nAnswer: blue")[0] == "blue"  # the last Answer line wins
    # The named alternative: labels in emphasis or any case, % as a share, no number taken from the answer.
    assert parse_clip_reply("**Answer:** red\n**Confidence:** 0.9", "lenient") == ("red", 0.9, "lines")
    assert parse_clip_reply("Answer: 2 cups", "lenient") == ("2 cups", 0.5, "default")
    assert parse_clip_reply("answer: red\nconfidence 80%", "lenient") == ("red", 0.8, "lines")
    assert parse_clip_reply("Answer: red (Confidence: 0.9)", "lenient") == ("red", 0.9, "lines")
    with pytest.raises(ValueError, match="empty"):
        parse_clip_reply("", "lenient")


def test_tool_arguments_and_json_actions_parse():
    assert parse_arguments('```json\n{"frame_range": {"start_frame": 1, "end_frame": 9}\n```') == \
        {"frame_range": {"start_frame": 1, "end_frame": 9}}
    assert parse_arguments('{"frame_ranges": [{"start_frame": 0, "end_frame": 5}') == \
        {"frame_ranges": [{"start_frame": 0, "end_frame": 5}]}
    with pytest.raises(ValueError):
        parse_arguments("[1, 2]")
    with pytest.raises(ValueError):
        parse_arguments("not json")
    text = 'I will look. {"tool": "scene_snapper", "arguments": {"frame_ranges": [{"start_frame": 0, "end_frame": 9}]}}'
    assert json_actions(text) == [{"name": "scene_snapper",
                                   "arguments": '{"frame_ranges": [{"start_frame": 0, "end_frame": 9}]}'}]
    assert json_actions('[{"tool": "a", "arguments": {}}, {"tool": "b", "arguments": "{}"}]') == \
        [{"name": "a", "arguments": "{}"}, {"name": "b", "arguments": "{}"}]
    assert json_actions('The answer is B. {"answer": "B"}') == []


def test_openai_function_calls_go_out_as_tools_and_come_back_as_tool_calls():
    tools = ({"type": "function", "function": {"name": "clip_analyzer", "parameters": {"type": "object"}}},)
    request = ChatRequest((Message.text("user", "hi"),), tools=tools, tool_choice="required")
    body = chat_body(request, "m")
    assert body["tools"] == [dict(tools[0])] and body["tool_choice"] == "required"
    assert "tools" not in chat_body(ChatRequest((Message.text("user", "hi"),)), "m")
    reply = {"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "clip_analyzer", "arguments": '{"question": "q"}'}},
        {"id": "c2", "type": "function", "function": {"name": "scene_snapper", "arguments": {"reason": "r"}}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
    response = parse_chat_response(reply, request, 0.1)
    assert response.error is None and response.text == ""
    assert response.tool_calls == [{"name": "clip_analyzer", "arguments": '{"question": "q"}'},
                                   {"name": "scene_snapper", "arguments": '{"reason": "r"}'}]
    # Tool calls are part of the cached response; tools are part of the cache key only when offered.
    assert json.loads(response.to_json())["tool_calls"] == response.tool_calls
    assert "tools" in request.cache_payload() and "tools" not in ChatRequest(request.messages).cache_payload()


def make_vfr_video(path: Path, seconds: int = 3, fps: int = 30) -> Path:
    """A video with irregular frame durations (1.45, 1.45, 0.1 frame periods, repeating), each frame carrying its
    index in the demo's index strip. The time base is set to 1/90000 before the timestamps are rewritten and the
    encoder keeps it: in the source's 1/fps time base the irregular timestamps would round back to a regular grid."""
    from senri.demo import index_strip_source

    graph = (f"testsrc2=s=640x360:r={fps}:d={seconds}[bg];{index_strip_source(fps, seconds, 'strip')};"
             f"[bg][strip]overlay=0:0:shortest=1,settb=1/90000,setpts='(N+0.45*mod(N,3))/({fps}*TB)'[v]")
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-filter_complex", graph, "-map", "[v]",
                    "-fps_mode", "passthrough", "-enc_time_base", "1/90000", "-video_track_timescale", "90000",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "15", "-preset", "veryfast", str(path)],
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return path


def test_frame_indices_map_to_source_seconds_on_a_vfr_video(tmp_path):
    path = make_vfr_video(tmp_path / "vfr.mp4")
    clock = FrameClock.of(path)
    pts, _ = ffprobe_frames(path)
    assert clock.total_frames == len(pts)
    assert clock.times_s == pytest.approx(pts, abs=1e-6)
    # Irregular frame durations: index / average fps is not the frame's time, the clock is.
    assert max(abs(clock.seconds(i) - pts[0] - i / clock.fps) for i in range(len(pts))) > 0.5 / 30
    picks = [0, 1, 2, 3, 37, len(pts) - 1]
    frames = list(read_frames(path, [clock.seconds(i) for i in picks], accuracy="exact"))
    assert [f.frame_index for f in frames] == picks
    assert [read_frame_index(f.image.mean(axis=2)) for f in frames] == picks  # the burned-in index agrees
    assert clock.interval_s(1, 37) == [round(pts[1], 3), round(pts[37], 3)]


# ------------------------------------------------------------------------------------------- episodes


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videoarm")
    path = make_indexed_video(folder / "v.mp4", seconds=4, fps=30, gop=30)
    return path, probe(path, "v")


@functools.lru_cache(maxsize=None)
def _episode_config(tools: bool, extra: tuple[str, ...], method: tuple[tuple[str, Any], ...]) -> dict:
    """compose() of an episode's run config, once per distinct setting (a compose costs ~0.25 s of CPU and the
    episodes repeat a few settings), its scripted model's files named by placeholders the caller replaces."""
    return compose(["method=[videoarm]", "model=[]", "dataset=demo",
                    f"+model.s={{backend:scripted,script:SCRIPT,record:RECORD,tools:{str(tools).lower()}}}",
                    *extra, *[f"method.videoarm.{k}={v}" for k, v in method]])


def _method(tmp_path: Path, clip, rules: list[dict], tools: bool, extra: tuple[str, ...] = (),
            **method) -> tuple[VideoARM, Path]:
    script, record = tmp_path / "script.jsonl", tmp_path / "calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    cfg = copy.deepcopy(_episode_config(tools, tuple(extra), tuple(method.items())))
    spec = dict(cfg["method"]["videoarm"])
    model = dict(cfg["model"]["s"])
    assert (model["script"], model["record"]) == ("SCRIPT", "RECORD")
    model.update(script=str(script), record=str(record))
    from senri.backends import open_backend

    context = RunContext(video=clip[1], method_name="videoarm", method_config=spec, model_name="s",
                         model_config=model, seed=0, backend=open_backend(model, None), pixels=clip[0])
    return VideoARM(context), record


def _calls(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def _images(call: dict) -> list[str]:
    return [p["image"] for m in call["payload"]["messages"] for p in m["content"] if isinstance(p, dict)]


SNAP = {"name": "scene_snapper", "arguments": json.dumps(
    {"frame_ranges": [{"start_frame": 0, "end_frame": 29}, {"start_frame": 30, "end_frame": 119}],
     "num_frames": 30, "reason": "overview"})}
SNAP_LATE = {"name": "scene_snapper", "arguments": json.dumps(
    {"frame_ranges": [{"start_frame": 60, "end_frame": 119}], "num_frames": 60, "reason": "second half"})}
CLIP = {"name": "clip_analyzer", "arguments": json.dumps(
    {"frame_range": {"start_frame": 60, "end_frame": 90}, "question": "where is the cup?", "reason": "check"})}
CAPTION_RULES = [
    {"match": "frames 60 to 119", "text": "Caption: LATE-CAPTION a sink"},
    {"match": "sampled evenly from frames", "text": "Caption: EARLY-CAPTION a kitchen\nmore text"},
    {"match": "Question about these frames", "text": "Answer: CLIP-ANSWER in the sink\nConfidence: 0.9"},
]


def test_a_function_call_episode_snapshots_analyses_then_answers(tmp_path, clip):
    rules = CAPTION_RULES + [
        {"match": "CLIP-ANSWER", "text": "The cup is in the sink, so the answer is B."},
        {"match": "LATE-CAPTION", "text": "", "tool_calls": [CLIP]},
        {"match": "EARLY-CAPTION", "text": "", "tool_calls": [SNAP_LATE]},
        {"match": '"scene_snapshots": []', "text": "", "tool_calls": [SNAP]},
    ]
    method, record = _method(tmp_path, clip, rules, tools=True)
    result = method.answer(QUESTION)
    assert result.pred == "B" and result.parse_ok and result.error is None
    trace = result.trace
    assert trace["interface"] == "function_calling" and not trace["forced"]
    assert [s["iteration"] for s in trace["steps"]] == [1, 2, 3, 4] and trace["steps"][-1]["outcome"] == "answer"
    assert [e["tool_name"] for e in trace["tool_calls_log"]] == ["scene_snapper", "scene_snapper", "clip_analyzer"]
    # HM³ after each tool: one snapshot entry per range (caption shared, first line, "Caption:" stripped), then
    # the late snapshot, then the clip analysis with its parsed answer and confidence.
    hm3 = trace["hm3"]
    assert hm3["scene_snapshots"] == [
        {"iteration": 1, "frame_interval": [0, 29], "reason": "overview", "caption": "EARLY-CAPTION a kitchen"},
        {"iteration": 1, "frame_interval": [30, 119], "reason": "overview", "caption": "EARLY-CAPTION a kitchen"},
        {"iteration": 2, "frame_interval": [60, 119], "reason": "second half", "caption": "LATE-CAPTION a sink"}]
    assert hm3["clip_analyses"] == [{"iteration": 3, "frame_interval": [60, 90], "question": "where is the cup?",
                                     "answer": "CLIP-ANSWER in the sink", "confidence": 0.9, "reason": "check"}]
    assert hm3["audio_transcripts"] == []
    calls = _calls(record)
    controller = [c for c in calls if c["purpose"].startswith("controller")]
    assert [c["payload"]["tool_choice"] for c in controller] == ["required", "auto", "auto", "auto"]
    assert all(len(c["payload"]["tools"]) == 3 for c in controller)
    # What the controller sees at each step: the HM³ so far, never an earlier reply or tool output.
    users = [next(p for m in c["payload"]["messages"] if m["role"] == "user" for p in m["content"]
                  if isinstance(p, str)) for c in controller]
    assert '"scene_snapshots": []' in users[0] and "EARLY-CAPTION" in users[1] and "CLIP-ANSWER" in users[3]
    assert all(m["role"] in ("system", "user") for c in controller for m in c["payload"]["messages"])
    assert "Options:\nA. on the table" in users[0] and "- audio_transcriber: transcribe the speech" in users[0]
    # A3 joins only after an audio_transcriber call found no audio (the released code); none was made here.
    assert all("Do not call audio_transcriber" not in c["payload"]["messages"][0]["content"][0] for c in controller)
    # 30 frames split 7 + 23 over the two ranges → 5 mosaics; 60 frames over one range → 10 mosaics.
    snap, late, clip_entry = trace["tool_calls_log"]
    assert len(snap["frame_indices"]) == 30 and snap["frame_indices"][:7] == sample_indices(0, 29, 7)
    assert snap["frame_indices"][7:] == sample_indices(30, 119, 23)
    assert (snap["frames_decoded"], snap["images_sent"]) == (30, 5)
    assert (late["frames_decoded"], late["images_sent"]) == (60, 10)
    assert (clip_entry["frames_decoded"], clip_entry["images_sent"]) == (31, 31)  # min(50, 31 frames)
    assert clip_entry["result"]["sampled_frames"] == 31
    # Only the latest snapshot's mosaics are attached: none at step 1, snapshot 1's at step 2, then snapshot 2's
    # (also after the clip analysis, whose frames the controller never sees).
    captions = [c for c in calls if c["purpose"].startswith("caption")]
    first, second = _images(captions[0]), _images(captions[1])
    assert len(first) == 5 and len(second) == 10 and not set(first) & set(second)
    assert [_images(c) for c in controller] == [[], first, second, second]
    # Source seconds for every tool call (a constant 30 fps here: index / 30).
    assert snap["intervals_s"] == [[0.0, pytest.approx(29 / 30, abs=1e-3)],
                                   [pytest.approx(1.0, abs=1e-3), pytest.approx(119 / 30, abs=1e-3)]]
    assert trace["tokens"]["controller"]["calls"] == 4 and trace["tokens"]["caption"]["calls"] == 2
    from senri.report.browser import trace_marks  # the question browser's time strip shows the looked-at ranges

    assert [(round(a, 2), round(b, 2), label) for a, b, label, _ in trace_marks(trace).periods] == [
        (0.0, 0.97, "scene_snapper (step 1)"), (1.0, 3.97, "scene_snapper (step 1)"),
        (2.0, 3.97, "scene_snapper (step 2)"), (2.0, 3.0, "clip_analyzer (step 3)")]
    assert trace["substitutions"] and trace["models"] == {"controller": "s", "caption": "s", "clip": "s",
                                                          "audio": None}
    assert result.tally.health.get("forced_answers", 0) == 0


def test_a_json_action_episode_must_call_a_tool_first_and_ends_at_a_tool_less_reply(tmp_path, clip):
    action = json.dumps({"tool": "clip_analyzer", "arguments": json.loads(CLIP["arguments"])})
    rules = CAPTION_RULES + [
        {"match": "CLIP-ANSWER", "text": "Answer: C"},
        {"match": "This is the first step", "text": "I already know: B"},  # no tool call at step 1: not an answer
        {"match": '"clip_analyses": []', "text": f"Let me check.\n{action}"},
    ]
    method, record = _method(tmp_path, clip, rules, tools=False)
    result = method.answer(QUESTION)
    trace = result.trace
    assert trace["interface"] == "json"
    assert [s.get("outcome") for s in trace["steps"]][0].startswith("no tool call at step 1")
    assert [s["iteration"] for s in trace["steps"]] == [1, 2, 3]
    assert [e["tool_name"] for e in trace["tool_calls_log"]] == ["clip_analyzer"]
    assert result.pred == "C" and trace["steps"][-1]["outcome"] == "answer"
    controller = [c for c in _calls(record) if c["purpose"].startswith("controller")]
    assert all("tools" not in c["payload"] for c in controller)  # the JSON form sends no tools field
    assert '"tool": "<tool name>"' in controller[0]["payload"]["messages"][0]["content"][0]


def test_every_call_of_a_reply_runs_and_the_budget_ends_in_one_forced_answer(tmp_path, clip):
    bad = {"name": "clip_analyzer", "arguments": '{"frame_range": {"start_frame": 5, "end_frame": 5}, '
                                                  '"question": "q", "reason": "r"}'}
    rules = CAPTION_RULES + [{"text": "B", "tool_calls": [SNAP, bad, {"name": "audio_transcriber",
                                                                       "arguments": '{"frame_ranges": [], "reason": "r"}'}]}]
    method, record = _method(tmp_path, clip, rules, tools=True, max_iterations=3)
    result = method.answer(QUESTION)
    trace = result.trace
    assert trace["forced"] and result.tally.health["forced_answers"] == 1
    assert [s["iteration"] for s in trace["steps"]] == [1, 2, 3, "forced"]
    log = trace["tool_calls_log"]
    assert [(e["iteration"], e["tool_name"]) for e in log] == [
        (i, name) for i in (1, 2, 3) for name in ("scene_snapper", "clip_analyzer", "audio_transcriber")]
    assert "more than one frame" in log[1]["result"]["error"]  # s == e is an error and changes nothing
    assert log[2]["result"]["status"] in ("no_audio", "unavailable")
    assert trace["hm3"]["clip_analyses"] == [] and trace["hm3"]["audio_transcripts"] == []
    assert len(trace["hm3"]["scene_snapshots"]) == 6
    forced = [c for c in _calls(record) if c["purpose"] == "controller:forced"]
    assert len(forced) == 1 and "tools" not in forced[0]["payload"]
    assert forced[0]["payload"]["messages"][-1]["role"] == "system"
    assert "used every step" in forced[0]["payload"]["messages"][-1]["content"][0]
    assert result.pred == "B"


def test_an_empty_forced_answer_falls_back_to_the_fixed_text(tmp_path, clip):
    rules = CAPTION_RULES + [{"text": "", "tool_calls": [SNAP]}]
    method, _ = _method(tmp_path, clip, rules, tools=True, max_iterations=1)
    result = method.answer(QUESTION)
    assert result.raw_output == FORCED_FALLBACK and result.pred is None and not result.parse_ok


def test_a_text_only_model_is_refused_at_start(tmp_path, clip):
    script = tmp_path / "s.jsonl"
    script.write_text('{"text": "B"}\n')
    cfg = compose(["method=[videoarm]", "model=[]", "dataset=demo",
                   f"+model.t={{backend:scripted,script:{script},images:false}}"])
    from senri.backends import open_backend

    model = dict(cfg["model"]["t"])
    context = RunContext(video=clip[1], method_name="videoarm", method_config=dict(cfg["method"]["videoarm"]),
                         model_name="t", model_config=model, seed=0, backend=open_backend(model, None),
                         pixels=clip[0])
    with pytest.raises(ValueError, match="takes no images"):
        VideoARM(context)


def test_the_text_only_variant_reads_the_caption_memory_over_the_range(tmp_path, clip):
    from senri.backends import open_backend
    from senri.methods.videoarm import VideoARMTextOnly
    from senri.records import MemoryRow, to_frame, write_table

    rows = [MemoryRow("v", "coarse", 0.0, 2.0, 1.0, 2, "h", "RED-CUP on the table", "perception", "t", None, None, None),
            MemoryRow("v", "coarse", 2.0, 4.0, 1.0, 2, "h", "SINK-CUP in the sink", "perception", "t", None, None, None)]
    memory = write_table(to_frame(rows, MemoryRow), tmp_path / "memory.parquet", MemoryRow)
    rules = [{"match": "Question about these frames", "text": "Answer: in the sink\nConfidence: 0.7"},
             {"match": "\"confidence\": 0.7", "text": "B"},
             {"match": "SINK-CUP", "text": "", "tool_calls": [CLIP]},
             {"text": "", "tool_calls": [SNAP_LATE]}]
    script, record = tmp_path / "script.jsonl", tmp_path / "calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    cfg = compose(["method=[videoarm_text_only]", "model=[]", "dataset=demo",
                   f"+model.t={{backend:scripted,script:{script},record:{record},tools:true,images:false}}"])
    model = dict(cfg["model"]["t"])
    context = RunContext(video=clip[1], method_name="videoarm_text_only",
                         method_config=dict(cfg["method"]["videoarm_text_only"]), model_name="t", model_config=model,
                         seed=0, backend=open_backend(model, None), pixels=clip[0], memory=memory,
                         memory_config={"memory": {"captioner": "perception"}})
    result = VideoARMTextOnly(context).answer(QUESTION)
    assert result.pred == "B" and result.trace["variant"] == "text_only"
    # Frames 60–119 are seconds 2–4: only the second period's caption; nothing decoded, nothing attached.
    snapshot = result.trace["hm3"]["scene_snapshots"][0]
    assert "SINK-CUP" in snapshot["caption"] and "RED-CUP" not in snapshot["caption"]
    assert result.trace["frames_decoded"] == 0 and result.trace["images_sent"] == 0
    calls = _calls(record)
    clip_call = next(c for c in calls if c["purpose"].startswith("clip"))
    assert "SINK-CUP" in json.dumps(clip_call["payload"]) and not _images(clip_call)
    assert "text-only" in calls[0]["payload"]["messages"][0]["content"][0]


def test_the_controller_request_is_trimmed_to_the_model_limits(tmp_path, clip):
    rules = CAPTION_RULES + [{"match": "EARLY-CAPTION", "text": "B"}, {"text": "", "tool_calls": [SNAP]}]
    script, record = tmp_path / "script.jsonl", tmp_path / "calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    method, record = _method(tmp_path, clip, rules, tools=True)
    method.context.backend.config["max_images"] = 3  # the controller takes 3 images; the snapshot has 5
    result = method.answer(QUESTION)
    assert result.pred == "B"
    assert result.trace["steps"][1]["images"] == 3 and len(result.trace["steps"][1]["trims"]) >= 2
    assert result.tally.health["context_trims"] >= 2


def test_every_videoarm_prompt_phrase_reaches_its_request(tmp_path, clip):
    """Each ARM-* row of docs/protocol.md: its phrase is in what an episode sent (the tool schemas included)."""
    from test_protocol import INSTRUCTIONS, _strip

    rows = [r for r in INSTRUCTIONS if _strip(r["id"]).startswith("ARM-")]
    assert {_strip(r["id"]) for r in rows} == {f"ARM-A{i}" for i in range(1, 8)}
    rules = CAPTION_RULES + [{"match": "LATE-CAPTION", "text": "", "tool_calls": [CLIP]},
                             {"match": "EARLY-CAPTION", "text": "", "tool_calls": [SNAP_LATE]},
                             {"text": "", "tool_calls": [SNAP, AUDIO]}]  # no audio: A3 from step 2 on
    method, record = _method(tmp_path, clip, rules, tools=True, max_iterations=3)
    method.answer(QUESTION)
    sent = "\n".join(json.dumps(c["payload"], ensure_ascii=False) for c in _calls(record))
    sent = sent.replace("\\n", "\n").replace('\\"', '"')
    for row in rows:
        assert _strip(row["phrase"]) in sent, row["id"]


@pytest.mark.workflow
def test_videoarm_runs_through_the_dag_with_a_tiny_vlm(tmp_path, prepared_demo):
    """method=[videoarm] on the one-video demo (its upstream stages prepared once per session): a scripted
    controller with function calling whose tools run on the tiny random VLM (named in tool_models), and the tiny
    VLM as a controller itself (JSON action form). The report's Table 2 shows the Evidence Seeking group."""
    import polars as pl

    from conftest import ONE_VIDEO_DEMO, snakemake
    from tiny_vlm import build_tiny_llava

    prepared_demo(tmp_path, ONE_VIDEO_DEMO)
    model = build_tiny_llava(tmp_path / "tiny-vlm")
    script = tmp_path / "controller.jsonl"
    rules = [{"match": '"clip_analyses": [\n  {', "text": "The answer is B."},
             {"match": '"scene_snapshots": [\n  {', "text": "", "tool_calls": [
                 {"name": "clip_analyzer", "arguments": {"frame_range": {"start_frame": 0, "end_frame": 40},
                                                         "question": "what is shown?", "reason": "check"}}]},
             {"text": "", "tool_calls": [{"name": "scene_snapper", "arguments": {
                 "frame_ranges": [{"start_frame": 0, "end_frame": 100000}], "num_frames": 30, "reason": "overview"}}]}]
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    overrides = (f"{ONE_VIDEO_DEMO} method=[videoarm] model=[] "
                 f"+model.ctl={{backend:scripted,script:{script},tools:true}} "
                 f"+model.tiny={{backend:transformers,path:{model},max_tokens:4,max_tokens_cap:4}} "
                 "method.videoarm.tool_models.caption=tiny method.videoarm.tool_models.clip=tiny "
                 "method.videoarm.max_iterations=2 method.videoarm.clip_max_frames=8")
    snakemake(tmp_path, "-c2", "--config", f"overrides={overrides}")
    scripted = pl.read_parquet(tmp_path / "results/predictions/videoarm/ctl/demo_01.parquet")
    assert scripted["error"].is_null().all() and (scripted["pred"] == "B").all()
    for trace in map(json.loads, scripted["trace"]):
        assert [e["tool_name"] for e in trace["tool_calls_log"]] == ["scene_snapper", "clip_analyzer"]
        assert trace["models"] == {"controller": "ctl", "caption": "tiny", "clip": "tiny", "audio": None}
        assert trace["tool_calls_log"][0]["frames_decoded"] == 30 and trace["tool_calls_log"][1]["frames_decoded"] == 8
        last = trace["hm3"]["scene_snapshots"][0]["frame_interval"][1]
        assert last == trace["video_info"]["total_frames"] - 1  # the range is clamped to the video
        assert trace["tool_calls_log"][0]["intervals_s"][0][1] > 0
    tiny = pl.read_parquet(tmp_path / "results/predictions/videoarm/tiny/demo_01.parquet")
    assert tiny["error"].is_null().all()  # random weights: answers are noise, but every question ran
    assert all(json.loads(t)["interface"] == "json" for t in tiny["trace"])
    questions = pl.read_parquet(tmp_path / "results/questions.parquet").height
    assert scripted.height == tiny.height == questions
    table2 = (tmp_path / "results/report/tables/main.md").read_text()  # the report's Table 2, grouped by approach
    assert table2.startswith("**Evidence Seeking**") and f"| videoarm | ctl | none | {questions} |" in table2


def test_tool_models_are_named_model_configs_in_the_answer_slice():
    from senri.config import ConfigError, stage_slice

    base = ["method=[videoarm]", "model=[smollm2]", "dataset=demo"]
    cfg = compose([*base, "method.videoarm.tool_models.clip=qwen25vl3b_hf"])
    spec = stage_slice(cfg, "answer", method="videoarm", model="smollm2")["method"]
    assert spec["tool_model_configs"]["clip"]["name"] == "qwen25vl3b_hf"
    assert spec["tool_model_configs"]["clip"]["config"]["backend"] == "transformers"
    assert "caption" not in spec["tool_model_configs"]  # null: the run's model, recorded at run time
    # The ASR model is a model config too (backend openai, served with /audio/transcriptions), in the slice.
    spec = stage_slice(compose([*base, "method.videoarm.tool_models.audio=openai_asr"]), "answer", method="videoarm",
                       model="smollm2")["method"]
    assert spec["tool_model_configs"]["audio"]["config"]["model"] == "whisper-1"
    with pytest.raises(ConfigError, match="config.method.videoarm.tool_models.caption: 'nosuch'"):
        compose([*base, "method.videoarm.tool_models.caption=nosuch"])


def test_questions_advance_together_in_batches_and_answer_as_one_by_one(tmp_path, clip):
    from dataclasses import replace

    rules = CAPTION_RULES + [
        {"match": "CLIP-ANSWER", "text": "The answer is B."},
        {"match": "EARLY-CAPTION", "text": "", "tool_calls": [CLIP]},
        {"text": "", "tool_calls": [SNAP]},
    ]
    questions = [replace(QUESTION, qid=f"q{k}", question=f"Where did I put cup {k}?") for k in range(3)]
    method, record = _method(tmp_path, clip, rules, tools=True)
    together = method.answer_many(questions)
    purposes = [c["purpose"] for c in _calls(record)]
    # Each round sends every question's pending call at once: 3 controller steps, then 3 captions, and so on.
    assert purposes[:6] == ["controller:1"] * 3 + ["caption:1"] * 3
    assert purposes[6:9] == ["controller:2"] * 3 and purposes[-3:] == ["controller:3"] * 3
    alone = [method.answer(q) for q in questions]
    assert [a.pred for a in together] == [a.pred for a in alone] == ["B"] * 3
    for a, b in zip(together, alone):
        assert a.trace["hm3"] == b.trace["hm3"] and a.trace["tool_statistics"] == b.trace["tool_statistics"]


# ---------------------------------------------------------------------------------------- audio (A-T4)


@pytest.fixture(scope="module")
def talking_clip(tmp_path_factory, clip):
    """The indexed 4-s, 30-fps clip with an audio track: a 440 Hz tone (AAC, 48 kHz) under the whole video (the
    ``clip`` fixture's video stream, copied)."""
    folder = tmp_path_factory.mktemp("videoarm_audio")
    silent = clip[0]
    path = folder / "v.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(silent), "-f", "lavfi", "-i",
                    "sine=frequency=440:sample_rate=48000:duration=4", "-map", "0:v", "-map", "1:a", "-c:v", "copy",
                    "-c:a", "aac", "-shortest", str(path)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    info = probe(path, "v")
    assert info.has_audio
    return path, info


class AsrHandler(JsonHandler):
    """An OpenAI-compatible /audio/transcriptions server: it reads the multipart upload (kept for the test to
    check) and answers verbose_json with the class's segments."""

    uploads: list[dict] = []
    segments: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        from email.parser import BytesParser
        from email.policy import HTTP

        body = self.rfile.read(int(self.headers["Content-Length"]))
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body)
        fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                  for part in message.iter_parts()}
        type(self).uploads.append({"path": self.path, "fields": fields})
        if self.path != "/v1/audio/transcriptions":
            self._send(404, {"error": "not found"})
            return
        segments = type(self).segments
        self._send(200, {"text": "".join(s["text"] for s in segments), "segments": segments, "language": "en"})


@pytest.fixture
def asr_server():
    import threading
    from http.server import ThreadingHTTPServer

    AsrHandler.uploads, AsrHandler.segments = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), AsrHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield AsrHandler, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _asr(url: str) -> tuple[str, ...]:
    return (f"+model.asr={{backend:openai,base_url:'{url}',model:whisper-test,max_retries:0}}",
            "method.videoarm.tool_models.audio=asr")


AUDIO = {"name": "audio_transcriber", "arguments": json.dumps(
    {"frame_ranges": [{"start_frame": 0, "end_frame": 29}, {"start_frame": 60, "end_frame": 89}],
     "reason": "what was said"})}


def test_the_audio_transcriber_sends_the_ranges_audio_once_and_maps_segments_to_frames(tmp_path, talking_clip,
                                                                                        asr_server):
    import io
    import wave

    handler, url = asr_server
    # Two 1-s ranges → 2 s of audio. Times into the concatenation: < 1 s is range 1 (frame = 30·t), ≥ 1 s is
    # range 2 (frame = 60 + 30·(t − 1)); a segment over the join starts in one range and ends in the other.
    handler.segments = [{"id": 0, "start": 0.0, "end": 0.5, "text": " HELLO kitchen"},
                        {"id": 1, "start": 0.91, "end": 1.12, "text": " across"},
                        {"id": 2, "start": 1.25, "end": 1.55, "text": " the cup is in the sink"}]
    rules = [{"match": "HELLO kitchen", "text": "B"},
             {"match": '"audio_transcripts": []', "text": "", "tool_calls": [AUDIO]}]
    method, record = _method(tmp_path, talking_clip, rules, tools=True, extra=_asr(url))
    result = method.answer(QUESTION)
    method.close()
    trace = result.trace
    assert result.pred == "B" and trace["video_info"]["audio_transcriber"] is True
    assert trace["models"]["audio"] == "asr"
    controller = [c for c in _calls(record) if c["purpose"].startswith("controller")]
    assert "no usable audio track" not in controller[0]["payload"]["messages"][0]["content"][0]
    # One upload: the model, verbose_json, and a 16 kHz mono 16-bit WAV of exactly the two ranges' 2 s.
    assert len(handler.uploads) == 1
    fields = handler.uploads[0]["fields"]
    assert fields["model"] == b"whisper-test" and fields["response_format"] == b"verbose_json"
    with wave.open(io.BytesIO(fields["file"])) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (1, 16000, 2)
        assert wav.getnframes() == 32000
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(float)
    assert np.sqrt((samples[1000:-1000] ** 2).mean()) > 1000  # the tone, not silence
    spectrum = np.abs(np.fft.rfft(samples[:16000]))
    assert abs(np.argmax(spectrum) - 440) <= 2  # 1 Hz bins over 1 s: the 440 Hz sine
    # HM³ (A-M3) and the tool's result: segment times → global frames through the cumulative range durations.
    assert trace["hm3"]["audio_transcripts"] == [{
        "iteration": 1, "reason": "what was said", "text": "HELLO kitchen across the cup is in the sink",
        "segments": [{"frame_interval": [0, 14], "text": "HELLO kitchen"},
                     {"frame_interval": [27, 63], "text": "across"},
                     {"frame_interval": [67, 76], "text": "the cup is in the sink"}]}]
    entry = trace["tool_calls_log"][0]
    assert entry["result"]["status"] == "success" and entry["audio_s"] == 2.0
    assert entry["result"]["segments"][2] == {"start_frame": 67, "end_frame": 76, "text": "the cup is in the sink"}
    assert entry["intervals_s"] == [[0.0, pytest.approx(29 / 30, abs=1e-3)],
                                    [pytest.approx(2.0, abs=1e-3), pytest.approx(89 / 30, abs=1e-3)]]


def test_the_audio_transcriber_refuses_too_many_frames_and_reports_a_server_error(tmp_path, talking_clip,
                                                                                  asr_server):
    handler, url = asr_server
    rules = [{"match": '"audio_transcripts": []', "text": "", "tool_calls": [AUDIO]}]
    method, _ = _method(tmp_path, talking_clip, rules, tools=True, extra=_asr(url), max_iterations=1,
                        audio_max_frames=59)
    log = method.answer(QUESTION).trace["tool_calls_log"]
    assert "more than audio_max_frames=59" in log[0]["result"]["error"] and handler.uploads == []
    method, _ = _method(tmp_path, talking_clip, rules, tools=True, extra=(
        f"+model.asr={{backend:openai,base_url:'{url[:-3]}/nowhere',model:w,max_retries:0}}",
        "method.videoarm.tool_models.audio=asr"), max_iterations=1)
    trace = method.answer(QUESTION).trace
    assert "audio transcription failed: HTTP 404" in trace["tool_calls_log"][0]["result"]["error"]
    assert trace["hm3"]["audio_transcripts"] == []


@pytest.mark.parametrize("case", ["no_asr_model", "no_audio_track"])
def test_without_an_asr_model_or_without_audio_the_controller_gets_the_no_audio_note(tmp_path, clip, talking_clip,
                                                                                     asr_server, case):
    handler, url = asr_server
    video, extra = (talking_clip, ()) if case == "no_asr_model" else (clip, _asr(url))
    rules = [{"match": '"audio_transcripts": []', "text": "", "tool_calls": [AUDIO]}]
    method, record = _method(tmp_path, video, rules, tools=True, extra=extra, max_iterations=2)
    trace = method.answer(QUESTION).trace
    controller = [c for c in _calls(record) if c["purpose"].startswith("controller")]
    systems = [c["payload"]["messages"][0]["content"][0] for c in controller]
    # The released code adds A3 once an audio_transcriber call found no audio: from step 2 on, and in the
    # forced answer; the code before issue 35 added it from step 1.
    assert ["no usable audio track" in text for text in systems] == [False, True, True]
    assert trace["video_info"]["audio_transcriber"] is False
    status = trace["tool_calls_log"][0]["result"]["status"]
    assert status == ("unavailable" if case == "no_asr_model" else "no_audio")
    assert "tool_models.audio is null" in trace["video_info"]["audio_transcriber_unavailable"] \
        if case == "no_asr_model" else trace["video_info"]["has_audio"] is False
    assert handler.uploads == [] and trace["hm3"]["audio_transcripts"] == []
    # The named option: from step 1 whenever no transcriber is available.
    method, record = _method(tmp_path, video, rules, tools=True, extra=extra, max_iterations=1,
                             no_audio_note="always")
    method.answer(QUESTION)
    controller = [c for c in _calls(record) if c["purpose"].startswith("controller")][-2:]
    assert all("no usable audio track" in c["payload"]["messages"][0]["content"][0] for c in controller)


def test_the_transcription_client_retries_a_busy_server_and_reads_verbose_json(asr_server):
    from senri.backends.transcription import Transcriber, parse_verbose_json, wav_bytes

    handler, url = asr_server
    busy = {"left": 1}
    original = handler.do_POST

    def flaky(self):  # noqa: ANN001 - one 503 with Retry-After 0, then the normal reply
        if busy["left"]:
            busy["left"] -= 1
            self.rfile.read(int(self.headers["Content-Length"]))
            self._send(503, {"error": "busy"}, {"Retry-After": "0"})
            return
        original(self)

    handler.segments = [{"start": 0.0, "end": 0.2, "text": " hi"}]
    handler.do_POST = flaky
    try:
        client = Transcriber({"backend": "openai", "base_url": url, "model": "w", "max_retries": 1})
        result = client.transcribe(wav_bytes(b"\0\0" * 1600))
        client.close()
    finally:
        handler.do_POST = original
    assert result.error is None and result.attempts == 2 and result.text == "hi"
    assert result.segments == [{"start": 0.0, "end": 0.2, "text": "hi"}]
    assert "no numeric start/end" in parse_verbose_json({"segments": [{"text": "x"}]}).error
    assert parse_verbose_json({"segments": [{"start": 1, "end": 2, "text": " a"}]}).text == "a"
    with pytest.raises(Exception, match="backend must be openai"):
        Transcriber({"backend": "vllm", "base_url": url, "model": "w"})


# ------------------------------------------------------------------- issue 35: the loop's edges, counted
TOOL_NAMES = ["scene_snapper", "audio_transcriber", "clip_analyzer"]


def test_tool_calls_written_into_the_text_are_read_and_never_taken_for_answers():
    args = {"frame_range": {"start_frame": 60, "end_frame": 90}, "question": "where is the cup?", "reason": "r"}
    hermes = f'I will check.\n<tool_call>\n{json.dumps({"name": "clip_analyzer", "arguments": args})}\n</tool_call>'
    found = text_tool_calls(hermes, TOOL_NAMES)
    assert found.unreadable is None and found.calls == [{"name": "clip_analyzer", "arguments": json.dumps(args)}]
    # "name" for "tool" (with "arguments" or "parameters"), an OpenAI-style function object, a Python dict.
    for text in (json.dumps({"name": "clip_analyzer", "arguments": args}),
                 json.dumps({"name": "clip_analyzer", "parameters": args}),
                 json.dumps({"type": "function", "function": {"name": "clip_analyzer", "arguments": json.dumps(args)}}),
                 repr({"name": "clip_analyzer", "arguments": args})):
        calls = text_tool_calls(f"Let me look. {text}", TOOL_NAMES).calls
        assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("clip_analyzer", args)], text
    # Cut off, or not valid in any form: no call, and why (never guessed at, never an answer).
    cut = text_tool_calls('{"tool": "scene_snapper", "arguments": {"frame_ranges": [{"start_frame": 0, "end_', TOOL_NAMES)
    assert cut.calls == [] and "cut off" in cut.unreadable
    broken = text_tool_calls("<tool_call>{'name': clip_analyzer, 'arguments': ...}</tool_call>", TOOL_NAMES)
    assert broken.calls == [] and "<tool_call>" in broken.unreadable
    # Prose with brackets, a "name" that is no tool, and an answer object are answers, not calls.
    for text in ("The answer is B. {\"answer\": \"B\"}", 'I met {"name": "Alice"} there: B',
                 "The man's hat [on frame 12] is red, so B", "Frames [0-29], name: kitchen. B"):
        assert text_tool_calls(text, TOOL_NAMES) == type(cut)([]), text


def test_the_error_check_reads_the_whole_reply_as_the_release_does():
    late = "The cup is on the table in every frame I looked at, I am sure. " * 2 + "Error: none"
    assert is_error_like(late) and not is_error_like(late, chars=80)  # the code before issue 35 read 80 chars
    assert is_error_like("") and is_error_like(" None ") and not is_error_like("B")


@pytest.mark.parametrize("tools", [True, False], ids=["function_calling", "json"])
def test_a_tool_call_left_in_the_text_runs_and_an_unreadable_one_spends_the_step(tmp_path, clip, tools):
    """Problem 1 of issue 35: a Hermes <tool_call> block (what a server without a tool-call parser returns), a
    Python dict and a cut-off JSON call, in both tool interfaces. Before, the first became the answer."""
    snap = {"name": SNAP["name"], "arguments": json.loads(SNAP["arguments"])}
    clip_call = {"name": CLIP["name"], "arguments": json.loads(CLIP["arguments"])}
    rules = CAPTION_RULES + [
        {"match": "CLIP-ANSWER", "text": "The cup is in the sink: B."},
        {"match": "could not be read", "text": f"Checking the sink. {clip_call!r}"},
        {"match": "EARLY-CAPTION", "finish_reason": "length",
         "text": '{"name": "clip_analyzer", "arguments": {"frame_range": {"start_frame": 60, "end_fr'},
        {"match": '"scene_snapshots": []', "text": f"<tool_call>\n{json.dumps(snap)}\n</tool_call>"},
    ]
    method, record = _method(tmp_path, clip, rules, tools=tools)
    result = method.answer(QUESTION)
    trace, health = result.trace, result.tally.health
    assert result.pred == "B" and result.parse_ok
    assert [e["tool_name"] for e in trace["tool_calls_log"]] == ["scene_snapper", "clip_analyzer"]
    steps = trace["steps"]
    assert [s.get("outcome") for s in steps][1].startswith("unreadable tool call (a tool call cut off")
    assert steps[0].get("tool_calls_from_text", False) is tools and steps[2]["tool_calls"] == ["clip_analyzer"]
    assert (health["unparsed_tool_calls"], health["spent_steps"], health["truncated_replies"]) == (1, 1, 1)
    assert steps[1]["truncated"] == 1
    # The controller is told at the next step why nothing ran, and only then.
    users = [c["payload"]["messages"][-1]["content"][0] for c in _calls(record) if c["purpose"].startswith("controller")]
    assert ["could not be read" in u for u in users] == [False, False, True, False]
    # The released code's reading of a function-calling reply without tool_calls: its text is the answer.
    if tools:
        method, _ = _method(tmp_path, clip, rules, tools=True, text_tool_calls="answer")
        release = method.answer(QUESTION)
        assert release.trace["steps"][0]["outcome"].startswith("no tool call at step 1")


def test_a_forced_answer_that_is_a_tool_call_is_no_answer(tmp_path, clip):
    """The sub-question of a tool call written as the forced answer holds option words ("in the sink"): the
    letter rule must not read it as an answer (before issue 35 it gave pred B)."""
    call = json.dumps({"name": "clip_analyzer", "arguments": json.loads(CLIP["arguments"]) | {
        "question": "is the cup in the sink (B) or on the table (A)?"}})
    rules = CAPTION_RULES + [{"match": "EARLY-CAPTION", "text": call}, {"text": "", "tool_calls": [SNAP]}]
    method, _ = _method(tmp_path, clip, rules, tools=True, max_iterations=1)
    result = method.answer(QUESTION)
    assert result.raw_output == FORCED_FALLBACK and result.pred is None
    assert result.tally.health["unparsed_tool_calls"] == 1 and result.trace["forced"]


def test_rejected_calls_spent_steps_and_truncated_replies_are_counted_and_the_controller_is_told(tmp_path, clip):
    bad = {"name": "clip_analyzer", "arguments": '{"frame_range": {"start_frame": 5, "end_frame": 5}, '
                                                  '"question": "q", "reason": "r"}'}
    unknown = {"name": "frame_viewer", "arguments": "{}"}
    rules = [{"match": "sampled evenly from frames", "text": "Caption: EARLY-CAPTION a kitchen and then", 
              "finish_reason": "length"},
             {"match": ["EARLY-CAPTION", "was rejected"], "text": "Error: I could not see the cup."},
             {"match": "EARLY-CAPTION", "text": "The cup is in the sink, B", "finish_reason": "length"},
             {"text": "", "tool_calls": [bad, unknown, SNAP]}]
    method, record = _method(tmp_path, clip, rules, tools=True)
    result = method.answer(QUESTION)
    health, trace = result.tally.health, result.trace
    assert result.pred == "B" and [s.get("outcome") for s in trace["steps"]] == [
        None, "error-like reply: step spent", "answer"]
    assert health["rejected_tool_calls"] == 2 and health["spent_steps"] == 1
    assert health["truncated_replies"] == 2  # the caption and the answer, both cut at their token limit
    assert trace["steps"][0]["truncated_captions"] == 1 and trace["steps"][2]["truncated"] == 1
    assert [e.get("rejected", False) for e in trace["tool_calls_log"]] == [True, True, False]
    users = [c["payload"]["messages"][-1]["content"][0] for c in _calls(record) if c["purpose"].startswith("controller")]
    assert "Your clip_analyzer call was rejected and changed nothing: start_frame equals end_frame." in users[1]
    assert "Your frame_viewer call was rejected and changed nothing: unknown tool 'frame_viewer'" in users[1]
    assert trace["steps"][1]["told"] and "was rejected" not in users[2]  # told once
    # The released code never tells the controller (tool_feedback: false).
    method, record = _method(tmp_path, clip, rules[:1] + rules[2:], tools=True, tool_feedback="false")
    assert method.answer(QUESTION).tally.health["rejected_tool_calls"] == 2
    assert not any("was rejected" in json.dumps(c["payload"]) for c in _calls(record)[-3:])


def test_frames_that_fail_to_decode_are_sent_black_and_counted(tmp_path, clip, monkeypatch):
    import dataclasses

    import senri.decode

    real = senri.decode.read_frames

    def lossy(*args, **kwargs):  # every third frame fails to decode
        for k, sample in enumerate(real(*args, **kwargs)):
            yield dataclasses.replace(sample, image=None) if k % 3 == 2 else sample

    monkeypatch.setattr(senri.decode, "read_frames", lossy)
    rules = CAPTION_RULES + [{"match": "EARLY-CAPTION", "text": "B"}, {"text": "", "tool_calls": [SNAP]}]
    method, _ = _method(tmp_path, clip, rules, tools=True)
    result = method.answer(QUESTION)
    entry = result.trace["tool_calls_log"][0]
    assert entry["frames_decoded"] == 20 and entry["black_frames"] == 10 and entry["images_sent"] == 5
    assert result.tally.health["black_frames"] == 10 and result.trace["black_frames"] == 10


def test_a_content_filter_forces_the_answer_and_another_failure_ends_the_question(tmp_path, clip):
    # (The scripted backend matches the last user turn, which the forced call repeats: it is filtered too.)
    rules = [{"error": "the response was filtered due to the prompt triggering the content filter"}]
    method, record = _method(tmp_path, clip, rules, tools=True)
    result = method.answer(QUESTION)
    # Forced, but the forced call was filtered too: no answer came from it, so no forced answer is counted (issue 39:
    # forced_answers means the same for every method).
    assert result.trace["forced"] and result.tally.health.get("forced_answers", 0) == 0 and result.pred is None
    assert [s["iteration"] for s in result.trace["steps"]] == [1, "forced"]  # no step 2: forced at once
    assert result.raw_output == FORCED_FALLBACK
    assert [c["purpose"] for c in _calls(record)] == ["controller:1", "controller:forced"]
    method, _ = _method(tmp_path, clip, [{"error": "HTTP 500: the server fell over"}], tools=True)
    result = method.answer(QUESTION)
    assert result.pred is None and not result.trace["forced"] and "fell over" in result.tally.errors[0]


def test_the_controller_is_shown_the_raw_num_frames_as_the_release_shows_it(tmp_path, clip):
    """A-T3: num_frames 45 is not one of 30/60/90/150, so the caption model gets 30 frames (5 mosaics) but the
    controller 45 (8 mosaics), as in the release's case num_frames_not_in_enum; controller_frames: caption
    shows the caption's 5."""
    snap = {"name": "scene_snapper", "arguments": json.dumps(
        {"frame_ranges": [{"start_frame": 0, "end_frame": 119}], "num_frames": 45, "reason": "overview"})}
    rules = CAPTION_RULES + [{"match": "EARLY-CAPTION", "text": "B"}, {"text": "", "tool_calls": [snap]}]
    for option, shown in (("release", 8), ("caption", 5)):
        method, record = _method(tmp_path, clip, rules, tools=True, controller_frames=option)
        result = method.answer(QUESTION)
        entry = result.trace["tool_calls_log"][0]
        assert len(entry["frame_indices"]) == 30 and result.trace["steps"][1]["images"] == shown, option
        assert entry["result"]["message"] == "Loaded 30 frames from 1 range(s). Duration: 4.0s"
        if option == "release":
            assert entry["controller_frame_indices"] == [i for p in split_frames([(0, 119)], 45, 120) for i in p]


def test_the_prompts_follow_the_release_and_the_earlier_wording_is_named_options(tmp_path, clip):
    """Problem 5 of issue 35: by default A1 has no search-strategy hint and no first-person framing, A2 lists
    the tools with a line each, A4 asks for the best final answer; the wording before is four options."""
    rules = CAPTION_RULES + [{"text": "", "tool_calls": [SNAP]}]

    def sent(**options):
        method, record = _method(tmp_path / "_".join(options) if options else tmp_path, clip, rules, tools=True,
                                 max_iterations=1, **options)
        method.answer(QUESTION)
        controller = [c["payload"]["messages"] for c in _calls(record) if c["purpose"].startswith("controller")]
        return controller[0][0]["content"][0], controller[0][-1]["content"][0], controller[-1][-1]["content"][0]

    for folder in ("strategy_hint_viewpoint_tool_list_forced_answer_letter",):
        (tmp_path / folder).mkdir()
    system, user, forced = sent()
    assert "a long video by calling functions" in system and "first-person" not in system
    assert "coarse to fine" not in system
    assert "- scene_snapper: go to frame ranges of the video" in user
    assert "give your best final answer now" in forced and "(A, B, C or D)" not in forced
    system, user, forced = sent(strategy_hint="true", viewpoint="egocentric", tool_list="names",
                                forced_answer_letter="true")
    assert "a long first-person video" in system and "Work from coarse to fine" in system
    assert "Tools: scene_snapper, audio_transcriber, clip_analyzer." in user and "- scene_snapper:" not in user
    assert forced.endswith("State the letter of the option you think is correct (A, B, C or D).")


# ------------------------------------------------------ issue 35 item 2: the server, probed over real HTTP
from strict_openai import StrictOpenAI  # noqa: E402


ACTION = {"frame_ranges": [{"start_frame": 0, "end_frame": 119}], "num_frames": 30, "reason": "overview"}
HTTP_CLIP = {"frame_range": {"start_frame": 30, "end_frame": 90}, "question": "Where is the cup?", "reason": "look closer"}
HTTP_RULES = [
    {"match": "Reply with the single word OK", "text": "OK"},
    {"match": "sampled evenly from frames", "text": "Caption: a kitchen with a sink"},
    {"match": "Question about these frames: Where is the cup?", "text": "Answer: in the sink\nConfidence: 0.9"},
    {"match": "\"answer\": \"in the sink\"", "in": "all", "text": "The cup is in the sink: B."},
    {"match": "a kitchen with a sink", "text": json.dumps({"tool": "clip_analyzer", "arguments": HTTP_CLIP}),
     "tool_call": {"name": "clip_analyzer", "arguments": HTTP_CLIP}},
    {"match": "Hierarchical memory (HM3)", "text": json.dumps({"tool": "scene_snapper", "arguments": ACTION}),
     "tool_call": {"name": "scene_snapper", "arguments": ACTION}},
]


def _http_method(clip, server, **method) -> VideoARM:
    from senri.backends import open_backend

    cfg = compose(["method=[videoarm]", "model=[]", "dataset=demo",
                   f"+model.srv={{backend:openai,base_url:'{server.base_url}',model:{server.model}}}",
                   *[f"method.videoarm.{k}={v}" for k, v in method.items()]])
    model = server.model_config(tools=True)
    context = RunContext(video=clip[1], method_name="videoarm", method_config=dict(cfg["method"]["videoarm"]),
                         model_name="srv", model_config=model, seed=0, backend=open_backend(model, None),
                         pixels=clip[0])
    return VideoARM(context)


def test_a_server_with_tools_in_its_template_keeps_function_calling_over_http(clip):
    with StrictOpenAI(HTTP_RULES) as server:
        method = _http_method(clip, server)
        result = method.answer(QUESTION)
        method.close()
    assert method.interface == "function_calling" and result.trace["interface_probe"]["outcome"] == "function calling"
    assert result.pred == "B" and [e["tool_name"] for e in result.trace["tool_calls_log"]] == ["scene_snapper",
                                                                                              "clip_analyzer"]
    assert server.refused() == []
    bodies = [b["body"] for b in server.bodies]
    assert bodies[0]["tool_choice"] == "auto" and "connectivity check" in bodies[0]["messages"][0]["content"]
    controller = [b for b in bodies if "Hierarchical memory" in json.dumps(b)]
    assert [b["tool_choice"] for b in controller] == ["required", "auto", "auto"] and len(controller[0]["tools"]) == 3
    # Both tools' model calls went over HTTP with the clip's frames as JPEG images; the controller's context is
    # rebuilt each step (as the release rebuilds it) and carries the clip analysis.
    tools = [b for b in bodies if "sampled evenly from frames" in json.dumps(b) or "Question about these frames" in json.dumps(b)]
    assert len(tools) >= 2 and all(any(p.get("type") == "image_url" for m in b["messages"] if isinstance(m["content"], list)
                                       for p in m["content"]) for b in tools)
    from strict_openai import request_text

    assert '"answer": "in the sink"' in request_text(controller[-1])


@pytest.mark.parametrize("server_kind", ["no_auto_tool_choice", "template_without_tools"])
def test_a_server_that_refuses_auto_or_drops_the_tools_switches_to_the_json_form(clip, server_kind):
    """vLLM without --enable-auto-tool-choice refuses tool_choice auto (400); a chat template without a tools
    section (Qwen2.5-VL's) adds no prompt tokens for them. Either way the run uses the JSON action form, with
    the reason in every trace; under tool_interface: function_calling the job stops naming the flags."""
    options = {"auto_tool_choice": False} if server_kind == "no_auto_tool_choice" else {"template_tools": False}
    with StrictOpenAI(HTTP_RULES, **options) as server:
        method = _http_method(clip, server)
        result = method.answer(QUESTION)
        method.close()
        with pytest.raises(ValueError, match="--enable-auto-tool-choice --tool-call-parser"):
            _http_method(clip, server, tool_interface="function_calling")
    probe = result.trace["interface_probe"]
    assert method.interface == "json" and result.trace["interface"] == "json"
    assert probe["outcome"].startswith("switched to the JSON action form")
    assert ("refused tool_choice auto" if server_kind == "no_auto_tool_choice" else
            "leaves the tools out of the prompt") in probe["outcome"]
    assert result.pred == "B" and [e["tool_name"] for e in result.trace["tool_calls_log"]] == ["scene_snapper", "clip_analyzer"]
    after_probe = [b for b in server.bodies if "connectivity check" not in json.dumps(b["body"])]
    assert all(b["status"] == 200 and "tools" not in b["body"] for b in after_probe)


def test_tool_calls_a_server_returns_as_hermes_text_are_run_over_http(clip):
    with StrictOpenAI(HTTP_RULES, tool_format="hermes") as server:
        method = _http_method(clip, server)
        result = method.answer(QUESTION)
        method.close()
    assert server.refused() == [] and result.pred == "B"
    assert result.trace["steps"][0]["tool_calls_from_text"] and result.tally.health.get("unparsed_tool_calls", 0) == 0


def test_an_o_series_controller_gets_max_completion_tokens_and_no_temperature_over_http(clip):
    with StrictOpenAI(HTTP_RULES, model="o3", family="reasoning") as server:
        method = _http_method(clip, server)
        result = method.answer(QUESTION)
        method.close()
    assert server.refused() == [] and result.pred == "B"
    for entry in server.bodies:
        body = entry["body"]
        assert "max_completion_tokens" in body and not {"max_tokens", "temperature", "top_p"} & set(body)
    body = chat_body(ChatRequest((Message.text("user", "hi"),), max_tokens=9, temperature=0.0), "gpt-4.1")
    assert body["max_tokens"] == 9 and body["temperature"] == 0.0  # other models keep both

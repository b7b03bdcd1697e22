"""ParaVT's agentic loop (issue 38, shared/spec/evidence_seekers.md §1): the call grammar, the answer cascade,
the exact frames of the overview and the crops, and the loop with a scripted model."""

from __future__ import annotations

import json

import pytest

from seeker_replay import shared_clip
from senri.methods.paravt import MalformedCall, call_window, extract_letter, parse_calls, parse_time, read_calls


def test_the_call_grammar_reads_json_blocks_then_tool_code_and_drops_what_does_not_parse():
    text = ('<think>look twice</think><tool_call>{"name": "crop_video", "arguments": {"video_path": "x.mp4", '
            '"start_time": 12, "end_time": "00:40"}}</tool_call>'
            '<tool_call>{not json}</tool_call>'
            '<tool_call>{"name": "anything", "arguments": "{\\"start\\": \\"1:00:00\\"}"}</tool_call>'
            '<tool_code>crop_video(video_path="x.mp4", start_time=5, end_time=abc)</tool_code>')
    calls, dropped = read_calls(text)
    assert len(calls) == 3 and dropped == 1  # the "{not json}" block, counted unparsed_tool_calls by the loop
    # the release runs a call's arguments only when they are an object: a JSON string of them raises there
    assert call_window(calls[0]) == (12.0, 40.0) and call_window(calls[2]) == (5.0, 0.0)
    with pytest.raises(MalformedCall):
        call_window(calls[1])
    assert call_window(calls[1], lenient=True) == (3600.0, 3610.0)  # malformed_tool_calls: drop reads it
    assert parse_calls("<answer>B</answer>") == []
    with pytest.raises(MalformedCall):
        parse_calls('<tool_call>[1, 2]</tool_call>')
    # release cases parse_time_val-*: a bool is an int, so True is 1.0
    assert [parse_time(v) for v in (3, "4.5", "01:30", "1:02:03", "soon", True)] == [3.0, 4.5, 90.0, 3723.0, 0.0, 1.0]


@pytest.mark.parametrize("text, letter", [
    ("<answer>C</answer>", "C"), ("<answer>maybe (B) fits</answer>", "B"), (" D ", "D"),
    ("<answer>I think (B) fits</answer>", "I"),  # the release's A-J pattern takes the word "I": a quirk kept
    ("The answer is a", "T"),  # release case extract_letter-07: case-sensitive, falls through to the first character
    ("Final: C", "C"), ("so B is right", "B"), ("xyz", "x"), ("", "")])
def test_the_answer_cascade_is_the_release_s(text, letter):
    assert extract_letter(text) == letter


def _context(tmp_path, rules, **method):
    import yaml

    from senri.backends.scripted import ScriptedBackend
    from senri.methods.base import RunContext
    from senri.prompts import prompt_identity

    video, info = shared_clip("pv")  # encoded once per session
    script, record = tmp_path / "model.jsonl", tmp_path / "calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    model = {"backend": "scripted", "script": str(script), "record": str(record), "images": True}
    config = {**yaml.safe_load(open("config/method/paravt.yaml")), **method}
    config["prompt_identity"] = prompt_identity(config)
    context = RunContext(video=info, method_name="paravt", method_config=config, model_name="vlm",
                         model_config=model, seed=0, backend=ScriptedBackend(model), pixels=video)
    return context, record


def test_the_overview_and_a_crop_are_the_release_s_frames_on_senri_s_exact_decoder(tmp_path):
    from senri.decode import read_frames
    from senri.methods.paravt import ParaVT
    from senri.resample import overview_indices, window_indices

    context, _ = _context(tmp_path, [{"text": "A"}])
    method = ParaVT(context)
    assert (method.fps, method.n_frames) == (4.0, 480)
    overview = overview_indices(480, 64)
    got = [f.frame_index for f in read_frames(context.pixels, [(i + 0.5) / 4.0 for i in overview], accuracy="exact")]
    assert got == overview  # each target lands on the planned source frame
    crop = window_indices(10, 40, 4.0, 480, 1.0, 1, 16)
    assert crop == [40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160]  # 30 s -> 16 frames
    assert len(method.crop(10, 40)) == 16 and method.crop(50, 50) == []
    images = method.overview()
    assert len(images) == 64
    from PIL import Image
    import io

    # 160x120 scaled up to >= 100352 px at factor 28: beta = sqrt(100352 / 19200), 120 -> 280, 160 -> 392
    assert Image.open(io.BytesIO(images[0].jpeg)).size == (392, 280)


def test_three_tool_turns_of_at_most_five_crops_then_the_forced_letter(tmp_path):
    from senri.methods.paravt import ParaVT
    from senri.records import Question

    def calls(*windows):
        return "".join(f'<tool_call>{{"name": "crop_video", "arguments": {{"start_time": {s}, "end_time": {e}}}}}'
                       f'</tool_call>' for s, e in windows)

    rules = [{"match": "answer the question now", "text": "B"},
             {"match": "[Error cropping 200.0", "text": calls((0, 10))},  # turn 2: one crop, then forced
             {"match": "16 frames from 20.0 s to 36.0 s.", "text": calls((1, 5), (2, 6), (3, 7), (4, 8), (200, 210),
                                                                        (5, 9))},
             {"match": "Answer with the option", "text": "<think>two places</think>" + calls((10, 40), (20, 36))}]
    context, record = _context(tmp_path, rules)
    question = Question("pv", "q1", "L", "none", "Where was I?", "hall", "kitchen", "garden", "street", "B")
    answer = ParaVT(context).answer(question)
    assert answer.pred == "B" and answer.trace["forced"] is True
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    assert [s["purpose"] for s in sent] == ["paravt:turn0", "paravt:turn1", "paravt:turn2", "paravt:forced"]
    assert sent[-1]["payload"]["max_tokens"] == 64 and sent[0]["payload"]["max_tokens"] == 2048
    messages = sent[-1]["payload"]["messages"]
    roles = [m["role"] for m in messages]
    # system, user (overview), then per tool turn: the raw assistant text and one user message per crop
    assert roles == ["system", "user", "assistant", "user", "user", "assistant"] + ["user"] * 5 + \
        ["assistant", "user", "user"]
    def images(m):
        return sum(isinstance(p, dict) and "image" in p for p in m["content"]) if isinstance(m["content"], list) else 0
    assert images(messages[1]) == 64
    # P-I4 (D:444): the suffix closes the whole question block, after the options and the instruction
    assert messages[1]["content"][-1].endswith("Answer with the option's letter only. The video path for this "
                                               "video is: pv.mp4")
    assert messages[2]["content"][0].startswith("<think>two places</think>")  # the raw text stays in the history
    assert [images(m) for m in messages[3:5]] == [16, 16]
    assert "<tool_response>\n16 frames from 10.0 s to 40.0 s.\n</tool_response>" in json.dumps(messages[3]) \
        .replace("\\n", "\n")
    assert [images(m) for m in messages[6:11]] == [4, 4, 4, 4, 0]  # 5 of the 6 calls; 200-210 s holds no frame
    assert "[Error cropping 200.0–210.0]" in json.dumps(messages[10], ensure_ascii=False)
    tally = answer.tally
    assert tally.behaviour["tool_calls"] == 8 and tally.health["forced_answers"] == 1
    assert tally.health["rejected_tool_calls"] == 1
    assert "unparsed_tool_calls" not in tally.health and "black_frames" not in tally.health


def test_a_reply_without_a_readable_call_is_the_final_answer_and_a_text_only_model_is_refused(tmp_path):
    from senri.methods.paravt import ParaVT
    from senri.records import Question

    context, record = _context(tmp_path, [{"text": "<think>easy</think><answer>C</answer>"}])
    question = Question("pv", "q1", "L", "none", "Where was I?", "hall", "kitchen", "garden", "street", "B")
    answer = ParaVT(context).answer(question)
    assert answer.pred == "C" and answer.trace["forced"] is False and len(record.read_text().splitlines()) == 1
    text_only = type(context)(**{**context.__dict__, "model_config": {**context.model_config, "images": False}})
    from senri.backends.scripted import ScriptedBackend

    text_only = type(context)(**{**text_only.__dict__, "backend": ScriptedBackend(text_only.model_config)})
    with pytest.raises(ValueError, match="takes no images"):
        ParaVT(text_only)


def test_a_tool_call_block_that_does_not_parse_is_dropped_as_the_release_drops_it_and_counted(tmp_path):
    from senri.methods.paravt import ParaVT
    from senri.records import Question

    context, _ = _context(tmp_path, [{"text": "<tool_call>{start: 5}</tool_call> so the answer is B"}])
    question = Question("pv", "q1", "L", "none", "Where was I?", "hall", "kitchen", "garden", "street", "B")
    answer = ParaVT(context).answer(question)
    # no readable call: the reply is the final answer (P-L1), its dropped block counted
    assert answer.pred == "B" and answer.tally.health["unparsed_tool_calls"] == 1

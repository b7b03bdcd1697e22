"""LongVideo-R1's loop (issue 38, shared/spec/evidence_seekers.md §3): the tree's width and node frames (worked
vectors V4, V5), the reply and call grammar, and episodes with a scripted text-only controller and a scripted VLM
for the caption and video_qa tools."""

from __future__ import annotations

import json

import numpy as np
import pytest

from seeker_replay import shared_clip
from senri.methods.longvideo_r1 import (SampleKilled, blocks, caption_ids, caption_side, frame_time, level_parts,
                                        longest_side, nested_low_part, node_index, parse_call, sample_ids,
                                        tree_width, video_qa_args)


@pytest.mark.parametrize("seconds, width", [(3600, 6), (1800, 5), (600, 4), (300, 4), (60, 4), (20000, 8)])
def test_v5_the_tree_width_is_the_clamped_cube_root_of_sixteen_second_segments(seconds, width):
    assert tree_width(seconds * 30, 30.0) == width
    assert tree_width(300 * 30, 30.0, min_width=3) == 3  # the MLVU setting (R-I1)


def test_v4_node_frames_captions_on_the_global_split_video_qa_on_the_nested_one():
    n, fps, w = 108000, 30.0, 6
    assert tree_width(n, fps) == w
    high, low = level_parts(n, w, "high"), level_parts(n, w, "low")
    assert len(high[0]) == 18000 and len(low[0]) == 500
    ids = sample_ids(low[node_index((1, 1, 1), w)], 32)
    assert ids[:5] == [0, 16, 32, 48, 64] and ids[-1] == 499
    qa = sample_ids(nested_low_part(n, w, (1, 1, 1)), 16)
    assert qa[:5] == [0, 33, 66, 99, 133] and qa[-1] == 499
    assert [frame_time(i, fps) for i in qa[:4]] == [0.0, 1.1, 2.2, 3.3]
    assert node_index((2, 3), w) == 1 * 6 + 2 and node_index((2, 3, 4), w) == 1 * 36 + 2 * 6 + 3
    # V5: on 100003 frames at width 5, 50 of the 125 low nodes have other bounds under the two splits
    n, w = 100003, 5
    glob = level_parts(n, w, "low")
    differ = sum((glob[node_index((h, m, l), w)][[0, -1]] != nested_low_part(n, w, (h, m, l))[[0, -1]]).any()
                 for h in range(1, 6) for m in range(1, 6) for l in range(1, 6))
    assert differ == 50


def test_frame_sizes_of_the_captions_and_of_video_qa():
    assert [caption_side(level) for level in ("high", "medium", "low")] == [256, 362, 512]
    assert caption_side("high", 200) == 140  # never below the minimum side
    assert longest_side(720, 1280, 256) == (144, 256)
    assert longest_side(721, 1283, 362, rounding=round) == (203, 362)   # round(720.99... * 0.2822)
    assert longest_side(721, 1283, 1024, rounding=int) == (575, 1024)  # video_qa truncates
    assert longest_side(100, 120, 512) == (100, 120)  # a smaller frame is left as it is


def test_the_reply_and_call_grammar_is_the_release_s():
    reply = "<think> a </think> <tool>get_caption((1,2))</tool><answer>B</answer><answer>C</answer>"
    assert blocks(reply) == {"think": "a", "tool": "get_caption((1,2))", "answer": "B"}
    assert parse_call("get_caption((1, 2, 3))") == ("get_caption", (1, 2, 3), True)
    assert parse_call("get_caption(1, 2)") == ("get_caption", (1, 2), True)
    assert parse_call('video_qa((1,2,3), "who is there?")') == ("video_qa", ((1, 2, 3), "who is there?"), True)
    assert parse_call("video_qa((1,2,3), who is there)")[2] is False  # an unquoted query does not parse
    assert parse_call("no call here") == (None, None, False)
    assert caption_ids((1, 2), 4) == (1, 2) and caption_ids(["3", 4.0, 1], 4) == (3, 4, 1)
    for bad in ((1,), (1, 2, 3, 4), 3, (0, 1), (1, 5)):
        with pytest.raises(SampleKilled):
            caption_ids(bad, 4)
    assert video_qa_args(((1, 2, 3), "q"), 4) == ((1, 2, 3), "q")
    for bad in (((1, 2), "q"), ((1, 2, 3),), ((1, 2, 9), "q"), ((1, 2, 3), 5)):
        with pytest.raises(SampleKilled):
            video_qa_args(bad, 4)


# ----------------------------------------------------------------------------------------------- episodes
#: The caption and video_qa model's script: the first high node's caption in tags, the others bare; a QA reply
#: with an answer for the colour question, without one for any other.
TOOL_RULES = [{"match": "which colour", "text": "<reasoning>look</reasoning><answer>the door is red</answer>"},
              {"match": "Video frame at", "text": "<reasoning>?</reasoning> nothing to say"},
              {"match": "29.8s.", "text": "<caption>a hall with a red door</caption>"},  # high node 1 only
              {"text": "a bare caption without tags"}]


def _context(tmp_path, controller, method=None, tools=None, caption_cache=True):
    import yaml

    from senri.backends.scripted import ScriptedBackend
    from senri.methods.base import RunContext
    from senri.prompts import prompt_identity

    video, info = shared_clip("lv")  # encoded once per session
    files = {}
    for name, rules in (("controller", controller), ("tools", tools or TOOL_RULES)):
        script = tmp_path / f"{name}.jsonl"
        script.write_text("".join(json.dumps(r) + "\n" for r in rules))
        files[name] = {"backend": "scripted", "script": str(script), "record": str(tmp_path / f"{name}.calls.jsonl")}
    controller_config = {**files["controller"], "images": False}
    tool_config = {**files["tools"], "images": True}
    config = {**yaml.safe_load(open("config/method/longvideo_r1.yaml")), **(method or {})}
    config["prompt_identity"] = prompt_identity(config)
    config["tool_model_configs"] = {role: {"name": "vlm", "config": tool_config} for role in ("caption", "video_qa")}
    context = RunContext(video=info, method_name="longvideo_r1", method_config=config, model_name="controller",
                         model_config=controller_config, seed=0, backend=ScriptedBackend(controller_config),
                         pixels=video, caption_cache=tmp_path / "captions" if caption_cache else None)
    return context, tmp_path / "controller.calls.jsonl", tmp_path / "tools.calls.jsonl"


def _question(answer="C"):
    from senri.records import Question

    return Question("lv", "q1", "L", "none", "Which colour was the door?", "blue", "green", "red", "white", answer)


def _text(message) -> str:
    """A recorded message's text (the cache payload keeps content as a list of parts)."""
    content = message["content"]
    return content if isinstance(content, str) else "".join(p for p in content if isinstance(p, str))


def _sent(record):
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def test_an_episode_reads_captions_asks_video_qa_and_answers_in_the_release_s_message_layout(tmp_path):
    from senri.methods.longvideo_r1 import LongVideoR1

    controller = [
        {"match": "<information>", "text": "<think>red it is</think><answer>C</answer>"},
        {"match": "Low-level Caption from tool get_caption((1,2,3))",
         "text": '<think>ask</think><tool>video_qa((1,2,3), "which colour is the door?")</tool>'},
        {"match": "Reason first", "text": "<think>deeper</think><tool>get_caption((1,2,3))</tool>"},
        {"match": "Medium-level Caption from tool get_caption((1,2))",
         "text": "<answer>C</answer> without thinking"},
        {"match": "High-level Caption 4 from", "text": "<think>zoom</think><tool>get_caption((1,2))</tool>"}]
    context, record, tools = _context(tmp_path, controller)
    method = LongVideoR1(context)
    assert method.width == 4  # 120 s: round((120/16)^(1/3)) = 2, clamped to 4
    answer = method.answer(_question())
    assert answer.pred == "C" and answer.trace["outcome"] == "answer" and answer.trace["defaulted_to"] is None
    sent = _sent(record)
    assert [s["purpose"] for s in sent] == [f"longvideo_r1:round{i}" for i in range(1, 6)]
    first = sent[0]["payload"]["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert "4 high-level segments" in _text(first[0])
    text = _text(first[1])
    lines = text.split("\n")
    assert lines[:7] == ["Which colour was the door?", "A. blue", "B. green", "C. red", "D. white", "",
                         "The total duration of the video is 119.8 seconds."]
    # each high node: its first and last sampled frames' times (120 frames a node at 4 fps), then its caption
    assert lines[7] == "High-level Caption 1 from 0.0 to 29.8:<caption>a hall with a red door</caption>"
    assert lines[8] == "High-level Caption 2 from 30.0 to 59.8:<caption> a bare caption without tags </caption>"
    assert len(lines) == 11
    last = sent[-1]["payload"]["messages"]
    # the answer without a think block was popped and the nudge added; every tool result is a user turn
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "user", "assistant", "user",
                                         "assistant", "user"]
    assert _text(last[3]).startswith("Medium-level Caption from tool get_caption((1,2)). From 7.5 to 14.8:")  # frames 30-59 at 4 fps
    assert _text(last[4]).startswith("Reason first")
    assert _text(last[6]).startswith("Low-level Caption from tool get_caption((1,2,3)). From 12.0 to 13.8:")  # global split: 48-55
    assert _text(last[8]) == "<information>the door is red</information>"
    # the tools: 4 high + 1 medium + 1 low captions, then one video_qa call of 16 frames with their times
    tool_calls = _sent(tools)
    assert [c["purpose"] for c in tool_calls] == [
        "longvideo_r1:caption:high(1,)", "longvideo_r1:caption:high(2,)", "longvideo_r1:caption:high(3,)",
        "longvideo_r1:caption:high(4,)", "longvideo_r1:caption:medium(1, 2)", "longvideo_r1:caption:low(1, 2, 3)",
        "longvideo_r1:video_qa:(1, 2, 3)"]
    high = tool_calls[0]["payload"]["messages"]
    assert "120 frames" not in _text(high[0]) and "128 frames" in _text(high[0])
    assert "400 words" in _text(high[0])  # more than 32 frames: the high-level prompt
    low = tool_calls[5]["payload"]["messages"]
    assert "32 frames" in _text(low[0]) and "200 words" in _text(low[0])
    parts = tool_calls[0]["payload"]["messages"][1]["content"]
    assert parts[0] == "0.0s." and isinstance(parts[1], dict) and len(parts) == 256
    qa = tool_calls[-1]["payload"]["messages"][1]["content"]
    assert qa[0] == "which colour is the door?" and qa[1] == "Video frame at 11.5 seconds:" and len(qa) == 33
    # video_qa's nested split puts this node at frames 46-52 (the global one at 48-55, R-T1)
    tally = answer.tally
    assert tally.behaviour["rounds"] == 5 and tally.behaviour["tool_calls"] == 3
    assert tally.behaviour["searches"] == 2 and tally.behaviour["qa_calls"] == 1
    assert tally.behaviour["frames_seen"] == 16 and tally.health["spent_steps"] == 1
    assert tally.caption_calls == 6 and tally.n_vlm_calls == 7 and tally.n_llm_calls == 5


def test_captions_are_shared_through_the_cache_and_a_second_job_makes_none(tmp_path):
    from senri.methods.longvideo_r1 import LongVideoR1

    controller = [{"text": "<think>enough</think><answer>B</answer>"}]
    context, _, tools = _context(tmp_path, controller)
    method = LongVideoR1(context)
    assert method.answer(_question()).pred == "B"
    second = method.answer(_question()).tally  # the job's own captions: no call, counted as reused
    assert second.caption_calls == 0 and second.captions_reused == 4 and method.reused == 0
    assert len(_sent(tools)) == 4 and method.computed == 4
    again = LongVideoR1(_context(tmp_path, controller)[0])  # another job over the same video and caption model
    answer = again.answer(_question())
    assert answer.tally.caption_calls == 0 and answer.tally.captions_reused == 4 and again.reused == 4
    assert len(_sent(tools)) == 4
    other = LongVideoR1(_context(tmp_path, controller, method={"high_caption_words": 300})[0])
    other.answer(_question())
    assert other.computed == 4  # another caption prompt is another caption


def test_the_last_round_notice_a_missing_answer_scored_a_and_what_kills_a_question(tmp_path):
    from senri.methods.longvideo_r1 import LongVideoR1

    # never answers: 30 rounds, the notice before the 30th, no answer -> "A" (R-A1), counted
    context, record, _ = _context(tmp_path, [{"text": "<think>hm</think><tool>look_around()</tool>"}])
    answer = LongVideoR1(context).answer(_question(answer="A"))
    sent = _sent(record)
    assert len(sent) == 30 and answer.trace["outcome"] == "max_rounds"
    assert "last round" in _text(sent[-1]["payload"]["messages"][-1])
    assert not any("last round" in json.dumps(s["payload"]) for s in sent[:-1])
    assert answer.pred == "A" and answer.trace["defaulted_to"] == "A" and answer.parse_ok is False
    assert answer.tally.health["defaulted_answers"] == 1 and answer.tally.health["rejected_tool_calls"] == 30
    # every reply popped: the history never grows past the first turn and the notice
    assert len(sent[-1]["payload"]["messages"]) == 3
    (tmp_path / "b").mkdir()
    context, _, _ = _context(tmp_path / "b", [{"text": "<think>hm</think><tool>look_around()</tool>"}],
                             method={"missing_answer": "none", "max_rounds": 3})
    answer = LongVideoR1(context).answer(_question())
    assert answer.pred is None and "defaulted_answers" not in answer.tally.health
    # an id out of range kills the question (the release's assert); a QA reply without <answer> too
    for i, call in enumerate(("get_caption((5,1))", 'video_qa((1,1,1), "which way did I go?")')):
        (tmp_path / f"k{i}").mkdir()
        context, _, _ = _context(tmp_path / f"k{i}", [{"text": f"<think>x</think><tool>{call}</tool>"}])
        answer = LongVideoR1(context).answer(_question())
        assert answer.trace["outcome"] == "killed" and answer.pred == "A", call
        assert answer.tally.health["defaulted_answers"] == 1 and not answer.tally.errors


def test_a_failed_tool_call_is_scored_as_the_release_scores_it_and_still_an_error_and_a_text_only_tool_is_refused(
        tmp_path):
    """R-A1, ``failed_call``: the release's run_all scores a question lost to a failed call "A" like any lost
    sample (the default, ``release_letter_a``), and its row keeps the error, so the run-health tables count it;
    ``error_row`` leaves it unanswered, counted wrong."""
    from senri.answer import prediction_row
    from senri.backends.base import Capabilities
    from senri.methods.longvideo_r1 import LongVideoR1

    controller = [{"text": '<think>x</think><tool>video_qa((1,1,1), "which colour?")</tool>'}]
    tools = [{"match": "which colour", "error": "server went away"}] + TOOL_RULES[1:]
    rows = {}
    for rule in ("release_letter_a", "error_row"):
        (tmp_path / rule).mkdir()
        method = {"failed_call": rule} if rule == "error_row" else None  # the shipped default is the release's
        context, _, _ = _context(tmp_path / rule, controller, method=method, tools=tools)
        answer = LongVideoR1(context).answer(_question(answer="A"))
        assert answer.error and "server went away" in answer.error and answer.parse_ok is False, rule
        assert answer.trace["outcome"] == "killed" and answer.trace["failed_call"] == rule, rule
        rows[rule] = (answer, prediction_row(_question(answer="A"), "longvideo_r1", "controller", "none", answer,
                                             None))
    answer, row = rows["release_letter_a"]
    assert answer.pred == "A" and answer.trace["defaulted_to"] == "A"
    assert answer.tally.health["defaulted_answers"] == 1
    assert row.pred == "A" and row.correct and "server went away" in row.error  # scored, and still an error
    answer, row = rows["error_row"]
    assert answer.pred is None and answer.trace["defaulted_to"] is None
    assert "defaulted_answers" not in answer.tally.health
    assert row.pred is None and not row.correct and "server went away" in row.error
    (tmp_path / "bad").mkdir()
    with pytest.raises(ValueError, match="failed_call must be one of release_letter_a, error_row"):
        LongVideoR1(_context(tmp_path / "bad", controller, method={"failed_call": "guess"}, tools=tools)[0])
    text_only = Capabilities(images=False)
    problems = LongVideoR1.capability_problems("longvideo_r1", {}, "llm", text_only,
                                               {"caption": ("llm", text_only), "video_qa": ("vlm", Capabilities(images=True))})
    assert len(problems) == 1 and "caption" in problems[0]
    assert LongVideoR1.capability_problems("longvideo_r1", {}, "llm", text_only,
                                           {"caption": ("vlm", Capabilities(images=True)),
                                            "video_qa": ("vlm", Capabilities(images=True))}) == []


def test_the_controller_s_chat_template_keeps_earlier_think_blocks():
    """R-S2/R-S3: senri's template for the controller keeps every assistant turn whole and closes it twice."""
    import jinja2

    template = jinja2.Environment().from_string(open("config/chat_templates/longvideo_r1.jinja").read())
    text = template.render(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                                     {"role": "assistant", "content": "<think>t</think><tool>x</tool>"},
                                     {"role": "user", "content": "O"}], add_generation_prompt=True)
    assert text == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
                    "<|im_start|>assistant\n<think>t</think><tool>x</tool><|im_end|>\n<|im_end|>\n"
                    "<|im_start|>user\nO<|im_end|>\n<|im_start|>assistant\n")


def test_sample_ids_cast_toward_zero_as_numpy_s_integer_linspace():
    assert sample_ids(np.arange(10, 20), 4) == [10, 13, 16, 19]

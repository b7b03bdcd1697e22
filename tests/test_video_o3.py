"""Video-o3's loop (issue 38, shared/spec/evidence_seekers.md §2): the grounding grammar, the reply cut and its
reading, Video-MME's answer reading, the overview and crop frames, and the loop with a scripted model."""

from __future__ import annotations

import json

import pytest

from seeker_replay import shared_clip
from senri.answers import videomme_official_letter
from senri.methods.video_o3 import close_stopped, cut_reply, parse_grounding, read_turn, GroundingError


def test_the_last_grounding_block_is_read_with_single_quotes_retried_and_bad_windows_refused():
    text = ('<grounding>{"temporal_segment": [1, 2], "sampling_strategy": "fine"}</grounding> then '
            "<grounding>noise {'temporal_segment': ['10', 40.5], 'sampling_strategy': 'medium'} tail</grounding>")
    assert parse_grounding(text) == (10.0, 40.5, "medium")
    assert parse_grounding('<grounding>{"temporal_segment": [3, 1], "sampling_strategy": 7}</grounding>') == \
        (3.0, 1.0, "7")  # e <= s and an odd strategy parse: the crop refuses them later (O-T1, O-T2)
    for bad in ("<grounding>[1, 2]</grounding>", '<grounding>{"temporal_segment": [1]}</grounding>',
                '<grounding>{"temporal_segment": [1, "x"], "sampling_strategy": "fine"}</grounding>',
                '<grounding>{"temporal_segment": [1, 2, 3], "sampling_strategy": "fine"}</grounding>',
                "<grounding>{oops}</grounding>", "no tags"):
        with pytest.raises(GroundingError):
            parse_grounding(bad)


def test_a_reply_is_cut_at_its_first_closing_tag_and_read_in_the_release_s_order():
    # the stop string removed the closing tag: it is put back as the release's keyword criterion keeps it
    assert close_stopped("<think>a</think><grounding>{}", True) == "<think>a</think><grounding>{}</grounding>"
    assert close_stopped("<think>a</think><answer>B", True).endswith("<answer>B</answer>")
    assert close_stopped("<think>a</think><answer>B", False) == "<think>a</think><answer>B"  # cut at its limit
    both = ('<grounding>{"temporal_segment": [1, 2], "sampling_strategy": "fine"}</grounding>'
            '<answer>C</answer>')
    assert cut_reply(both, forced=False).endswith("</grounding>")  # outside forced mode the grounding cut wins
    assert cut_reply(both, forced=True) == both
    assert read_turn("<answer> B </answer><grounding>{}</grounding>", False).text == "B"  # the answer wins
    assert read_turn("</answer> then <answer>", False).kind == "repeat"  # the release neither stops nor appends
    assert read_turn("<grounding>{}</grounding>", True).kind == "apology"
    assert read_turn("just B", False) == read_turn("just B", False) and read_turn("just B", False).kind == "raw"
    assert read_turn("<grounding>{}</grounding>", False).kind == "parse_error"


@pytest.mark.parametrize("prediction, letter", [
    ("C", "C"), ("The answer is B.", "B"), ("The best answer is (D)", "D"),
    ("Best option: A", "B"),  # release case videomme_extract-22: "Best answer:" + "Best option:" is one fused entry
    ("Answer: C", "C"),
    ("Based on the video, it is C", "B"),  # the first capital A-D anywhere, as Video-MME's scorer reads it
    ("I'm sorry, I can't answer the question based on the video.", None), ("", None)])
def test_the_answer_is_read_as_video_mme_s_scorer_reads_it(prediction, letter):
    assert videomme_official_letter(prediction) == letter


def _context(tmp_path, rules, model_extra=None, **method):
    import yaml

    from senri.backends.scripted import ScriptedBackend
    from senri.methods.base import RunContext
    from senri.prompts import prompt_identity

    video, info = shared_clip("vo")  # encoded once per session
    script, record = tmp_path / "model.jsonl", tmp_path / "calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    model = {"backend": "scripted", "script": str(script), "record": str(record), "images": True, "video": True,
             **(model_extra or {})}
    config = {**yaml.safe_load(open("config/method/video_o3.yaml")), **method}
    config["prompt_identity"] = prompt_identity(config)
    context = RunContext(video=info, method_name="video_o3", method_config=config, model_name="vlm",
                         model_config=model, seed=0, backend=ScriptedBackend(model), pixels=video)
    return context, record


def _question():
    from senri.records import Question

    return Question("vo", "q1", "L", "none", "Where was I?", "hall", "kitchen", "garden", "street", "C")


def _sent(record):
    return [json.loads(line) for line in record.read_text().splitlines()]


def _kinds(message):
    content = message["content"]
    return [next(iter(p)) if isinstance(p, dict) else "text" for p in content]


def test_the_overview_is_the_release_s_2_fps_video_and_a_crop_follows_its_quota(tmp_path):
    from senri.decode import carrier_frame_count
    from senri.methods.video_o3 import VideoO3

    context, _ = _context(tmp_path, [{"text": "A"}])
    method = VideoO3(context)
    media, rate, planned, decoded = method.main_video()
    # a 120-s clip at 4 fps: 240 frames at int(i * 4 / 2) = 2i, all decoded, one carrier at the 2-fps MRoPE rate
    assert (rate, planned, decoded) == (2.0, 240, 240) and len(media) == 1
    part = media[0]
    assert part.fps == 2.0 and part.timeline == "carrier" and carrier_frame_count(part.mp4) == 240
    assert part.times_s[:3] == (0.0, 0.5, 1.0)
    import av
    import io

    with av.open(io.BytesIO(part.mp4)) as container:  # 160x120 -> 168x112 at factor 28 (>= 15680 px)
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (168, 112)
    clip, n_planned, n_decoded, rate = method.crop(10, 40, "medium")
    assert (n_planned, n_decoded) == (60, 60) and rate == 60 / 121 * 4  # the crop's own rate: 1.98 fps and carrier_frame_count(clip[0].mp4) == 60
    assert clip[0].times_s[:3] == (10.0, 10.5, 11.0)
    for start, end, strategy, error in ((200, 210, "fine", ValueError), (30, 30, "fine", ValueError),
                                        (10, 20, "ultra", KeyError)):
        with pytest.raises(error):
            method.crop(start, end, strategy)


def test_crops_errors_and_an_answer_in_the_release_s_message_layout(tmp_path):
    from senri.methods.video_o3 import VideoO3

    grounding = '<think>look</think><grounding>{"temporal_segment": [%s], "sampling_strategy": "%s"}</grounding>'
    rules = [{"match": "two numbers", "text": "<think>enough</think><answer>The answer is C</answer> and more"},
             {"match": "unknown sampling_strategy",
              # ended by the stop string: the backend removes the tag and says so, senri puts it back
              "text": "<think>x</think><grounding>{'temporal_segment': [1, 'x'], 'sampling_strategy': 'fine'}"
                      "</grounding> never generated"},
             {"match": "After Action 1", "text": grounding % ("20, 30", "ultra")},
             {"match": "Options:", "text": grounding % ("2, 8", "medium") + " trailing text"}]
    context, record = _context(tmp_path, rules)
    answer = VideoO3(context).answer(_question())
    assert answer.pred == "C" and answer.trace["outcome"] == "answer" and answer.trace["generations"] == 4
    sent = _sent(record)
    assert [s["payload"]["stop"] for s in sent] == [["</grounding>", "</answer>"]] * 4
    assert sent[0]["payload"]["max_tokens"] == 4096
    messages = sent[-1]["payload"]["messages"]
    roles = [m["role"] for m in messages]
    # system, user (overview); crop: assistant + user (clip); bad strategy: the reply twice + error; parse
    # error: the reply once + error
    assert roles == ["system", "user", "assistant", "user", "assistant", "assistant", "user", "assistant", "user"]
    assert _kinds(messages[1]) == ["text", "video", "text"]  # the video at the header's <video> placeholder
    assert messages[1]["content"][0] == "The video is sampled at 2.00 fps, 240.0 frames in all, from 0 to 120.0 seconds: "
    assert messages[1]["content"][1]["fps"] == 2.0
    assert messages[2]["content"][0].endswith('"medium"}</grounding>')  # cut after the closing tag
    assert _kinds(messages[3]) == ["text", "video", "text"]
    assert "refined clip (Observation 1)" in messages[3]["content"][0]
    # the crop's own sample rate: 12 frames of the 25 in range at 4 fps (the release's header, not 2.00)
    assert "sampled at 1.92 fps, 12.0 frames, from 2.0 to 8.0 seconds" in messages[3]["content"][2]
    assert messages[4] == messages[5]  # the release appends the reply twice after a strategy error
    assert "unknown sampling_strategy 'ultra'" in messages[6]["content"][0]
    assert "two numbers" in messages[8]["content"][0]
    tally = answer.tally
    assert tally.behaviour["tool_calls"] == 2 and tally.behaviour["rounds"] == 4
    assert tally.behaviour["frames_seen"] == 240 + 12
    assert tally.health["rejected_tool_calls"] == 1 and tally.health["unparsed_tool_calls"] == 1
    assert "forced_answers" not in tally.health


def test_action_k_counts_every_generation_as_the_release_s_turn_count(tmp_path):
    """O4 (M:774, 870): after a parse-error turn, the first crop's observation is "Action 2"/"Observation 2"."""
    from senri.methods.video_o3 import VideoO3

    grounding = '<think>look</think><grounding>{"temporal_segment": [2, 8], "sampling_strategy": "medium"}</grounding>'
    rules = [{"match": "After Action 2", "text": "<think>ok</think><answer>B</answer>"},
             {"match": "could not be carried out", "text": grounding},
             {"match": "Options:", "text": "<think>x</think><grounding>not json</grounding>"}]
    context, record = _context(tmp_path, rules)
    answer = VideoO3(context).answer(_question())
    assert answer.pred == "B" and answer.trace["generations"] == 3
    last = _sent(record)[-1]["payload"]["messages"][-1]["content"]
    assert "After Action 2, here is the refined clip (Observation 2)" in last[0]


def test_the_eighth_crop_comes_with_the_forced_prompt_and_a_ninth_reply_without_an_answer_is_the_apology(tmp_path):
    from senri.methods.video_o3 import VideoO3

    rules = [{"text": '<think>again</think><grounding>{"temporal_segment": [0, 4], "sampling_strategy": "coarse"}'
                      '</grounding>'}]
    context, record = _context(tmp_path, rules)
    answer = VideoO3(context).answer(_question())
    assert answer.pred is None and answer.trace["outcome"] == "apology" and answer.trace["generations"] == 9
    assert answer.raw_output.startswith("I'm sorry")
    sent = _sent(record)
    last = sent[-1]["payload"]["messages"]
    assert sum(m["role"] == "user" for m in last) == 9  # the overview and 8 crops
    assert "This is the final turn" in last[-1]["content"][-1] and "Observation 8" in last[-1]["content"][0]
    assert not any("final turn" in str(m["content"]) for m in last[:-1])
    assert answer.tally.health["forced_answers"] == 1 and answer.tally.behaviour["tool_calls"] == 8


def test_a_reply_with_neither_tag_is_the_answer_and_a_history_past_the_context_ends_the_question(tmp_path):
    from senri.methods.video_o3 import VideoO3

    context, _ = _context(tmp_path, [{"text": "Option D, I believe"}])
    answer = VideoO3(context).answer(_question())
    assert answer.trace["outcome"] == "raw" and answer.pred == "D"
    grow = [{"text": '<grounding>{"temporal_segment": [0, 100], "sampling_strategy": "fine"}</grounding>'}]
    (tmp_path / "small").mkdir()
    context, record = _context(tmp_path / "small", grow, model_extra={"max_images": 3})
    answer = VideoO3(context).answer(_question())
    # the overview and two crops fit 3 videos; the history with a third crop is not sent
    assert answer.trace["outcome"] == "overflow" and answer.pred is None
    assert answer.tally.health["context_overflows"] == 1 and len(_sent(record)) == 3


def test_images_media_sends_the_same_frames_as_images_and_a_model_without_video_is_refused(tmp_path):
    from senri.backends.base import Capabilities
    from senri.methods.video_o3 import VideoO3

    context, record = _context(tmp_path, [{"text": "<answer>A</answer>"}], media="images")
    answer = VideoO3(context).answer(_question())
    assert answer.pred == "A"
    first = _sent(record)[0]["payload"]["messages"][1]
    assert _kinds(first).count("image") == 240
    no_video = Capabilities(images=True, video=False)
    assert VideoO3.capability_problems("video_o3", {"media": "video"}, "vlm", no_video)
    assert VideoO3.capability_problems("video_o3", {"media": "images"}, "vlm", no_video) == []

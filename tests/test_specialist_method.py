"""The ``specialist`` method for the four releases, end to end on a small clip through a real release worker (the stub
model in a separate virtual environment built with no pins): what each release's model receives (frames, sizes,
rate, options, text, generation settings), the release's parser on the reply, video-level work done once per
video (S2), and a crashed worker recorded as the question's failure. Frame counts are cut down by the method
options so the test stays a few seconds; the index rules themselves are the release cases' (test_specialists_release_cases)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import make_probed_clip
from senri.backends import open_backend
from senri.methods.base import RunContext
from senri.methods.specialist import SpecialistDirect
from senri.records import Question
from senri.specialists import cambrian, lfp, videochat3

BASE = {"approach": "direct_perception", "uses_model": True, "uses_pixels": True, "implementation": "specialist"}
METHODS = {
    "cambrian_s": {"release": "cambrian_s", "max_frames": 8, "prompts": "cambrian_s"},
    "cambrian_s_lfp": {"release": "cambrian_s_lfp", "mode": "stream", "preset": "auto", "stream_fps": 0.1,
                       "prompts": "cambrian_s"},
    "internvideo3": {"release": "internvideo3", "max_frames": 6, "prompts": "internvideo3"},
    "videochat3": {"release": "videochat3", "preset": "lvbench", "frames_limit": 8, "prompts": "videochat3"},
}


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_probed_clip(tmp_path_factory.mktemp("clip"), "clip")


@pytest.fixture(scope="module")
def worker_config(tmp_path_factory):
    root = tmp_path_factory.mktemp("stubworker")
    pins = root / "stub.txt"
    pins.write_text("# the stub model needs nothing beyond the standard library\n")
    return {"backend": "release_worker", "model": "stub", "env": "stub", "pins": str(pins),
            "env_cache": str(root / "envs"), "adapter": "stub_model:StubModel", "startup_timeout_s": 60,
            "request_timeout_s": 60, "images": True}


def question(n: int) -> Question:
    return Question(video_id="clip", qid=f"q{n}", task_type="L", direction="past", question=f"Where is item {n}?",
                    option_a="kitchen", option_b="garden", option_c="garage", option_d="attic", answer="A")


def run(name, clip, worker_config, tmp_path, questions=2, **extra):
    video, info = clip
    record = tmp_path / f"{name}.jsonl"
    model = {**worker_config, "adapter_options": {"record": str(record), "crash_on": "CRASH"}}
    backend = open_backend(model, None)
    method = SpecialistDirect(RunContext(video=info, method_name=name, method_config={**BASE, **METHODS[name], **extra},
                                         model_name="stub", model_config=model, seed=7, backend=backend,
                                         pixels=video))
    decoded = []
    original = method.decode
    method.decode = lambda indices: decoded.append(len(indices)) or original(indices)  # noqa: E731
    try:
        answers = [method.answer(question(i)) for i in range(questions)]
    finally:
        backend.close()
    return answers, [json.loads(line) for line in record.read_text().splitlines()], decoded


def test_cambrian_s_sends_padded_square_frames_and_chatml(clip, worker_config, tmp_path):
    answers, sent, decoded = run("cambrian_s", clip, worker_config, tmp_path)
    assert decoded == [8]  # the video's frames were decoded once for both questions (S2)
    (frames,) = sent[0]["frames"]
    assert frames["n"] == 8 and sent[0]["frame_sizes"] == [[384, 384]] and frames["source_wh"] == [160, 120]
    assert frames["indices"] == cambrian.frame_indices(480, 4.0, 8) and frames["rate"] == 1.0
    (prompt,) = sent[0]["texts"]
    assert prompt.startswith("<|im_start|>system\n") and "<image>\nChoose the best answer" in prompt
    assert "Where is item 0?\nA. kitchen\nB. garden\nC. garage\nD. attic\n\nAnswer with" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert sent[0]["generation"]["max_tokens"] == 16 and sent[0]["generation"]["temperature"] == 0.0
    answer = answers[0]
    assert answer.pred in "ABCD" and answer.raw_output == f"{answer.pred}." and answer.parse_ok
    assert answer.trace["parse_rule"] == "first_capital (C-A1)" and answer.trace["tokens_per_frame"] == 54
    assert answer.tally.behaviour["frames_seen"] == 8 and answer.trace["model_identity"]["kind"] == "release_worker"
    assert answer.tally.n_vlm_calls == 1 and answer.tally.n_llm_calls == 0


def test_cambrian_s_lfp_streams_squashed_frames_with_its_preset(clip, worker_config, tmp_path):
    answers, sent, decoded = run("cambrian_s_lfp", clip, worker_config, tmp_path, questions=1)
    (frames,) = sent[0]["frames"]
    assert frames["n"] == 12 and frames["indices"] == cambrian.stream_indices(480, 4.0, 0.1)
    preset = lfp.PRESETS[10]  # a 2-minute video: the 10-minute split (D2 auto)
    assert frames["options"]["lfp"] == {"window": preset.window, "method": preset.method, "topk": preset.topk,
                                        "threshold": preset.threshold, "budget": preset.budget, "ratio": 2}
    assert sent[0]["generation"]["repetition_penalty"] == 1.1 and "\nOptions:\nA. kitchen" in sent[0]["texts"][0]
    assert answers[0].trace["parse_rule"] == "first_word (L-A1)" and answers[0].pred in "ABCD"


def test_internvideo3_sends_per_frame_sized_frames_at_the_true_rate(clip, worker_config, tmp_path):
    answers, sent, _ = run("internvideo3", clip, worker_config, tmp_path, questions=1)
    (frames,) = sent[0]["frames"]
    # 160×120 at 262,144 px per frame, factor 32: 608×448 (as 320×240 in the release cases)
    assert frames["n"] == 6 and sent[0]["frame_sizes"] == [[608, 448]] and frames["rate"] == 4.0
    assert frames["times_s"] == [i / 4.0 for i in frames["indices"]]
    (text,) = sent[0]["texts"]
    assert "Question: Where is item 0?\nOptions:\nA. kitchen" in text
    assert sent[0]["generation"]["max_tokens"] == 64 and sent[0]["generation"]["temperature"] == 0.0
    assert answers[0].trace["parse_rule"] == "start_letter_then_regex (I-A1)"


def test_videochat3_sends_resized_frames_placeholder_metadata_and_sampling(clip, worker_config, tmp_path):
    answers, sent, _ = run("videochat3", clip, worker_config, tmp_path, questions=1)
    (frames,) = sent[0]["frames"]
    indices, rate = videochat3.sample_indices(480, 4.0, 8, duration_s=clip[1].duration_s)  # LVBench: the container's
    assert frames["indices"] == indices and frames["rate"] == rate
    assert frames["options"] == {"max_pixels": 200704, "min_pixels": 784, "placeholder_metadata": True,
                                 "sample_fps": rate, "total_pixels": 125440000}
    assert sent[0]["frame_sizes"] == [[168, 112]]  # stage 1 at factor 56: 168×112; stage 2 keeps it
    empty, text = sent[0]["texts"]
    assert empty == "" and "Question: Where is item 0?\n\nThese are the answer choices:\n(A) kitchen\n(B) garden" in text
    assert {k: sent[0]["generation"][k] for k in ("temperature", "top_p", "top_k", "max_tokens", "seed")} == {
        "temperature": 0.01, "top_p": 0.8, "top_k": 20, "max_tokens": 32768, "seed": 7}
    assert answers[0].trace["parse_rule"] == "lvbench (V-A1)"


def test_videochat3_greedy_option_and_videomme_preset(clip, worker_config, tmp_path):
    _, sent, _ = run("videochat3", clip, worker_config, tmp_path, questions=1, greedy=True, preset="videomme")
    assert sent[0]["generation"]["temperature"] == 0.0 and sent[0]["generation"]["top_k"] is None
    empty, frames_line, question_text = sent[0]["texts"]
    assert empty == "" and frames_line.startswith("The images are frames sampled from one video")
    assert question_text.startswith("Question: Where is item 0?\nA. kitchen") and question_text.endswith("Answer:")


def test_a_crashed_worker_is_the_questions_failure_and_the_next_question_runs(clip, worker_config, tmp_path):
    video, info = clip
    model = {**worker_config, "adapter_options": {"crash_on": "item 0"}}
    backend = open_backend(model, None)
    method = SpecialistDirect(RunContext(video=info, method_name="internvideo3", method_config={
        **BASE, **METHODS["internvideo3"]}, model_name="stub", model_config=model, seed=0, backend=backend,
        pixels=video))
    try:
        crashed, fine = method.answer(question(0)), method.answer(question(1))
    finally:
        backend.close()
    assert crashed.pred is None and "exited with code 7" in crashed.error
    assert fine.error is None and fine.pred in "ABCD"


def test_the_method_refuses_a_backend_that_cannot_take_frames(clip):
    video, info = clip
    with pytest.raises(ValueError, match="must be a release_worker model config"):
        SpecialistDirect(RunContext(video=info, method_name="cambrian_s", method_config={**BASE, **METHODS["cambrian_s"]},
                                    model_name="vlm", model_config={"backend": "vllm"}, seed=0, pixels=video))

"""M3-Agent end to end on the demo without weights: the whole build (clips with their audio, scripted diarizer and
memorizer replies, fixture face detections and voice vectors, HDBSCAN, matching, insertion, equivalences), the
controller loop with scripted replies, and the bad inputs the issue names — each a recorded outcome."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from senri.memory.m3_agent import control
from senri.memory.m3_agent.store import M3AgentStore, clip_spans
from senri.memory.store import BuildRequest
from senri.probe import probe

sys.path.insert(0, str(Path(__file__).parent))

DIARIZED = [{"start_time": "00:01", "end_time": "00:05", "asr": "Let's go to the kitchen."},
            {"start_time": "00:10", "end_time": "00:13", "asr": "Okay."}]
MEMORIES = {"video_descriptions": ["<face_2> walks into the kitchen.", "<voice_0> says: Let's go to the kitchen.",
                                   "<face_3> follows <face_2>."],
            "high_level_conclusions": ["Equivalence: <face_2>, <voice_0>", "Equivalence: <face_3>, <voice_1>",
                                       "<face_2> leads the way."]}


def script(tmp_path, name, rules):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rules))
    return {"backend": "scripted", "script": str(path), "record": str(tmp_path / f"{name}.record.jsonl"),
            "video": True, "audio": True}


def build(tmp_path, video, video_id, memorizer=None, diarizer=None, **settings):
    info = probe(video, video_id)
    config = {"face_model": "m3_fixtures:faces", "voice_embedder": "m3_fixtures:voices",
              "text_embedder": "hashed_encoder:HashedWords", "memorizer_short_side": 64, "face_short_side": 180, **settings}
    models = {"memorizer": ("memorizer", memorizer or script(tmp_path, "memorizer", [
        {"match": "Voice features:", "text": json.dumps(MEMORIES)}]))}
    if diarizer is not False:
        models["diarizer"] = ("diarizer", diarizer or script(tmp_path, "diarizer", [{"text": json.dumps(DIARIZED)}]))
    out = tmp_path / "store" / video_id
    request = BuildRequest(video=info, system="m3_agent", system_config=config, memory_config={}, out_dir=out,
                           media=types.SimpleNamespace(video=Path(video)), models=models, seed=3)
    M3AgentStore.build(request)
    return M3AgentStore.open(out, config, info), out


def test_the_whole_build_on_the_demo_video_with_audio(tmp_path, small_demo):
    video = small_demo["videos"]["demo_01"]
    store, out = build(tmp_path, video, "demo_01")
    record = store.record
    assert record["lost"] is None and "audio track" in record["audio"]  # the build states the audio it read
    assert [c["clip"] for c in record["clips"]] == [0, 1, 2] == [k for k, _, _ in clip_spans(68.0)]
    assert all(c["audio"] for c in record["clips"])
    graph = store.graph
    kinds = [n.kind for n in graph.nodes.values()]
    # clip 0: voices 0, 1 (two speakers), faces 2, 3 (two HDBSCAN clusters), then its texts; later clips match
    assert kinds[:4] == ["voice", "voice", "img", "img"] and kinds.count("voice") == 2 and kinds.count("img") == 2
    assert record["clips"][0]["faces"]["nodes"] == [2, 3] and record["clips"][1]["faces"]["nodes"] == [2, 3]
    assert record["clips"][2]["voices"] == 1  # the second segment ends past the 8-s last clip: dropped
    # semantic texts repeated in later clips reinforce (+2 per repeat) instead of being inserted again
    equivalences = [n for n in graph.text_nodes if graph.nodes[n].contents[0].startswith("Equivalence")]
    assert len(equivalences) == 2 and graph.edges[(2, equivalences[0])] == 5.0
    # numbered in the release's order, list(set(equivalence node ids)): here the second equivalence first
    assert graph.character_mappings == {"character_0": ["face_3", "voice_1"], "character_1": ["face_2", "voice_0"]}
    assert store.items()[0].text == "<character_1> walks into the kitchen." and store.items()[0].level == "30sec"
    # the memorizer heard each clip: its video part carried the clip's audio (part of the request's identity)
    sent = [json.loads(line) for line in (tmp_path / "memorizer.record.jsonl").read_text().splitlines()]
    assert len(sent) == 3 and all("audio" in json.dumps(r) for r in sent)
    hits = store.search("Who walks into the kitchen?", 2)
    assert hits and hits[0].start_s == 0.0


def test_a_video_without_audio_is_lost_as_released_and_built_without_sound_as_the_named_fix(tmp_path, small_demo):
    video = small_demo["videos"]["demo_02"]
    store, _ = build(tmp_path, video, "demo_02")
    assert "no audio track" in store.lost and store.question_counts() == {"builder_losses": 1}
    assert store.items() == [] and "video without audio" in store.record["conditions"]
    fixed, _ = build(tmp_path / "fix", video, "demo_02", silent_video="video_only", face_model=None)
    assert fixed.lost is None and fixed.record["clips"][0]["voices"] == "no audio"
    assert [n.kind for n in fixed.graph.nodes.values()].count("voice") == 0 and fixed.items()


def test_bad_replies_and_boxes_are_recorded_outcomes(tmp_path, small_demo, monkeypatch):
    video = small_demo["videos"]["demo_01"]
    monkeypatch.setattr("senri.memory.m3_agent.store.clip_spans", lambda d: [(0, 0.0, 6.0)])  # one short clip
    # a memorizer that never answers JSON: 20 calls per clip, then the clip has no memories (as released)
    store, _ = build(tmp_path / "a", video, "demo_01", diarizer=False, face_model=None,
                     memorizer=script(tmp_path, "prose", [{"text": "I see a kitchen."}]))
    assert store.lost is None and store.record["calls"]["memorizer"] == 20 and store.graph.text_nodes == []
    assert all("no parsable reply in 20 calls" in c["memorizer"] for c in store.record["clips"])
    # a reply of the wrong shape (a JSON list): the release loses the video; the named fix reads it as empty
    wrong = script(tmp_path, "list", [{"text": "[]"}])
    lost, _ = build(tmp_path / "b", video, "demo_01", diarizer=False, memorizer=wrong, face_model=None)
    assert "no 'video_descriptions'" in lost.lost and lost.question_counts()["builder_losses"] == 1
    kept, _ = build(tmp_path / "c", video, "demo_01", diarizer=False, memorizer=wrong, on_bad_reply="empty",
                    face_model=None)
    assert kept.lost is None and len(kept.record["conditions"]) == 1
    # a face box with a negative coordinate drops every face of that frame (fe 79-81), recorded per clip
    boxed, _ = build(tmp_path / "d", video, "demo_01", face_model="m3_fixtures:negative_box_faces")
    assert "frame 0" in boxed.record["clips"][0]["faces_dropped"][0]
    # an empty last clip (a duration that is a multiple of 30 s): lost as released, skipped as the fix
    assert clip_spans(60.0)[-1] == (2, 60.0, 60.0)


def test_an_empty_last_clip_loses_the_video_as_released_or_is_skipped(tmp_path, small_demo, monkeypatch):
    video = small_demo["videos"]["demo_01"]
    info = probe(video, "demo_01")
    monkeypatch.setattr("senri.memory.m3_agent.store.clip_spans", lambda d: [(0, 0.0, 6.0), (1, 6.0, 6.0)])
    lost, _ = build(tmp_path / "a", video, "demo_01", diarizer=False, face_model=None)
    assert "clip 1 is empty" in lost.lost
    skipped, _ = build(tmp_path / "b", video, "demo_01", diarizer=False, empty_last_clip="skip", face_model=None)
    assert skipped.lost is None and skipped.record["clips"][1]["skipped"] == "empty" and info.duration_s > 60


# ------------------------------------------------------------------------------------------ controller loop
PROMPTS = control.ControlPrompts(system="SYSTEM $question", instruction=" [INSTR]", last_round=" [LAST]",
                                 empty_note="\n(empty)")


def run_loop(replies, graph_loader=None):
    from senri.memory.m3_agent.graph import MemoryGraph

    replies = iter(replies)
    seen = []

    def generate(conversation):
        seen.append(conversation)
        return next(replies)

    trace = control.run_controller("Where?", generate, graph_loader or MemoryGraph, lambda t: [[1.0]] * len(t),
                                   PROMPTS)
    return trace, seen


@pytest.mark.parametrize("answer_round", [1, 3])
def test_the_controller_answers_in_the_round_it_says_answer(answer_round):
    search = "<think>need more</think>Action: [Search]\nContent: the kitchen"
    answer = "<think>ok</think>Action: [Answer]\nContent: B. In the kitchen.\n"
    trace, seen = run_loop([search] * (answer_round - 1) + [answer])
    assert trace.response == "B. In the kitchen.\n" and len(trace.rounds) == answer_round  # unstripped
    assert seen[0][0]["content"] == "SYSTEM Where?" and seen[0][1]["content"] == "Searched knowledge: {} [INSTR]"
    if answer_round == 3:  # thinking kept in history, the instruction stays on every user turn, empty note added
        assert seen[2][2]["content"].startswith("<think>need more</think>")
        assert seen[2][3]["content"] == "Searched knowledge: {}\n(empty) [INSTR]"


def test_no_answer_in_five_rounds_a_malformed_reply_and_a_cut_thinking_are_empty_searches():
    trace, seen = run_loop(["no action at all", "<think>thinking cut at the token lim", "Action: [answer]\nContent: x",
                            "**Action:** [Answer] Content: y", "still nothing"])
    assert trace.response is None and len(trace.rounds) == 5
    assert [r["query"] for r in trace.rounds[:2]] == [None, None] and trace.rounds[2]["query"] == "x"
    assert seen[4][-1]["content"].endswith(" [INSTR] [LAST]")  # the forced-answer note in the last round only
    assert not any(m["content"].endswith("[LAST]") for m in seen[3])

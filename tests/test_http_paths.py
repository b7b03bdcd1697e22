"""Every VLM request path over real HTTP, against a strict OpenAI-compatible server (tests/strict_openai.py).

The episode tests elsewhere run on the scripted backend, which records senri's cache payload, not the body a
server receives. Here the same paths run through the ``openai`` backend to a loopback server that checks each
body against the chat-completions format and refuses what real servers refuse; every test asserts the server
refused nothing and that the bodies carry what the path must send (image parts as JPEG data URLs, one
``video_url`` for a video model, JSON schemas, …)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import make_probed_clip
from strict_openai import Refused, StrictOpenAI, validate
from test_agent import DEFAULT_CONTROLLER, QUESTION as SHOP_QUESTION, _rules, run_agent, shop  # noqa: F401
from test_answer import _direct_inputs, demo_tables  # noqa: F401
from test_worldmm import bag_of_words  # noqa: F401

JPEG = "data:image/jpeg;base64," + base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 16).decode()


@pytest.fixture(scope="module")
def probed_clip(tmp_path_factory):
    """``make_probed_clip`` for the tests here, encoded once: each test gets a copy under its own video id (six
    encodes of the 120-s clip were 5 CPU-s; a copy holds the same bytes, as a second job over one video does)."""
    source, _ = make_probed_clip(tmp_path_factory.mktemp("http_clip"), "clip")

    def copy(folder: Path, video_id: str):  # noqa: ANN202 - (video path, VideoInfo)
        shutil.copyfile(source, folder / f"{video_id}.mp4")
        return make_probed_clip(folder, video_id)

    return copy


def body(**fields):
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, **fields}


# ------------------------------------------------------------------------------------------- the server itself
@pytest.mark.parametrize("fields, family, status, message", [
    ({"bogus": 1}, "chat", 400, "Unrecognized request argument"),
    ({"model": "other"}, "chat", 404, "does not exist"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "chat", 400, "role must be one of"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]}]},
     "chat", 400, "not a JPEG"),
    ({"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": "x"}}]}]}, "chat", 400,
     "unsupported content part type 'video_url'"),
    ({"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": JPEG}}]}]}, "chat", 400,
     "only allowed in user messages"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c9", "content": "r"}]},
     "chat", 400, "answers no earlier assistant tool call"),
    ({"tool_choice": "auto"}, "chat", 400, "only allowed when 'tools' are specified"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "chat", 400, "function.name must match"),
    ({"temperature": 3}, "chat", 400, "Invalid value for 'temperature'"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "chat", 400, "'stop' must be"),
    ({"top_logprobs": 5}, "chat", 400, "requires 'logprobs'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "chat", 400, "needs a 'name'"),
    ({}, "reasoning", 400, "Use 'max_completion_tokens' instead"),
    ({"max_tokens": None, "max_completion_tokens": 8, "temperature": 0}, "reasoning", 400,
     "Only the default (1) value is supported"),
])
def test_the_strict_server_refuses_what_real_servers_refuse(fields, family, status, message):
    request = body(**fields)
    if request.get("max_tokens") is None:
        request.pop("max_tokens")
    with pytest.raises(Refused) as refused:
        validate(request, "m", family=family)
    assert refused.value.status == status and message in refused.value.message


def test_the_strict_server_accepts_the_documented_forms_and_honours_tool_choice():
    tools = [{"type": "function", "function": {"name": "lookup", "description": "d",
                                               "parameters": {"type": "object", "properties": {}}}}]
    validate(body(messages=[
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": JPEG}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"}],
        tools=tools, tool_choice="required", response_format={"type": "json_object"}, logprobs=True, top_logprobs=5),
        "m")
    validate({k: v for k, v in body(max_completion_tokens=16).items() if k != "max_tokens"}, "m", family="reasoning")
    rules = [{"match": "look", "text": "plain words", "tool_call": {"name": "lookup", "arguments": {"q": 1}}}]
    with StrictOpenAI(rules, model="m") as server:
        for choice, expect_call in (("none", False), ("required", True), ("auto", True)):
            status, reply = server.handle(json.dumps(body(messages=[{"role": "user", "content": "look"}], tools=tools,
                                                          tool_choice=choice)).encode(), None)
            message = reply["choices"][0]["message"]
            assert status == 200 and bool(message.get("tool_calls")) is expect_call, choice
        hermes = StrictOpenAI(rules, model="m", tool_format="hermes")
        status, reply = hermes.handle(json.dumps(body(messages=[{"role": "user", "content": "look"}], tools=tools,
                                                      tool_choice="auto")).encode(), None)
        assert "<tool_call>" in reply["choices"][0]["message"]["content"] and "tool_calls" not in reply["choices"][0]["message"]
        no_parser = StrictOpenAI(rules, model="m", auto_tool_choice=False)
        status, reply = no_parser.handle(json.dumps(body(tools=tools, tool_choice="auto")).encode(), None)
        assert status == 400 and "--enable-auto-tool-choice" in reply["error"]["message"]


def _parts(entry: dict) -> list[dict]:
    return [p for m in entry["body"]["messages"] if isinstance(m.get("content"), list) for p in m["content"]]


# ------------------------------------------------------------------------------------------- direct perception
@pytest.mark.parametrize("video", [False, True])
def test_direct_perception_over_http_images_and_video(tmp_path, demo_tables, small_demo, video):  # noqa: F811
    from senri.answer import answer_video

    questions, info = demo_tables
    store, carrier = _direct_inputs(tmp_path, small_demo)
    with StrictOpenAI([{"text": '{"answer": "B"}'}], video=video) as server:
        stage = {"seed": 0,
                 "method": {"name": "direct", "implementation": "direct", "approach": "direct_perception",
                            "uses_model": True, "frames": 6, "plan": "uniform_6", "answer_format": "json",
                            "greedy": True},
                 "model": {"name": "vlm", **server.model_config(json_schema=True)}}
        predictions = answer_video(questions.head(2), info, stage, frames=store, carrier=carrier if video else None)
    assert server.refused() == [] and predictions["error"].is_null().all() and (predictions["pred"] == "B").all()
    for entry in server.bodies:
        parts = _parts(entry)
        kinds = [p["type"] for p in parts]
        if video:
            assert kinds.count("video_url") == 1 and "image_url" not in kinds
            assert entry["body"]["messages"][-1]["content"][kinds.index("video_url")]["video_url"]["url"].startswith(
                "data:video/mp4;base64,")
        else:
            assert kinds.count("image_url") == 6 and all(p["image_url"]["url"].startswith("data:image/jpeg;base64,")
                                                          for p in parts if p["type"] == "image_url")
        assert entry["body"]["temperature"] == 0.0 and entry["body"]["response_format"]["type"] == "json_schema"


# ------------------------------------------------------------------------------------ SENRI-Agent's roles
def test_senri_agent_controller_verifiers_and_updater_over_http(shop, tmp_path):  # noqa: F811
    rules = _rules(DEFAULT_CONTROLLER)
    with StrictOpenAI(rules) as server:
        row, _ = run_agent(shop, tmp_path, "senri_agent", model=server.model_config())
    assert server.refused() == [], server.refused()[:1]
    assert row["pred"] == "C" and row["error"] is None
    texts = ["\n".join(p["text"] for p in _parts(e) if p["type"] == "text")
             + "".join(m["content"] for m in e["body"]["messages"] if isinstance(m["content"], str))
             for e in server.bodies]
    verifiers = [e for e, t in zip(server.bodies, texts) if "Target context (R1)" in t]
    updaters = [e for e, t in zip(server.bodies, texts) if "Update the working memory" in t]
    assert len(verifiers) == 2 and len(updaters) == 1
    for entry in verifiers:  # choice-blind frames as labelled JPEG images, a JSON schema
        assert any(p["type"] == "image_url" for p in _parts(entry))
        assert entry["body"]["response_format"]["json_schema"]["name"] == "response"
        assert SHOP_QUESTION.option_c not in json.dumps(entry["body"])
    assert any(p["type"] == "image_url" for p in _parts(updaters[0]))  # the updater sees the evidence frames
    assert all(e["body"]["messages"][0]["role"] == "system" for e in verifiers + updaters)


# ------------------------------------------------------------------------------ VideoLucy's captioner and agent
def test_videolucy_captioner_and_agent_over_http(tmp_path, probed_clip):
    from senri.answer import MemoryInputs, answer_video
    from senri.captioners.base import VideoMedia
    from senri.memory.hierarchy import build_memory, open_service
    from senri.records import MemoryRow, Question, to_frame, write_table
    from test_videolucy import LOCALIZE_60_90, MEMORY, METHOD, QUESTION, SEARCH_PATH, script_rules

    video, info = probed_clip(tmp_path, "hall")
    rules = script_rules(LOCALIZE_60_90, SEARCH_PATH)
    with StrictOpenAI(rules) as server:
        memory_slice = {"memory": {**MEMORY, "captioner": "strict_vlm", "short_side": 64}, "track": {},
                        "captioner_model": server.model_config(max_tokens=64)}
        media = VideoMedia("hall", video, info.fingerprint, info.duration_s)
        service = open_service(memory_slice, media, tmp_path / "captions")
        rows, _ = build_memory(service, memory_slice["memory"], info.duration_s)
        service.close()
        write_table(rows, tmp_path / "memory.parquet", MemoryRow)
        captions = len(server.bodies)
        stage = {"seed": 0, "method": {"name": "videolucy", **METHOD},
                 "model": {"name": "agent", **server.model_config(max_tokens=64)}, "memory": memory_slice}
        inputs = MemoryInputs(tmp_path / "memory.parquet", video, None, None, None, tmp_path / "captions")
        row = answer_video(to_frame([QUESTION], Question), info, stage, memory=inputs).row(0, named=True)
    assert server.refused() == [], server.refused()[:1]
    assert captions == 4 and all(sum(p["type"] == "image_url" for p in _parts(e)) > 1
                                 for e in server.bodies[:captions])  # coarse clips: frames as JPEG images
    recaptions = [e for e in server.bodies[captions:] if any(p["type"] == "image_url" for p in _parts(e))]
    assert recaptions  # backtracking re-captions finer clips through the same server
    assert row["pred"] == "B" and row["correct"] and row["error"] is None


# ---------------------------------------------------------------------------------------------- a served batch
def test_a_served_vllm_model_s_answers_go_over_http_with_the_batch_key(tmp_path, demo_tables, small_demo,  # noqa: F811
                                                                       monkeypatch):
    """A served batch's answer job talks to its server through :class:`senri.backends.served.ServedBackend`:
    the vLLM body (sampling, the server's key as a bearer token, the shipped config's carrier video) must be one
    a server accepts. Issue 36 item 1: the shipped ``video: true`` config is served; its carrier travels as a
    senri carrier with its source times, which a stock-loader server refuses and senri's loader reads as the
    in-process engine's input (the same frames, the frames' source times)."""
    from senri.answer import answer_video
    from senri.backends.served import Endpoint, serving_through
    from senri.backends.vllm_video import load_carrier
    from senri.config import compose
    from senri.records import FrameRow, read_table

    monkeypatch.setenv("SENRI_SERVER_KEY", "batch-key")
    model = {"name": "qwen25vl7b_vllm", **compose("model=[qwen25vl7b_vllm]")["model"]["qwen25vl7b_vllm"]}
    assert model["video"] is True  # the shipped config
    questions, info = demo_tables
    store, carrier = _direct_inputs(tmp_path, small_demo)
    stage = {"seed": 0,
             "method": {"name": "direct", "implementation": "direct", "approach": "direct_perception",
                        "uses_model": True, "frames": 6, "plan": "uniform_6", "answer_format": "json",
                        "greedy": True},
             "model": model}
    for loader, refused in ((True, 2), ("senri", 0)):  # vLLM's stock loader, then senri's
        with StrictOpenAI([{"text": '{"answer": "B"}'}], model="qwen25vl7b_vllm", api_key="batch-key",
                          video=loader) as server:
            with serving_through(Endpoint(server.base_url.removesuffix("/v1"), model)):
                predictions = answer_video(questions.head(2), info, stage, frames=store, carrier=carrier)
        assert len(server.refused()) == refused and len(server.bodies) == 2
    assert predictions["error"].is_null().all() and (predictions["pred"] == "B").all()
    times = [float(t) for t in read_table(store, FrameRow)["pts_s"]]
    for body in server.bodies:
        (video,) = [p for p in _parts(body) if p["type"] == "video_url"]
        assert not any(p["type"] == "image_url" for p in _parts(body))
        frames, metadata = load_carrier(base64.b64decode(video["video_url"]["url"].split(",", 1)[1]))
        assert frames.shape[0] == 6 and metadata["total_num_frames"] == 6 and metadata["fps"] == 1.0
        assert metadata["frames_indices"] == [int(round(t)) for t in times]  # source times at the carrier's rate
        assert metadata["do_sample_frames"] is False


# ------------------------------------------------------------------------------ WorldMM's builders and QA call
def test_worldmm_s_builders_and_workflow_over_http(tmp_path, bag_of_words, probed_clip):  # noqa: F811
    """WorldMM's store built over HTTP (the 10-s captioner, summariser, extractor and retriever roles) and its
    workflow (controller, W8/W9 on the retriever role, the QA call with clip frames) answering over HTTP."""
    from senri.memory.worldmm.store import WorldMMStore
    from test_worldmm import BUILD_RULES, WORKFLOW_RULES, build_request, hand_made_store, run_workflow

    clip = probed_clip(tmp_path, "wm")
    with StrictOpenAI([*BUILD_RULES, {"text": "I hold a red mug."}]) as server:
        model = ("strict", server.model_config())
        (tmp_path / "build").mkdir()
        request, _ = build_request(tmp_path / "build", clip, bag_of_words, {
            "summariser": model, "extractor": model, "retriever": model, "embedder": None})
        request = type(request)(**{**request.__dict__, "memory_config": {
            **request.memory_config, "captioner_model": server.model_config(max_tokens=64)}})
        WorldMMStore.build(request)
    assert server.refused() == [], server.refused()[:1]
    store = WorldMMStore.open(request.out_dir, bag_of_words, request.video)
    assert [i.text for i in store.items("30sec")][0] == "I hold the red mug in the kitchen."
    captions = [e for e in server.bodies if any(p["type"] == "image_url" for p in _parts(e))]
    assert len(captions) == 12  # one 10-s caption per clip of the 120-s video, its frames as JPEG images
    structured = [e for e in server.bodies if "response_format" in e["body"]]
    assert structured and all(e["body"]["response_format"]["type"] == "json_schema" for e in structured)

    visual = {"start_s": np.arange(0, 50, 10.0), "end_s": np.arange(10, 60, 10.0),
              "vectors": np.eye(5, dtype=np.float32), "embedder": "release", "model_config": None}
    (tmp_path / "answer").mkdir()
    hand_made_store(tmp_path / "answer" / "store", bag_of_words, visual=visual)
    with StrictOpenAI(WORKFLOW_RULES) as server:
        row, _ = run_workflow(tmp_path / "answer", clip, bag_of_words, WORKFLOW_RULES, model=server.model_config())
    assert server.refused() == [], server.refused()[:1]
    assert row["pred"] == "B" and row["correct"] and row["error"] is None
    [qa] = [e for e in server.bodies if "Give only the letter" in json.dumps(e["body"])]
    assert sum(p["type"] == "image_url" for p in _parts(qa)) == 9  # 1 fps over 5–10 s and 10–12 s, ends included


# -------------------------------------------------------------------------- MAGIC-Video's builder and QA call
def test_magic_video_s_builder_and_workflow_over_http(tmp_path, probed_clip):
    """MAGIC-Video's builder roles (G4–G12) and its workflow (controller, G13 on the time-extractor role, the QA
    call with the retrieved clips' frames) over HTTP."""
    from types import SimpleNamespace

    import yaml

    from senri.answer import MemoryInputs, answer_video
    from senri.memory.magic_video.build import build_store
    from senri.memory.magic_video.release import import_release
    from senri.memory.magic_video.store import MagicVideoStore
    from senri.memory.store import BuildRequest
    from senri.records import MemoryRow, Question, to_frame, write_table
    from test_magic_video import MAGIC_RULES, QUESTION, ROLE_REPLIES, bag_encoder, request_for, write_release

    rows = [MemoryRow("v1", "coarse", float(s), float(s + 10), 1.0, 10, "h", f"Anna fills the kettle at {s}",
                      "perception", "t", None, None, None) for s in range(0, 240, 10)]
    table = write_table(to_frame(rows, MemoryRow), tmp_path / "captions.parquet", MemoryRow)
    cfg = {**yaml.safe_load(Path("config/memory_system/magic_video.yaml").read_text()), "topic_min_captions": 2}
    with StrictOpenAI([{"match": m, "text": json.dumps(r)} for m, r in ROLE_REPLIES]) as server:
        request = BuildRequest(video=SimpleNamespace(video_id="v1", duration_s=240.0, path="/videos/v1.mp4"),
                               system="magic_video", system_config=cfg, memory_config={}, out_dir=tmp_path / "built",
                               captions=table, models={"builder": ("strict", server.model_config())})
        build_store(request, encoder=bag_encoder)
    assert server.refused() == [], server.refused()[:1]
    built = MagicVideoStore.open(request.out_dir, cfg, request.video, encoder=bag_encoder)
    assert {n.node_id for n in built.nodes if n.node_type == "entity"} == {"ent_anna", "ent_kettle"}

    video, info = probed_clip(tmp_path, "v1")
    store = request_for(tmp_path / "answer")
    # Hashed words for the store's and the answer's text vectors: what goes over HTTP is under test here, and
    # MiniLM (torch, loaded twice) was most of this test's time; test_magic_video.py checks the retrieval.
    store.system_config["text_embedder"] = "hashed_encoder:HashedWords"
    import_release(write_release(tmp_path / "answer" / "release"), store)
    captions = write_table(to_frame([MemoryRow("v1", "coarse", 0.0, 120.0, 1.0, 1, "h", "a kitchen", "perception", "t",
                                               None, None, None)], MemoryRow), tmp_path / "memory.parquet", MemoryRow)
    method = yaml.safe_load(Path("config/method/magic_video.yaml").read_text())
    with StrictOpenAI(MAGIC_RULES) as server:
        stage = {"seed": 0, "method": {"name": "magic_video", **method, "verifier_short_side": 64},
                 "model": {"name": "vlm", **server.model_config()},
                 "memory": {"memory": {"captioner": "perception"}},
                 "memory_system": {"name": "magic_video", **store.system_config}}
        inputs = MemoryInputs(captions, video, None, None, None, tmp_path / "cache", store=store.out_dir)
        row = answer_video(to_frame([QUESTION], Question), info, stage, memory=inputs).row(0, named=True)
    assert server.refused() == [], server.refused()[:1]
    assert row["pred"] == "B" and row["error"] is None and row["qa_calls"] == 1
    [qa] = [e for e in server.bodies if "Answer a question about a long first-person video" in json.dumps(e["body"])]
    assert sum(p["type"] == "image_url" for p in _parts(qa)) > 0
    assert any("Does this search query refer to a specific time" in json.dumps(e["body"]) for e in server.bodies)


# ------------------------------------------------------------------------------ the evidence seekers (issue 38)
def _seeker_stage(server, method: str, **extra) -> dict:
    import yaml

    from senri.prompts import prompt_identity

    config = {**yaml.safe_load(open(f"config/method/{method}.yaml")), **extra}
    config["prompt_identity"] = prompt_identity(config)
    return {"seed": 0, "method": {"name": method, **config},
            "model": {"name": "vlm", **server.model_config(max_tokens=256)}}


def _seeker_question(video_id: str):
    from senri.records import Question, to_frame

    return to_frame([Question(video_id, "q1", "L", "none", "Where was I?", "hall", "kitchen", "garden", "street",
                              "C")], Question)


def test_paravt_s_overview_crops_and_forced_letter_over_http(tmp_path, probed_clip):
    """ParaVT's turns as a server gets them: 64 overview images, then each crop its own user message of images
    and its result line, the forced letter call at 64 tokens; no stop strings (P-D1)."""
    from senri.answer import answer_video

    video, info = probed_clip(tmp_path, "pv")
    call = '<tool_call>{"name": "crop_video", "arguments": {"start_time": %d, "end_time": %d}}</tool_call>'
    rules = [{"match": "answer the question now", "text": "C"},
             {"match": "frames from 20.0 s", "text": "<think>again</think>" + call % (0, 6)},
             {"match": "frames from 0.0 s", "text": "<think>once more</think>" + call % (50, 60)},
             {"match": "Options:", "text": "<think>look</think>" + call % (10, 20) + call % (20, 36)}]
    with StrictOpenAI(rules) as server:
        row = answer_video(_seeker_question("pv"), info, _seeker_stage(server, "paravt"),
                           pixels=video).row(0, named=True)
    assert server.refused() == [], server.refused()[:1]
    assert row["pred"] == "C" and row["correct"] and row["error"] is None and row["tool_calls"] == 4
    bodies = [e["body"] for e in server.bodies]
    assert len(bodies) == 4 and [b["max_tokens"] for b in bodies] == [2048, 2048, 2048, 64]
    assert all("stop" not in b and b["temperature"] == 0.0 for b in bodies)
    last = bodies[-1]["messages"]
    images = [sum(p["type"] == "image_url" for p in m["content"]) if isinstance(m["content"], list) else 0
              for m in last]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "user", "assistant", "user",
                                         "assistant", "user", "user"]
    assert images[1] == 64 and images[3:5] == [10, 16] and images[6] == 6 and images[8] == 10


def test_video_o3_s_videos_and_stop_strings_over_http(tmp_path, probed_clip):
    """Video-o3's turns as a server gets them: the overview and each crop one ``video_url`` at the header's
    ``<video>`` placeholder, both closing tags as ``stop`` on every turn; the server cuts the reply at its first
    stop string (which it does not return) and the method puts the tag back, as the release's criterion keeps it."""
    from senri.answer import answer_video
    from senri.backends.vllm_video import load_carrier

    video, info = probed_clip(tmp_path, "vo")
    ground = '<think>look</think><grounding>{"temporal_segment": [%d, %d], "sampling_strategy": "%s"}</grounding>'
    rules = [{"match": "Observation 2", "text": "<think>seen</think><answer>C</answer> trailing"},
             {"match": "Observation 1", "text": ground % (30, 40, "fine") + " and more text"},
             {"match": "Options:", "text": ground % (2, 8, "medium") + "<answer>A</answer>"}]
    with StrictOpenAI(rules, video=True) as server:
        row = answer_video(_seeker_question("vo"), info, _seeker_stage(server, "video_o3"),
                           pixels=video).row(0, named=True)
    assert server.refused() == [], server.refused()[:1]
    assert row["pred"] == "C" and row["correct"] and row["tool_calls"] == 2 and row["rounds"] == 3
    bodies = [e["body"] for e in server.bodies]
    assert all(b["stop"] == ["</grounding>", "</answer>"] and b["max_tokens"] == 4096 for b in bodies)
    # the server returned each grounding reply without its closing tag; the history holds it closed
    assert server.bodies[0]["response"]["choices"][0]["message"]["content"].endswith('"medium"}')
    last = bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last[2]["content"].endswith('"medium"}</grounding>') and "<answer>" not in last[2]["content"]
    frames = []
    for message in (last[1], last[3], last[5]):
        kinds = [p["type"] for p in message["content"]]
        assert kinds == ["text", "video_url", "text"]  # the video at the header's placeholder
        mp4 = base64.b64decode(message["content"][1]["video_url"]["url"].split(",", 1)[1])
        clip, metadata = load_carrier(mp4)
        frames.append(clip.shape[0])
        assert metadata["fps"] == 2.0  # the rate the model's temporal positions assume (O-I3)
    assert frames == [240, 12, 20]  # 120 s at 2 fps; 2-8 s and 30-40 s at 2 fps


def test_longvideo_r1_s_controller_captions_and_video_qa_over_http(tmp_path, probed_clip):
    """LongVideo-R1 as two servers get it: the text-only controller's history of plain-text turns (the caption
    and QA results as user turns), the caption model's alternating time labels and JPEG frames, video_qa's
    query then 16 labelled frames; answers only from the first ``<answer>`` of each."""
    from senri.answer import answer_video

    video, info = probed_clip(tmp_path, "lv")
    controller_rules = [
        {"match": "<information>", "text": "<think>so it was red</think><answer>C</answer>"},
        {"match": "Low-level Caption", "text": '<think>ask</think><tool>video_qa((2,1,1), "what colour?")</tool>'},
        {"match": "High-level Caption", "text": "<think>zoom in</think><tool>get_caption((2,1,1))</tool>"}]
    tool_rules = [{"match": "what colour?", "text": "<reasoning>seen</reasoning><answer>red</answer>"},
                  {"text": "<caption>a person walks through a hall</caption>"}]
    with StrictOpenAI(controller_rules, model="controller") as controller, \
            StrictOpenAI(tool_rules, model="vlm") as tools:
        stage = _seeker_stage(controller, "longvideo_r1")
        stage["model"] = {"name": "controller", **controller.model_config(max_tokens=256, images=False)}
        stage["method"]["tool_model_configs"] = {
            role: {"name": "vlm", "config": tools.model_config(max_tokens=256)} for role in ("caption", "video_qa")}
        row = answer_video(_seeker_question("lv"), info, stage, pixels=video,
                           caption_cache=tmp_path / "captions").row(0, named=True)
    assert controller.refused() == [] and tools.refused() == [], (controller.refused()[:1], tools.refused()[:1])
    assert row["pred"] == "C" and row["correct"] and row["error"] is None and row["qa_calls"] == 1
    bodies = [e["body"] for e in controller.bodies]
    assert len(bodies) == 3 and all(not any(isinstance(m["content"], list) and any(
        p["type"] != "text" for p in m["content"]) for m in b["messages"]) for b in bodies)
    last = bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    calls = [e["body"] for e in tools.bodies]
    assert len(calls) == 4 + 1 + 1  # four high nodes, low node (2,1,1), one video_qa call
    caption = _parts(tools.bodies[0])
    assert [p["type"] for p in caption[:4]] == ["text", "image_url", "text", "image_url"] and len(caption) == 256
    assert calls[0]["max_tokens"] == 2048
    qa = _parts(tools.bodies[-1])
    assert qa[0] == {"type": "text", "text": "what colour?"} and len(qa) == 1 + 2 * 16
    assert qa[1]["text"].startswith("Video frame at ") and qa[2]["type"] == "image_url"

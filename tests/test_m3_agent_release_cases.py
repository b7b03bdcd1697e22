"""M3-Agent's memory graph, retrieval, controller parse, faces, voices and memorizer handling against what the
released code computed on fixed inputs (``tests/reference/release_cases/m3_agent/cases.json``; its README §6.1 says
how each case was made). Every case of every kind is checked here or listed in UNCHECKED with the reason; the
counting test fails when a case is neither. Scores are compared within 1e-6.

Where the release's output depends on PYTHONHASHSEED (``output_across_hashseeds``: entity order taken from a set),
senri's fixed order (first appearance) must give one of the outputs the release gave across seeds."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from reference import release_cases
from senri.memory.m3_agent import control, perception
from senri.memory.m3_agent.graph import GraphConfig, MemoryGraph
from senri.memory.m3_agent.retrieval import expand_query, name_search, retrieve, search, translate

TOL = 1e-6
CASES = release_cases("m3_agent")
KINDS = CASES["kinds"]

#: Kinds whose cases need media pipelines not built in this round: each is a recorded decision in docs/protocol.md.
UNCHECKED = {
    "frame_sampling": "moviepy 2.1.2's 5-fps frame pick (M-C3): senri's build samples its own frames; not ported",
    "clip_split": "the README's ffmpeg stream-copy loop (M-C1): senri cuts clips by time itself; not ported",
    "face_pipeline": "insightface detection batches (M-C5): needs the detector stand-in's JPEG-width protocol",
    "build": "the whole process_segment per clip with intermediate JSON: covered by the demo build test instead",
    "api_config_as_released": "the release's Azure client config (M-V6/M-Q1): senri's backends replace it",
}
CHECKED_KINDS = {"entity_parse", "translate", "query_expansion", "equivalences", "node_update", "memory_insert",
                 "truncate", "retrieval", "name_search", "control_consumer", "memorizer_reply", "memorizer_input",
                 "face_cluster", "face_mapping", "voice_pipeline"}


def test_every_release_case_is_checked_or_a_recorded_decision():
    assert set(KINDS) == CHECKED_KINDS | set(UNCHECKED) and not CHECKED_KINDS & set(UNCHECKED)
    total = sum(len(v) for v in KINDS.values())
    checked = sum(len(KINDS[k]) for k in CHECKED_KINDS)
    assert total == 215 and len(KINDS) == 20  # the issue and README §6 say 19 kinds: the file holds 20
    assert checked == 178, checked  # the 37 left: UNCHECKED's five kinds


# ------------------------------------------------------------------------------------------------ graphs
def graph_from(data: dict, seed: int = 0) -> MemoryGraph:
    return MemoryGraph.from_dict(data, random.Random(seed))


def retrieval_graph() -> MemoryGraph:
    return graph_from(CASES["fixtures"]["retrieval_graph"])


def typed_graph(types: dict) -> MemoryGraph:
    graph = MemoryGraph()
    for node_id, kind in sorted(types.items(), key=lambda kv: int(kv[0])):
        graph._add(kind, [], [])
    return graph


def graph_summary(graph: MemoryGraph) -> dict:
    return {"nodes": [{"id": n.id, "type": n.kind, "n_embeddings": len(n.embeddings), "contents": n.contents,
                       **({"clip": n.clip} if n.clip is not None else {})} for n in graph.nodes.values()],
            "edges": sorted([a, b, w] for (a, b), w in graph.edges.items() if a < b),
            "text_nodes": graph.text_nodes,
            "text_nodes_by_clip": {str(k): v for k, v in graph.text_nodes_by_clip.items()},
            "event_sequence_by_clip": {str(k): v for k, v in graph.event_sequence_by_clip.items()},
            "next_node_id": graph.next_node_id}


def hash_outputs(case: dict) -> list:
    return [o["output"] for o in case.get("output_across_hashseeds", [])] or [case["output"]]


@pytest.mark.parametrize("case", KINDS["entity_parse"], ids=lambda c: c["id"])
def test_entity_parse(case):
    graph = typed_graph(case["input"]["graph_node_types"])
    mappings = case["input"]["character_mappings"]
    if mappings is not None:
        graph.character_mappings = mappings
        graph.reverse_character_mappings = {t: k for k, v in mappings.items() for t in v}
    assert [list(e) for e in graph.parse_entities(case["input"]["text"])] == case["output"]["entities"]


def _mapped_graph(reverse: dict) -> MemoryGraph:
    types = {}
    for tag in reverse:
        kind, node_id = tag.split("_")
        types[node_id] = "img" if kind == "face" else "voice"
    graph = typed_graph({k: types.get(k, "episodic") for k in map(str, range(max(map(int, types)) + 1))})
    graph.reverse_character_mappings = dict(reverse)
    mappings: dict = {}
    for tag, name in reverse.items():
        mappings.setdefault(name, []).append(tag)
    graph.character_mappings = mappings
    return graph


@pytest.mark.parametrize("case", KINDS["translate"], ids=lambda c: c["id"])
def test_translate(case):
    graph = _mapped_graph(case["input"]["reverse_character_mappings"])
    assert {"translated": translate(graph, case["input"]["memories"])} in hash_outputs(case)


@pytest.mark.parametrize("case", KINDS["query_expansion"], ids=lambda c: c["id"])
def test_query_expansion(case):
    mappings = case["input"]["character_mappings"]
    graph = _mapped_graph({t: k for k, v in mappings.items() for t in v})
    graph.character_mappings = mappings
    assert {"variants": expand_query(graph, case["input"]["query"])} in hash_outputs(case)


@pytest.mark.parametrize("case", KINDS["equivalences"], ids=lambda c: c["id"])
def test_equivalences(case):
    seeds = case["input"].get("random_seeds") or [case["input"].get("random_seed", 0)]
    expected = [d["character_mappings"] for d in case["output"].get("distinct_character_mappings", [])] \
        or [case["output"]["character_mappings"]]
    for seed, picked in (case["output"].get("fix_collisions_voice0_by_seed") or {}).items():
        graph = graph_from(case["input"]["graph"], int(seed))  # the coin flip of a tie, drawn from the seeded rng
        assert graph._voice_equivalences(0) == picked
    for seed in seeds:
        graph = graph_from(case["input"]["graph"], seed)
        graph.refresh_equivalences()
        assert graph.character_mappings in expected
        if "reverse_character_mappings" in case["output"] and len(expected) == 1:
            assert graph.reverse_character_mappings == case["output"]["reverse_character_mappings"]


@pytest.mark.parametrize("case", KINDS["node_update"], ids=lambda c: c["id"])
def test_node_update(case):
    given = case["input"]
    if "caps" not in given:  # a node that does not exist
        with pytest.raises(KeyError):
            MemoryGraph().update_node(given["node_id"], [[0.0]], ["c"])
        return
    caps = given["caps"]
    graph = MemoryGraph(GraphConfig(max_face_embeddings=caps["img"], max_voice_embeddings=caps["voice"]),
                        random.Random(given["random_seed"]))
    add = graph.add_face_node if given["node_type"] == "img" else graph.add_voice_node
    tags = given["initial_embedding_tags"]
    node_id = add([[t, 0.0] for t in tags], [f"c{t}" for t in tags])
    out = case["output"]
    assert [e[0] for e in graph.nodes[node_id].embeddings] == out["after_add_tags"]
    target = given.get("node_id", node_id)
    update = given["update_embedding_tags"]
    if "raised" in out.get("update", {}):
        with pytest.raises(Exception):
            graph.update_node(target, [[t, 0.0] for t in update], [f"c{t}" for t in update])
        return
    graph.update_node(target, [[t, 0.0] for t in update], [f"c{t}" for t in update])
    assert [e[0] for e in graph.nodes[node_id].embeddings] == out["embedding_tags"]
    assert len(graph.nodes[node_id].contents) == out["n_contents"]


@pytest.mark.parametrize("case", KINDS["memory_insert"], ids=lambda c: c["id"])
def test_memory_insert(case):
    graph = graph_from(case["input"]["graph_before"])
    for call in case["input"]["process_memories_calls"]:
        graph.insert_memories(call["texts"], call["embeddings"], call["clip"], call["type"])
    expected = case["output"]["graph_after"]
    got = graph_summary(graph)
    assert got["nodes"] == expected["nodes"]
    assert got["edges"] == sorted(expected["edges"])
    for key in ("text_nodes", "text_nodes_by_clip", "event_sequence_by_clip", "next_node_id"):
        assert got[key] == expected[key], key


@pytest.mark.parametrize("case", KINDS["truncate"], ids=lambda c: c["id"])
def test_truncate(case):
    graph = retrieval_graph()
    graph.truncate_to_clip(case["input"]["clip_id"], refresh=True)
    out = case["output"]
    assert list(graph.nodes) == out["node_ids"] and graph.text_nodes == out["text_nodes"]
    assert {str(k): v for k, v in graph.text_nodes_by_clip.items()} == out["text_nodes_by_clip"]
    assert len(graph.edges) // 2 == out["n_edges"]  # the case counts each symmetric edge once
    if out.get("character_mappings") is not None:
        assert graph.character_mappings == out["character_mappings"]


class CaseEmbedder:
    """The case's variant vectors; a text the case does not know is an error (retrieval embedded something else)."""

    def __init__(self, vectors: dict) -> None:
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return [self.vectors[t] for t in texts]


def _scores_close(got: dict, want: dict) -> bool:
    return set(map(str, got)) == set(want) and all(abs(got[int(k)] - v) <= TOL for k, v in want.items())


@pytest.mark.parametrize("case", KINDS["retrieval"], ids=lambda c: c["id"])
def test_retrieval(case):
    given, out = case["input"], case["output"]
    if "n_variants" in out:  # >100 variants: the seeded sample of 100 is the release's under the same seed
        import hashlib

        graph = graph_from(given["graph"], given["random_seed"])
        graph.refresh_equivalences()
        embed = CaseEmbedder({})
        embed.vectors = type("AnyText", (dict,), {"__getitem__": lambda self, text: [1.0] + [0.0] * 7})()
        retrieve(graph, given["query"], embed, 2, 0.5)
        assert len(expand_query(graph, given["query"])) == out["n_variants"]
        assert len(embed.calls[0]) == out["n_embedded"]
        assert hashlib.sha256("\n".join(sorted(embed.calls[0])).encode()).hexdigest()[:16] == out["embedded_sample_sha"]
        return
    graph = graph_from(given["graph"], given.get("random_seed") or 0) if isinstance(given.get("graph"), dict) \
        else retrieval_graph()
    graph.rng = random.Random(given.get("random_seed") or 0)
    graph.refresh_equivalences()
    embed = CaseEmbedder(given["variant_embeddings"])
    found = retrieve(graph, given["query"], embed, given["topk"], given["threshold"], given["before_clip"])
    assert sorted(found.related) == sorted(out["related_nodes"])
    assert sorted(found.variants) == sorted(out["variants"]) if len(out["variants"]) > 100 or \
        "random_seed" in given and given["random_seed"] is not None else found.variants == out["variants"]
    assert found.top_clips == out["top_clips"]
    assert _scores_close(found.clip_scores, out["clip_scores"])
    assert [n for n, _ in found.node_scores] == [n for n, _ in out["node_scores"]]
    assert all(abs(a - b) <= TOL for (_, a), (_, b) in zip(found.node_scores, out["node_scores"]))
    held = list(given["current_clips"])
    graph.rng = random.Random(given.get("random_seed") or 0)
    result, _ = search(graph, given["query"], embed, held, given["before_clip"])
    assert result == out["search_result"] and held == out["current_clips_after"]


@pytest.mark.parametrize("case", KINDS["name_search"], ids=lambda c: c["id"])
def test_name_search(case):
    given, out = case["input"], case["output"]
    graph = graph_from(given["graph"])
    graph.refresh_equivalences()
    vector = [0.0] * 8
    for term in given["variant_embedding"].split(","):  # "axis 0 = 1.0, axis 1 = 0.2"
        axis, value = term.replace("axis", "").split("=")
        vector[int(axis)] = float(value)
    embed = lambda texts: [vector] * len(texts)  # noqa: E731
    result, _ = name_search(graph, given["query"], embed, given["before_clip"])
    assert result == out["result"]
    assert sum(len(v) for v in result.values()) == out["n_texts"]


#: Query vectors the cases used but did not record (run_m3.py's ``_variant_vec``: keywords → axes 0–6): the two
#: keywords these cases need, reconstructed from the fixture graph's axes (axis 5: the payment, axis 6: the dog).
RECONSTRUCTED_AXES = {"paid money": 5, "the dog": 6}


def _variant_vector(text: str) -> list[float] | None:
    for case in KINDS["retrieval"]:
        if text in case["input"].get("variant_embeddings", {}):
            return case["input"]["variant_embeddings"][text]
    axes = [axis for word, axis in RECONSTRUCTED_AXES.items() if word in text]
    if not axes:
        return None
    vector = np.zeros(8)
    vector[axes] = 1.0
    return (vector / np.linalg.norm(vector)).tolist()


@pytest.mark.parametrize("case", KINDS["control_consumer"], ids=lambda c: c["id"])
def test_control_consumer(case):
    given, out = case["input"], case["output"]
    action = control.parse_reply(given["reply"])
    if action.answer is not None:
        assert out["finish"] is True and out["response"] == action.answer
        return
    assert out["finish"] is False
    known = action.query is None or _variant_vector(action.query) is not None
    # A query whose vector the case did not record is searched with a stand-in vector: its route (normal search:
    # held clips grow by at most 2; name search: they do not) is checked, its result not.
    embed = lambda texts: [_variant_vector(t) or [1.0] + [0.0] * 7 for t in texts]  # noqa: E731
    held = list(given["currenr_clips"])
    message, result = control.search_turn(retrieval_graph, action.query, embed, held, "\nNOTE",
                                           given["before_clip"])
    appended = out["appended_user_message"]
    if not known:
        assert len(held) == len(out["currenr_clips"]) and len(result) == len(appended["result"])
        return
    assert held == out["currenr_clips"]
    assert result == appended["result"]
    assert message.startswith(appended["prefix"] + appended["json_text"])
    assert message.endswith("\nNOTE") is appended["empty_note_appended"]


@pytest.mark.parametrize("case", KINDS["memorizer_reply"], ids=lambda c: c["id"])
def test_memorizer_reply(case):
    replies = iter(case["input"]["replies"])
    out = case["output"]
    assert perception.refine_reply(case["input"]["replies"][0]) == out["refined_first"]
    assert perception.parse_reply(case["input"]["replies"][0]) == out["validate_first"]["value"] or \
        case["input"]["replies"][0] == ""
    calls = []

    def call():
        calls.append(1)
        return next(replies)

    if "raised" in out["result"]:
        with pytest.raises(perception.MemorizerReplyError):
            perception.memorize(call)
        assert len(calls) == out["n_calls"]
        replies = iter(case["input"]["replies"])  # the named fix: the video keeps going with no memories
        fixed = perception.memorize(lambda: next(replies), on_bad_shape="empty")
        assert (fixed.episodic, fixed.semantic, fixed.failed) == ([], [], True)
        return
    result = perception.memorize(call)
    assert [result.episodic, result.semantic] == out["result"]["value"] and len(calls) == out["n_calls"]


@pytest.mark.parametrize("case", KINDS["memorizer_input"], ids=lambda c: c["id"])
def test_memorizer_input(case):
    given = case["input"]
    faces = {int(k): [perception.Face(f["frame_id"], (0, 0, 1, 1), [], "1", "1", crop=f["crop"]) for f in v]
             for k, v in given["faces_list"].items()}
    voices = {int(k): [perception.Voice(v["start_time"], v["end_time"], v["asr"], 0) for v in segs]
              for k, segs in given["voices_list"].items()}
    parts = perception.memorizer_parts("MP2", given["video_path"], faces, voices)
    expected = case["output"]["parts"]
    assert len(parts) == len(expected)
    for got, want in zip(parts, expected):
        if want.get("role") == "MP2":
            assert got == "MP2"
        elif want["type"] == "video":
            assert got == want["value"]
        elif want["type"] == "image":
            assert got == want["crop"]
        else:
            assert got == want["text"]


def _dense(face: dict, width: int = 512) -> list[float]:
    vector = np.zeros(width)
    if "dims" in face:
        vector[face["dims"]] = face["vals"]
    else:
        for dim, value in face["face_emb"]["nonzero"].items():
            vector[int(dim)] = value
    return vector.tolist()


#: Where scikit-learn's HDBSCAN (1.9.1) differs from the release's hdbscan 0.8.40: the number of clusters it finds
#: in a case the release leaves all noise (docs/protocol.md, K-3).
SKLEARN_DIFFERS = {"face_cluster-05": 2}


@pytest.mark.parametrize("clusterer", perception.CLUSTERERS)
@pytest.mark.parametrize("case", KINDS["face_cluster"], ids=lambda c: c["id"])
def test_face_cluster(case, clusterer):
    faces = [perception.Face(0, (0, 0, 1, 1), _dense(f), f["det"], f["quality"]) for f in case["input"]["faces"]]
    labels = perception.cluster_faces(faces, clusterer=clusterer)
    if clusterer == "hdbscan":
        assert labels == case["output"]["labels"]
    elif case["id"] in SKLEARN_DIFFERS:
        assert len(set(labels) - {-1}) == SKLEARN_DIFFERS[case["id"]] and set(case["output"]["labels"]) == {-1}
    else:  # scikit-learn's port: the same partition, labels possibly renumbered (docs/protocol.md K-3)
        pairs = set(zip(labels, case["output"]["labels"]))
        assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})
        assert all((a == -1) == (b == -1) for a, b in pairs)


@pytest.mark.parametrize("case", KINDS["face_mapping"], ids=lambda c: c["id"])
def test_face_mapping(case):
    given = case["input"]
    graph = graph_from(given["graph_before"]) if "graph_before" in given else MemoryGraph()
    for node in graph.nodes.values():
        # the harness recorded graph_before's contents list after the call (shared list): its own are the "old" ones
        node.contents = [c for c in node.contents if str(c).startswith("old")]
        node.embeddings = [_dense({"face_emb": {"nonzero": e}}) if isinstance(e, dict) else e
                           for e in node.embeddings]
    faces = [perception.Face(f["frame_id"], tuple(f["bounding_box"]), _dense(f),
                             f["extra_data"]["face_detection_score"], f["extra_data"]["face_quality_score"],
                             crop=f["extra_data"]["face_base64"], cluster=f["cluster_id"]) for f in given["faces_json"]]
    id2faces = perception.faces_to_nodes(graph, faces)
    got = {str(k): [[f.frame_id, f.cluster, f.detection, f.quality] for f in v] for k, v in id2faces.items()}
    assert got == case["output"]["id2faces"]
    expected = case["output"]["graph_after"]
    summary = graph_summary(graph)
    assert [(n["id"], n["n_embeddings"], n["contents"]) for n in summary["nodes"]] == \
        [(n["id"], n["n_embeddings"], n["contents"]) for n in expected["nodes"]]


# ------------------------------------------------------------------------------------------------ voices
SPEAKER_CODES = {"A": 3000, "B": 6000, "C": 9000}


def _unit(code: int) -> np.ndarray:
    vector = np.random.default_rng(code).normal(size=192)
    return vector / np.linalg.norm(vector)


def code_embedder(wav: bytes) -> list[float]:
    """The case's voice embedder as README §6.1 describes it: the sum over the segment's amplitude codes of
    (share of samples) × a fixed unit vector per code, silence the zero vector; on the first channel."""
    from senri.media import wav_samples

    samples, _ = wav_samples(wav)
    codes = np.rint(samples * 32768).astype(int)
    vector = np.zeros(192)
    for code in set(codes.tolist()) - {0}:
        vector += (codes == code).mean() * _unit(code)
    return vector.tolist()


def clip_wav_from_codes(codes: list[int], channels: int) -> bytes:
    from senri.media import wav_bytes

    mono = np.repeat(np.asarray(codes, dtype="<i2"), 16000)
    frames = np.stack([mono] + [np.zeros_like(mono)] * (channels - 1), axis=1) if channels > 1 else mono
    return wav_bytes(frames.astype("<i2").tobytes(), 16000, channels)


@pytest.mark.parametrize("case", KINDS["voice_pipeline"], ids=lambda c: c["id"])
def test_voice_pipeline(case):
    given, out = case["input"], case["output"]
    graph = graph_from(given["graph_before"])
    for node in graph.nodes.values():  # a voice heard in an earlier clip: the speaker's vector
        node.embeddings = [_unit(SPEAKER_CODES[given["existing_voice_code"]]).tolist()]
        node.contents = node.contents[:1]  # recorded after the call (shared list), as graph_before of face_mapping
    replies = iter(given["gemini_replies"])
    calls = []

    def call():
        calls.append(1)
        return next(replies)

    wav = clip_wav_from_codes(given["audio_codes_per_second"], given["channels"])
    if out["process_voices"]["raised"]:
        with pytest.raises(perception.DiarizationError):
            perception.embed_voices(wav, perception.diarize(call), code_embedder)
        assert len(calls) == out["gemini_calls"]
        return
    voices = perception.embed_voices(wav, perception.diarize(call), code_embedder)
    assert len(calls) == out["gemini_calls"]
    from senri.media import wav_info

    assert [(v.start_time, v.end_time, v.asr, v.duration, wav_info(v.wav).frames, wav_info(v.wav).channels)
            for v in voices] == [(w["start_time"], w["end_time"], w["asr"], w["duration"],
                                  w["segment_wav"]["n_samples"], w["segment_wav"]["channels"]) for w in out["written"]]
    assert all(abs(np.linalg.norm(v.embedding) - w["embedding_norm"]) < 1e-6 for v, w in zip(voices, out["written"]))
    id2voices = perception.voices_to_nodes(graph, voices)
    assert {str(k): [[v.start_time, v.end_time, v.asr] for v in vs] for k, vs in id2voices.items()} == out["id2audios"]
    assert [{"id": n.id, "contents": n.contents, "n_embeddings": len(n.embeddings)} for n in graph.nodes.values()
            if n.kind == "voice"] == out["voice_nodes"]

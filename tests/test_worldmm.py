"""WorldMM's store (src/senri/memory/worldmm/): the build on a generated clip with scripted models (every
prompt role's instructions in its requests), retrieval on a hand-made memory whose expected items and order
are computed independently (PageRank by networkx), import of a release-format folder the test writes from the
spec's formats, bad imports naming file and field, the export round trip, and the image-text embedder path
with a tiny randomly initialised CLIP built here."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from conftest import REPO, hashed_words
from seeker_replay import probed_clip
from senri.backends.scripted import ScriptedBackend
from senri.captioners.base import VideoMedia
from senri.memory.store import MEMORY_SYSTEMS, BuildRequest, MemoryItem, SearchContext
from senri.memory.worldmm import common as wm
from senri.memory.worldmm.build import Accumulated, write_store
from senri.memory.worldmm.common import (TextVectors, clean_triples, hhmmssff, parse_hhmmssff, parse_time_range,
                                         parse_ts9, ts9, window_batches)
from senri.memory.worldmm.index import GranularityIndex, ZeroWeightEntity, semantic_ranking
from senri.memory.worldmm.release import chunk_key, read_caption_file
from senri.memory.worldmm.store import WorldMMStore
from senri.prompts import prompt_set
from senri.records import MemoryRow, WorldMMSnapshot, read_table, to_frame, write_table

networkx = pytest.importorskip("networkx")
CONFIG = yaml.safe_load((REPO / "config/memory_system/worldmm.yaml").read_text())
MEMORY = yaml.safe_load((REPO / "config/memory/auto.yaml").read_text())
PROMPTS = prompt_set("worldmm")


class BagOfWords(wm.TextEncoder):
    """A deterministic text encoder for tests: hashed word counts, L2-normalised, so cosine similarities (and
    so every ranking below) are known in advance."""

    name = "bag-of-words-test"

    def encode(self, texts):
        return hashed_words(texts, 512)


@pytest.fixture
def bag_of_words(monkeypatch):
    monkeypatch.setitem(wm.TEXT_ENCODERS, "bow", BagOfWords)
    return {**CONFIG, "text_embedder": "bow"}


def item(level, start, end, text):
    return MemoryItem(wm.item_id(level, start, end), "episodic", text, float(start), float(end), level=level)


# ------------------------------------------------------------------------------------------- pure parts
def test_windows_open_at_the_first_start_then_on_multiples_and_end_unclipped():
    entries = [item("10sec", s, s + 10, f"c{s}") for s in (5, 15, 25, 35, 95, 100)]
    batches = window_batches(entries, 30)
    assert [(b[1], b[2], [e.text for e in b[0]]) for b in batches] == [
        (5, 35, ["c5", "c15", "c25"]),       # the first window opens at the first start
        (30, 60, ["c35"]),                   # then floor(35/30)·30; binned by start
        (90, 120, ["c95", "c100"]),          # end = start + w (not clipped at the last caption)
    ]
    assert window_batches([], 30) == []


def test_bad_and_duplicate_triples_are_dropped():
    kept, dropped = clean_triples([["I", "hold", "mug"], ["I", "hold", "mug"], ["x", "y"], ["a", "", "b"], "s",
                                   [" I ", "open", "door "]])
    assert kept == [("I", "hold", "mug"), ("I", "open", "door")] and dropped == 4
    assert clean_triples(None) == ([], 0)


def test_time_encodings():
    assert hhmmssff(3725.4) == "01020500" and hhmmssff(3725.4, round_up=True) == "01020600"
    assert parse_hhmmssff("01020500", "f") == 3725 and parse_hhmmssff(1000, "f") == 10
    assert ts9(130) == 100021000 and parse_ts9("100021000", "f") == 130
    assert parse_ts9("200000500", "f") == 86405
    assert parse_time_range("DAY1 00:00:12 - DAY1 00:00:31") == (12.0, 31.0)
    assert parse_time_range("the red mug") is None
    with pytest.raises(ValueError, match="f: '0102x500' is not an HHMMSSFF"):
        parse_hhmmssff("0102x500", "f")
    with pytest.raises(ValueError, match="TS9"):
        parse_ts9("1234", "f")


def test_the_store_is_registered():
    assert MEMORY_SYSTEMS.load("worldmm") is WorldMMStore
    assert WorldMMStore.memory_types == ("episodic", "semantic", "visual")



def test_the_worldmm_config_composes_and_every_key_is_checked():
    """config/memory_system/worldmm.yaml passes its schema branch as shipped; a typo'd key at any depth, or a
    value the store cannot use, is a ConfigError naming the key."""
    from senri import config as senri_config

    base = ["method=[worldmm,senri_agent]", "memory_system=[worldmm]", "model=[smollm2]"]
    cfg = senri_config.compose(base)
    assert sorted(cfg["method"]) == ["senri_agent@worldmm", "worldmm"]
    system = cfg["memory_system"]["worldmm"]
    assert {k: v for k, v in system.items() if k not in ("name", "model_configs", "prompt_identity")} == CONFIG
    # the builder prompts are part of the store's identity: editing one rebuilds the stores that used it
    assert system["prompt_identity"]["family"] == "worldmm" and "summarise" in system["prompt_identity"]["files"]
    assert system["model_configs"]["summariser"]["name"] == "qwen15_coder" and "embedder" not in system["model_configs"]
    for bad, key in (("+memory_system.worldmm.bogus=1", "bogus"),
                     ("+memory_system.worldmm.episodic.dampng=0.5", "episodic.dampng"),
                     ("+memory_system.worldmm.visual.nframe=3", "visual.nframe"),
                     ("+memory_system.worldmm.models.summarizer=null", "models.summarizer"),
                     ("+memory_system.worldmm.paper_models.captionr=x", "paper_models.captionr"),
                     ("+memory_system.worldmm.base.clip=10", "base.clip"),
                     ("memory_system.worldmm.episodic.damping=1.0", "episodic.damping"),
                     ("memory_system.worldmm.text_embedder=qwen3", "text_embedder"),
                     ("memory_system.worldmm.date=DAY0", "date"),
                     ("memory_system.worldmm.default_memory_type=audio", "default_memory_type"),
                     ("memory_system.worldmm.visual.range_offsets=relative", "visual.range_offsets"),
                     ("memory_system.worldmm.episodic.skip_filter_when_level_fits=maybe",
                      "episodic.skip_filter_when_level_fits"),
                     ("memory_system.worldmm.levels=[{name:30sec,window:30}]", r"levels\.0\.window")):
        with pytest.raises(senri_config.ConfigError, match=f"config.memory_system.worldmm.{key}"):
            senri_config.compose([*base, bad])

# ------------------------------------------------------------------------------------------------ build
def _scripted(folder: Path, name: str, rules: list[dict]) -> dict:
    script, record = folder / f"{name}.jsonl", folder / f"{name}_calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    return {"backend": "scripted", "script": str(script), "record": str(record)}


def _calls(config: dict) -> list[dict]:
    path = Path(config["record"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _prompt_text(call: dict) -> str:
    return "\n".join(part for m in call["payload"]["messages"] for part in m["content"] if isinstance(part, str))


BUILD_RULES = [
    {"match": "(30sec window)", "text": "I hold the red mug in the kitchen."},
    {"match": "(3min window)", "text": "I spend the morning in the kitchen with a red mug."},
    {"match": "(10min window)", "text": "A morning in the kitchen."},
    {"match": "Named entity recognition", "text": '{"named_entities": ["I", "red mug"]}'},
    {"match": "Triple extraction", "text": '{"triples": [["I", "hold", "red mug"], ["I", "hold", "red mug"], ["x"]]}'},
    {"match": "Semantic memory extraction", "text": json.dumps(
        {"semantic_triples": [["I", "like", "coffee"], ["bad"]], "episodic_evidence": [["10sec@0-10#0", "nope"]]})},
    {"match": "Semantic memory consolidation", "text": json.dumps(
        {"updated_triple": ["I", "drink", "coffee daily"], "triples_to_remove": [0]})},
]


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return probed_clip(tmp_path_factory.mktemp("worldmm"), "wm")  # the session's clip, encoded once


def build_request(tmp_path, clip, config, models):
    video, info = clip
    captioner = _scripted(tmp_path, "captioner", [{"text": "I hold a red mug."}])
    memory_slice = {"memory": {**MEMORY, "captioner": "scripted_vlm", "short_side": 48}, "track": {},
                    "captioner_model": captioner}
    media = VideoMedia(info.video_id, video, info.fingerprint, info.duration_s)
    return BuildRequest(video=info, system="worldmm", system_config=config, memory_config=memory_slice,
                        out_dir=tmp_path / "store", caption_cache=tmp_path / "captions", media=media,
                        models=models, response_cache=tmp_path / "responses.sqlite"), captioner


def test_build_on_a_generated_clip_with_scripted_models(tmp_path, clip, bag_of_words):
    llm = _scripted(tmp_path, "llm", BUILD_RULES)
    request, captioner = build_request(tmp_path, clip, bag_of_words, {
        "summariser": ("scripted_llm", llm), "extractor": ("scripted_llm", llm), "retriever": ("scripted_llm", llm),
        "embedder": None})
    WorldMMStore.build(request)

    store = WorldMMStore.open(request.out_dir, bag_of_words, request.video)
    # 120 s: twelve 10sec captions; 30sec windows 0-30 … 90-120; one 3min window 0-180 and one 10min 0-600.
    spans = {level: [(i.start_s, i.end_s) for i in store.items(level) if i.kind == "episodic"]
             for level in ("10sec", "30sec", "3min", "10min")}
    assert spans["10sec"] == [(s, s + 10) for s in range(0, 120, 10)]
    assert spans["30sec"] == [(s, s + 30) for s in range(0, 120, 30)]
    assert spans["3min"] == [(0, 180)] and spans["10min"] == [(0, 600)]
    assert store.items("30sec")[0].text == "I hold the red mug in the kitchen."
    # OpenIE on every caption of every level, one valid triple each (the duplicate and the short one dropped).
    assert set(store.triples) == {i.item_id for i in store.items() if i.kind == "episodic"}
    assert all(t == [("I", "hold", "red mug")] for t in store.triples.values())
    # Semantic: 10 + 2 captions → two W6 calls, keys at the groups' last ends (100 s, 120 s); the second key's
    # triple is consolidated with the first (same text, cosine 1 ≥ 0.6), W7 rewrites it and removes the old one.
    assert [(key, triples) for key, triples in store.snapshots] == [
        (100.0, [("I", "like", "coffee")]), (120.0, [("I", "drink", "coffee daily")])]
    snap = read_table(request.out_dir / "snapshots.parquet", WorldMMSnapshot)
    assert json.loads(snap["evidence"][0]) == ["10sec@0-10#0"]  # the unknown evidence id dropped
    # The second group's reply names an id outside its group (dropped); the removed triple's evidence carries over.
    assert json.loads(snap["evidence"][1]) == ["10sec@0-10#0"]
    record = yaml.safe_load((request.out_dir / "config.yaml").read_text())
    assert record["visual"] == "time ranges only (no embedder configured: text queries return nothing)"
    # Without an embedder the 10-s clips are still visual items (time-range queries read frames only).
    assert [(i.start_s, i.end_s) for i in store.items() if i.kind == "visual"] == spans["10sec"]
    assert record["substitutions"]["text_embedder"] == {"paper": "Qwen3-Embedding-4B", "used": "bag-of-words-test"}
    assert record["substitutions"]["summariser"] == {"paper": "gpt-5-mini", "used": "scripted_llm"}
    assert record["counts"]["triples_dropped"] == 24 and record["counts"]["failed_captions"] == 0

    # Every role's instructions reach its requests.
    calls = _calls(llm)
    by_role = {"summarise": "worldmm:summarise", "ner": "worldmm:ner", "triples": "worldmm:triples",
               "semantic": "worldmm:semantic", "consolidate": "worldmm:consolidate"}
    for role, purpose in by_role.items():
        sent = [_prompt_text(c) for c in calls if c["purpose"].startswith(purpose)]
        assert sent, role
        for line in PROMPTS[role].text.splitlines():
            fixed = [part for part in re.split(r"\$\{?\w+\}?", line) if part.strip()]
            assert all(any(part.strip() in text for text in sent) for part in fixed), (role, line)
    assert sum(c["purpose"] == "worldmm:semantic" for c in calls) == 2
    assert sum(c["purpose"] == "worldmm:consolidate" for c in calls) == 1
    caption_prompts = [_prompt_text(c) for c in _calls(captioner)]
    assert len(caption_prompts) == 12
    assert all(line in caption_prompts[0] for line in PROMPTS["caption"].text.strip().splitlines())
    # The 3min and 10min prompts carry their word caps; the 30sec prompt none.
    summaries = [_prompt_text(c) for c in calls if c["purpose"].startswith("worldmm:summarise")]
    assert any("under 300 words" in s and "(3min window)" in s for s in summaries)
    assert any("under 1500 words" in s and "(10min window)" in s for s in summaries)
    assert not any("words." in s and "(30sec window)" in s for s in summaries)
    # The store's cost table: one row per builder role, as config.yaml's llm record counts it (issue 40 item 3).
    cost = pl.read_parquet(request.out_dir / "cost.parquet")
    assert {r["role"]: (r["model"], r["calls"], r["prompt_tokens"]) for r in cost.iter_rows(named=True)} == {
        role: ("scripted_llm", stats["calls"], stats["prompt_tokens"]) for role, stats in record["llm"].items()}
    assert cost["calls"].sum() == len(calls) and set(cost["video_id"]) == {request.video.video_id}

    # A rebuild replays every call from the response cache and the captions from the caption cache.
    before = len(calls)
    WorldMMStore.build(request)
    assert len(_calls(llm)) == before and len(_calls(captioner)) == 12


def test_a_failed_clip_leaves_no_caption_and_every_question_books_it(tmp_path, clip, bag_of_words):
    llm = _scripted(tmp_path, "llm", BUILD_RULES)
    request, captioner = build_request(tmp_path, clip, bag_of_words, {
        "summariser": ("scripted_llm", llm), "extractor": ("scripted_llm", llm)})
    Path(captioner["script"]).write_text(json.dumps({"match": "from 50", "error": "decoder hiccup"}) + "\n"
                                         + json.dumps({"text": "I hold a red mug."}) + "\n")
    WorldMMStore.build(request)
    store = WorldMMStore.open(request.out_dir, bag_of_words, request.video)
    starts = [i.start_s for i in store.items("10sec") if i.kind == "episodic"]
    assert len(starts) == 11 and 50 not in starts
    assert store.question_counts() == {"failed_captions": 1, "truncated_captions": 0,
                                       "builder_losses": 0}  # a caption is not the builder's
    # The first semantic group is the first 10 captions that exist, so its key is 110 s.
    assert [key for key, _ in store.snapshots] == [110.0, 120.0]


#: Builder replies that lose items, ahead of BUILD_RULES: the 10min summary fails, the 3min passage's W5 reply
#: stays unreadable after the repair, the second semantic group's W6 call fails (3 items left out); every 30sec
#: passage's W4 reply is unreadable, which is no loss (its W5 call is still made and keeps its triples).
LOSSY_RULES = [
    {"match": "(10min window)", "error": "server hiccup"},
    {"match": ["Triple extraction", "I spend the morning in the kitchen"], "text": "no JSON here"},
    {"match": ["Named entity recognition", "I hold the red mug in the kitchen."], "text": "no JSON either"},
    {"match": "Your reply could not be read", "text": "still not JSON"},
    {"match": ["Semantic memory extraction", "10sec@100-110"], "error": "server hiccup"},
]


def test_builder_losses_are_booked_on_every_question_over_the_store(tmp_path, clip, bag_of_words):
    """Summaries, triples and semantic groups the builder left out (failed or unreadable calls) are the store's
    ``builder_losses``, from its recorded counts, and reach the prediction row through the answer stage."""
    llm = _scripted(tmp_path, "llm", LOSSY_RULES + BUILD_RULES)
    request, _ = build_request(tmp_path, clip, bag_of_words, {
        "summariser": ("scripted_llm", llm), "extractor": ("scripted_llm", llm)})
    WorldMMStore.build(request)
    counts = yaml.safe_load((request.out_dir / "config.yaml").read_text())["counts"]
    assert (counts["summaries_dropped_10min"], counts["index_triples_failed"], counts["semantic_calls_failed"]) \
        == (1, 1, 1)
    assert counts["index_ner_failed"] == 4 and counts["triples_failed"] == 0  # W4 lost, W5 still made: no loss
    store = WorldMMStore.open(request.out_dir, bag_of_words, request.video)
    assert not store.items("10min") and [i.item_id for i in store.items("3min")] == ["3min@0-180"]
    assert "3min@0-180" not in store.triples and store.triples["30sec@0-30"] == [("I", "hold", "red mug")]
    assert store.question_counts() == {"failed_captions": 0, "truncated_captions": 0, "builder_losses": 3}

    rules = [{"match": "Give only the letter", "text": "B"}, {"match": "Round history", "text": '{"decision": "answer"}'}]
    row, _ = run_workflow(tmp_path, clip, bag_of_words, rules)
    assert row["builder_losses"] == 3 and row["failed_captions"] == 0 and row["error"] is None


def test_a_build_without_a_summariser_says_which_role_is_missing(tmp_path, clip, bag_of_words):
    request, _ = build_request(tmp_path, clip, bag_of_words, {"summariser": None, "extractor": None})
    with pytest.raises(ValueError, match="models.summariser"):
        WorldMMStore.build(request)


# -------------------------------------------------------------------------------------------- retrieval
#: A hand-made memory: 10sec passages with their triples, and two coarser captions without any.
PASSAGES = [
    (0, "I pick up the red mug from the shelf.", [("I", "pick up", "red mug"), ("red mug", "on", "shelf")]),
    (10, "I fill the kettle with water.", [("I", "fill", "kettle"), ("kettle", "holds", "water")]),
    (20, "I pour hot water into the red mug.", [("I", "pour", "water"), ("water", "into", "red mug")]),
    (30, "I read a newspaper at the table.", [("I", "read", "newspaper"), ("newspaper", "on", "table"),
                                              ("newspaper", "next to", "the red mug")]),  # a synonym edge
    (40, "The cat sleeps on the sofa.", [("cat", "sleeps on", "sofa")]),
]
COARSE = [("30sec", 0, 30, "I make a hot drink in the kitchen."), ("30sec", 30, 60, "I relax in the living room."),
          ("3min", 0, 180, "A quiet morning at home.")]


def hand_made_store(folder: Path, config: dict, snapshots=None, visual=None) -> WorldMMStore:
    episodic = [item("10sec", s, s + 10, text) for s, text, _ in PASSAGES]
    episodic += [item(level, s, e, text) for level, s, e, text in COARSE]
    triples = {item("10sec", s, s + 10, text).item_id: ts for s, text, ts in PASSAGES}
    for i in episodic[len(PASSAGES):]:
        triples[i.item_id] = []
    snapshots = snapshots if snapshots is not None else [
        (30.0, [Accumulated(("I", "drink", "tea"), [])]),
        (50.0, [Accumulated(("I", "drink", "tea"), []), Accumulated(("red mug", "belongs to", "I"), []),
                Accumulated(("cat", "likes", "sofa"), []), Accumulated(("kettle", "is in", "kitchen"), [])])]
    encoder = wm.TEXT_ENCODERS[config["text_embedder"]]()
    write_store(folder, config, episodic, {}, triples, snapshots, visual, TextVectors(encoder), {}, {}, "test", {})
    return WorldMMStore.open(folder, config, None)


def reference_hipporag(store: WorldMMStore, query: str, kept_facts: list[tuple], config: dict) -> list[str]:
    """HippoRAG-2's passage ranking recomputed independently: networkx PageRank on a MultiGraph of the ordered
    pair table (fact pairs both ways, passage→entity, synonymy), reset = phrase + 0.05·dense."""
    enc = store.encoder
    passages = [i for i in store.items("10sec") if i.kind == "episodic"]
    q = enc.encode([query])[0]
    entities = []
    for p in passages:
        for s, _, o in store.triples[p.item_id]:
            for e in (s.lower(), o.lower()):
                if e not in entities:
                    entities.append(e)
    graph = networkx.MultiGraph()
    graph.add_nodes_from(range(len(entities) + len(passages)))
    pairs = {}
    for p in passages:
        for s, _, o in store.triples[p.item_id]:
            a, b = entities.index(s.lower()), entities.index(o.lower())
            pairs[(a, b)] = pairs.get((a, b), 0) + 1
            pairs[(b, a)] = pairs.get((b, a), 0) + 1
    for n, p in enumerate(passages):
        for s, _, o in store.triples[p.item_id]:
            for e in (s.lower(), o.lower()):
                pairs[(len(entities) + n, entities.index(e))] = 1.0
    vectors = enc.encode(entities)
    sims = vectors @ vectors.T
    for a in range(len(entities)):
        for b in range(len(entities)):
            if a != b and sims[a, b] >= config["episodic"]["synonymy_threshold"]:
                pairs[(a, b)] = float(sims[a, b])
    for (a, b), w in pairs.items():
        graph.add_edge(a, b, weight=w)
    simple = networkx.Graph()  # networkx's pagerank sums a MultiGraph's parallel edges
    simple.add_nodes_from(graph.nodes)
    for a, b, data in graph.edges(data=True):
        w = simple.get_edge_data(a, b, {"weight": 0.0})["weight"]
        simple.add_edge(a, b, weight=w + data["weight"])
    facts = list(dict.fromkeys(t for p in passages for t in store.triples[p.item_id]))
    fact_scores = wm.min_max(enc.encode([wm.triple_text(f) for f in facts]) @ q)
    score_of = dict(zip(facts, fact_scores))
    phrase = np.zeros(len(entities))
    for e_name in {e for f in kept_facts for e in (f[0].lower(), f[2].lower())}:
        e = entities.index(e_name)
        n_passages = sum(any(e_name in (s.lower(), o.lower()) for s, _, o in store.triples[p.item_id])
                         for p in passages)
        weights = [score_of[f] / n_passages for f in kept_facts for part in (f[0], f[2]) if part.lower() == e_name]
        phrase[e] = float(np.mean(weights))
    dense = wm.min_max(enc.encode([p.text for p in passages]) @ q) * config["episodic"]["passage_node_weight"]
    reset = np.concatenate([phrase, dense])
    scores = networkx.pagerank(simple, alpha=config["episodic"]["damping"], personalization=dict(enumerate(reset)),
                               dangling=dict(enumerate(reset)), weight="weight", tol=1e-14, max_iter=10000)
    order = sorted(range(len(passages)), key=lambda n: -scores[len(entities) + n])
    return [passages[n].item_id for n in order]


def asker(rules: list[dict], folder: Path):
    backend = ScriptedBackend(_scripted(folder, "retriever", rules))
    sent = []

    def ask(request, role=None):
        assert role == "retriever"  # W8/W9 run on the retriever role's model, as the release runs them
        sent.append(request)
        return backend.complete(request)
    return ask, sent


def test_episodic_ppr_matches_the_reference_and_the_w8_filter_decides_the_seeds(tmp_path, bag_of_words):
    config = {**bag_of_words, "episodic": {**bag_of_words["episodic"], "granularities": ["10sec"]}}
    store = hand_made_store(tmp_path / "store", config)
    query = "red mug hot water"
    index = store.index("10sec", None)
    # The filter keeps only the fact about pouring water into the red mug.
    ask, sent = asker([{"match": "Fact filtering", "text": json.dumps({"fact": [["WATER", "into", "red mug"]]})}],
                      tmp_path)
    notes: list[str] = []
    got = index.retrieve(query, store.encoder.encode([query])[0], 5, config["episodic"],
                         lambda q, f: store.filter_facts(q, f, SearchContext(ask=ask, notes=notes)), notes, "10sec")
    assert [p.item_id for p, _ in got] == reference_hipporag(store, query, [("water", "into", "red mug")], config)
    assert got[0][0].text == "I pour hot water into the red mug."
    assert notes == ["10sec: PPR over 1 fact(s)"]
    synonyms = [(index.entities[u], index.entities[v]) for u, v, w in index.edges
                if max(u, v) < len(index.entities) and w < 1]
    assert sorted(synonyms) == [("red mug", "the red mug"), ("the red mug", "red mug")]
    # The filter saw the top link_top_k = 5 facts by cosine, as JSON.
    assert len(json.loads(re.search(r"Candidate facts:\n(.*)", sent[0].messages[0].plain_text(), re.S).group(1))
               ["fact"]) == 5
    # No fact kept → dense passages.
    ask, _ = asker([{"match": "Fact filtering", "text": '{"fact": []}'}], tmp_path)
    notes = []
    dense = index.retrieve(query, store.encoder.encode([query])[0], 5, config["episodic"],
                           lambda q, f: store.filter_facts(q, f, SearchContext(ask=ask, notes=notes)), notes, "10sec")
    # HippoRAG's dense passage retrieval ranks by query·passage cosine. Bag of words (no two of these words share
    # a bin): "red mug hot water" (|q| = 2) shares red+mug with 0-10 (|p| = √11: "the" twice) → 2/(2√11) = 0.30,
    # water with 10-20 (√6) → 1/(2√6) = 0.20, hot+water+red+mug with 20-30 (√8) → 4/(2√8) = 0.71, nothing
    # with 30-40 and 40-50 (0, tied: kept in passage order); then min-max scaled.
    assert [p.item_id for p, _ in dense] == ["10sec@20-30", "10sec@0-10", "10sec@10-20", "10sec@30-40", "10sec@40-50"]
    assert [s for _, s in dense] == pytest.approx([1.0, (2 / (2 * 11 ** 0.5)) / (4 / (2 * 8 ** 0.5)),
                                                   (1 / (2 * 6 ** 0.5)) / (4 / (2 * 8 ** 0.5)), 0.0, 0.0], abs=1e-6)
    assert notes == ["10sec: dense passages (no fact kept)"]


def test_episodic_search_pools_granularities_ranks_by_w9_and_drops_seen_texts(tmp_path, bag_of_words):
    store = hand_made_store(tmp_path / "store", bag_of_words)
    # Pool: 10sec 5 + 30sec 2 + 3min 1 = 8 > 2k = 6 → W9 ranks; it names two ids (one unknown) → the rest by score.
    ask, sent = asker([{"match": "Fact filtering", "text": '{"fact": [["I", "fill", "kettle"]]}'},
                       {"match": "Caption ranking", "text": '["3min@0-180", "nonsense", "10sec@30-40"]'}], tmp_path)
    context = SearchContext(ask=ask)
    found = store.search("kettle water", 3, memory_type="episodic", context=context)
    assert [i.item_id for i in found][:2] == ["3min@0-180", "10sec@30-40"]
    # The shortfall is filled by score: the best-scored pool entry the ranking did not name. The 30-s and 3-min
    # captions have no triples, so their levels take HippoRAG's dense path, and neither 30-s caption shares a
    # word with "kettle water": min-max of equal scores is all ones, so both score 1.0, above every 10-s PPR
    # probability (< 1); the tie keeps pool order (levels as configured, then rank): 30sec@0-30.
    assert len(found) == 3 and found[2].item_id == "30sec@0-30"
    rank_prompt = [r for r in sent if r.purpose == "worldmm:rank"][0].messages[0].plain_text()
    listed = json.loads(re.search(r"time span\):\n(.*)\n\nChoose", rank_prompt, re.S).group(1))
    assert len(listed) == 8 and {"id", "granularity", "start_time", "end_time", "text"} <= set(listed[0])
    assert "Choose up to 6 caption ids" in rank_prompt
    # Retrieved before (by id, or another item with the same text) → not returned again.
    again = store.search("kettle water", 3, exclude=[i.item_id for i in found], memory_type="episodic",
                         context=SearchContext(ask=ask))
    assert not {i.item_id for i in again} & {i.item_id for i in found}
    assert store.render(found[:1]) == "[DAY1 00:00:00 - DAY1 00:03:00]\nA quiet morning at home."
    # Without ask: W8 keeps the top facts, W9 ranks by score; both noted.
    context = SearchContext()
    store.search("kettle water", 3, context=context)
    assert any("W8 fact filter skipped" in n for n in context.notes)
    assert any("W9 ranking skipped" in n for n in context.notes)


def test_query_time_hides_later_memories(tmp_path, bag_of_words):
    store = hand_made_store(tmp_path / "store", bag_of_words)
    context = SearchContext(query_time_s=25)
    found = store.search("water red mug", 3, context=context)
    assert found and all(i.end_s <= 25 for i in found)
    assert store.snapshot(25) is None and store.snapshot(40)[0] == 30.0 and store.snapshot(None)[0] == 50.0


def test_semantic_retrieval_ranks_triples_by_entity_ppr_against_the_reference(tmp_path, bag_of_words):
    store = hand_made_store(tmp_path / "store", bag_of_words)
    query = "what does the cat like"
    k = 2  # 2k = 4 seeds: every triple of the snapshot
    found = store.search(query, k, memory_type="semantic", context=SearchContext())
    triples = [("I", "drink", "tea"), ("red mug", "belongs to", "I"), ("cat", "likes", "sofa"),
               ("kettle", "is in", "kitchen")]
    # W-R3 by hand: all 7 entities seed a uniform reset (1/7 each), damping 0.85. The two 2-node components
    # (cat–sofa, kettle–kitchen) keep 1/7 a node. On the path tea–I–red mug, with x = PPR(I), y = PPR(tea) =
    # PPR(red mug): y = 0.15/7 + 0.85·x/2 and x = 0.15/7 + 0.85·2y, so x = 0.15·2.7/(7·0.2775) = 0.208494 and
    # y = 0.110039. A triple scores PPR(subject) + PPR(object): the two triples on I x + y = 0.318533 (tied, so
    # in the snapshot's order), the other two 2/7 = 0.285714.
    expected = [("I", "drink", "tea"), ("red mug", "belongs to", "I")]
    assert [i.text for i in found] == [wm.triple_text(t) for t in expected]
    ranked = semantic_ranking(triples, store.encoder.encode([" ".join(t) for t in triples]),
                              store.encoder.encode([query])[0], 4, 0.85)
    assert [t for t, _ in ranked][:2] == expected
    assert [score for _, score in ranked] == pytest.approx([0.318533, 0.318533, 2 / 7, 2 / 7], abs=1e-6)
    assert all(i.kind == "semantic" and not i.anchored for i in found)
    assert store.render(found) == "\n".join(wm.triple_text(t) for t in expected)  # one a line, as the release
    # Seen triples are dropped; an earlier query time reads the earlier snapshot.
    rest = store.search(query, k, exclude=[i.item_id for i in found], memory_type="semantic")
    assert not {i.item_id for i in rest} & {i.item_id for i in found}
    early = store.search(query, 3, memory_type="semantic", context=SearchContext(query_time_s=40))
    assert [i.text for i in early] == ["(I, drink, tea)"]


def test_semantic_seeds_are_the_nearest_triples(tmp_path, bag_of_words):
    # Two components: seeds only in the cat/sofa one put every walk there.
    triples = [("cat", "likes", "sofa"), ("sofa", "in", "living room"), ("kettle", "in", "kitchen"),
               ("kitchen", "has", "stove")]
    enc = BagOfWords()
    ranked = semantic_ranking(triples, enc.encode([" ".join(t) for t in triples]), enc.encode(["cat sofa"])[0],
                                 1, 0.85)
    assert ranked[0][0] in triples[:2]


def test_visual_memory_is_skipped_without_an_embedder(tmp_path, bag_of_words):
    """Reviewer finding 7: without an embedder the 10-s clips are still visual items, so a time-range query is
    served (the release's range path reads frames only); a text query returns nothing and says why."""
    store = hand_made_store(tmp_path / "store", bag_of_words)
    context = SearchContext()
    clips = store.search("DAY1 00:00:05 - DAY1 00:00:15", 3, memory_type="visual", context=context)
    assert [(c.item_id, c.start_s, c.end_s) for c in clips] == [("visual@0-10", 5, 10), ("visual@10-20", 10, 15)]
    assert context.notes == ["visual: time range DAY1 00:00:05 - DAY1 00:00:15 → 2 clip(s)"]
    context = SearchContext()
    assert store.search("the red mug", 3, memory_type="visual", context=context) == []
    assert "text→clip search unavailable" in context.notes[0] and "no embedder" in context.notes[0]
    assert store.summary()["visual"].startswith("time ranges only")
    with pytest.raises(ValueError, match="memory_type 'audio' is not one of"):
        store.search("x", 3, memory_type="audio")


# --------------------------------------------------------------------------------------------- import
VID = "wm_release"


def write_release(root: Path, captions_10s=None) -> Path:
    """A small release in WorldMM's layout (W-F1…F4)."""
    base = captions_10s or [("00000000", "00001000", "I pick up the red mug."),
                            ("00001000", "00002000", "I fill the kettle."),
                            ("00002000", "00003000", "I pour water into the mug.")]
    folder = root / "caption" / VID
    folder.mkdir(parents=True)
    entries = [{"start_time": s, "end_time": e, "text": t, "date": "DAY1", "video_path": "v.mp4"} for s, e, t in base]
    (folder / "10sec.json").write_text(json.dumps(entries))
    (folder / "30sec.json").write_text(json.dumps([{"start_time": "00000000", "end_time": "00003000",
                                                    "text": "I make tea.", "date": "DAY1"}]))
    (folder / "3min.json").write_text(json.dumps([{"start_time": "00000000", "end_time": "00030000",
                                                   "text": "Tea time.", "date": "DAY1"}]))
    (folder / "10min.json").write_text(json.dumps([{"start_time": "00000000", "end_time": "00100000",
                                                    "text": "A morning.", "date": "DAY1"}]))
    openie = {"ner_results": {chunk_key(t): ["I", "red mug"] for _, _, t in base},
              "triple_results": {chunk_key(t): [["I", "handle", t.split()[-1].strip(".")], ["bad"]]
                                 for _, _, t in base}}
    (root / "episodic_memory" / VID).mkdir(parents=True)
    (root / "episodic_memory" / VID / "openie_results_gpt-5-mini.json").write_text(json.dumps(openie))
    semantic = {"100002000": {"consolidated_semantic_triples": [["I", "like", "tea"]]},
                "100003000": {"consolidated_semantic_triples": [["I", "like", "tea"], ["kettle", "in", "kitchen"]]}}
    (root / "semantic_memory" / VID).mkdir(parents=True)
    (root / "semantic_memory" / VID / "semantic_consolidation_results_gpt-5-mini.json").write_text(json.dumps(semantic))
    (root / "visual_memory" / VID).mkdir(parents=True)
    vectors = {s: np.eye(4, dtype=np.float32)[n] for n, (s, _, _) in enumerate(base)}
    with (root / "visual_memory" / VID / "visual_embeddings.pkl").open("wb") as handle:
        pickle.dump(vectors, handle)
    return root


class _Video:
    video_id = VID
    duration_s = 30.0


def import_request(tmp_path, config):
    return BuildRequest(video=_Video(), system="worldmm", system_config=config, memory_config={},
                        out_dir=tmp_path / "store")


def test_import_of_a_release_folder(tmp_path, bag_of_words):
    root = write_release(tmp_path / "release")
    request = import_request(tmp_path, bag_of_words)
    WorldMMStore.import_release(root, request)
    store = WorldMMStore.open(request.out_dir, bag_of_words, _Video())
    assert [(i.start_s, i.end_s, i.text) for i in store.items("10sec") if i.kind == "episodic"] == [
        (0, 10, "I pick up the red mug."), (10, 20, "I fill the kettle."), (20, 30, "I pour water into the mug.")]
    assert [(i.start_s, i.end_s) for i in store.items("3min")] == [(0, 180)]
    assert store.triples["10sec@0-10"] == [("I", "handle", "mug")]  # the malformed triple dropped
    assert store.snapshots == [(20.0, [("I", "like", "tea")]), (30.0, [("I", "like", "tea"), ("kettle", "in", "kitchen")])]
    record = yaml.safe_load((request.out_dir / "config.yaml").read_text())
    assert record["counts"]["unindexed_captions"] == 3 and record["visual"] == "on"
    # Visual by time range: the overlapping clips, cut to the overlap, in absolute seconds (W-R5 fixed) …
    context = SearchContext()
    clips = store.search("DAY1 00:00:15 - DAY1 00:00:25", 3, memory_type="visual", context=context)
    assert [(c.start_s, c.end_s) for c in clips] == [(15, 20), (20, 25)]
    assert store.render(clips) == ""
    # … or offsets from each clip's start, as the released code reads a whole video (replicated on request).
    replicate = {**bag_of_words, "visual": {**bag_of_words["visual"], "range_offsets": "clip_relative"}}
    store = WorldMMStore.open(request.out_dir, replicate, _Video())
    clips = store.search("DAY1 00:00:15 - DAY1 00:00:25", 3, memory_type="visual")
    assert [(c.start_s, c.end_s) for c in clips] == [(5, 10), (0, 5)]


def test_an_import_indexes_the_levels_without_openie_with_the_retriever_model(tmp_path, bag_of_words):
    root = write_release(tmp_path / "release")
    llm = _scripted(tmp_path, "llm", BUILD_RULES)
    request = BuildRequest(video=_Video(), system="worldmm", system_config=bag_of_words, memory_config={},
                           out_dir=tmp_path / "store", models={"retriever": ("scripted_llm", llm)},
                           response_cache=tmp_path / "responses.sqlite")
    WorldMMStore.import_release(root, request)
    store = WorldMMStore.open(request.out_dir, bag_of_words, _Video())
    for level in ("30sec", "3min", "10min"):
        assert store.triples[store.items(level)[0].item_id] == [("I", "hold", "red mug")]
    assert store.triples["10sec@0-10"] == [("I", "handle", "mug")]  # the release's own OpenIE is kept
    record = yaml.safe_load((request.out_dir / "config.yaml").read_text())
    assert record["models"] == {"retriever": "scripted_llm"} and "unindexed_captions" not in record["counts"]
    assert {c["purpose"] for c in _calls(llm)} == {"worldmm:ner", "worldmm:triples"}


def test_a_pickle_that_would_run_code_is_refused(tmp_path, bag_of_words):
    root = write_release(tmp_path / "release")

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with (root / "visual_memory" / VID / "visual_embeddings.pkl").open("wb") as handle:
        pickle.dump({"00000000": Evil()}, handle)
    with pytest.raises(ValueError, match=r"visual_embeddings.pkl: not readable without executing foreign code .*builtins.print"):
        WorldMMStore.import_release(root, import_request(tmp_path, bag_of_words))


@pytest.mark.parametrize("damage, message", [
    (lambda r: (r / "caption" / VID / "30sec.json").write_text('[{"start_time": "00000000", "end_time": "00003000"}]'),
     r"30sec.json: entry 0: field 'text' is missing"),
    (lambda r: (r / "caption" / VID / "10sec.json").write_text('[{"start_time": "0:00:10", "end_time": "00002000", '
                                                                '"text": "x"}]'),
     r"10sec.json: entry 0 field 'start_time': '0:00:10' is not an HHMMSSFF"),
    (lambda r: (r / "caption" / VID / "3min.json").unlink(), r"3min.json: missing"),
    (lambda r: (r / "episodic_memory" / VID / "openie_results_gpt-5-mini.json").write_text('{"ner_results": {}}'),
     r"openie_results_gpt-5-mini.json: field 'triple_results' is missing"),
    (lambda r: (r / "episodic_memory" / VID / "openie_results_gpt-5-mini.json").write_text(
        '{"ner_results": {}, "triple_results": {}}'), r"field 'triple_results' has no entry chunk-"),
    (lambda r: (r / "semantic_memory" / VID / "semantic_consolidation_results_gpt-5-mini.json").write_text(
        '{"100002000": {"triples": []}}'), r"key '100002000': field 'consolidated_semantic_triples' is missing"),
    (lambda r: (r / "semantic_memory" / VID / "semantic_consolidation_results_gpt-5-mini.json").write_text(
        '{"noon": {"consolidated_semantic_triples": []}}'), r"key 'noon' is not a TS9"),
    (lambda r: (r / "semantic_memory" / VID / "semantic_consolidation_results_gpt-5-mini.json").unlink(),
     r"semantic_consolidation_results_\{model\}.json: missing"),
])
def test_bad_or_partial_imports_name_the_file_and_field(tmp_path, bag_of_words, damage, message):
    root = write_release(tmp_path / "release")
    damage(root)
    with pytest.raises(ValueError, match=message):
        WorldMMStore.import_release(root, import_request(tmp_path, bag_of_words))
    assert not (tmp_path / "store" / "items.parquet").exists()


def test_a_visual_key_without_a_caption_is_an_error(tmp_path, bag_of_words):
    root = write_release(tmp_path / "release")
    with (root / "visual_memory" / VID / "visual_embeddings.pkl").open("wb") as handle:
        pickle.dump({"00000500": np.ones(4, dtype=np.float32)}, handle)
    with pytest.raises(ValueError, match=r"visual_embeddings.pkl: key '00000500': no 10sec caption starts"):
        WorldMMStore.import_release(root, import_request(tmp_path, bag_of_words))


def test_export_writes_the_caption_layout_and_reads_back(tmp_path):
    rows = [MemoryRow(video_id=VID, level=level, start_s=s, end_s=e, fps=1.0, n_frames=10, instruction_hash="h",
                      text=text, captioner="perception", created_at="now", heading_change_deg=None,
                      place_labels=None, error=None)
            for level, s, e, text in [("fine", 0.0, 10.0, "I open the door."), ("fine", 10.0, 19.5, "I walk in."),
                                      ("coarse", 0.0, 19.5, "Arrival.")]]
    table = tmp_path / "captions.parquet"
    write_table(to_frame(rows, MemoryRow), table, MemoryRow)
    written = WorldMMStore.export_inputs(table, _Video(), tmp_path / "out", CONFIG)
    assert written == [tmp_path / "out" / "caption" / VID / "10sec.json"]
    data = json.loads(written[0].read_text())
    assert data[1] == {"start_time": "00001000", "end_time": "00002000", "text": "I walk in.", "date": "DAY1",
                       "video_path": ""}
    back = read_caption_file(written[0], "10sec")
    assert [(i.start_s, i.end_s, i.text) for i in back] == [(0, 10, "I open the door."), (10, 20, "I walk in.")]


# ---------------------------------------------------------------------------------- image-text embedder
def test_visual_memory_with_a_tiny_random_clip(tmp_path, clip, bag_of_words, tiny_clip):
    from senri.memory.clip_embedding import embed_clips, open_query_encoder

    video, info = clip
    media = VideoMedia(info.video_id, video, info.fingerprint, info.duration_s)
    spans = [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0), (30.0, 40.0)]
    vectors = embed_clips(tiny_clip, media.video, spans, 3, tiny_clip["short_side"])
    assert vectors.shape == (4, 8) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    visual = {"start_s": np.array([s for s, _ in spans]), "end_s": np.array([e for _, e in spans]),
              "vectors": vectors, "embedder": "tiny_clip", "model_config": tiny_clip}
    store = hand_made_store(tmp_path / "store", bag_of_words, visual=visual)
    query = "a red mug"
    found = store.search(query, 3, memory_type="visual", context=SearchContext())
    q = open_query_encoder(tiny_clip)([query])[0]
    expected = np.argsort(-(vectors @ q), kind="stable")[:3]
    assert [(i.start_s, i.end_s) for i in found] == [spans[int(n)] for n in expected]
    assert all(i.kind == "visual" and i.anchored for i in found)
    # Visual items are candidates described by their 10sec caption.
    assert [i.description for i in store.items() if i.kind == "visual"] == [t for _, t, _ in PASSAGES[:4]]
    record = yaml.safe_load((tmp_path / "store" / "config.yaml").read_text())
    assert record["visual"] == "on" and record["embedder_model"]["name"] == "tiny_clip"


def test_the_embedder_kind_chooses_the_clip_embedder(tiny_clip):
    """One entry point for both memory systems: the model config's ``kind`` picks the embedder; a missing or
    unknown kind is an error naming the field, never a silent default."""
    from senri.memory.clip_embedding import DualEncoder, open_clip_embedder

    assert isinstance(open_clip_embedder(tiny_clip), DualEncoder)
    for kind in (None, "clip"):
        with pytest.raises(ValueError, match=r"field 'kind': .*image_text, vlm_embedding"):
            open_clip_embedder({**tiny_clip, "kind": kind})


def test_a_build_with_an_embedder_embeds_every_10_s_clip(tmp_path, clip, bag_of_words, tiny_clip):
    llm = _scripted(tmp_path, "llm", BUILD_RULES)
    config = {**bag_of_words, "visual": {**bag_of_words["visual"], "nframes": 2}}
    request, _ = build_request(tmp_path, clip, config, {
        "summariser": ("scripted_llm", llm), "extractor": ("scripted_llm", llm), "embedder": ("tiny_clip", tiny_clip)})
    WorldMMStore.build(request)
    store = WorldMMStore.open(request.out_dir, config, request.video)
    assert store.visual["vectors"].shape == (12, 8)
    clips = store.search("DAY1 00:01:55 - DAY1 00:02:10", 3, memory_type="visual")
    assert [(c.start_s, c.end_s) for c in clips] == [(115, 120)]  # the overlap, inside the video
    assert len(store.search("a mug", 3, memory_type="visual")) == 3


# ------------------------------------------------------------------------------------ original workflow
from senri.answer import MemoryInputs, answer_video  # noqa: E402
from senri.methods.worldmm import parse_decision, query_block  # noqa: E402
from senri.records import Question  # noqa: E402

QUESTION = Question(video_id="wm", qid="q1", task_type="OC", direction="ES", question="What did I pour into the mug?",
                    option_a="milk", option_b="hot water", option_c="juice", option_d="nothing", answer="B")
METHOD = yaml.safe_load((REPO / "config/method/worldmm.yaml").read_text())


def test_decisions_are_read_as_the_released_parser_reads_them():
    types = ("episodic", "semantic", "visual")
    assert parse_decision('{"decision": "search", "selected_memory": {"memory_type": "Semantic", '
                          '"search_query": "tea"}}', types) == {"decision": "search", "memory_type": "semantic",
                                                               "search_query": "tea"}
    assert parse_decision("no json here", types) == {"decision": "answer", "parsed": False}
    assert parse_decision('{"reason": "enough"}', types) == {"decision": "answer", "parsed": False}
    assert parse_decision('{"decision": "search"}', types)["error"] == "search decision without selected_memory"
    assert "unknown memory type 'audio'" in parse_decision(
        '{"decision": "search", "selected_memory": {"memory_type": "audio", "search_query": "x"}}', types)["error"]
    assert query_block(QUESTION) == ("Query: What did I pour into the mug?\n"
                                     "Choices: (A) milk (B) hot water (C) juice (D) nothing")


def _search(memory_type, query):
    return json.dumps({"decision": "search", "selected_memory": {"memory_type": memory_type, "search_query": query}})


WORKFLOW_RULES = [
    {"match": "Fact filtering", "text": '{"fact": [["water", "into", "red mug"]]}'},
    {"match": "Caption ranking", "text": '["10sec@20-30", "30sec@0-30"]'},
    {"match": "Give only the letter", "text": "B"},
    {"match": "Memory: visual", "text": '{"decision": "answer"}'},
    {"match": "Memory: semantic", "text": _search("visual", "DAY1 00:00:05 - DAY1 00:00:12")},
    {"match": "Memory: episodic", "text": _search("semantic", "red mug")},
    {"match": "Round history:\n[]", "text": _search("episodic", "hot water red mug")},
]


def run_workflow(tmp_path, clip, config, rules, model=None, **method):
    video, info = clip
    script = _scripted(tmp_path, "agent", rules)
    stage = {"seed": 0, "method": {"name": "worldmm", **METHOD, **method},
             "model": {"name": "agent", **script, **(model or {})},
             "memory": {"memory": {"captioner": "perception"}},
             "memory_system": {"name": "worldmm", **config}}
    table = tmp_path / "captions.parquet"
    write_table(to_frame([], MemoryRow), table, MemoryRow)
    inputs = MemoryInputs(table, video, None, None, None, tmp_path / "captions", tmp_path / "store")
    row = answer_video(to_frame([QUESTION], Question), info, stage, memory=inputs).row(0, named=True)
    return row, _calls(script)


def test_the_workflow_searches_each_memory_type_then_answers_from_texts_and_frames(tmp_path, clip, bag_of_words):
    visual = {"start_s": np.arange(0, 50, 10.0), "end_s": np.arange(10, 60, 10.0),
              "vectors": np.eye(5, dtype=np.float32), "embedder": "release", "model_config": None}
    hand_made_store(tmp_path / "store", bag_of_words, visual=visual)
    row, calls = run_workflow(tmp_path, clip, bag_of_words, WORKFLOW_RULES)
    trace = json.loads(row["trace"])
    assert row["pred"] == "B" and row["correct"] and row["error"] is None
    assert trace["actions"] == ["search", "search", "search", "answer"]
    assert [r.get("memory_type") for r in trace["rounds"][:3]] == ["episodic", "semantic", "visual"]
    assert trace["rounds"][2]["images"] == 9  # 1 fps over 5–10 s and 10–12 s, both ends included (6 + 3)
    controller = [c for c in calls if c["purpose"] == "control"]
    assert len(controller) == 4
    assert all(not any(isinstance(p, dict) for m in c["payload"]["messages"] for p in m["content"]) for c in controller)
    last = _prompt_text(controller[-1])
    assert "### Round 3\nDecision: search\nMemory: visual\nSearch Query: DAY1 00:00:05 - DAY1 00:00:12\n" \
           "Retrieved:\n[9 images from 1 clips]" in last  # a range's frames are one "clip", as in the release
    assert "Memory: episodic\nSearch Query: hot water red mug\nRetrieved:\n[DAY1 00:00:20 - DAY1 00:00:30]\n" \
           "I pour hot water into the red mug." in last
    qa = [c for c in calls if c["purpose"] == "answer"][0]
    user = qa["payload"]["messages"][1]["content"]
    assert sum(isinstance(p, dict) and "image" in p for p in user) == 9
    text = "".join(p for p in user if isinstance(p, str))
    assert text.startswith(query_block(QUESTION) + "\n\nContext:\n[DAY1 00:00:20 - DAY1 00:00:30]")
    qa_final = PROMPTS["qa_final"].render(letters="A, B, C or D")  # a four-option question's letters
    assert "(red mug, belongs to, I)" in text and text.rstrip().endswith(qa_final)
    assert qa["payload"]["messages"][0]["content"] == [PROMPTS["qa_system"].text.strip()]
    for role in ("controller_system", "controller"):
        for line in PROMPTS[role].text.splitlines():
            fixed = [part for part in re.split(r"\$\{?\w+\}?", line) if part.strip()]
            assert all(part.strip() in _prompt_text(controller[0]) for part in fixed), (role, line)
    # The store's W8 and W9 calls went through the method's backend and are booked on the question.
    assert {c["purpose"] for c in calls} == {"control", "answer", "worldmm:fact_filter", "worldmm:rank"}
    assert row["n_llm_calls"] + row["n_vlm_calls"] == len(calls) and row["n_vlm_calls"] == 1


def test_failed_calls_and_bad_searches_are_errors_that_end_the_loop(tmp_path, clip, bag_of_words):
    hand_made_store(tmp_path / "store", bag_of_words)
    rules = [{"match": "Give only the letter", "text": "The answer is D."},
             {"match": "Round history", "text": _search("audio", "x")}]
    row, calls = run_workflow(tmp_path, clip, bag_of_words, rules, max_errors=3)
    trace = json.loads(row["trace"])
    assert trace["actions"] == ["error"] * 3 and trace["errors"] == 3 and row["pred"] == "D"
    assert "unknown memory type 'audio'" in trace["rounds"][0]["error"]
    # An unreadable reply is an answer decision: one controller call, then the QA call.
    (tmp_path / "b").mkdir()
    hand_made_store(tmp_path / "b" / "store", bag_of_words)
    rules = [{"match": "Give only the letter", "text": "A"}, {"match": "Round history", "text": "hmm"}]
    row, calls = run_workflow(tmp_path / "b", clip, bag_of_words, rules)
    assert json.loads(row["trace"])["actions"] == ["answer"] and [c["purpose"] for c in calls] == ["control", "answer"]
    # Failed controller calls: five errors end the loop (the default max_errors), the QA call still runs.
    (tmp_path / "c").mkdir()
    hand_made_store(tmp_path / "c" / "store", bag_of_words)
    rules = [{"match": "Give only the letter", "text": "C"}, {"match": "Round history", "error": "server down"}]
    row, calls = run_workflow(tmp_path / "c", clip, bag_of_words, rules)
    trace = json.loads(row["trace"])
    assert trace["actions"] == ["error"] * 5 and row["pred"] == "C" and "server down" in row["error"]


def test_a_seed_entity_of_weight_0_loses_the_question_as_hipporag_s_assertion_does(tmp_path, clip, bag_of_words):
    """W8 keeps only the lowest candidate (min-max score 0): both its entities have weight 0, HippoRAG's
    ``get_top_k_weights`` asserts and the release's evaluation answers "Error" — the question is lost, no QA
    call, the round recorded ``search_raised`` (``zero_weight_entities: release``)."""
    # every fact a candidate (the lowest of a level's facts scores 0; with more than link_top_k facts it is
    # shown to W8 only in a level of at most link_top_k facts)
    config = {**bag_of_words, "episodic": {**(bag_of_words.get("episodic") or {}), "link_top_k": 50}}
    store = hand_made_store(tmp_path / "store", config)
    query = "hot water red mug"
    candidates = store.index("10sec", None).candidate_facts(store.vectors.encoder.encode([query])[0], 50)
    lowest = min(candidates, key=lambda c: c[1])
    assert lowest[1] == 0.0 and len(candidates) > 1
    rules = [{"match": "Fact filtering", "text": json.dumps({"fact": [list(lowest[0])]})},
             {"match": "Give only the letter", "text": "B"},
             {"match": "Round history", "text": _search("episodic", query)}]
    row, calls = run_workflow(tmp_path, clip, config, rules)
    trace = json.loads(row["trace"])
    assert row["pred"] is None and not row["correct"] and "the release loses the question" in row["error"]
    assert trace["actions"] == ["search_raised"] and "weight 0" in trace["rounds"][0]["error"]
    assert [c["purpose"] for c in calls if c["purpose"] == "answer"] == []


def test_memory_search_and_its_agents_read_the_worldmm_store_through_the_interface(tmp_path, clip, bag_of_words):
    """``memory_search@worldmm``: the search names a memory type, the store renders its items WorldMM's way and
    its anchored items are the visual candidates; W8/W9 go through the method's backend."""
    hand_made_store(tmp_path / "store", bag_of_words)
    rules = [{"match": "Fact filtering", "text": '{"fact": [["water", "into", "red mug"]]}'},
             {"match": "Caption ranking", "text": '["10sec@20-30"]'},
             {"match": "I pour hot water into the red mug.", "text": json.dumps(
                 {"action": "answer", "rationale": "seen", "answer": "B"})},
             {"match": "search, answer", "text": json.dumps(
                 {"action": "search", "rationale": "x", "query": "hot water red mug", "memory_type": "episodic"})}]
    method = {"implementation": "memory_search", "approach": "persistent_memory", "uses_model": True,
              "uses_memory": True, "max_rounds": 5, "top_k": 3, "json_retries": 1, "prompts": "memory_search"}
    video, info = clip
    script = _scripted(tmp_path, "agent", rules)
    stage = {"seed": 0, "method": {"name": "memory_search", **method}, "model": {"name": "agent", **script},
             "memory": {"memory": {"captioner": "perception"}}, "memory_system": {"name": "worldmm", **bag_of_words}}
    table = tmp_path / "captions.parquet"
    write_table(to_frame([], MemoryRow), table, MemoryRow)
    inputs = MemoryInputs(table, video, None, None, None, tmp_path / "captions", tmp_path / "store")
    row = answer_video(to_frame([QUESTION], Question), info, stage, memory=inputs).row(0, named=True)
    calls = _calls(script)
    trace = json.loads(row["trace"])
    assert row["pred"] == "B" and trace["actions"] == ["search", "answer"]
    assert trace["rounds"][0]["memory_type"] == "episodic" and trace["retriever"] == "hipporag_ppr"
    second = _prompt_text([c for c in calls if c["purpose"].startswith("control")][-1])
    assert "[DAY1 00:00:20 - DAY1 00:00:30]\nI pour hot water into the red mug." in second
    assert "- c1 [20, 30] s, valid_absolute_sec [0, " in second
    assert {"worldmm:fact_filter", "worldmm:rank"} <= {c["purpose"] for c in calls}


def test_answer_jobs_embed_only_their_queries(tmp_path, bag_of_words):
    """The store's texts are embedded once at build time; opening and searching embeds just the query, and a
    store opened with another encoder re-embeds instead of mixing vector spaces."""
    hand_made_store(tmp_path / "store", bag_of_words)

    class Counting(BagOfWords):
        encoded: list[str] = []

        def encode(self, texts):
            Counting.encoded += list(texts)
            return super().encode(texts)

    store = WorldMMStore(tmp_path / "store", bag_of_words, None, encoder=Counting())
    store.search("kettle water", 3, memory_type="semantic")
    store.search("kettle water", 3, memory_type="episodic")
    assert Counting.encoded == ["kettle water", "kettle water"]

    class Other(Counting):
        name = "another-encoder"

    Counting.encoded = []
    WorldMMStore(tmp_path / "store", bag_of_words, None, encoder=Other()).search("kettle", 3, memory_type="semantic")
    assert len(Counting.encoded) > 1  # the snapshot's triples embedded again with the other encoder
    # A vector file of another layout (an older store) is re-embedded, not misread.
    np.savez(tmp_path / "store" / "text_vectors.npz", texts=np.array(["x"]), vectors=np.ones((1, 3)))
    Counting.encoded = []
    WorldMMStore(tmp_path / "store", bag_of_words, None, encoder=Counting()).search("kettle", 3, memory_type="semantic")
    assert len(Counting.encoded) > 1


# ------------------------------------------------------------------- issue 34: the original workflow as released
from senri.backends.base import ChatResponse, estimate_text_tokens  # noqa: E402
from senri.memory.worldmm.build import MAX_RESENDS, BuilderLLM, openie  # noqa: E402
from senri.memory.worldmm.common import FILTER_SKIP_NOTE, hipporag_text  # noqa: E402
from senri.memory.worldmm.index import read_filter_reply  # noqa: E402
from senri.methods.base import CallTally  # noqa: E402
from senri.methods.worldmm import LEFT_OUT  # noqa: E402

FINE = {"granularities": ["10sec"]}


def _only(config: dict, **episodic) -> dict:
    return {**config, "episodic": {**config["episodic"], **episodic}}


def test_a_visual_retrieval_does_not_hide_that_clip_s_episodic_caption(tmp_path, bag_of_words):
    """Issue 34 item 2: visual clips carry their 10-s caption as text, but showed the model frames only; the
    release keeps them apart by their time-range label, so an episodic search still finds those captions. A
    caption an episodic search returned before is still dropped, by id or by text."""
    visual = {"start_s": np.arange(0, 50, 10.0), "end_s": np.arange(10, 60, 10.0),
              "vectors": np.eye(5, dtype=np.float32), "embedder": "release", "model_config": None}
    config = _only(bag_of_words, **FINE)
    store = hand_made_store(tmp_path / "store", config, visual=visual)
    clips = store.search("DAY1 00:00:20 - DAY1 00:00:30", 3, memory_type="visual")
    assert [c.item_id for c in clips] == ["visual@10-20", "visual@20-30", "visual@30-40"]
    assert clips[1].text == "I pour hot water into the red mug."
    ask, _ = asker([{"match": "Fact filtering", "text": '{"fact": [["water", "into", "red mug"]]}'}], tmp_path)
    found = store.search("hot water red mug", 3, exclude=[c.item_id for c in clips], memory_type="episodic",
                         context=SearchContext(ask=ask))
    assert found[0].item_id == "10sec@20-30" and found[0].text == clips[1].text
    again = store.search("hot water red mug", 3, exclude=["10sec@20-30"], memory_type="episodic",
                         context=SearchContext(ask=ask))
    assert "10sec@20-30" not in [i.item_id for i in again]


#: HippoRAG's dense passage order for "kettle water" over PASSAGES (bag of words, no two words share a bin):
#: cosine 2/(√2·√6) = 0.58 with 10-20 (kettle, water), 1/(√2·√8) = 0.25 with 20-30 (water), 0 with the rest,
#: tied, which keep passage order: 0-10 is third.
KETTLE_WATER_DENSE_TOP_3 = ["10sec@10-20", "10sec@20-30", "10sec@0-10"]


def test_an_unreadable_w8_reply_keeps_no_fact_and_counts_a_failed_search_call(tmp_path, bag_of_words):
    """Issue 34 item 3: a W8 reply that cannot be read gives no facts, so the level takes the dense-passage
    fallback (the release's filter then keeps nothing), booked ``failed_search_calls`` by the store; a failed
    call falls back the same way and is the method's ask to count. The request carries the worked examples."""
    config = _only(bag_of_words, **FINE)
    store = hand_made_store(tmp_path / "store", config)
    dense = KETTLE_WATER_DENSE_TOP_3
    for reply, counted in (({"text": "I would keep the kettle facts."}, 1),
                           ({"text": '{"fact": [["i", "fill", "kettle"], "kettle holds water"]}'}, 1),
                           ({"error": "server down"}, 0)):
        ask, sent = asker([{"match": "Fact filtering", **reply}], tmp_path)
        tally = CallTally()
        context = SearchContext(ask=ask, tally=tally)
        found = store.search("kettle water", 3, memory_type="episodic", context=context)
        assert [i.item_id for i in found] == dense
        assert "10sec: dense passages (no fact kept)" in context.notes
        assert tally.health.get("failed_search_calls", 0) == counted
        assert "Query: where did i put the scissors after wrapping the present" in sent[0].messages[0].plain_text()
    assert read_filter_reply({"fact": []}) == [] and read_filter_reply({"facts": []}) is None
    assert read_filter_reply({"fact": [["a", "b"]]}) == [["a", "b"]]  # any length: matched to the closest


def test_the_index_normalises_triples_as_hipporag_does(tmp_path, bag_of_words):
    """HippoRAG lower-cases every triple part and makes each character other than a letter, digit or space a
    space: "Red-Mug" and "red mug" are one entity, and the facts W8 sees are the normalised ones."""
    assert hipporag_text(" The Red-Mug! ") == "the red mug"
    passages = [item("10sec", 0, 10, "a"), item("10sec", 10, 20, "b")]
    index = GranularityIndex.build(passages, {passages[0].item_id: [("I", "hold", "Red-Mug")],
                                              passages[1].item_id: [("i", "wash", "red mug")]},
                                   TextVectors(BagOfWords()), 0.8)
    assert index.entities == ["i", "red mug"] and index.facts == [("i", "hold", "red mug"), ("i", "wash", "red mug")]
    assert [len(p) for p in index.entity_passages] == [2, 2]


def test_an_import_without_a_retriever_books_its_unindexed_captions_as_builder_losses(tmp_path, bag_of_words):
    """Issue 34 item 4: the coarser levels a release has no OpenIE for stay out of the graph without a retriever
    model; every question over the store books them as builder losses."""
    root = write_release(tmp_path / "release")
    request = import_request(tmp_path, bag_of_words)
    WorldMMStore.import_release(root, request)
    store = WorldMMStore.open(request.out_dir, bag_of_words, _Video())
    assert store.question_counts() == {"failed_captions": 0, "truncated_captions": 0, "builder_losses": 3}


def test_an_imported_visual_memory_answers_text_queries_with_the_configured_embedder(tmp_path, bag_of_words,
                                                                                       tiny_clip):
    """Issue 34 item 4: the release's clip vectors (a protocol-5 pickle, Python ≥ 3.14's default) answer text
    queries through the text tower of the configured embedder; an embedder of another dimension is refused
    naming the file and the role; without one only time-range queries are served, and the note says so."""
    from senri.memory.clip_embedding import open_query_encoder

    root = write_release(tmp_path / "release")
    q = open_query_encoder(tiny_clip)(["a red mug"])[0]
    # The clip at 10 s is the query's own direction (cosine 1), the clip at 20 s its opposite (cosine −1), the
    # clip at 0 s a random direction in between: by text→clip cosine the top two are 10 s, then 0 s.
    vectors = np.stack([np.random.default_rng(0).normal(size=8), 3 * q, -q]).astype(np.float32)
    starts = ["00000000", "00001000", "00002000"]
    with (root / "visual_memory" / VID / "visual_embeddings.pkl").open("wb") as handle:
        pickle.dump({s: v for s, v in zip(starts, vectors)}, handle, protocol=5)
    request = BuildRequest(video=_Video(), system="worldmm", system_config=bag_of_words, memory_config={},
                           out_dir=tmp_path / "store", models={"embedder": ("tiny_clip", tiny_clip)})
    WorldMMStore.import_release(root, request)
    store = WorldMMStore.open(request.out_dir, bag_of_words, _Video())
    context = SearchContext()
    found = store.search("a red mug", 2, memory_type="visual", context=context)
    assert [c.start_s for c in found] == [10.0, 0.0]
    assert context.notes == ["visual: text→clip similarity"]
    record = yaml.safe_load((request.out_dir / "config.yaml").read_text())
    assert record["embedder_model"]["name"] == "tiny_clip" and record["models"] == {"embedder": "tiny_clip"}
    # An embedder whose text vectors have another dimension than the release's clips.
    with (root / "visual_memory" / VID / "visual_embeddings.pkl").open("wb") as handle:
        pickle.dump({s: np.ones(4, dtype=np.float32) for s in starts}, handle, protocol=5)
    with pytest.raises(ValueError, match=r"visual_embeddings.pkl: the clip vectors have dimension 4.*models.embedder"):
        WorldMMStore.import_release(root, replace_request(request, tmp_path / "other"))
    # No embedder: the text search says why it has nothing.
    WorldMMStore.import_release(root, import_request(tmp_path / "none", bag_of_words))
    store = WorldMMStore.open(tmp_path / "none" / "store", bag_of_words, _Video())
    context = SearchContext()
    assert store.search("a red mug", 2, memory_type="visual", context=context) == []
    assert "text→clip search unavailable" in context.notes[0]


def replace_request(request: BuildRequest, out: Path) -> BuildRequest:
    from dataclasses import replace

    return replace(request, out_dir=out)


def test_captions_and_summaries_cut_at_their_token_limit_are_kept_and_counted(tmp_path, clip, bag_of_words):
    """Issue 34 item 5: a 10-s caption or a W3 summary cut at its token limit stays in the memory; the store
    counts them and every question over it books them as ``truncated_captions``."""
    rules = [{"match": "(30sec window)", "text": "I hold the red mug in the", "finish_reason": "length"}]
    llm = _scripted(tmp_path, "llm", rules + BUILD_RULES)
    request, captioner = build_request(tmp_path, clip, bag_of_words, {
        "summariser": ("scripted_llm", llm), "extractor": ("scripted_llm", llm)})
    Path(captioner["script"]).write_text(
        json.dumps({"match": "from 50", "text": "I hold a red", "finish_reason": "length"}) + "\n"
        + json.dumps({"text": "I hold a red mug."}) + "\n")
    WorldMMStore.build(request)
    counts = yaml.safe_load((request.out_dir / "config.yaml").read_text())["counts"]
    assert (counts["truncated_captions"], counts["truncated_summaries_30sec"], counts["truncated_summaries_3min"]) \
        == (1, 4, 0)
    store = WorldMMStore.open(request.out_dir, bag_of_words, request.video)
    episodic = [i for i in store.items("10sec") if i.kind == "episodic"]
    assert episodic[5].text == "I hold a red" and store.items("30sec")[0].text == "I hold the red mug in the"
    assert store.question_counts() == {"failed_captions": 0, "truncated_captions": 5, "builder_losses": 0}


def test_w8_and_w9_requests_are_sized_to_the_retriever_s_context(tmp_path, bag_of_words):
    """Issue 34 item 5: before ``ask`` sends them, W8 leaves out worked examples (the last first) and W9 cuts
    every caption text in its listing to one length, until the retriever's model holds them; each trimmed
    request counted ``context_trims`` and noted, so an overflow no longer fails the call."""
    store = hand_made_store(tmp_path / "store", bag_of_words)
    ask, sent = asker([{"match": "Fact filtering", "text": '{"fact": [["i", "fill", "kettle"]]}'},
                       {"match": "Caption ranking", "text": '["10sec@10-20"]'}], tmp_path)

    def listing(request):
        return json.loads(re.search(r"time span\):\n(.*)\n\nChoose", request.messages[0].plain_text(), re.S).group(1))

    def over(request, role):
        assert role == "retriever"
        if request.purpose == "worldmm:fact_filter":
            return "too long" if request.messages[0].plain_text().count("Query: ") > 3 else None
        return "too long" if max(len(c["text"]) for c in listing(request)) > 20 else None

    tally = CallTally()
    context = SearchContext(ask=ask, tally=tally, overflow=over)
    store.search("kettle water", 3, memory_type="episodic", context=context)
    w8 = [r for r in sent if r.purpose == "worldmm:fact_filter"]
    w9 = [r for r in sent if r.purpose == "worldmm:rank"]
    assert len(w8) == 1 and w8[0].messages[0].plain_text().count("Query: ") == 3  # two examples and the query
    texts = [c["text"] for c in listing(w9[0])]
    assert max(len(t) for t in texts) <= 22 and any(t.endswith(" …") for t in texts)
    assert tally.health == {"context_trims": 2}
    assert sum("trimmed" in note for note in context.notes) == 2


def test_the_controller_request_is_sized_so_an_overflow_spends_no_round(tmp_path, clip, bag_of_words):
    """Issue 34 item 5: a controller request past the model's context leaves out the retrieved content of its
    oldest rounds (their query stays) instead of failing the round; recorded and counted ``context_trims``."""
    visual = {"start_s": np.arange(0, 50, 10.0), "end_s": np.arange(10, 60, 10.0),
              "vectors": np.eye(5, dtype=np.float32), "embedder": "release", "model_config": None}
    hand_made_store(tmp_path / "store", bag_of_words, visual=visual)
    row, calls = run_workflow(tmp_path, clip, bag_of_words, WORKFLOW_RULES)

    def size(call):  # the scripted backend's estimate of a request: what its context limit is checked against
        messages = call["payload"]["messages"]
        return (sum(estimate_text_tokens(p) for m in messages for p in m["content"] if isinstance(p, str))
                + 8 * len(messages) + 32 + int(METHOD["max_tokens"]["controller"]))

    sizes = [size(c) for c in calls if c["purpose"] == "control"]
    assert sizes == sorted(sizes) and sizes[1] < sizes[2]
    # A context that holds the third controller request but not the fourth as it is.
    (tmp_path / "sized").mkdir()
    hand_made_store(tmp_path / "sized" / "store", bag_of_words, visual=visual)
    row, calls = run_workflow(tmp_path / "sized", clip, bag_of_words, WORKFLOW_RULES,
                              model={"context_tokens": sizes[3] - 1})
    trace = json.loads(row["trace"])
    assert trace["actions"] == ["search", "search", "search", "answer"] and trace["errors"] == 0
    assert trace["control_trims"] == [{"round": 4, "rounds_left_out": 1, "rule": "oldest round's retrieved content first"}]
    assert row["context_trims"] >= 1 and row["error"] is None
    fourth = _prompt_text([c for c in calls if c["purpose"] == "control"][3])
    assert f"Search Query: hot water red mug\nRetrieved:\n{LEFT_OUT}" in fourth
    assert "Memory: semantic\nSearch Query: red mug\nRetrieved:\n(" in fourth  # the newer rounds keep theirs


def test_the_prompts_teach_by_worked_examples_of_their_own():
    """Issue 34 item 6: as the release's W4-W8 and W10 do, each teaches by worked examples of the same kind and
    number (one for W4-W7, ten for W8's filter, four turns of one question for W10), our own first-person
    content; every example's reply is a valid reply of its role."""
    for role in ("ner", "triples", "semantic", "consolidate"):
        text = PROMPTS[role].text
        assert text.count("Worked example.") == 1, role
        reply = json.loads(re.search(r"Worked example\..*?\nReply:\n(\{.*?\})\n", text, re.S).group(1))
        assert reply, role
    ner = json.loads(re.search(r"Reply:\n(\{.*\})", PROMPTS["ner"].text).group(1))["named_entities"]
    triples = json.loads(re.search(r"Reply:\n(\{.*\})", PROMPTS["triples"].text).group(1))["triples"]
    assert all(len(t) == 3 and (t[0] in ner or t[2] in ner) for t in triples)

    blocks = [b for b in PROMPTS["fact_filter_examples"].text.strip().split("\n\n")]
    assert len(blocks) == 10
    kept_counts = []
    for block in blocks:
        query, shown, reply = block.splitlines()
        assert query.startswith("Query: ")
        candidates = json.loads(shown.removeprefix("Candidate facts: "))["fact"]
        kept = read_filter_reply(json.loads(reply.removeprefix("Reply: ")))
        assert len(candidates) == 5 and all(f in candidates for f in kept)
        assert all(hipporag_text(part) == part for f in candidates for part in f)  # HippoRAG's processed facts
        kept_counts.append(len(kept))
    assert 0 in kept_counts and 5 in kept_counts

    replies = re.findall(r"^Reply: (.*)$", PROMPTS["controller_system"].text, re.M)
    decisions = [parse_decision(r, ("episodic", "semantic", "visual")) for r in replies]
    assert [d.get("memory_type", d["decision"]) for d in decisions] == ["episodic", "visual", "semantic", "answer"]
    assert parse_time_range(decisions[1]["search_query"]) is not None


def test_a_search_without_a_memory_type_reads_the_default_memory_type(tmp_path, bag_of_words):
    """Issue 34 item 7: a search that names no memory type (SENRI-Agent's) reads ``default_memory_type``
    (episodic; the release's searches always name one), as docs/protocol.md now says in both places."""
    store = hand_made_store(tmp_path / "store", bag_of_words)
    assert {i.kind for i in store.search("kettle water", 3)} == {"episodic"}
    semantic = WorldMMStore.open(tmp_path / "store", {**bag_of_words, "default_memory_type": "semantic"}, None)
    assert {i.kind for i in semantic.search("kettle water", 3)} == {"semantic"}
    protocol = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
    assert "none searches them all" not in protocol and "a search that names none searches them all" not in protocol
    assert protocol.count("default_memory_type") >= 2


def _one_passage_level_store(folder: Path, config: dict) -> WorldMMStore:
    """The hand-made memory with triples on its single 3min caption, so that level has facts to filter."""
    episodic = [item("10sec", s, s + 10, text) for s, text, _ in PASSAGES]
    episodic += [item(level, s, e, text) for level, s, e, text in COARSE]
    triples = {item("10sec", s, s + 10, text).item_id: ts for s, text, ts in PASSAGES}
    triples.update({"30sec@0-30": [], "30sec@30-60": [], "3min@0-180": [("I", "drink", "hot tea"), ("I", "read", "news")]})
    encoder = wm.TEXT_ENCODERS[config["text_embedder"]]()
    write_store(folder, config, episodic, {}, triples, [], None, TextVectors(encoder), {}, {}, "test", {})
    return WorldMMStore.open(folder, config, None)


def _eager(store: WorldMMStore, query: str, k: int, context: SearchContext) -> list[tuple[str, float]]:
    """The released order of work, every level's W8 call made first: HippoRAG per level, W9 over the pool,
    the first k new texts."""
    episodic = store.config["episodic"]
    qv = store.encoder.encode([query])[0]
    pool = [entry for level in episodic["granularities"] for entry in store.index(level, None).retrieve(
        query, qv, int(episodic["k"].get(level, episodic["default_k"])), episodic,
        lambda q, facts: store.filter_facts(q, facts, context), [], level)]
    out, seen = [], set()
    for item_, score in store.rank_pool(query, pool, 2 * k, context):
        if item_.text not in seen:
            seen.add(item_.text)
            out.append((item_.item_id, score))
    return out[:k]


#: A W9 reply naming a full 2k of the one-passage-level store's captions (no ranking then reads a score).
_FULL_W9 = '["10sec@20-30", "3min@0-180", "30sec@0-30", "10sec@10-20", "10sec@0-10", "30sec@30-60"]'


def _w8_w9_rules(w9: str) -> list[dict]:
    """Scripted W8 replies (each level keeps one fact) and the given W9 reply."""
    return [{"match": ["Fact filtering", "hot tea"], "text": '{"fact": [["i", "drink", "hot tea"]]}'},
            {"match": "Fact filtering", "text": '{"fact": [["i", "pour", "water"]]}'},
            {"match": "Caption ranking", "text": w9}]


def _search_beside_eager(store: WorldMMStore, w9: str, tmp_path):
    """The search for "hot water tea" and the release's eager order on the same replies: (found, its context,
    its requests, the eager order's (item, score) list, the eager requests)."""
    ask, sent = asker(_w8_w9_rules(w9), tmp_path)
    context = SearchContext(ask=ask)
    found = store.search("hot water tea", 3, memory_type="episodic", context=context)
    eager_ask, eager_sent = asker(_w8_w9_rules(w9), tmp_path)
    return found, context, sent, _eager(store, "hot water tea", 3, SearchContext(ask=eager_ask)), eager_sent


def _with_episodic(store: WorldMMStore, path, **episodic) -> WorldMMStore:
    """The store opened again with ``episodic`` settings changed (the search reads them at query time)."""
    config = {**store.config, "episodic": {**store.config["episodic"], **episodic}}
    return WorldMMStore.open(path, config, None)


def test_w8_is_skipped_on_a_one_passage_level_only_where_it_cannot_change_the_result(tmp_path, bag_of_words):
    """Cost without changing results (a): a level holding one passage puts its W8 call off. When W9 names a
    full 2k, no score is read and the call is skipped (noted); when W9 falls short, the pool is filled by score,
    so the call is made then. Either way the items and their order are the release's (all W8 calls first).
    Under ``zero_weight_entities: keep`` (no W8 reply can make the search raise: see the next test for the
    release's rule)."""
    store = _with_episodic(_one_passage_level_store(tmp_path / "store", bag_of_words), tmp_path / "store",
                           zero_weight_entities="keep")
    assert len(store.index("3min", None).passages) == 1 and store.index("3min", None).facts
    for w9, skipped in ((_FULL_W9, True), ('["3min@0-180"]', False)):
        found, context, sent, expected, eager_sent = _search_beside_eager(store, w9, tmp_path)
        assert [i.item_id for i in found] == [i for i, _ in expected]
        filters = [r for r in sent if r.purpose == "worldmm:fact_filter"]
        assert len(filters) == sum(r.purpose == "worldmm:fact_filter" for r in eager_sent) - skipped
        assert any(FILTER_SKIP_NOTE in n for n in context.notes) == skipped
        if not skipped:  # the score was read, so it is the PPR score the eager order computed
            assert [round(i.score, 9) for i in found] == [round(s, 9) for _, s in expected]


def test_putting_w8_off_can_be_turned_off_for_the_release_s_order_of_calls(tmp_path, bag_of_words):
    """``episodic.put_off_single_passage_filter: false``: every level's W8 call is made up front, as the release
    does (the memory-systems bench runs both side by side); the same items come back, one W8 call more."""
    store = _one_passage_level_store(tmp_path / "store", bag_of_words)
    rules = _w8_w9_rules(_FULL_W9)
    found = {}
    for put_off in (True, False):
        opened = _with_episodic(store, tmp_path / "store", put_off_single_passage_filter=put_off,
                                zero_weight_entities="keep")
        ask, sent = asker(rules, tmp_path)
        context = SearchContext(ask=ask)
        found[put_off] = ([i.item_id for i in opened.search("hot water tea", 3, memory_type="episodic",
                                                              context=context)],
                          sum(r.purpose == "worldmm:fact_filter" for r in sent))
        assert any(FILTER_SKIP_NOTE in n for n in context.notes) == put_off
    assert found[True][0] == found[False][0] and found[False][1] == found[True][1] + 1


def test_w8_is_never_put_off_where_its_reply_could_lose_the_question(tmp_path, bag_of_words):
    """Under the release's ``zero_weight_entities: release`` (the default) a W8 reply that keeps a candidate
    scored 0 makes the level's search raise and the question is lost (HippoRAG's assertion): there the reply
    decides the result, so a one-passage level holding such a candidate makes its W8 call as the release does
    (no skip note, as many W8 calls as the eager order) and a reply keeping only that fact loses the question
    as the eager order does."""
    store = _one_passage_level_store(tmp_path / "store", bag_of_words)
    level = store.index("3min", None)
    qv = store.vectors.encoder.encode(["hot water tea"])[0]
    candidates = level.candidate_facts(qv, 5)
    assert level.may_raise(candidates, store.config["episodic"])
    assert not level.may_raise(candidates, {**store.config["episodic"], "zero_weight_entities": "keep"})
    found, context, sent, expected, eager_sent = _search_beside_eager(store, _FULL_W9, tmp_path)
    assert [i.item_id for i in found] == [i for i, _ in expected]
    assert not any(FILTER_SKIP_NOTE in n for n in context.notes)
    assert (sum(r.purpose == "worldmm:fact_filter" for r in sent)
            == sum(r.purpose == "worldmm:fact_filter" for r in eager_sent))
    lowest = next(fact for fact, score in candidates if score == 0)
    with pytest.raises(ZeroWeightEntity):
        level.search(qv, candidates, [lowest], store.config["episodic"])


def test_resending_cut_builder_replies_can_be_turned_off(tmp_path, bag_of_words):
    """``cut_reply_resends: 0``: a reply cut at its token limit gets the repair turn, as any unreadable one (the
    build before the resend; the bench runs both side by side)."""
    passages = [item("10sec", 0, 10, "I pick up the red mug.")]
    builder = _builder(tmp_path, {**bag_of_words, "cut_reply_resends": 0})
    openie(builder, "extractor", passages)
    purposes = [r.purpose for r in builder.backends["extractor"].sent]
    assert purposes[:2] == ["worldmm:ner", "worldmm:ner:repair"] and builder.stats["extractor"].resent == 0


def test_skipping_w8_on_every_level_that_fits_k_is_an_option_off_by_default(tmp_path, bag_of_words):
    """``episodic.skip_filter_when_level_fits``: skip W8 wherever a level holds ≤ k_g passages (all of them are
    returned whatever W8 keeps, but in dense order instead of PPR order, and the W9 listing and its shortfall
    read that order and those scores: results can change, so it is off by default)."""
    config = _only(bag_of_words, **FINE)
    store = hand_made_store(tmp_path / "store", config)
    rules = [{"match": "Fact filtering", "text": '{"fact": [["i", "fill", "kettle"]]}'}]
    ask, sent = asker(rules, tmp_path)
    store.search("kettle water", 3, memory_type="episodic", context=SearchContext(ask=ask))
    assert [r.purpose for r in sent] == ["worldmm:fact_filter"]
    skipping = _only(bag_of_words, **FINE, skip_filter_when_level_fits=True)
    store = WorldMMStore.open(tmp_path / "store", skipping, None)
    ask, sent = asker(rules, tmp_path)
    context = SearchContext(ask=ask)
    found = store.search("kettle water", 3, memory_type="episodic", context=context)
    assert sent == [] and any(FILTER_SKIP_NOTE in n and "skip_filter_when_level_fits" in n for n in context.notes)
    assert [i.item_id for i in found] == KETTLE_WATER_DENSE_TOP_3


class _CutShort(ScriptedBackend):
    """The scripted backend, whose replies are cut at their limit (``finish_reason: length``) whenever a request
    allows fewer than ``room`` completion tokens: a JSON reply that needs more room than the role's limit."""

    room = 2048

    def complete(self, request):
        self.sent = getattr(self, "sent", []) + [request]
        if request.max_tokens < self.room:
            return ChatResponse(text='{"named_entities": ["I", "red', finish_reason="length")
        return super().complete(request)


def _builder(tmp_path, config, model_extra=None) -> BuilderLLM:
    tmp_path.mkdir(parents=True, exist_ok=True)
    llm = {**_scripted(tmp_path, "llm", BUILD_RULES), **(model_extra or {})}
    request = BuildRequest(video=_Video(), system="worldmm", system_config=config, memory_config={},
                           out_dir=tmp_path / "store", models={"extractor": ("scripted_llm", llm)})
    builder = BuilderLLM(request, PROMPTS, config["max_tokens"])
    builder.backends["extractor"] = _CutShort(llm)
    return builder


def test_a_builder_reply_cut_at_its_limit_is_resent_with_a_higher_limit(tmp_path, bag_of_words):
    """Cost without changing results (b): a JSON reply cut at its token limit is resent as the same request with
    twice the limit (bounded by the model config's ``max_tokens_cap`` and context, and by MAX_RESENDS), not
    repaired by a turn that quotes the cut reply; where the limit cannot grow, the repair turn follows."""
    passages = [item("10sec", 0, 10, "I pick up the red mug.")]
    builder = _builder(tmp_path, bag_of_words)
    entities, triples, counts = openie(builder, "extractor", passages)
    sent = builder.backends["extractor"].sent
    assert entities == {"10sec@0-10": ["I", "red mug"]} and triples["10sec@0-10"] == [("I", "hold", "red mug")]
    assert [(r.purpose, r.max_tokens) for r in sent] == [("worldmm:ner", 1024), ("worldmm:ner", 2048),
                                                         ("worldmm:triples", 1024), ("worldmm:triples", 2048)]
    assert sent[1].messages == sent[0].messages  # the original request, not a repair turn
    assert (builder.stats["extractor"].resent, builder.stats["extractor"].cut) == (2, 2)
    # A cap at the role's limit: the limit cannot grow, so the reply is repaired once (and stays cut: lost).
    capped = _builder(tmp_path / "capped", bag_of_words, {"max_tokens_cap": 1024})
    entities, _, counts = openie(capped, "extractor", passages)
    assert [r.purpose for r in capped.backends["extractor"].sent][:2] == ["worldmm:ner", "worldmm:ner:repair"]
    assert counts["ner_failed"] == 1 and capped.stats["extractor"].resent == 0
    # A model that never stops: at most MAX_RESENDS resends, then the repair.
    endless = _builder(tmp_path / "endless", bag_of_words)
    endless.backends["extractor"].room = 10 ** 9
    endless.json("extractor", [endless.fit("extractor", lambda body: PROMPTS.render("ner", passage=body), "x",
                                           None, "worldmm:ner")], lambda obj: obj)
    limits = [r.max_tokens for r in endless.backends["extractor"].sent]
    assert limits == [1024 * 2 ** n for n in range(MAX_RESENDS + 1)] + [1024 * 2 ** MAX_RESENDS]


# ------------------------------------------- issue 34, reviewer's findings: the workflow and store as released
from senri.memory.worldmm.common import is_time_range  # noqa: E402
from senri.memory.worldmm.index import parse_rank_reply, read_filter_body  # noqa: E402
from senri.methods.worldmm import clip_frame_times  # noqa: E402

TYPES = ("episodic", "semantic", "visual")
NESTED = '{"decision": "search", "selected_memory": {"memory_type": "episodic", "search_query": "red mug"}}'


def test_w10_text_around_the_json_is_read_as_the_release_reads_it():
    """Finding 1: the released parser reads the span from the first ``{`` to the last ``}``, so a reply with
    text before or after its nested object is a search; a span that is not JSON (two objects) is an answer."""
    search = {"decision": "search", "memory_type": "episodic", "search_query": "red mug"}
    for reply in (f"Reply: {NESTED}", f"### Response:\n{NESTED}", f"{NESTED}\nThis finds when I held the mug.",
                  f"```json\n{NESTED}\n```", f"<think>maybe {{x}}</think>{NESTED}"):
        assert parse_decision(reply, TYPES) == search, reply
    assert parse_decision(f'{NESTED} {{"decision": "answer"}}', TYPES) == {"decision": "answer", "parsed": False}
    assert parse_decision('Reply: {"decision": "Answer"}', TYPES) == {"decision": "answer", "parsed": True}
    # Nothing is stripped: a memory type with a space is unknown (an error, as the release's unknown type).
    assert "unknown memory type ' episodic'" in parse_decision(
        '{"decision": "search", "selected_memory": {"memory_type": " episodic", "search_query": "x"}}', TYPES)["error"]


def test_an_unknown_decision_spends_its_round_without_an_error(tmp_path, clip, bag_of_words):
    """Finding 3: the release answers on "answer" and searches on "search"; any other decision spends the
    round with no error and no history entry. What the released parser raises on (JSON that is not an object,
    a null or non-string decision, a selected_memory that is not an object) is its loop's error."""
    assert parse_decision('{"decision": "retrieve"}', TYPES) == {"decision": "none", "value": "retrieve"}
    assert parse_decision('{"decision": "search "}', TYPES) == {"decision": "none", "value": "search "}
    for raised in ('{"decision": null}', '{"decision": 3}', '["search"]', '"answer"',
                   '{"decision": "search", "selected_memory": "episodic"}',
                   '{"decision": "search", "selected_memory": {"memory_type": null}}'):
        assert "error" in parse_decision(raised, TYPES), raised
    hand_made_store(tmp_path / "store", bag_of_words)
    rules = [{"match": "Give only the letter", "text": "C"},
             {"match": "Round history", "text": '{"decision": "retrieve", "memory": "episodic"}'}]
    row, calls = run_workflow(tmp_path, clip, bag_of_words, rules)
    trace = json.loads(row["trace"])
    assert trace["actions"] == ["no_decision"] * 5 and trace["errors"] == 0 and row["pred"] == "C"
    assert [c["purpose"] for c in calls] == ["control"] * 5 + ["answer"]
    assert all("Round history:\n[]" in _prompt_text(c) for c in calls if c["purpose"] == "control")


def test_the_workflow_s_roles_get_4096_tokens_bounded_by_the_model_cap(tmp_path, clip, bag_of_words):
    """Finding 4: controller, answer and the store's W8/W9 calls get SENRI-Agent's 4096 completion tokens (the
    release sends no limit); a model config's ``max_tokens_cap`` bounds every one of them."""
    assert METHOD["max_tokens"] == {"controller": 4096, "answer": 4096}
    assert CONFIG["max_tokens"]["retriever"] == 4096
    hand_made_store(tmp_path / "store", bag_of_words)
    row, calls = run_workflow(tmp_path, clip, bag_of_words, WORKFLOW_RULES)
    limits = {c["purpose"]: c["payload"]["max_tokens"] for c in calls}
    assert limits == {"control": 4096, "worldmm:fact_filter": 4096, "worldmm:rank": 4096, "answer": 4096}
    (tmp_path / "capped").mkdir()
    hand_made_store(tmp_path / "capped" / "store", bag_of_words)
    row, calls = run_workflow(tmp_path / "capped", clip, bag_of_words, WORKFLOW_RULES, model={"max_tokens_cap": 300})
    assert {c["payload"]["max_tokens"] for c in calls} == {300}
    # A retriever model config of its own (resolved into model_configs) bounds the store's requests itself.
    store = WorldMMStore.open(tmp_path / "store", {**bag_of_words, "model_configs": {
        "retriever": {"name": "small", "config": {"max_tokens_cap": 200}}}}, None)
    assert store._retriever_request("x", "worldmm:rank").max_tokens == 200


def _pool(store: WorldMMStore, query: str = "kettle water"):
    episodic = store.config["episodic"]
    qv = store.encoder.encode([query])[0]
    return [entry for level in episodic["granularities"] for entry in store.index(level, None).retrieve(
        query, qv, int(episodic["k"].get(level, episodic["default_k"])), episodic, lambda q, facts: [], [], level)]


def test_w9_replies_are_read_as_the_release_reads_them(tmp_path, bag_of_words):
    """Finding 6: the first non-greedy ``[...]`` as JSON, its pool ids in order with repeats; no list or bad JSON:
    the pool ids found in the text (ordered by position here; the release's set order); a list naming no pool
    id gives none (no substring fallback)."""
    pool = ["10sec@0-10", "10sec@10-20", "30sec@0-30", "3min@0-180"]
    assert parse_rank_reply('Ranked: ["3min@0-180", "x", "3min@0-180", "10sec@0-10"] and ["10sec@10-20"]', pool) \
        == (["3min@0-180", "3min@0-180", "10sec@0-10"], "list")
    assert parse_rank_reply("Best: 30sec@0-30, then 10sec@10-20; [not json]", pool) \
        == (["30sec@0-30", "10sec@10-20"], "substring")
    assert parse_rank_reply('[["10sec@0-10"], "3min@0-180"]', pool) == (["10sec@0-10", "3min@0-180"], "substring")
    assert parse_rank_reply('["nope"] but 10sec@0-10 is best', pool) == ([], "list")
    assert parse_rank_reply("", pool) == ([], "substring")


def test_w9_repeats_take_slots_and_a_reply_naming_no_pool_id_is_a_failed_search_call(tmp_path, bag_of_words):
    """Finding 6 and 16: an id named twice takes two of the 2k slots (the search then drops the repeated text),
    as the release's ``selected_ids[:final_top_k]`` does; the shortfall is filled by score. A reply that yields
    no pool id (all unknown, an empty list, garbage) is counted ``failed_search_calls`` and ranked by score.
    ``episodic.rank_unique_ids: true`` (a named option) gives each id one slot."""
    store = hand_made_store(tmp_path / "store", bag_of_words)
    pool = _pool(store)
    # W8 keeps nothing, so every level is HippoRAG's dense path, min-max scaled: 10-s as in
    # KETTLE_WATER_DENSE_TOP_3 (0.58 → 1, 0.25 → 0.25/0.58 = √3/4, the rest 0, in passage order); neither 30-s
    # caption shares a word with the query and the 3-min level has one caption, so all three are 1.0.
    assert [(i.item_id, round(s, 6)) for i, s in pool] == [
        ("10sec@10-20", 1.0), ("10sec@20-30", round(3 ** 0.5 / 4, 6)), ("10sec@0-10", 0.0), ("10sec@30-40", 0.0),
        ("10sec@40-50", 0.0), ("30sec@0-30", 1.0), ("30sec@30-60", 1.0), ("3min@0-180", 1.0)]
    # By score, ties in pool order.
    by_score = ["10sec@10-20", "30sec@0-30", "30sec@30-60", "3min@0-180", "10sec@20-30", "10sec@0-10",
                "10sec@30-40", "10sec@40-50"]
    twice = '["3min@0-180", "3min@0-180", "10sec@30-40"]'
    ask, _ = asker([{"match": "Caption ranking", "text": twice}], tmp_path)
    tally = CallTally()
    ranked = store.rank_pool("kettle water", pool, 4, SearchContext(ask=ask, tally=tally))
    rest = [i for i in by_score if i not in ("3min@0-180", "10sec@30-40")]
    assert [i.item_id for i, _ in ranked] == ["3min@0-180", "3min@0-180", "10sec@30-40", rest[0]]
    assert tally.health.get("failed_search_calls", 0) == 0
    unique = WorldMMStore.open(tmp_path / "store", _only(bag_of_words, rank_unique_ids=True), None)
    ranked = unique.rank_pool("kettle water", pool, 4, SearchContext(ask=ask))
    assert [i.item_id for i, _ in ranked] == ["3min@0-180", "10sec@30-40", *rest[:2]]
    for reply in ('["nonsense", "10sec@99-109"]', "[]", "I cannot tell.", '{"ids": ["x"]}'):
        ask, _ = asker([{"match": "Caption ranking", "text": reply}], tmp_path)
        tally = CallTally()
        context = SearchContext(ask=ask, tally=tally)
        ranked = store.rank_pool("kettle water", pool, 4, context)
        assert [i.item_id for i, _ in ranked] == by_score[:4], reply
        assert tally.health == {"failed_search_calls": 1}, reply
        assert any("names no caption id" in n for n in context.notes)
    # A reply with no JSON list is read for the ids in its text.
    ask, _ = asker([{"match": "Caption ranking", "text": "Use 10sec@30-40 first, then 30sec@0-30."}], tmp_path)
    ranked = store.rank_pool("kettle water", pool, 2, SearchContext(ask=ask))
    assert [i.item_id for i, _ in ranked] == ["10sec@30-40", "30sec@0-30"]


def test_w8_python_literal_replies_are_read_as_hipporag_reads_them(tmp_path, bag_of_words):
    """Finding 10: after JSON, HippoRAG's filter reads its field with ``ast.literal_eval`` (tuples as lists), so
    a Python-literal reply keeps its facts: PPR, not the dense fallback, and no failed call. Only literals are
    evaluated: a reply with a call in it is unreadable."""
    assert read_filter_body("{'fact': [('I', 'hold', 'cup')]}") == [["I", "hold", "cup"]]
    assert read_filter_body("Reply: {'fact': (['i', 'fill', 'kettle'],)} done") == [["i", "fill", "kettle"]]
    assert read_filter_body('{"fact": [["a", "b", "c"]]}') == [["a", "b", "c"]]
    assert read_filter_body("{'fact': [__import__('os').getcwd()]}") is None
    assert read_filter_body("{'fact': [('i', 3, 'kettle')]}") is None  # not strings: unreadable, as pydantic's
    store = hand_made_store(tmp_path / "store", _only(bag_of_words, **FINE))
    ask, _ = asker([{"match": "Fact filtering", "text": "{'fact': [('i', 'fill', 'kettle')]}"}], tmp_path)
    tally = CallTally()
    context = SearchContext(ask=ask, tally=tally)
    store.search("kettle water", 3, memory_type="episodic", context=context)
    assert "10sec: PPR over 1 fact(s)" in context.notes and tally.health.get("failed_search_calls", 0) == 0


def test_visual_range_queries_are_served_without_embeddings_built_or_imported(tmp_path, clip, bag_of_words):
    """Finding 7: the 10-s clips are written as visual items whether or not an embedder is configured, so the
    range path (the release's reads frames only) works on CPU, for a built store and an imported one without
    ``visual_embeddings.pkl``; a text query returns nothing, noted, and the workflow shows "[No results]"."""
    root = write_release(tmp_path / "release")
    (root / "visual_memory" / VID / "visual_embeddings.pkl").unlink()
    request = import_request(tmp_path, bag_of_words)
    WorldMMStore.import_release(root, request)
    store = WorldMMStore.open(request.out_dir, bag_of_words, _Video())
    assert [(c.start_s, c.end_s) for c in store.search("DAY1 00:00:15 - DAY1 00:00:25", 3, memory_type="visual")] \
        == [(15, 20), (20, 25)]
    assert yaml.safe_load((request.out_dir / "config.yaml").read_text())["visual"].startswith("time ranges only")
    # The workflow over a store without embeddings: frames for the range, "[No results]" for a text query.
    (tmp_path / "wf").mkdir()
    hand_made_store(tmp_path / "wf" / "store", bag_of_words)
    rules = [{"match": "Give only the letter", "text": "B"},
             {"match": "Memory: episodic", "text": '{"decision": "answer"}'},
             {"match": "Memory: visual\nSearch Query: the red mug", "text": _search("episodic", "red mug")},
             {"match": "Memory: visual", "text": _search("visual", "the red mug")},
             {"match": "Round history:\n[]", "text": _search("visual", "DAY1 00:00:05 - DAY1 00:00:12")}]
    row, calls = run_workflow(tmp_path / "wf", clip, bag_of_words, rules)
    trace = json.loads(row["trace"])
    assert trace["actions"][:2] == ["search", "search"] and trace["rounds"][0]["images"] == 9
    last = _prompt_text([c for c in calls if c["purpose"] == "control"][2])
    assert "Search Query: DAY1 00:00:05 - DAY1 00:00:12\nRetrieved:\n[9 images from 1 clips]" in last
    assert "Search Query: the red mug\nRetrieved:\n[No results]" in last


def _visual_search_then_answer(query: str) -> list[dict]:
    """Controller rules: round 1 searches the visual memory with ``query``, round 2 answers; the QA call says B."""
    return [{"match": "Give only the letter", "text": "B"},
            {"match": "Memory: visual", "text": '{"decision": "answer"}'},
            {"match": "Round history:\n[]", "text": _search("visual", query)}]


def _qa_images(calls: list[dict]) -> int:
    """How many images the QA call sent."""
    qa = next(c for c in calls if c["purpose"] == "answer")
    return sum(isinstance(p, dict) and "image" in p for p in qa["payload"]["messages"][1]["content"])


def test_frames_include_the_clip_s_end_and_a_touching_clip_gives_none(tmp_path, clip, bag_of_words):
    """Finding 12: the release's frame range includes its end frame: a 10-s clip is 11 frames at 1 fps, and a
    clip that only touches the range (an empty overlap) gives none."""
    assert clip_frame_times(20.0, 30.0, 1.0) == [float(t) for t in range(20, 31)]
    assert clip_frame_times(30.0, 30.0, 1.0) == [] and clip_frame_times(5.0, 6.5, 2.0) == [5.0, 5.5, 6.0, 6.5]
    visual = {"start_s": np.arange(0, 50, 10.0), "end_s": np.arange(10, 60, 10.0),
              "vectors": np.eye(5, dtype=np.float32), "embedder": "release", "model_config": None}
    store = hand_made_store(tmp_path / "store", bag_of_words, visual=visual)
    # A whole clip and its neighbours, which only touch the range (empty overlaps): 11 frames, "1 clips".
    assert [(c.start_s, c.end_s) for c in store.search("DAY1 00:00:20 - DAY1 00:00:30", 3, memory_type="visual")] \
        == [(20, 20), (20, 30), (30, 30)]
    row, calls = run_workflow(tmp_path, clip, bag_of_words, _visual_search_then_answer("DAY1 00:00:20 - DAY1 00:00:30"))
    assert _qa_images(calls) == 11
    assert "[11 images from 1 clips]" in _prompt_text([c for c in calls if c["purpose"] == "control"][1])


def test_the_frame_budget_is_spread_as_each_released_path_spreads_it(tmp_path, clip, bag_of_words, monkeypatch):
    """Findings 12/15: over ``max_images``, a time-range retrieval keeps frames spread evenly over all of them; a
    text retrieval keeps a share of every clip (at least one each), as the release's two paths sample; the
    text path's history counts the clips that gave frames."""
    from senri.methods import worldmm as workflow

    class Stub:
        visual_fps, max_images, image_max_side, jpeg_quality = 1.0, 6, 512, 85

    times: list[list[float]] = []

    def frames(path, targets, short_side=None):
        times.append(list(targets))
        from senri.decode import SampledFrame
        return [SampledFrame(t, image=np.zeros((4, 4, 3), dtype=np.uint8)) for t in targets]

    import senri.decode
    monkeypatch.setattr(senri.decode, "read_frames", frames)
    stub = Stub()
    stub.context = type("C", (), {"video": type("V", (), {"duration_s": 120.0, "width": 160, "height": 120})(),
                                  "media": type("M", (), {"video": "v.mp4"})()})()
    clips = [MemoryItem("visual@0-10", "visual", "", 0.0, 10.0), MemoryItem("visual@40-50", "visual", "", 40.0, 50.0)]
    from senri.methods.agent import Episode

    images, shown = workflow.WorldMMWorkflow._frames(stub, Episode(QUESTION), clips, True)
    assert (len(images), shown) == (6, 2) and times[-1] == [0.0, 4.0, 8.0, 41.0, 45.0, 50.0]
    images, shown = workflow.WorldMMWorkflow._frames(stub, Episode(QUESTION), clips, False)
    assert (len(images), shown) == (6, 2) and times[-1] == [0.0, 5.0, 10.0, 40.0, 45.0, 50.0]


def test_duplicate_semantic_triples_stay_as_the_release_keeps_them(tmp_path, bag_of_words):
    """Finding 13: a snapshot's repeated triple keeps its own id and its own (parallel) edge: the PageRank walks a
    multigraph with that pair twice, and both copies can be returned."""
    triples = [("I", "drink", "tea"), ("cat", "likes", "sofa"), ("I", "drink", "tea"), ("kettle", "is in", "kitchen"),
               ("I", "sit on", "sofa")]
    snapshots = [(50.0, [Accumulated(t, []) for t in triples])]
    store = hand_made_store(tmp_path / "store", bag_of_words, snapshots=snapshots)
    query = "what do I drink"
    found = store.search(query, 3, memory_type="semantic")
    graph = networkx.Graph()
    for s, _, o in triples:  # parallel edges add up (igraph's multigraph, undirected)
        w = graph.get_edge_data(s, o, {"weight": 0.0})["weight"]
        graph.add_edge(s, o, weight=w + 1.0)
    seeds = {e for s, _, o in triples for e in (s, o)}  # 2k = 6 nearest triples ≥ the 5 there are: all seed
    ppr = networkx.pagerank(graph, alpha=0.85, personalization={n: float(n in seeds) for n in graph},
                            weight="weight", tol=1e-14, max_iter=10000)
    order = sorted(range(len(triples)), key=lambda i: -(ppr[triples[i][0]] + ppr[triples[i][2]]))[:3]
    assert [i.text for i in found] == [wm.triple_text(triples[i]) for i in order]
    assert [i.item_id for i in found].count("semantic:(I, drink, tea)") <= 1
    both = [i for i in store.search(query, 10, memory_type="semantic") if i.text == "(I, drink, tea)"]
    assert [i.item_id for i in both] == ["semantic:(I, drink, tea)", "semantic:(I, drink, tea)#1"]
    assert sum(i.text == "(I, drink, tea)" for i in store.items() if i.kind == "semantic") == 2


def test_a_time_range_needs_the_a_dash_b_pattern(tmp_path, bag_of_words):
    """Finding 14: as the released visual memory decides it, a range is two stamps joined by "-"; two stamps in
    other words make a text query. The bounds are the first two stamps; a range ending before it starts is still a
    range, one that overlaps no frame."""
    assert parse_time_range("between DAY1 00:00:05 and DAY1 00:00:09") is None
    assert not is_time_range("DAY1 00:00:05, DAY1 00:00:09")
    assert parse_time_range("from DAY1 00:00:05 - DAY1 00:00:09 please") == (5.0, 9.0)
    assert parse_time_range("DAY1 00:00:09 - DAY1 00:00:05") == (9.0, 5.0)
    visual = {"start_s": np.arange(0, 50, 10.0), "end_s": np.arange(10, 60, 10.0),
              "vectors": np.eye(5, dtype=np.float32), "embedder": "release", "model_config": None}
    store = hand_made_store(tmp_path / "store", bag_of_words, visual=visual)
    assert store.search("DAY1 00:00:09 - DAY1 00:00:05", 3, memory_type="visual") == []
    context = SearchContext()
    store.search("between DAY1 00:00:05 and DAY1 00:00:09", 3, memory_type="visual", context=context)
    assert "visual: text→clip" in context.notes[-1]


def test_qa_frames_that_fail_to_decode_are_counted_black_frames(tmp_path, clip, bag_of_words, monkeypatch):
    """Finding 16: a QA frame that fails to decode is left out of the QA call and counted in the run-health
    count ``black_frames``."""
    import senri.decode
    from senri.decode import SampledFrame

    real = senri.decode.read_frames

    def flaky(path, targets, **kwargs):
        for frame in real(path, targets, **kwargs):
            yield SampledFrame(frame.target_s, error="damaged") if frame.target_s in (6.0, 11.0) else frame

    monkeypatch.setattr(senri.decode, "read_frames", flaky)
    hand_made_store(tmp_path / "store", bag_of_words)
    row, calls = run_workflow(tmp_path, clip, bag_of_words, _visual_search_then_answer("DAY1 00:00:05 - DAY1 00:00:12"))
    assert _qa_images(calls) == 7
    assert row["black_frames"] == 2 and json.loads(row["trace"])["frames_not_decoded"] == 2
    from senri.records import HEALTH_COUNTS
    assert "black_frames" in HEALTH_COUNTS


class _Looping(_CutShort):
    """Replies cut at their limit in a repetition loop, as the 1.5B reading model's NER replies were on the
    memory-systems bench (each resend came back cut again at 2048 and 4096 tokens)."""

    def complete(self, request):
        self.sent = getattr(self, "sent", []) + [request]
        return ChatResponse(text='{"named_entities": ["I", ' + '"the red mug", ' * 60, finish_reason="length")


def test_a_cut_reply_that_ends_in_a_repetition_loop_is_not_resent(tmp_path, bag_of_words):
    """A higher limit only buys a longer loop: such a reply goes straight to the repair turn, counted
    ``looped``; a cut reply that does not loop is still resent (the test above)."""
    builder = _builder(tmp_path, bag_of_words)
    builder.backends["extractor"] = _Looping(builder.backends["extractor"].config)
    builder.json("extractor", [builder.fit("extractor", lambda body: PROMPTS.render("ner", passage=body), "x",
                                           None, "worldmm:ner")], lambda obj: obj)
    sent = builder.backends["extractor"].sent
    assert [(r.purpose, r.max_tokens) for r in sent] == [("worldmm:ner", 1024), ("worldmm:ner:repair", 1024)]
    # the repair's reply loops too: neither is resent (both counted)
    assert builder.stats["extractor"].resent == 0 and builder.stats["extractor"].looped == 2

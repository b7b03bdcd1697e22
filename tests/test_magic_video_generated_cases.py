"""MAGIC-Video against cases generated from its release's own functions (MAGIC-video @ 0f2273f) on
Hypothesis-drawn inputs (``tests/reference/generated/magic_video/``; ``bench/release_cases/magic_video.py`` made
them): the QA frames of a clip (``VisualMemory._extract_frames``), the time-extraction reply (G13,
``parse_time_reference``), the graph build (``MultimodalGraph.add_*_nodes``), ``filter_by_time`` and the PPR
retrieval (``build_igraph`` + ``cross_modal_retrieve``), the time bypass and the chain facts
(``UnifiedMemory.load`` + ``get_chain_facts_for_results``). The suite reads a deterministic sample; ``python
bench/generated_cases.py magic_video`` reads all."""

from __future__ import annotations

import json
import math
import types

import numpy as np
import pytest

from release_generated import book, generated_cases, sample
from senri.answers import json_objects
from senri.memory.magic_video.graph import (GRANULARITIES, SEMANTIC, TARGET_TYPES, VISUAL, Graph, GraphNode,
                                            build_graph, chunk_key, read_clock, release_seconds)
from senri.memory.magic_video.release import release_captions, release_chains, release_mentions, release_snapshots
from senri.memory.magic_video.search import ChainLimits, apply_quotas, chain_facts, parse_time_range
from senri.memory.magic_video.store import MagicVideoStore
from senri.memory.store import SearchContext
from senri.methods.magic_video import MagicVideoWorkflow, SearchRound
from senri.methods.magic_video import qa_frame_plan, release_frame_indices

SYSTEM = "magic_video"


@pytest.fixture(scope="module")
def cases() -> dict:
    return generated_cases(SYSTEM)


def test_qa_frames_of_a_clip_are_the_release_s(cases):
    """The indices decord is asked for; ``[]`` where the release returns no frame (its exceptions included)."""
    for case in sample(cases["kinds"]["extract_frames"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        ours = release_frame_indices(inp["start_sec"], inp["end_sec"], inp["video_fps"], inp["n_frames"],
                                     inp["fps"], inp["max_frames"])
        assert ours == out["value"]["indices"], case
        book(SYSTEM, "extract_frames")


def test_the_time_extractor_s_reply_is_read_as_the_release_reads_it(cases):
    """A range where the release finds one (non-finite values passed on, as there); where it finds none, senri
    finds none either — or, for a reply that is neither a range nor ``null``, raises the ValueError its store
    books as a failed search call before PageRank serves (the release serves PageRank silently): the named
    deviation ``unreadable_time_reply_counted``."""
    for case in sample(cases["kinds"]["time_reference_reply"]):
        reply, out = case["input"]["reply"], case["output"]
        assert "raised" not in out, case
        try:
            ours = parse_time_range(reply, json_objects)
        except ValueError:
            assert out["value"] is None, case
            book(SYSTEM, "time_reference_reply", "deviation:unreadable_time_reply_counted")
            continue
        if out["value"] is None:
            assert ours is None, case
        else:
            assert ours is not None and all(a == b or (math.isnan(a) and math.isnan(b))
                                            for a, b in zip(ours, out["value"])), case
        book(SYSTEM, "time_reference_reply")


def test_the_qa_frame_budget_is_spent_clip_by_clip_as_the_release_spends_it(cases):
    """Each retrieved clip in order gets at most min(per clip, what the total has left) frames; a clip the budget
    has no frame left for is not read (the release skips it before decoding)."""
    for case in sample(cases["kinds"]["qa_frame_budget"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        ours = qa_frame_plan([tuple(c) for c in inp["clips"]], inp["video_fps"], inp["n_frames"], 1.0,
                             inp["per_clip"], inp["total"], inp["used"])
        # the release decodes the clips in order until the total is spent (the total only grows): a prefix
        read = out["value"]
        assert [start for start, _ in read] == [start for start, _ in inp["clips"][:len(read)]], case
        theirs = [indices for _, indices in read] + [[]] * (len(inp["clips"]) - len(read))
        assert ours == theirs, case
        book(SYSTEM, "qa_frame_budget")


#: The release's node types by their value → senri's.
NODE_TYPE = {"visual_clip": VISUAL}


def test_the_graph_is_built_node_for_node_and_edge_for_edge_as_the_release_builds_it(cases, tmp_path):
    """The case's caption files, NER results and snapshots read by senri's import readers and built by
    ``build_graph``: the same nodes (id, type, text, times in seconds by the release's own rule) in the same order
    and the same edges (ends, type, weight) in the order the release adds them."""
    for n, case in enumerate(sample(cases["kinds"]["graph_build"])):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        levels = {}
        for level, entries in inp["captions"].items():
            path = folder / f"video_{level}.json"
            path.write_text(json.dumps(entries), encoding="utf-8")
            levels[level] = release_captions(path)
        base = inp["captions"]["30sec"]
        ner = {chunk_key(base[i]["text"] if 0 <= i < len(base) else "no caption has this text"): names
               for i, names in inp["ner"]}
        snapshots = {key: {"consolidated_semantic_triples": triples} for key, triples in inp["snapshots"]}
        graph = build_graph(levels, release_mentions(levels.get("30sec", []), ner),
                            release_snapshots(folder / "semantic.json", snapshots) if snapshots else [],
                            person=inp["person"])
        assert [(x.node_id, x.node_type, x.text, x.start_s, x.end_s) for x in graph.nodes.values()] == [
            (i, NODE_TYPE.get(t, t), text, release_seconds(a), release_seconds(b))
            for i, t, text, a, b in out["value"]["nodes"]], case
        assert [[e.src, e.dst, e.edge_type, e.weight] for e in graph.edges] == out["value"]["edges"], case
        book(SYSTEM, "graph_build")


def test_filter_by_time_keeps_the_release_s_nodes_and_edges(cases):
    """G-R1: the store's subgraph at the query time (``MagicVideoStore.subgraph``) keeps the nodes and edges the
    release's ``filter_by_time`` keeps. senri's times are whole seconds (an EgoLife TS9 time's frames ``FF``
    dropped): where the case's times carry frames and the answers differ, senri's equals the release's on the
    same case with the frames zeroed (``output_frames_zeroed``) — the named deviation ``ts9_frames_dropped``."""
    for case in sample(cases["kinds"]["filter_by_time"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        graph = Graph()
        for nid, kind, start, end in inp["nodes"]:
            graph.nodes[nid] = GraphNode(nid, NODE_TYPE.get(kind, kind), nid, release_seconds(start),
                                         release_seconds(end))
        for u, v, w in inp["edges"]:
            graph.add_edge(u, v, "contains", w)
        store = MagicVideoStore(graph, [], np.zeros((len(graph.nodes), 1)), {})
        keep, edges = store.subgraph(release_seconds(inp["until"]))
        ids = [store.order[i] for i in keep]
        ours = {"nodes": ids, "edges": [(ids[u], ids[v], w) for u, v, w in edges]}

        def theirs(value):
            return {"nodes": value["nodes"], "edges": [tuple(inp["edges"][k]) for k in value["edges"]]}

        if ours == theirs(out["value"]):
            book(SYSTEM, "filter_by_time")
        else:
            assert "output_frames_zeroed" in case and ours == theirs(case["output_frames_zeroed"]["value"]), case
            book(SYSTEM, "filter_by_time", "deviation:ts9_frames_dropped")


def _ranked(inp: dict, **config) -> list[tuple[str, float]]:
    """senri's G-R2..R4 on the case's graph: the store's PPR ranking (:meth:`MagicVideoStore.ranked`, every node
    visible) under the release's quotas (:func:`apply_quotas`), the node vectors, clip vectors and query vectors
    the case gives (entity and clip rows zero, as the store's builder writes them)."""
    graph = Graph()
    for x in inp["nodes"]:
        kind = NODE_TYPE.get(x["type"], x["type"])
        level = x["granularity"] if kind == "episode" else ("30sec" if kind == VISUAL else "")
        graph.nodes[x["id"]] = GraphNode(x["id"], kind, x["text"], x["start"], x["end"], level,
                                         *(x["spo"] or ("", "", "")))
    for u, v, w in inp["edges"]:
        graph.add_edge(u, v, "contains", w)
    vectors = np.array([x["vector"] if NODE_TYPE.get(x["type"], x["type"]) in ("episode", SEMANTIC) else [0, 0, 0]
                        for x in inp["nodes"]], dtype=np.float32)
    clips = [x for x in inp["nodes"] if x["clip_vector"] is not None]
    store = MagicVideoStore(
        graph, [], vectors, {"seed_top_k": inp["seed_top_k"], "bm25_weight": inp["bm25_weight"],
                             "damping": inp["damping"], **config},
        encoder=lambda texts: np.array([inp["query_vector"]] * len(texts), dtype=np.float32),
        visual=([x["id"] for x in clips], np.array([x["clip_vector"] for x in clips], dtype=np.float32)) if clips
        else None, visual_encoder=lambda query: np.array(inp["query_clip_vector"], dtype=np.float32))
    quotas = {"30sec": 8, "3min": 4, "10min": 3, "1h": 0}
    assert set(quotas) == set(GRANULARITIES)
    picked = apply_quotas(store.ranked(inp["query"], None, TARGET_TYPES), inp["top_k"], quotas, {SEMANTIC: 5})
    return [(node.node_id, score) for node, score in picked]


def _same_ranking(ours: list[tuple[str, float]], value: dict) -> bool:
    """The release's nodes and scores (within 1e-6: prpack against senri's power iteration), a node swapped only
    for one whose release score ties it."""
    theirs = value["ranked"]
    return len(ours) == len(theirs) and all(
        (a == b or abs(value["hybrid"][a] - value["hybrid"][b]) <= 1e-6) and abs(s - r) <= 1e-6 + 1e-5 * abs(r)
        for (a, s), (b, r) in zip(ours, theirs))


def test_the_ppr_search_ranks_the_release_s_nodes_with_its_scores(cases):
    """G-R2..R4: seeds (text cosine, BM25, clip cosine; top ``seed_top_k`` each), PPR, the hybrid score
    PPR·(cos+1)/2 and the quotas give the release's nodes and scores. The release seeds text with alpha = 0.7
    also where no clip has an embedding; senri then uses ``text_weight_without_visual`` (1.0, the spec's
    alpha = 1): where that changes the ranking, the case equals the release with the option at 0.7 — the named
    deviation ``text_weight_without_visual``."""
    for case in sample(cases["kinds"]["ppr_retrieve"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        if _same_ranking(_ranked(inp), out["value"]):
            book(SYSTEM, "ppr_retrieve")
        else:
            assert all(x["clip_vector"] is None for x in inp["nodes"]), case
            assert _same_ranking(_ranked(inp, text_weight_without_visual=0.7), out["value"]), case
            book(SYSTEM, "ppr_retrieve", "deviation:text_weight_without_visual")


def _levels(captions: dict, folder) -> dict:
    """The case's caption levels as senri's import reads them (one release-layout JSON file per level)."""
    folder.mkdir(parents=True, exist_ok=True)
    levels = {}
    for level, entries in captions.items():
        path = folder / f"video_{level}.json"
        path.write_text(json.dumps(entries), encoding="utf-8")
        levels[level] = release_captions(path)
    return levels


def test_a_time_range_query_retrieves_the_release_s_captions_as_its_text(cases, tmp_path):
    """G-R6: the store's time bypass (the range as G13 read it: the ``time_reference_reply`` kind) returns the
    overlapping 30-s and 3-min episodes with text, and the round history writes them as the release's
    ``retrieve_by_time`` does ("[MM:SS - MM:SS] (level)\\ntext", 30-s then 3-min; "[No results]" for none).
    Named deviation ``bypass_captions_by_time``: a span a level's file lists twice is one episode (listed once,
    its first text), and a level's captions are listed in time order where the release keeps its file's order
    — checked case by case: the same blocks once each."""
    for n, case in enumerate(sample(cases["kinds"]["time_bypass"])):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        graph = build_graph(_levels(inp["captions"], tmp_path / f"bypass{n}"), {}, [])
        store = MagicVideoStore(graph, [], np.zeros((len(graph.nodes), 1)), {})
        store.time_range = lambda query, context: tuple(inp["range"])  # G13's reading: its own kind
        items = store.search("what happens then", 16, context=SearchContext())
        workflow = types.SimpleNamespace(store=store, _bypass_episodes=MagicVideoWorkflow._bypass_episodes)
        ours = MagicVideoWorkflow._round_retrieved(workflow, SearchRound(1, "q", True, items), {})
        theirs = out["value"] or "[No results]"
        if ours == theirs:
            book(SYSTEM, "time_bypass")
            continue
        blocks = theirs.split("\n\n")
        first = {}
        for block in blocks:
            first.setdefault(block.split("\n", 1)[0], block)
        assert sorted(ours.split("\n\n")) == sorted(first.values()), case
        book(SYSTEM, "time_bypass", "deviation:bypass_captions_by_time")


def vocabulary_encoder(vocab: list[str]):
    """The cases' embedding stand-in (the generator's, given to the release too): how often each vocabulary word
    occurs in the lower-cased text, L2-normalised (zero stays zero)."""
    def encode(texts):
        rows = np.asarray([[str(t).lower().count(w) for w in vocab] for t in texts], dtype=np.float64)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return encode


def _chain_facts(inp: dict, folder, **options) -> list[list]:
    """senri's chain facts for a case: the chain files through the import's loader (rows in the store's order),
    the retrieved nodes as graph nodes, the case's limits and options; each fact as [type, label, start (None:
    untimed), end, text]."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "topic_chains.json").write_text(json.dumps(inp["topic_chains"]), encoding="utf-8")
    (folder / "event_chain_step3_enriched.json").write_text(json.dumps(inp["event_chains"]), encoding="utf-8")
    rows = sorted(release_chains(folder)[0], key=lambda r: (r.start_s, r.label))
    nodes = [GraphNode(f"n{k}", d["type"], d["text"], d["start"], d["start"] + d["length"],
                       d["granularity"] if d["type"] == "episode" else "") for k, d in enumerate(inp["results"])]
    limits = ChainLimits(min_hits=inp["min_hits"], max_topics=inp["max_topic_chains"],
                         max_events=inp["max_event_chains"], topic_threshold=inp["topic_sim_threshold"],
                         event_threshold=inp["event_chain_sim_threshold"], event_min_hits=inp["event_chain_min_hits"],
                         **options)
    facts, _ = chain_facts(rows, nodes, inp["query_text"], inp["query_time"], limits,
                           vocabulary_encoder(inp["embed_vocab"]))
    return [[r.chain_type, r.label, r.start_s if r.timed else None, r.end_s, r.text] for r in facts]


def _release_facts(value: list[dict]) -> list[list]:
    return [[f["chain_type"], f["label"], read_clock(f["time"]),
             read_clock(f["end_time"]) if "end_time" in f else None, f["fact"]] for f in value]


def test_a_round_s_chain_facts_are_the_release_s(cases, tmp_path):
    """G-R7 (``get_chain_facts_for_results`` over chains its own loader read): the facts, in order. Where the
    release's pick among equally-hit or equally-similar topics follows a hash-seeded set, the case lists every
    order seen (``alternatives``) and ours is one of them. The named options, case by case: ``round_duplicates:
    drop`` shows each repeated fact once (the release's facts, repeats removed); ``time_filter: always`` shows no
    timed fact after the query time, and the release's facts where there is no query time."""
    for n, case in enumerate(sample(cases["kinds"]["chain_facts"])):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        theirs = [_release_facts(out["value"]), *(_release_facts(alt["value"]) for alt in case["alternatives"])]
        ours = _chain_facts(inp, tmp_path / f"chains{n}")
        assert ours in theirs, case
        book(SYSTEM, "chain_facts")
        once = _chain_facts(inp, tmp_path / f"once{n}", round_duplicates="drop")
        assert any(once == [f for k, f in enumerate(t) if f[:3] + f[4:] not in [g[:3] + g[4:] for g in t[:k]]]
                   for t in theirs), case
        always = _chain_facts(inp, tmp_path / f"always{n}", time_filter="always")
        assert all(f[2] is None or inp["query_time"] is None or f[2] <= inp["query_time"] for f in always), case
        if inp["query_time"] is None:
            assert always in theirs, case


def test_every_generated_kind_is_read(cases):
    assert set(cases["kinds"]) == {"extract_frames", "time_reference_reply", "qa_frame_budget", "graph_build",
                                   "filter_by_time", "ppr_retrieve", "time_bypass", "chain_facts"}
    assert cases["meta"]["commit"] == "0f2273f7f07360cc58588399553b5a6ea758b084"

"""WorldMM's multiscale windows against cases generated from its release's own ``_summarize_level`` (WorldMM @
1e6901d) on Hypothesis-drawn caption timelines (``tests/reference/generated/worldmm/``;
``bench/release_cases/worldmm.py`` made them): every case's levels chained as ``gen_multiscale`` chains them,
each window's members and its start/end labels compared. The suite reads a deterministic sample;
``python bench/generated_cases.py worldmm`` reads all."""

from __future__ import annotations

import numpy as np
import pytest

from release_generated import book, generated_cases, sample
from senri.memory.store import MemoryItem
from senri.memory.retrieval import cosine_rows
from senri.memory.worldmm.common import TextVectors, clean_triples
from senri.memory.worldmm.index import GranularityIndex, ZeroWeightEntity, semantic_ranking
from senri.memory.worldmm.common import hhmmssff, item_id, window_batches
from senri.methods.worldmm import parse_decision

SYSTEM = "worldmm"


@pytest.fixture(scope="module")
def cases() -> dict:
    return generated_cases(SYSTEM)


def _windows(start_centis: list[int], levels: list[int]) -> list[list[dict]]:
    """senri's levels: 10-s captions at the case's starts, each coarser level batching the one below."""
    below = [MemoryItem(f"c{k}", "episodic", f"c{k}", c / 100, c / 100 + 10, level="10sec")
             for k, c in enumerate(start_centis)]
    out = []
    for window in levels:
        made = []
        for members, start, end in window_batches(below, window):
            made.append(MemoryItem(item_id(f"{window}s", start, end), "episodic",
                                   "{" + "+".join(m.text for m in members) + "}", float(start), float(end),
                                   level=f"{window}s"))
        out.append([{"members": m.text, "start_time": hhmmssff(m.start_s), "end_time": hhmmssff(m.end_s)}
                    for m in made])
        below = made
    return out


def _on_the_clock(label: str) -> str:
    """A release label read on a 24-hour clock ("24002900" → "00002900")."""
    return f"{int(label[:-6]) % 24:02d}{label[-6:]}"


def test_multiscale_windows_batch_and_label_as_the_release(cases):
    """Equal, except the named deviation ``labels_wrap_at_midnight`` (docs/protocol.md): a window that ends (or
    starts) past 24:00 is labelled by the release with hours ≥ 24 ("24002900"), by senri on the next day's clock
    (its times are absolute across days: the same moment, "00002900" of the next day)."""
    for case in sample(cases["kinds"]["multiscale_windows"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        ours = _windows(inp["start_centis"], inp["windows"])
        if ours == out["value"]:
            book(SYSTEM, "multiscale_windows")
            continue
        wrapped = [[{**w, "start_time": _on_the_clock(w["start_time"]), "end_time": _on_the_clock(w["end_time"])}
                    for w in level] for level in out["value"]]
        assert ours == wrapped, case
        book(SYSTEM, "multiscale_windows", "deviation:labels_wrap_at_midnight")


#: WorldMM's three memories (the types W10 may select).
MEMORY_TYPES = ("episodic", "semantic", "visual")


def _loop_outcome(release: dict) -> dict:
    """What WorldMM's loop does with the release parser's result (memory.py 476-536): an exception is a failed
    round (``error``); ``answer`` ends the rounds; ``search`` without a selected memory or with a type it does not
    know is an error; a known type searches; any other decision spends the round (``none``)."""
    if "raised" in release:
        return {"decision": "error"}
    value = release["value"]
    decision, chosen = value["decision"], value["selected_memory"]
    if decision == "answer":
        return {"decision": "answer"}
    if decision != "search":
        return {"decision": "none", "value": decision}
    if chosen is None or chosen["memory_type"] not in MEMORY_TYPES:
        return {"decision": "error"}
    return {"decision": "search", "memory_type": chosen["memory_type"], "search_query": chosen["search_query"]}


def _senri_outcome(reply: str) -> dict:
    ours = parse_decision(reply, MEMORY_TYPES)
    if "error" in ours:
        return {"decision": "error"}
    if ours["decision"] == "answer":
        return {"decision": "answer"}
    return {k: v for k, v in ours.items() if k != "parsed"}


def test_the_controller_s_reply_is_read_as_the_release_s_parser_and_loop_read_it(cases):
    """Every reply through ``parse_decision`` and the release's ``_parse_reasoning_response`` + its loop's
    branches: the same outcome (answer, search with the same type and query, a spent round, an error). Named
    deviations: ``search_query_as_text`` — a query that is not a string reaches senri's search as its text
    (``null`` as empty), where the release hands the value itself to its retriever; ``think_block_set_aside`` — a
    reasoning model's ``<think>`` block is set aside before the reply is read (the project's rule for reasoning
    models, docs/protocol.md), where the release reads from the first "{" anywhere, the thinking's included."""
    for case in sample(cases["kinds"]["reasoning_reply"]):
        reply = case["input"]["reply"]
        theirs, ours = _loop_outcome(case["output"]), _senri_outcome(reply)
        if ours == theirs:
            book(SYSTEM, "reasoning_reply")
            continue
        if "</think>" in reply:
            assert ours == _senri_outcome(reply.split("</think>", 1)[1]), case
            book(SYSTEM, "reasoning_reply", "deviation:think_block_set_aside")
            continue
        query = theirs.get("search_query")
        assert not isinstance(query, str) and ours == {**theirs, "search_query": "" if query is None else str(query)}, \
            case
        book(SYSTEM, "reasoning_reply", "deviation:search_query_as_text")


def _level_search(inp: dict, **config):
    """senri's W-R1 level search (:meth:`GranularityIndex.search`) on the case's graph, passages, vectors and the
    filter's kept facts: the :class:`LevelSearch`."""
    passages = [MemoryItem(p, "episodic", p, 0.0, 10.0) for p in inp["passages"]]
    facts = [tuple(fact) for fact, _ in inp["candidates"]]
    index = GranularityIndex(passages=passages, passage_vectors=np.asarray(inp["passage_vectors"], dtype=float),
                             facts=facts, fact_vectors=np.zeros((len(facts), 3)), entities=list(inp["entities"]),
                             entity_passages=[set(p) for p in inp["entity_passages"]],
                             edges=[(u, v, w) for u, v, w in inp["edges"]])
    settings = {"link_top_k": inp["link_top_k"], "passage_node_weight": inp["passage_node_weight"],
                "damping": inp["damping"], **config}
    return index.search(np.asarray(inp["query_vector"], dtype=float), [(tuple(f), s) for f, s in inp["candidates"]],
                        [tuple(f) for f in inp["kept"]], settings)


def test_a_level_s_passages_are_scored_as_hipporag_scores_them(cases):
    """W-R1 (HippoRAG's ``retrieve`` after its filter): every passage's score in the release's order (within
    1e-6: prpack against senri's power iteration; tied passages in either order), or the release's raise: a
    seed entity of weight 0 fails HippoRAG's assertion and senri raises :class:`ZeroWeightEntity` as well
    (``zero_weight_entities: release``; the question is lost). Named deviation ``link_ties_by_entity_order``:
    where entities tie at the ``link_top_k`` cut, HippoRAG keeps the ones its set of phrases yields first (an
    order of string hashes, not of the inputs), senri the first entities of the graph; checked case by case
    that the uncut weights tie there."""
    for case in sample(cases["kinds"]["graph_search"]):
        inp, out = case["input"], case["output"]
        if "raised" in out:
            assert out["raised"] == "AssertionError", case
            with pytest.raises(ZeroWeightEntity):
                _level_search(inp)
            book(SYSTEM, "graph_search")
            continue
        found = _level_search(inp)
        ours = [(int(item.item_id[1:]), score) for item, score in found.ranked]
        theirs = dict(zip(out["value"]["ids"], out["value"]["scores"]))
        same = len(ours) == len(theirs) and all(
            (i == j or abs(theirs[i] - theirs[j]) <= 1e-9) and abs(score - ref) <= 1e-6 + 1e-5 * abs(ref)
            for (i, score), j, ref in zip(ours, out["value"]["ids"], out["value"]["scores"]))
        if same:
            book(SYSTEM, "graph_search")
            continue
        uncut = _level_search(inp, link_top_k=len(inp["entities"]) + 1).reset[:len(inp["entities"])]
        ranked = sorted(uncut[uncut > 0], reverse=True)
        k = inp["link_top_k"]
        assert found.path == "ppr" and len(ranked) > k and ranked[k - 1] == ranked[k], case
        book(SYSTEM, "graph_search", "deviation:link_ties_by_entity_order")


def test_zero_weight_entities_keep_seeds_the_other_entities(cases):
    """``zero_weight_entities: keep`` (senri's option): where HippoRAG raises, the walk starts from the entities
    with a weight (or the passages' dense weights) and every passage is scored."""
    raised = [c for c in cases["kinds"]["graph_search"] if "raised" in c["output"]][:5]
    assert raised
    for case in raised:
        found = _level_search(case["input"], zero_weight_entities="keep")
        assert found.path == "ppr" and len(found.ranked) == len(case["input"]["passages"]), case
    with pytest.raises(ValueError, match="zero_weight_entities"):
        _level_search(raised[0]["input"], zero_weight_entities="skip")


def test_the_semantic_search_ranks_the_release_s_triples(cases):
    """W-R3 (the release's ``SemanticMemory.index`` + ``retrieve``): the same triples in the same order, a
    pair of triples whose scores tie (within 1e-9: prpack against senri's power iteration) in either order.
    Named deviation ``semantic_seed_ties``: where triples tie at the ``top_k``-th cosine, which of them seed the
    walk is ``torch.topk``'s choice (not defined by the inputs), senri's the first in the snapshot; checked case by
    case that the cosines tie there."""
    for case in sample(cases["kinds"]["semantic_retrieval"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        triples = [tuple(t) for t in inp["triples"]]
        vectors = np.array([inp["vectors"][" ".join(t)] for t in triples], dtype=np.float32)
        ranked = semantic_ranking(triples, vectors, np.array(inp["query_vector"], dtype=np.float32), inp["top_k"],
                                  0.85, positions=True)
        score = dict(ranked)
        theirs = out["value"]["positions"]
        if len(ranked) == len(theirs) and all(i == j or (j in score and abs(score[i] - score[j]) <= 1e-9)
                                              for (i, _), j in zip(ranked, theirs)):
            book(SYSTEM, "semantic_retrieval")
            continue
        sims = np.sort(cosine_rows(vectors, np.array(inp["query_vector"], dtype=np.float32)))[::-1]
        k = inp["top_k"]
        assert len(sims) > k and abs(sims[k - 1] - sims[k]) <= 1e-6, case
        book(SYSTEM, "semantic_retrieval", "deviation:semantic_seed_ties")


class _EntityVectors:
    """The case's vector of each processed entity name (any other text: a zero vector; only the synonymy edges
    read entity vectors at build time)."""

    def __init__(self, vectors: dict) -> None:
        self.vectors = vectors

    def encode(self, texts):
        return np.array([self.vectors.get(t, [0.0, 0.0, 0.0]) for t in texts], dtype=np.float32)


def test_a_level_s_graph_is_built_edge_for_edge_as_hipporag_builds_it(cases):
    """W-R1's graph (:meth:`GranularityIndex.build` over the extractor's triples as W-C5 keeps them,
    :func:`clean_triples`) against HippoRAG's ``add_fact_edges`` / ``add_passage_edges`` / ``add_synonymy_edges``
    on the same triples: the same ordered pairs with the same weights (fact counts, passage links, synonymy
    cosines within 1e-6; self-loops left out as ``add_new_edges`` leaves them) and each entity's passages."""
    for case in sample(cases["kinds"]["hipporag_graph"]):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        passages = [MemoryItem(f"p{k}", "episodic", f"passage {k}", 10.0 * k, 10.0 * k + 10)
                    for k in range(len(inp["passages"]))]
        triples = {p.item_id: clean_triples(raw)[0] for p, raw in zip(passages, inp["passages"])}
        index = GranularityIndex.build(passages, triples, TextVectors(_EntityVectors(inp["entity_vectors"])),
                                       inp["threshold"])
        n_entities = len(index.entities)

        def name(i: int) -> str:
            return f"e:{index.entities[i]}" if i < n_entities else f"p:{i - n_entities}"

        ours = {(name(u), name(v)): w for u, v, w in index.edges}
        theirs = {(a, b): w for a, b, w in out["value"]["edges"]}
        assert ours.keys() == theirs.keys() and all(abs(ours[k] - theirs[k]) <= 1e-6 for k in ours), case
        assert {e: sorted(ps) for e, ps in zip(index.entities, index.entity_passages)} == \
            out["value"]["entity_passages"], case
        book(SYSTEM, "hipporag_graph")


def test_every_generated_kind_is_read(cases):
    assert set(cases["kinds"]) == {"multiscale_windows", "reasoning_reply", "graph_search", "semantic_retrieval",
                                   "hipporag_graph"}
    assert cases["meta"]["commit"] == "1e6901d104259251457fad3df864794f9639be5f"
    assert len(cases["kinds"]["multiscale_windows"]) >= 200

"""WorldMM's store against what the released code computed on fixed inputs
(``shared/reference/release_cases/worldmm/cases.json``, read as data at test time; its README says how each case
was made): HippoRAG-2's graph and retrieval (``hipporag_retrieval``) and the multiscale windows
(``multiscale_batching``). Scores are compared within 1e-6, tied scores as unordered."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from reference import release_cases
from senri.memory.store import MemoryItem
from senri.memory.worldmm import common as wm
from senri.memory.worldmm.common import TextVectors, fact_text, hhmmssff, item_id, window_batches
from senri.memory.worldmm.index import GranularityIndex, match_filter_reply

TOL = 1e-6


@pytest.fixture(scope="module")
def cases() -> dict:
    return release_cases("worldmm")


# ============================================================================================ HippoRAG
class FixtureEncoder(wm.TextEncoder):
    """The case's embeddings: every passage and fact one-hot, every entity one-hot except "plant pot" (cosine 0.85
    with "plants"), and each query the vector of its raw scores, so query·passage and query·fact are the case's
    raw scores exactly. A text the case does not know is an error (the index embedded something else)."""

    name = "release-case-one-hot"

    def __init__(self, case: dict) -> None:
        fixture = case["fixture"]
        passages = list(fixture["passages"].values())
        facts = fixture["processed_facts"]
        entities = fixture["entity_nodes"]
        width = len(passages) + len(facts) + len(entities) + 1
        eye = np.eye(width, dtype=np.float32)
        self.known: dict[str, np.ndarray] = {}
        for n, text in enumerate(passages):
            self.known[text] = eye[n]
        for n, text in enumerate(facts):
            self.known[text] = eye[len(passages) + n]
        entity_row = {name: len(passages) + len(facts) + n for n, name in enumerate(entities)}
        for name, row in entity_row.items():
            self.known[name] = eye[row]
        self.known["plant pot"] = (0.85 * eye[entity_row["plants"]]
                                   + math.sqrt(1 - 0.85 ** 2) * eye[width - 1]).astype(np.float32)
        ids = list(fixture["passages"])
        for query, spec in case["queries"].items():
            vector = np.zeros(width, dtype=np.float32)
            for pid, score in spec["passage_raw_scores"].items():
                vector[ids.index(pid)] = score
            for fact, score in spec["fact_raw_scores"].items():
                vector[len(passages) + facts.index(fact)] = score
            self.known[query] = vector

    def encode(self, texts):
        return np.stack([self.known[t] for t in texts])


def _index(case: dict) -> tuple[GranularityIndex, FixtureEncoder, dict]:
    fixture = case["fixture"]
    passages = [MemoryItem(pid, "episodic", text, level="10sec") for pid, text in fixture["passages"].items()]
    triples = {pid: [tuple(t) for t in ts] for pid, ts in fixture["openie_triples_per_passage"].items()}
    encoder = FixtureEncoder(case)
    config = case["config"]
    index = GranularityIndex.build(passages, triples, TextVectors(encoder), config["synonymy_edge_sim_threshold"])
    return index, encoder, {"link_top_k": config["linking_top_k"], "passage_node_weight": config["passage_node_weight"],
                            "damping": config["damping"]}


def _label(index: GranularityIndex, node: int) -> str:
    n = len(index.entities)
    return f"ENT:{index.entities[node]}" if node < n else index.passages[node - n].item_id


def test_hipporag_graph_matches_the_release(cases):
    """Vertices, every edge with its multiplicity and weight (the ordered-pair table read as an undirected
    multigraph), the synonymy pair, and the passages per entity."""
    case = cases["hipporag_retrieval"]
    index, _, _ = _index(case)
    graph = case["graph"]
    ours = {f"ENT:{e}" for e in index.entities} | {p.item_id for p in index.passages}
    assert ours == {v["label"] for v in graph["vertices"]} and len(ours) == graph["n_vertices"]
    # The facts are HippoRAG's processed triples, embedded as their tuple text.
    assert sorted(fact_text(f) for f in index.facts) == sorted(case["fixture"]["processed_facts"])
    assert sorted(index.entities) == case["fixture"]["entity_nodes"]

    def multiset(edges):
        return Counter((tuple(sorted((u, v))), round(w, 6)) for u, v, w in edges)

    expected = multiset((e["u"], e["v"], e["weight"]) for e in graph["edges"])
    got = multiset((_label(index, u), _label(index, v), w) for u, v, w in index.edges)
    assert sum(got.values()) == graph["n_edges"] and got == expected
    assert {f"ENT:{e}": len(index.entity_passages[n]) for n, e in enumerate(index.entities)} \
        == graph["ent_node_to_num_chunks"]


def test_hipporag_retrieval_matches_the_release(cases):
    """Every query of the case file (none named here, so a query added to the file is read too)."""
    assert len(cases["hipporag_retrieval"]["queries"]) >= 4
    for query in cases["hipporag_retrieval"]["queries"]:
        _hipporag_query(cases, query)


def _hipporag_query(cases, query):
    """Per query: the facts shown to W8 (top link_top_k by normalised cosine, ties unordered), the fixed W8
    reply matched to them, the path (PPR or the dense fallback), the reset weights and every passage's score."""
    case = cases["hipporag_retrieval"]
    spec = case["queries"][query]
    index, encoder, config = _index(case)
    qv = encoder.encode([query])[0]

    candidates = index.candidate_facts(qv, config["link_top_k"])
    raw = {fact: spec["fact_raw_scores"].get(fact_text(fact), 0.0) for fact in index.facts}
    top = max(raw.values())
    normalised = {fact: score / top for fact, score in raw.items()}  # every case has facts at raw score 0
    expected = [tuple(f) for f in spec["facts_before_rerank"]]
    assert [round(s, 6) for _, s in candidates] == [round(normalised[f], 6) for f in expected]
    boundary = candidates[-1][1]
    assert {f for f, s in candidates if s > boundary + TOL} == {f for f in expected if normalised[f] > boundary + TOL}
    assert all(abs(normalised[f] - s) < TOL for f, s in candidates)  # a tie at the boundary may pick another fact

    shown = [f for f, _ in candidates]
    # The fixed W8 reply, as the W8 filter hands it on (its facts are among ours wherever they are not tied).
    kept = match_filter_reply(spec["reranker_fixed_output"], shown, config["link_top_k"])
    assert kept == [tuple(f) for f in spec["facts_after_rerank"]]

    found = index.search(qv, candidates, kept, config)
    assert found.path == ("dense" if spec["path"].startswith("dense") else "ppr")
    if spec["ppr_reset"] is None:
        assert found.reset is None
    else:
        weights = next(iter(spec["ppr_reset"].values()))
        got = {_label(index, n): float(w) for n, w in enumerate(found.reset) if w != 0}
        assert set(got) == set(weights)
        assert all(abs(got[k] - weights[k]) < TOL for k in weights), (got, weights)
    scores = {p.item_id: s for p, s in found.ranked}
    release = {r["passage_id"]: r["score"] for r in spec["ranked_passages"]}
    assert set(scores) == set(release)
    assert all(abs(scores[p] - release[p]) < TOL for p in release), (scores, release)
    ordered = [s for _, s in found.ranked]
    assert ordered == sorted(ordered, reverse=True)


def test_the_w8_reply_is_matched_to_the_closest_candidate_as_the_release_does(cases):
    """HippoRAG's DSPyFilter maps each reply fact to the closest candidate string (difflib, no cut-off): a fact
    written with other case or words still selects its candidate, and a repeat is kept."""
    shown = [("keys", "under", "plant pot"), ("carol", "finds", "keys"), ("bob", "gives", "keys")]
    assert match_filter_reply([["Keys", "under", "the plant pot"], ["carol", "found", "keys"]], shown, 5) \
        == [("keys", "under", "plant pot"), ("carol", "finds", "keys")]
    assert match_filter_reply([["bob", "gives", "keys"]] * 3, shown, 2) == [("bob", "gives", "keys")] * 2
    assert match_filter_reply([], shown, 5) == []


# ========================================================================================= multiscale
def test_multiscale_windows_match_the_release(cases):
    """Every video of the case file (none named here, so a video added to the file is read too)."""
    assert len(cases["multiscale_batching"]["videos"]) >= 3
    for video in cases["multiscale_batching"]["videos"]:
        _multiscale_video(cases, video)


def _multiscale_video(cases, video):
    """``window_batches`` chained level on level (each coarser level batches the level below's outputs, as
    gen_multiscale does) against every window's nominal start and end, its output times, its direct members
    and the 10-s captions they contain."""
    spec = cases["multiscale_batching"]["videos"][video]
    below = [MemoryItem(item_id("10sec", s, s + 10), "episodic", f"c{s:04d}", float(s), float(s + 10), level="10sec")
             for s in spec["input_10s_caption_start_secs"]]
    assert len(below) == spec["n_inputs"]
    base_of = {item.item_id: [item.text] for item in below}
    for level, window in (("30sec", 30), ("3min", 180), ("10min", 600)):
        expected = spec["levels"][level]
        batches = window_batches(below, window)
        assert len(batches) == len(expected), level
        made = []
        for n, ((members, start, end), want) in enumerate(zip(batches, expected)):
            assert want["window_index"] == n
            assert (start, end) == (want["window_start_sec"], want["window_end_sec"]), (level, n)
            assert (hhmmssff(start), hhmmssff(end)) == (want["output_start_time"], want["output_end_time"])
            assert [m.text for m in members] == want["input_members"], (level, n)
            contained = [c for m in members for c in base_of[m.item_id]]
            assert contained == want["base_10s_captions"], (level, n)
            item = MemoryItem(item_id(level, start, end), "episodic", "{" + "+".join(m.text for m in members) + "}",
                              float(start), float(end), level=level)
            base_of[item.item_id] = contained
            made.append(item)
        below = made

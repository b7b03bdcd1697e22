"""M3-Agent's clip-level retrieval (shared/spec/omni_memory.md M-R2..M-R7, K-8, K-10).

A query naming ``<character_k>`` is expanded into one variant per face/voice tag of each named character
(cartesian product, plain substring replace); every variant is embedded; a text node's score is the max cosine
over (variants × its embeddings); a clip's score the max over its scored nodes. The normal search keeps the top
2 clips at ≥ 0.5, removes the clips this question already saw AFTER that cut, and returns all their texts; the
name search (a query holding "character id") walks the best nodes until ≥ 20 texts. Texts come back translated:
equivalence texts dropped, face/voice tags replaced by character names.

Entity order: the release takes a query's or a text's entities from a ``set`` of (type, id) tuples, so its
variant order and overlapping replacements depend on PYTHONHASHSEED (release cases ``output_across_hashseeds``).
Here they are taken in order of first appearance: one of the release's outcomes, the same on every run
(docs/protocol.md, K-8/K-10). More than 100 variants: a sample of 100 from the graph's seeded ``rng`` (M-Q2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from senri.memory.m3_agent.graph import EPISODIC, SEMANTIC, MemoryGraph

#: Text embedder: texts → one vector each (text-embedding-3-large in the release; a named stand-in otherwise).
Embed = Callable[[Sequence[str]], Sequence[Sequence[float]]]

MAX_VARIANTS = 100
#: M-R5: the normal search (pc.topk 2, threshold 0.5); M-R6: the name search.
NORMAL_TOPK, NORMAL_THRESHOLD = 2, 0.5
NAME_TOPK = 20
NAME_SEARCH_MARK = "character id"


def _unique(entities: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    return list(dict.fromkeys(entities))


def translate(graph: MemoryGraph, texts: Sequence[str]) -> list[str]:
    """M-R7: drop texts starting with "Equivalence: " (any case, with the space); replace each entity's tag by
    its character name, plain substring replace (``face_1`` inside ``face_12`` too, where face_12 is not itself
    an entity of the text)."""
    out = []
    reverse = graph.reverse_character_mappings or {}
    for text in texts:
        if text.lower().startswith("equivalence: "):
            continue
        for kind, node_id in _unique(graph.parse_entities(text)):
            tag = f"{kind}_{node_id}"
            if tag in reverse:
                text = text.replace(tag, reverse[tag])
        out.append(text)
    return out


def expand_query(graph: MemoryGraph, query: str) -> list[str]:
    """M-R2: the query's variants, each ``character_k`` it names replaced by each of that character's tags."""
    variants = [query]
    mappings = graph.character_mappings or {}
    for kind, node_id in _unique(graph.parse_entities(query)):
        tag = f"{kind}_{node_id}"
        if tag in mappings:
            variants = [v.replace(tag, mapped) for mapped in mappings[tag] for v in variants]
    return variants


def related_nodes(graph: MemoryGraph, query: str) -> list[int]:
    """M-R3: the face/voice node ids the query names (a character → all its nodes); only mapped tags count."""
    mappings = graph.character_mappings or {}
    reverse = graph.reverse_character_mappings or {}
    found: list[int] = []
    for kind, node_id in graph.parse_entities(query):
        tag = f"{kind}_{node_id}"
        if tag not in mappings and tag not in reverse:
            continue
        if kind == "character":
            found.extend(int(t.split("_")[1]) for t in mappings[tag])
        else:
            found.append(node_id)
    return list(set(found))


def _cosines(queries: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Row-normalised dot products (a zero vector scores 0, as scikit-learn's cosine_similarity)."""
    def unit(m: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)
    return unit(queries) @ unit(nodes).T


def score_text_nodes(graph: MemoryGraph, query_vectors: Sequence[Sequence[float]],
                     restrict_to: Sequence[int]) -> list[tuple[int, float]]:
    """M-R4: (text node, max cosine over variants × its embeddings), best first (ties keep node order)."""
    if restrict_to:
        pool: list[int] = []
        for node_id in restrict_to:
            pool.extend(graph.connected(node_id, (EPISODIC, SEMANTIC)))
        candidates = list(set(pool))
    else:
        candidates = list(graph.text_nodes)
    if not candidates:
        return []
    queries = np.asarray(query_vectors, dtype=float)
    scores = []
    for node_id in candidates:
        vectors = np.asarray(graph.nodes[node_id].embeddings, dtype=float)
        scores.append(float(_cosines(queries, vectors).max()))
    return sorted(zip(candidates, scores), key=lambda pair: pair[1], reverse=True)


@dataclass
class Retrieval:
    """What one retrieval computed (traces keep it): variants, node and clip scores, the clips kept."""

    variants: list[str]
    related: list[int]
    node_scores: list[tuple[int, float]]
    clip_scores: dict[int, float]
    top_clips: list[int]
    embedded: list[str] = field(default_factory=list)


def retrieve(graph: MemoryGraph, query: str, embed: Embed, topk: int, threshold: float,
             before_clip: int | None = None) -> Retrieval:
    """M-R2..M-R4: the best ``topk`` clips at ≥ ``threshold`` (and ≤ ``before_clip``). ``CLIP_<n>`` ids in the
    query are ignored, as released."""
    variants = expand_query(graph, query)
    if len(variants) > MAX_VARIANTS:
        variants = graph.rng.sample(variants, MAX_VARIANTS)
    related = related_nodes(graph, query)
    vectors = list(embed(variants))
    nodes = score_text_nodes(graph, vectors, related)
    clip_scores: dict[int, float] = {}
    for node_id, score in nodes:
        clip = graph.nodes[node_id].clip
        clip_scores[clip] = max(clip_scores.get(clip, score), score)
    ranked = sorted(clip_scores.items(), key=lambda pair: pair[1], reverse=True)
    top = [c for c, s in ranked if s >= threshold and (before_clip is None or c <= before_clip)][:topk]
    return Retrieval(variants, related, nodes, clip_scores, top, list(variants))


def search(graph: MemoryGraph, query: str, embed: Embed, held_clips: list[int],
           before_clip: int | None = None) -> tuple[dict[str, list[str]], Retrieval]:
    """M-R5: the normal search. Held clips are removed after the top-2 cut (a repeated query returns nothing);
    ``held_clips`` is extended in place with the new clips; a clip without text nodes gives one line saying so.
    The result maps ``CLIP_<k>`` to its translated texts, sorted by clip number."""
    found = retrieve(graph, query, embed, NORMAL_TOPK, NORMAL_THRESHOLD, before_clip)
    new = [c for c in found.top_clips if c not in held_clips]
    held_clips.extend(new)
    result: dict[int, list[str]] = {}
    for clip in new:
        if clip not in graph.text_nodes_by_clip:
            result[clip] = [f"CLIP_{clip} not found in memory bank, please search for other information"]
        else:
            result[clip] = translate(graph, [graph.nodes[n].contents[0] for n in graph.text_nodes_by_clip[clip]])
    return {f"CLIP_{k}": v for k, v in sorted(result.items())}, found


def name_search(graph: MemoryGraph, query: str, embed: Embed,
                before_clip: int | None = None) -> tuple[dict[str, list[str]], Retrieval]:
    """M-R6: no threshold, held clips neither used nor updated; the best nodes' translated texts by clip until at
    least 20 texts; clips left empty (only equivalences) are dropped."""
    found = retrieve(graph, query, embed, NAME_TOPK, 0.0, before_clip)
    result: dict[int, list[str]] = {}
    count = 0
    for node_id, _ in found.node_scores:
        clip = graph.nodes[node_id].clip
        if before_clip is not None and clip > before_clip:
            continue
        texts = translate(graph, graph.nodes[node_id].contents)
        result.setdefault(clip, []).extend(texts)
        count += len(texts)
        if count >= NAME_TOPK:
            break
    return {f"CLIP_{k}": v for k, v in sorted(result.items()) if v}, found

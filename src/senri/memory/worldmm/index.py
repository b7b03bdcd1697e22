"""WorldMM's question-time retrieval structures: HippoRAG-2's per-granularity graph over entities and passages
(W-R1) and the semantic triples' entity PageRank (W-R3), both on :func:`senri.memory.ppr.personalized_pagerank`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from senri.memory.ppr import personalized_pagerank
from senri.memory.store import MemoryItem
from senri.memory.worldmm.common import TextVectors, Triple, entity_key, min_max, triple_text

log = logging.getLogger(__name__)


# ========================================================================================= HippoRAG index
@dataclass
class GranularityIndex:
    """One granularity's HippoRAG-2 graph: entity nodes ``0..E-1`` then passage nodes ``E..E+P-1``.

    Edges as HippoRAG-2 lists them (an ordered-pair table the undirected graph reads with every listing an edge
    of its own, so a pair listed both ways weighs twice): a triple adds 1 to (subject, object) and to (object,
    subject); a passage links to each entity of its triples with weight 1; every entity links to the entities
    whose vectors have cosine ≥ the synonymy threshold, with the cosine as weight (replacing a fact count of
    that ordered pair)."""

    passages: list[MemoryItem]
    passage_vectors: np.ndarray
    facts: list[Triple]
    fact_vectors: np.ndarray
    entities: list[str]
    entity_passages: list[set[int]]
    edges: list[tuple[int, int, float]]

    @classmethod
    def build(cls, passages: list[MemoryItem], triples: Mapping[str, list[Triple]], vectors: TextVectors,
              synonymy_threshold: float, max_synonyms: int = 100) -> "GranularityIndex":
        entity_ids: dict[str, int] = {}
        facts: dict[Triple, None] = {}
        pairs: dict[tuple[int, int], float] = {}
        passage_entities: list[set[int]] = []
        for passage in passages:
            linked: set[int] = set()
            for triple in triples.get(passage.item_id, []):
                facts.setdefault(triple, None)
                s = entity_ids.setdefault(entity_key(triple[0]), len(entity_ids))
                o = entity_ids.setdefault(entity_key(triple[2]), len(entity_ids))
                linked.update((s, o))
                if s != o:
                    pairs[(s, o)] = pairs.get((s, o), 0.0) + 1.0
                    pairs[(o, s)] = pairs.get((o, s), 0.0) + 1.0
            passage_entities.append(linked)
        entities = list(entity_ids)
        n_entities = len(entities)
        entity_passages: list[set[int]] = [set() for _ in entities]
        for p, linked in enumerate(passage_entities):
            for e in linked:
                entity_passages[e].add(p)
                pairs[(n_entities + p, e)] = 1.0
        if n_entities > 1:
            entity_vectors = vectors.matrix(entities)
            for first in range(0, n_entities, 1024):  # in blocks: a long video has tens of thousands of entities
                sims = entity_vectors[first:first + 1024] @ entity_vectors.T
                for row, e in enumerate(range(first, min(first + 1024, n_entities))):
                    close = np.flatnonzero(sims[row] >= synonymy_threshold)
                    close = close[np.argsort(-sims[row][close], kind="stable")]
                    for other in [int(o) for o in close if o != e][:max_synonyms]:
                        pairs[(e, other)] = float(sims[row][other])
        fact_list = list(facts)
        return cls(passages=passages, passage_vectors=vectors.matrix([p.text for p in passages]),
                   facts=fact_list, fact_vectors=vectors.matrix([triple_text(f) for f in fact_list]),
                   entities=entities, entity_passages=entity_passages,
                   edges=[(u, v, w) for (u, v), w in pairs.items()])

    def dense(self, query_vector: np.ndarray) -> np.ndarray:
        """Passage scores by cosine, min-max normalised (HippoRAG's dense passage retrieval)."""
        return min_max(self.passage_vectors @ query_vector)

    def retrieve(self, query: str, query_vector: np.ndarray, k: int, config: Mapping[str, Any],
                 filter_facts: Callable[[str, list[Triple]], list[Triple]], notes: list[str], label: str
                 ) -> list[tuple[MemoryItem, float]]:
        """The top ``k`` passages for ``query`` (W-R1): facts by cosine (min-max normalised) → the top
        ``link_top_k`` → the W8 filter; no fact left → dense passages; else PPR (damping, passage weight)."""
        if not self.passages:
            return []
        dense = self.dense(query_vector)
        kept: list[Triple] = []
        if self.facts:
            fact_scores = min_max(self.fact_vectors @ query_vector)
            top = [int(i) for i in np.argsort(-fact_scores, kind="stable")[: int(config.get("link_top_k", 5))]]
            candidates = [self.facts[i] for i in top]
            kept = filter_facts(query, candidates)
            score_of = {self.facts[i]: float(fact_scores[i]) for i in top}
        if not kept:
            notes.append(f"{label}: dense passages ({'no facts' if not self.facts else 'no fact kept'})")
            return self._top(dense, k)
        n_entities = len(self.entities)
        index = {name: i for i, name in enumerate(self.entities)}
        phrase = np.zeros(n_entities)
        occurs = np.zeros(n_entities)
        for fact in kept:
            for name in (fact[0], fact[2]):
                e = index.get(entity_key(name))
                if e is None:
                    continue
                weight = score_of[fact]
                if self.entity_passages[e]:
                    weight /= len(self.entity_passages[e])
                phrase[e] += weight
                occurs[e] += 1
        phrase = np.divide(phrase, occurs, out=np.zeros_like(phrase), where=occurs > 0)
        link_top_k = int(config.get("link_top_k", 5))
        if np.count_nonzero(phrase) > link_top_k:
            keep = np.argsort(-phrase, kind="stable")[:link_top_k]
            mask = np.zeros_like(phrase, dtype=bool)
            mask[keep] = True
            phrase[~mask] = 0.0
        reset = np.concatenate([phrase, dense * float(config.get("passage_node_weight", 0.05))])
        if reset.sum() <= 0:
            notes.append(f"{label}: dense passages (no weight to start the walk from)")
            return self._top(dense, k)
        scores = personalized_pagerank(n_entities + len(self.passages), self.edges, reset,
                                       damping=float(config.get("damping", 0.5)), duplicates="sum")
        notes.append(f"{label}: PPR over {len(kept)} fact(s)")
        return self._top(scores[n_entities:], k)

    def _top(self, scores: np.ndarray, k: int) -> list[tuple[MemoryItem, float]]:
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.passages[int(i)], float(scores[int(i)])) for i in order]


def semantic_ranking(triples: Sequence[Triple], triple_vectors: np.ndarray, query_vector: np.ndarray, n: int,
                     damping: float) -> list[tuple[Triple, float]]:
    """W-R3: the ``n`` triples nearest the query seed a uniform reset over their entities; PPR on the entity
    graph (one unweighted, undirected edge per triple between distinct subject and object, repeated pairs
    adding up as igraph's multigraph does) scores every triple PPR(subject) + PPR(object); the top ``n``."""
    if not triples:
        return []
    sims = triple_vectors @ query_vector
    seeds = [int(i) for i in np.argsort(-sims, kind="stable")[:n]]
    names: dict[str, int] = {}
    for s, _, o in triples:
        names.setdefault(s, len(names))
        names.setdefault(o, len(names))
    seed_entities = {names[part] for i in seeds for part in (triples[i][0], triples[i][2])}
    edges = [(names[s], names[o], 1.0) for s, _, o in triples if names[s] != names[o]]
    reset = {e: 1.0 for e in seed_entities}
    ppr = personalized_pagerank(len(names), edges, reset, damping=damping, duplicates="sum")
    scored = [(t, float(ppr[names[t[0]]] + ppr[names[t[2]]])) for t in triples]
    order = sorted(range(len(scored)), key=lambda i: -scored[i][1])[:n]
    return [scored[i] for i in order]

"""WorldMM's question-time retrieval structures: HippoRAG-2's per-granularity graph over entities and passages
(W-R1) and the semantic triples' entity PageRank (W-R3), both on :func:`senri.memory.ppr.personalized_pagerank`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from senri.memory.ppr import personalized_pagerank
from senri.memory.retrieval import cosine_rows
from senri.memory.store import MemoryItem
from senri.memory.worldmm.common import (TextVectors, Triple, fact_text, first_json, hipporag_triple,
                                         literal_value, min_max)

log = logging.getLogger(__name__)


# ========================================================================================= HippoRAG index
#: HippoRAG-2 links an entity to at most this many others by synonymy: its loop over an entity's nearest
#: neighbours stops once the count of edges added passes 100 (so 101 are added).
SYNONYMS_PER_ENTITY = 101

#: Only an entity with more than this many letters and digits gets synonymy edges of its own (HippoRAG-2's
#: rule, so "i" or "tv" links to nothing by similarity; it may still be another entity's synonym).
SYNONYM_MIN_CHARS = 2

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


#: What a level search does where the entities to seed include one of weight 0 (``zero_weight_entities``):
#: ``release`` raises :class:`ZeroWeightEntity` (HippoRAG's ``get_top_k_weights`` asserts every kept entity has
#: a weight, so the release's search raises and its evaluation loses the question); ``keep``: the walk starts
#: from the others (senri's option).
ZERO_WEIGHT_ENTITIES = ("release", "keep")


class ZeroWeightEntity(ValueError):
    """A level search whose seed entities include one of weight 0 (every kept fact naming it scored 0, the
    lowest candidate after min-max): HippoRAG's assertion fails, the release's search raises and WorldMM's
    evaluation answers "Error" for the question (counted wrong)."""


@dataclass(frozen=True)
class LevelSearch:
    """One granularity's passages scored for a query, every passage best first, and how they were scored:
    ``path`` ``ppr`` (the kept facts seeded the walk) or ``dense`` (no fact kept, or none to start from:
    HippoRAG's dense passage retrieval); ``reason`` says why for the search's notes; ``reset`` is the weight
    vector the walk started from (entities then passages, before normalisation; None on the dense path)."""

    ranked: list[tuple[MemoryItem, float]]
    path: str
    reason: str
    reset: np.ndarray | None = None

    def note(self, label: str) -> str:
        return f"{label}: {self.reason}" if self.path == "ppr" else f"{label}: dense passages ({self.reason})"


@dataclass
class GranularityIndex:
    """One granularity's HippoRAG-2 graph: entity nodes ``0..E-1`` then passage nodes ``E..E+P-1``.

    Triples are normalised first (:func:`hipporag_triple`), so entities and facts are HippoRAG's processed
    text. Edges as HippoRAG-2 lists them (an ordered-pair table the undirected graph reads with every listing an
    edge of its own, so a pair listed both ways weighs twice): a triple adds 1 to (subject, object) and to
    (object, subject); a passage links to each entity of its triples with weight 1; an entity with more than
    :data:`SYNONYM_MIN_CHARS` letters and digits links to up to :data:`SYNONYMS_PER_ENTITY` entities whose
    vectors have cosine ≥ the synonymy threshold, with the cosine as weight (replacing a fact count of that
    ordered pair)."""

    passages: list[MemoryItem]
    passage_vectors: np.ndarray
    facts: list[Triple]
    fact_vectors: np.ndarray
    entities: list[str]
    entity_passages: list[set[int]]
    edges: list[tuple[int, int, float]]

    @classmethod
    def build(cls, passages: list[MemoryItem], triples: Mapping[str, list[Triple]], vectors: TextVectors,
              synonymy_threshold: float, max_synonyms: int = SYNONYMS_PER_ENTITY) -> "GranularityIndex":
        entity_ids: dict[str, int] = {}
        facts: dict[Triple, None] = {}
        pairs: dict[tuple[int, int], float] = {}
        passage_entities: list[set[int]] = []
        for passage in passages:
            linked: set[int] = set()
            for triple in triples.get(passage.item_id, []):
                fact = hipporag_triple(triple)
                facts.setdefault(fact, None)
                s = entity_ids.setdefault(fact[0], len(entity_ids))
                o = entity_ids.setdefault(fact[2], len(entity_ids))
                linked.update((s, o))
                if s != o:  # a self-loop is counted by HippoRAG but never becomes an edge
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
            entity_vectors = entity_vectors / np.maximum(np.linalg.norm(entity_vectors, axis=1, keepdims=True), 1e-8)
            for first in range(0, n_entities, 1024):  # in blocks: a long video has tens of thousands of entities
                sims = entity_vectors[first:first + 1024] @ entity_vectors.T
                for row, e in enumerate(range(first, min(first + 1024, n_entities))):
                    if len(_NOT_ALNUM.sub("", entities[e])) <= SYNONYM_MIN_CHARS:
                        continue
                    close = np.flatnonzero(sims[row] >= synonymy_threshold)
                    close = close[np.argsort(-sims[row][close], kind="stable")]
                    for other in [int(o) for o in close if o != e and entities[int(o)]][:max_synonyms]:
                        pairs[(e, other)] = float(sims[row][other])
        fact_list = list(facts)
        return cls(passages=passages, passage_vectors=vectors.matrix([p.text for p in passages]),
                   facts=fact_list, fact_vectors=vectors.matrix([fact_text(f) for f in fact_list]),
                   entities=entities, entity_passages=entity_passages,
                   edges=[(u, v, w) for (u, v), w in pairs.items()])

    def dense(self, query_vector: np.ndarray) -> np.ndarray:
        """Passage scores by cosine, min-max normalised (HippoRAG's dense passage retrieval)."""
        return min_max(self.passage_vectors @ query_vector)

    def candidate_facts(self, query_vector: np.ndarray, link_top_k: int) -> list[tuple[Triple, float]]:
        """The ``link_top_k`` facts nearest the query with their min-max normalised cosine, best first: what the
        W8 filter is shown (HippoRAG's ``rerank_facts``); empty when the level has no facts."""
        if not self.facts:
            return []
        scores = min_max(self.fact_vectors @ query_vector)
        return [(self.facts[int(i)], float(scores[int(i)]))
                for i in np.argsort(-scores, kind="stable")[:int(link_top_k)]]

    def may_raise(self, candidates: Sequence[tuple[Triple, float]], config: Mapping[str, Any]) -> bool:
        """Whether some reply of W8 over ``candidates`` makes :meth:`search` raise :class:`ZeroWeightEntity`
        (``zero_weight_entities: release``): an entity gets weight 0 only from kept facts scored 0 (the lowest
        candidate after min-max), and a reply keeping such a fact alone seeds it with nothing else, so the search
        can raise exactly when a candidate scored 0 names an entity of the level."""
        if str(config.get("zero_weight_entities", "release")) != "release":
            return False
        names = set(self.entities)
        return any(score == 0 and (fact[0] in names or fact[2] in names) for fact, score in candidates)

    def search(self, query_vector: np.ndarray, candidates: Sequence[tuple[Triple, float]],
               kept: Sequence[Triple], config: Mapping[str, Any]) -> LevelSearch:
        """Every passage scored (W-R1) given the facts W8 kept of ``candidates``: none kept → dense passages;
        else each kept fact's score, divided by the number of passages naming the entity, is added to its
        subject and object and averaged per entity (a fact kept twice counts twice, as HippoRAG reads its
        filter's list); only the ``link_top_k`` best entities keep their weight; the passages get their dense
        score × ``passage_node_weight``; PPR (``damping``) over the graph from there."""
        dense = self.dense(query_vector)
        if not kept:
            return LevelSearch(self._order(dense), "dense", "no facts" if not candidates else "no fact kept")
        score_of = dict(candidates)
        stray = [fact for fact in kept if fact not in score_of]
        if stray:
            raise ValueError(f"kept facts {stray} are not among the candidates shown to W8")
        n_entities = len(self.entities)
        index = {name: i for i, name in enumerate(self.entities)}
        phrase = np.zeros(n_entities)
        occurs = np.zeros(n_entities)
        for fact in kept:
            for name in (fact[0], fact[2]):
                e = index.get(name)
                if e is None:
                    continue
                weight = score_of[fact]
                if self.entity_passages[e]:
                    weight /= len(self.entity_passages[e])
                phrase[e] += weight
                occurs[e] += 1
        phrase = np.divide(phrase, occurs, out=np.zeros_like(phrase), where=occurs > 0)
        link_top_k = int(config.get("link_top_k", 5))
        rule = str(config.get("zero_weight_entities", "release"))
        if rule not in ZERO_WEIGHT_ENTITIES:
            raise ValueError(f"memory_system.worldmm.episodic.zero_weight_entities: {rule!r} is not one of "
                             f"{list(ZERO_WEIGHT_ENTITIES)}")
        # HippoRAG seeds the link_top_k best entities and asserts each has a weight: one of weight 0 is among
        # them when fewer than that many entities have a positive weight
        if rule == "release" and np.count_nonzero(phrase) < min(link_top_k, int(np.count_nonzero(occurs))):
            zero = [self.entities[e] for e in np.flatnonzero((occurs > 0) & (phrase == 0))]
            raise ZeroWeightEntity(f"entities {zero} of the kept facts have weight 0 (HippoRAG's assertion in "
                                   f"get_top_k_weights: the release's search raises)")
        if np.count_nonzero(phrase) > link_top_k:
            keep = np.argsort(-phrase, kind="stable")[:link_top_k]
            mask = np.zeros_like(phrase, dtype=bool)
            mask[keep] = True
            phrase[~mask] = 0.0
        reset = np.concatenate([phrase, dense * float(config.get("passage_node_weight", 0.05))])
        if reset.sum() <= 0:
            return LevelSearch(self._order(dense), "dense", "no weight to start the walk from")
        scores = personalized_pagerank(n_entities + len(self.passages), self.edges, reset,
                                       damping=float(config.get("damping", 0.5)), duplicates="sum")
        return LevelSearch(self._order(scores[n_entities:]), "ppr", f"PPR over {len(kept)} fact(s)", reset)

    def retrieve(self, query: str, query_vector: np.ndarray, k: int, config: Mapping[str, Any],
                 filter_facts: Callable[[str, list[Triple]], list[Triple]], notes: list[str], label: str
                 ) -> list[tuple[MemoryItem, float]]:
        """The top ``k`` passages for ``query`` (W-R1): the top ``link_top_k`` facts → the W8 filter
        (``filter_facts``, not called when the level has no facts) → :meth:`search`; the path taken noted."""
        if not self.passages:
            return []
        candidates = self.candidate_facts(query_vector, int(config.get("link_top_k", 5)))
        kept = filter_facts(query, [fact for fact, _ in candidates]) if candidates else []
        found = self.search(query_vector, candidates, kept, config)
        notes.append(found.note(label))
        return found.ranked[:k]

    def _order(self, scores: np.ndarray) -> list[tuple[MemoryItem, float]]:
        order = np.argsort(-scores, kind="stable")
        return [(self.passages[int(i)], float(scores[int(i)])) for i in order]


def semantic_ranking(triples: Sequence[Triple], triple_vectors: np.ndarray, query_vector: np.ndarray, n: int,
                     damping: float, positions: bool = False) -> list[tuple[Any, float]]:
    """W-R3 as the release's ``SemanticMemory.retrieve`` computes it: the ``n`` triples of highest cosine with the
    query (torch's rule, :func:`~senri.memory.retrieval.cosine_rows`) seed a uniform reset over their entities —
    a triple's non-empty subject and object (an empty one is no entity); PPR on the entity graph (one
    unweighted, undirected edge per triple between two distinct entities, repeated pairs adding up as igraph's
    multigraph does) scores every triple PPR(subject) + PPR(object); the top ``n``, ties in the snapshot's
    order. Seeds naming no entity: the ``n`` most similar triples, best first (the release's fallback). A
    triple listed twice is two entries (two seed candidates, two edges), as the release indexes a snapshot.
    Each result is (triple, score), or (its position in ``triples``, score) with ``positions``."""
    if not triples:
        return []
    sims = cosine_rows(triple_vectors, query_vector)
    seeds = [int(i) for i in np.argsort(-sims, kind="stable")[:n]]
    names: dict[str, int] = {}
    for s, _, o in triples:
        for part in (s, o):
            if part:
                names.setdefault(part, len(names))
    seed_entities = {names[part] for i in seeds for part in (triples[i][0], triples[i][2]) if part}
    if not seed_entities:
        return [((i if positions else triples[i]), float(sims[i])) for i in seeds]
    edges = [(names[s], names[o], 1.0) for s, _, o in triples if s and o and names[s] != names[o]]
    reset = {e: 1.0 for e in seed_entities}
    ppr = personalized_pagerank(len(names), edges, reset, damping=damping, duplicates="sum")
    scores = [float((ppr[names[t[0]]] if t[0] else 0.0) + (ppr[names[t[2]]] if t[2] else 0.0)) for t in triples]
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[:n]
    return [((i if positions else triples[i]), scores[i]) for i in order]


# ============================================================================================ W8 replies
def read_filter_reply(obj: Any) -> list[list[str]] | None:
    """The facts of a W8 reply read as HippoRAG reads its filter's output: an object whose ``fact`` is a list of
    lists of strings (of any length). A reply with any other ``fact`` (one element that is not a list of
    strings) is unreadable as a whole, as the release's validation then keeps nothing; None."""
    facts = obj.get("fact") if isinstance(obj, dict) else None
    if not isinstance(facts, list):
        return None
    if not all(isinstance(f, list) and all(isinstance(part, str) for part in f) for f in facts):
        return None
    return facts


def read_filter_body(body: str) -> list[list[str]] | None:
    """The facts of a W8 reply's text, read as HippoRAG reads its filter's field: JSON first (the reply's
    objects, :func:`first_json`), then a Python literal (:func:`literal_value`: ``{'fact': [('i', 'hold',
    'cup')]}``, tuples read as lists), each through :func:`read_filter_reply`; None where neither reads."""
    found = first_json(body, read_filter_reply)
    return found if found is not None else literal_value(body, read_filter_reply)


def match_filter_reply(reply: Sequence[Sequence[str]], candidates: Sequence[Triple], limit: int) -> list[Triple]:
    """The candidates a W8 reply kept, in the reply's order: each reply fact is mapped to the candidate whose text
    is closest to its own (difflib's ratio over ``str(list(fact))`` against ``str(tuple(candidate))``, closest
    first, no cut-off: HippoRAG's DSPyFilter), so a fact copied with other case or spelling still counts and
    every reply fact maps to some candidate; a candidate named twice is kept twice; the first ``limit``."""
    import difflib

    texts = [str(tuple(c)) for c in candidates]
    kept: list[Triple] = []
    for fact in reply:
        closest = difflib.get_close_matches(str(list(fact)), texts, n=1, cutoff=0.0)
        if closest:
            kept.append(candidates[texts.index(closest[0])])
    return kept[:max(0, int(limit))]


# ============================================================================================ W9 replies
_FIRST_LIST = re.compile(r"\[.*?\]", re.DOTALL)


def parse_rank_reply(body: str, pool_ids: Sequence[str]) -> tuple[list[str], str]:
    """The caption ids of a W9 reply, read as the release's ``_parse_filter_response`` reads them, and how:

    * ``list``: the reply's first ``[...]`` span (non-greedy: up to the first ``]``) read as JSON; its ids that
      are in the pool, in the reply's order, repeats kept (an id named twice takes two of the ranking's slots);
      a list naming no pool id gives none (no other reading is tried);
    * ``substring``: no such span, or one that is not JSON: every pool id that occurs anywhere in the reply.
      The release lists them in its set's order (not reproducible from run to run); here by their first
      position in the reply, ties in pool order;
    * an empty result is the caller's to count (``failed_search_calls``) and to fill by score."""
    valid = set(pool_ids)
    match = _FIRST_LIST.search(body)
    if match:
        try:
            ids = json.loads(match.group())
        except ValueError:
            ids = None
        if isinstance(ids, list):
            return [str(i) for i in ids if str(i) in valid], "list"
    found = [(body.find(i), n, i) for n, i in enumerate(dict.fromkeys(pool_ids)) if i in body]
    return [i for _, _, i in sorted(found)], "substring"

"""MAGIC-Video's search (G-R1..R7) as pure functions: the PPR reset from text, BM25 and visual seeds, the
per-granularity quotas, the narrative-chain facts a round adds, the time-range reply reader (G13), and the
conversion of nodes and chain facts into the interface's items.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from senri.memory.magic_video.graph import (CHAIN, ENTITY, EPISODE, SEMANTIC, VISUAL, ChainRow, GraphNode,
                                            TextEncoder, hms)
from senri.memory.retrieval import cosine_rows  # noqa: F401  (re-exported: the store imports it here)
from senri.memory.store import MemoryItem


def top_seeds(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best indices as the release picks its seeds: the last ``k`` of numpy's default ``argsort`` —
    among equal scores the same ones the release's numpy takes, so a tie at the k-th place seeds the same
    nodes (a tie there moves the whole PPR)."""
    return np.argsort(scores)[-k:] if k > 0 and len(scores) else np.zeros(0, dtype=np.int64)


def seed_weights(cos: np.ndarray, bm25: np.ndarray, visual: np.ndarray | None, *, text_weight: float,
                 bm25_weight: float, visual_weight: float, seed_top_k: int) -> np.ndarray:
    """The PPR reset vector (G-R2): the top-``seed_top_k`` nodes of each channel (:func:`top_seeds`) add
    ``weight · score`` (only positive scores; BM25 clipped at 0 and divided by its maximum), normalised to sum 1.
    ``visual`` is NaN for a node without a clip embedding: the visual seeds are the best clips, as the release
    ranks only its clip nodes. All zero → uniform (as the release)."""
    reset = np.zeros(len(cos), dtype=float)

    def add(scores: np.ndarray, weight: float, among: np.ndarray | None = None) -> None:
        if weight <= 0 or not len(scores):
            return
        for j in top_seeds(scores, seed_top_k):
            i = j if among is None else among[j]
            if scores[j] > 0:
                reset[i] += weight * float(scores[j])

    add(np.asarray(cos, dtype=float), text_weight)
    clipped = np.clip(np.asarray(bm25, dtype=float), 0, None)
    top = float(clipped.max()) if len(clipped) else 0.0
    if top > 0:
        add(clipped / top, bm25_weight)
    if visual is not None:
        visual = np.asarray(visual, dtype=float)
        clips = np.flatnonzero(~np.isnan(visual))
        add(visual[clips], visual_weight, clips)
    total = reset.sum()
    return reset / total if total > 0 else np.full(len(cos), 1.0 / max(len(cos), 1))


class OkapiBM25:
    """Okapi BM25 as the release's ``rank_bm25.BM25Okapi`` scores it (``bm25: release``): idf
    log((N − df + 0.5)/(df + 0.5)), a negative idf replaced by ``epsilon`` × the mean idf, every query token
    counted as often as it occurs, the same arithmetic in the same order (its seeds' ties are the release's).
    The release tokenises by ``lower().split()`` (:func:`whitespace_tokens`)."""

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        self.freqs = [Counter(doc) for doc in corpus]
        self.doc_len = np.array([len(doc) for doc in corpus])
        self.avgdl = (float(self.doc_len.sum()) / len(corpus) or 1.0) if len(corpus) else 1.0
        df: Counter = Counter(term for doc in self.freqs for term in doc)
        idf = {term: math.log(len(corpus) - count + 0.5) - math.log(count + 0.5) for term, count in df.items()}
        eps = epsilon * (sum(idf.values()) / len(idf)) if idf else 0.0
        self.idf = {term: (eps if value < 0 else value) for term, value in idf.items()}
        self.k1, self.b = k1, b

    def scores(self, query: Sequence[str]) -> np.ndarray:
        score = np.zeros(len(self.freqs))
        norm = self.k1 * (1 - self.b + self.b * self.doc_len / self.avgdl)
        for term in query:
            q_freq = np.array([doc.get(term) or 0 for doc in self.freqs])
            score += (self.idf.get(term) or 0) * (q_freq * (self.k1 + 1) / (q_freq + norm))
        return score


def bm25_okapi(corpus: Sequence[Sequence[str]], query: Sequence[str]) -> np.ndarray:
    """:class:`OkapiBM25` scores of one query."""
    return OkapiBM25(corpus).scores(query)


def whitespace_tokens(text: str) -> list[str]:
    """The release's BM25 tokens: lower case, split on whitespace (punctuation stays on its word)."""
    return text.lower().split()


def visible_nodes(nodes: Sequence[GraphNode], query_time_s: float | None) -> np.ndarray:
    """G-R1, the release's ``filter_by_time``: episodes and clips that ended by the query time, entities first
    seen by then, and the triples of the newest semantic snapshot written by then (snapshots are cumulative;
    a triple with no snapshot time belongs to the whole video and is always shown). ``None``: the whole video
    (the generic setting, t = ∞) — still only the newest snapshot."""
    timed = [n.start_s for n in nodes if n.node_type == SEMANTIC and n.start_s is not None
             and (query_time_s is None or n.start_s <= query_time_s)]
    newest = max(timed) if timed else None
    out = np.zeros(len(nodes), dtype=bool)
    for i, n in enumerate(nodes):
        if n.node_type == SEMANTIC:
            out[i] = n.start_s is None or (newest is not None and n.start_s == newest)
        elif query_time_s is None:
            out[i] = True
        elif n.node_type == ENTITY:
            out[i] = n.start_s is not None and n.start_s <= query_time_s
        else:
            out[i] = n.end_s is not None and n.end_s <= query_time_s
    return out


def apply_quotas(ranked: Iterable[tuple[GraphNode, float]], top_k: int, level_quota: Mapping[str, int],
                 type_quota: Mapping[str, int]) -> list[tuple[GraphNode, float]]:
    """Best-first nodes under the per-granularity (episodes) and per-type quotas, at most ``top_k`` (G-R4).
    A granularity or type without a quota is unlimited."""
    out, used = [], defaultdict(int)
    for node, score in ranked:
        if len(out) >= top_k:
            break
        key = node.level if node.node_type == EPISODE else node.node_type
        quota = (level_quota if node.node_type == EPISODE else type_quota).get(key)
        if quota is not None and used[key] >= quota:
            continue
        used[key] += 1
        out.append((node, score))
    return out


@functools.lru_cache(maxsize=4096)
def entity_pattern(name: str) -> re.Pattern:
    """A name as a whole word, any case, with an optional plural and its hyphen/space variants (G-R7)."""
    e = name.lower().strip()
    variants = {e, e.replace("-", " "), e.replace("-", ""), e.replace(" ", "-"), e.replace(" ", "")}
    body = "|".join(re.escape(v) for v in sorted(variants, key=len, reverse=True) if v)
    return re.compile(r"\b(?:" + body + r")(?:s|es)?\b", re.IGNORECASE)


@dataclass(frozen=True)
class ChainLimits:
    min_hits: int = 4
    max_topics: int = 2
    max_events: int = 2
    topic_threshold: float = 0.7
    event_threshold: float = 0.7
    event_min_hits: int = 1
    event_levels: tuple[str, ...] = ("30sec", "3min")
    cover_margin_s: float = 60.0
    #: ``release``: facts after the query time are dropped only on a TS9-clock memory (``clock: day``), as the
    #: release reads only a 7-digit EgoLife query time and never filters a seconds-valued (MM-Lifelong) one;
    #: ``always``: dropped on every memory (the spec's G-R7 wording).
    time_filter: str = "release"
    #: ``release``: a fact that shows twice in one round's chains (a repeated fact, two steps alike) is shown
    #: twice, as the release does (its dedup is across rounds only); ``drop``: once.
    round_duplicates: str = "release"


#: When a round's chain facts are filtered by the query time (``chains.time_filter``).
CHAIN_TIME_FILTERS = ("release", "always")
#: How a fact repeated within one round is shown (``chains.round_duplicates``).
CHAIN_ROUND_DUPLICATES = ("release", "drop")


def chain_facts(chains: Sequence[ChainRow], retrieved: Sequence[GraphNode], question: str,
                query_time_s: float | None, limits: ChainLimits, encode: TextEncoder | None,
                day_clock: bool = False) -> tuple[list[ChainRow], dict[str, int]]:
    """The chain facts one round adds (G-R7), time-ordered, and the tier counts (for the trace).

    A topic chain qualifies when its entity's pattern hits ≥ ``min_hits`` retrieved 30-s episodes, an event chain
    when a retrieved 30-s/3-min episode starts inside ≥ ``event_min_hits`` of its steps. Tier 1: the entity (a
    key entity) is named in the *question* — taken best-hit first up to the limit; tier 2: the rest, by the
    cosine of the question to the chain's (visible) facts ≥ the threshold, filling the remaining slots. Facts
    after the query time (on a ``day_clock`` memory, or every memory with ``time_filter: always``) or within
    ``cover_margin_s`` of a retrieved episode are dropped (the episode already says it)."""
    if limits.time_filter not in CHAIN_TIME_FILTERS:
        raise ValueError(f"chains.time_filter: {limits.time_filter!r} is not one of {list(CHAIN_TIME_FILTERS)}")
    if limits.round_duplicates not in CHAIN_ROUND_DUPLICATES:
        raise ValueError(f"chains.round_duplicates: {limits.round_duplicates!r} is not one of "
                         f"{list(CHAIN_ROUND_DUPLICATES)}")
    if not (day_clock or limits.time_filter == "always"):
        query_time_s = None
    topics: dict[str, list[ChainRow]] = defaultdict(list)
    events: dict[tuple[str, int], list[ChainRow]] = defaultdict(list)  # by (name, position): the release's chains
    for row in chains:
        if row.chain_type == "topic":
            topics[row.label].append(row)
    for row in sorted((r for r in chains if r.chain_type != "topic"), key=lambda r: r.chain):
        events[(row.label, row.chain)].append(row)
    episodes = [n for n in retrieved if n.node_type == EPISODE]
    q = question.lower()
    counts = {"topic_tier1": 0, "topic_tier2": 0, "event_tier1": 0, "event_tier2": 0}

    topic_hits = {}
    for label in topics:
        pattern = entity_pattern(label)
        hits = sum(1 for n in episodes if n.level == "30sec" and pattern.search(n.text or ""))
        if hits >= limits.min_hits:
            topic_hits[label] = hits
    step_hits: dict[tuple[str, int], set[int]] = {}  # in first-hit order (episode by episode), as the release
    for n in episodes:
        if n.level not in limits.event_levels:
            continue
        for key, steps in events.items():
            for i, step in enumerate(steps):
                if step.start_s <= n.start_s <= (step.end_s if step.end_s is not None else step.start_s):
                    step_hits.setdefault(key, set()).add(i)
    event_hits = {key: len(hit) for key, hit in step_hits.items() if len(hit) >= limits.event_min_hits}

    def visible(rows: list[ChainRow]) -> list[ChainRow]:
        return [r for r in rows if query_time_s is None or not r.timed or r.start_s <= query_time_s]

    def cosines(texts: list[str]) -> np.ndarray:
        """The question's cosine to each text, as the release computes it (its 1e-8 in the denominator)."""
        vectors = np.asarray(encode([question, *texts]), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1)
        return (vectors[1:] @ vectors[0]) / (norms[1:] * norms[0] + 1e-8)

    def select(named: list, hits: Mapping[Any, int], rest: Mapping[Any, str], limit: int, threshold: float,
               kind: str) -> tuple[list, list]:
        """Tier 1: the named candidates, most hits first, up to ``limit``; tier 2: of ``rest`` (key → its text),
        those whose cosine reaches ``threshold``, best first, filling the slots left."""
        tier1 = sorted(named, key=lambda k: -hits[k])[:limit]
        tier2: list = []
        keep = [(key, t) for key, t in rest.items() if t]
        if keep and encode is not None and question and limit - len(tier1) > 0:
            sims = cosines([t for _, t in keep])
            scored = sorted(((key, float(sim)) for (key, _), sim in zip(keep, sims) if sim >= threshold),
                            key=lambda pair: -pair[1])
            tier2 = [key for key, _ in scored[:limit - len(tier1)]]
        counts[f"{kind}_tier1"] += len(tier1)
        counts[f"{kind}_tier2"] += len(tier2)
        return tier1, tier2

    def topic_named(label: str) -> bool:
        return bool(q) and bool(entity_pattern(label).search(q))

    def event_named(key: tuple[str, int]) -> bool:
        keys = [k for k in events[key][0].key_entities.split("; ") if k.strip()]
        return bool(q) and any(entity_pattern(k).search(q) for k in keys)

    topic1, topic2 = select([k for k in topic_hits if topic_named(k)], topic_hits,
                            {k: " ".join(r.text for r in visible(topics[k]) if r.text)[:2000]
                             for k in topic_hits if not topic_named(k)},
                            limits.max_topics, limits.topic_threshold, "topic")
    # the release scores an unnamed event chain by its name (all its steps' texts, no time filter), in chain
    # order: a name twice is scored on its last chain with text, at the first one's place, and shows its last
    # chain's steps
    by_name: dict[str, str] = {}
    last: dict[str, tuple[str, int]] = {}
    for key in sorted((k for k in event_hits if not event_named(k)), key=lambda k: k[1]):
        last[key[0]] = key
        text = " ".join(r.text for r in events[key] if r.text)[:2000]
        if text:
            by_name[key[0]] = text
    event1, event2 = select([k for k in event_hits if event_named(k)], event_hits, by_name, limits.max_events,
                            limits.event_threshold, "event")
    # the release's order before its stable time sort: named topics, named events, then the cosine-picked ones
    chosen = [*(topics[k] for k in topic1), *(events[k] for k in event1), *(topics[k] for k in topic2),
              *(events[last[name]] for name in event2)]
    margin = limits.cover_margin_s
    covered = [(int(n.start_s or 0) - margin, int(n.end_s or 0) + margin) for n in episodes]
    out, seen = [], set()
    for rows in chosen:
        for row in visible(rows):
            if row.timed and any(lo <= row.start_s <= hi for lo, hi in covered):
                continue
            key = (row.chain_type, row.label, row.start_s, row.text)
            if row.text and (limits.round_duplicates == "release" or key not in seen):
                seen.add(key)
                out.append(row)
    out.sort(key=lambda r: r.start_s)
    return out, counts


def chain_item(row: ChainRow) -> MemoryItem:
    """A chain fact as a text memory (no interval: it is not a clip to verify). Its id is stable, so a fact
    already shown this question is left out of later rounds by the interface's ``exclude``."""
    digest = hashlib.sha256(json.dumps([row.chain_type, row.label, row.start_s, row.text]).encode()).hexdigest()[:16]
    when = hms(row.start_s) if row.end_s is None else f"{hms(row.start_s)} - {hms(row.end_s)}"
    tag = "Topic" if row.chain_type == "topic" else "Event"
    return MemoryItem(f"chain_{digest}", CHAIN, f"[{tag}: {row.label}] [{when}] {row.text}", level=row.chain_type,
                      description=row.label)


def node_item(node: GraphNode, score: float = 0.0) -> MemoryItem:
    """A node as the interface's item: episodes and clips anchored, triples and entities not."""
    anchored = node.node_type in (EPISODE, VISUAL)
    text = node.display_text() if node.node_type == SEMANTIC else node.text
    return MemoryItem(node.node_id, node.node_type, text, node.start_s if anchored else None,
                      node.end_s if anchored else None, level=node.level, score=score)


def chain_limits(cfg: Mapping[str, Any]) -> ChainLimits:
    chains = cfg.get("chains") or {}
    defaults = ChainLimits()
    return ChainLimits(**{name: (tuple(chains[name]) if name == "event_levels" else type(getattr(defaults, name))(
        chains[name])) for name in asdict(defaults) if name in chains})


#: How G13's reply is read (``time_range_reply``).
TIME_RANGE_RULES = ("release", "lenient")


def parse_time_range(text: str, json_objects: Callable[[str], list[dict]], rule: str = "release"
                     ) -> tuple[float, float] | None:
    """G13's reply → ``(start, end)`` in seconds, or None when the query names no time.

    ``release`` (the default) reads it as the release does: the whole reply is ``null`` or one JSON object
    ``{"start": s, "end": e}``, returned as given (a point reference is the model's to widen: the prompt asks for
    the window around it; NaN or infinite bounds too, as the release returns them: no episode overlaps them). ``lenient`` takes the first such object anywhere in the reply (code fences, a
    sentence around it) and a ``null`` anywhere. A reply that is neither raises ValueError — the release then
    serves the search by PageRank, as the caller does, and the caller counts it (the time extractor failed)."""
    if rule not in TIME_RANGE_RULES:
        raise ValueError(f"memory_system.magic_video.time_range_reply: {rule!r} is not one of {list(TIME_RANGE_RULES)}")
    reply = (text or "").strip()
    if rule == "release":
        if reply.lower() == "null":
            return None
        try:
            found = [json.loads(reply)]
        except ValueError:
            found = []
    else:
        found = json_objects(reply)
        if not any(isinstance(o, dict) and "start" in o and "end" in o for o in found) \
                and re.search(r"\bnull\b", reply, re.IGNORECASE):
            return None
    for obj in found:
        if isinstance(obj, dict) and "start" in obj and "end" in obj:
            try:
                start, end = float(obj["start"]), float(obj["end"])
            except (TypeError, ValueError):
                break
            if rule == "release" or (math.isfinite(start) and math.isfinite(end)):
                return start, end  # the release passes a NaN or infinite bound on (its bypass then finds nothing)
            break
    raise ValueError(f"G13 reply is neither a time range {{\"start\", \"end\"}} nor null: {reply[:200]!r}")

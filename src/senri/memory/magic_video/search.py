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


def chain_facts(chains: Sequence[ChainRow], retrieved: Sequence[GraphNode], question: str,
                query_time_s: float | None, limits: ChainLimits, encode: TextEncoder | None
                ) -> tuple[list[ChainRow], dict[str, int]]:
    """The chain facts one round adds (G-R7), time-ordered, and the tier counts (for the trace).

    A topic chain qualifies when its entity's pattern hits ≥ ``min_hits`` retrieved 30-s episodes, an event chain
    when a retrieved 30-s/3-min episode starts inside ≥ ``event_min_hits`` of its steps. Tier 1: the entity (a
    key entity) is named in the *question* — taken best-hit first up to the limit; tier 2: the rest, by the
    cosine of the question to the chain's (visible) facts ≥ the threshold, filling the remaining slots. Facts
    after the query time or within ``cover_margin_s`` of a retrieved episode are dropped (the episode already
    says it)."""
    topics: dict[str, list[ChainRow]] = defaultdict(list)
    events: dict[str, list[ChainRow]] = defaultdict(list)
    for row in chains:
        (topics if row.chain_type == "topic" else events)[row.label].append(row)
    episodes = [n for n in retrieved if n.node_type == EPISODE]
    q = question.lower()
    counts = {"topic_tier1": 0, "topic_tier2": 0, "event_tier1": 0, "event_tier2": 0}

    topic_hits = {}
    for label in topics:
        pattern = entity_pattern(label)
        hits = sum(1 for n in episodes if n.level == "30sec" and pattern.search(n.text or ""))
        if hits >= limits.min_hits:
            topic_hits[label] = hits
    event_hits = {}
    for label, steps in events.items():
        hit_steps = {i for i, step in enumerate(steps) for n in episodes
                     if n.level in limits.event_levels and step.start_s <= n.start_s <= (step.end_s or step.start_s)}
        if len(hit_steps) >= limits.event_min_hits and hit_steps:
            event_hits[label] = len(hit_steps)

    def visible(rows: list[ChainRow]) -> list[ChainRow]:
        return [r for r in rows if query_time_s is None or r.start_s <= query_time_s]

    def select(candidates: Mapping[str, int], rows: Mapping[str, list[ChainRow]], named: Callable[[str], bool],
               limit: int, threshold: float, kind: str) -> list[str]:
        tier1 = sorted((label for label in candidates if named(label)), key=lambda lb: -candidates[lb])[:limit]
        rest = [label for label in candidates if label not in tier1]
        tier2: list[str] = []
        if rest and encode is not None and question and len(tier1) < limit:
            texts = [" ".join(r.text for r in visible(rows[label]))[:2000] for label in rest]
            keep = [(label, text) for label, text in zip(rest, texts) if text]
            if keep:
                vectors = encode([question, *[text for _, text in keep]])
                sims = vectors[1:] @ vectors[0]
                scored = sorted(((float(s), label) for s, (label, _) in zip(sims, keep) if s >= threshold),
                                reverse=True)
                tier2 = [label for _, label in scored[:limit - len(tier1)]]
        counts[f"{kind}_tier1"] += len(tier1)
        counts[f"{kind}_tier2"] += len(tier2)
        return tier1 + tier2

    def topic_named(label: str) -> bool:
        return bool(entity_pattern(label).search(q))

    def event_named(label: str) -> bool:
        keys = [k for k in events[label][0].key_entities.split("; ") if k.strip()]
        return any(entity_pattern(k).search(q) for k in keys)

    chosen = [*((label, topics) for label in select(topic_hits, topics, topic_named, limits.max_topics,
                                                     limits.topic_threshold, "topic")),
              *((label, events) for label in select(event_hits, events, event_named, limits.max_events,
                                                     limits.event_threshold, "event"))]
    margin = limits.cover_margin_s
    covered = [(n.start_s - margin, n.end_s + margin) for n in episodes]
    out, seen = [], set()
    for label, rows in chosen:
        for row in visible(rows[label]):
            if any(lo <= row.start_s <= hi for lo, hi in covered):
                continue
            key = (row.chain_type, row.label, row.start_s, row.text)
            if row.text and key not in seen:
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

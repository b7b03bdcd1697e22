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
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from senri.memory.magic_video.graph import (CHAIN, EPISODE, SEMANTIC, VISUAL, ChainRow, GraphNode, TextEncoder, hms)
from senri.memory.store import MemoryItem

def seed_weights(cos: np.ndarray, bm25: np.ndarray, visual: np.ndarray | None, *, text_weight: float,
                 bm25_weight: float, visual_weight: float, seed_top_k: int) -> np.ndarray:
    """The PPR reset vector (G-R2): the top-``seed_top_k`` nodes of each channel add ``weight · score`` (only
    positive scores; BM25 divided by its maximum), normalised to sum 1. All zero → uniform (as the release)."""
    reset = np.zeros(len(cos), dtype=float)

    def add(scores: np.ndarray, weight: float) -> None:
        if weight <= 0 or not len(scores):
            return
        for i in np.argsort(-scores, kind="stable")[:seed_top_k]:
            if scores[i] > 0:
                reset[i] += weight * float(scores[i])

    add(cos, text_weight)
    top = float(bm25.max()) if len(bm25) else 0.0
    if top > 0:
        add(np.clip(bm25, 0, None) / top, bm25_weight)
    if visual is not None:
        add(visual, visual_weight)
    total = reset.sum()
    return reset / total if total > 0 else np.full(len(cos), 1.0 / max(len(cos), 1))


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


def parse_time_range(text: str, json_objects: Callable[[str], list[dict]]) -> tuple[float, float] | None:
    """G13's reply → (start_s, end_s): ``{"start_s": a, "end_s": b}``; a point (equal ends) becomes the 30-s
    window around it; ``null`` / no object → None."""
    for obj in json_objects(text):
        if "start_s" not in obj:
            continue
        try:
            start = float(obj["start_s"])
            end = float(obj.get("end_s") if obj.get("end_s") is not None else start)
        except (TypeError, ValueError):
            return None
        if not (math.isfinite(start) and math.isfinite(end)):
            return None
        if end <= start:
            start, end = max(0.0, start - 15.0), start + 15.0
        return start, end
    return None

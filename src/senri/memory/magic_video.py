"""MAGIC-Video's persistent memory: one heterogeneous graph per video, searched by one personalized-PageRank pass.

The graph (G-C6) has four node types — *episodes* at four time scales (30-s base captions and their 3-min,
10-min and 1-h summaries), *visual* clip nodes (one per 30-s clip), *entities* (normalised names from OpenIE)
and *semantic* triples — joined by typed weighted edges. A search (G-R1..R7) seeds a reset vector from text
cosine, BM25 and (when a clip embedder exists) visual similarity, runs ONE PPR pass over the weighted
undirected graph, scores each node ``PPR · (cos + 1) / 2``, fills per-granularity quotas, and adds the
"narrative chain" facts (entity biographies and recurring-event chains) that the retrieved episodes touch.

Where the released code is specific to its own data this module makes it a named option (``magic_video.yaml``):
the IShowSpeed ASR rewrite and the speech merge (G2/G3: senri has no ASR track, so they are off), the
hard-coded time-extraction model (G13: the ``time_extractor`` role, a model config, or off), the livestream
wording of the prompts (ours are written for first-person video) and the chain limits.

Time is absolute float seconds from the video's start everywhere (the release's MM-Lifelong format).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Iterable, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.memory.ppr import personalized_pagerank
from senri.memory.retrieval import BM25
from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext

log = logging.getLogger(__name__)

#: Episode granularities, finest first; each coarser one summarises a fixed number of the one below (G-C3).
GRANULARITIES: tuple[str, ...] = ("30sec", "3min", "10min", "1h")
#: Node types (G-C6).
EPISODE, VISUAL, ENTITY, SEMANTIC, CHAIN = "episode", "visual", "entity", "semantic", "chain"
#: What a search may return (G-R4: entities are bridges only).
TARGET_TYPES: tuple[str, ...] = (EPISODE, SEMANTIC, VISUAL)

Triple = tuple[str, str, str]
TextEncoder = Callable[[Sequence[str]], np.ndarray]


# ---------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Episode:
    """One caption of one granularity, in absolute seconds."""

    level: str
    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class GraphNode:
    """One node of the graph (a row of the store's ``nodes.parquet``). ``start_s``/``end_s``: the episode's or
    clip's span, an entity's first and last mention; None for a semantic triple (snapshot "0" is the whole video)."""

    node_id: str
    node_type: str
    text: str
    start_s: float | None = None
    end_s: float | None = None
    level: str = ""
    subject: str = ""
    predicate: str = ""
    object: str = ""

    def display_text(self) -> str:
        """The node as a model (and BM25) reads it (G-R5)."""
        if self.node_type == EPISODE:
            return f"[{hms(self.start_s)} - {hms(self.end_s)}] ({self.level}) {self.text}"
        if self.node_type == SEMANTIC:
            return f"({self.subject}, {self.predicate}, {self.object})"
        if self.node_type == ENTITY:
            return f"Entity: {self.text}"
        return f"[{hms(self.start_s)} - {hms(self.end_s)}]"


@dataclass(frozen=True)
class GraphEdge:
    """A typed weighted edge, as the builder adds it (directed in the list; the PPR graph is undirected)."""

    src: str
    dst: str
    edge_type: str
    weight: float


@dataclass(frozen=True)
class ChainRow:
    """One fact of a narrative chain (a row of ``chains.parquet``): a topic chain's dated fact about ``label``
    (``end_s`` None) or one step of an event chain (its span); ``key_entities`` ``"; "``-joined (event chains)."""

    chain_type: str  # topic | event
    label: str
    start_s: float
    end_s: float | None
    text: str
    key_entities: str = ""


@dataclass
class Graph:
    nodes: dict[str, GraphNode] = field(default_factory=dict)
    edges: list[GraphEdge] = field(default_factory=list)

    def add_node(self, node: GraphNode) -> None:
        if node.node_id not in self.nodes:
            self.nodes[node.node_id] = node

    def add_edge(self, src: str, dst: str, edge_type: str, weight: float) -> None:
        if src in self.nodes and dst in self.nodes:
            self.edges.append(GraphEdge(src, dst, edge_type, float(weight)))

    def pairs(self) -> dict[tuple[str, str], tuple[str, float]]:
        """The undirected graph PPR walks: each unordered pair once, with its FIRST edge's type and weight."""
        out: dict[tuple[str, str], tuple[str, float]] = {}
        for edge in self.edges:
            key = (edge.src, edge.dst) if edge.src <= edge.dst else (edge.dst, edge.src)
            out.setdefault(key, (edge.edge_type, edge.weight))
        return out


# ------------------------------------------------------------------------------------------ ids, times


def hms(seconds: float | None) -> str:
    total = int(seconds or 0)
    return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


def parse_clock(value: Any, where: str) -> float:
    """Seconds from ``"HH:MM:SS"``, ``"MM:SS"`` or a number; ValueError naming ``where`` otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    match = re.fullmatch(r"\s*(?:DAY\d+\s+)?(\d{1,3}):(\d{2})(?::(\d{2}(?:\.\d+)?))?\s*", str(value))
    if not match:
        raise ValueError(f"{where}: {value!r} is not a time (HH:MM:SS or seconds)")
    h, m, s = match.groups()
    if s is None:  # MM:SS
        return int(h) * 60 + float(m)
    return int(h) * 3600 + int(m) * 60 + float(s)


def episode_id(start_s: float, end_s: float, level: str) -> str:
    return f"ep_{float(start_s)}_{float(end_s)}_{level}"


def visual_id(start_s: float) -> str:
    return f"vis_{int(start_s)}"


FIRST_PERSON = frozenset({"I", "i", "me", "Me", "my", "My"})


def normalise_entity(name: str, person: str = "I") -> str:
    """The entity's id suffix: lower case, spaces → ``_``; first-person words are the camera wearer."""
    stripped = str(name).strip()
    if stripped in FIRST_PERSON:
        return person.lower().replace("/", "_").replace("-", "_")
    return stripped.lower().replace(" ", "_").replace("'", "").replace("-", "_")


def entity_id(name: str, person: str = "I") -> str:
    return f"ent_{normalise_entity(name, person)}"


def semantic_id(snapshot: str, index: int) -> str:
    return f"sem_{snapshot}_{index}"


def chunk_key(text: str) -> str:
    """The release's OpenIE key of a caption (``"chunk-" + md5(text)``, G-F2)."""
    return "chunk-" + hashlib.md5(text.encode()).hexdigest()


# -------------------------------------------------------------------------------------- graph (G-C6)


def build_graph(episodes: Mapping[str, Sequence[Episode]], entities: Mapping[str, Sequence[str]],
                semantic: Sequence[Triple], *, snapshot: str = "0", person: str = "I",
                max_gap_s: float = 6 * 3600, visual_nodes: bool = True) -> Graph:
    """The heterogeneous graph of one video (G-C6).

    ``episodes`` maps a granularity to its captions; ``entities`` maps a 30-s episode's id to the entity names
    OpenIE found in it; ``semantic`` is the snapshot's triples. Edges, in the order they are added (a pair
    added twice keeps its first weight in the PPR graph, :meth:`Graph.pairs`):

    * ``temporal_next`` between consecutive episodes of one granularity whose gap is 0 ≤ gap ≤ ``max_gap_s``,
      weight 1/(gap+1), both ways;
    * ``contains`` coarse → fine for adjacent granularities (weight 1) and 1h → 30sec (0.5), when the fine
      span lies inside the coarse one;
    * ``co_clip`` visual ↔ its 30-s episode (1, both ways);
    * ``mentioned_in`` entity → 30-s episode (1), ``appeared_in`` entity → that episode's clip (0.8, once);
    * ``has_property`` subject entity → triple (1), object entity → triple (0.5), for entities already known.
    """
    graph = Graph()
    by_level: dict[str, list[GraphNode]] = {}
    for level in GRANULARITIES:
        nodes = [GraphNode(episode_id(e.start_s, e.end_s, level), EPISODE, e.text, float(e.start_s),
                           float(e.end_s), level) for e in episodes.get(level, ())]
        for node in nodes:
            graph.add_node(node)
        unique = {n.node_id: graph.nodes[n.node_id] for n in nodes}  # a repeated span is one node (its first)
        by_level[level] = sorted(unique.values(), key=lambda n: n.start_s)
    for level, nodes in by_level.items():
        for cur, nxt in zip(nodes, nodes[1:]):
            gap = nxt.start_s - cur.end_s
            if 0 <= gap <= max_gap_s:
                graph.add_edge(cur.node_id, nxt.node_id, "temporal_next", 1.0 / (gap + 1))
                graph.add_edge(nxt.node_id, cur.node_id, "temporal_next", 1.0 / (gap + 1))
    for coarse_level, fine_level, weight in (("3min", "30sec", 1.0), ("10min", "3min", 1.0), ("1h", "10min", 1.0),
                                             ("1h", "30sec", 0.5)):
        for coarse in by_level[coarse_level]:
            for fine in by_level[fine_level]:
                if coarse.start_s <= fine.start_s and fine.end_s <= coarse.end_s:
                    graph.add_edge(coarse.node_id, fine.node_id, "contains", weight)
    clip_of: dict[str, str] = {}
    if visual_nodes:
        for ep in by_level["30sec"]:
            vis = GraphNode(visual_id(ep.start_s), VISUAL, ep.text, ep.start_s, ep.end_s, "30sec")
            if vis.node_id in graph.nodes:
                continue
            graph.add_node(vis)
            clip_of[ep.node_id] = vis.node_id
            graph.add_edge(vis.node_id, ep.node_id, "co_clip", 1.0)
            graph.add_edge(ep.node_id, vis.node_id, "co_clip", 1.0)
    appeared: set[tuple[str, str]] = set()
    for ep_id, names in entities.items():
        ep = graph.nodes.get(ep_id)
        if ep is None or ep.node_type != EPISODE:
            continue
        for name in names:
            if not str(name).strip():
                continue
            ent_id = entity_id(name, person)
            known = graph.nodes.get(ent_id)
            if known is None:
                graph.add_node(GraphNode(ent_id, ENTITY, str(name).strip(), ep.start_s, ep.end_s))
            else:  # an entity spans its first to its last mention
                graph.nodes[ent_id] = GraphNode(ent_id, ENTITY, known.text, min(known.start_s, ep.start_s),
                                                max(known.end_s, ep.end_s))
            graph.add_edge(ent_id, ep_id, "mentioned_in", 1.0)
            vis_id = clip_of.get(ep_id)
            if vis_id is not None and (ent_id, vis_id) not in appeared:
                appeared.add((ent_id, vis_id))
                graph.add_edge(ent_id, vis_id, "appeared_in", 0.8)
    for index, (subj, pred, obj) in enumerate(semantic):
        sem = GraphNode(semantic_id(snapshot, index), SEMANTIC, f"{subj} {pred} {obj}", None, None, "",
                        str(subj), str(pred), str(obj))
        graph.add_node(sem)
        graph.add_edge(entity_id(subj, person), sem.node_id, "has_property", 1.0)
        graph.add_edge(entity_id(obj, person), sem.node_id, "has_property", 0.5)
    return graph


# ------------------------------------------------------------------------------------- retrieval (G-R*)


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


# ------------------------------------------------------------------------------------------ the store


NODES_FILE, EDGES_FILE, CHAINS_FILE, VECTORS_FILE, CONFIG_FILE = (
    "nodes.parquet", "edges.parquet", "chains.parquet", "vectors.npz", "config.yaml")
ITEMS_FILE, VISUAL_FILE = "items.parquet", "visual.npz"


def default_encoder() -> TextEncoder:
    """all-MiniLM-L6-v2 (the spec's Qwen3-Embedding-4B is a substitution, recorded in the store's config)."""
    from senri.memory.retrieval import Embedder

    embedder = Embedder()
    return lambda texts: embedder.encode(list(texts))


def _rows(df: pl.DataFrame, record: type, source: str) -> list[Any]:
    """A store table's records; a missing column or bad type raises ``TableError`` (a ValueError) naming the
    file and the column."""
    from senri.records import check_frame, from_frame

    return from_frame(check_frame(df, record, source), record)


class MagicVideoStore(MemoryStore):
    """A built (or imported) MAGIC-Video graph, opened read-only for one answer job."""

    system: ClassVar[str] = "magic_video"
    memory_types: ClassVar[tuple[str, ...]] = ()  # the original search action has no memory type (G-L1)
    extra_code: ClassVar[tuple[str, ...]] = ("memory/magic_video_build.py", "memory/ppr.py",
                                             "memory/clip_embedding.py", "memory/release.py", "memory/retrieval.py")

    def __init__(self, graph: Graph, chains: Sequence[ChainRow], vectors: np.ndarray, config: Mapping[str, Any],
                 encoder: TextEncoder | None = None, record: Mapping[str, Any] | None = None,
                 visual: tuple[Sequence[str], np.ndarray] | None = None,
                 visual_encoder: Callable[[str], np.ndarray] | None = None) -> None:
        self.graph = graph
        #: What the build or import recorded (the store folder's config.yaml): sources, substitutions, counts.
        self.record = dict(record or {})
        self.chains = list(chains)
        self.config = dict(config)
        self.order = list(graph.nodes)
        self.index = {nid: i for i, nid in enumerate(self.order)}
        self.nodes = [graph.nodes[nid] for nid in self.order]
        if vectors.shape[0] != len(self.order):
            raise ValueError(f"{VECTORS_FILE}: {vectors.shape[0]} vectors for {len(self.order)} nodes")
        self.vectors = vectors.astype(np.float32)
        self.edge_index = [(self.index[e.src], self.index[e.dst], e.weight) for e in graph.edges]
        self._encoder = encoder
        self._bm25: BM25 | None = None
        self._text_vectors: dict[str, np.ndarray] = {}
        #: Clip embeddings (G-C5): the visual nodes' indices and their vectors; None without an embedder.
        self.visual_index = np.zeros(0, dtype=np.int64)
        self.visual_vectors: np.ndarray | None = None
        if visual is not None:
            ids, vecs = visual
            unknown = [i for i in ids if i not in self.index]
            if unknown or len(ids) != len(vecs):
                raise ValueError(f"{VISUAL_FILE}: field 'node_ids' names {len(unknown)} unknown node(s) "
                                 f"({unknown[:3]}) or does not match its {len(vecs)} vectors")
            self.visual_index = np.array([self.index[i] for i in ids], dtype=np.int64)
            self.visual_vectors = np.asarray(vecs, dtype=np.float32)
        self._visual_encoder = visual_encoder
        #: A chain fact's time by its item id: chain items carry no interval, and G-L3 merges them by time.
        self.chain_times = {chain_item(row).item_id: row.start_s for row in self.chains}

    # ----------------------------------------------------------------------------- opening, building
    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video: Any = None,
             encoder: TextEncoder | None = None, visual_encoder: Callable[[str], np.ndarray] | None = None
             ) -> "MagicVideoStore":
        folder = Path(folder)
        for name in (NODES_FILE, EDGES_FILE, CHAINS_FILE, VECTORS_FILE):
            if not (folder / name).is_file():
                raise ValueError(f"{folder / name}: missing (the magic_video store folder is incomplete)")
        graph = Graph()
        for node in _rows(pl.read_parquet(folder / NODES_FILE), GraphNode, str(folder / NODES_FILE)):
            graph.nodes[node.node_id] = node
        for i, edge in enumerate(_rows(pl.read_parquet(folder / EDGES_FILE), GraphEdge, str(folder / EDGES_FILE))):
            for end in ("src", "dst"):
                if getattr(edge, end) not in graph.nodes:
                    raise ValueError(f"{folder / EDGES_FILE}: row {i} field {end!r}: unknown node "
                                     f"{getattr(edge, end)!r}")
            graph.edges.append(edge)
        chains = _rows(pl.read_parquet(folder / CHAINS_FILE), ChainRow, str(folder / CHAINS_FILE))
        with np.load(folder / VECTORS_FILE) as stored:
            ids, vectors = [str(i) for i in stored["node_ids"]], stored["vectors"]
        if ids != list(graph.nodes):
            raise ValueError(f"{folder / VECTORS_FILE}: field 'node_ids' does not list {NODES_FILE}'s nodes in order")
        built = {}
        if (folder / CONFIG_FILE).is_file():
            built = yaml.safe_load((folder / CONFIG_FILE).read_text()) or {}
        config = {**(built.get("system") or {}), **dict(system_config)}
        visual = None
        if (folder / VISUAL_FILE).is_file():
            with np.load(folder / VISUAL_FILE) as stored:
                visual = ([str(i) for i in stored["node_ids"]], stored["vectors"])
        return cls(graph, chains, vectors, config, encoder, built, visual, visual_encoder)

    @classmethod
    def build(cls, request: BuildRequest) -> None:
        from senri.memory.magic_video_build import build_store

        build_store(request)

    @classmethod
    def import_release(cls, import_dir: Path, request: BuildRequest) -> None:
        from senri.memory.magic_video_build import import_release

        import_release(Path(import_dir), request)

    @classmethod
    def export_inputs(cls, captions: Path, video: Any, out_dir: Path, system_config: Mapping[str, Any]
                      ) -> list[Path]:
        from senri.memory.magic_video_build import export_inputs

        return export_inputs(Path(captions), video, Path(out_dir), system_config)

    # ------------------------------------------------------------------------------------------ reading
    @property
    def retriever(self) -> str:
        return "ppr"

    def question_counts(self) -> dict[str, int]:
        """30-s clips the captioner failed on (``failed_captions``) and the builder's outputs left out of the
        store (``builder_losses``: the build record's ``builder.left_out``, failed, unreadable, empty or
        over-limit builder calls, :class:`senri.memory.magic_video_build.BuilderLLM`), booked once on every
        question that reads this memory. An imported store has no builder record (nothing of it was built)."""
        counts = {"failed_captions": int(self.record.get("failed_captions") or 0),
                  "builder_losses": self.builder_losses()}
        return {name: n for name, n in counts.items() if n}

    def builder_losses(self) -> int:
        builder = self.record.get("builder") or {}
        if "left_out" in builder or not builder:
            return int(builder.get("left_out") or 0)
        # A record written before ``left_out`` was counted: every failed, unreadable or over-limit call, an upper
        # bound (a failed G7 merge keeps its triples but is counted here).
        bound = sum(int(builder.get(name) or 0) for name in ("failed", "unparsed", "over_limits"))
        log.warning("magic_video store record has no builder.left_out: builder_losses %d is an upper bound", bound)
        return bound

    def encode_visual_query(self, query: str) -> np.ndarray:
        """The query in the clip embedder's space (its text-only last token), by the model the store was built
        with (``embedder`` in its config.yaml)."""
        if self._visual_encoder is None:
            from senri.memory.clip_embedding import open_query_encoder

            model = self.record.get("embedder")
            if not model:
                raise ValueError(f"{CONFIG_FILE}: field 'embedder' missing, but the store has clip embeddings")
            texts = open_query_encoder(model)
            self._visual_encoder = lambda query: texts([query])[0]
        return np.asarray(self._visual_encoder(query), dtype=np.float32)

    def encode_cached(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`encode`, each distinct text once per store (a chain's facts are compared with every round's
        question: they are embedded the first time only)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._text_vectors]
        if missing:
            self._text_vectors.update(zip(missing, self.encode(missing)))
        return np.stack([self._text_vectors[t] for t in texts])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._encoder is None:
            self._encoder = default_encoder()
        return np.asarray(self._encoder(texts), dtype=np.float32)

    def items(self, level: str | None = None) -> list[MemoryItem]:
        chosen = [n for n in self.nodes if n.node_type != ENTITY and (level is None or n.level == level)]
        anchored = sorted((n for n in chosen if n.start_s is not None), key=lambda n: (n.start_s, n.end_s))
        return [node_item(n) for n in anchored] + [node_item(n) for n in chosen if n.start_s is None]

    def window(self, start_s: float, end_s: float) -> list[MemoryItem]:
        return [item for item in self.items() if item.kind == EPISODE and item.start_s < end_s
                and item.end_s > start_s]

    def _visible(self, query_time_s: float | None) -> np.ndarray:
        """G-R1: episodes and clips that ended by the query time, entities seen by then, the snapshot's triples."""
        if query_time_s is None:
            return np.ones(len(self.nodes), dtype=bool)
        return np.array([n.node_type == SEMANTIC or (n.node_type == ENTITY and n.start_s <= query_time_s)
                         or (n.end_s is not None and n.end_s <= query_time_s) for n in self.nodes])

    def seeds(self, query: str, query_time_s: float | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int, float]]]:
        """(visible node indices, their text cosines, the PPR reset over them, the visible edges re-indexed):
        G-R2's seeds from text cosine, BM25 and — when the store has clip embeddings — visual similarity."""
        cfg = self.config
        visible = self._visible(query_time_s)
        keep = np.flatnonzero(visible)
        local = np.full(len(self.nodes), -1)
        local[keep] = np.arange(len(keep))
        edges = [(int(local[u]), int(local[v]), w) for u, v, w in self.edge_index if visible[u] and visible[v]]
        cos = self.vectors[keep] @ self.encode([query])[0]
        if query_time_s is None:
            self._bm25 = self._bm25 or BM25([n.display_text() for n in self.nodes])
            bm25 = self._bm25.scores(query)
        else:
            bm25 = BM25([self.nodes[i].display_text() for i in keep]).scores(query)
        visual = None
        if self.visual_vectors is not None and len(self.visual_index):
            visual = np.zeros(len(keep))
            query_vector = self.encode_visual_query(query)
            if query_vector.shape[-1] != self.visual_vectors.shape[1]:
                raise ValueError(f"{VISUAL_FILE}: field 'vectors' has {self.visual_vectors.shape[1]} dimensions, the "
                                 f"embedder's queries {query_vector.shape[-1]}: not the model the clips were embedded by")
            sims = self.visual_vectors @ query_vector
            for node, sim in zip(self.visual_index, sims):
                if visible[node]:
                    visual[local[node]] = sim
            text_weight = float(cfg.get("text_weight", 0.7))
        else:  # no clip embeddings: the spec's alpha = 1 (G-R2 without VLM2Vec)
            text_weight = float(cfg.get("text_weight_without_visual", 1.0))
        reset = seed_weights(cos, bm25, visual, text_weight=text_weight, bm25_weight=float(cfg.get("bm25_weight", 0.3)),
                             visual_weight=float(cfg.get("visual_weight", 0.3)),
                             seed_top_k=int(cfg.get("seed_top_k", 5)))
        return keep, cos, reset, edges

    def ranked(self, query: str, query_time_s: float | None = None, types: Collection[str] = TARGET_TYPES
               ) -> list[tuple[GraphNode, float]]:
        """Every visible node of ``types`` by the hybrid score ``PPR · (cos + 1) / 2`` of ONE PPR pass (G-R2, R3)."""
        if not self._visible(query_time_s).any():
            return []
        keep, cos, reset, edges = self.seeds(query, query_time_s)
        scores = personalized_pagerank(len(keep), edges, reset, damping=float(self.config.get("damping", 0.85)),
                                       duplicates="first")
        hybrid = scores * (cos + 1.0) / 2.0
        order = np.argsort(-hybrid, kind="stable")
        return [(self.nodes[keep[i]], float(hybrid[i])) for i in order if self.nodes[keep[i]].node_type in types]

    def time_range(self, query: str, context: SearchContext) -> tuple[float, float] | None:
        """G13 through ``context.ask``: the query's time range in seconds, or None (no range, or no model)."""
        from senri.backends.base import ChatRequest, Message
        from senri.answers import json_objects, split_reasoning
        from senri.prompts import prompt_set

        if context.ask is None:
            context.notes.append("time bypass: no model to ask (SearchContext.ask is None); PPR serves")
            return None
        prompts = prompt_set(self.config.get("prompts") or "magic_video", self.config.get("prompts_dir"))
        request = ChatRequest((Message.text("user", prompts.render("time_range", query=query)),),
                              max_tokens=int(self.config.get("time_range_max_tokens", 128)), purpose="magic_video:G13")
        response = context.ask(request)
        if response.error:
            context.notes.append(f"time bypass: G13 call failed ({response.error}); PPR serves")
            return None
        return parse_time_range(split_reasoning(response.text)[0], json_objects)

    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        context = context or SearchContext()
        cfg = self.config
        excluded = set(exclude)
        if memory_type is not None and memory_type not in TARGET_TYPES:
            raise ValueError(f"memory_type {memory_type!r}: magic_video searches one of {list(TARGET_TYPES)} or all")
        if cfg.get("time_bypass", True):
            span = self.time_range(query, context)
            if span is not None:
                start, end = span
                levels = tuple(cfg.get("time_bypass_levels", ("30sec", "3min")))
                hits = [n for n in self.nodes if n.node_type == EPISODE and n.level in levels
                        and n.start_s < end and n.end_s > start and n.node_id not in excluded
                        and (context.query_time_s is None or n.end_s <= context.query_time_s)]
                hits.sort(key=lambda n: (n.start_s, GRANULARITIES.index(n.level)))
                context.notes.append(f"time bypass: {start:g}-{end:g} s → {len(hits)} episode(s), no PPR")
                return [node_item(n) for n in hits]
        if cfg.get("top_k_source", "store") == "store":  # the system's own retrieval interface: 16 (G-R4)
            k = int(cfg.get("top_k", 16))
        types = TARGET_TYPES if memory_type is None else (memory_type,)
        ranked = self.ranked(query, context.query_time_s, types)
        quotas = cfg.get("quotas") or {"30sec": 8, "3min": 4, "10min": 3, "1h": 0, "semantic": 5}
        level_quota = {g: int(quotas[g]) for g in GRANULARITIES if g in quotas}
        type_quota = {t: int(quotas[t]) for t in (SEMANTIC, VISUAL) if quotas.get(t) is not None}
        if cfg.get("dedup", "after_quota") == "before_quota":
            ranked = [(n, s) for n, s in ranked if n.node_id not in excluded]
        picked = apply_quotas(ranked, k, level_quota, type_quota)
        fresh = [(n, s) for n, s in picked if n.node_id not in excluded]  # G-R4: drop ids seen before
        context.ranked = [node_item(n, s) for n, s in picked]  # the trace's hits, seen ones included
        context.notes.append(f"ppr: {len(picked)} node(s) under the quotas, {len(picked) - len(fresh)} seen before")
        items = [node_item(n, s) for n, s in fresh]
        if cfg.get("chain_facts", "in_search") == "in_search" and self.chains:
            question = context.question.question if context.question is not None else ""
            facts, counts = chain_facts(self.chains, [n for n, _ in fresh], question, context.query_time_s,
                                        chain_limits(cfg), self.encode_cached)
            chain_items = [item for item in map(chain_item, facts) if item.item_id not in excluded]
            context.notes.append("chains: " + ", ".join(f"{k} {v}" for k, v in counts.items())
                                 + f", {len(chain_items)} new fact(s)")
            items += chain_items
        return items

    def render(self, items: Sequence[MemoryItem]) -> str:
        """G-R5 / G-L3: episodes, clips and chain facts in time order, semantic triples last. A clip shows its
        caption only when its own 30-s episode is not among the items."""
        shown = {i.item_id for i in items}
        lines: list[tuple[float, int, str]] = []  # (time, episode 0 / clip 1 / chain fact 2 at one time, line)
        last: list[str] = []
        for item in items:
            if item.kind == EPISODE:
                lines.append((item.start_s, 0, f"[{hms(item.start_s)} - {hms(item.end_s)}] ({item.level}) {item.text}"))
            elif item.kind == VISUAL:
                caption = "" if episode_id(item.start_s, item.end_s, "30sec") in shown else f" {item.text}"
                lines.append((item.start_s, 1, f"[{hms(item.start_s)} - {hms(item.end_s)}] (visual){caption}"))
            elif item.kind == CHAIN:
                lines.append((self.chain_times.get(item.item_id, 0.0), 2, item.text))
            else:
                last.append(item.text)
        return "\n".join([text for _, _, text in sorted(lines, key=lambda x: x[:2])] + last)


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

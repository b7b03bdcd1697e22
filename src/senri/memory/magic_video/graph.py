"""MAGIC-Video's graph (G-C6) and the store folder's layout: node, edge and chain records, ids and times, and
:func:`build_graph`, which the build and the release import both use.

The package's modules import downward only: ``store`` → ``release`` → ``build`` → ``search`` → ``graph``.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

#: Episode granularities, finest first; each coarser one summarises a fixed number of the one below (G-C3).
GRANULARITIES: tuple[str, ...] = ("30sec", "3min", "10min", "1h")


#: Node types (G-C6).
EPISODE, VISUAL, ENTITY, SEMANTIC, CHAIN = "episode", "visual", "entity", "semantic", "chain"


#: What a search may return (G-R4: entities are bridges only).
TARGET_TYPES: tuple[str, ...] = (EPISODE, SEMANTIC, VISUAL)


Triple = tuple[str, str, str]


TextEncoder = Callable[[Sequence[str]], np.ndarray]


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


NODES_FILE, EDGES_FILE, CHAINS_FILE, VECTORS_FILE, CONFIG_FILE = (
    "nodes.parquet", "edges.parquet", "chains.parquet", "vectors.npz", "config.yaml")


ITEMS_FILE, VISUAL_FILE = "items.parquet", "visual.npz"


def default_encoder() -> TextEncoder:
    """all-MiniLM-L6-v2 (the spec's Qwen3-Embedding-4B is a substitution, recorded in the store's config)."""
    from senri.memory.retrieval import Embedder

    embedder = Embedder()
    return lambda texts: embedder.encode(list(texts))

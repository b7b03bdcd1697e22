"""MAGIC-Video's graph (G-C6) and the store folder's layout: node, edge and chain records, ids and times, and
:func:`build_graph`, which the build and the release import both use.

The package's modules import downward only: ``store`` → ``release`` → ``build`` → ``search`` → ``graph``.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace
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
    #: Whether the caption has a video clip: the release makes a clip node only for a 30-s caption with a
    #: ``video_path`` (senri's own build: every 30-s caption is a clip of the video).
    clip: bool = True


@dataclass(frozen=True)
class GraphNode:
    """One node of the graph (a row of the store's ``nodes.parquet``). ``start_s``/``end_s``: the episode's or
    clip's span, an entity's first and last mention; a semantic triple's snapshot time (both ends), None for the
    whole-video snapshot "0" senri builds (G-R1 shows a triple only in the newest snapshot by the query time)."""

    node_id: str
    node_type: str
    text: str
    start_s: float | None = None
    end_s: float | None = None
    level: str = ""
    subject: str = ""
    predicate: str = ""
    object: str = ""

    def display_text(self, clock: "Callable[[float | None], str] | None" = None) -> str:
        """The node as a model (and BM25) reads it (G-R5); ``clock`` writes its times (:func:`hms`, or
        :func:`day_clock` for multi-day EgoLife-style memories, as the release writes its DAYn timestamps)."""
        clock = clock or hms
        if self.node_type == EPISODE:
            return f"[{clock(self.start_s)} - {clock(self.end_s)}] ({self.level}) {self.text}"
        if self.node_type == SEMANTIC:
            return f"({self.subject}, {self.predicate}, {self.object})"
        if self.node_type == ENTITY:
            return f"Entity: {self.text}"
        return f"[{clock(self.start_s)} - {clock(self.end_s)}]"


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
    #: False for a topic fact whose time the release cannot read: it keeps the fact, never filtered by time nor
    #: covered by an episode, sorted first (``start_s`` 0).
    timed: bool = True
    #: An event chain's position in its file (-1: not from a file): two chains of one name stay two, as the
    #: release keys them by position.
    chain: int = -1


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


DAY_S = 86400.0


def day_clock(seconds: float | None) -> str:
    """``"DAYn HH:MM:SS"`` of absolute seconds from DAY1 00:00:00 — how the release writes an EgoLife-style
    (TS9) memory's times, which its BM25 and its models read (``clock: day``)."""
    total = int(seconds or 0)
    return f"DAY{total // int(DAY_S) + 1} {hms(total % int(DAY_S))}"


#: The store's ``clock`` setting → how node times are written.
CLOCKS: dict[str, Callable[[float | None], str]] = {"hms": hms, "day": day_clock}


def ts9_seconds(ts: int) -> float:
    """Absolute seconds of an EgoLife TS9 timestamp ``int(day digit + HHMMSSFF)`` (e.g. 111003000 = DAY1
    11:00:30 = 39630 s): (day − 1)·86400 + HH·3600 + MM·60 + SS, frames dropped (FF is always 00)."""
    digits = str(int(ts)).zfill(9)
    day, hh, mm, ss = int(digits[0]), int(digits[1:3]), int(digits[3:5]), int(digits[5:7])
    return float((day - 1) * DAY_S + hh * 3600 + mm * 60 + ss)


def release_seconds(ts: Any) -> float:
    """A release timestamp in seconds, by the release's own rule (its ``ts_to_seconds``): a float is seconds
    (MM-Lifelong), an int below 1,000,000 too, a larger int is TS9 (EgoLife)."""
    if isinstance(ts, float):
        return ts
    return float(ts) if int(ts) < 1_000_000 else ts9_seconds(int(ts))


#: The release's chain-time patterns: ``H:MM[:SS]`` (one or two hour digits, whole seconds, anything after it
#: ignored), and a topic fact's ``DAYn H:MM[:SS]``.
_HMS = re.compile(r"(\d{1,2}):(\d{2}):?(\d{2})?")
_DAY_HMS = re.compile(r"DAY(\d+)\s+(\d{1,2}):(\d{2}):?(\d{2})?")


def _hms_seconds(h: str, m: str, s: str | None) -> float:
    return float(int(h) * 3600 + int(m) * 60 + (int(s) if s else 0))


def read_clock(value: Any) -> float | None:
    """Seconds of a topic fact's time as the release's chain-facts step reads it (``_fact_time_to_day_secs``):
    ``DAYn H:MM[:SS]`` (absolute seconds from DAY1, as a TS9 memory counts them), else a leading ``H:MM[:SS]``
    after surrounding blanks (a two-part time is hours:minutes — "01:05" is 3,900 s; a fraction of a second or
    anything else after it is ignored); a finite number is seconds. None when there is no time (the release keeps
    such a fact untimed)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str) or not value:
        return None
    day = _DAY_HMS.match(value)
    if day:
        return (int(day.group(1)) - 1) * DAY_S + _hms_seconds(*day.groups()[1:])
    match = _HMS.match(value.strip())
    return _hms_seconds(*match.groups()) if match else None


def step_clock(value: Any) -> float:
    """Seconds of an event-chain step's time as the release's chain loader reads it (``_parse_hms``): a leading
    ``H:MM[:SS]`` at the very start (no ``DAYn``, no blanks: those read 0), whole seconds; 0 when unreadable; a
    finite number is seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else 0.0
    match = _HMS.match(value) if isinstance(value, str) else None
    return _hms_seconds(*match.groups()) if match else 0.0


def step_span(step: Mapping[str, Any]) -> tuple[float, float] | None:
    """An event-chain step's (start, end) in seconds as the release's chain loader reads it (:func:`step_clock`,
    an unreadable time 0); a step with both at 0 has no time and is skipped (None)."""
    start, end = step_clock(step.get("start_time", "")), step_clock(step.get("end_time", ""))
    return None if start == 0 and end == 0 else (start, end)


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


@dataclass(frozen=True)
class Snapshot:
    """One semantic-consolidation snapshot (G-F2): its key (the middle of its triples' ids ``sem_{key}_{i}``),
    when it was written (seconds; None: senri's whole-video snapshot "0") and its triples. The release's
    snapshots are cumulative — each holds every triple so far — so a search reads the newest one written by
    the query time (G-R1) while the graph holds them all."""

    key: str
    time_s: float | None
    triples: Sequence[Triple | None]  # None: a place the release's file holds something shorter (its id skipped)


def build_graph(episodes: Mapping[str, Sequence[Episode]], entities: Mapping[str, Sequence[str]],
                semantic: Sequence[Triple] | Sequence[Snapshot], *, snapshot: str = "0", person: str = "I",
                max_gap_s: float = 6 * 3600, visual_nodes: bool = True) -> Graph:
    """The heterogeneous graph of one video (G-C6), node for node and edge for edge as the release builds it.

    ``episodes`` maps a granularity to its captions; ``entities`` maps a 30-s episode's id to the entity names
    OpenIE found in it, in the release's order (a name given twice adds a second ``mentioned_in``);
    ``semantic`` is one snapshot's triples (key ``snapshot``, the whole video) or several :class:`Snapshot`.
    Edges, in the order the release adds them (a pair added twice keeps its first weight in the PPR graph,
    :meth:`Graph.pairs`):

    * ``temporal_next`` between consecutive episodes of one granularity whose gap is 0 ≤ gap ≤ ``max_gap_s``,
      weight 1/(gap+1), both ways;
    * ``contains`` coarse → fine for adjacent granularities (weight 1) and 1h → 30sec (0.5), when the fine
      span lies inside the coarse one;
    * ``co_clip`` visual ↔ its 30-s episode (1, both ways), a clip only for a 30-s caption with a clip
      (:attr:`Episode.clip`), in the captions' order, one node per whole second of start;
    * ``mentioned_in`` entity → 30-s episode (1), for every mention; then ``appeared_in`` entity → that
      episode's clip (0.8, once per pair), in the order of the mentions;
    * ``has_property`` subject entity → triple (1), object entity → triple (0.5), for entities already known.
    """
    graph = Graph()
    by_level: dict[str, list[GraphNode]] = {}
    for level in GRANULARITIES:
        nodes = [GraphNode(episode_id(e.start_s, e.end_s, level), EPISODE, e.text, float(e.start_s),
                           float(e.end_s), level) for e in episodes.get(level, ())]
        for node in nodes:
            graph.add_node(node)
        # every caption, a repeated span as often as it is given (stable by start), as the release pairs them
        by_level[level] = sorted(nodes, key=lambda n: n.start_s)
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
    clips_of: dict[str, list[str]] = {}
    if visual_nodes:
        # in the captions' order; a clip id met again (same whole second) is one node spanning to the latest end,
        # linked to each caption's episode
        for e in episodes.get("30sec", ()):
            if not e.clip:
                continue
            vis_id, ep_id = visual_id(e.start_s), episode_id(e.start_s, e.end_s, "30sec")
            known = graph.nodes.get(vis_id)
            if known is None:
                graph.add_node(GraphNode(vis_id, VISUAL, e.text, float(e.start_s), float(e.end_s), "30sec"))
            else:
                graph.nodes[vis_id] = replace(known, end_s=max(known.end_s, float(e.end_s)))
            graph.add_edge(vis_id, ep_id, "co_clip", 1.0)
            graph.add_edge(ep_id, vis_id, "co_clip", 1.0)
            clips_of.setdefault(ep_id, []).append(vis_id)
    mentions: list[tuple[str, str]] = []
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
            else:  # an entity spans its first mention's start to its latest mention's end; its first spelling
                graph.nodes[ent_id] = GraphNode(ent_id, ENTITY, known.text, known.start_s,
                                                max(known.end_s, ep.end_s))
            graph.add_edge(ent_id, ep_id, "mentioned_in", 1.0)
            mentions.append((ent_id, ep_id))
    appeared: set[tuple[str, str]] = set()
    for ent_id, ep_id in mentions:
        for vis_id in clips_of.get(ep_id, ()):
            if (ent_id, vis_id) not in appeared:
                appeared.add((ent_id, vis_id))
                graph.add_edge(ent_id, vis_id, "appeared_in", 0.8)
    snapshots = semantic if semantic and isinstance(semantic[0], Snapshot) else [Snapshot(snapshot, None, semantic)]
    for snap in snapshots:
        for index, triple in enumerate(snap.triples):
            if triple is None:
                continue
            subj, pred, obj = triple
            sem = GraphNode(semantic_id(snap.key, index), SEMANTIC, f"{subj} {pred} {obj}", snap.time_s,
                            snap.time_s, "", str(subj), str(pred), str(obj))
            graph.add_node(sem)
            graph.add_edge(entity_id(subj, person), sem.node_id, "has_property", 1.0)
            graph.add_edge(entity_id(obj, person), sem.node_id, "has_property", 0.5)
    return graph


NODES_FILE, EDGES_FILE, CHAINS_FILE, VECTORS_FILE, CONFIG_FILE = (
    "nodes.parquet", "edges.parquet", "chains.parquet", "vectors.npz", "config.yaml")


ITEMS_FILE, VISUAL_FILE = "items.parquet", "visual.npz"


def default_encoder(config: Mapping[str, Any] | None = None) -> TextEncoder:
    """all-MiniLM-L6-v2 (the spec's Qwen3-Embedding-4B is a substitution, recorded in the store's config), or the
    system config's ``text_embedder`` when it names a ``"module:Class"`` encoder of one's own (read as WorldMM
    reads its own: :func:`senri.memory.worldmm.common.open_text_encoder`; the DAG tests' hashed words spare their
    store and answer jobs torch and MiniLM)."""
    if str((config or {}).get("text_embedder", "minilm")) != "minilm":
        from senri.memory.worldmm.common import open_text_encoder

        return open_text_encoder(config or {}, key="memory_system.magic_video.text_embedder").encode
    from senri.memory.retrieval import Embedder

    embedder = Embedder.shared()
    return lambda texts: embedder.encode(list(texts))

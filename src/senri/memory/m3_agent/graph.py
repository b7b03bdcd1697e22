"""M3-Agent's memory graph (shared/spec/omni_memory.md M-C10, M-C11, M-C15..C18, M-F2, K-6..K-9).

One id counter for every node; face ("img") and voice nodes hold embeddings (capped: 10 per face node, 20 per
voice node) and contents (crops / transcripts, never capped); text nodes ("episodic" / "semantic") hold one text,
its embedding and the clip it came from. Edges are symmetric weights kept in both directions. Equivalence texts
("Equivalence: <face_1>, <voice_0>") written by the memorizer turn node ids into characters.

Release behaviour kept on purpose (the release cases computed it): a reinforcement adds 2 to each edge of the
node and a weakening deletes a weight-1 edge at once (each stored direction is visited and each visit updates
both, README §6.4 item 2); equivalence numbering follows ``list(set(node ids))`` (CPython's int-set order, the
same on every run); the unseeded draws (the embedding cap's sample, the equivalence tie's coin) come from the
graph's ``rng``, seeded from the run's seed (M-Q2, K-9; recorded in the build's summary).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

#: Node kinds (the release's names: "img" is a face node).
FACE, VOICE, EPISODIC, SEMANTIC = "img", "voice", "episodic", "semantic"
TEXT_KINDS = (EPISODIC, SEMANTIC)

#: M-C17: every ``<…_…>`` span is a candidate entity tag.
ENTITY_TAG = re.compile(r"<([^<>]*_[^<>]*)>")


@dataclass
class Node:
    id: int
    kind: str
    embeddings: list[list[float]] = field(default_factory=list)
    contents: list[Any] = field(default_factory=list)
    #: The clip a text node was written for (M-C15's ``timestamp``); None for face and voice nodes.
    clip: int | None = None


@dataclass
class GraphConfig:
    """mc (configs/memory_config.json) as released."""

    max_face_embeddings: int = 10
    max_voice_embeddings: int = 20
    face_matching_threshold: float = 0.3
    voice_matching_threshold: float = 0.6


class MemoryGraph:
    """The VideoGraph of M-F2 (rebuilt here, not unpickled; :meth:`to_dict` / :meth:`from_dict` are its file)."""

    def __init__(self, config: GraphConfig | None = None, rng: random.Random | None = None) -> None:
        self.config = config or GraphConfig()
        self.rng = rng or random.Random(0)
        self.nodes: dict[int, Node] = {}
        self.edges: dict[tuple[int, int], float] = {}
        self.text_nodes: list[int] = []
        self.text_nodes_by_clip: dict[int, list[int]] = {}
        self.event_sequence_by_clip: dict[int, list[int]] = {}
        self.next_node_id = 0
        #: Set by :meth:`refresh_equivalences`; None before (entity parsing then knows no characters).
        self.character_mappings: dict[str, list[str]] | None = None
        self.reverse_character_mappings: dict[str, str] | None = None

    # --------------------------------------------------------------------------------------------- nodes
    def _add(self, kind: str, embeddings: Sequence[Sequence[float]], contents: Sequence[Any],
             clip: int | None = None) -> int:
        node = Node(self.next_node_id, kind, [list(e) for e in embeddings], list(contents), clip)
        self.nodes[node.id] = node
        self.next_node_id += 1
        return node.id

    def add_face_node(self, embeddings: Sequence[Sequence[float]], contents: Sequence[Any]) -> int:
        return self._add(FACE, list(embeddings)[: self.config.max_face_embeddings], contents)

    def add_voice_node(self, embeddings: Sequence[Sequence[float]], contents: Sequence[Any]) -> int:
        return self._add(VOICE, list(embeddings)[: self.config.max_voice_embeddings], contents)

    def add_text_node(self, text: str, embedding: Sequence[float], clip: int, kind: str) -> int:
        """M-C15: a text node, listed in insertion order overall, by clip, and (episodic only) in the clip's
        event sequence."""
        if kind not in TEXT_KINDS:
            raise ValueError(f"text node kind must be episodic or semantic, got {kind!r}")
        node_id = self._add(kind, [embedding], [text], clip)
        self.text_nodes.append(node_id)
        self.text_nodes_by_clip.setdefault(clip, []).append(node_id)
        if kind == EPISODIC:
            self.event_sequence_by_clip.setdefault(clip, []).append(node_id)
        return node_id

    def update_node(self, node_id: int, embeddings: Sequence[Sequence[float]], contents: Sequence[Any]) -> None:
        """M-C10: contents appended; embeddings old + new, and over the cap a random sample of cap many (the
        graph's seeded ``rng``: the release draws from the unseeded global generator, M-Q2)."""
        node = self.nodes[node_id]
        node.contents.extend(contents)
        if node.kind == FACE:
            cap = self.config.max_face_embeddings
        elif node.kind == VOICE:
            cap = self.config.max_voice_embeddings
        else:
            raise ValueError(f"node {node_id} is a {node.kind} node: only face and voice nodes take embeddings")
        combined = node.embeddings + [list(e) for e in embeddings]
        node.embeddings = self.rng.sample(combined, cap) if len(combined) > cap else combined

    # --------------------------------------------------------------------------------------------- edges
    def add_edge(self, a: int, b: int, weight: float = 1.0) -> bool:
        """Both directions; refused between two text nodes of one kind (M-C15) or an unknown node."""
        if a not in self.nodes or b not in self.nodes:
            return False
        ka, kb = self.nodes[a].kind, self.nodes[b].kind
        if ka == kb and ka in TEXT_KINDS:
            return False
        self.edges[(a, b)] = weight
        self.edges[(b, a)] = weight
        return True

    def _shift_edge(self, a: int, b: int, delta: float) -> None:
        if (a, b) not in self.edges:
            return
        self.edges[(a, b)] += delta
        self.edges[(b, a)] += delta
        if self.edges[(a, b)] <= 0:
            del self.edges[(a, b)]
            del self.edges[(b, a)]

    def _shift_node(self, node_id: int, delta: float) -> None:
        # Every stored direction touching the node is visited and each visit shifts both: +2 per reinforcement,
        # and a weight-1 edge goes at the first visit of a weakening (release cases memory_insert).
        for a, b in list(self.edges):
            if node_id in (a, b):
                self._shift_edge(a, b, delta)

    def reinforce(self, node_id: int) -> None:
        self._shift_node(node_id, 1.0)

    def weaken(self, node_id: int) -> None:
        self._shift_node(node_id, -1.0)

    def connected(self, node_id: int, kinds: Iterable[str]) -> list[int]:
        """The nodes joined to ``node_id`` whose kind is one of ``kinds``, in the release's set order."""
        kinds = tuple(kinds)
        found: set[int] = set()
        for a, b in self.edges:
            if a == node_id and self.nodes[b].kind in kinds:
                found.add(b)
            elif b == node_id and self.nodes[a].kind in kinds:
                found.add(a)
        return list(set(found))

    # ----------------------------------------------------------------------------------------- entities
    def parse_entities(self, text: str) -> list[tuple[str, int]]:
        """M-C17 / K-8: the valid entity tags of ``text`` in order, as (type, id). A tag splits on "_" into
        exactly a type (stripped, lower-cased: face, voice or character) and an integer id; it is valid when the
        raw tag is a character mapping's key or value, or names a node of its type (face → face node, voice →
        voice node). ``<face_01>``, ``<FACE_1>`` parse as face 1; ``<face_1.0>``, ``<face_1_2>`` do not."""
        entities = []
        for raw in ENTITY_TAG.findall(text):
            parts = raw.split("_")
            if len(parts) != 2:
                continue
            kind = parts[0].strip().lower()
            if kind not in ("face", "voice", "character"):
                continue
            try:
                node_id = int(parts[1])
            except ValueError:
                continue
            if ((self.reverse_character_mappings is not None and raw in self.reverse_character_mappings)
                    or (self.character_mappings is not None and raw in self.character_mappings)):
                entities.append((kind, node_id))
                continue
            node = self.nodes.get(node_id)
            if node is not None and ((kind == "face" and node.kind == FACE) or (kind == "voice" and node.kind == VOICE)):
                entities.append((kind, node_id))
        return entities

    # ---------------------------------------------------------------------------------------- memories
    def insert_memories(self, texts: Sequence[str], embeddings: Sequence[Sequence[float]], clip: int,
                        kind: str) -> list[int]:
        """M-C15 / M-C16 / K-7: one clip's episodic or semantic texts into the graph; the ids of the new nodes.

        Episodic: every text a node, with an edge to each entity it names. Semantic: a text naming no entity is
        inserted; otherwise the semantic nodes joined to its FIRST entity whose own entities include all of its
        entities are compared (cosine): > 0.85 reinforces that node, < 0 weakens it, and the text is inserted
        only when no node was reinforced or weakened."""
        if kind not in TEXT_KINDS:
            raise ValueError(f"memory kind must be episodic or semantic, got {kind!r}")
        new_ids = []
        for text, embedding in zip(texts, embeddings):
            if kind == SEMANTIC:
                entities = self.parse_entities(text)
                if entities and not self._reinforced_or_weakened(entities, embedding):
                    new_ids.append(self._insert(text, embedding, clip, kind))
                elif not entities:
                    new_ids.append(self._insert(text, embedding, clip, kind))
            else:
                new_ids.append(self._insert(text, embedding, clip, kind))
        return new_ids

    def _insert(self, text: str, embedding: Sequence[float], clip: int, kind: str) -> int:
        node_id = self.add_text_node(text, embedding, clip, kind)
        for _, entity_id in self.parse_entities(text):
            self.add_edge(node_id, entity_id)
        return node_id

    def _reinforced_or_weakened(self, entities: list[tuple[str, int]], embedding: Sequence[float]) -> bool:
        touched = False
        new = np.asarray(embedding, dtype=float)
        for other in self.connected(entities[0][1], (SEMANTIC,)):
            theirs = self.parse_entities(self.nodes[other].contents[0])
            if not all(e in theirs for e in entities):
                continue
            old = np.asarray(self.nodes[other].embeddings[0], dtype=float)
            with np.errstate(invalid="ignore", divide="ignore"):
                similarity = float(np.dot(new, old) / (np.linalg.norm(new) * np.linalg.norm(old)))
            if similarity > 0.85:
                self.reinforce(other)
                touched = True
            elif similarity < 0:
                self.weaken(other)
                touched = True
        return touched

    # ------------------------------------------------------------------------------------- characters
    @staticmethod
    def _is_equivalence(text: str) -> bool:
        return text.lower().startswith("equivalence")

    def _voice_equivalences(self, voice_id: int) -> list[int]:
        """M-C18 for a voice node: its semantic neighbours, keeping at most one equivalence that names a face —
        the one with the highest edge weight, a tie decided by a coin flip (the graph's seeded ``rng``; K-9).
        (The release compares each named entity's id with the equivalence node's own id, which filters
        nothing; kept.)"""
        kept, best, best_weight = [], None, 0.0
        for node_id in self.connected(voice_id, (SEMANTIC,)):
            text = self.nodes[node_id].contents[0]
            if not self._is_equivalence(text):
                kept.append(node_id)
                continue
            others = [e for e in self.parse_entities(text) if e[1] != node_id]
            if not any(kind == "face" for kind, _ in others):
                kept.append(node_id)
                continue
            weight = self.edges[(voice_id, node_id)]
            if weight > best_weight:
                best, best_weight = node_id, weight
            elif weight == best_weight and self.rng.random() < 0.5:
                best = node_id
        if best is not None:
            kept.append(best)
        return kept

    def refresh_equivalences(self) -> None:
        """M-C18 / K-9: equivalence texts → characters (union by rank with path compression; the first entity of
        each text is its anchor); characters numbered by first insertion into the union-find, then every face
        or voice node in no equivalence gets its own, in node order."""
        chosen: list[int] = []
        for node_id, node in self.nodes.items():
            if node.kind == VOICE:
                candidates = self._voice_equivalences(node_id)
            elif node.kind == FACE:
                candidates = self.connected(node_id, (SEMANTIC,))
            else:
                continue
            chosen.extend(n for n in candidates if self._is_equivalence(self.nodes[n].contents[0]))
        parent: dict[int, int] = {}
        rank: dict[int, int] = {}

        def find(x: int) -> int:
            if x not in parent:
                parent[x], rank[x] = x, 0
                return x
            if parent[x] != x:
                parent[x] = find(parent[x])
            return parent[x]

        def union(x: int, y: int) -> None:
            rx, ry = find(x), find(y)
            if rx == ry:
                return
            if rank[rx] < rank[ry]:
                rx, ry = ry, rx
            parent[ry] = rx
            if rank[rx] == rank[ry]:
                rank[rx] += 1

        for node_id in list(set(chosen)):  # the release's order: CPython's int-set order (deterministic)
            entities = self.parse_entities(self.nodes[node_id].contents[0])
            if len(entities) >= 2:
                anchor = entities[0][1]
                for _, other in entities[1:]:
                    union(anchor, other)
        mappings: dict[str, list[str]] = {}
        root_names: dict[int, str] = {}

        def assign(x: int) -> None:
            root = find(x)
            if root not in root_names:
                root_names[root] = f"character_{len(root_names)}"
            mappings.setdefault(root_names[root], []).append(self.tag(x))

        for x in list(parent):
            assign(x)
        for x, node in self.nodes.items():
            if x not in parent and node.kind in (FACE, VOICE):
                assign(x)
        self.character_mappings = mappings
        self.reverse_character_mappings = {tag: name for name, tags in mappings.items() for tag in tags}

    def tag(self, node_id: int) -> str:
        """``face_<id>`` for a face node, ``voice_<id>`` for any other (the release's rule)."""
        return f"face_{node_id}" if self.nodes[node_id].kind == FACE else f"voice_{node_id}"

    # ------------------------------------------------------------------------------------- truncation
    def truncate_to_clip(self, clip: int, refresh: bool = True) -> None:
        """M-R1: drop every node after the last text node of ``clip`` (by id), their edges, later clips' lists;
        nothing happens when ``clip`` has no text node."""
        last = None
        for node_id, node in self.nodes.items():
            if node.kind in TEXT_KINDS and node.clip == clip:
                last = node_id
        if last is None:
            return
        self.nodes = {k: v for k, v in self.nodes.items() if k <= last}
        self.edges = {k: w for k, w in self.edges.items() if k[0] <= last and k[1] <= last}
        self.text_nodes = [n for n in self.text_nodes if n <= last]
        self.text_nodes_by_clip = {c: v for c, v in self.text_nodes_by_clip.items() if c <= clip}
        self.event_sequence_by_clip = {c: v for c, v in self.event_sequence_by_clip.items() if c <= clip}
        if refresh:
            self.refresh_equivalences()

    # ------------------------------------------------------------------------------------------- file
    def to_dict(self) -> dict[str, Any]:
        """The graph as JSON-able data (the build's memory file; M-F2's pickle, without pickle)."""
        return {
            "nodes": [{"id": n.id, "type": n.kind, "embeddings": n.embeddings, "contents": n.contents,
                       **({"clip": n.clip} if n.clip is not None else {})} for n in self.nodes.values()],
            "edges": [[a, b, w] for (a, b), w in self.edges.items() if a < b],
            "text_nodes": list(self.text_nodes),
            "text_nodes_by_clip": {str(k): v for k, v in self.text_nodes_by_clip.items()},
            "event_sequence_by_clip": {str(k): v for k, v in self.event_sequence_by_clip.items()},
            "next_node_id": self.next_node_id,
            "character_mappings": self.character_mappings,
            "config": vars(self.config),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], rng: random.Random | None = None) -> "MemoryGraph":
        graph = cls(GraphConfig(**data.get("config", {})), rng)
        for n in data["nodes"]:
            graph.nodes[int(n["id"])] = Node(int(n["id"]), n["type"], [list(e) for e in n.get("embeddings", [])],
                                             list(n.get("contents", [])), n.get("clip"))
        for a, b, w in data.get("edges", []):
            graph.edges[(int(a), int(b))] = float(w)
            graph.edges[(int(b), int(a))] = float(w)
        graph.text_nodes = [int(x) for x in data.get("text_nodes", [])]
        graph.text_nodes_by_clip = {int(k): [int(x) for x in v] for k, v in data.get("text_nodes_by_clip", {}).items()}
        graph.event_sequence_by_clip = {int(k): [int(x) for x in v]
                                        for k, v in data.get("event_sequence_by_clip", {}).items()}
        graph.next_node_id = int(data.get("next_node_id", max(graph.nodes, default=-1) + 1))
        mappings = data.get("character_mappings")
        if mappings is not None:
            graph.character_mappings = {k: list(v) for k, v in mappings.items()}
            graph.reverse_character_mappings = {t: k for k, v in mappings.items() for t in v}
        return graph

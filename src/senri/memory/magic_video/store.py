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

Time is absolute float seconds from the video's start everywhere (the release's MM-Lifelong format); an
EgoLife-style memory's TS9 timestamps map to seconds from DAY1 00:00:00 (:func:`graph.ts9_seconds`) and are
written back as ``DAYn HH:MM:SS`` with ``clock: day``. Semantic triples carry their snapshot's time: a search
reads the newest snapshot written by the query time (G-R1).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.memory.magic_video import build, release
from senri.memory.magic_video.graph import (CHAIN, CHAINS_FILE, CONFIG_FILE, EDGES_FILE, ENTITY, EPISODE,
                                            GRANULARITIES, NODES_FILE, SEMANTIC, TARGET_TYPES, VECTORS_FILE, VISUAL,
                                            CLOCKS, VISUAL_FILE, ChainRow, Graph, GraphEdge, GraphNode, TextEncoder,
                                            day_clock, default_encoder, episode_id)
from senri.memory.magic_video.search import (OkapiBM25, apply_quotas, chain_facts, chain_item, chain_limits,
                                             TIME_RANGE_RULES, cosine_rows, node_item, parse_time_range, seed_weights,
                                             visible_nodes, whitespace_tokens)
from senri.memory.ppr import personalized_pagerank
from senri.memory.retrieval import BM25
from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext

log = logging.getLogger(__name__)


#: How a search's note ends when the time bypass served it (:func:`took_bypass`).
BYPASS_TAKEN = "no PPR"


def took_bypass(notes: Sequence[str]) -> bool:
    """Whether a search's notes say the time bypass (G-R6) served it instead of the PPR pass."""
    return any(n.startswith("time bypass:") and n.endswith(BYPASS_TAKEN) for n in notes)


def _rows(df: pl.DataFrame, record: type, source: str) -> list[Any]:
    """A store table's records; a missing column or bad type raises ``TableError`` (a ValueError) naming the
    file and the column."""
    from senri.records import check_frame, from_frame

    return from_frame(check_frame(df, record, source), record)


class MagicVideoStore(MemoryStore):
    """A built (or imported) MAGIC-Video graph, opened read-only for one answer job."""

    system: ClassVar[str] = "magic_video"
    memory_types: ClassVar[tuple[str, ...]] = ()  # the original search action has no memory type (G-L1)
    query_roles: ClassVar[tuple[str, ...]] = ("time_extractor", "embedder")  # G13; the query's clip-space vector

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
        self._bm25: dict[float | None, Callable[[str], np.ndarray]] = {}  # per query time (its visible corpus)
        clock = str(self.config.get("clock", "hms"))
        if clock not in CLOCKS:
            raise ValueError(f"memory_system.magic_video.clock: {clock!r} is not one of {sorted(CLOCKS)}")
        #: How node times are written (display text, BM25 corpus, render): ``hms``, or ``day`` for DAYn clocks.
        self.clock = CLOCKS[clock]
        for key, allowed, default in (("bm25", ("release", "words"), "release"),
                                      ("time_range_reply", TIME_RANGE_RULES, "release")):
            if str(self.config.get(key, default)) not in allowed:
                raise ValueError(f"memory_system.magic_video.{key}: {self.config.get(key)!r} is not one of "
                                 f"{list(allowed)}")
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
        build.build_store(request)

    @classmethod
    def import_release(cls, import_dir: Path, request: BuildRequest) -> None:
        release.import_release(Path(import_dir), request)

    @classmethod
    def export_inputs(cls, captions: Path, video: Any, out_dir: Path, system_config: Mapping[str, Any]
                      ) -> list[Path]:
        return build.export_inputs(Path(captions), video, Path(out_dir), system_config)

    # ------------------------------------------------------------------------------------------ reading
    @property
    def retriever(self) -> str:
        return "ppr"

    def question_counts(self) -> dict[str, int]:
        """30-s clips the captioner failed on (``failed_captions``) and the builder's outputs left out of the
        store (``builder_losses``: the build record's ``builder.left_out``, failed, unreadable, empty or
        over-limit builder calls, :class:`senri.memory.magic_video.build.BuilderLLM`), booked once on every
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
            self._encoder = default_encoder(self.config)
        return np.asarray(self._encoder(texts), dtype=np.float32)

    def items(self, level: str | None = None) -> list[MemoryItem]:
        chosen = [n for n in self.nodes if n.node_type != ENTITY and (level is None or n.level == level)]
        anchored = sorted((n for n in chosen if n.node_type in (EPISODE, VISUAL)), key=lambda n: (n.start_s, n.end_s))
        return [node_item(n) for n in anchored] + [node_item(n) for n in chosen if n.node_type not in (EPISODE, VISUAL)]

    def window(self, start_s: float, end_s: float) -> list[MemoryItem]:
        return [item for item in self.items() if item.kind == EPISODE and item.start_s < end_s
                and item.end_s > start_s]

    def _visible(self, query_time_s: float | None) -> np.ndarray:
        """G-R1 (:func:`senri.memory.magic_video.search.visible_nodes`)."""
        return visible_nodes(self.nodes, query_time_s)

    def subgraph(self, query_time_s: float | None = None) -> tuple[np.ndarray, list[tuple[int, int, float]]]:
        """The graph a search at ``query_time_s`` walks (the release's ``filter_by_time``): the visible node
        indices and the edges between visible nodes, re-indexed to them, in the order they were added."""
        visible = self._visible(query_time_s)
        keep = np.flatnonzero(visible)
        local = np.full(len(self.nodes), -1)
        local[keep] = np.arange(len(keep))
        return keep, [(int(local[u]), int(local[v]), w) for u, v, w in self.edge_index if visible[u] and visible[v]]

    def bm25_scores(self, query: str, keep: np.ndarray, query_time_s: float | None) -> np.ndarray:
        """BM25 of ``query`` over the visible nodes' display text (G-R2), one index per query time. ``bm25:
        release``: Okapi BM25 on whitespace tokens (the release's rank_bm25); ``words``: senri's BM25 on ``\\w+``
        words (punctuation does not hide a word: "scissors?" matches "scissors")."""
        scorer = self._bm25.get(query_time_s)
        if scorer is None:
            texts = [self.nodes[i].display_text(self.clock) for i in keep]
            rule = str(self.config.get("bm25", "release"))
            if rule == "release":
                okapi = OkapiBM25([whitespace_tokens(t) for t in texts])
                scorer = lambda q: okapi.scores(whitespace_tokens(q))  # noqa: E731
            else:
                scorer = BM25(texts).scores
            if len(self._bm25) >= 8:  # a few query times at once (EgoLife questions each have their own)
                self._bm25.clear()
            self._bm25[query_time_s] = scorer
        return scorer(query)

    def seeds(self, query: str, query_time_s: float | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int, float]]]:
        """(visible node indices, their text cosines, the PPR reset over them, the visible edges re-indexed):
        G-R2's seeds from text cosine, BM25 and — when the store has clip embeddings — visual similarity."""
        cfg = self.config
        keep, edges = self.subgraph(query_time_s)
        local = {int(node): i for i, node in enumerate(keep)}
        cos = cosine_rows(self.vectors[keep], self.encode([query])[0])
        bm25 = self.bm25_scores(query, keep, query_time_s)
        visual = None
        if self.visual_vectors is not None and len(self.visual_index):
            visual = np.full(len(keep), np.nan)
            query_vector = self.encode_visual_query(query)
            if query_vector.shape[-1] != self.visual_vectors.shape[1]:
                raise ValueError(f"{VISUAL_FILE}: field 'vectors' has {self.visual_vectors.shape[1]} dimensions, the "
                                 f"embedder's queries {query_vector.shape[-1]}: not the model the clips were embedded by")
            sims = cosine_rows(self.visual_vectors, query_vector)
            for node, sim in zip(self.visual_index, sims):
                if int(node) in local:
                    visual[local[int(node)]] = sim
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

    def time_range_max_tokens(self) -> int:
        """G13's completion limit: ``time_range_max_tokens`` (4096, as senri's roles get; the release sends none),
        bounded by the time extractor's model config's ``max_tokens_cap`` where the role names one (a null role's
        stand-in, the answering model, is bounded by the method:
        :class:`senri.methods.magic_video.MagicVideoWorkflow`)."""
        from senri.backends.budget import within_cap

        role = ((self.config.get("model_configs") or {}).get("time_extractor")) or {}  # {"name", "config"}
        return within_cap(int(self.config.get("time_range_max_tokens", 4096)),
                          role.get("config") if isinstance(role, Mapping) else None)

    def time_range(self, query: str, context: SearchContext) -> tuple[float, float] | None:
        """G13 through ``context.ask``: the query's time range in seconds, or None — no range, no model, a failed
        call (the method books it), or an unreadable reply (read by ``time_range_reply``, :func:`parse_time_range`;
        booked here as ``failed_search_calls``: the time extractor failed and PageRank serves, as in the release)."""
        from senri.backends.base import ChatRequest, Message
        from senri.answers import json_objects, split_reasoning
        from senri.prompts import prompt_set

        if context.ask is None:
            context.notes.append("time bypass: no model to ask (SearchContext.ask is None); PPR serves")
            return None
        prompts = prompt_set(self.config.get("prompts") or "magic_video", self.config.get("prompts_dir"))
        request = ChatRequest((Message.text("user", prompts.render("time_range", query=query)),),
                              max_tokens=self.time_range_max_tokens(), purpose="magic_video:G13")
        response = context.ask(request, "time_extractor")
        if response.error:
            context.notes.append(f"time bypass: G13 call failed ({response.error}); PPR serves")
            return None
        try:
            return parse_time_range(split_reasoning(response.text or "")[0], json_objects,
                                    str(self.config.get("time_range_reply", "release")))
        except ValueError as exc:
            context.notes.append(f"time bypass: unreadable reply ({exc}); PPR serves")
            if context.tally is not None:
                context.tally.count("failed_search_calls")
            return None

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
                        and n.start_s < end and n.end_s > start and n.node_id not in excluded and n.text.strip()
                        and (context.query_time_s is None or n.end_s <= context.query_time_s)]
                hits.sort(key=lambda n: (n.start_s, GRANULARITIES.index(n.level)))
                context.notes.append(f"time bypass: {start:g}-{end:g} s → {len(hits)} episode(s), {BYPASS_TAKEN}")
                if context.tally is not None:
                    context.tally.did("bypasses")
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
                                        chain_limits(cfg), self.encode_cached, day_clock=self.clock is day_clock)
            chain_items = [item for item in map(chain_item, facts) if item.item_id not in excluded]
            context.notes.append("chains: " + ", ".join(f"{k} {v}" for k, v in counts.items())
                                 + f", {len(chain_items)} new fact(s)")
            items += chain_items
        return items

    def render(self, items: Sequence[MemoryItem]) -> str:
        """G-R5 / G-L3: episodes, clips and chain facts in time order, semantic triples last. A clip shows its
        caption only when its own 30-s episode is not among the items."""
        shown = {i.item_id for i in items}
        clock = self.clock
        lines: list[tuple[float, int, str]] = []  # (time, episode 0 / clip 1 / chain fact 2 at one time, line)
        last: list[str] = []
        for item in items:
            if item.kind == EPISODE:
                span = f"[{clock(item.start_s)} - {clock(item.end_s)}]"
                lines.append((item.start_s, 0, f"{span} ({item.level}) {item.text}"))
            elif item.kind == VISUAL:
                caption = "" if episode_id(item.start_s, item.end_s, "30sec") in shown else f" {item.text}"
                lines.append((item.start_s, 1, f"[{clock(item.start_s)} - {clock(item.end_s)}] (visual){caption}"))
            elif item.kind == CHAIN:
                lines.append((self.chain_times.get(item.item_id, 0.0), 2, item.text))
            else:
                last.append(item.text)
        return "\n".join([text for _, _, text in sorted(lines, key=lambda x: x[:2])] + last)

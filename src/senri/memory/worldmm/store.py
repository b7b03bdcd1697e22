"""WorldMM's persistent memory (episodic at several time scales, semantic triples, visual clips), as a store.

Restated from ``shared/spec/memory_systems.md`` (the W-* statements; prompt roles W1–W11 live in
``config/prompts/worldmm/``), written in our own code:

* **Build** (W-C2…C8). The configured captioner describes the video in 10-s clips through the shared
  :class:`~senri.memory.hierarchy.CaptionService` (a failed clip leaves no caption). Coarser episodic levels
  30sec / 3min / 10min are summarised *from the level below* by the summariser role (W3), in windows anchored
  as WorldMM anchors them (:func:`window_batches`). Every caption of every level goes through OpenIE (W4
  entities, then W5 triples; malformed and duplicate triples dropped): the 10sec triples feed semantic memory,
  all of them index HippoRAG's graph. Semantic memory extracts lasting triples from every 10 consecutive
  10sec captions (W6) and consolidates them into cumulative snapshots (W7), keyed by the last caption's end.
  Visual memory embeds each 10-s clip with an image-text embedder, only when one is configured.
* **Retrieval** (W-R0…R4). Episodic: HippoRAG-2-style retrieval per granularity (fact cosine → top facts →
  the W8 filter → personalized PageRank over entities and passages, or dense passages when no fact survives),
  a pool ranked by W9, the seen texts dropped. Semantic: PPR over the entity graph of the snapshot visible at
  the question's time, seeded by the triples nearest the query. Visual: a time-range query returns the
  overlapping clips, any other query the clips nearest by text→clip similarity.

Builder calls go through backends opened from the build's model configs with the build job's response cache;
retrieval calls (W8, W9) through :attr:`SearchContext.ask`, so they are booked in the question's tally. The
spec's Qwen3-Embedding-4B text embedder is replaced by MiniLM (:class:`senri.memory.retrieval.Embedder`),
recorded in the store's ``config.yaml``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext
from senri.memory.worldmm.build import build_store, builder_losses
from senri.memory.worldmm.common import (BASE_LEVEL, ITEMS, KIND_EPISODIC, KIND_SEMANTIC, KIND_VISUAL, SNAPSHOTS,
                                         SYSTEM, TRIPLES, VECTORS, VISUAL, CONFIG, TextEncoder, TextVectors, Triple,
                                         _triples_reply, clock, day_of, entity_key, first_json, open_text_encoder,
                                         parse_time_range, semantic_item, span_label, system_prompts)
from senri.memory.worldmm.index import GranularityIndex, semantic_ranking
from senri.memory.worldmm.release import export_inputs, import_release

log = logging.getLogger(__name__)


def _read(folder: Path, name: str, record: type) -> pl.DataFrame:
    from senri.records import TableError, read_table

    path = folder / name
    if not path.is_file():
        raise ValueError(f"{path}: missing (a WorldMM store folder holds {name})")
    try:
        return read_table(path, record)
    except TableError as exc:
        raise ValueError(str(exc)) from exc


class WorldMMStore(MemoryStore):
    """WorldMM's memory of one video, opened read-only (see the module docstring)."""

    system: ClassVar[str] = SYSTEM
    memory_types: ClassVar[tuple[str, ...]] = (KIND_EPISODIC, KIND_SEMANTIC, KIND_VISUAL)
    #: The shared modules its results depend on (its own package's modules are all in the digest already).
    extra_code: ClassVar[tuple[str, ...]] = ("memory/ppr.py", "memory/clip_embedding.py", "memory/release.py",
                                             "memory/retrieval.py")

    def __init__(self, folder: Path, config: Mapping[str, Any], video: Any, encoder: TextEncoder | None = None
                 ) -> None:
        from senri.records import WorldMMSnapshot, WorldMMTriple

        self.folder, self.config, self.video = Path(folder), dict(config), video
        self.prompts = system_prompts(self.config)
        self._items = [MemoryItem(**row) for row in _read(self.folder, ITEMS, MemoryItem).iter_rows(named=True)]
        self._by_id = {item.item_id: item for item in self._items}
        self.triples: dict[str, list[Triple]] = {}
        for row in _read(self.folder, TRIPLES, WorldMMTriple).iter_rows(named=True):
            self.triples.setdefault(row["passage_id"], []).append((row["subject"], row["predicate"], row["object"]))
        snapshots = _read(self.folder, SNAPSHOTS, WorldMMSnapshot).sort(["key_s", "position"])
        self.snapshots: list[tuple[float, list[Triple]]] = [
            (float(key), [(r["subject"], r["predicate"], r["object"]) for r in group.iter_rows(named=True)])
            for (key,), group in snapshots.group_by(["key_s"], maintain_order=True)]
        self.encoder = encoder or open_text_encoder(self.config)
        self.vectors = TextVectors.load(self.folder / VECTORS, self.encoder)
        self.visual = self._load_visual()
        self._indexes: dict[tuple[str, float | None], GranularityIndex] = {}

    # --------------------------------------------------------------------------------------- open/build
    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video: Any) -> "WorldMMStore":
        return cls(Path(folder), system_config, video)

    @classmethod
    def build(cls, request: BuildRequest) -> None:
        build_store(request)

    @classmethod
    def import_release(cls, import_dir: Path, request: BuildRequest) -> None:
        import_release(Path(import_dir), request)

    @classmethod
    def export_inputs(cls, captions: Path, video: Any, out_dir: Path, system_config: Mapping[str, Any]
                      ) -> list[Path]:
        return export_inputs(Path(captions), video, Path(out_dir), system_config)

    # ------------------------------------------------------------------------------------------ reading
    @property
    def retriever(self) -> str:
        return "hipporag_ppr"

    def record(self) -> dict[str, Any]:
        """The store's ``config.yaml``: how it was built or imported, its substitutions and counts."""
        path = self.folder / CONFIG
        return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}

    def question_counts(self) -> dict[str, int]:
        """Every question over this store books its 10-s clips that have no caption (``failed_captions``), as
        questions over the caption store do, and what the builder left out (``builder_losses``,
        :func:`builder_losses`): a memory with holes shows on every row that read it."""
        counts = self.record().get("counts") or {}
        return {"failed_captions": int(counts.get("failed_captions", 0)), "builder_losses": builder_losses(counts)}

    def items(self, level: str | None = None) -> list[MemoryItem]:
        chosen = [i for i in self._items if level is None or i.level == level]
        return sorted(chosen, key=lambda i: (not i.anchored, i.start_s or 0.0, i.end_s or 0.0, i.level, i.item_id))

    def render(self, items: Sequence[MemoryItem]) -> str:
        """Episodic items as ``[DAY1 HH:MM:SS - DAY1 HH:MM:SS]`` + newline + text; semantic triples as
        ``(s, p, o)`` (no time); visual clips not at all (their frames are the content, W-R4)."""
        blocks = []
        for item in items:
            if item.kind == KIND_EPISODIC:
                blocks.append(f"[{span_label(item.start_s, item.end_s)}]\n{item.text}")
            elif item.kind == KIND_SEMANTIC:
                blocks.append(item.text)
        return "\n\n".join(blocks)

    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        context = context or SearchContext()
        self.check_memory_type(memory_type)
        kind = memory_type or str(self.config.get("default_memory_type", KIND_EPISODIC))
        search = {KIND_EPISODIC: self.search_episodic, KIND_SEMANTIC: self.search_semantic,
                  KIND_VISUAL: self.search_visual}.get(kind)
        if search is None:
            raise ValueError(f"memory_system.worldmm.default_memory_type: {kind!r} is not one of "
                             f"{', '.join(self.memory_types)}")
        return search(query, k, exclude, context)

    # ---------------------------------------------------------------------------------------- episodic
    def _visible(self, item: MemoryItem, t: float | None) -> bool:
        return t is None or (item.end_s is not None and item.end_s <= t)

    def index(self, level: str, t: float | None) -> GranularityIndex:
        key = (level, t)
        if key not in self._indexes:
            passages = [i for i in self.items(level) if i.kind == KIND_EPISODIC and self._visible(i, t)]
            episodic = self.config.get("episodic") or {}
            self._indexes[key] = GranularityIndex.build(passages, self.triples, self.vectors,
                                                        float(episodic.get("synonymy_threshold", 0.8)))
        return self._indexes[key]

    def search_episodic(self, query: str, k: int, exclude: Collection[str], context: SearchContext
                        ) -> list[MemoryItem]:
        """W-R1/W-R2: per granularity the top k_g passages, a pool of them all; a pool larger than 2k is ranked
        by W9 (the shortfall filled by score) down to 2k; texts retrieved before are dropped; the first k."""
        config = self.config.get("episodic") or {}
        ks = config.get("k") or {}
        qv = self.vectors.encoder.encode([query])[0]
        pool: list[tuple[MemoryItem, float]] = []
        for level in config.get("granularities") or [BASE_LEVEL]:
            index = self.index(str(level), context.query_time_s)
            k_level = int(ks.get(level, config.get("default_k", 5)))
            pool += index.retrieve(query, qv, k_level, config, lambda q, facts: self.filter_facts(q, facts, context),
                                   context.notes, str(level))
        ranked = self.rank_pool(query, pool, 2 * k, context)
        seen_texts = {self._by_id[i].text for i in exclude if i in self._by_id}
        fresh = [replace(item, score=score) for item, score in ranked
                 if item.item_id not in exclude and item.text not in seen_texts]
        return fresh[:k]

    def _ask_json(self, context: SearchContext, text: str, purpose: str, validate: Callable[[Any], Any]) -> Any:
        """One retriever call through ``context.ask`` (booked in the question's tally), read as JSON; None when
        it fails or does not parse (the caller falls back and notes it)."""
        from senri.answers import split_reasoning
        from senri.backends.base import ChatRequest, Message

        # No schema: the store does not know the method's backend; the prompt asks for JSON only.
        request = ChatRequest(messages=(Message.text("user", text),),
                              max_tokens=int((self.config.get("max_tokens") or {}).get("retriever", 512)),
                              purpose=purpose)
        response = context.ask(request, "retriever")
        if response.error:
            return None
        return first_json(split_reasoning(response.text)[0], validate)

    def filter_facts(self, query: str, facts: list[Triple], context: SearchContext) -> list[Triple]:
        """W8: the retriever keeps the facts relevant to the query (matched back to the candidates, in its
        order). Without ``ask`` (or when the reply fails) every candidate is kept, and the note says so."""
        if context.ask is None:
            context.notes.append("W8 fact filter skipped (no retriever call available): top facts kept")
            return facts
        known = {tuple(entity_key(p) for p in f): f for f in facts}
        text = self.prompts.render("fact_filter", query=query, n=len(facts),
                                   facts=json.dumps({"fact": [list(f) for f in facts]}, ensure_ascii=False))

        def valid(obj: Any) -> Any:
            return _triples_reply(obj, "fact")

        reply = self._ask_json(context, text, "worldmm:fact_filter", valid)
        if reply is None:
            context.notes.append("W8 fact filter reply unreadable: top facts kept")
            return facts
        kept: list[Triple] = []
        for fact in reply:
            if isinstance(fact, list) and len(fact) == 3:
                match = known.get(tuple(entity_key(str(p)) for p in fact))
                if match is not None and match not in kept:
                    kept.append(match)
        return kept

    def rank_pool(self, query: str, pool: list[tuple[MemoryItem, float]], n: int, context: SearchContext
                  ) -> list[tuple[MemoryItem, float]]:
        """W9 over a pool larger than ``n``: the retriever's ids first (unknown ids ignored), then the rest of
        the pool by score until ``n``. A pool of ``n`` or fewer is kept in order."""
        if len(pool) <= n:
            return pool
        by_score = sorted(pool, key=lambda entry: -entry[1])
        if context.ask is None:
            context.notes.append("W9 ranking skipped (no retriever call available): pool ranked by score")
            return by_score[:n]
        listing = [{"id": item.item_id, "granularity": item.level, "start_time": f"DAY{day_of(item.start_s)} "
                    f"{clock(item.start_s)}", "end_time": f"DAY{day_of(item.end_s)} {clock(item.end_s)}",
                    "text": item.text} for item, _ in pool]
        text = self.prompts.render("rank", query=query, n=n, captions=json.dumps(listing, ensure_ascii=False,
                                                                                  indent=1))

        def valid(obj: Any) -> Any:
            return [str(v) for v in obj] if isinstance(obj, list) else None

        ids = self._ask_json(context, text, "worldmm:rank", valid)
        if ids is None:
            context.notes.append("W9 ranking reply unreadable: pool ranked by score")
            ids = []
        entry_of = {item.item_id: (item, score) for item, score in pool}
        chosen = list(dict.fromkeys(i for i in ids if i in entry_of))[:n]
        ranked = [entry_of[i] for i in chosen]
        for item, score in by_score:
            if len(ranked) >= n:
                break
            if item.item_id not in chosen:
                ranked.append((item, score))
        return ranked

    # ---------------------------------------------------------------------------------------- semantic
    def snapshot(self, t: float | None) -> tuple[float, list[Triple]] | None:
        """W-F3/W-R0: the latest cumulative snapshot whose key (its last caption's end) is ≤ ``t``."""
        visible = [s for s in self.snapshots if t is None or s[0] <= t]
        return visible[-1] if visible else None

    def search_semantic(self, query: str, k: int, exclude: Collection[str], context: SearchContext
                        ) -> list[MemoryItem]:
        """W-R3: 2k triples ranked by entity PPR, those retrieved before dropped, the first k."""
        found = self.snapshot(context.query_time_s)
        if found is None or not found[1]:
            context.notes.append("semantic: no snapshot visible at the query time")
            return []
        triples = list(dict.fromkeys(found[1]))
        config = self.config.get("semantic_retrieval") or {}
        qv = self.vectors.encoder.encode([query])[0]
        ranked = semantic_ranking(triples, self.vectors.matrix([" ".join(t) for t in triples]), qv, 2 * k,
                                  float(config.get("damping", 0.85)))
        context.notes.append(f"semantic: PPR over snapshot {found[0]:g} s ({len(triples)} triples)")
        items = [semantic_item(t, score) for t, score in ranked]
        return [i for i in items if i.item_id not in exclude][:k]

    # ------------------------------------------------------------------------------------------ visual
    def _load_visual(self) -> dict[str, Any] | None:
        path = self.folder / VISUAL
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as data:
            return {"start_s": data["start_s"], "end_s": data["end_s"], "vectors": data["vectors"],
                    "embedder": str(data["embedder"])}

    def search_visual(self, query: str, k: int, exclude: Collection[str], context: SearchContext
                      ) -> list[MemoryItem]:
        """W-R4: a ``DAY d HH:MM:SS - DAY d HH:MM:SS`` query returns every clip overlapping the range (the
        interval cut to the overlap); any other query the k clips nearest by text→clip similarity. Clips are
        not dropped when seen before (WorldMM does not)."""
        config = self.config.get("visual") or {}
        if self.visual is None:
            context.notes.append("visual memory skipped (no embedder configured)")
            return []
        clips = [i for i in self.items() if i.kind == KIND_VISUAL and self._visible(i, context.query_time_s)]
        bounds = parse_time_range(query)
        if bounds is not None:
            start, end = bounds
            relative = str(config.get("range_offsets", "absolute")) == "clip_relative"
            out = []
            for clip in clips:
                if clip.start_s <= end and clip.end_s >= start:
                    lo, hi = max(start, clip.start_s), min(end, clip.end_s)
                    if relative:  # W-R5 replicated: offsets from the clip's start, read from the whole video
                        lo, hi = lo - clip.start_s, hi - clip.start_s
                    out.append(replace(clip, start_s=lo, end_s=hi, score=1.0))
            context.notes.append(f"visual: time range {span_label(start, end)} → {len(out)} clip(s)")
            return out
        try:
            encode = self._text_tower()
        except ValueError as exc:
            context.notes.append(f"visual: text→clip search unavailable ({exc})")
            return []
        qv = encode([query])[0]
        sims = self.visual["vectors"] @ qv
        by_start = {float(c.start_s): c for c in clips}
        order = [int(i) for i in np.argsort(-sims, kind="stable")]
        out = [replace(by_start[float(self.visual["start_s"][i])], score=float(sims[i])) for i in order
               if float(self.visual["start_s"][i]) in by_start]
        context.notes.append("visual: text→clip similarity")
        return out[:k]

    def _text_tower(self) -> Callable[[Sequence[str]], np.ndarray]:
        """The query encoder of the embedder the clips were embedded with (recorded in ``config.yaml``)."""
        if getattr(self, "_tower", None) is None:
            from senri.memory.clip_embedding import open_query_encoder

            self._tower = open_query_encoder((self.record().get("embedder_model") or {}).get("config"))
        return self._tower

    def summary(self) -> dict[str, Any]:
        summary = super().summary()
        summary["snapshots"] = len(self.snapshots)
        summary["visual"] = "on" if self.visual is not None else "skipped (no embedder configured)"
        return summary

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
  Visual memory holds every 10-s clip (what its time-range queries read, no embedding needed) and embeds each
  with an image-text embedder when one is configured (what its text queries need).
* **Retrieval** (W-R0…R4). Episodic: HippoRAG-2-style retrieval per granularity (fact cosine → top facts →
  the W8 filter, its reply matched to the closest candidates → personalized PageRank over entities and
  passages, or dense passages when no fact survives or the reply cannot be read), a pool ranked by W9, the
  texts earlier episodic searches returned dropped. Semantic: PPR over the entity graph of the snapshot visible at
  the question's time, seeded by the triples nearest the query. Visual: a time-range query returns the
  overlapping clips (with or without clip embeddings), any other query the clips nearest by text→clip
  similarity (none without embeddings, noted).

Builder calls go through backends opened from the build's model configs with the build job's response cache;
retrieval calls (W8, W9) through :attr:`SearchContext.ask` on the retriever role's model, so they are booked
in the question's tally, and sized to that model's context where the context can say
(``SearchContext.overflow``, given by every memory method). The spec's Qwen3-Embedding-4B text embedder is
replaced by MiniLM (:class:`senri.memory.retrieval.Embedder`), recorded in the store's ``config.yaml``.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Iterable, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext
from senri.memory.worldmm.build import build_store, builder_losses, truncated_captions, visual_status
from senri.memory.worldmm.common import (BASE_LEVEL, ITEMS, KIND_EPISODIC, KIND_SEMANTIC, KIND_VISUAL, SNAPSHOTS,
                                         SYSTEM, TRIPLES, VECTORS, VISUAL, CONFIG, FILTER_SKIP_NOTE, RETRIEVER_ROLE,
                                         TextEncoder, TextVectors, Triple, clock, cut_text, day_of, occurrences,
                                         open_text_encoder, parse_time_range, semantic_item, span_label,
                                         system_prompts)
from senri.memory.worldmm.index import (GranularityIndex, match_filter_reply, parse_rank_reply, read_filter_body,
                                        semantic_ranking)
from senri.memory.worldmm.release import export_inputs, import_release

log = logging.getLogger(__name__)


#: W9's listing is cut no shorter than this many characters per caption (halving from the longest caption).
MIN_CUT_CHARS = 16


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
    query_roles: ClassVar[tuple[str, ...]] = (RETRIEVER_ROLE, "embedder")  # W8/W9; the visual search's text tower

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
        questions over the caption store do, its captions of any level kept although cut at their token limit
        (``truncated_captions``, :func:`truncated_captions`: a cut 10-s caption feeds every coarser level, the
        graph and the semantic triples, so the whole memory carries it, like a failed one) and what the builder
        left out (``builder_losses``, :func:`builder_losses`): a memory with holes shows on every row that read
        it."""
        counts = self.record().get("counts") or {}
        return {"failed_captions": int(counts.get("failed_captions", 0)),
                "truncated_captions": truncated_captions(counts), "builder_losses": builder_losses(counts)}

    def items(self, level: str | None = None) -> list[MemoryItem]:
        chosen = [i for i in self._items if level is None or i.level == level]
        return sorted(chosen, key=lambda i: (not i.anchored, i.start_s or 0.0, i.end_s or 0.0, i.level, i.item_id))

    def render(self, items: Sequence[MemoryItem]) -> str:
        """Episodic items as ``[DAY1 HH:MM:SS - DAY1 HH:MM:SS]`` + newline + text, a blank line between them;
        semantic triples as ``(s, p, o)`` (no time), one a line, as the release lists them; visual clips not at
        all (their frames are the content, W-R4)."""
        out = ""
        previous = None
        for item in items:
            if item.kind == KIND_EPISODIC:
                block = f"[{span_label(item.start_s, item.end_s)}]\n{item.text}"
            elif item.kind == KIND_SEMANTIC:
                block = item.text
            else:
                continue
            if previous is not None:
                out += "\n" if previous == item.kind == KIND_SEMANTIC else "\n\n"
            out += block
            previous = item.kind
        return out

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
        by W9 (the shortfall filled by score) down to 2k; texts an episodic search returned before, or returned
        earlier in this list, are dropped; the first k.

        Only episodic texts are "seen": a visual clip retrieved before carries its 10-s caption as its text but
        showed the model frames only, and the release keeps visual clips apart by their time-range label, so
        the caption stays findable.

        A level holding a single passage has its W8 call put off (:meth:`_put_off_filter`): that passage is in
        the pool whatever W8 keeps, at the same place, and the W9 listing shows no scores, so only a ranking
        that reads scores (a pool ranked by score, or W9's shortfall) needs its PPR score; then the call is
        made, else it is skipped and noted (``FILTER_SKIP_NOTE``). The returned items and their order are the
        same either way; only the trace's score of a skipped level's passage is its dense score.
        A level whose W8 reply could make its search raise (:meth:`GranularityIndex.may_raise`: a candidate
        scored 0 under ``zero_weight_entities: release``) is never put off: there the reply decides whether the
        question is lost, so skipping the call could change the result.
        ``put_off_single_passage_filter: false`` makes every level's W8 call up front, as the release does."""
        config = self.config.get("episodic") or {}
        ks = config.get("k") or {}
        link_top_k = int(config.get("link_top_k", 5))
        skip_small = bool(config.get("skip_filter_when_level_fits", False))
        put_off_single = bool(config.get("put_off_single_passage_filter", True))
        qv = self.vectors.encoder.encode([query])[0]
        pool: list[tuple[MemoryItem, float]] = []
        put_off: dict[str, tuple[str, GranularityIndex, list[tuple[Triple, float]]]] = {}
        for level in (str(name) for name in config.get("granularities") or [BASE_LEVEL]):
            index = self.index(level, context.query_time_s)
            if not index.passages:
                continue
            k_level = int(ks.get(level, config.get("default_k", 5)))
            candidates = index.candidate_facts(qv, link_top_k)
            if (candidates and context.ask is not None and len(index.passages) == 1 and put_off_single
                    and not index.may_raise(candidates, config)):
                put_off[index.passages[0].item_id] = (level, index, candidates)
                pool.append((index.passages[0], math.nan))
                continue
            if candidates and context.ask is not None and skip_small and len(index.passages) <= k_level:
                found = index.search(qv, candidates, [], config)
                context.notes.append(f"{level}: {FILTER_SKIP_NOTE} ({len(index.passages)} passage(s) ≤ k "
                                     f"{k_level}, skip_filter_when_level_fits): dense passages")
            else:
                kept = self.filter_facts(query, [fact for fact, _ in candidates], context) if candidates else []
                found = index.search(qv, candidates, kept, config)
                context.notes.append(found.note(level))
            pool += found.ranked[:k_level]

        def scored(entries: list[tuple[MemoryItem, float]]) -> list[tuple[MemoryItem, float]]:
            return [(item, self._put_off_filter(query, qv, put_off.pop(item.item_id), context, config)
                     if item.item_id in put_off else score) for item, score in entries]

        ranked = self.rank_pool(query, pool, 2 * k, context, scored)
        dense = {item_id: float(index.dense(qv)[0]) for item_id, (_, index, _) in put_off.items()}
        for level, _, _ in put_off.values():
            context.notes.append(f"{level}: {FILTER_SKIP_NOTE}: its one passage is in the pool whatever W8 keeps "
                                 f"and no ranking read its score (its dense score is shown)")
        seen = {self._by_id[i].text for i in exclude if i in self._by_id and self._by_id[i].kind == KIND_EPISODIC}
        fresh: list[MemoryItem] = []
        for item, score in ranked:
            if item.item_id in exclude or item.text in seen:
                continue
            seen.add(item.text)
            fresh.append(replace(item, score=dense.get(item.item_id, score)))
        return fresh[:k]

    def _put_off_filter(self, query: str, qv: np.ndarray, held: tuple[str, GranularityIndex, list],
                        context: SearchContext, config: Mapping[str, Any]) -> float:
        """The PPR score of a one-passage level whose W8 call was put off, the call made now that a ranking
        reads the score (the same request it would have been)."""
        level, index, candidates = held
        found = index.search(qv, candidates, self.filter_facts(query, [f for f, _ in candidates], context), config)
        context.notes.append(f"{found.note(level)} (its W8 call made when the ranking read the score)")
        return found.ranked[0][1]

    def _fitted(self, context: SearchContext, requests: Iterable[Any], what: str) -> Any:
        """The first of ``requests`` (the full one first, then ever smaller ones) that fits the retriever's
        model by the context's ``overflow`` (:class:`senri.memory.store.SearchContext`); a trimmed one is counted
        ``context_trims`` and noted; when none fits, the smallest is sent (its failure is the search's
        fallback). A context that cannot size requests gets the full one."""
        overflow = context.overflow
        chosen, trims, why = None, -1, None
        for chosen in requests:
            trims += 1
            why = overflow(chosen, RETRIEVER_ROLE) if overflow is not None else None
            if why is None:
                break
        if trims > 0:
            if context.tally is not None:
                context.tally.count("context_trims")
            context.notes.append(f"{what} trimmed {trims} step(s) to fit the retriever's context"
                                 + (f"; still over it: {why}" if why else ""))
        return chosen

    def _ask(self, context: SearchContext, request: Any) -> tuple[str | None, str | None]:
        """One retriever call through ``context.ask`` (booked in the question's tally): (the reply's text,
        reasoning cut off, None), or (None, why) when the call failed (the method's ``ask`` counts that)."""
        from senri.answers import split_reasoning

        response = context.ask(request, RETRIEVER_ROLE)
        if response.error:
            return None, f"call failed ({response.error})"
        return split_reasoning(response.text)[0], None

    @staticmethod
    def _failed(context: SearchContext) -> None:
        """A retriever reply the search could not use (counted ``failed_search_calls``: it took its fallback)."""
        if context.tally is not None:
            context.tally.count("failed_search_calls")

    def _retriever_request(self, text: str, purpose: str) -> Any:
        """A W8/W9 request: completion limit ``max_tokens.retriever`` (the release sends none; 4096 as
        SENRI-Agent's roles get), bounded by the retriever model config's ``max_tokens_cap`` where the store
        knows it (``model_configs.retriever``; the answering model's cap, where it stands in, is the method's)."""
        from senri.backends.base import ChatRequest, Message

        from senri.backends.budget import within_cap

        spec = (self.config.get("model_configs") or {}).get(RETRIEVER_ROLE)
        limit = within_cap(int((self.config.get("max_tokens") or {}).get("retriever", 4096)),
                           spec.get("config") if isinstance(spec, Mapping) else None)
        # No schema: the store does not know the retriever's backend; the prompt asks for JSON only.
        return ChatRequest(messages=(Message.text("user", text),), max_tokens=limit, purpose=purpose)

    def _filter_examples(self) -> list[str]:
        """W8's worked examples (``fact_filter_examples.txt``), one block each, blank lines between blocks."""
        try:
            text = self.prompts["fact_filter_examples"].render()
        except (FileNotFoundError, ValueError):
            return []
        return [block.strip() for block in re.split(r"\n\s*\n", text) if block.strip()]

    def filter_facts(self, query: str, facts: list[Triple], context: SearchContext) -> list[Triple]:
        """W8: the retriever keeps the facts relevant to the query; each fact of its reply is matched to the
        closest candidate (:func:`match_filter_reply`, HippoRAG's rule), at most ``link_top_k``. The reply is
        read as JSON, then as a Python literal (:func:`read_filter_body`). A failed call or an unreadable reply
        (counted ``failed_search_calls``) keeps no fact, so the level falls back to dense passages, as the release's
        filter does. The request is sized to the retriever's context by leaving out worked examples, the last
        first. Without ``ask`` every candidate is kept, and the note says so."""
        if context.ask is None:
            context.notes.append("W8 fact filter skipped (no retriever call available): top facts kept")
            return facts
        examples = self._filter_examples()
        listing = json.dumps({"fact": [list(f) for f in facts]}, ensure_ascii=False)

        def requests() -> Iterable[Any]:
            for shown in range(len(examples), -1, -1):
                yield self._retriever_request(self.prompts.render(
                    "fact_filter", query=query, n=len(facts), facts=listing,
                    examples="\n\n".join(examples[:shown])), "worldmm:fact_filter")

        request = self._fitted(context, requests(), "W8 fact filter (worked examples left out)")
        body, why = self._ask(context, request)
        reply = read_filter_body(body) if body is not None else None
        if reply is None:
            if body is not None:
                self._failed(context)
                why = "reply unreadable"
            context.notes.append(f"W8 fact filter {why}: no fact kept")
            return []
        return match_filter_reply(reply, facts, int((self.config.get("episodic") or {}).get("link_top_k", 5)))

    def rank_pool(self, query: str, pool: list[tuple[MemoryItem, float]], n: int, context: SearchContext,
                  scored: Callable[[list], list] | None = None) -> list[tuple[MemoryItem, float]]:
        """W9 over a pool larger than ``n``, as the release ranks it: the ids of the retriever's reply
        (:func:`parse_rank_reply`: its first JSON list, else the pool ids found in the reply's text), in its
        order, unknown ids ignored and a repeated id kept (it takes a second slot; the search then drops the
        repeated text), the first ``n``; then the rest of the pool by score until ``n``. A reply giving no pool
        id (a list of unknown ids, an empty list, text naming none) is counted ``failed_search_calls``; it, and
        a failed call, leave the whole ranking to the score. ``episodic.rank_unique_ids: true`` drops an id's
        repeats first (each id then takes one slot). A pool of ``n`` or fewer is kept in order. ``scored``
        gives the pool with every score known (a put-off W8 call made), called only where a score is read. The
        request is sized to the retriever's context by cutting every caption text in the listing to one length."""
        if len(pool) <= n:
            return pool
        scored = scored or (lambda entries: entries)
        if context.ask is None:
            context.notes.append("W9 ranking skipped (no retriever call available): pool ranked by score")
            return sorted(scored(pool), key=lambda entry: -entry[1])[:n]

        def requests() -> Iterable[Any]:
            longest = max(len(item.text) for item, _ in pool)
            limits = [None] + [longest >> shift for shift in range(1, 16) if longest >> shift >= MIN_CUT_CHARS]
            for limit in limits:
                listing = [{"id": item.item_id, "granularity": item.level, "start_time": f"DAY{day_of(item.start_s)} "
                            f"{clock(item.start_s)}", "end_time": f"DAY{day_of(item.end_s)} {clock(item.end_s)}",
                            "text": cut_text(item.text, limit)} for item, _ in pool]
                yield self._retriever_request(self.prompts.render(
                    "rank", query=query, n=n, captions=json.dumps(listing, ensure_ascii=False, indent=1)),
                    "worldmm:rank")

        request = self._fitted(context, requests(), "W9 ranking (caption texts cut)")
        body, why = self._ask(context, request)
        ids: list[str] = []
        if body is not None:
            ids, how = parse_rank_reply(body, [item.item_id for item, _ in pool])
            if not ids:
                self._failed(context)
                why = f"reply names no caption id of the pool (read as a {how})"
            elif how == "substring":
                context.notes.append(f"W9 ranking: no JSON list in the reply; {len(ids)} pool id(s) found in its text")
        if why is not None:
            context.notes.append(f"W9 ranking {why}: pool ranked by score")
        if bool((self.config.get("episodic") or {}).get("rank_unique_ids", False)):
            ids = list(dict.fromkeys(ids))
        chosen = ids[:n]
        if len(chosen) < n:
            pool = scored(pool)
        entry_of = {item.item_id: (item, score) for item, score in pool}
        ranked = [entry_of[i] for i in chosen]
        for item, score in sorted(pool, key=lambda entry: -entry[1]):
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
        """W-R3: 2k triples ranked by entity PPR, those retrieved before dropped, the first k. A triple the
        snapshot holds twice stays twice, as in the release: each copy a seed candidate, an edge and an item
        of its own (:func:`~senri.memory.worldmm.common.semantic_item`'s occurrence id)."""
        found = self.snapshot(context.query_time_s)
        if found is None or not found[1]:
            context.notes.append("semantic: no snapshot visible at the query time")
            return []
        triples = list(found[1])
        config = self.config.get("semantic_retrieval") or {}
        qv = self.vectors.encoder.encode([query])[0]
        ranked = semantic_ranking(triples, self.vectors.matrix([" ".join(t) for t in triples]), qv, 2 * k,
                                  float(config.get("damping", 0.85)), positions=True)
        context.notes.append(f"semantic: PPR over snapshot {found[0]:g} s ({len(triples)} triples)")
        nth = occurrences(triples)
        items = [semantic_item(triples[i], score, nth[i]) for i, score in ranked]
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
        """W-R4: a time-range query (:func:`~senri.memory.worldmm.common.parse_time_range`: ``DAY d HH:MM:SS -
        DAY d HH:MM:SS``) returns every clip overlapping the range (the interval cut to the overlap; a clip that
        only touches it has an empty overlap and shows no frame), whether or not the clips were embedded: the
        release's range path reads frames only. Any other query returns the k clips nearest by text→clip
        similarity, which needs the clip embeddings (none built: nothing, noted). Clips are not dropped when
        seen before (WorldMM does not)."""
        config = self.config.get("visual") or {}
        clips = [i for i in self.items() if i.kind == KIND_VISUAL and self._visible(i, context.query_time_s)]
        bounds = parse_time_range(query)
        if bounds is not None:
            start, end = bounds
            relative = str(config.get("range_offsets", "absolute")) == "clip_relative"
            out = []
            for clip in clips:
                lo, hi = max(start, clip.start_s), min(end, clip.end_s)
                if clip.start_s <= end and clip.end_s >= start and lo <= hi:
                    if relative:  # W-R5 replicated: offsets from the clip's start, read from the whole video
                        lo, hi = lo - clip.start_s, hi - clip.start_s
                    out.append(replace(clip, start_s=lo, end_s=hi, score=1.0))
            context.notes.append(f"visual: time range {span_label(start, end)} → {len(out)} clip(s)")
            return out
        if self.visual is None:
            context.notes.append("visual: text→clip search unavailable (no clip embeddings: no embedder was "
                                 "configured); time-range queries are served")
            return []
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
        summary["visual"] = visual_status(self.visual is not None)
        return summary

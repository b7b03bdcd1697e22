"""Building a WorldMM store (W-C2…C8): 10-s captions through the shared caption service, coarser levels
summarised level on level (W3), OpenIE (W4/W5) of every level, cumulative semantic snapshots (W6/W7), the 10-s
clips of visual memory (embedded when an embedder is configured), and the store folder with its ``config.yaml``
record.

Builder calls go through backends opened from the build's model configs with the build job's response cache,
so a killed build repeats no finished call.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.backends.budget import within_cap
from senri.memory.cost import RoleCost, role_cost, write_cost
from senri.memory.store import BuildRequest, MemoryItem
from senri.memory.worldmm.common import (BASE_LEVEL, CONFIG, ENTITIES, ITEMS, KIND_EPISODIC, KIND_VISUAL, SNAPSHOTS,
                                         SYSTEM, TRIPLES, VECTORS, VISUAL, TextVectors, Triple, _string_list,
                                         _triples_reply, clean_triples, fact_text, first_json, hipporag_triple,
                                         item_id, occurrences, open_text_encoder, semantic_item, system_prompts,
                                         window_batches)
from senri.repetition import looping

log = logging.getLogger(__name__)


# =============================================================================================== builder LLM
@dataclass
class RoleStats(RoleCost):
    """A builder role's calls, failures, replies cut at their completion limit (``finish_reason: length``),
    tokens and model seconds (:class:`senri.memory.cost.RoleCost`), and WorldMM's own: unreadable replies,
    requests shortened to fit the context, and cut replies resent with a higher limit."""

    malformed: int = 0
    trimmed: int = 0
    resent: int = 0
    #: cut replies not resent because they end in a repetition loop (a higher limit only makes the loop longer)
    looped: int = 0


#: How many times one builder request cut at its completion limit is resent with a doubled limit (×8 at most),
#: whatever the model config allows: a model that never stops must not make the build loop.
MAX_RESENDS = 3


#: The builder roles that are chat models (``embedder`` is an image-text model, opened by the visual builder).
LLM_ROLES = ("summariser", "extractor", "retriever")


class BuilderLLM:
    """The build's model roles (summariser, extractor, retriever): one backend per model config, behind the
    build job's response cache, with WorldMM's prompts; structured replies are read with the project's JSON
    reader, resent with a higher completion limit when cut at it, else repaired once."""

    def __init__(self, request: BuildRequest, prompts, max_tokens: Mapping[str, int]) -> None:
        from senri.backends import open_backend

        self.prompts = prompts
        #: How many times a reply cut at its completion limit is sent again with a higher limit (the system
        #: config's ``cut_reply_resends``; 0: a cut reply gets the repair turn, as any unreadable one).
        self.resends = int(request.system_config.get("cut_reply_resends", MAX_RESENDS))
        self.max_tokens = dict(max_tokens)
        self.backends: dict[str, Any] = {}
        self.role_model: dict[str, str] = {}
        opened: dict[str, Any] = {}
        for role, model in request.models.items():
            if model is None or role not in LLM_ROLES:
                continue
            name, config = model
            if name not in opened:
                opened[name] = open_backend(dict(config), request.response_cache)
            self.backends[role] = opened[name]
            self.role_model[role] = name
        self.stats: dict[str, RoleStats] = {}

    def has(self, role: str) -> bool:
        return self.backends.get(role) is not None

    def close(self) -> None:
        for backend in {id(b): b for b in self.backends.values() if b is not None}.values():
            backend.close()

    def _request(self, role: str, text: str, schema: Mapping[str, Any] | None, purpose: str):
        from senri.backends.base import ChatRequest, Message
        from senri.backends.base import request_schema

        backend = self.backends[role]
        limit = within_cap(int(self.max_tokens.get(role, backend.config.get("max_tokens", 512))), backend.config)
        return ChatRequest(messages=(Message.text("user", text),), max_tokens=limit,
                           temperature=float(backend.config.get("temperature", 0.0)),
                           json_schema=request_schema(backend, schema) if schema else None, purpose=purpose)

    def fit(self, role: str, render: Callable[[str], str], body: str, schema, purpose: str):
        """The request of ``render(body)``, its ``body`` shortened (its tail cut, in halves) until the model's
        context holds it; each cut counted in the role's ``trimmed``."""
        from senri.backends.budget import overflow

        backend = self.backends[role]
        request = self._request(role, render(body), schema, purpose)
        while overflow(backend, request) is not None and len(body) > 200:
            body = body[: len(body) // 2] + " …"
            self.stats.setdefault(role, RoleStats()).trimmed += 1
            request = self._request(role, render(body), schema, purpose)
        return request

    def send(self, role: str, requests: list) -> list:
        stats = self.stats.setdefault(role, RoleStats())
        responses = self.backends[role].complete_many(requests) if requests else []
        for response in responses:
            stats.add(response)
        return responses

    def texts(self, role: str, requests: list) -> list[tuple[str | None, bool]]:
        """Free-text replies, reasoning cut off, each with whether it was cut at its completion limit (kept:
        the caller counts it); None for a failed call or an empty reply."""
        from senri.answers import split_reasoning

        return [(None, False) if r.error else (split_reasoning(r.text)[0].strip() or None, r.truncated)
                for r in self.send(role, requests)]

    def raised_limit(self, role: str, request):
        """``request`` with twice its completion limit, bounded by the model config's ``max_tokens_cap`` and by
        the context its prompt leaves; None when the limit cannot grow."""
        from senri.backends.budget import request_limits

        backend = self.backends[role]
        limit = within_cap(2 * int(request.max_tokens), backend.config)
        context = request_limits(backend.config).context_tokens
        if context is not None:
            limit = min(limit, context - backend.count_tokens(request))
        return replace(request, max_tokens=limit) if limit > int(request.max_tokens) else None

    def json(self, role: str, requests: list, validate: Callable[[Any], Any]) -> list[Any]:
        """Structured replies: ``validate(obj)`` returns the value or None. A reply cut at its completion limit
        (``finish_reason: length``) is sent again as the same request with a higher limit
        (:meth:`raised_limit`, counted ``resent``) while the limit can grow, at most ``cut_reply_resends`` times
        (:data:`MAX_RESENDS` by default) — unless it ends in a repetition loop (:func:`senri.repetition.looping`,
        counted ``looped``: on the reading model every such resend came back cut again, at 2 and 4 times the
        limit, 200–420 s each); any
        other reply no object of which
        validates (or a cut one at the highest limit) is repaired once (the family's ``repair`` turn). None
        where all that fails."""
        from senri.answers import split_reasoning
        from senri.backends.base import Message

        replies: list[Any] = [None] * len(requests)
        current = list(requests)
        repaired = [False] * len(requests)
        resends = [0] * len(requests)
        stats = self.stats.setdefault(role, RoleStats())
        pending = list(range(len(requests)))
        while pending:
            responses = self.send(role, [current[i] for i in pending])
            retry = []
            for i, response in zip(pending, responses):
                if response.error:
                    continue
                body = split_reasoning(response.text)[0]
                value = first_json(body, validate)
                if value is not None:
                    replies[i] = value
                    continue
                stats.malformed += 1
                loops = response.truncated and looping(body)
                stats.looped += bool(loops and resends[i] < self.resends)
                longer = (self.raised_limit(role, current[i])
                          if response.truncated and resends[i] < self.resends and not loops else None)
                if longer is not None:
                    stats.resent += 1
                    resends[i] += 1
                    current[i] = longer
                    retry.append(i)
                elif not repaired[i]:
                    repaired[i] = True
                    request = current[i]
                    messages = request.messages + (Message.text("assistant", body),
                                                   Message.text("user", self.prompts.render("repair")))
                    current[i] = replace(request, messages=messages, purpose=f"{request.purpose}:repair")
                    retry.append(i)
            pending = retry
        return replies


SCHEMA_STRINGS = {"type": "array", "items": {"type": "string"}}


SCHEMA_TRIPLES = {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}


NER_SCHEMA = {"type": "object", "properties": {"named_entities": SCHEMA_STRINGS}, "required": ["named_entities"]}


TRIPLES_SCHEMA = {"type": "object", "properties": {"triples": SCHEMA_TRIPLES}, "required": ["triples"]}


SEMANTIC_SCHEMA = {"type": "object", "properties": {
    "semantic_triples": SCHEMA_TRIPLES, "episodic_evidence": {"type": "array", "items": SCHEMA_STRINGS}},
    "required": ["semantic_triples", "episodic_evidence"]}


CONSOLIDATE_SCHEMA = {"type": "object", "properties": {
    "updated_triple": SCHEMA_STRINGS, "triples_to_remove": {"type": "array", "items": {"type": "integer"}}},
    "required": ["updated_triple", "triples_to_remove"]}


# ============================================================================================ build stages
def base_captions(request: BuildRequest, config: Mapping[str, Any], instruction: str
                  ) -> tuple[list[MemoryItem], list[tuple[float, float]], dict[str, int]]:
    """WorldMM's 10sec captions (W-C2) through the shared caption service: (captions, every clip's span,
    counts). A clip whose caption failed leaves no caption (as a failed segment leaves no file); a caption cut at
    the captioner's token limit is kept and counted ``truncated_captions``."""
    from senri.captioners.base import Clip
    from senri.memory.hierarchy import caption_health, open_service, split

    if request.media is None or request.caption_cache is None:
        raise ValueError(f"memory system worldmm: building {request.video.video_id} needs the video's media and the "
                         f"caption cache (BuildRequest.media / caption_cache) to caption it at 10 s")
    base = config.get("base") or {}
    clip_s, fps = float(base.get("clip_s", 10)), float(base.get("fps", 1))
    spans = split(0.0, float(request.video.duration_s), clip_s)
    service = open_service(request.memory_config, request.media, request.caption_cache)
    try:
        rows = service.captions([Clip(s, e, fps, instruction, BASE_LEVEL) for s, e in spans])
    finally:
        service.close()
    kept = [r for r in rows if r.error is None and r.text.strip()]
    captions = [MemoryItem(item_id(BASE_LEVEL, r.start_s, r.end_s), KIND_EPISODIC, r.text.strip(), r.start_s,
                           r.end_s, level=BASE_LEVEL) for r in kept]
    counts = {"clips": len(spans), "captions": len(captions), "failed_captions": len(spans) - len(captions),
              "truncated_captions": caption_health(kept)[0], "caption_calls": service.stats.calls,
              "captions_reused": service.stats.reused}
    return captions, spans, counts


def summarise_levels(llm: BuilderLLM, base: list[MemoryItem], levels: Sequence[Mapping[str, Any]]
                     ) -> tuple[dict[str, list[MemoryItem]], dict[str, int]]:
    """Each coarser level from the level below it (W-C3): one W3 call per window; a failed call drops its
    window (as WorldMM writes no entry for it), counted ``summaries_dropped_<level>``; a summary cut at its
    token limit is kept, counted ``truncated_summaries_<level>``."""
    out: dict[str, list[MemoryItem]] = {}
    counts: dict[str, int] = {}
    below = base
    for level in levels:
        name, window = str(level["name"]), int(level["window_s"])
        limit = level.get("word_limit")
        limit_line = f" Keep the whole summary under {int(limit)} words." if limit else ""
        batches = window_batches(below, window)
        requests = [llm.fit("summariser", lambda body: llm.prompts.render(
            "summarise", level=name, word_limit=limit_line, descriptions=body),
            "\n".join(e.text for e in batch), None, f"worldmm:summarise:{name}") for batch, _, _ in batches]
        replies = llm.texts("summariser", requests)
        items = [MemoryItem(item_id(name, start, end), KIND_EPISODIC, text, float(start), float(end), level=name)
                 for (batch, start, end), (text, _) in zip(batches, replies) if text]
        counts[f"summaries_dropped_{name}"] = len(batches) - len(items)
        counts[f"truncated_summaries_{name}"] = sum(bool(text) and cut for text, cut in replies)
        out[name] = items
        below = items
    return out, counts


def openie(llm: BuilderLLM, role: str, passages: Sequence[MemoryItem]
           ) -> tuple[dict[str, list[str]], dict[str, list[Triple]], dict[str, int]]:
    """W4 then W5 for every passage (W-C5): entities, then triples given them; bad or duplicate triples dropped.
    A failed or unreadable call leaves the passage without entities / triples (counted)."""
    ner_requests = [llm.fit(role, lambda body: llm.prompts.render("ner", passage=body), p.text, NER_SCHEMA,
                            "worldmm:ner") for p in passages]
    entities = llm.json(role, ner_requests, lambda obj: _string_list(obj, "named_entities"))
    triple_requests = [llm.fit(role, lambda body, ents=ents: llm.prompts.render(
        "triples", passage=body, named_entities=json.dumps({"named_entities": ents or []}, ensure_ascii=False)),
        p.text, TRIPLES_SCHEMA, "worldmm:triples") for p, ents in zip(passages, entities)]
    raw = llm.json(role, triple_requests, lambda obj: _triples_reply(obj, "triples"))
    ner_out, triples_out = {}, {}
    counts = {"ner_failed": sum(e is None for e in entities), "triples_failed": sum(r is None for r in raw),
              "triples_dropped": 0}
    for passage, ents, reply in zip(passages, entities, raw):
        ner_out[passage.item_id] = list(dict.fromkeys(ents or []))
        kept, dropped = clean_triples(reply)
        triples_out[passage.item_id] = kept
        counts["triples_dropped"] += dropped
    return ner_out, triples_out, counts


@dataclass
class Accumulated:
    triple: Triple
    evidence: list[str]


def semantic_memory(llm: BuilderLLM, base: list[MemoryItem], triples: Mapping[str, list[Triple]],
                    vectors: TextVectors, config: Mapping[str, Any]
                    ) -> tuple[list[tuple[float, list[Accumulated]]], dict[str, int]]:
    """Cumulative semantic snapshots (W-C6, W-C7): every ``period`` consecutive 10sec captions give one W6 call
    over their episodic triples; its triples are consolidated against the accumulated list (each new triple
    against the up to ``candidates`` accumulated ones with cosine ≥ ``min_cosine``, by W7, which may rewrite it
    and remove some of them), and the snapshot keyed by the group's last end time holds the whole list."""
    period = int(config.get("period", 10))
    top = int(config.get("candidates", 20))
    threshold = float(config.get("min_cosine", 0.6))
    groups = [base[i:i + period] for i in range(0, len(base), period)]
    requests, keys, evidence_ids = [], [], []
    for group in groups:
        lines, ids = [], []
        for passage in group:
            for n, triple in enumerate(triples.get(passage.item_id, [])):
                ids.append(f"{passage.item_id}#{n}")
                lines.append(f"{ids[-1]}: {json.dumps(list(triple), ensure_ascii=False)}")
        if not lines:
            continue
        requests.append(llm.fit("extractor", lambda body: llm.prompts.render("semantic", triples=body),
                                "\n".join(lines), SEMANTIC_SCHEMA, "worldmm:semantic"))
        keys.append(float(group[-1].end_s))
        evidence_ids.append(set(ids))

    def valid(obj: Any) -> Any:
        found = _triples_reply(obj, "semantic_triples")
        return None if found is None else obj

    replies = llm.json("extractor", requests, valid)
    counts = {"semantic_calls_failed": sum(r is None for r in replies), "consolidations": 0,
              "consolidations_failed": 0, "semantic_dropped": 0}
    accumulated: list[Accumulated] = []
    snapshots: list[tuple[float, list[Accumulated]]] = []
    for key, reply, known_ids in sorted(zip(keys, replies, evidence_ids), key=lambda r: r[0]):
        new, dropped = clean_triples((reply or {}).get("semantic_triples"))
        counts["semantic_dropped"] += dropped
        raw_evidence = (reply or {}).get("episodic_evidence") or []
        new_evidence = []
        for n in range(len(new)):
            ev = raw_evidence[n] if n < len(raw_evidence) and isinstance(raw_evidence[n], list) else []
            new_evidence.append([str(e) for e in ev if str(e) in known_ids])
        accumulated = consolidate(llm, accumulated, list(zip(new, new_evidence)), vectors, top, threshold, counts)
        snapshots.append((key, list(accumulated)))
    return snapshots, counts


def consolidate(llm: BuilderLLM, accumulated: list[Accumulated], new: list[tuple[Triple, list[str]]],
                vectors: TextVectors, top: int, threshold: float, counts: dict[str, int]) -> list[Accumulated]:
    """One key's consolidation (W-C7): every new triple is compared with the accumulated list as it stood
    before this key (all of a key's triples at once, as WorldMM does them concurrently); the removed ones go,
    the (possibly rewritten) new ones join at the end."""
    if not new:
        return accumulated
    old_texts = [" ".join(a.triple) for a in accumulated]
    old = vectors.matrix(old_texts) if accumulated else None
    new_vectors = vectors.matrix([" ".join(t) for t, _ in new])
    requests, plans = [], []
    results: list[tuple[Triple, list[str], list[int]]] = []
    for n, ((triple, evidence), vector) in enumerate(zip(new, new_vectors)):
        if old is None:
            results.append((triple, evidence, []))
            continue
        sims = old @ vector
        order = [int(i) for i in np.argsort(-sims, kind="stable")[:top] if sims[int(i)] >= threshold]
        if not order:
            results.append((triple, evidence, []))
            continue
        listing = "\n".join(f"{k}. {json.dumps(list(accumulated[i].triple), ensure_ascii=False)}"
                            for k, i in enumerate(order))
        requests.append(llm.fit("extractor", lambda body, t=triple: llm.prompts.render(
            "consolidate", new_triple=json.dumps(list(t), ensure_ascii=False), candidates=body), listing,
            CONSOLIDATE_SCHEMA, "worldmm:consolidate"))
        plans.append((len(results), order))
        results.append((triple, evidence, []))

    def valid(obj: Any) -> Any:
        if not isinstance(obj, dict):
            return None
        updated, remove = obj.get("updated_triple"), obj.get("triples_to_remove", [])
        kept, _ = clean_triples([updated])
        if not kept or not isinstance(remove, list):
            return None
        return kept[0], [int(r) for r in remove if isinstance(r, (int, float)) or str(r).isdigit()]

    replies = llm.json("extractor", requests, valid) if requests else []
    counts["consolidations"] += len(requests)
    removed: set[int] = set()
    for (slot, order), reply in zip(plans, replies):
        triple, evidence, _ = results[slot]
        if reply is None:  # an unreadable W7 reply keeps the new triple as it is and removes nothing
            counts["consolidations_failed"] += 1
            continue
        updated, remove = reply
        gone = [order[r] for r in remove if 0 <= r < len(order)]
        merged = list(dict.fromkeys(evidence + [e for i in gone for e in accumulated[i].evidence]))
        results[slot] = (updated, merged, gone)
        removed.update(gone)
    kept = [a for i, a in enumerate(accumulated) if i not in removed]
    return kept + [Accumulated(t, e) for t, e, _ in results]


#: The build counts (``config.yaml``'s ``counts``) that are builder outputs left out of the store: a 30sec/3min/
#: 10min summary whose W3 call failed or came back empty (``summaries_dropped_<level>``), a passage whose W5
#: triples call failed or stayed unreadable after the repair, so it has no triples in the graph
#: (``triples_failed``; ``index_triples_failed`` for the coarser levels and imported captions), an imported
#: caption that no model indexed because no retriever model was configured, so it has no triples either
#: (``unindexed_captions``), and a group of ten captions whose W6 call failed, so its semantic triples are missing
#: (``semantic_calls_failed``). Not losses: ``ner_failed`` (the W5 call is still made, with no entity hint, and
#: the entity table is not read at answer time), ``consolidations_failed`` (the new triple is kept as it is),
#: ``triples_dropped`` / ``semantic_dropped`` (malformed or duplicate triples inside a readable reply), the
#: builder's ``trimmed`` requests (their input shortened to fit the context, the item kept; one still too long
#: fails and is counted above) and replies cut at their token limit (kept: ``truncated_captions`` and
#: ``truncated_summaries_<level>``, booked on every question as ``truncated_captions``). Failed captions are
#: ``failed_captions``, not builder losses.
BUILDER_LOSS_COUNTS = ("triples_failed", "index_triples_failed", "unindexed_captions", "semantic_calls_failed")


def builder_losses(counts: Mapping[str, Any]) -> int:
    """Items the build left out of the store (:data:`BUILDER_LOSS_COUNTS` and every ``summaries_dropped_*``),
    from the store's recorded ``counts``."""
    return sum(int(counts.get(name) or 0) for name in BUILDER_LOSS_COUNTS) + sum(
        int(n or 0) for name, n in counts.items() if name.startswith("summaries_dropped_"))


def truncated_captions(counts: Mapping[str, Any]) -> int:
    """The store's captions of any level kept although cut at their token limit (10sec captions and W3
    summaries), from its recorded ``counts``: what every question over it books as ``truncated_captions``."""
    return int(counts.get("truncated_captions") or 0) + sum(
        int(n or 0) for name, n in counts.items() if name.startswith("truncated_summaries_"))


# ================================================================================================ visual
def visual_status(embedded: bool) -> str:
    """How a store's visual memory serves queries, for its ``config.yaml`` (``visual``) and its summary: its
    10-s clips always serve time-range queries (the release's range path reads frames only); text queries
    need the clip embeddings."""
    return "on" if embedded else "time ranges only (no embedder configured: text queries return nothing)"


def build_visual(request: BuildRequest, config: Mapping[str, Any], base: list[MemoryItem],
                 spans: list[tuple[float, float]]) -> dict[str, Any] | None:
    """W-C8: one embedding per 10-s clip when an ``embedder`` model is configured; None (no embeddings: the
    clips themselves are written by :func:`write_store` either way) otherwise."""
    model = request.models.get("embedder")
    if not model:
        return None
    from senri.memory.clip_embedding import embed_clips

    name, model_config = model
    nframes = int((config.get("visual") or {}).get("nframes", 10))
    vectors = embed_clips(model_config, request.media.video, spans, nframes, int(model_config.get("short_side", 224)))
    return {"start_s": np.array([s for s, _ in spans]), "end_s": np.array([e for _, e in spans]),
            "vectors": vectors, "embedder": name, "model_config": dict(model_config)}


# ============================================================================================= the store
def _items_frame(items: Iterable[MemoryItem]) -> pl.DataFrame:
    from senri.records import to_frame

    return to_frame(list(items), MemoryItem)


# ================================================================================================= writing
def write_store(out_dir: Path, config: Mapping[str, Any], episodic: list[MemoryItem],
                ner: Mapping[str, list[str]], triples: Mapping[str, list[Triple]],
                snapshots: list[tuple[float, list[Accumulated]]] | list[tuple[float, list[Triple]]],
                visual: dict[str, Any] | None, vectors: TextVectors, counts: Mapping[str, int],
                llm_stats: Mapping[str, Any], source: str, models: Mapping[str, str],
                clips: Sequence[tuple[float, float]] | None = None, video_id: str = "") -> None:
    """The store folder: items (episodic, the latest semantic snapshot, visual clips), OpenIE entities and
    triples, every snapshot, the text vectors, visual vectors when built, and ``config.yaml`` with the slice,
    the substitutions of the paper's models and the build's counts, and the cost table of its builder roles
    (``cost.parquet``, :mod:`senri.memory.cost`; ``video_id`` defaults to the folder's name).

    Visual items are the 10-s ``clips`` (default: the embedded clips, and without embeddings the 10sec
    captions' spans), written with or without embeddings, so a time-range visual query is served on any
    store (text queries need ``visual``'s vectors); each is described by its 10sec caption where it has one."""
    from senri.records import WorldMMEntity, WorldMMSnapshot, WorldMMTriple, to_frame, write_table

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[WorldMMSnapshot] = []
    plain: list[tuple[float, list[Triple]]] = []
    for key, entries in snapshots:
        listed = [e.triple if isinstance(e, Accumulated) else tuple(e) for e in entries]
        evidence = [e.evidence if isinstance(e, Accumulated) else [] for e in entries]
        plain.append((key, listed))
        rows += [WorldMMSnapshot(float(key), n, t[0], t[1], t[2], json.dumps(ev)) for n, (t, ev)
                 in enumerate(zip(listed, evidence))]
    latest = plain[-1][1] if plain else []
    items = list(episodic) + [semantic_item(t, occurrence=n) for t, n in zip(latest, occurrences(latest))]
    captions = {(b.start_s, b.end_s): b.text for b in episodic if b.level == BASE_LEVEL}
    if clips is None:
        clips = (list(zip(visual["start_s"], visual["end_s"])) if visual is not None
                 else sorted(captions))
    spans = dict.fromkeys((float(start), float(end)) for start, end in clips)
    if visual is not None:
        spans.update(dict.fromkeys((float(s), float(e)) for s, e in zip(visual["start_s"], visual["end_s"])))
    for start, end in sorted(spans):
        text = captions.get((start, end), "")
        items.append(MemoryItem(item_id(KIND_VISUAL, start, end), KIND_VISUAL, text, start, end,
                                description=text[:160], level=BASE_LEVEL))
    if visual is not None:
        np.savez(out_dir / VISUAL, start_s=np.asarray(visual["start_s"], dtype=float),
                 end_s=np.asarray(visual["end_s"], dtype=float),
                 vectors=np.asarray(visual["vectors"], dtype=np.float32), embedder=np.array(visual["embedder"]))
    level_of = {i.item_id: i.level for i in episodic}
    write_table(_items_frame(items), out_dir / ITEMS, MemoryItem)
    write_table(to_frame([WorldMMEntity(p, level_of.get(p, ""), e) for p, ents in ner.items() for e in ents],
                         WorldMMEntity), out_dir / ENTITIES, WorldMMEntity)
    write_table(to_frame([WorldMMTriple(p, level_of.get(p, ""), *t) for p, ts in triples.items() for t in ts],
                         WorldMMTriple), out_dir / TRIPLES, WorldMMTriple)
    write_table(to_frame(rows, WorldMMSnapshot), out_dir / SNAPSHOTS, WorldMMSnapshot)
    # Every text retrieval will compare against, embedded once here.
    vectors.matrix([i.text for i in episodic])
    facts = {hipporag_triple(t) for ts in triples.values() for t in ts}
    vectors.matrix([fact_text(f) for f in facts])
    vectors.matrix(list({part for f in facts for part in (f[0], f[2])}))
    vectors.matrix(list({" ".join(t) for _, ts in plain for t in ts}))
    vectors.save(out_dir / VECTORS)
    paper = dict(config.get("paper_models") or {})
    record = {
        "system": SYSTEM, "source": source, "config": json.loads(json.dumps(dict(config), default=str)),
        "models": dict(models),
        "substitutions": {"text_embedder": {"paper": paper.get("text_embedder"), "used": vectors.encoder.name},
                          **{role: {"paper": paper.get(role), "used": models.get(role)} for role in models}},
        "visual": visual_status(visual is not None),
        "embedder_model": ({"name": visual["embedder"], "config": visual.get("model_config")}
                           if visual is not None else None),
        "counts": dict(counts), "llm": dict(llm_stats),
    }
    # The memory_system job wrote its stage slice there first (senri.memory.jobs.write_store): the store's record
    # is added beside it, and the system's config is left in that slice (its memory_system) instead of replacing it.
    path = out_dir / CONFIG
    existing = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    if existing.get("stage") == "memory_system":
        record.pop("config")
    path.write_text(yaml.safe_dump({**existing, **record}, sort_keys=True, allow_unicode=True))
    write_cost(out_dir, SYSTEM, video_id or Path(out_dir).name,
               {role: (models.get(role, ""), role_cost(stats)) for role, stats in llm_stats.items()})


def build_store(request: BuildRequest) -> None:
    """The pipeline's own construction of one video's WorldMM store (W-C2…C8) into ``request.out_dir``."""
    config = request.system_config
    prompts = system_prompts(config)
    llm = BuilderLLM(request, prompts, config.get("max_tokens") or {})
    for role in ("summariser", "extractor"):
        if not llm.has(role):
            raise ValueError(f"memory_system.worldmm.models.{role}: the build needs a model config for the "
                             f"{role} role (it is null)")
    try:
        base, spans, caption_counts = base_captions(request, config, prompts.render("caption"))
        levels, level_counts = summarise_levels(llm, base, config.get("levels") or [])
        episodic = [*base, *(item for level in levels.values() for item in level)]
        encoder = open_text_encoder(config)
        vectors = TextVectors(encoder)
        ner, triples, ie_counts = openie(llm, "extractor", base)
        # W-C9: HippoRAG's index reads OpenIE of every level, by the retriever's model where one is set; the
        # 10sec level reuses the extractor's triples (the same calls when both roles name one model).
        index_role = "retriever" if llm.has("retriever") else "extractor"
        coarse = [item for level in levels.values() for item in level]
        coarse_ner, coarse_triples, coarse_counts = openie(llm, index_role, coarse)
        ner, triples = {**ner, **coarse_ner}, {**triples, **coarse_triples}
        snapshots, semantic_counts = semantic_memory(llm, base, {b.item_id: triples[b.item_id] for b in base},
                                                     vectors, config.get("semantic") or {})
        visual = build_visual(request, config, base, spans)
        counts = {**caption_counts, **level_counts,
                  **ie_counts, **{f"index_{k}": v for k, v in coarse_counts.items()}, **semantic_counts}
        write_store(request.out_dir, config, episodic, ner, triples, snapshots, visual, vectors, counts,
                    {role: vars(s) for role, s in llm.stats.items()}, source="built",
                    models={role: name for role, name in llm.role_model.items()}, clips=spans,
                    video_id=request.video.video_id)
    finally:
        llm.close()

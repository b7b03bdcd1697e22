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

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Iterable, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.memory.ppr import personalized_pagerank
from senri.memory.release import load_release_pickle
from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext

log = logging.getLogger(__name__)

SYSTEM = "worldmm"
BASE_LEVEL = "10sec"
KIND_EPISODIC, KIND_SEMANTIC, KIND_VISUAL = "episodic", "semantic", "visual"
#: Tables of a store folder.
ITEMS, ENTITIES, TRIPLES, SNAPSHOTS, VECTORS, VISUAL, CONFIG = (
    "items.parquet", "entities.parquet", "triples.parquet", "snapshots.parquet", "text_vectors.npz",
    "visual.npz", "config.yaml")
#: The spec's generic setting: every memory is visible (W-R0, t = 123595999).
SECONDS_PER_DAY = 86400


# =============================================================================================== time
def clock(seconds: float) -> str:
    """``HH:MM:SS`` of the time of day (hours past 24 wrap into the next day)."""
    whole = int(math.floor(seconds)) % SECONDS_PER_DAY
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def day_of(seconds: float) -> int:
    """1-based day of an absolute time (a SENRI video is one take: DAY1)."""
    return 1 + int(math.floor(seconds)) // SECONDS_PER_DAY


def hhmmssff(seconds: float, round_up: bool = False) -> str:
    """WorldMM's ``HHMMSSFF`` of a time of day, whole seconds (floor, or ceil for an end), ``FF`` = ``00``."""
    whole = int(math.ceil(seconds) if round_up else math.floor(seconds)) % SECONDS_PER_DAY
    return f"{whole // 3600:02d}{whole % 3600 // 60:02d}{whole % 60:02d}00"


def parse_hhmmssff(value: Any, where: str) -> float:
    """Seconds of day of an ``HHMMSSFF`` string or integer (``FF`` hundredths); ValueError naming ``where``."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or len(text) > 8:
        raise ValueError(f"{where}: {value!r} is not an HHMMSSFF time (8 digits)")
    text = text.zfill(8)
    hours, minutes, seconds, frames = int(text[:2]), int(text[2:4]), int(text[4:6]), int(text[6:8])
    if minutes > 59 or seconds > 59:
        raise ValueError(f"{where}: {value!r} is not an HHMMSSFF time (minutes/seconds over 59)")
    return hours * 3600 + minutes * 60 + seconds + frames / 100


def parse_day(value: Any, where: str) -> int:
    match = re.fullmatch(r"\s*DAY\s*(\d+)\s*", str(value), re.IGNORECASE)
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"{where}: {value!r} is not a DAYn date")
    return int(match.group(1))


def ts9(seconds: float) -> int:
    """WorldMM's integer timestamp ``int(day + HHMMSSFF)`` of an absolute end time (ceil to the second)."""
    return int(f"{day_of(math.ceil(seconds))}{hhmmssff(seconds, round_up=True)}")


def parse_ts9(value: Any, where: str) -> float:
    """Absolute seconds of a ``TS9`` key (day digits followed by ``HHMMSSFF``)."""
    text = str(value).strip()
    if not text.isdigit() or len(text) < 9:
        raise ValueError(f"{where}: key {value!r} is not a TS9 timestamp (day + HHMMSSFF)")
    day = int(text[:-8])
    if day < 1:
        raise ValueError(f"{where}: key {value!r} has day {day}")
    return (day - 1) * SECONDS_PER_DAY + parse_hhmmssff(text[-8:], where)


def span_label(start_s: float, end_s: float) -> str:
    """``DAY1 HH:MM:SS - DAY1 HH:MM:SS``, WorldMM's time range of an episodic caption (W-R2)."""
    return f"DAY{day_of(start_s)} {clock(start_s)} - DAY{day_of(end_s)} {clock(end_s)}"


_RANGE = re.compile(r"DAY\s*(\d+)\s+(\d{1,2}):(\d{2}):(\d{2})", re.IGNORECASE)


def parse_time_range(query: str) -> tuple[float, float] | None:
    """``(start_s, end_s)`` of a visual query written as ``DAY d HH:MM:SS - DAY d HH:MM:SS`` (W-R4), else None."""
    found = _RANGE.findall(query)
    if len(found) < 2:
        return None
    (d1, h1, m1, s1), (d2, h2, m2, s2) = found[:2]
    start = (int(d1) - 1) * SECONDS_PER_DAY + int(h1) * 3600 + int(m1) * 60 + int(s1)
    end = (int(d2) - 1) * SECONDS_PER_DAY + int(h2) * 3600 + int(m2) * 60 + int(s2)
    return (float(start), float(end)) if end >= start else None


# ====================================================================================== pure build steps
def item_id(level: str, start_s: float, end_s: float) -> str:
    return f"{level}@{start_s:g}-{end_s:g}"


def window_batches(entries: Sequence[MemoryItem], window_s: int) -> list[tuple[list[MemoryItem], int, int]]:
    """WorldMM's windows of a coarser level (W-C3): the first window opens at the first entry's start; an entry
    starting at or past the current window's end opens the window ``floor(start/w)·w``; every window ends at
    its start + w, unclipped by the video's end; entries are binned by their start (whole seconds)."""
    batches: list[tuple[list[MemoryItem], int, int]] = []
    batch: list[MemoryItem] = []
    current: int | None = None
    for entry in sorted(entries, key=lambda e: (e.start_s, e.end_s)):
        start = int(math.floor(entry.start_s))
        if current is None:
            current = start
        if start < current + window_s:
            batch.append(entry)
            continue
        if batch:
            batches.append((batch, current, current + window_s))
        current = (start // window_s) * window_s
        batch = [entry]
    if batch and current is not None:
        batches.append((batch, current, current + window_s))
    return batches


Triple = tuple[str, str, str]


def clean_triples(raw: Any) -> tuple[list[Triple], int]:
    """The valid, distinct triples of an extractor reply (W-C5) and how many were dropped: a triple is a list of
    three non-empty strings; a repeat of an earlier one is dropped."""
    kept: list[Triple] = []
    seen: set[Triple] = set()
    dropped = 0
    for triple in raw if isinstance(raw, list) else []:
        if (not isinstance(triple, (list, tuple)) or len(triple) != 3
                or not all(isinstance(part, str) and part.strip() for part in triple)):
            dropped += 1
            continue
        clean = tuple(part.strip() for part in triple)
        if clean in seen:
            dropped += 1
            continue
        seen.add(clean)  # type: ignore[arg-type]
        kept.append(clean)  # type: ignore[arg-type]
    return kept, dropped


def triple_text(triple: Sequence[str]) -> str:
    """``(s, p, o)``: how a semantic triple is shown (W-R3) and what its fact vector embeds."""
    return f"({triple[0]}, {triple[1]}, {triple[2]})"


def entity_key(name: str) -> str:
    return name.strip().lower()


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scores scaled to [0, 1] (all ones when they are all equal): HippoRAG's normalisation."""
    if scores.size == 0:
        return scores
    low, high = float(scores.min()), float(scores.max())
    return np.ones_like(scores) if high - low <= 0 else (scores - low) / (high - low)


# ============================================================================================ text vectors
class TextEncoder:
    """What retrieval needs from a text embedder: L2-normalised vectors and a name for the record."""

    name: str = ""

    def encode(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


class MiniLMEncoder(TextEncoder):
    """all-MiniLM-L6-v2 (:class:`senri.memory.retrieval.Embedder`), the recorded substitution for the spec's
    Qwen3-Embedding-4B; loaded on first use."""

    name = "minilm:sentence-transformers/all-MiniLM-L6-v2"

    def __init__(self) -> None:
        self._embedder = None

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            from senri.memory.retrieval import Embedder

            self._embedder = Embedder()
        return np.asarray(self._embedder.encode(list(texts)), dtype=np.float32)


TEXT_ENCODERS: dict[str, Callable[[], TextEncoder]] = {"minilm": MiniLMEncoder}


def open_text_encoder(config: Mapping[str, Any]) -> TextEncoder:
    name = str(config.get("text_embedder", "minilm"))
    if name not in TEXT_ENCODERS:
        raise ValueError(f"memory_system.worldmm.text_embedder: {name!r} is not one of {sorted(TEXT_ENCODERS)}")
    return TEXT_ENCODERS[name]()


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class TextVectors:
    """Text → vector, computed once per text: saved into the store folder at build time (so answer jobs only
    embed their queries) and recomputed there only when the store was built with another encoder. Texts are
    keyed by their sha256 (a fixed-width key array: the file loads without pickles, however long a summary)."""

    def __init__(self, encoder: TextEncoder, known: Mapping[str, np.ndarray] | None = None) -> None:
        self.encoder = encoder
        self.known: dict[str, np.ndarray] = dict(known or {})

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        keys = [text_digest(t) for t in texts]
        missing = list(dict.fromkeys((k, t) for k, t in zip(keys, texts) if k not in self.known))
        if missing:
            for (key, _), vector in zip(missing, self.encoder.encode([t for _, t in missing])):
                self.known[key] = np.asarray(vector, dtype=np.float32)
        if not texts:
            width = next(iter(self.known.values())).shape[0] if self.known else 1
            return np.zeros((0, width), dtype=np.float32)
        return np.stack([self.known[k] for k in keys])

    def save(self, path: Path) -> None:
        keys = sorted(self.known)
        vectors = np.stack([self.known[k] for k in keys]) if keys else np.zeros((0, 1), dtype=np.float32)
        np.savez(path, keys=np.array(keys, dtype="<U32"), vectors=vectors, encoder=np.array(self.encoder.name))

    @classmethod
    def load(cls, path: Path, encoder: TextEncoder) -> "TextVectors":
        if not path.is_file():
            return cls(encoder)
        with np.load(path, allow_pickle=False) as data:
            if not {"keys", "vectors", "encoder"} <= set(data.files):
                log.warning("%s is not a text-vector table of this version: re-embedding", path)
                return cls(encoder)
            if str(data["encoder"]) != encoder.name:
                log.warning("%s was embedded with %s, not %s: re-embedding", path, data["encoder"], encoder.name)
                return cls(encoder)
            return cls(encoder, dict(zip((str(k) for k in data["keys"]), data["vectors"])))


# =============================================================================================== builder LLM
@dataclass
class RoleStats:
    calls: int = 0
    failed: int = 0
    malformed: int = 0
    trimmed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


#: The builder roles that are chat models (``embedder`` is an image-text model, opened by the visual builder).
LLM_ROLES = ("summariser", "extractor", "retriever")


class BuilderLLM:
    """The build's model roles (summariser, extractor, retriever): one backend per model config, behind the
    build job's response cache, with WorldMM's prompts; structured replies are read with the project's JSON
    reader and repaired once."""

    def __init__(self, request: BuildRequest, prompts, max_tokens: Mapping[str, int]) -> None:
        from senri.backends import open_backend

        self.prompts = prompts
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
        from senri.methods.structured import request_schema

        backend = self.backends[role]
        limit = int(self.max_tokens.get(role, backend.config.get("max_tokens", 512)))
        cap = backend.config.get("max_tokens_cap")
        limit = min(limit, int(cap)) if cap else limit
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
            stats.calls += 1
            stats.failed += bool(response.error)
            stats.prompt_tokens += response.prompt_tokens
            stats.completion_tokens += response.completion_tokens
        return responses

    def texts(self, role: str, requests: list) -> list[str | None]:
        """Free-text replies (None for a failed call or an empty reply), reasoning cut off."""
        from senri.answers import split_reasoning

        return [None if r.error else (split_reasoning(r.text)[0].strip() or None) for r in self.send(role, requests)]

    def json(self, role: str, requests: list, validate: Callable[[Any], Any]) -> list[Any]:
        """Structured replies: ``validate(obj)`` returns the value or None; a reply no object of which validates
        is repaired once (the family's ``repair`` turn); None where both fail."""
        from senri.answers import split_reasoning

        replies: list[Any] = [None] * len(requests)
        pending = list(range(len(requests)))
        for attempt in range(2):
            batch = [requests[i] for i in pending]
            responses = self.send(role, batch)
            retry = []
            for i, request, response in zip(pending, batch, responses):
                if response.error:
                    continue
                body = split_reasoning(response.text)[0]
                value = first_json(body, validate)
                if value is not None:
                    replies[i] = value
                    continue
                self.stats[role].malformed += 1
                if attempt == 0:
                    from senri.backends.base import Message

                    messages = request.messages + (Message.text("assistant", body),
                                                   Message.text("user", self.prompts.render("repair")))
                    requests[i] = replace(request, messages=messages, purpose=f"{request.purpose}:repair")
                    retry.append(i)
            pending = retry
            if not pending:
                break
        return replies


def first_json(body: str, validate: Callable[[Any], Any]) -> Any:
    """The first JSON value in ``body`` (objects via :func:`senri.answers.json_objects`, then a bare list, the
    W9 reply's form) that ``validate`` accepts."""
    from senri.answers import json_objects

    candidates: list[Any] = list(json_objects(body))
    for text in [body.strip(), *re.findall(r"\[.*\]", body, re.DOTALL)]:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, list):
            candidates.append(value)
    for candidate in candidates:
        checked = validate(candidate)
        if checked is not None:
            return checked
    return None


def _string_list(obj: Any, key: str) -> list[str] | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, list):
        return None
    return [v.strip() for v in value if isinstance(v, str) and v.strip()]


def _triples_reply(obj: Any, key: str) -> list | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else None


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
    counts). A clip whose caption failed leaves no caption (as a failed segment leaves no file)."""
    from senri.captioners.base import Clip
    from senri.memory.hierarchy import open_service, split

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
    captions = [MemoryItem(item_id(BASE_LEVEL, r.start_s, r.end_s), KIND_EPISODIC, r.text.strip(), r.start_s,
                           r.end_s, level=BASE_LEVEL) for r in rows if r.error is None and r.text.strip()]
    counts = {"clips": len(spans), "captions": len(captions), "failed_captions": len(spans) - len(captions),
              "caption_calls": service.stats.calls, "captions_reused": service.stats.reused}
    return captions, spans, counts


def summarise_levels(llm: BuilderLLM, base: list[MemoryItem], levels: Sequence[Mapping[str, Any]]
                     ) -> tuple[dict[str, list[MemoryItem]], dict[str, int]]:
    """Each coarser level from the level below it (W-C3): one W3 call per window; a failed call drops its
    window (as WorldMM writes no entry for it)."""
    out: dict[str, list[MemoryItem]] = {}
    dropped: dict[str, int] = {}
    below = base
    for level in levels:
        name, window = str(level["name"]), int(level["window_s"])
        limit = level.get("word_limit")
        limit_line = f" Keep the whole summary under {int(limit)} words." if limit else ""
        batches = window_batches(below, window)
        requests = [llm.fit("summariser", lambda body: llm.prompts.render(
            "summarise", level=name, word_limit=limit_line, descriptions=body),
            "\n".join(e.text for e in batch), None, f"worldmm:summarise:{name}") for batch, _, _ in batches]
        texts = llm.texts("summariser", requests)
        items = [MemoryItem(item_id(name, start, end), KIND_EPISODIC, text, float(start), float(end), level=name)
                 for (batch, start, end), text in zip(batches, texts) if text]
        dropped[name] = len(batches) - len(items)
        out[name] = items
        below = items
    return out, dropped


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
#: (``triples_failed``; ``index_triples_failed`` for the coarser levels and imported captions), and a group of
#: ten captions whose W6 call failed, so its semantic triples are missing (``semantic_calls_failed``). Not
#: losses: ``ner_failed`` (the W5 call is still made, with no entity hint, and the entity table is not read at
#: answer time), ``consolidations_failed`` (the new triple is kept as it is), ``triples_dropped`` /
#: ``semantic_dropped`` (malformed or duplicate triples inside a readable reply) and the builder's ``trimmed``
#: requests (their input shortened to fit the context, the item kept; one still too long fails and is counted
#: above). Failed captions are ``failed_captions``, not builder losses.
BUILDER_LOSS_COUNTS = ("triples_failed", "index_triples_failed", "semantic_calls_failed")


def builder_losses(counts: Mapping[str, Any]) -> int:
    """Items the build left out of the store (:data:`BUILDER_LOSS_COUNTS` and every ``summaries_dropped_*``),
    from the store's recorded ``counts``."""
    return sum(int(counts.get(name) or 0) for name in BUILDER_LOSS_COUNTS) + sum(
        int(n or 0) for name, n in counts.items() if name.startswith("summaries_dropped_"))


# ========================================================================================= HippoRAG index
@dataclass
class GranularityIndex:
    """One granularity's HippoRAG-2 graph: entity nodes ``0..E-1`` then passage nodes ``E..E+P-1``.

    Edges as HippoRAG-2 lists them (an ordered-pair table the undirected graph reads with every listing an edge
    of its own, so a pair listed both ways weighs twice): a triple adds 1 to (subject, object) and to (object,
    subject); a passage links to each entity of its triples with weight 1; every entity links to the entities
    whose vectors have cosine ≥ the synonymy threshold, with the cosine as weight (replacing a fact count of
    that ordered pair)."""

    passages: list[MemoryItem]
    passage_vectors: np.ndarray
    facts: list[Triple]
    fact_vectors: np.ndarray
    entities: list[str]
    entity_passages: list[set[int]]
    edges: list[tuple[int, int, float]]

    @classmethod
    def build(cls, passages: list[MemoryItem], triples: Mapping[str, list[Triple]], vectors: TextVectors,
              synonymy_threshold: float, max_synonyms: int = 100) -> "GranularityIndex":
        entity_ids: dict[str, int] = {}
        facts: dict[Triple, None] = {}
        pairs: dict[tuple[int, int], float] = {}
        passage_entities: list[set[int]] = []
        for passage in passages:
            linked: set[int] = set()
            for triple in triples.get(passage.item_id, []):
                facts.setdefault(triple, None)
                s = entity_ids.setdefault(entity_key(triple[0]), len(entity_ids))
                o = entity_ids.setdefault(entity_key(triple[2]), len(entity_ids))
                linked.update((s, o))
                if s != o:
                    pairs[(s, o)] = pairs.get((s, o), 0.0) + 1.0
                    pairs[(o, s)] = pairs.get((o, s), 0.0) + 1.0
            passage_entities.append(linked)
        entities = list(entity_ids)
        n_entities = len(entities)
        entity_passages: list[set[int]] = [set() for _ in entities]
        for p, linked in enumerate(passage_entities):
            for e in linked:
                entity_passages[e].add(p)
                pairs[(n_entities + p, e)] = 1.0
        if n_entities > 1:
            entity_vectors = vectors.matrix(entities)
            for first in range(0, n_entities, 1024):  # in blocks: a long video has tens of thousands of entities
                sims = entity_vectors[first:first + 1024] @ entity_vectors.T
                for row, e in enumerate(range(first, min(first + 1024, n_entities))):
                    close = np.flatnonzero(sims[row] >= synonymy_threshold)
                    close = close[np.argsort(-sims[row][close], kind="stable")]
                    for other in [int(o) for o in close if o != e][:max_synonyms]:
                        pairs[(e, other)] = float(sims[row][other])
        fact_list = list(facts)
        return cls(passages=passages, passage_vectors=vectors.matrix([p.text for p in passages]),
                   facts=fact_list, fact_vectors=vectors.matrix([triple_text(f) for f in fact_list]),
                   entities=entities, entity_passages=entity_passages,
                   edges=[(u, v, w) for (u, v), w in pairs.items()])

    def dense(self, query_vector: np.ndarray) -> np.ndarray:
        """Passage scores by cosine, min-max normalised (HippoRAG's dense passage retrieval)."""
        return min_max(self.passage_vectors @ query_vector)

    def retrieve(self, query: str, query_vector: np.ndarray, k: int, config: Mapping[str, Any],
                 filter_facts: Callable[[str, list[Triple]], list[Triple]], notes: list[str], label: str
                 ) -> list[tuple[MemoryItem, float]]:
        """The top ``k`` passages for ``query`` (W-R1): facts by cosine (min-max normalised) → the top
        ``link_top_k`` → the W8 filter; no fact left → dense passages; else PPR (damping, passage weight)."""
        if not self.passages:
            return []
        dense = self.dense(query_vector)
        kept: list[Triple] = []
        if self.facts:
            fact_scores = min_max(self.fact_vectors @ query_vector)
            top = [int(i) for i in np.argsort(-fact_scores, kind="stable")[: int(config.get("link_top_k", 5))]]
            candidates = [self.facts[i] for i in top]
            kept = filter_facts(query, candidates)
            score_of = {self.facts[i]: float(fact_scores[i]) for i in top}
        if not kept:
            notes.append(f"{label}: dense passages ({'no facts' if not self.facts else 'no fact kept'})")
            return self._top(dense, k)
        n_entities = len(self.entities)
        index = {name: i for i, name in enumerate(self.entities)}
        phrase = np.zeros(n_entities)
        occurs = np.zeros(n_entities)
        for fact in kept:
            for name in (fact[0], fact[2]):
                e = index.get(entity_key(name))
                if e is None:
                    continue
                weight = score_of[fact]
                if self.entity_passages[e]:
                    weight /= len(self.entity_passages[e])
                phrase[e] += weight
                occurs[e] += 1
        phrase = np.divide(phrase, occurs, out=np.zeros_like(phrase), where=occurs > 0)
        link_top_k = int(config.get("link_top_k", 5))
        if np.count_nonzero(phrase) > link_top_k:
            keep = np.argsort(-phrase, kind="stable")[:link_top_k]
            mask = np.zeros_like(phrase, dtype=bool)
            mask[keep] = True
            phrase[~mask] = 0.0
        reset = np.concatenate([phrase, dense * float(config.get("passage_node_weight", 0.05))])
        if reset.sum() <= 0:
            notes.append(f"{label}: dense passages (no weight to start the walk from)")
            return self._top(dense, k)
        scores = personalized_pagerank(n_entities + len(self.passages), self.edges, reset,
                                       damping=float(config.get("damping", 0.5)), duplicates="sum")
        notes.append(f"{label}: PPR over {len(kept)} fact(s)")
        return self._top(scores[n_entities:], k)

    def _top(self, scores: np.ndarray, k: int) -> list[tuple[MemoryItem, float]]:
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.passages[int(i)], float(scores[int(i)])) for i in order]


def semantic_ranking(triples: Sequence[Triple], triple_vectors: np.ndarray, query_vector: np.ndarray, n: int,
                     damping: float) -> list[tuple[Triple, float]]:
    """W-R3: the ``n`` triples nearest the query seed a uniform reset over their entities; PPR on the entity
    graph (one unweighted, undirected edge per triple between distinct subject and object, repeated pairs
    adding up as igraph's multigraph does) scores every triple PPR(subject) + PPR(object); the top ``n``."""
    if not triples:
        return []
    sims = triple_vectors @ query_vector
    seeds = [int(i) for i in np.argsort(-sims, kind="stable")[:n]]
    names: dict[str, int] = {}
    for s, _, o in triples:
        names.setdefault(s, len(names))
        names.setdefault(o, len(names))
    seed_entities = {names[part] for i in seeds for part in (triples[i][0], triples[i][2])}
    edges = [(names[s], names[o], 1.0) for s, _, o in triples if names[s] != names[o]]
    reset = {e: 1.0 for e in seed_entities}
    ppr = personalized_pagerank(len(names), edges, reset, damping=damping, duplicates="sum")
    scored = [(t, float(ppr[names[t[0]]] + ppr[names[t[2]]])) for t in triples]
    order = sorted(range(len(scored)), key=lambda i: -scored[i][1])[:n]
    return [scored[i] for i in order]


# ============================================================================================= the store
def _items_frame(items: Iterable[MemoryItem]) -> pl.DataFrame:
    from senri.records import to_frame

    return to_frame(list(items), MemoryItem)


def _read(folder: Path, name: str, record: type) -> pl.DataFrame:
    from senri.records import TableError, read_table

    path = folder / name
    if not path.is_file():
        raise ValueError(f"{path}: missing (a WorldMM store folder holds {name})")
    try:
        return read_table(path, record)
    except TableError as exc:
        raise ValueError(str(exc)) from exc


def system_prompts(config: Mapping[str, Any]):
    from senri.prompts import prompt_set

    return prompt_set(str(config.get("prompts", SYSTEM)), config.get("prompts_dir"))


class WorldMMStore(MemoryStore):
    """WorldMM's memory of one video, opened read-only (see the module docstring)."""

    system: ClassVar[str] = SYSTEM
    memory_types: ClassVar[tuple[str, ...]] = (KIND_EPISODIC, KIND_SEMANTIC, KIND_VISUAL)
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
        config = request.system_config
        prompts = system_prompts(config)
        llm = BuilderLLM(request, prompts, config.get("max_tokens") or {})
        for role in ("summariser", "extractor"):
            if not llm.has(role):
                raise ValueError(f"memory_system.worldmm.models.{role}: the build needs a model config for the "
                                 f"{role} role (it is null)")
        try:
            base, spans, caption_counts = base_captions(request, config, prompts.render("caption"))
            levels, dropped = summarise_levels(llm, base, config.get("levels") or [])
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
            counts = {**caption_counts, **{f"summaries_dropped_{k}": v for k, v in dropped.items()},
                      **ie_counts, **{f"index_{k}": v for k, v in coarse_counts.items()}, **semantic_counts}
            write_store(request.out_dir, config, episodic, ner, triples, snapshots, visual, vectors, counts,
                        {role: vars(s) for role, s in llm.stats.items()}, source="built",
                        models={role: name for role, name in llm.role_model.items()})
        finally:
            llm.close()

    @classmethod
    def import_release(cls, import_dir: Path, request: BuildRequest) -> None:
        release = read_release(Path(import_dir), request.video.video_id, request.system_config)
        config = request.system_config
        vectors = TextVectors(open_text_encoder(config))
        episodic = [item for level in release.captions.values() for item in level]
        triples, ner = dict(release.triples), dict(release.ner)
        counts: dict[str, int] = {"imported_captions": len(episodic)}
        llm_stats: dict[str, Any] = {}
        models: dict[str, str] = {}
        missing = [item for item in episodic if item.item_id not in triples]
        if missing:  # W-C9: levels the release has no OpenIE for are indexed with the retriever's model
            llm = BuilderLLM(request, system_prompts(config), config.get("max_tokens") or {})
            try:
                if llm.has("retriever"):
                    more_ner, more_triples, more = openie(llm, "retriever", missing)
                    ner.update(more_ner)
                    triples.update(more_triples)
                    counts.update({f"index_{k}": v for k, v in more.items()})
                    models["retriever"] = llm.role_model["retriever"]
                else:
                    counts["unindexed_captions"] = len(missing)
                llm_stats = {role: vars(s) for role, s in llm.stats.items()}
            finally:
                llm.close()
        write_store(request.out_dir, config, episodic, ner, triples, release.snapshots, release.visual, vectors,
                    counts, llm_stats, source=f"imported from {import_dir}", models=models)

    @classmethod
    def export_inputs(cls, captions: Path, video: Any, out_dir: Path, system_config: Mapping[str, Any]
                      ) -> list[Path]:
        """senri's captions as WorldMM's caption input (W-F1): ``caption/<video>/10sec.json`` from the caption
        table's finest level, times as ``HHMMSSFF`` (start floored, end ceiled), ``date`` ``DAY1``."""
        from senri.records import MemoryRow, read_table

        table = read_table(captions, MemoryRow).filter(pl.col("text").str.len_chars() > 0)
        if table.is_empty():
            raise ValueError(f"{captions}: no caption with text to export")
        spans = table.with_columns((pl.col("end_s") - pl.col("start_s")).alias("span"))
        finest = spans.group_by("level").agg(pl.col("span").mean()).sort("span")["level"][0]
        rows = table.filter(pl.col("level") == finest).sort("start_s")
        date = str(system_config.get("date", "DAY1"))
        entries = [{"start_time": hhmmssff(r["start_s"]), "end_time": hhmmssff(r["end_s"], round_up=True),
                    "text": r["text"], "date": date, "video_path": str(getattr(video, "path", "") or "")}
                   for r in rows.iter_rows(named=True)]
        path = Path(out_dir) / "caption" / video.video_id / f"{BASE_LEVEL}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(entries, ensure_ascii=False, indent=2))
        return [path]

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
        response = context.ask(request)
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


def semantic_item(triple: Triple, score: float = 0.0) -> MemoryItem:
    text = triple_text(triple)
    return MemoryItem(f"semantic:{text}", KIND_SEMANTIC, text, level=KIND_SEMANTIC, score=score)


# ================================================================================================ visual
def build_visual(request: BuildRequest, config: Mapping[str, Any], base: list[MemoryItem],
                 spans: list[tuple[float, float]]) -> dict[str, Any] | None:
    """W-C8: one embedding per 10-s clip when an ``embedder`` model is configured; None (skipped) otherwise."""
    model = request.models.get("embedder")
    if not model:
        return None
    from senri.memory.clip_embedding import embed_clips

    name, model_config = model
    nframes = int((config.get("visual") or {}).get("nframes", 10))
    vectors = embed_clips(model_config, request.media.video, spans, nframes, int(model_config.get("short_side", 224)))
    return {"start_s": np.array([s for s, _ in spans]), "end_s": np.array([e for _, e in spans]),
            "vectors": vectors, "embedder": name, "model_config": dict(model_config)}


# ================================================================================================= writing
def write_store(out_dir: Path, config: Mapping[str, Any], episodic: list[MemoryItem],
                ner: Mapping[str, list[str]], triples: Mapping[str, list[Triple]],
                snapshots: list[tuple[float, list[Accumulated]]] | list[tuple[float, list[Triple]]],
                visual: dict[str, Any] | None, vectors: TextVectors, counts: Mapping[str, int],
                llm_stats: Mapping[str, Any], source: str, models: Mapping[str, str]) -> None:
    """The store folder: items (episodic, the latest semantic snapshot, visual clips), OpenIE entities and
    triples, every snapshot, the text vectors, visual vectors when built, and ``config.yaml`` with the slice,
    the substitutions of the paper's models and the build's counts."""
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
    items = list(episodic) + [semantic_item(t) for t in dict.fromkeys(latest)]
    if visual is not None:
        captions = {(b.start_s, b.end_s): b.text for b in episodic if b.level == BASE_LEVEL}
        for start, end in zip(visual["start_s"], visual["end_s"]):
            text = captions.get((float(start), float(end)), "")
            items.append(MemoryItem(item_id(KIND_VISUAL, float(start), float(end)), KIND_VISUAL, text, float(start),
                                    float(end), description=text[:160], level=BASE_LEVEL))
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
    vectors.matrix([triple_text(t) for ts in triples.values() for t in ts])
    vectors.matrix(list({entity_key(p) for ts in triples.values() for t in ts for p in (t[0], t[2])}))
    vectors.matrix(list({" ".join(t) for _, ts in plain for t in ts}))
    vectors.save(out_dir / VECTORS)
    paper = dict(config.get("paper_models") or {})
    record = {
        "system": SYSTEM, "source": source, "config": json.loads(json.dumps(dict(config), default=str)),
        "models": dict(models),
        "substitutions": {"text_embedder": {"paper": paper.get("text_embedder"), "used": vectors.encoder.name},
                          **{role: {"paper": paper.get(role), "used": models.get(role)} for role in models}},
        "visual": "on" if visual is not None else "skipped (no embedder configured)",
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


# =============================================================================================== import
@dataclass
class Release:
    captions: dict[str, list[MemoryItem]]
    ner: dict[str, list[str]]
    triples: dict[str, list[Triple]]
    snapshots: list[tuple[float, list[Triple]]]
    visual: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)


def chunk_key(text: str) -> str:
    """WorldMM's OpenIE key of a caption: ``chunk-`` + md5 of its text (W-F2)."""
    return "chunk-" + hashlib.md5(text.encode("utf-8")).hexdigest()


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not readable JSON ({exc})") from exc


def read_caption_file(path: Path, level: str) -> list[MemoryItem]:
    """One W-F1 caption file: a list of ``{start_time, end_time, text, date}`` (``HHMMSSFF`` times of day,
    ``DAYn`` dates mapped to day offsets). A bad entry raises ValueError naming the file, entry and field."""
    data = _load_json(path)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of captions, got {type(data).__name__}")
    items = []
    for n, entry in enumerate(data):
        where = f"{path}: entry {n}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: not an object")
        for name in ("start_time", "end_time", "text"):
            if name not in entry:
                raise ValueError(f"{where}: field {name!r} is missing")
        if not isinstance(entry["text"], str):
            raise ValueError(f"{where}: field 'text' is not a string")
        day = parse_day(entry.get("date", "DAY1"), f"{where} field 'date'")
        offset = (day - 1) * SECONDS_PER_DAY
        start = offset + parse_hhmmssff(entry["start_time"], f"{where} field 'start_time'")
        end = offset + parse_hhmmssff(entry["end_time"], f"{where} field 'end_time'")
        if end < start:
            raise ValueError(f"{where}: field 'end_time' {entry['end_time']!r} is before start_time")
        items.append(MemoryItem(item_id(level, start, end), KIND_EPISODIC, entry["text"].strip(), start, end,
                                level=level))
    return items


def _one_file(folder: Path, pattern: str, config: Mapping[str, Any], required: bool) -> Path | None:
    model = config.get("import_model")
    found = sorted(folder.glob(pattern.replace("{model}", str(model) if model else "*")))
    if not found:
        if required:
            raise ValueError(f"{folder / pattern}: missing from the release")
        return None
    if len(found) > 1:
        raise ValueError(f"{folder}: several files match {pattern} ({', '.join(p.name for p in found)}); set "
                         f"memory_system.worldmm.import_model to the model name to import")
    return found[0]


def read_release(root: Path, video_id: str, config: Mapping[str, Any]) -> Release:
    """A memory written by WorldMM's released code (W-F1…F4) under ``root``:
    ``caption/<video>/<gran>.json``, ``episodic_memory/<video>/openie_results_<model>.json``,
    ``semantic_memory/<video>/semantic_consolidation_results_<model>.json`` and optionally
    ``visual_memory/<video>/visual_embeddings.pkl``."""
    if not root.is_dir():
        raise ValueError(f"memory_system.worldmm.import_dir: {root} is not a folder")
    captions: dict[str, list[MemoryItem]] = {}
    for level in (config.get("episodic") or {}).get("granularities") or [BASE_LEVEL]:
        path = root / "caption" / video_id / f"{level}.json"
        if not path.is_file():
            raise ValueError(f"{path}: missing (the release has no {level} captions for {video_id})")
        captions[str(level)] = read_caption_file(path, str(level))
    base = captions.get(BASE_LEVEL, [])

    openie_path = _one_file(root / "episodic_memory" / video_id, "openie_results_{model}.json", config, True)
    data = _load_json(openie_path)
    if not isinstance(data, dict):
        raise ValueError(f"{openie_path}: expected an object with ner_results and triple_results")
    for name in ("ner_results", "triple_results"):
        if not isinstance(data.get(name), dict):
            raise ValueError(f"{openie_path}: field {name!r} is missing or not an object")
    ner: dict[str, list[str]] = {}
    triples: dict[str, list[Triple]] = {}
    for item in base:
        key = chunk_key(item.text)
        if key not in data["triple_results"]:
            raise ValueError(f"{openie_path}: field 'triple_results' has no entry {key} for the {BASE_LEVEL} "
                             f"caption at {span_label(item.start_s, item.end_s)}")
        kept, _ = clean_triples(data["triple_results"][key])
        triples[item.item_id] = kept
        entities = data["ner_results"].get(key) or []
        ner[item.item_id] = [e for e in entities if isinstance(e, str)] if isinstance(entities, list) else []

    semantic_path = _one_file(root / "semantic_memory" / video_id, "semantic_consolidation_results_{model}.json",
                              config, True)
    data = _load_json(semantic_path)
    if not isinstance(data, dict):
        raise ValueError(f"{semantic_path}: expected an object keyed by TS9 timestamps")
    snapshots = []
    for key, value in data.items():
        where = f"{semantic_path}: key {key!r}"
        seconds = parse_ts9(key, str(semantic_path))
        if not isinstance(value, dict) or not isinstance(value.get("consolidated_semantic_triples"), list):
            raise ValueError(f"{where}: field 'consolidated_semantic_triples' is missing or not a list")
        kept, _ = clean_triples(value["consolidated_semantic_triples"])
        snapshots.append((seconds, kept))
    snapshots.sort(key=lambda s: s[0])

    visual = None
    pkl = root / "visual_memory" / video_id / "visual_embeddings.pkl"
    if pkl.is_file():
        visual = read_visual_embeddings(pkl, base, config)
    return Release(captions, ner, triples, snapshots, visual)


def read_visual_embeddings(path: Path, base: list[MemoryItem], config: Mapping[str, Any]) -> dict[str, Any]:
    """W-F4: ``{start_time: vector}`` read with :func:`senri.memory.release.load_release_pickle` (numpy arrays
    and plain containers only); each key is a 10sec caption's ``start_time`` (``HHMMSSFF``), matched to the caption's span."""
    data = load_release_pickle(path)
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{path}: expected a non-empty mapping start_time → vector")
    by_start = {hhmmssff(b.start_s): b for b in base}
    starts, ends, vectors = [], [], []
    for key, vector in data.items():
        where = f"{path}: key {key!r}"
        text = str(key).zfill(8)
        if text not in by_start:
            raise ValueError(f"{where}: no {BASE_LEVEL} caption starts at this time")
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        if array.size == 0 or not np.all(np.isfinite(array)):
            raise ValueError(f"{where}: the vector is empty or not finite")
        if vectors and array.size != vectors[0].size:
            raise ValueError(f"{where}: vector dimension {array.size}, others have {vectors[0].size}")
        clip = by_start[text]
        starts.append(clip.start_s)
        ends.append(clip.end_s)
        vectors.append(array / (np.linalg.norm(array) or 1.0))
    order = np.argsort(starts, kind="stable")
    embedder = str(config.get("import_embedder") or (config.get("paper_models") or {}).get("embedder")
                   or "release")
    return {"start_s": np.array(starts)[order], "end_s": np.array(ends)[order],
            "vectors": np.stack(vectors)[order], "embedder": embedder}

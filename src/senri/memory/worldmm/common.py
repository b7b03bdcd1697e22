"""What every part of WorldMM's store shares: its constants and folder layout, WorldMM's time encodings
(``HHMMSSFF``, ``DAYn``, ``TS9``), item ids, the windowing of its coarser levels (W-C3), triples, the text encoder
and the per-store text vectors, and the tolerant JSON (and Python-literal) readers of builder and retriever replies.

The package's modules import downward only: ``store`` → ``release`` → ``build`` → ``index``/``common``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from senri.memory.store import MemoryItem

log = logging.getLogger(__name__)


SYSTEM = "worldmm"


BASE_LEVEL = "10sec"


KIND_EPISODIC, KIND_SEMANTIC, KIND_VISUAL = "episodic", "semantic", "visual"


#: Tables of a store folder.
ITEMS, ENTITIES, TRIPLES, SNAPSHOTS, VECTORS, VISUAL, CONFIG = (
    "items.parquet", "entities.parquet", "triples.parquet", "snapshots.parquet", "text_vectors.npz",
    "visual.npz", "config.yaml")


#: The model role of the retrieval-side calls (W-C9's index OpenIE at build time, W8 and W9 at question time):
#: ``memory_system.worldmm.models.retriever``, as the release runs them on its retriever model (gpt-5-mini)
#: apart from the answering one (gpt-5).
RETRIEVER_ROLE = "retriever"


#: How a search's notes start where a level's W8 call was not made (counted per search in the workflow's trace).
FILTER_SKIP_NOTE = "W8 skipped"


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


_STAMP = r"DAY\s*(\d+)\s+(\d{1,2}):(\d{2}):(\d{2})"
_RANGE = re.compile(_STAMP, re.IGNORECASE)
#: The released test of a time-range query: a ``DAY d HH:MM:SS - DAY d HH:MM:SS`` pattern anywhere in it.
_RANGE_PATTERN = re.compile(r"DAY\s*\d+\s+\d{1,2}:\d{2}:\d{2}\s*-\s*DAY\s*\d+\s+\d{1,2}:\d{2}:\d{2}", re.IGNORECASE)


def is_time_range(query: str) -> bool:
    """Whether a visual query is a time range, as the released visual memory decides it: two stamps joined by
    ``-`` (``DAY d HH:MM:SS - DAY d HH:MM:SS``) somewhere in the query; two stamps written any other way
    ("between DAY1 00:00:05 and DAY1 00:00:09") make a text query."""
    return bool(_RANGE_PATTERN.search(query))


def parse_time_range(query: str) -> tuple[float, float] | None:
    """``(start_s, end_s)`` of a time-range visual query (:func:`is_time_range`), else None. As the release reads
    it, the bounds are the query's first two stamps, and a range that ends before it starts is still a range
    (it overlaps no frame: the release's range path then returns no images)."""
    if not is_time_range(query):
        return None
    (d1, h1, m1, s1), (d2, h2, m2, s2) = _RANGE.findall(query)[:2]
    start = (int(d1) - 1) * SECONDS_PER_DAY + int(h1) * 3600 + int(m1) * 60 + int(s1)
    end = (int(d2) - 1) * SECONDS_PER_DAY + int(h2) * 3600 + int(m2) * 60 + int(s2)
    return float(start), float(end)


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


_NOT_WORD = re.compile(r"[^A-Za-z0-9 ]")


def hipporag_text(text: str) -> str:
    """HippoRAG-2's normalisation of every triple part before it indexes them: lower case, every character other
    than an ASCII letter, digit or space made a space, the ends stripped. "Red-mug" and "red mug" become one entity
    node, and the W8 filter sees (and its reply is matched against) the normalised facts, as in the release."""
    return _NOT_WORD.sub(" ", str(text).lower()).strip()


def hipporag_triple(triple: Sequence[str]) -> Triple:
    """A triple with :func:`hipporag_text` applied to each part (HippoRAG's processed fact)."""
    return tuple(hipporag_text(part) for part in triple)  # type: ignore[return-value]


def fact_text(fact: Sequence[str]) -> str:
    """What HippoRAG embeds for a processed fact and matches W8 replies against: the Python tuple's text,
    ``('i', 'pour', 'water')``."""
    return str(tuple(fact))


def cut_text(text: str, limit: int | None) -> str:
    """``text`` cut to at most ``limit`` characters (its head, then " …"); None or a longer limit: as it is."""
    if limit is None or len(text) <= limit:
        return text
    return text[:max(0, limit)].rstrip() + " …"


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

            self._embedder = Embedder.shared()
        return np.asarray(self._embedder.encode(list(texts)), dtype=np.float32)


class ApiTextEncoder(TextEncoder):
    """A text embedder behind the OpenAI-compatible embeddings API (:class:`senri.backends.embeddings.
    EmbeddingsClient`: text-embedding-3-large, the release's M3-Agent embedder), its vectors L2-normalised as
    every encoder's are (OpenAI's already are; a server's pooling may not be). ``response_cache``: the job's
    cache file, where each text's vector is kept; ``tally``: the client's call counts."""

    def __init__(self, model_name: str, model_config: Mapping[str, Any],
                 response_cache: str | Path | None = None) -> None:
        from senri.backends.embeddings import EmbeddingsClient

        self.client = EmbeddingsClient(model_config, response_cache)
        self.name = f"api:{model_name}:{self.client.name}"

    @property
    def tally(self):
        return self.client.tally

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.client.embed(list(texts))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True) if vectors.size else np.ones((0, 1), np.float32)
        return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


TEXT_ENCODERS: dict[str, Callable[[], TextEncoder]] = {"minilm": MiniLMEncoder}


def open_text_encoder(config: Mapping[str, Any], key: str = "memory_system.worldmm.text_embedder",
                      response_cache: str | Path | None = None) -> TextEncoder:
    """``text_embedder``: a name in :data:`TEXT_ENCODERS` (``minilm``, the in-process stand-in), a model config
    name (``text_embedding_3_large``: the config composition resolves it into ``text_embedder_config`` beside it,
    :func:`senri.config.attach_memory_system_models`; :class:`ApiTextEncoder`, its vectors kept in
    ``response_cache``) or a ``"module:Class"`` target, an encoder of one's own without a registry line (the DAG
    tests' hashed words, which spare every store and answer job loading torch and MiniLM); the store records the
    encoder's ``name``. ``key`` names the setting in errors (MAGIC-Video and M3-Agent read theirs here too)."""
    name = str(config.get("text_embedder", "minilm"))
    resolved = config.get("text_embedder_config")
    if isinstance(resolved, Mapping) and resolved.get("name") == name:
        return ApiTextEncoder(name, resolved["config"], response_cache)
    if ":" in name:
        from senri.registry import import_target

        try:
            return import_target(name)()
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"{key}: {name!r} cannot be loaded ({exc})") from exc
    if name not in TEXT_ENCODERS:
        raise ValueError(f"{key}: {name!r} is not one of {sorted(TEXT_ENCODERS)}, a model config (config/model/"
                         f"<name>.yaml, resolved by the config into text_embedder_config) nor a 'module:Class' target")
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


def _as_lists(value: Any) -> Any:
    """A Python literal with its tuples made lists (all the way down), as pydantic's lax list validation reads them."""
    if isinstance(value, (list, tuple)):
        return [_as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_lists(v) for k, v in value.items()}
    return value


def literal_value(body: str, validate: Callable[[Any], Any]) -> Any:
    """The reply read as a Python literal (``ast.literal_eval`` only: no name is looked up, nothing is called),
    its tuples made lists, for a reply that is not JSON: the whole reply, then the span from its first ``{`` to
    its last ``}``, then from its first ``[`` to its last ``]``; the first that ``validate`` accepts, or None.
    HippoRAG reads its fact filter's field this way after JSON (``{'fact': [('i', 'hold', 'cup')]}``)."""
    import ast

    spans = [body.strip()]
    for open_, close in ("{}", "[]"):
        first, last = body.find(open_), body.rfind(close)
        if 0 <= first < last:
            spans.append(body[first:last + 1])
    for span in dict.fromkeys(spans):
        try:
            value = ast.literal_eval(span)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        checked = validate(_as_lists(value))
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


def semantic_item(triple: Triple, score: float = 0.0, occurrence: int = 0) -> MemoryItem:
    """A semantic triple as an item; the ``occurrence``-th repeat of one triple in a snapshot (0: its first) gets
    an id of its own (``…#n``), as the release gives every snapshot entry its own id."""
    text = triple_text(triple)
    suffix = f"#{occurrence}" if occurrence else ""
    return MemoryItem(f"semantic:{text}{suffix}", KIND_SEMANTIC, text, level=KIND_SEMANTIC, score=score)


def occurrences(triples: Sequence[Triple]) -> list[int]:
    """For each triple of a snapshot, how many equal ones come before it (0 for a first occurrence)."""
    seen: dict[Triple, int] = {}
    out = []
    for triple in triples:
        out.append(seen.get(triple, 0))
        seen[triple] = out[-1] + 1
    return out


def system_prompts(config: Mapping[str, Any]):
    from senri.prompts import prompt_set

    return prompt_set(str(config.get("prompts", SYSTEM)), config.get("prompts_dir"))

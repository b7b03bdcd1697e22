"""Light-Omni's memory state machine (L-C5..C10, L-R4..R6, K-15, K-18): logs, hierarchical short-term memory,
batch archiving to an episodic index, semantic facts and face profiles, and the texts it renders for its
prompts. No model here: every model call goes through a :class:`MemoryModel` (the engine in production,
scripted replies in tests), which receives the fields the release formats into LP1–LP3 (the prompt texts
themselves are read from the user's release checkout by the engine: they are not ours to ship).
"""

from __future__ import annotations

import copy
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from senri.memory.light_omni.replies import parse_reply

MERGE_FACTOR = 8
TOP_K_SEMANTIC = 12
TOP_K_EPISODIC = 4
IMAGE_RATIO = 0.1
DASH = "\u2014"
FACE_TAG = re.compile(r"<face_(\d+)>")
#: K-15 / issue 62 item 5: how a log's deduplicated semantic facts are ordered. The release's ``set()`` gives
#: Python's string-hash order, which PYTHONHASHSEED draws anew in every process: randomness the release leaves
#: unseeded. ``seeded`` (the default) keeps it a random order but draws it from the run's seed (recorded in the
#: store's config); ``set`` is the release's own, unreproducible; ``first_seen`` keeps the reply's order.
FACT_ORDERS = ("seeded", "set", "first_seen")


class MemoryModel(Protocol):
    """The memory adapter's three calls and the embedder, as the memory needs them."""

    def log(self, request: "LogRequest") -> str:
        """LP1 over one segment: the raw reply text."""

    def merge(self, memory_sequence: str) -> str:
        """LP2 over the rendered STM slice: the raw reply text."""

    def update_profiles(self, current_profiles: str, memory_log_sequence: str) -> str:
        """LP3: the raw reply text."""

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """L-R2 documents: one L2-normalised row per text."""


@dataclass(frozen=True)
class LogRequest:
    """What LP1 is filled with (L-C6): the segment's times, its processed frames and merged audio, the text
    ("null" in eval), the face profile lines of the segment's faces and the STM text (no images)."""

    start_time: str
    end_time: str
    images: tuple[str, ...]
    audio: str
    text: str
    faces: str
    short_term_memory: str


def sample_evenly(items: Sequence[str], ratio: float) -> list[str]:
    """K-18's image sampling: k = max(1, ⌊ratio·n⌋) items at indices ⌊i·n/k⌋ (none when n = 0)."""
    if not items:
        return []
    k = max(1, int(len(items) * ratio))
    return [items[int(i * len(items) / k)] for i in range(k)]


class VectorIndex:
    """A faiss IndexFlatIP in numpy: rows in insertion order, exact inner products; ties keep the lower id
    first (faiss's flat search). ``keys`` are the dedup keys (L-C10)."""

    def __init__(self, dimension: int = 1024) -> None:
        self.dimension = dimension
        self.items: list[Any] = []
        self.vectors = np.zeros((0, dimension), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, items: Sequence[Any], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(items), -1)
        self.items.extend(items)
        self.vectors = np.vstack([self.vectors, vectors]) if len(self.vectors) else vectors

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        scores = self.vectors @ np.asarray(query, dtype=np.float32).reshape(-1)
        order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))[:k]
        return [(i, float(scores[i])) for i in order]


def _dedup_key(item: Any) -> str | None:
    if isinstance(item, dict) and "start_time" in item and "end_time" in item:
        return f"{item['start_time']}_{item['end_time']}"
    if isinstance(item, str):
        return item.strip()
    return None


def episodic_text(item: dict) -> str:
    """L-C10: an episodic item is embedded as its visual and audio descriptions, newline-joined (missing
    fields left out)."""
    return "\n".join(str(item[key]) for key in ("visual description", "audio description")
                     if item.get(key) is not None)


class Retriever:
    """L-C10 and L-R4: the semantic and episodic indexes, per-message seen sets, fetch min(n, k+|seen|+5)."""

    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray], dimension: int = 1024) -> None:
        self.embed = embed
        self.semantic = VectorIndex(dimension)
        self.episodic = VectorIndex(dimension)
        self.seen_semantic: set[int] = set()
        self.seen_episodic: set[int] = set()
        self.embedded_batches: list[list[str]] = []

    def _add(self, index: VectorIndex, items: Sequence[Any], text: Callable[[Any], str]) -> bool:
        existing = {_dedup_key(x) for x in index.items} - {None}
        texts, kept = [], []
        for item in items:
            key = _dedup_key(item)
            if key is not None and key in existing:
                continue
            body = text(item)
            if body and body.strip():
                texts.append(body)
                kept.append(item)
        if not texts:
            return False
        self.embedded_batches.append(list(texts))
        index.add(kept, self.embed(texts))
        return True

    def update(self, semantic: Sequence[str] = (), episodic: Sequence[dict] = ()) -> None:
        if semantic:
            self._add(self.semantic, semantic, lambda s: s if isinstance(s, str) else "")
        if episodic:
            self._add(self.episodic, episodic, lambda d: episodic_text(d) if isinstance(d, dict) else "")

    def reset(self) -> None:
        """After every message (ag 231)."""
        self.seen_semantic.clear()
        self.seen_episodic.clear()

    @staticmethod
    def _search(index: VectorIndex, query: np.ndarray, k: int, seen: set[int]) -> list[tuple[int, float]]:
        if not len(index):
            return []
        fetch = min(len(index), k + len(seen) + 5)
        hits = []
        for idx, score in index.search(query, fetch):
            if len(hits) >= k:
                break
            if idx not in seen:
                hits.append((idx, score))
                seen.add(idx)
        return sorted(hits)

    def retrieve(self, query: np.ndarray, k_semantic: int = TOP_K_SEMANTIC, k_episodic: int = TOP_K_EPISODIC
                 ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """Semantic and episodic hits as (index id, score), each re-sorted by id (K-18)."""
        return (self._search(self.semantic, query, k_semantic, self.seen_semantic),
                self._search(self.episodic, query, k_episodic, self.seen_episodic))


class Profiles:
    """Face profiles (L-F2's profiles.json, the metadata part): ``meta[<face_N>] = {name, demographics, …}``."""

    def __init__(self, meta: dict[str, Any] | None = None) -> None:
        self.meta: dict[str, Any] = {"face_counter": 0, "mapping": [], "qualities": []}
        self.meta.update(copy.deepcopy(meta or {}))

    def lines(self, faces: Sequence[str]) -> str:
        """pm get_faces_profile: one ``"<face_N>: {repr}"`` line per face, ``unknown`` when not profiled."""
        return "\n".join(f"{face}: {self.meta[face]}" if face in self.meta else f"{face}: unknown"
                         for face in faces)

    def update(self, reply: Any, faces: Sequence[str]) -> None:
        """LP3's reply: each listed face's profile is REPLACED by its non-empty fields (L-C9); a reply that is
        not a mapping, or an entry that is not one, changes nothing."""
        for face in faces:
            try:
                if face in reply:
                    self.meta[face] = {k: v for k, v in reply[face].items() if v != ""}
            except (TypeError, AttributeError):
                continue

    def profiles(self) -> dict[str, Any]:
        return {k: v for k, v in self.meta.items() if k.startswith("<face_")}


def render_stm_nodes(nodes: Sequence[dict]) -> list[str]:
    """L-R6: one block per STM node (times with the two-dash separator, visual, audio, assistant)."""
    return [f"Start time: {n['start_time']}{DASH}{DASH}End time: {n['end_time']}\n"
            f"Visual description: {n.get('visual', 'null')}\n"
            f"Audio description: {n.get('auditory', 'null')}\n"
            f"Assistant: {n.get('assistant', 'null')}\n" for n in nodes]


def render_episodic(item: dict, images: Sequence[str]) -> str:
    """L-R5: one retrieved episodic item and its image tags."""
    text = (f"{item['start_time']}{DASH}{DASH}{item['end_time']}\n"
            f"Visual description: {item['visual description']}\n"
            f"Audio description: {item['audio description']}\n"
            f"Assistant Response: {item.get('assistant', 'null')}\n")
    if images:
        text += "Relevant image: " + "<img>" * len(images) + "\n"
    return text


def conversation_images(conversation: dict | list) -> list[str]:
    """The processed frames of a stored conversation (``{"message": {"image_path": [...]}}``) or of a plain
    list of paths (the release cases' shorthand)."""
    if isinstance(conversation, list):
        return list(conversation)
    return list(conversation["message"].get("image_path", []))


@dataclass
class LightOmniMemory:
    """One session of the agent's memory (data.json's last session + the indexes + profiles)."""

    model: MemoryModel
    merge_factor: int = MERGE_FACTOR
    fact_order: str = "seeded"
    seed: int = 0
    convs: list[dict] = field(default_factory=list)
    logs: list[dict] = field(default_factory=list)
    stm: list[dict] = field(default_factory=list)
    ltm: list[dict] = field(default_factory=list)
    profiles: Profiles = field(default_factory=Profiles)
    retriever: Retriever | None = None
    calls: list[str] = field(default_factory=list)
    merge_windows: list[list[tuple[str, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.fact_order not in FACT_ORDERS:
            raise ValueError(f"light_omni fact_order {self.fact_order!r} is not one of {FACT_ORDERS}")
        if self.retriever is None:
            self.retriever = Retriever(self.model.embed_documents)
        self._rng = random.Random(self.seed)

    # ------------------------------------------------------------------ rendering
    def short_term_memory(self, image_ratio: float = IMAGE_RATIO, start: int = 0, end: int | None = None
                          ) -> tuple[str, list[str]]:
        """L-R6: the STM text (nodes ``start:end``) and, with ``image_ratio`` > 0, the sampled frames of every
        conversation after the last archived turn."""
        text = "\n".join(render_stm_nodes(self.stm[start:end or len(self.stm)]))
        if image_ratio <= 0:
            return text, []
        first = max([max(t["turn_idx"]) for t in self.ltm if t.get("turn_idx")] or [-1]) + 1
        pool = [img for conv in self.convs[first:] for img in conversation_images(conv)]
        images = sample_evenly(pool, image_ratio) if pool else []
        if images:
            text += "\n[Recent Visual History]: " + "<img>" * len(images)
        return text, images

    def render_retrieved(self, semantic_hits: Sequence[tuple[int, float]], episodic_hits: Sequence[tuple[int, float]],
                         image_ratio: float = IMAGE_RATIO) -> tuple[str, str, list[str]]:
        """L-R5: the semantic and episodic texts of a retrieval and the images they tag, in tag order."""
        semantic = "\n".join(self.retriever.semantic.items[i] for i, _ in semantic_hits) \
            or "No relevant semantic memory found."
        if not episodic_hits:
            return semantic, "No relevant episodic memory found.", []
        blocks, images = [], []
        for i, _ in episodic_hits:
            item = self.retriever.episodic.items[i]
            pool = [img for conv in item["raw_convs"] for img in conversation_images(conv)]
            chosen = sample_evenly(pool, image_ratio)
            blocks.append(render_episodic(item, chosen))
            images.extend(chosen)
        return semantic, "\n".join(blocks), images

    # ------------------------------------------------------------------ consolidation
    def _facts(self, facts: Sequence[str]) -> list[str]:
        if self.fact_order == "set":
            return list(set(facts))
        unique = list(dict.fromkeys(facts))
        if self.fact_order == "seeded":
            self._rng.shuffle(unique)
        return unique

    def add_segment(self, message: dict, faces: Sequence[str], response: str = "") -> dict:
        """L-C5..C9 for one eval_memory message (``{start_time, end_time, image_path, audio_path, text}``):
        store the conversation, write its log (LP1), its facts, merge STM and archive. An unrepairable reply
        raises TypeError as the release's next field assignment does (the caller records the video's loss)."""
        self.convs.append({"message": message, "response": response})
        request = LogRequest(message["start_time"], message["end_time"], tuple(message.get("image_path", [])),
                             message.get("audio_path", ""), message.get("text", "null"),
                             self.profiles.lines(faces), self.short_term_memory(image_ratio=0)[0])
        self.calls.append("LP1")
        log = parse_reply(self.model.log(request))
        if not isinstance(log, dict):
            raise TypeError(f"the memory adapter's log reply is not a JSON object ({type(log).__name__}): "
                            "'str' object does not support item assignment")
        log.update(start_time=message["start_time"], end_time=message["end_time"],
                   assistant=response or "null", level=0)
        if self.logs and self.logs[-1].get("auditory", "") == log.get("auditory", ""):
            log["auditory"] = "Silent"
        log["turn_idx"] = len(self.logs)
        self.logs.append(copy.deepcopy(log))
        self.stm.append(copy.deepcopy(log))
        if "semantic_memory" in log:
            facts = [f"{log['start_time']}{DASH}{log['end_time']}: {fact}"
                     for fact in self._facts(log["semantic_memory"])]
            if facts:
                self.retriever.update(semantic=facts)
        if self.merge_short_term_memory():
            self.archive()
        return self.logs[-1]

    def merge_short_term_memory(self) -> bool:
        """L-C8: while a level holds ≥ merge_factor + 1 nodes, merge the lowest such level's first 8 nodes and
        everything between them (LP2). Returns whether a level-0 merge happened (which triggers archiving)."""
        level_zero = False
        while True:
            counts = Counter(node.get("level", 0) for node in self.stm)
            full = [lvl for lvl in sorted(counts) if counts[lvl] >= self.merge_factor + 1]
            if not full:
                return level_zero
            level = full[0]
            level_zero = level_zero or level == 0
            positions = [i for i, node in enumerate(self.stm) if node.get("level", 0) == level][:self.merge_factor]
            start, end = positions[0], positions[-1] + 1
            text, _ = self.short_term_memory(image_ratio=0, start=start, end=end)
            self.merge_windows.append([(n["start_time"], n["end_time"]) for n in self.stm[start:end]])
            self.calls.append("LP2")
            merged = parse_reply(self.model.merge(text))
            if not isinstance(merged, dict):
                raise TypeError(f"the memory adapter's merge reply is not a JSON object ({type(merged).__name__})")
            subset = self.stm[start:end]
            node = copy.deepcopy(merged)
            node.update(start_time=subset[0]["start_time"], end_time=subset[-1]["end_time"], level=level + 1,
                        turn_idx=sum([x["turn_idx"] if isinstance(x["turn_idx"], list) else [x["turn_idx"]]
                                      for x in subset], []))
            self.stm = self.stm[:start] + [node] + self.stm[end:]

    def archive(self) -> list[str]:
        """L-C9: every log after the highest archived turn becomes an episodic item; faces named ≥ 2 times in
        those logs get LP3. Returns the LP3 face list (empty when none was asked)."""
        if not self.logs:
            return []
        first = max(max(t["turn_idx"]) for t in self.ltm) + 1 if self.ltm else 0
        new_logs = copy.deepcopy(self.logs[first:])
        if not new_logs:
            return []
        items = [{"start_time": log["start_time"], "end_time": log["end_time"],
                  "visual description": log.get("visual", "null"),
                  "audio description": log.get("auditory", "null"),
                  "assistant": log.get("assistant", "null"), "turn_idx": [log["turn_idx"]],
                  "raw_convs": [self.convs[log["turn_idx"]]] if log["turn_idx"] < len(self.convs) else []}
                 for log in new_logs]
        self.ltm = self.ltm + [{"turn_idx": item["turn_idx"]} for item in items]
        self.retriever.update(episodic=items)
        blocks = [f"Log index: {i}\n"
                  f"Start time: {log['start_time']}{DASH}{DASH}End time: {log['end_time']}\n"
                  f"Visual description: {log.get('visual', 'null')}\n"
                  f"Audio description: {log.get('auditory', 'null')}\n"
                  f"Assistant: {log['assistant']}\n" for i, log in enumerate(new_logs)]
        counts = Counter(FACE_TAG.findall("".join(blocks)))
        faces = [f"<face_{k}>" for k, v in counts.items() if v >= 2]
        if faces:
            self.calls.append("LP3")
            reply = parse_reply(self.model.update_profiles(self.profiles.lines(faces), "\n".join(blocks)))
            self.profiles.update(reply, faces)
        return faces

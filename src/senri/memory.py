"""Hierarchical caption memory (VideoLucy-style) and the one caption cache every later step reuses.

Levels (coarse → fine → ultra-fine) split the video into clips of shrinking span and rising frame rate; the
level settings come from a preset picked by video length (``memory.preset: auto``). The memory stage
captions the precomputed levels (coarse by default) with a question-independent instruction; methods that
backtrack ask for more captions later, through the same :class:`CaptionService`.

**The caption cache** is keyed by (video fingerprint, start, end, fps, instruction, captioner identity), so
a caption is computed once and every question, method and inference model reuses it; changing the inference
model never re-captions, changing the captioner (or its settings or code) keys new captions. Each caption is
one small JSON file written atomically (temp file + rename) the moment it is computed, under
``results/cache/captions/<captioner>/<video>/``: concurrent jobs of one video (several methods and models)
share it without locks — a rename is atomic on local and network file systems alike, and two jobs computing
the same caption write the same content. A killed job loses no finished caption.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from senri.captioners import CAPTIONERS
from senri.captioners.base import Caption, Captioner, Clip, VideoMedia
from senri.records import MemoryCost, MemoryRow, TrackRow, read_table, to_frame

log = logging.getLogger(__name__)

LEVELS: tuple[str, ...] = ("coarse", "fine", "ultra_fine")
COARSE_INSTRUCTION_DEFAULT = (
    "Describe everything in this part of my first-person video comprehensively and coherently, in time order: "
    "where I am, what I do, people and objects, and any visible text, signs, subtitles or overlays."
)


@dataclass(frozen=True)
class LevelSpec:
    clip_s: float
    fps: float


def choose_preset(memory: Mapping[str, Any], duration_s: float) -> tuple[str, dict[str, LevelSpec]]:
    """The preset's name and level settings: the configured one, or by video length when ``auto``."""
    name = memory["preset"]
    if name == "auto":
        if duration_s >= float(memory["long_video_min_s"]):
            name = "long"
        elif duration_s <= float(memory["short_video_max_s"]):
            name = "short"
        else:
            name = "medium"
    if name not in memory["presets"]:
        raise ValueError(f"config.memory.preset: no preset named {name!r} (known: {sorted(memory['presets'])})")
    levels = memory["presets"][name]
    return name, {level: LevelSpec(float(levels[level]["clip_s"]), float(levels[level]["fps"])) for level in LEVELS}


def split(start_s: float, end_s: float, clip_s: float) -> list[tuple[float, float]]:
    """Consecutive clips of ``clip_s`` covering [start_s, end_s); the last one is shorter when it must be."""
    if clip_s <= 0:
        raise ValueError(f"clip length must be > 0, got {clip_s}")
    spans, t = [], start_s
    while t < end_s - 1e-6:
        spans.append((round(t, 6), round(min(t + clip_s, end_s), 6)))
        t += clip_s
    return spans


def next_level(level: str) -> str | None:
    index = LEVELS.index(level)
    return LEVELS[index + 1] if index + 1 < len(LEVELS) else None


def instruction_hash(instruction: str) -> str:
    return hashlib.sha256(instruction.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ cache


class CaptionCache:
    """Caption key → JSON record, one file per caption, written atomically."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(fingerprint: str, identity: Mapping[str, Any], clip: Clip) -> str:
        payload = {"video": fingerprint, "start_s": round(clip.start_s, 6), "end_s": round(clip.end_s, 6),
                   "fps": round(clip.fps, 6), "instruction": clip.instruction, "captioner": dict(identity)}
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(key).read_text())
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, OSError) as exc:  # a damaged entry is recomputed, not trusted
            log.warning("caption cache entry %s unreadable (%s); recomputing", self._path(key), exc)
            return None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:8]}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(record, handle, ensure_ascii=False)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("*/*.json")) if self.directory.exists() else 0


@dataclass
class CaptionStats:
    computed: int = 0
    reused: int = 0
    frames: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"computed": self.computed, "reused": self.reused, "frames": self.frames, "failed": self.failed}


@dataclass
class CaptionService:
    """A captioner behind the caption cache, with the video's track for each caption's spatial context."""

    captioner: Captioner
    cache: CaptionCache
    name: str
    batch_clips: int = 8
    track: pl.DataFrame | None = None
    stats: CaptionStats = field(default_factory=CaptionStats)

    def captions(self, clips: Sequence[Clip]) -> list[MemoryRow]:
        """Memory rows for ``clips``, from the cache where possible; misses go to the captioner in batches
        of ``batch_clips`` and each batch is stored as soon as it returns."""
        media = self.captioner.media
        identity = self.captioner.identity()
        keys = [CaptionCache.key(media.fingerprint, identity, clip) for clip in clips]
        records: list[dict[str, Any] | None] = [self.cache.get(key) for key in keys]
        self.stats.reused += sum(r is not None for r in records)
        todo = [i for i, r in enumerate(records) if r is None]
        for start in range(0, len(todo), self.batch_clips):
            batch = todo[start:start + self.batch_clips]
            try:
                captions = self.captioner.caption_many([clips[i] for i in batch])
            except Exception as exc:  # noqa: BLE001 — recorded on each clip's row; the memory goes on
                log.error("captioning %d clip(s) failed: %s", len(batch), exc)
                captions = [Caption("", 0, f"{type(exc).__name__}: {exc}") for _ in batch]
            now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            for i, caption in zip(batch, captions):
                record = {"text": caption.text, "n_frames": caption.n_frames, "error": caption.error,
                          "created_at": now}
                self.stats.frames += caption.n_frames
                if caption.error is None:
                    self.cache.put(keys[i], record)
                    self.stats.computed += 1
                else:
                    self.stats.failed += 1
                records[i] = record
        return [self._row(clip, record) for clip, record in zip(clips, records) if record is not None]

    def _row(self, clip: Clip, record: Mapping[str, Any]) -> MemoryRow:
        from senri.track import active_labels, heading_change

        heading, labels = None, None
        if self.track is not None and not self.track.is_empty():
            heading = round(heading_change(self.track, clip.start_s, clip.end_s), 1)
            labels = ", ".join(active_labels(self.track, clip.start_s, clip.end_s)) or None
        return MemoryRow(
            video_id=self.captioner.media.video_id, level=clip.level, start_s=clip.start_s, end_s=clip.end_s,
            fps=clip.fps, n_frames=int(record["n_frames"]), instruction_hash=instruction_hash(clip.instruction),
            text=record["text"], captioner=self.name, created_at=record["created_at"],
            heading_change_deg=heading, place_labels=labels, error=record.get("error"),
        )

    def close(self) -> None:
        self.captioner.close()


def open_captioner(memory_slice: Mapping[str, Any], media: VideoMedia) -> Captioner:
    """The captioner the memory config names: ``perception``, or a model config's VLM backend."""
    memory = memory_slice["memory"]
    name = memory["captioner"]
    if name == "perception":
        return CAPTIONERS.load("perception")({"track": memory_slice.get("track", {})}, media)
    model = memory_slice.get("captioner_model")
    if not model:
        raise ValueError(f"config.memory.captioner: {name!r} is neither 'perception' nor a model config")
    settings = {"model": {"name": name, **model}, "max_frames": memory.get("max_frames", 32),
                "short_side": memory.get("short_side", 448)}
    return CAPTIONERS.load("vlm")(settings, media)


def open_service(memory_slice: Mapping[str, Any], media: VideoMedia, cache_dir: str | Path) -> CaptionService:
    track = read_table(media.track, TrackRow) if media.track else None
    memory = memory_slice["memory"]
    return CaptionService(open_captioner(memory_slice, media), CaptionCache(cache_dir), memory["captioner"],
                          int(memory.get("batch_clips", 8)), track)


def level_clips(memory: Mapping[str, Any], duration_s: float, level: str, instruction: str,
                start_s: float = 0.0, end_s: float | None = None) -> list[Clip]:
    _, levels = choose_preset(memory, duration_s)
    spec = levels[level]
    return [Clip(s, e, spec.fps, instruction, level)
            for s, e in split(start_s, duration_s if end_s is None else end_s, spec.clip_s)]


def build_memory(service: CaptionService, memory: Mapping[str, Any], duration_s: float
                 ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Caption the precomputed levels of one video; returns (memory rows, cost rows)."""
    instruction = memory.get("coarse_instruction") or COARSE_INSTRUCTION_DEFAULT
    rows, costs = [], []
    for level in memory.get("precompute", ["coarse"]):
        before = CaptionStats(**service.stats.as_dict())
        started = time.monotonic()
        clips = level_clips(memory, duration_s, level, instruction)
        rows += service.captions(clips)
        after = service.stats
        costs.append(MemoryCost(service.captioner.media.video_id, service.name, level, len(clips),
                                after.computed - before.computed, after.reused - before.reused,
                                after.frames - before.frames, after.failed - before.failed,
                                round(time.monotonic() - started, 3)))
        log.info("%s %s: %d clip(s), %d computed, %d reused, %d frame(s) read, %d failed",
                 service.captioner.media.video_id, level, len(clips), costs[-1].computed, costs[-1].reused,
                 costs[-1].frames, costs[-1].failed)
    return to_frame(rows, MemoryRow), to_frame(costs, MemoryCost)


def format_memory(rows: Sequence[MemoryRow] | pl.DataFrame, numbered: bool = True) -> str:
    """The memory list an LLM reads: ``[i] level m:ss–m:ss: text`` per entry, in time order."""
    from senri.track import clock

    items = rows.iter_rows(named=True) if isinstance(rows, pl.DataFrame) else (r.__dict__ for r in rows)
    lines = []
    for i, row in enumerate(items):
        prefix = f"[{i}] " if numbered else ""
        context = []
        if row.get("place_labels"):
            context.append(f"signs: {row['place_labels']}")
        if row.get("heading_change_deg") is not None:
            context.append(f"heading change {row['heading_change_deg']:+.0f}°")
        suffix = f" ({'; '.join(context)})" if context else ""
        text = row["text"] or f"(no caption: {row.get('error')})"
        lines.append(f"{prefix}{row['level']} {clock(row['start_s'])}–{clock(row['end_s'])}{suffix}: {text}")
    return "\n".join(lines)

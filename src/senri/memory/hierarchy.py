"""Hierarchical caption memory (VideoLucy-style) and the one caption cache every later step reuses.

Levels (coarse → fine → ultra-fine) split the video into clips of shrinking span and rising frame rate; the
level settings come from a preset of the VideoLucy appendix, named or picked by video length
(``memory.preset: auto`` and the ``auto`` rule in the config); the preset is recorded in the cost table.
The memory stage captions the precomputed levels (coarse by default) with a question-independent
instruction; methods that backtrack ask for more captions later, through the same :class:`CaptionService`.

**The caption cache** is keyed by (video fingerprint, level, start, end, fps, instruction, captioner identity), so
a caption is computed once and every question, method and inference model reuses it; changing the inference
model never re-captions, changing the captioner (or its settings or code) keys new captions. Each caption is
one small JSON file written atomically (temp file + rename) the moment it is computed, under
``results/cache/captions/<captioner>/<video>/``: concurrent jobs of one video (several methods and models)
share it without locks — a rename is atomic on local and network file systems alike, and two jobs computing
the same caption write the same content. A killed job loses no finished caption.
"""

from __future__ import annotations

import dataclasses
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

from senri.backends.base import FINISH_LENGTH
from senri.captioners import CAPTIONERS
from senri.captioners.base import Caption, Captioner, Clip, VideoMedia
from senri.records import MemoryCost, MemoryRow, TrackRow, read_table, to_frame

log = logging.getLogger(__name__)

LEVELS: tuple[str, ...] = ("coarse", "fine", "ultra_fine")


@dataclass(frozen=True)
class LevelSpec:
    clip_s: float
    fps: float


def preset_rule(memory: Mapping[str, Any]) -> list[tuple[float | None, str]]:
    """The ``auto`` rule as (upper bound in seconds or None, preset), shortest bound first, unbounded last.

    Kept as a mapping preset → bound in the config (so one bound is one override, and the canonical JSON of
    the config slice, which sorts keys, cannot reorder it)."""
    rule = memory.get("auto") or {}
    bounded = sorted((float(b), name) for name, b in rule.items() if b is not None)
    return [*bounded, *((None, name) for name, b in rule.items() if b is None)]


def describe_preset_rule(memory: Mapping[str, Any]) -> str:
    """The ``auto`` rule in words, one line per bin (what ``senri config`` prints)."""
    lines, low = [], 0.0
    for bound, name in preset_rule(memory):
        levels = memory["presets"][name]
        settings = ", ".join(f"{lv} {levels[lv]['clip_s']:g} s @ {levels[lv]['fps']:g} fps" for lv in LEVELS)
        span = f"{low:g} s < duration ≤ {bound:g} s" if bound is not None else f"duration > {low:g} s"
        lines.append(f"{span}: {name} ({settings})")
        low = bound if bound is not None else low
    return "\n".join(lines)


def choose_preset(memory: Mapping[str, Any], duration_s: float) -> tuple[str, dict[str, LevelSpec]]:
    """The preset's name and level settings: the configured one, or by the ``auto`` rule on the video's length
    (the preset with the smallest upper bound ≥ the duration; a duration on a bound takes the shorter one)."""
    name = memory["preset"]
    if name == "auto":
        rule = preset_rule(memory)
        if not rule:
            raise ValueError("config.memory.auto: preset is 'auto' but no rule is given")
        name = next((n for bound, n in rule if bound is None or duration_s <= bound + 1e-9), rule[-1][1])
    if name not in memory["presets"]:
        raise ValueError(f"config.memory.preset: no preset named {name!r} (known: {sorted(memory['presets'])})")
    levels = memory["presets"][name]
    return name, {level: LevelSpec(float(levels[level]["clip_s"]), float(levels[level]["fps"])) for level in LEVELS}


def frames_per_clip(spec: LevelSpec, max_frames: int | None = None) -> tuple[int, int]:
    """(frames sent, frames dropped) for a full clip of a level: every frame its rate gives, unless capped."""
    from senri.decode import at_fps

    wanted = len(at_fps(spec.fps, 0.0, spec.clip_s)) or 1
    sent = wanted if not max_frames else min(wanted, int(max_frames))
    return sent, wanted - sent


def memory_plan(memory: Mapping[str, Any], duration_s: float) -> dict[str, Any]:
    """What the memory of a video of ``duration_s`` would be, without captioning anything (the dry run):
    the preset, and per level the clip span, rate, clips over the whole video and frames per clip."""
    name, levels = choose_preset(memory, duration_s)
    plan: dict[str, Any] = {"duration_s": duration_s, "preset": name, "auto": memory["preset"] == "auto",
                            "captioner": memory.get("captioner"), "levels": {}}
    for level in LEVELS:
        spec = levels[level]
        sent, dropped = frames_per_clip(spec, memory.get("max_frames"))
        plan["levels"][level] = {"clip_s": spec.clip_s, "fps": spec.fps,
                                 "clips": len(split(0.0, duration_s, spec.clip_s)),
                                 "frames_per_clip": sent, "dropped_per_clip": dropped,
                                 "precomputed": level in memory.get("precompute", ["coarse"])}
    return plan


VIEWPOINTS = ("auto", "egocentric", "general")


def viewpoint(memory: Mapping[str, Any]) -> str:
    """Whether the videos are first-person (``egocentric``) or not (``general``), which decides the prompts'
    wording (captioner and VideoLucy agents). ``memory.viewpoint: auto`` (default): a preset named in
    ``memory.preset`` says it (``viewpoint`` of each preset: the MLVU, Video-MME and LVBench settings are
    ``general``, EgoMem's ``egocentric``); ``preset: auto`` — the length rule a SENRI-format benchmark runs
    under — is egocentric. ``egocentric`` or ``general`` set it for every video."""
    chosen = str(memory.get("viewpoint") or "auto")
    if chosen not in VIEWPOINTS:
        raise ValueError(f"config.memory.viewpoint: {chosen!r} is not one of {', '.join(VIEWPOINTS)}")
    if chosen != "auto":
        return chosen
    preset = memory.get("preset", "auto")
    if preset == "auto":
        return "egocentric"
    return str((memory.get("presets") or {}).get(preset, {}).get("viewpoint", "egocentric"))


def prompt_variant(memory: Mapping[str, Any]) -> str | None:
    """The prompt subfolder of :func:`viewpoint` (``general/``); None for the default, first-person wording."""
    chosen = viewpoint(memory)
    return None if chosen == "egocentric" else chosen


def captioner_prompts(memory: Mapping[str, Any]):
    """The captioner's prompt files (``prompts: captioner``, the :func:`viewpoint`'s wording, overlaid by
    ``prompts_dir``)."""
    from senri.prompts import config_prompts, prompt_set

    variant = prompt_variant(memory)
    return config_prompts(memory, variant) or prompt_set("captioner", variant=variant)


def coarse_instruction(memory: Mapping[str, Any]) -> str:
    """The question-independent coarse instruction (K1–K2 of the spec)."""
    return captioner_prompts(memory).render("coarse")


def deeper_instruction(memory: Mapping[str, Any], instruction: str) -> str:
    """A deeper level's instruction: the visible-text request (as the released code adds it) + the agent's."""
    return captioner_prompts(memory).render("deeper", instruction=instruction.strip())


def split(start_s: float, end_s: float, clip_s: float) -> list[tuple[float, float]]:
    """Consecutive clips of ``clip_s`` covering [start_s, end_s); the last one is shorter when it must be."""
    if clip_s <= 0:
        raise ValueError(f"clip length must be > 0, got {clip_s}")
    spans, t = [], start_s
    while t < end_s - 1e-6:
        spans.append((round(t, 6), round(min(t + clip_s, end_s), 6)))
        t += clip_s
    return spans


def next_level(level: str, deepest: str = LEVELS[-1]) -> str | None:
    """The level below ``level``, or None at ``deepest`` (VideoLucy's ``max_depth``: a memory-depth arm of
    Fig. 6(a) never splits a period past the depth it is allowed)."""
    index = LEVELS.index(level)
    return LEVELS[index + 1] if index < LEVELS.index(deepest) else None


def instruction_hash(instruction: str) -> str:
    return hashlib.sha256(instruction.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ cache


class CaptionCache:
    """Caption key → JSON record, one file per caption, written atomically."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(fingerprint: str, identity: Mapping[str, Any], clip: Clip) -> str:
        return CaptionCache.key_for({"video": fingerprint, "level": clip.level, "start_s": round(clip.start_s, 6),
                                     "end_s": round(clip.end_s, 6), "fps": round(clip.fps, 6),
                                     "instruction": clip.instruction, "captioner": dict(identity)})

    @staticmethod
    def key_for(payload: Mapping[str, Any]) -> str:
        """The key of a caption made from ``payload`` (everything that decides it: video, span, frames, prompt,
        model); another caption family (LongVideo-R1's tree nodes) keys its own payload the same way."""
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
    """Captioner bookkeeping: every call made (``computed`` + ``failed``: requests that reached the model),
    clips that failed before any call (``unsent``: no frame decoded, the captioner raised), captions reused
    from the cache (no call), frames read and dropped by a frame cap, and the captioner's tokens and model
    seconds."""

    computed: int = 0
    reused: int = 0
    frames: int = 0
    failed: int = 0
    unsent: int = 0
    #: Computed captions cut at the token limit (``finish_reason: length``), and loop retries made (each a call).
    truncated: int = 0
    retried: int = 0
    dropped_frames: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    @property
    def calls(self) -> int:
        return self.computed + self.failed + self.retried

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "seconds": round(self.seconds, 6)}

    def since(self, before: "CaptionStats") -> "CaptionStats":
        """What happened after the snapshot ``before`` (a question's or a level's share)."""
        return CaptionStats(**{k: (v - getattr(before, k)) for k, v in self.__dict__.items()})

    def snapshot(self) -> "CaptionStats":
        return CaptionStats(**self.__dict__)


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
        of ``batch_clips`` and each batch is stored as soon as it returns. A failed caption is never cached
        (a rerun tries again) and its row carries ``error`` with empty text: callers that hold a good caption
        of the same period keep it (:func:`keep_good_caption`)."""
        media = self.captioner.media
        identity = self.captioner.identity()
        keys = [CaptionCache.key(media.fingerprint, identity, clip) for clip in clips]
        records: list[dict[str, Any] | None] = [self.cache.get(key) for key in keys]
        self.stats.reused += sum(r is not None for r in records)
        todo = [i for i, r in enumerate(records) if r is None]
        for start in range(0, len(todo), self.batch_clips):
            batch = todo[start:start + self.batch_clips]
            captions = self._caption_batch([clips[i] for i in batch])
            now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            for i, caption in zip(batch, captions):
                record = {"text": caption.text, "n_frames": caption.n_frames, "error": caption.error,
                          "created_at": now, "dropped_frames": caption.dropped_frames,
                          "finish_reason": caption.finish_reason}
                self.stats.frames += caption.n_frames
                self.stats.dropped_frames += caption.dropped_frames
                self.stats.prompt_tokens += caption.prompt_tokens
                self.stats.completion_tokens += caption.completion_tokens
                self.stats.seconds += caption.latency_s
                self.stats.retried += caption.calls - 1 if caption.sent else 0
                if caption.error is None:
                    self.cache.put(keys[i], record)
                    self.stats.computed += 1
                    self.stats.truncated += caption.finish_reason == FINISH_LENGTH
                elif caption.sent:
                    self.stats.failed += 1
                else:
                    self.stats.unsent += 1
                records[i] = record
        return [self._row(clip, record) for clip, record in zip(clips, records) if record is not None]

    def _caption_batch(self, clips: list[Clip]) -> list[Caption]:
        """One batch through the captioner; if the captioner raises, each clip alone, so one clip that cannot be
        captioned fails alone and the batch's others are kept."""
        try:
            return self.captioner.caption_many(clips)
        except Exception as exc:  # noqa: BLE001 — retried clip by clip below; the memory goes on
            if len(clips) > 1:
                log.warning("captioning %d clips failed (%s: %s); captioning them one by one", len(clips),
                            type(exc).__name__, exc)
                return [caption for clip in clips for caption in self._caption_batch([clip])]
            log.error("captioning %s %g–%g s failed: %s", clips[0].level, clips[0].start_s, clips[0].end_s, exc)
            # Raised before answering: whether the request went out is unknown, so it is not counted as a call.
            return [Caption("", 0, f"{type(exc).__name__}: {exc}", sent=False)]

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
            dropped_frames=int(record.get("dropped_frames") or 0), finish_reason=record.get("finish_reason"),
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
    settings = {"model": {"name": name, **model}, "max_frames": memory.get("max_frames"),
                "short_side": memory.get("short_side", 448), "max_tokens": memory.get("max_tokens", 2048),
                "video_input": memory.get("video_input", "auto"), "prompts": captioner_prompts(memory),
                "repetition_retry": memory.get("repetition_retry", True)}
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


def keep_good_caption(old: MemoryRow, new: MemoryRow) -> MemoryRow:
    """The row a period keeps after a re-caption: the new one, unless it failed and the old one is good — then
    the old text stays and the failure is recorded beside it (``error``)."""
    if new.error is None or old.error is not None or not old.text:
        return new
    return dataclasses.replace(old, error=f"re-caption ({new.level}, instruction {new.instruction_hash}) failed: "
                                          f"{new.error}")


def build_memory(service: CaptionService, memory: Mapping[str, Any], duration_s: float
                 ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Caption the precomputed levels of one video; returns (memory rows, cost rows). The cost table records
    the preset the video got and, per level, every captioner call, cache reuse, frames and tokens."""
    instruction = coarse_instruction(memory)
    preset, levels = choose_preset(memory, duration_s)
    rows, costs = [], []
    for level in memory.get("precompute", ["coarse"]):
        before = service.stats.snapshot()
        started = time.monotonic()
        clips = level_clips(memory, duration_s, level, instruction)
        rows += service.captions(clips)
        spent = service.stats.since(before)
        costs.append(MemoryCost(
            video_id=service.captioner.media.video_id, captioner=service.name, level=level, clips=len(clips),
            computed=spent.computed, reused=spent.reused, frames=spent.frames, failed=spent.failed + spent.unsent,
            wall_s=round(time.monotonic() - started, 3), preset=preset, clip_s=levels[level].clip_s,
            fps=levels[level].fps, dropped_frames=spent.dropped_frames, caption_prompt_tokens=spent.prompt_tokens,
            caption_completion_tokens=spent.completion_tokens, caption_s=round(spent.seconds, 6)))
        log.info("%s %s (preset %s: %g s clips at %g fps): %d clip(s), %d computed, %d reused, %d frame(s) read, "
                 "%d dropped by the frame cap, %d failed (%d before any call), %d cut at the token limit (%d loop "
                 "retries)", service.captioner.media.video_id,
                 level, preset, levels[level].clip_s, levels[level].fps, len(clips), spent.computed, spent.reused,
                 spent.frames, spent.dropped_frames, spent.failed + spent.unsent, spent.unsent, spent.truncated,
                 spent.retried)
    return to_frame(rows, MemoryRow), to_frame(costs, MemoryCost)


def described(row: Mapping[str, Any] | MemoryRow) -> bool:
    """Whether a memory row has a caption to show a model (a failed caption has none, only its ``error``)."""
    text = row.get("text") if isinstance(row, Mapping) else row.text
    return bool(text)


def caption_health(rows: Sequence[MemoryRow]) -> tuple[int, int]:
    """(captions cut at the token limit, failed captions) among ``rows``: what a question's run-health counts
    ``truncated_captions`` and ``failed_captions`` book for the captions it read or asked for."""
    return (sum(r.finish_reason == FINISH_LENGTH and described(r) for r in rows),
            sum(not described(r) for r in rows))


def row_context(row: Mapping[str, Any]) -> str:
    """A caption's ego-motion context from the track ("signs: …; heading change +90°"), or ""."""
    context = []
    if row.get("place_labels"):
        context.append(f"signs: {row['place_labels']}")
    if row.get("heading_change_deg") is not None:
        context.append(f"heading change {row['heading_change_deg']:+.0f}°")
    return "; ".join(context)


def format_memory(rows: Sequence[MemoryRow] | pl.DataFrame, numbered: bool = True) -> str:
    """The memory list an LLM reads: ``[i] level m:ss–m:ss: text`` per entry, in time order. A failed caption
    (no text) is left out: its backend error is the harness's, not the video's (:func:`described`)."""
    from senri.track import clock

    items = rows.iter_rows(named=True) if isinstance(rows, pl.DataFrame) else (r.__dict__ for r in rows)
    lines = []
    for i, row in enumerate(r for r in items if described(r)):
        prefix = f"[{i}] " if numbered else ""
        context = row_context(row)
        suffix = f" ({context})" if context else ""
        text = row["text"]
        lines.append(f"{prefix}{row['level']} {clock(row['start_s'])}–{clock(row['end_s'])}{suffix}: {text}")
    return "\n".join(lines)

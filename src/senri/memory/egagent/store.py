"""EG-Agent's store behind the memory interface (issue 37; spec S4): the entity-graph table, the transcript,
the fused 30-s captions and, with an image-text embedder, one vector per second of video.

Folder (``results/memory_system/egagent/<captioner>/<video>/``):

- ``entity_graph.db`` — E-F4's SQLite table, the DT-only and fused graphs in one (:mod:`.graph`);
- ``transcript.parquet`` — the cues (start_s, end_s, text), from ``transcripts_dir/<video>.srt`` (the release
  reads the datasets' transcripts; senri has no diarization), empty when there is none;
- ``clips.parquet`` — the 30-s captions and the fused captions (E-C5);
- ``frames.npz`` — 1-fps frame times and their L2-normalised image vectors (E-C2; the embedder is the
  ``embedder`` role, an ``image_text`` model config), absent without an embedder (frame search then finds
  nothing and says so);
- ``config.yaml`` (the stage slice and the build's record: counts, losses, models) and ``cost.parquet``.

``search`` (what SENRI-Agent and ``memory_search`` read) returns entity rows whose entity ids share a word with
the query and frame hits by text→frame similarity, each anchored at its absolute interval (T8 → seconds).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Collection, Mapping, Sequence

import numpy as np
import polars as pl
import yaml

from senri.memory.cost import write_cost
from senri.memory.egagent.build import (BuilderCalls, CaptionClip, Cue, GraphCounts, caption_clips, fuse,
                                        graph_rows, hour_documents, read_srt, seconds_grid)
from senri.memory.egagent.common import (CLIPS_FILE, CONFIG_FILE, FRAMES_FILE, GRAPH_FILE, TRANSCRIPT_FILE,
                                         seconds_from_t8, t8_from_seconds)
from senri.memory.egagent.frames import rank_frames, window_rows
from senri.memory.egagent.graph import TABLE, open_read_only, render_rows, run_query, write_graph
from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext

#: The store's items as MemoryItem rows (every store's items view, senri.memory.jobs.ITEMS_TABLE).
ITEMS_FILE = "items.parquet"
#: The embedder model config's keys the store keeps (to embed queries at answer time).
EMBEDDER_KEYS = ("kind", "path", "device", "dtype", "revision", "max_text_tokens")
_WORD = re.compile(r"[a-z0-9]+")


def transcript_cues(request: BuildRequest) -> tuple[list[Cue], str]:
    """The video's cues and where they came from: ``transcripts_dir/<video>.srt`` when the system config names a
    folder (a missing file is an error naming it), else none (recorded: the transcript tool then has nothing)."""
    folder = request.system_config.get("transcripts_dir")
    if not folder:
        return [], "none (memory_system.egagent.transcripts_dir is null)"
    path = Path(str(folder)).expanduser() / f"{request.video.video_id}.srt"
    if not path.is_file():
        raise FileNotFoundError(f"memory_system.egagent.transcripts_dir: no transcript {path} for video "
                                f"{request.video.video_id!r}")
    return read_srt(path), f"{path} (SRT, no diarization)"


def open_builder(request: BuildRequest) -> BuilderCalls:
    from senri.backends import open_backend
    from senri.backends.budget import within_cap
    from senri.prompts import prompt_set

    role = request.models.get("builder")
    if not role:
        raise ValueError("memory_system.egagent.models.builder: no model config for the builder role (fusion, "
                         "graph extraction and timestamps need one)")
    backend = open_backend(role[1], request.response_cache)
    if backend is None:
        raise ValueError("memory_system.egagent.models.builder: the model config has no backend")
    cfg = request.system_config
    return BuilderCalls(backend, prompt_set(cfg.get("prompts") or "egagent", cfg.get("prompts_dir")),
                        within_cap(int(cfg.get("builder_max_tokens", 2048)), role[1]))


def frame_vectors(request: BuildRequest) -> tuple[np.ndarray, np.ndarray, dict[str, Any] | None]:
    """E-C1/E-C2: the 1-fps frame times and their vectors by the ``embedder`` role (none without one)."""
    times = np.asarray(seconds_grid(float(request.video.duration_s)), dtype=np.float64)
    role = request.models.get("embedder")
    if not role:
        return times, np.zeros((0, 0), dtype=np.float32), None
    if request.media is None:
        raise ValueError("memory_system.egagent.models.embedder: frame vectors need the video (the build request "
                         "has no media)")
    from senri.memory.clip_embedding import embed_clips

    name, model = role
    vectors = embed_clips(model, request.media.video, [(float(t), float(t)) for t in times], 1,
                          request.system_config.get("frame_short_side"))
    return times, vectors, {"name": name, **{k: model[k] for k in EMBEDDER_KEYS if k in model}}


class EGAgentStore(MemoryStore):
    system: ClassVar[str] = "egagent"
    memory_types: ClassVar[tuple[str, ...]] = ()
    query_roles: ClassVar[tuple[str, ...]] = ("embedder",)  # the frame search's text tower

    def __init__(self, folder: Path, config: Mapping[str, Any], video: Any) -> None:
        self.folder, self.config, self.video = Path(folder), dict(config), video
        self.record = yaml.safe_load((self.folder / CONFIG_FILE).read_text()) or {}
        self.db = open_read_only(self.folder / GRAPH_FILE)
        self.transcript = pl.read_parquet(self.folder / TRANSCRIPT_FILE)
        self.clips = pl.read_parquet(self.folder / CLIPS_FILE)
        frames = self.folder / FRAMES_FILE
        if frames.is_file():
            with np.load(frames, allow_pickle=False) as data:
                self.frame_times, self.frame_vectors = data["times_s"], data["vectors"]
        else:
            self.frame_times, self.frame_vectors = np.zeros(0), np.zeros((0, 0), dtype=np.float32)
        self._encoder = None

    # ------------------------------------------------------------------------------------------ build / open
    @classmethod
    def build(cls, request: BuildRequest) -> None:
        from senri.records import MemoryRow, read_table

        if request.captions is None:
            raise ValueError("egagent build: the request has no caption table (the 30-s captions it fuses)")
        rows = read_table(request.captions, MemoryRow).filter(pl.col("video_id") == request.video.video_id)
        clips = caption_clips(rows.to_dicts(), float(request.video.duration_s))
        if not clips:
            raise ValueError(f"egagent build of {request.video.video_id}: {request.captions} has no caption text")
        cues, transcript_source = transcript_cues(request)
        builder = open_builder(request)
        fused = fuse(builder, clips, cues)
        counts = GraphCounts()
        relationships = graph_rows(builder, hour_documents(fused, cues), cues, counts)
        times, vectors, embedder = frame_vectors(request)
        out = Path(request.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_graph(relationships, out / GRAPH_FILE)
        pl.DataFrame({"start_s": [c.start_s for c in cues], "end_s": [c.end_s for c in cues],
                      "text": [c.text for c in cues]},
                     schema={"start_s": pl.Float64, "end_s": pl.Float64, "text": pl.Utf8}
                     ).write_parquet(out / TRANSCRIPT_FILE)
        write_clips(fused, out / CLIPS_FILE)
        if embedder is not None:
            with open(out / FRAMES_FILE, "wb") as handle:
                np.savez(handle, times_s=times, vectors=vectors.astype(np.float32))
        write_cost(out, "egagent", request.video.video_id,
                   {role: (request.models["builder"][0], cost) for role, cost in builder.costs.items()})
        record = {"system": {k: v for k, v in request.system_config.items() if k != "model_configs"},
                  "source": "built", "transcript": transcript_source, "clips": len(fused),
                  "fused_clips": sum(c.fused != c.caption for c in fused), "relationships": len(relationships),
                  "builder": {**builder.record(), **counts.__dict__},
                  "frames": (f"{len(times)} at 1 fps, embedded ({embedder['name']})" if embedder else
                             "not embedded (no embedder configured: frame search finds nothing)"),
                  "models": {r: m[0] for r, m in request.models.items()},
                  **({"embedder": embedder} if embedder else {})}
        path = out / CONFIG_FILE
        existing = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
        path.write_text(yaml.safe_dump({**existing, **record}, sort_keys=False, allow_unicode=True))
        write_items(out, request)

    @classmethod
    def import_release(cls, import_dir: Path, request: BuildRequest) -> None:
        """A memory written by EG-Agent's released code (E-F4..F6; :mod:`.release`), one day of it."""
        from senri.memory.egagent.release import import_release

        import_release(Path(import_dir), Path(request.out_dir), dict(request.system_config), request.video.video_id)
        write_items(Path(request.out_dir), request)

    @classmethod
    def export_inputs(cls, captions: Path, video: Any, out_dir: Path, system_config: Mapping[str, Any]
                      ) -> list[Path]:
        from senri.memory.egagent.release import export_captions

        return export_captions(captions, video, out_dir, int(system_config.get("import_day", 1)))

    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video: Any) -> "EGAgentStore":
        for name in (GRAPH_FILE, TRANSCRIPT_FILE, CLIPS_FILE, CONFIG_FILE):
            if not (Path(folder) / name).is_file():
                raise ValueError(f"{Path(folder) / name}: missing (an EG-Agent store holds {GRAPH_FILE}, "
                                 f"{TRANSCRIPT_FILE}, {CLIPS_FILE} and {CONFIG_FILE})")
        return cls(folder, system_config, video)

    # ---------------------------------------------------------------------------------------------- reading
    @property
    def retriever(self) -> str:
        return "entity graph + frames" if len(self.frame_vectors) else "entity graph"

    def graph_rows(self, query: str = f"SELECT * FROM {TABLE} ORDER BY start_t, id") -> list[dict]:
        return run_query(self.db, query)

    def question_counts(self) -> dict[str, int]:
        builder = self.record.get("builder") or {}
        return {"builder_losses": int(builder.get("left_out", 0)) + int(builder.get("unreadable_spans", 0))}

    def items(self, level: str | None = None) -> list[MemoryItem]:
        """Every relationship interval (kind ``entity``) and every cue (kind ``transcript``), in time order."""
        out = [graph_item(row) for row in self.graph_rows()]
        out += [MemoryItem(f"cue@{r['start_s']:.2f}", "transcript", str(r["text"]), float(r["start_s"]),
                           float(r["end_s"])) for r in self.transcript.iter_rows(named=True)]
        out = [i for i in out if level is None or i.level == level]
        return sorted(out, key=lambda i: (i.start_s if i.start_s is not None else -1.0, i.item_id))

    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        """Entity rows whose source or target id shares a word with the query (most shared words first, then time),
        then, with frame vectors, the frames ranked as E-R2 ranks them for the query (each a 1-s interval); up to
        ``k`` together, half each when both have hits. Items after ``context.query_time_s`` are not visible."""
        self.check_memory_type(memory_type)
        words = set(_WORD.findall(query.lower()))
        limit = context.query_time_s if context is not None else None
        scored = []
        for row in self.graph_rows():
            item = graph_item(row)
            if item.item_id in exclude or (limit is not None and item.end_s > limit):
                continue
            shared = len(words & set(_WORD.findall(f"{row['source_id']} {row['target_id']}".lower())))
            if shared:
                scored.append((-shared, item.start_s, item))
        graph_hits = [replace(i, score=float(-s)) for s, _, i in sorted(scored, key=lambda x: (x[0], x[1]))]
        frame_hits = [i for i in self.frame_search([query], k, limit) if i.item_id not in exclude]
        if context is not None and not len(self.frame_vectors):
            context.notes.append("egagent: no frame vectors (no embedder was configured): frame search skipped")
        if graph_hits and frame_hits:
            half = max(1, k // 2)
            return (graph_hits[:half] + frame_hits)[:k] if len(graph_hits) >= half else (graph_hits + frame_hits)[:k]
        return (graph_hits or frame_hits)[:k]

    def frame_search(self, queries: Sequence[str], k: int, until_s: float | None = None,
                     window: tuple[float, float] | None = None, hms6_window: tuple[int, int] | None = None,
                     compare: str = "text") -> list[MemoryItem]:
        """The frames of ``window`` (seconds) or ``hms6_window`` (the window writer's HHMMSS bounds, selected as
        ``compare`` says: :func:`~senri.memory.egagent.frames.window_rows`), default the whole video, up to
        ``until_s``, ranked for ``queries`` (E-R2)."""
        if not len(self.frame_vectors) or not queries:
            return []
        rows = np.arange(len(self.frame_times))
        if window is not None:
            rows = rows[(self.frame_times >= window[0]) & (self.frame_times <= window[1])]
        if hms6_window is not None:
            rows = rows[window_rows([t8_from_seconds(float(self.frame_times[r])) for r in rows], *hms6_window,
                                    compare=compare)]
        if until_s is not None:
            rows = rows[self.frame_times[rows] <= until_s]
        if not len(rows):
            return []
        ranked = rank_frames(self.query_vectors(queries), self.frame_vectors[rows],
                             order=str(self.config.get("frame_order", "release")), keep=k)
        return [MemoryItem(f"frame@{self.frame_times[rows[r.row]]:.0f}", "frame",
                           f"frame at {self.frame_times[rows[r.row]]:.0f} s", float(self.frame_times[rows[r.row]]),
                           float(self.frame_times[rows[r.row]]) + 1.0, score=r.best) for r in ranked]

    def query_vectors(self, queries: Sequence[str]) -> np.ndarray:
        if self._encoder is None:
            from senri.memory.clip_embedding import open_query_encoder

            embedder = self.record.get("embedder")
            if not embedder:
                raise ValueError(f"{self.folder / CONFIG_FILE}: field 'embedder' missing, but the store has frame "
                                 "vectors")
            self._encoder = open_query_encoder(embedder)
        return np.asarray(self._encoder(list(queries)), dtype=np.float32)


def write_items(out: Path, request: BuildRequest) -> None:
    """The items view every store writes (its relationship intervals and cues as MemoryItem rows)."""
    from senri.records import to_frame, write_table

    items = EGAgentStore(out, request.system_config, request.video).items()
    write_table(to_frame(items, MemoryItem), out / ITEMS_FILE, MemoryItem)


def graph_item(row: Mapping[str, Any]) -> MemoryItem:
    """One relationship interval as a memory item, rendered as the agent reads it (E-R4, without transcript)."""
    start, end = seconds_from_t8(row["start_t"]), seconds_from_t8(row["end_t"])
    return MemoryItem(f"eg{row['id']}", "entity", render_rows([row]).strip(), start, max(end, start))


def write_clips(clips: Sequence[CaptionClip], path: Path) -> None:
    pl.DataFrame({"start_s": [c.start_s for c in clips], "end_s": [c.end_s for c in clips],
                  "caption": [c.caption for c in clips], "fused": [c.fused for c in clips]},
                 schema={"start_s": pl.Float64, "end_s": pl.Float64, "caption": pl.Utf8, "fused": pl.Utf8}
                 ).write_parquet(path)

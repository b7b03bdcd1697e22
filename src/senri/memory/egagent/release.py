"""EG-Agent's released memory layout (E-F4..F6): import into a senri store, and export a senri store into it.

One senri video is one day of the release's EgoLife layout (adapter choice S3; ``import_day`` picks which day of a
release folder to read, 1 by default):

- the entity graph the agent reads, ``dbs/egolife/egolife_jake_entity_graph_dtonly_concatwith_fused_dt_and_
  gpt-4.1captions.db`` (E-F4: table ``entity_graph_table``; its rows of that day);
- the merged frames table ``dbs/egolife/egolife_jake_frames.db`` (E-F5: ``frames(id, day TEXT "dayN",
  timestamp TEXT T8, path, embedding BLOB float32)``), read with ``numpy.frombuffer`` (no pickle anywhere);
- the transcript cache ``transcript_csv/diarized_transcripts_all_days_JAKE.csv`` (E-F6: day, start_t, end_t
  as HH:MM:SS, transcript_chinese, transcript_english; the English kept).

The release's builders write the entity graph under another name (``dbs/entity_graph/egolife_entity_graph_
<config>.db``, one per graph) and leave the union the agent reads to an unreleased merge step; an import that
finds only those says so and names both paths (as it does for the per-day frame DBs that were never merged).
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml

from senri.memory.egagent.common import (CLIPS_FILE, CONFIG_FILE, FRAMES_FILE, GRAPH_FILE, TRANSCRIPT_FILE, clock,
                                         seconds_from_t8, t8_from_clock, t8_from_seconds)
from senri.memory.egagent.graph import COLUMNS, TABLE, Relationship, read_rows, write_graph

AGENT_GRAPH = "dbs/egolife/egolife_jake_entity_graph_dtonly_concatwith_fused_dt_and_gpt-4.1captions.db"
BUILDER_GRAPHS = "dbs/entity_graph"
FRAMES_DB = "dbs/egolife/egolife_jake_frames.db"
DAY_FRAMES_DB = "dbs/egolife/egolife_jake_frames_day{day}.db"
TRANSCRIPT_CSV = "transcript_csv/diarized_transcripts_all_days_JAKE.csv"


def _graph_path(root: Path) -> Path:
    path = root / AGENT_GRAPH
    if path.is_file():
        return path
    built = sorted((root / BUILDER_GRAPHS).glob("*.db")) if (root / BUILDER_GRAPHS).is_dir() else []
    hint = (f"; found the builder's per-graph output {', '.join(str(b.relative_to(root)) for b in built)} — the "
            f"release's agent reads their union under the name above, made by a merge step the release does not "
            f"ship: merge them into that file") if built else ""
    raise ValueError(f"{path}: missing (EG-Agent's entity graph as its agent reads it, E-F4){hint}")


def import_graph(root: Path, day: int) -> list[Relationship]:
    """The rows of ``day`` of the release's entity-graph table, as senri's table holds them (day 1)."""
    path = _graph_path(root)
    rows = read_rows(path, f"SELECT * FROM {TABLE} WHERE day = {int(day)} ORDER BY start_t, id", TABLE)
    out = []
    for n, row in enumerate(rows):
        missing = [c for c in COLUMNS[1:] if c not in row]
        if missing:
            raise ValueError(f"{path}: table {TABLE} row {n}: field(s) {', '.join(missing)} missing")
        try:
            start, end = int(row["start_t"]), int(row["end_t"])
            seconds_from_t8(start), seconds_from_t8(end)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: table {TABLE} row id {row.get('id')}: field 'start_t'/'end_t' is not a "
                             f"T8 time ({exc})") from None
        out.append(Relationship(1, start, end, str(row["transcript"] or ""), str(row["source_id"]),
                                str(row["source_type"]), str(row["target_id"]), str(row["target_type"]),
                                str(row["rel_type"])))
    return out


def import_frames(root: Path, day: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(frame times in seconds, float32 vectors) of ``day`` from the merged frames table; None when the release
    folder has none (the store then has no frame vectors); a per-day table that was never merged is named."""
    path = root / FRAMES_DB
    if not path.is_file():
        day_db = root / DAY_FRAMES_DB.format(day=day)
        if day_db.is_file():
            raise ValueError(f"{path}: missing, but {day_db} exists: the release merges the per-day frame tables "
                             f"into {FRAMES_DB} (E-F5) before its agent reads them")
        return None
    rows = read_rows(path, f"SELECT timestamp, embedding FROM frames WHERE day = 'day{int(day)}'", "frames")
    if not rows:
        return None
    times, vectors = [], []
    for row in rows:
        blob = row["embedding"]
        if not isinstance(blob, (bytes, bytearray)) or len(blob) % 4:
            raise ValueError(f"{path}: frames row at {row['timestamp']!r}: field 'embedding' is not float32 bytes")
        try:
            times.append(seconds_from_t8(int(str(row["timestamp"]))))
        except ValueError as exc:
            raise ValueError(f"{path}: frames row: field 'timestamp' {row['timestamp']!r} is not T8 ({exc})") from None
        vectors.append(np.frombuffer(bytes(blob), dtype=np.float32))
    if len({v.shape for v in vectors}) != 1:
        raise ValueError(f"{path}: field 'embedding' has vectors of several lengths")
    order = np.argsort(times, kind="stable")
    matrix = np.stack(vectors)[order]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(times)[order], (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def import_transcript(root: Path, day: int) -> list[tuple[float, float, str]]:
    """(start_s, end_s, English text) of ``day``'s cues from the release's transcript cache (none without it)."""
    path = root / TRANSCRIPT_CSV
    if not path.is_file():
        return []
    out = []
    with path.open(newline="", encoding="utf-8") as handle:
        for n, row in enumerate(csv.DictReader(handle), 2):
            try:
                if int(row["day"]) != int(day):
                    continue
                # the cache cuts the milliseconds ("HH:MM:SS", E-C4)
                start, end = (seconds_from_t8(t8_from_clock(f"{row[k]},000")) for k in ("start_t", "end_t"))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}: line {n}: field day/start_t/end_t unreadable ({exc})") from None
            text = (row.get("transcript_english") or "").strip()
            if text:
                out.append((start, end, text))
    return sorted(out)


def import_release(root: Path, out_dir: Path, system_config: dict[str, Any], video_id: str) -> dict[str, Any]:
    """A release folder's day into a senri store folder; returns the store's record."""
    from senri.memory.cost import write_cost
    root, out_dir = Path(root), Path(out_dir)
    day = int(system_config.get("import_day", 1))
    relationships = import_graph(root, day)
    frames = import_frames(root, day)
    cues = import_transcript(root, day)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_graph(relationships, out_dir / GRAPH_FILE)
    pl.DataFrame({"start_s": [c[0] for c in cues], "end_s": [c[1] for c in cues], "text": [c[2] for c in cues]},
                 schema={"start_s": pl.Float64, "end_s": pl.Float64, "text": pl.Utf8}).write_parquet(out_dir / TRANSCRIPT_FILE)
    pl.DataFrame(schema={"start_s": pl.Float64, "end_s": pl.Float64, "caption": pl.Utf8, "fused": pl.Utf8}
                 ).write_parquet(out_dir / CLIPS_FILE)  # the release's captions are an input of its build only
    if frames is not None:
        with open(out_dir / FRAMES_FILE, "wb") as handle:
            np.savez(handle, times_s=frames[0], vectors=frames[1])
    write_cost(out_dir, "egagent", video_id, {})
    embedder = (system_config.get("model_configs") or {}).get("embedder")
    record = {"source": f"imported from {root} (day {day})", "relationships": len(relationships),
              "transcript": f"{len(cues)} cues from {TRANSCRIPT_CSV}" if cues else "none",
              "frames": (f"{len(frames[0])} frame vectors of dimension {frames[1].shape[1]} from {FRAMES_DB}"
                         if frames is not None else "none in the release folder"),
              "builder": {"calls": 0, "left_out": 0},
              **({"embedder": {"name": embedder["name"], **dict(embedder["config"])}} if embedder else {})}
    path = out_dir / CONFIG_FILE
    existing = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    path.write_text(yaml.safe_dump({**existing, **record}, sort_keys=False, allow_unicode=True))
    return record


def export_release(store_dir: Path, out_root: Path, day: int = 1) -> list[Path]:
    """A senri store in the release's layout (E-F4..F6) under ``out_root``: the entity graph the agent reads, the
    merged frames table (with vectors) and the transcript cache; returns the files written."""
    store_dir, out_root = Path(store_dir), Path(out_root)
    written = []
    rows = read_rows(store_dir / GRAPH_FILE, f"SELECT * FROM {TABLE} ORDER BY start_t, id", TABLE)
    graph = out_root / AGENT_GRAPH
    write_graph([Relationship(day, r["start_t"], r["end_t"], r["transcript"], r["source_id"], r["source_type"],
                              r["target_id"], r["target_type"], r["rel_type"]) for r in rows], graph)
    written.append(graph)
    if (store_dir / FRAMES_FILE).is_file():
        with np.load(store_dir / FRAMES_FILE, allow_pickle=False) as data:
            times, vectors = data["times_s"], data["vectors"]
        frames = out_root / FRAMES_DB
        frames.parent.mkdir(parents=True, exist_ok=True)
        frames.unlink(missing_ok=True)
        with sqlite3.connect(frames) as out:
            out.execute("CREATE TABLE frames (id INTEGER PRIMARY KEY AUTOINCREMENT, day TEXT, timestamp TEXT, "
                        "path TEXT, embedding BLOB)")
            out.executemany("INSERT INTO frames (day, timestamp, path, embedding) VALUES (?, ?, ?, ?)",
                            [(f"day{day}", str(t8_from_seconds(float(t))), f"{t8_from_seconds(float(t))}.jpg",
                              np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(times, vectors)])
        out.close()
        written.append(frames)
    cues = pl.read_parquet(store_dir / TRANSCRIPT_FILE)
    transcript = out_root / TRANSCRIPT_CSV
    transcript.parent.mkdir(parents=True, exist_ok=True)
    with transcript.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["day", "start_t", "end_t", "transcript_chinese", "transcript_english"])
        for row in cues.iter_rows(named=True):
            writer.writerow([day, clock(row["start_s"]), clock(row["end_s"]), "", row["text"]])
    written.append(transcript)
    return written


def export_captions(captions: Path, video: Any, out_dir: Path, day: int = 1) -> list[Path]:
    """senri's captions as the release's caption input (E-F2): ``captions/gpt-4.1_captions/egolife-jake/
    gpt-4.1_day{d}_1fps-captions.json`` = [{clip path: {"content": text}}], one entry per 30-s clip named by
    its start as the release names EgoLife clips (``DAY{d}_A1_JAKE_<T8>.mp4``)."""
    import json

    from senri.memory.egagent.build import caption_clips
    from senri.records import MemoryRow, read_table

    rows = read_table(captions, MemoryRow).filter(pl.col("video_id") == video.video_id).to_dicts()
    clips = caption_clips(rows, float(video.duration_s))
    path = Path(out_dir) / "captions" / "gpt-4.1_captions" / "egolife-jake" / f"gpt-4.1_day{day}_1fps-captions.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{f"DAY{day}_A1_JAKE_{t8_from_seconds(start):08d}.mp4": {"content": text}}
                                for start, _, text in clips], indent=1))
    return [path]

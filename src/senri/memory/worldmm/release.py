"""WorldMM's released layout (W-F1…F4): importing a memory its released code wrote, and exporting senri's
captions as its caption input.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import polars as pl

from senri.memory.release import load_release_pickle
from senri.memory.store import BuildRequest, MemoryItem
from senri.memory.worldmm.build import BuilderLLM, openie, write_store
from senri.memory.worldmm.common import (BASE_LEVEL, KIND_EPISODIC, SECONDS_PER_DAY, TextVectors, Triple,
                                         clean_triples, hhmmssff, item_id, open_text_encoder, parse_day,
                                         parse_hhmmssff, parse_ts9, span_label, system_prompts)

log = logging.getLogger(__name__)


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


def import_release(import_dir: Path, request: BuildRequest) -> None:
    """A memory written by WorldMM's released code (:func:`read_release`) converted into ``request.out_dir``.

    The levels the release has no OpenIE for are indexed with the retriever's model (W-C9); without one they
    stay unindexed, counted ``unindexed_captions`` (a builder loss: :data:`~senri.memory.worldmm.build.
    BUILDER_LOSS_COUNTS`). Every 10sec caption's span becomes a visual clip, so time-range visual queries are
    served with or without ``visual_embeddings.pkl``; the release's clip vectors answer text queries through the
    text tower of the configured ``embedder`` model (:func:`attach_embedder`); without one, only time-range
    visual queries are served."""
    release = read_release(Path(import_dir), request.video.video_id, request.system_config)
    config = request.system_config
    vectors = TextVectors(open_text_encoder(config))
    episodic = [item for level in release.captions.values() for item in level]
    triples, ner = dict(release.triples), dict(release.ner)
    counts: dict[str, int] = {"imported_captions": len(episodic)}
    llm_stats: dict[str, Any] = {}
    models: dict[str, str] = {}
    visual = release.visual
    if visual is not None:
        pkl = Path(import_dir) / "visual_memory" / request.video.video_id / "visual_embeddings.pkl"
        visual = attach_embedder(visual, request.models.get("embedder"), pkl)
        if visual.get("model_config"):
            models["embedder"] = visual["embedder"]
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
    # Every 10sec caption's span is a visual clip (the release's clip list is its 10sec caption file), embedded
    # or not: time-range queries read frames only.
    clips = [(item.start_s, item.end_s) for item in release.captions.get(BASE_LEVEL, [])]
    write_store(request.out_dir, config, episodic, ner, triples, release.snapshots, visual, vectors,
                counts, llm_stats, source=f"imported from {import_dir}", models=models, clips=clips,
                video_id=request.video.video_id)


def attach_embedder(visual: dict[str, Any], model: tuple[str, Mapping[str, Any]] | None, path: Path
                    ) -> dict[str, Any]:
    """The imported visual memory with the configured ``embedder`` model (name, config) recorded as the one
    whose text tower embeds its queries, after checking that the tower's vectors have the clips' dimension (a
    ValueError naming ``path`` and ``models.embedder`` otherwise: the release's vectors would be compared with
    another model's space). No embedder configured: the memory as read (text queries answered with a note)."""
    if not model:
        return visual
    from senri.memory.clip_embedding import open_query_encoder

    name, model_config = model
    probe = np.asarray(open_query_encoder(model_config)(["a first-person video clip"]))
    clip_dim = int(np.asarray(visual["vectors"]).shape[1])
    if probe.ndim != 2 or probe.shape[1] != clip_dim:
        raise ValueError(f"{path}: the clip vectors have dimension {clip_dim}, but memory_system.worldmm.models."
                         f"embedder ({name}) embeds text queries with dimension {probe.shape[-1]}: configure the "
                         f"embedder the release was built with")
    return {**visual, "embedder": name, "model_config": dict(model_config)}


def export_inputs(captions: Path, video: Any, out_dir: Path, system_config: Mapping[str, Any]) -> list[Path]:
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


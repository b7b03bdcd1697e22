"""A small memory system for the tests of the persistent-memory wiring: a real :class:`MemoryStore` subclass
over a folder's ``items.parquet`` (the MemoryItem columns), with two memory types — ``episodic`` items (anchored
captions) and ``semantic`` items (no interval) — BM25 search that fills its k with items the question does not
hold yet, and one retriever LLM call per search through :attr:`SearchContext.ask` when it is given (the W8/W9
kind of call: its reply is only recorded, so a scripted reply decides nothing).

``build`` derives the items from the caption stage's table; ``import_release`` reads a "release" JSON
(``{"episodes": [{"start": "HHMMSS", "end": "HHMMSS", "text": ...}], "facts": [...]}``) and fails naming the file
and field. Registered by the tests that use it (``MEMORY_SYSTEMS`` in process, or ``store: fake_store:TableStore``
in a config, for a Snakemake subprocess with ``tests/`` on its path).
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any, Collection, Mapping

import numpy as np
import polars as pl
import yaml

from senri.backends.base import ChatRequest, Message
from senri.memory.retrieval import BM25
from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext
from senri.records import MemoryRow, read_table

ITEM_SCHEMA = {"item_id": pl.Utf8, "kind": pl.Utf8, "text": pl.Utf8, "start_s": pl.Float64, "end_s": pl.Float64,
               "description": pl.Utf8, "level": pl.Utf8, "score": pl.Float64}


def write_items(items: list[MemoryItem], out_dir: Path, notes: Mapping[str, Any] | None = None) -> None:
    """The items table; ``notes`` are added to the folder's ``config.yaml`` (the job wrote the slice there)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pl.DataFrame([asdict(i) for i in items], schema=ITEM_SCHEMA).write_parquet(out_dir / "items.parquet")
    if notes:
        path = out_dir / "config.yaml"
        recorded = yaml.safe_load(path.read_text()) if path.is_file() else {}
        path.write_text(yaml.safe_dump({**recorded, **notes}, sort_keys=True))


def _seconds(value: Any, file: Path, field: str) -> float:
    text = str(value)
    if len(text) != 6 or not text.isdigit():
        raise ValueError(f"{file}: field {field!r}: {value!r} is not HHMMSS")
    return int(text[:2]) * 3600 + int(text[2:4]) * 60 + int(text[4:])


class TableStore(MemoryStore):
    system = "fake"
    memory_types = ("episodic", "semantic")

    def __init__(self, items: list[MemoryItem]) -> None:
        self._items = sorted(items, key=lambda i: (i.start_s is None, i.start_s or 0.0, i.item_id))

    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video) -> "TableStore":
        path = Path(folder) / "items.parquet"
        if not path.is_file():
            raise ValueError(f"{path}: missing (the store folder has no items table)")
        table = pl.read_parquet(path)
        missing = [f.name for f in fields(MemoryItem) if f.name not in table.columns]
        if missing:
            raise ValueError(f"{path}: field {missing[0]!r} missing")
        return cls([MemoryItem(**row) for row in table.iter_rows(named=True)])

    #: The base scale this system captions at itself (through the shared caption service), like WorldMM's 10 s.
    base_s = 10.0

    @classmethod
    def build(cls, request: BuildRequest) -> None:
        """Episodic items from the caption table plus this system's own base-scale captions (the configured
        captioner through the shared caption cache), one semantic item per caption-table row."""
        from senri.captioners.base import Clip
        from senri.memory.hierarchy import coarse_instruction, open_service, split

        table = read_table(request.captions, MemoryRow).sort("start_s")
        items = []
        for n, row in enumerate(table.iter_rows(named=True)):
            items.append(MemoryItem(f"e{n}", "episodic", row["text"], row["start_s"], row["end_s"], level="30sec"))
            items.append(MemoryItem(f"s{n}", "semantic", f"fact: {row['text']}"))
        service = open_service(request.memory_config, request.media, request.caption_cache)
        try:
            instruction = coarse_instruction(request.memory_config["memory"])
            clips = [Clip(s, e, 1.0, instruction, "fine")
                     for s, e in split(0.0, request.video.duration_s, cls.base_s)]
            base = service.captions(clips)
        finally:
            service.close()
        items += [MemoryItem(f"b{n}", "episodic", row.text, row.start_s, row.end_s, level="10sec")
                  for n, row in enumerate(base) if row.text]
        write_items(items, request.out_dir, {"built_from": str(request.captions), "base_captions": len(base)})

    @classmethod
    def import_release(cls, import_dir: Path, request: BuildRequest) -> None:
        file = Path(import_dir) / f"{request.video.video_id}.json"
        if not file.is_file():
            raise ValueError(f"{file}: missing (no release file for video {request.video.video_id!r})")
        release = json.loads(file.read_text())
        items = []
        for n, episode in enumerate(release.get("episodes") or []):
            if "text" not in episode:
                raise ValueError(f"{file}: field 'episodes[{n}].text' missing")
            items.append(MemoryItem(f"e{n}", "episodic", episode["text"],
                                    _seconds(episode.get("start"), file, f"episodes[{n}].start"),
                                    _seconds(episode.get("end"), file, f"episodes[{n}].end"), level="30sec"))
        items += [MemoryItem(f"s{n}", "semantic", str(fact)) for n, fact in enumerate(release.get("facts") or [])]
        write_items(items, request.out_dir, {"imported_from": str(import_dir)})

    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        self.check_memory_type(memory_type)
        pool = [i for i in self._items if i.item_id not in exclude and (memory_type is None or i.kind == memory_type)]
        if not pool:
            return []
        scores = BM25([i.text for i in pool]).scores(query)
        order = np.argsort(-scores, kind="stable")[:k]
        found = [replace(pool[j], score=float(scores[j])) for j in order]
        if context is not None and context.ask is not None:
            listing = "\n".join(f"{n}. {i.text}" for n, i in enumerate(found))
            reply = context.ask(ChatRequest(messages=(Message.text("user", f"Rank these facts for: {query}\n{listing}"),),
                                            max_tokens=16, purpose="rank"), "ranker")
            context.notes.append(f"ranked by the model: {reply.text!r}")
        elif context is not None:
            context.notes.append("no model: BM25 order kept")
        return found

    def items(self, level: str | None = None) -> list[MemoryItem]:
        return [i for i in self._items if level is None or i.level == level]

    def render(self, items) -> str:
        return "\n".join(f"[{i.kind}] {i.text}" for i in items)

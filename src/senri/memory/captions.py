"""The ``captions`` memory system: senri's own caption hierarchy (the memory stage's table) as a
:class:`~senri.memory.store.MemoryStore` — what ``memory_search`` and SENRI-Agent read before issue 25, unchanged.

Every described caption row is one anchored item (``kind`` ``caption``, its level, its interval); a failed
caption (no text, only its backend error) is not an item: there is nothing in it to find, and every question
books it (``failed_captions``, :meth:`CaptionStore.question_counts`). Search is :class:`MemoryIndex` over
``"<m:ss>–<m:ss> <signs> <text>"`` (``embedding`` | ``bm25`` | ``hybrid``, the method config's ``retriever``),
top k then minus what the question already holds — M3-Agent's rule that a repeated query brings nothing new
(the ranked top k stays in :attr:`SearchContext.ranked` for the trace). A retrieved caption cut at its
captioner's token limit is counted ``truncated_captions``. Items are rendered as the memory list always was
(:func:`senri.memory.hierarchy.format_memory`).

The store needs no build: its "folder" is the caption table itself (``results/memory/<captioner>/<video>.parquet``),
and its dense vectors are cached under the caption cache (``index_dir``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Mapping, Sequence

from senri.memory.hierarchy import caption_health, described, format_memory
from senri.memory.retrieval import MemoryIndex
from senri.memory.store import MemoryItem, MemoryStore, SearchContext
from senri.records import MemoryRow, read_table
from senri.track import clock

if TYPE_CHECKING:  # pragma: no cover - typing only
    from senri.records import VideoInfo

#: The retriever when neither the system config nor the method config names one.
DEFAULT_RETRIEVER = "embedding"


class CaptionStore(MemoryStore):
    """The caption table of one video, searchable; item ids are the row's place in time order (``"0"``, …)."""

    system = "captions"

    def __init__(self, rows: Sequence[MemoryRow], index_dir: str | Path | None = None,
                 retriever: str = DEFAULT_RETRIEVER) -> None:
        self.rows = [r for r in rows if described(r)]
        self.failed = caption_health(list(rows))[1]
        self.index = MemoryIndex([f"{clock(r.start_s)}–{clock(r.end_s)} {r.place_labels or ''} {r.text}"
                                  for r in self.rows], index_dir, retriever)
        self._items = [MemoryItem(str(i), "caption", r.text, r.start_s, r.end_s, level=r.level)
                       for i, r in enumerate(self.rows)]

    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video: "VideoInfo") -> "CaptionStore":
        """``folder`` is the caption table; ``system_config`` may carry ``retriever`` and ``index_dir`` (where
        the dense vectors are cached)."""
        table = read_table(folder, MemoryRow).sort("start_s", "level")
        rows = [MemoryRow(**row) for row in table.select(list(MemoryRow.__dataclass_fields__)).iter_rows(named=True)]
        return cls(rows, system_config.get("index_dir"), str(system_config.get("retriever") or DEFAULT_RETRIEVER))

    def _row(self, item: MemoryItem) -> MemoryRow:
        return self.rows[int(item.item_id)]

    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        self.check_memory_type(memory_type)
        ranked = [replace(self._items[i], score=score) for i, score in self.index.search(query, k)]
        new = [item for item in ranked if item.item_id not in exclude]
        if context is not None:
            context.ranked = ranked
            if context.tally is not None:
                context.tally.count("truncated_captions", caption_health([self._row(i) for i in new])[0])
        return new

    def items(self, level: str | None = None) -> list[MemoryItem]:
        return [item for item in self._items if level is None or item.level == level]

    def render(self, items: Sequence[MemoryItem]) -> str:
        return format_memory([self._row(item) for item in items], numbered=False)

    def question_counts(self) -> dict[str, int]:
        return {"failed_captions": self.failed}

    @property
    def retriever(self) -> str:
        return self.index.kind

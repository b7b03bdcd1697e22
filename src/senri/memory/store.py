"""The persistent-memory interface: what ``memory_search``, SENRI-Agent and its ablations read a video's memory
through, whichever system built it.

The SENRI paper's SENRI-Agent is "built upon" WorldMM and MAGIC-Video "by reusing their constructed memories
and retrieval interfaces": the agent needs from a memory only (a) text memories to read and (b) visual
candidates — an absolute interval ``[start_s, end_s]`` plus a description — to verify. So a store hands out
:class:`MemoryItem` rows; an item with an interval is both a text memory and a candidate, an item without one
(a semantic triple, a chain fact) is a text memory only.

A store is built once per video by the pipeline (or imported from the system's own released files) into a
folder of Parquet tables, and opened read-only by every answer job of that video. Retrieval that calls an LLM
itself (WorldMM's fact filter and caption ranking, MAGIC-Video's time-range extractor) sends through
:attr:`SearchContext.ask`, which books the call in the question's tally and the job's response cache, so
those calls are counted and replayed like the method's own.

Stores are found by name in :data:`MEMORY_SYSTEMS` (name → lazy ``"module:Class"``), so a new system is one
module plus one registration line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Collection, Mapping, Sequence

from senri.registry import Registry

if TYPE_CHECKING:  # pragma: no cover - typing only
    from senri.backends.base import ChatResponse
    from senri.calls import CallTally
    from senri.records import Question, VideoInfo


@dataclass(frozen=True)
class MemoryItem:
    """One retrievable unit of a persistent memory.

    ``kind`` is the system's memory type (``caption``; WorldMM's ``episodic`` / ``semantic`` / ``visual``;
    MAGIC-Video's node types and ``chain`` facts); ``level`` its granularity where it has one (``coarse``,
    ``30sec``, ``3min``, …). ``start_s``/``end_s`` are absolute seconds from the video's start, both None for
    an item with no time anchor. ``description`` is the short line a visual candidate shows (default: the
    text's start). ``score`` is the retriever's score for this search (0 outside a search).
    """

    item_id: str
    kind: str
    text: str
    start_s: float | None = None
    end_s: float | None = None
    description: str = ""
    level: str = ""
    score: float = 0.0

    @property
    def anchored(self) -> bool:
        """Whether the item has an interval (and so is a visual candidate as well as a text memory)."""
        return self.start_s is not None and self.end_s is not None

    def candidate_description(self, width: int = 160) -> str:
        return self.description or self.text[:width]


@dataclass
class SearchContext:
    """What a retriever may use besides the query.

    ``question`` lets a system key on the question itself (MAGIC-Video's tier-1 chain facts name an entity
    *in the question*); ``query_time_s`` is the moment the question is asked (items ending later are not
    visible; None: the whole video, the generic setting of both systems); ``ask(request, role)`` sends one LLM
    request and books it, through the model of the system's retrieval role ``role`` (its
    ``memory_system.<name>.models.<role>`` config, as the releases run WorldMM's fact filter on a retriever model
    and MAGIC-Video's time extractor on a cheap model of its own; a null role, or ``role=None``: the answering
    model); None: the store may not call a model and must say so or fall back as its spec allows. ``tally`` is
    the question's, for the store's run-health and behaviour counts.
    """

    question: "Question | None" = None
    query_time_s: float | None = None
    ask: "Callable[..., ChatResponse] | None" = None
    tally: "CallTally | None" = None
    #: ``overflow(request, role)``: why ``request`` would not fit the model of retrieval role ``role`` (its
    #: context and image limits, :func:`senri.backends.budget.overflow`), None when it fits — so a store sizes
    #: its own calls (WorldMM's W8/W9) before ``ask`` sends them. None where there is no model to size against.
    overflow: "Callable[..., str | None] | None" = None
    #: Free-form notes a store adds for the trace (which path served: PPR, dense fallback, time bypass, …).
    notes: list[str] = field(default_factory=list)
    #: What the search ranked before ``exclude`` was applied, best first, when the store ranks a fixed top k
    #: and then drops what the question already holds (the caption store: a repeated query returns nothing
    #: new, and the trace still shows its hits). Empty for a store that fills its k with new items.
    ranked: list[MemoryItem] = field(default_factory=list)


@dataclass(frozen=True)
class BuildRequest:
    """Everything a system's builder may read for one video. Paths are None where the run has no such input.

    ``captions`` is the caption stage's table (``results/memory/<captioner>/<video>.parquet``); ``caption_cache``
    and ``media`` let a builder caption the video at its own base scale through the shared caption service
    (WorldMM's 10-s and MAGIC-Video's 30-s captions), so a clip is never captioned twice across systems:
    ``memory_config`` is the memory stage's slice, what ``open_service(memory_config, media, caption_cache)``
    takes (``tests/fake_store.py`` builds that way). ``system_config`` is the system's config without its name.
    ``models`` maps each builder role (``summariser``, ``extractor``, ``embedder``, …) to its model config
    (name and mapping); ``response_cache`` is the build job's own, so a killed build repeats no finished call.
    """

    video: "VideoInfo"
    system: str
    system_config: Mapping[str, Any]
    memory_config: Mapping[str, Any]
    out_dir: Path
    captions: Path | None = None
    caption_cache: Path | None = None
    media: Any = None
    models: Mapping[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)
    response_cache: Path | None = None
    seed: int = 0


class MemoryStore(ABC):
    """A video's persistent memory, opened read-only for one answer job.

    Subclasses set :attr:`system` (the registry name) and :attr:`memory_types` (what the original workflow's
    search action may choose; ``()`` when the system has one undivided memory), and implement
    :meth:`search` and :meth:`items`. :meth:`render` is how the system's own workflow shows retrieved items to
    its model; SENRI-Agent renders them the same way, so an agent and the original workflow read the same text.
    """

    system: ClassVar[str] = ""
    memory_types: ClassVar[tuple[str, ...]] = ()
    #: The builder roles (``memory_system.<name>.models``) whose models the store's search calls at answer
    #: time: each answer job opens them (counted by :func:`senri.serving.load_counts`).
    query_roles: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------ building, opening, import, export
    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video: "VideoInfo") -> "MemoryStore":
        """The store built (or imported) into ``folder`` for ``video``, read-only. A folder that is missing a
        table or has a bad field raises ``ValueError`` naming the file and the field."""
        raise NotImplementedError(f"memory system {cls.system!r} cannot be opened from a folder")

    @classmethod
    def build(cls, request: BuildRequest) -> None:
        """Build the video's memory into ``request.out_dir`` (the pipeline's own construction)."""
        raise NotImplementedError(f"memory system {cls.system!r} is not built by the pipeline")

    @classmethod
    def import_release(cls, import_dir: Path, request: BuildRequest) -> None:
        """Convert a memory written by the system's own released code (its documented layout and time
        encodings) in ``import_dir`` into ``request.out_dir``, instead of building it. Bad or partial
        releases raise ``ValueError`` naming the file and the field."""
        raise NotImplementedError(f"memory system {cls.system!r} has no import")

    @classmethod
    def export_inputs(cls, captions: Path, video: "VideoInfo", out_dir: Path, system_config: Mapping[str, Any]
                      ) -> list[Path]:
        """Write senri's captions in the system's own input layout under ``out_dir`` (so its released code
        can run on senri's anonymized videos and captions); returns the files written."""
        raise NotImplementedError(f"memory system {cls.system!r} has no export")

    # ------------------------------------------------------------------------------------------ reading
    @abstractmethod
    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        """The best ``k`` items for ``query`` (best first), leaving out the ids in ``exclude`` (what this
        question has already retrieved); ``memory_type`` restricts the search to one of :attr:`memory_types`."""

    @abstractmethod
    def items(self, level: str | None = None) -> list[MemoryItem]:
        """Every item (of one ``level``), anchored ones in time order."""

    def window(self, start_s: float, end_s: float) -> list[MemoryItem]:
        """The anchored items overlapping ``[start_s, end_s]``, in time order."""
        return [item for item in self.items() if item.anchored and item.start_s < end_s and item.end_s > start_s]

    def question_counts(self) -> dict[str, int]:
        """Run-health counts (:data:`senri.records.HEALTH_COUNTS`) every question over this store books once,
        whatever it retrieves — e.g. the caption store's failed captions (``failed_captions``), or the items a
        built store's builder left out (``builder_losses``: failed, unreadable or over-limit builder calls, read
        from the store's own recorded build counts): a memory with holes is visible on every row that read it.
        The counts are per store, so the run-health table's sum repeats them once per question."""
        return {}

    def check_memory_type(self, memory_type: str | None) -> None:
        """A search's ``memory_type`` must be one of :attr:`memory_types` (None: no restriction)."""
        if memory_type is not None and memory_type not in self.memory_types:
            raise ValueError(f"memory system {self.system!r}: memory_type {memory_type!r} is not one of "
                             f"{list(self.memory_types) or '(none: one undivided memory)'}")

    def render(self, items: Sequence[MemoryItem]) -> str:
        """Retrieved items as the system's workflow shows them to a model, one per line."""
        return "\n".join(item.text for item in items)

    @property
    def retriever(self) -> str:
        """The retriever that serves searches (recorded per prediction, e.g. ``embedding`` or ``ppr``)."""
        return self.system

    def summary(self) -> dict[str, Any]:
        """Counts for the trace and the job log: items per kind and level."""
        counts: dict[str, int] = {}
        for item in self.items():
            key = f"{item.kind}/{item.level}" if item.level else item.kind
            counts[key] = counts.get(key, 0) + 1
        return {"system": self.system, "retriever": self.retriever, "items": counts}


#: name → ``"module:Class"`` of a :class:`MemoryStore` subclass with ``open(...)`` and (for systems the
#: pipeline builds) ``build(request)`` classmethods.
MEMORY_SYSTEMS = Registry("memory system")
#: The memory system of every memory method unless the config selects others (``memory_system: [captions]``):
#: senri's own caption table, which needs no store folder.
CAPTIONS = "captions"
MEMORY_SYSTEMS.register(CAPTIONS, "senri.memory.captions:CaptionStore")


def selected_memory_system(section: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """A stage slice's ``memory_system`` section as (name, the rest of its config): absent means
    :data:`CAPTIONS`, so a memory method without a memory system reads senri's captions."""
    system = dict(section or {"name": CAPTIONS})
    return str(system.pop("name")), system
MEMORY_SYSTEMS.register("worldmm", "senri.memory.worldmm.store:WorldMMStore")
MEMORY_SYSTEMS.register("magic_video", "senri.memory.magic_video.store:MagicVideoStore")
MEMORY_SYSTEMS.register("egagent", "senri.memory.egagent.store:EGAgentStore")
MEMORY_SYSTEMS.register("light_omni", "senri.memory.light_omni.store:LightOmniStore")
MEMORY_SYSTEMS.register("m3_agent", "senri.memory.m3_agent.store:M3AgentStore")


def require_store_files(folder: Path, names: Sequence[str], holder: str) -> None:
    """Refuse a store folder that lacks one of the files its system writes, naming the file and what the store
    holds (``holder``: "an EG-Agent store"), before anything is read from it."""
    for name in names:
        if not (Path(folder) / name).is_file():
            raise ValueError(f"{Path(folder) / name}: missing "
                             f"({holder} holds {', '.join(names[:-1])} and {names[-1]})")


def store_class(store: str, system: str | None = None) -> type[MemoryStore]:
    """The :class:`MemoryStore` class of a memory system config's ``store``: a registered name (``captions``,
    ``worldmm``, …) or a ``"module:Class"`` target (a user's own system, without a registry line). An unknown
    name raises naming the system and the systems that are registered."""
    from senri.registry import RegistryError, import_target

    label = f"memory system {system!r}" if system and system != store else f"memory system {store!r}"
    if ":" in store:
        try:
            cls = import_target(store)
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"{label}: store {store!r} cannot be loaded ({exc})") from exc
    else:
        try:
            cls = MEMORY_SYSTEMS.load(store)
        except RegistryError as exc:
            raise RegistryError(f"{label}: store {store!r} is not registered (known: "
                                f"{', '.join(MEMORY_SYSTEMS.names())}); is its module merged?") from exc
    if not (isinstance(cls, type) and issubclass(cls, MemoryStore)):
        raise TypeError(f"{label}: store {store!r} is not a MemoryStore subclass")
    return cls


def memory_label(system: str, captioner: str) -> str:
    """The ``memory`` column of every results table: the system and the captioner its text came from
    (``captions/perception``, ``worldmm/qwen25vl7b_vllm``), so runs over different memories never mix."""
    return f"{system}/{captioner}"

"""What every answering method implements, and what it hands back to the answer stage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from senri.backends.base import DEFAULT_MAX_TOKENS, Backend, Capabilities, ChatRequest, ChatResponse
from senri.backends.budget import within_cap
from senri.calls import CallTally, is_timeout  # noqa: F401 (methods import them from here)
from senri.captioners.base import VideoMedia
from senri.records import Question, VideoInfo


@dataclass(frozen=True)
class RunContext:
    """Everything a method may read besides the question: the video's facts, its config slice, the model
    backend (None for model-free methods), the frame store of its sampling plan (if it uses frames), and for
    memory methods the video's memory table, media (for re-captioning), memory config and caption cache."""

    video: VideoInfo
    method_name: str
    method_config: Mapping[str, Any]
    model_name: str
    model_config: Mapping[str, Any]
    seed: int
    backend: Backend | None = None
    frames: Path | None = None
    carrier: Path | None = None
    memory: Path | None = None
    media: VideoMedia | None = None
    memory_config: Mapping[str, Any] | None = None
    caption_cache: Path | None = None
    #: The video a pixel-reading method decodes itself (the anonymized one when anonymization is on), and
    #: the job's response cache, for the extra backends such a method opens (VideoARM's tool models).
    pixels: Path | None = None
    response_cache: Path | None = None
    #: The persistent memory a memory method reads (issue 25): the registered system's name, its config
    #: slice, and the folder its store was built or imported into (None for ``captions``, whose store is
    #: the memory table itself, ``memory``).
    memory_system: str = "captions"
    memory_system_config: Mapping[str, Any] | None = None
    memory_store: Path | None = None


class RoleModels:
    """The models of a method's extra roles — VideoARM's tools, a memory's retriever-side calls (WorldMM's fact
    filter and ranking, MAGIC-Video's time extractor): a role's own model config where it names one, the run's
    model where it names none (or names the run's model: one copy of it). Each model is opened once, with the
    job's response cache (its calls are cached and replayed like the run's own), and closed with the method."""

    def __init__(self, context: RunContext) -> None:
        self.context = context
        self.opened: dict[str, Backend] = {}

    def get(self, spec: Mapping[str, Any] | None, where: str) -> tuple[str, Backend | None]:
        """(model name, backend) of a role whose resolved config is ``spec`` (``{"name", "config"}``, None: the
        run's model stands in); ``where`` names the config key in errors."""
        if spec is None or str(spec["name"]) == self.context.model_name:
            return self.context.model_name, self.context.backend
        name = str(spec["name"])
        if name not in self.opened:
            from senri.backends import open_backend

            backend = open_backend(spec["config"], self.context.response_cache)
            if backend is None:
                raise ValueError(f"{where}: model {name!r} has no backend")
            self.opened[name] = backend
        return name, self.opened[name]

    def close(self) -> None:
        for backend in self.opened.values():
            backend.close()
        self.opened.clear()


def caption_memory(context: RunContext) -> tuple[list[dict[str, Any]], str]:
    """The video's caption memory as a method that reads it in place of frames gets it (the text-only variants
    of VideoARM and SENRI-Agent): its captions without an error, in time order, as row dicts, and the name of
    the captioner that wrote them ("unknown" where the memory config does not say). A missing or empty memory
    is refused, naming the file."""
    import polars as pl

    from senri.records import MemoryRow, read_table

    if context.memory is None:
        raise ValueError(f"method {context.method_name!r} reads the caption memory; none was given")
    table = read_table(context.memory, MemoryRow).filter(pl.col("error").is_null()).sort("start_s")
    if table.is_empty():
        raise ValueError(f"{context.memory}: the memory holds no caption")
    captioner = str((context.memory_config or {}).get("memory", {}).get("captioner", "unknown"))
    return list(table.iter_rows(named=True)), captioner


@dataclass
class MethodAnswer:
    """A method's answer to one question. ``pred`` is one of the question's letters (A–D for four options), or
    None when the output did not parse; ``error`` is set when a model call failed for good (the question counts
    wrong, the run goes on)."""

    pred: str | None
    raw_output: str | None
    parse_ok: bool
    tally: CallTally = field(default_factory=CallTally)
    trace: dict[str, Any] | None = None

    @property
    def error(self) -> str | None:
        return "; ".join(self.tally.errors) or None

    def trace_json(self) -> str | None:
        return None if self.trace is None else json.dumps(self.trace, sort_keys=True, ensure_ascii=False)


class Method:
    """Base class: one instance per (method, model, video) job; :meth:`answer` is called once per question.

    ``approach`` groups methods in the report tables (the papers' direct perception / evidence seeking /
    persistent memory); ``uses_model`` tells the workflow whether to run the method once per model;
    ``uses_frames`` whether its jobs need the frame store of the plan named in the method config;
    ``uses_memory`` whether they need the video's caption memory and a captioner; ``uses_pixels`` whether
    they decode the video themselves (``RunContext.pixels``). The code its jobs run is derived from what its
    module imports (:mod:`senri.code_identity`).
    """

    approach: ClassVar[str] = "baseline"
    uses_model: ClassVar[bool] = True
    uses_frames: ClassVar[bool] = False
    uses_memory: ClassVar[bool] = False
    uses_pixels: ClassVar[bool] = False
    #: Whether the method reads a persistent memory through a :class:`senri.memory.store.MemoryStore` (the
    #: ``memory_search`` family): such a method runs once per selected memory system (``<method>@<system>``).
    reads_store: ClassVar[bool] = False
    #: Whether its answers re-caption clips with the memory's captioner (VideoLucy's backtracking): each answer
    #: job then opens the captioner's model too (counted by :func:`senri.serving.load_counts`).
    recaptions: ClassVar[bool] = False
    #: Whether it captions parts of the video itself and keeps them in a caption cache shared by all its runs
    #: over a video (LongVideo-R1's tree nodes): its jobs get ``--caption-cache`` (``RunContext.caption_cache``).
    caches_captions: ClassVar[bool] = False

    def __init__(self, context: RunContext) -> None:
        self.context = context

    @classmethod
    def capability_problems(cls, method: str, spec: Mapping[str, Any], model: str,
                            capabilities: Capabilities | None,
                            roles: Mapping[str, tuple[str, Capabilities | None]] | None = None) -> list[str]:
        """What ``model`` (with ``capabilities``; None: no model) and the models of the method's other roles
        (``roles``: role → (model name, capabilities)) lack for this method configured as ``spec``: one line
        per problem, naming what is missing and what to use instead; [] when the run can work.

        Asked at plan time of every run on its model configs' declared capabilities
        (:func:`senri.config.capability_problems`, before any job) and by the method itself on the backends its
        job opened, so both refuse a run by the same rule."""
        return []

    def refuse_missing_capabilities(self, roles: Mapping[str, tuple[str, Capabilities | None]] | None = None
                                    ) -> None:
        """Raise the first of :meth:`capability_problems` on the job's own backends."""
        context = self.context
        capabilities = context.backend.capabilities if context.backend is not None else None
        problems = self.capability_problems(context.method_name, context.method_config, context.model_name,
                                            capabilities, roles)
        if problems:
            raise ValueError(problems[0])

    def answer(self, question: Question) -> MethodAnswer:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the method opened (a captioner, say); the backend is the answer stage's to close."""

    def summary(self) -> str | None:
        """A line for the job's log about the method's own costs (captions computed vs reused, say)."""
        return None

    def answer_many(self, questions: Sequence[Question]) -> list[MethodAnswer]:
        """Answer several questions; methods whose calls are independent override this to batch them."""
        return [self.answer(q) for q in questions]

    def chat_many(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Send requests to the run's backend in one batch (GPU and remote backends overlap them); callers
        book the responses into the tally of the question(s) they belong to."""
        if self.context.backend is None:
            raise RuntimeError(f"method {self.context.method_name!r} needs a model, but none is configured")
        return self.context.backend.complete_many(list(requests))

    def role_max_tokens(self, role: str) -> int:
        """A role's completion-token limit, from the method config's ``max_tokens`` map (e.g.
        ``max_tokens: {controller: 4096, verifier: 4096}``). Limits are config, never literals in a method:
        a reasoning model needs room to think before its JSON. A role the map does not name falls back to
        the model config's ``max_tokens``. The model config's ``max_tokens_cap`` bounds every role: a small
        model with a short context window (the demo's 135M model, n_ctx 4096) cannot use thousands of tokens
        and would only ramble until the limit."""
        limits = self.context.method_config.get("max_tokens") or {}
        model = self.context.model_config
        if isinstance(limits, Mapping) and role in limits:
            limit = int(limits[role])
        else:
            limit = int(model.get("max_tokens", DEFAULT_MAX_TOKENS))
        return within_cap(limit, model)

    def prompts(self, variant: str | None = None):
        """This method's prompt templates (``prompts:`` family, its ``variant`` subfolder's wording where given,
        overlaid by ``prompts_dir``)."""
        from senri.prompts import config_prompts

        prompts = config_prompts(self.context.method_config, variant)
        if prompts is None:
            raise ValueError(f"method {self.context.method_name!r}: its config names no prompt family (prompts:)")
        return prompts

    def sampling(self) -> dict[str, Any]:
        """The model config's sampling parameters (greedy by default), seeded with the run's seed."""
        model = self.context.model_config
        return {"temperature": float(model.get("temperature", 0.0)), "top_p": float(model.get("top_p", 1.0)),
                "max_tokens": int(model.get("max_tokens", DEFAULT_MAX_TOKENS)), "seed": self.context.seed}

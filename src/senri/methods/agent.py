"""``memory_search`` and ``senri_agent`` (with its ablations): a controller over the persistent memory.

``memory_search`` is the "original workflow" SENRI-Agent builds on: each round a controller LLM picks one
JSON action — ``search`` (one standalone query; the retriever returns text memories and, for each, a visual
candidate = absolute interval + description) or ``answer`` — for at most ``max_rounds`` (5) rounds, then one
forced answer round. Every action carries a short ``rationale`` (kept in the trace). A memory system's own
workflow with a QA call of its own (MAGIC-Video's, :attr:`MemorySearch.qa_call`) instead ends every question
with that QA call, whatever ended the rounds, and may read an invalid reply as the answer decision, as its
release does (``invalid_reply: answer``). What the loop did — rounds, searches, memories returned, QA calls,
checks, cells, frames — is counted on the question's row (:data:`senri.records.BEHAVIOUR_COUNTS`).

``senri_agent`` adds ``verify``: 1–3 target-guided visual checks (:mod:`senri.verify`), each split into
adaptive temporal cells (at most ``max_cells_per_round`` per verify — 600 by default, so the paper's 3 checks
over 800-s windows at f = 1, B = 8 stay uncapped — a safety cap recorded in the trace with the seconds of each
window the kept cells cover),
each cell inspected by a choice-blind verifier: it sees the check's target context, objective and
requirements and the cell's frames — as a 1 frame/s carrier video where the backend takes video, as images
labelled with their carrier offsets otherwise — and their timestamps (each sampled span's source interval and
sampling interval, for orientation), never the question or options. Its citations (``offset_sec``
on the carrier) are mapped back to source time. All cells go in one batch (the backend runs them in
parallel); malformed replies get one repair, batched too. Problems of a verify (dropped windows, clamps,
caps, refused checks) are shown to the controller in the next round. An updater LLM, under its own system
prompt, keeps a bounded working memory: a note and at most 3 reports with 4 evidence frames each, copied
unchanged, chosen from the retained reports plus the latest batch; when the update fails, the batch's newest
reports are kept within the bound and the controller is told.

Nothing is lost silently (issue 24): the updater's and the controller's requests are sized against the model
config's limits before they are sent, leaving out the oldest evidence first, frames before reports
(:func:`fit_evidence`, each trim on its call's trace entry); an invalid reply is answered in the next round
with what was wrong (``feedback_invalid.txt``); the forced round's schema requires the letter and an invalid
forced reply still goes through the answer parser; and every such event is a run-health count of the
question's prediction row (forced answers and recoveries, context trims, capped cells and the seconds seen,
failed memory updates, stripped and refused checks, repeated queries).

Ablations (Table 4): ``senri_agent_no_tg`` (a general observation prompt under its own system prompt, no
requirement list, summaries without R-ids),
``senri_agent_no_pv`` (one verifier per check over all its windows, at most B frames at rate f),
``senri_agent_no_wm`` (no updater; every report and all its evidence frames go to the controller).

Every prompt is a template file of the method's family (``config/prompts/senri_agent`` or
``config/prompts/memory_search``; ``prompts_dir`` overlays the user's own), and every role's token limit
comes from the method config's ``max_tokens`` map.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar, Mapping, Sequence

from senri.answers import json_objects, parse_answer, question_block, split_reasoning
from senri.backends.base import Capabilities, ChatRequest, ChatResponse, ImagePart, Message, Part, VideoPart
from senri.backends.budget import overflow, within_cap
from senri.memory.store import MemoryItem, MemoryStore, SearchContext, store_class
from senri.methods.base import CallTally, Method, MethodAnswer, RoleModels, RunContext
from senri.methods.structured import StructuredReply, ask_json, ask_json_many, call_record, request_schema
from senri.records import LETTERS, Question
from senri.verify import (Cell, Check, Report, cap_cells, cell_times, check_cells, normalised, read_report,
                          requested_and_seen_s, source_timing, validate_checks, validation_counts, window_coverage)

CITATION = {"type": "object", "properties": {"offset_sec": {"type": "number"}, "note": {"type": "string"}},
            "required": ["offset_sec"]}
REPORT_SCHEMA = {
    "type": "object",
    "properties": {
        "observation": {"type": "string"}, "explanation": {"type": "string"},
        "ambiguity_reason": {"type": "string"}, "next_evidence_needed": {"type": "string"},
        "evidence_moments": {"type": "array", "items": CITATION},
        "requirement_findings": {"type": "object", "additionalProperties": {"type": "string"}},
        "requirement_evidence_moments": {"type": "object",
                                         "additionalProperties": {"type": "array", "items": CITATION}},
    },
    "required": ["observation", "explanation", "ambiguity_reason", "next_evidence_needed", "evidence_moments",
                 "requirement_findings", "requirement_evidence_moments"],
}
UPDATE_SCHEMA = {
    "type": "object",
    "properties": {"note": {"type": "string"}, "selected_report_ids": {"type": "array", "items": {"type": "string"}}},
    "required": ["note", "selected_report_ids"],
}
VERIFIER_INPUTS = ("auto", "video", "images")
#: What an invalid controller reply does (``invalid_reply``).
INVALID_REPLY_RULES = ("feedback", "answer")
#: The verifier's reply form, quoted by its repair turn (repair.txt).
REPORT_FORM = ('{"observation": "...", "explanation": "...", "ambiguity_reason": "...", "next_evidence_needed": '
               '"...", "evidence_moments": [...], "requirement_findings": {...}, '
               '"requirement_evidence_moments": {...}}')
UPDATE_FORM = '{"note": "...", "selected_report_ids": [...]}'
#: Default verifier cells per verify: the paper's common case (3 checks over 800-s windows at f = 1, B = 8,
#: 3 × 199 = 597 cells) stays uncapped; only far larger asks (a 3 h window at f = 4) are spread evenly.
DEFAULT_MAX_CELLS = 600
#: The one trimming rule of a request over the model's limits (:func:`fit_evidence`).
TRIM_RULE = "oldest evidence first, frames before reports"


@dataclass
class Evidence:
    """A report and the frames it cited (absolute time, JPEG), as working memory keeps them."""

    report: Report
    frames: list[tuple[float, bytes]]


def _age(evidence: Evidence) -> int:
    """A report's place in the episode (r1 is the oldest); reports are numbered in the order they were made."""
    digits = evidence.report.report_id.lstrip("r")
    return int(digits) if digits.isdigit() else 0


def fit_evidence(pool: list[Evidence], fits: Callable[[list[Evidence]], str | None], frames: bool = True
                 ) -> tuple[list[Evidence], dict[str, Any] | None]:
    """The evidence a request can carry within the model's limits, by one rule: **oldest evidence first** is
    left out, **frames before reports** — first the evidence frames, the oldest report's first, then whole
    reports, oldest first — and no more than needed (the fewest left out for which ``fits`` says the request
    fits; ``fits`` returns why a request would not fit, or None). Returns the evidence kept (pool order) and
    the trim record for the call's trace entry, or None when the whole pool fits. When even nothing fits,
    everything is left out and the record says why (``still_over``). ``frames=False``: the request shows no
    frames (a text-only model, ``updater_images: false``), so only whole reports are left out."""
    why = fits(pool)
    if why is None:
        return pool, None
    order = sorted(range(len(pool)), key=lambda i: _age(pool[i]))
    units = [(i, j) for i in order for j in range(len(pool[i].frames) if frames else 0)] + [(i, -1) for i in order]

    def trimmed(k: int) -> list[Evidence]:
        gone = set(units[:k])
        return [Evidence(e.report, [f for j, f in enumerate(e.frames) if (i, j) not in gone])
                for i, e in enumerate(pool) if (i, -1) not in gone]

    low, high = 1, len(units)
    still_over = fits(trimmed(high))
    if still_over is None:
        while low < high:  # the fewest units left out that make it fit (leaving out more never adds tokens)
            middle = (low + high) // 2
            if fits(trimmed(middle)) is None:
                high = middle
            else:
                low = middle + 1
    k = high
    kept = trimmed(k)
    record: dict[str, Any] = {"rule": TRIM_RULE, "why": why,
                              "frames_left_out": sum(1 for _, j in units[:k] if j >= 0),
                              "reports_left_out": [pool[i].report.report_id for i, j in units[:k] if j < 0]}
    if still_over is not None:
        record["still_over"] = still_over
    return kept, record


def _what_was_wrong(reply: StructuredReply, names: list[str], memory_types: tuple[str, ...] = (),
                    letters: tuple[str, ...] = LETTERS) -> str:
    """Why a controller reply is not a valid action, in a few words, for the next round's prompt."""
    if reply.error and reply.error.startswith("model call failed"):
        return reply.error
    body = split_reasoning(reply.text)[0]
    objects = json_objects(body)
    if not objects:
        return "the reply was empty" if not body.strip() else "no JSON object in the reply"
    obj = objects[0]
    action = str(obj.get("action", "")).strip().lower()
    if action not in names:
        return f"action {obj.get('action')!r} is not one of {', '.join(names)}"
    if action == "answer":
        return f"answer must be one of {', '.join(letters)} (got {obj.get('answer')!r})"
    if action == "search":
        if memory_types and str(obj.get("query", "")).strip():
            return f"memory_type must be one of {', '.join(memory_types)} (got {obj.get('memory_type')!r})"
        return "a search needs a non-empty query"
    return "a verify needs a list of checks"


def release_reading(reply: StructuredReply) -> str:
    """How the releases' controller parsers (WorldMM's, MAGIC-Video's) read a reply that is no valid action:
    ``error`` — the call failed, or the reply holds a decision they know with a bad argument (a search without a
    query) or a decision they do not know: the round is spent as an error (they stop at ``max_errors``);
    ``answer`` — no JSON object, or one without a decision: they default to answering."""
    if reply.error and reply.error.startswith("model call failed"):
        return "error"
    objects = json_objects(split_reasoning(reply.text)[0])
    return "error" if objects and "action" in objects[0] else "answer"


@dataclass
class Episode:
    question: Question
    tally: CallTally = field(default_factory=CallTally)
    retrieved: dict[str, MemoryItem] = field(default_factory=dict)  # by item id, in retrieval order (append-only)
    round_context: str = ""                                          # this round's extra text (_round_context)
    reports: list[Evidence] = field(default_factory=list)
    note: str = ""
    retained: list[Evidence] = field(default_factory=list)
    feedback: list[str] = field(default_factory=list)               # problems of the last action, shown once
    feedback_action: str = "verify"                                  # "reply": the last reply was invalid
    invalid_reply: str = ""                                          # its start, quoted back to the controller
    queries: set[str] = field(default_factory=set)                   # normalised, to count repeated searches
    trace: dict[str, Any] = field(default_factory=lambda: {"rounds": [], "calls": []})
    verifier_calls: int = 0
    frames_inspected: int = 0
    cells: int = 0
    checks: int = 0


def _hit(item: MemoryItem) -> str:
    """A search hit as the trace lists it: level, interval (for an anchored item) and score."""
    where = f" {item.start_s:g}–{item.end_s:g}s" if item.anchored else ""
    return f"{item.level or item.kind}{where} ({item.score:.3f})"


def _report_valid(obj: dict) -> dict | None:
    """A verifier reply is usable when it is an object with an observation or requirement findings."""
    return obj if isinstance(obj, dict) and ("observation" in obj or "requirement_findings" in obj) else None


class MemorySearch(Method):
    approach = "persistent_memory"
    uses_model = True
    uses_memory = True
    reads_store = True
    can_verify: ClassVar[bool] = False
    target_guided: ClassVar[bool] = True
    split_cells: ClassVar[bool] = True
    working_memory: ClassVar[bool] = True
    #: Whether the verifiers look at decoded frames (False: the text-only variant reads the window's text
    #: memory at the sampled moments, :class:`senri.methods.senri_agent_text_only.SenriAgentTextOnly`).
    reads_frames: ClassVar[bool] = True
    #: The verifier's prompt files: its system prompt and the reply form below its input.
    verifier_system_role: ClassVar[str] = "verifier_system"
    verifier_reply_role: ClassVar[str] = "verifier_reply"
    #: What a cell's samples are, as the verifier's source timing names them.
    sample_unit: ClassVar[str] = "frame"
    default_prompts: ClassVar[str] = "memory_search"
    #: Whether a workflow ends with its own QA call (:meth:`_answer_request`), run whatever ended the rounds.
    qa_call: ClassVar[bool] = False
    #: Whether ``max_rounds`` is followed by one forced answer round (SENRI-Agent's protocol, and memory_search's);
    #: a workflow whose release has no such round goes from its last round to its QA call.
    forced_round: ClassVar[bool] = True


    def __init__(self, context: RunContext) -> None:
        from senri.prompts import prompt_set

        super().__init__(context)
        if context.memory is None or context.media is None:
            raise ValueError(f"method {context.method_name!r} needs the video's memory (memory stage output)")
        config = context.method_config
        self.max_rounds = int(config.get("max_rounds", 5))
        self.top_k = int(config.get("top_k", 3))
        self.retries = int(config.get("json_retries", 1))
        #: A controller reply that is no valid action (after its repairs): ``feedback`` — the round is spent and
        #: the next one says what was wrong (senri's protocol); ``answer`` — read as the answer decision, so the
        #: rounds end (the released parsers of WorldMM and MAGIC-Video default to answering).
        self.invalid_reply = str(config.get("invalid_reply", "feedback"))
        #: Under ``invalid_reply: answer``, the error rounds (failed calls, bad or unknown actions) that end the
        #: loop early, as the releases' ``max_errors``.
        self.max_errors = int(config.get("max_errors", 5))
        if self.invalid_reply not in INVALID_REPLY_RULES:
            raise ValueError(f"method {context.method_name!r}: invalid_reply must be one of {INVALID_REPLY_RULES}, "
                             f"not {self.invalid_reply!r}")
        self.wm_reports = int(config.get("wm_reports", 3))
        self.wm_frames = int(config.get("wm_frames", 4))
        self.short_side = int(config.get("verifier_short_side", 448))
        self.parallel = bool(config.get("parallel_verifiers", True))
        self.max_cells = int(config.get("max_cells_per_round", DEFAULT_MAX_CELLS))
        self.updater_images = bool(config.get("updater_images", True))
        self.verifier_input = str(config.get("verifier_input", "auto"))
        if self.verifier_input not in VERIFIER_INPUTS:
            raise ValueError(f"method {context.method_name!r}: verifier_input must be one of {VERIFIER_INPUTS}")
        self.prompt_set = prompt_set(config.get("prompts") or self.default_prompts, config.get("prompts_dir"))
        self._role_models = RoleModels(context)
        self.store: MemoryStore = self._open_store()
        self.duration_s = context.video.duration_s

    def _open_store(self) -> MemoryStore:
        """The video's memory, through the registered class of the run's memory system (``captions``: the
        caption table itself). The system config is completed with the method's ``retriever`` (a store that
        lets the method choose its retriever reads it; the system config's own wins) and ``index_dir``, the
        caption cache's folder for retrieval vectors, shared by every job of the video."""
        context = self.context
        settings: dict[str, Any] = {"retriever": context.method_config.get("retriever", "embedding"),
                                    **(context.memory_system_config or {})}
        if context.caption_cache is not None:
            settings.setdefault("index_dir", context.caption_cache / "index")
        store_cls = store_class(str(settings.get("store") or context.memory_system), context.memory_system)
        return store_cls.open(context.memory_store or context.memory, settings, context.video)

    def close(self) -> None:
        self._role_models.close()

    def summary(self) -> str | None:
        """The job log's line about the memory read: its system, retriever and items per kind and level."""
        info = self.store.summary()
        items = ", ".join(f"{k} {v}" for k, v in sorted(info["items"].items())) or "no items"
        return f"memory {self.context.memory_system} (retriever {info['retriever']}): {items}"

    def _search_model(self, role: str | None) -> tuple[str, Any]:
        """(model name, backend) of a memory system's retrieval role: its ``memory_system.<name>.models.<role>``
        model config, or the answering model where the role is null or not given (recorded in the trace)."""
        spec = None
        if role is not None:
            spec = ((self.context.memory_system_config or {}).get("model_configs") or {}).get(role)
        where = f"config.memory_system.{self.context.memory_system}.models.{role}"
        return self._role_models.get(spec, where)

    def _search_context(self, ep: Episode) -> SearchContext:
        """What a store's retriever may use: the question, the question's tally, and ``ask(request, role)`` —
        one LLM call through the model of the store's retrieval ``role`` (:meth:`_search_model`; the job's
        response cache), booked in the question's tally and listed in the trace's calls with the model that
        served it (issue 25 decision 6) — and ``overflow(request, role)``, to size such a call to that model
        before sending it."""
        def capped(request: ChatRequest, backend: Any) -> ChatRequest:
            """The request within the serving model's ``max_tokens_cap`` (the answering model's, for a null role)."""
            limit = within_cap(request.max_tokens, getattr(backend, "config", None))
            return replace(request, max_tokens=limit) if limit != int(request.max_tokens) else request

        def ask(request: ChatRequest, role: str | None = None) -> ChatResponse:
            name, backend = self._search_model(role)
            request = capped(request, backend)
            response = backend.complete_many([request])[0]
            booked = len(ep.tally.errors)
            ep.tally.add(request, response)
            if response.error:  # the search falls back (its store's rule): a run-health count, not the question's error
                del ep.tally.errors[booked:]
                ep.tally.count("failed_search_calls")
            ep.trace["calls"].append({**call_record(request, response), "call": f"retrieve:{request.purpose or 'ask'}",
                                      "role": role, "model": name})
            return response

        def fits(request: ChatRequest, role: str | None = None) -> str | None:
            backend = self._search_model(role)[1]
            return overflow(backend, capped(request, backend))

        has_model = self.context.backend is not None
        return SearchContext(question=ep.question, ask=ask if has_model else None, tally=ep.tally,
                             overflow=fits if has_model else None)

    def _round_context(self, ep: Episode) -> str:
        """Extra text the controller (and the updater) read this round below the retrieved memories — e.g.
        MAGIC-Video's narrative-chain facts. Called once per round, before the controller; "" adds nothing."""
        return ""

    def _answer_request(self, ep: Episode, proposed: str | None) -> ChatRequest | None:
        """The request of a workflow's own final QA call, made once the controller answers (WorldMM's W-L4,
        MAGIC-Video's G-L3 answer with images): its reply, read by the project's answer parser, is the
        answer. None (the default): the controller's ``answer`` action is the answer."""
        return None

    @property
    def _capabilities(self):
        backend = self.context.backend
        return backend.capabilities if backend is not None else None

    # ----------------------------------------------------------------------------------------- context
    def _memories_text(self, ep: Episode) -> str:
        """The retrieved items as the store renders them, then this round's extra context (if any)."""
        items = list(ep.retrieved.values())
        text = self.store.render(items) if items else "(nothing retrieved yet)"
        return f"{text}\n{ep.round_context}" if ep.round_context else text

    def _candidates(self, ep: Episode) -> list[MemoryItem]:
        """Visual candidates: the retrieved items with an interval (a triple or a chain fact is text only)."""
        return [item for item in ep.retrieved.values() if item.anchored]

    def _candidates_text(self, ep: Episode) -> str:
        candidates = self._candidates(ep)
        if not candidates:
            return "(none yet)"
        return "\n".join(f"- c{n} [{c.start_s:.0f}, {c.end_s:.0f}] s, valid_absolute_sec [0, {self.duration_s:.0f}]: "
                         f"{c.candidate_description()}" for n, c in enumerate(candidates, 1))

    def _shown_reports(self, ep: Episode) -> list[Evidence]:
        return ep.retained if self.working_memory else ep.reports

    def _working_memory_text(self, ep: Episode, shown: list[Evidence]) -> str:
        """The note and the reports ``shown`` (all of them, or what :func:`fit_evidence` kept: then a line
        says what was left out, so the controller does not take a trimmed view for the whole evidence)."""
        full = self._shown_reports(ep)
        if not self.can_verify or not (full or ep.note):
            return ""
        lines = [""]
        if self.working_memory:
            lines.append(f"Working memory note: {ep.note or '(empty)'}")
            lines.append("Verifier reports kept in working memory (their evidence frames are shown above):"
                         if shown else "No verifier report kept yet.")
        else:
            lines.append("All verifier reports so far (their evidence frames are shown above):"
                         if shown else "No verifier report yet.")
        lines += [e.report.summary() for e in shown]
        kept = {e.report.report_id for e in shown}
        frames_out = sum(len(e.frames) for e in full) - sum(len(e.frames) for e in shown)
        reports_out = [e.report.report_id for e in full if e.report.report_id not in kept]
        if frames_out or reports_out:
            lines.append(self.prompt_set.render(
                "evidence_left_out", frames=frames_out,
                reports=f" and the reports {', '.join(reports_out)}" if reports_out else ""))
        return "\n".join(lines) + "\n"

    def _evidence_parts(self, evidence: list[Evidence], per_report: int | None = None) -> list[Part]:
        """Evidence frames as images labelled with their source time, each report's frames after its id."""
        capabilities = self._capabilities
        if capabilities is None or not capabilities.images:
            return []
        parts: list[Part] = []
        for e in evidence:
            frames = e.frames if per_report is None else e.frames[:per_report]
            if frames:
                parts.append(f"Evidence frames of {e.report.report_id}:")
                parts += [ImagePart(jpeg, t) for t, jpeg in frames]
        return parts

    # ----------------------------------------------------------------------------------------- controller
    def _actions_text(self, forced: bool, round_no: int = 0,
                      letters: Sequence[str] = LETTERS) -> tuple[list[str], str]:
        """The allowed actions and their form, the answer's naming the question's ``letters``; the round line
        lives here, so the forced round is named the final answer round (never "round 6 of 5")."""
        answer_letters = "|".join(letters)
        if forced:
            return ["answer"], self.prompt_set.render("actions_forced", max_rounds=self.max_rounds,
                                                      answer_letters=answer_letters)
        names = ["search", "verify", "answer"] if self.can_verify else ["search", "answer"]
        return names, self.prompt_set.render("actions", round=round_no, max_rounds=self.max_rounds,
                                             answer_letters=answer_letters)

    def _fit(self, evidence: list[Evidence], messages_for: Callable[[list[Evidence]], tuple[Message, ...]],
             role: str, tally: CallTally) -> tuple[list[Evidence], dict[str, Any] | None]:
        """The evidence a role's request can carry within the model config's limits (:func:`fit_evidence`),
        sized before sending with the backend's own token count; a trim is counted ``context_trims``."""
        backend = self.context.backend
        if backend is None or not evidence:
            return evidence, None
        max_tokens = self.role_max_tokens(role)
        capabilities = self._capabilities
        frames = capabilities is not None and capabilities.images and (role != "updater" or self.updater_images)
        kept, trim = fit_evidence(evidence, lambda chosen: overflow(
            backend, ChatRequest(messages=messages_for(chosen), max_tokens=max_tokens)), frames)
        if trim is not None:
            tally.count("context_trims")
        return kept, trim

    def _controller_messages(self, ep: Episode, round_no: int, forced: bool,
                             shown: list[Evidence]) -> tuple[Message, ...]:
        _, actions = self._actions_text(forced, round_no, ep.question.letters)
        feedback = ""
        if ep.feedback and ep.feedback_action == "reply":
            feedback = self.prompt_set.render("feedback_invalid", problem=ep.feedback[0], reply=ep.invalid_reply)
        elif ep.feedback:
            feedback = self.prompt_set.render("feedback", action=ep.feedback_action,
                                              problems="\n".join(f"- {p}" for p in ep.feedback))
        q = ep.question
        text = self.prompt_set.render(
            "controller", duration_s=f"{self.duration_s:.0f}", memories=self._memories_text(ep),
            candidates=self._candidates_text(ep), working_memory=self._working_memory_text(ep, shown),
            question=question_block(q.question, q.options), feedback=feedback, actions=actions)
        parts = self._evidence_parts(shown) if self.can_verify else []
        return (Message.text("system", self.prompt_set.render("controller_system")),
                Message("user", (*parts, text)))

    def _controller(self, ep: Episode, round_no: int, forced: bool) -> tuple[StructuredReply, dict[str, Any] | None]:
        """One controller round; its request sized to the model's limits first (the evidence it shows trimmed
        by :data:`TRIM_RULE`). Returns the reply and the trim record (None: nothing left out)."""
        letters = ep.question.letters  # the question's own: an "E" on a four-option question is no answer
        names, form = self._actions_text(forced, round_no, letters)
        shown: list[Evidence] = self._shown_reports(ep) if self.can_verify else []
        trim = None
        if shown:
            shown, trim = self._fit(shown, lambda chosen: self._controller_messages(ep, round_no, forced, chosen),
                                    "controller", ep.tally)

        def valid(obj: dict) -> dict | None:
            action = str(obj.get("action", "")).strip().lower()
            if action not in names:
                return None
            rationale = str(obj.get("rationale") or "").strip()
            if action == "answer":
                letter = str(obj.get("answer", "")).strip().strip("().").upper()
                if letter in letters or self.qa_call:  # a workflow's own QA call answers: the decision is enough
                    return {"action": "answer", "answer": letter if letter in letters else None,
                            "rationale": rationale}
                return None
            if action == "search":
                query = str(obj.get("query", "")).strip()
                if not query:
                    return None
                if not self.store.memory_types:
                    return {"action": "search", "query": query, "rationale": rationale}
                # A system with several memories: a search may name one (WorldMM's memory-type choice); one
                # that names none searches them all (SENRI-Agent's prompts know no memory types).
                memory_type = str(obj.get("memory_type") or "").strip().lower() or None
                if memory_type is not None and memory_type not in self.store.memory_types:
                    return None
                return {"action": "search", "query": query, "rationale": rationale, "memory_type": memory_type}
            checks = obj.get("checks")
            return {"action": "verify", "checks": checks, "rationale": rationale} if isinstance(checks, list) else None

        schema = {"type": "object", "properties": {"action": {"enum": names}, "rationale": {"type": "string"},
                                                   "query": {"type": "string"}, "answer": {"enum": list(letters)},
                                                   "checks": {"type": "array"},
                                                   # Only for a store with memory types: the captions
                                                   # schema (and so its requests) stays as it was.
                                                   **({"memory_type": {"enum": list(self.store.memory_types)}}
                                                      if self.store.memory_types else {})},
                  # The forced round can only answer: a constrained decoder must write the letter.
                  "required": ["action", "rationale", "answer"] if forced else ["action", "rationale"]}
        reply = ask_json(self, self._controller_messages(ep, round_no, forced, shown), schema, valid,
                         self.prompt_set.render("repair", form=form), "control:forced" if forced else "control",
                         ep.tally, self.retries, max_tokens=self.role_max_tokens("controller"))
        return reply, trim

    # ------------------------------------------------------------------------------------------ actions
    def _search(self, ep: Episode, query: str, memory_type: str | None = None) -> dict[str, Any]:
        """The store's best ``top_k`` items for ``query``, leaving out those the question already holds
        (M3-Agent's search over its memory graph drops the clips it already holds; how a store fills its k
        is the store's). When nothing new comes back — a repeated query — the controller hears so in the
        next round instead of seeing an unchanged prompt and asking the same again."""
        key = normalised(query)
        if key in ep.queries:
            ep.tally.count("repeated_queries")
        ep.queries.add(key)
        context = self._search_context(ep)
        new = self.store.search(query, self.top_k, exclude=set(ep.retrieved), memory_type=memory_type,
                                context=context)
        new = [item for item in new if item.item_id not in ep.retrieved]
        for item in new:
            ep.retrieved[item.item_id] = item
        ep.tally.did("searches")
        ep.tally.did("memories_returned", len(new))
        if not new:
            ep.feedback = [self.prompt_set.render("search_nothing_new", query=query, top_k=self.top_k).strip()]
            ep.feedback_action = "search"
        record: dict[str, Any] = {"query": query, "retriever": self.store.retriever, "new": len(new),
                                  "hits": [_hit(item) for item in (context.ranked or new)]}
        if memory_type is not None:
            record["memory_type"] = memory_type
        if context.notes:
            record["notes"] = list(context.notes)
        return record

    def _as_video(self) -> bool:
        """Whether the verifiers get a carrier video (``verifier_input`` video, or auto on a model that takes
        video); a model that cannot take what is asked was refused when the method opened
        (:meth:`SenriAgent.capability_problems`)."""
        capabilities = self._capabilities
        takes_video = capabilities is not None and capabilities.video
        return self.verifier_input == "video" or (self.verifier_input == "auto" and takes_video)

    def _verifier_input_name(self) -> str:
        """What the verifiers were given, as the verify's trace record names it."""
        return "video" if self._as_video() else "images"

    def _verifier_timeline(self, n_samples: int, as_video: bool) -> str:
        """The line that tells the verifier how its input maps to the offset_sec timeline it cites."""
        return self.prompt_set.render("verifier_video" if as_video else "verifier_images", n_frames=n_samples,
                                      last_offset=n_samples - 1)

    def _evidence_of(self, report: Report, pts: list[float], samples: list[Any]) -> list[tuple[float, bytes]]:
        """The frames a report cited (source time, JPEG), as working memory keeps them."""
        return [(pts[i], samples[i]) for i in report.evidence_frames]

    def _verifier_visual(self, jpegs: list[bytes], as_video: bool, times: list[float]) -> list[Part]:
        """The cell's frames as the verifier sees them: a 1 frame/s carrier (frame k at offset k s, the
        timeline its citations use; the frames' source ``times`` travel with it) for backends that take video,
        else images labelled with the same carrier offsets."""
        if not as_video:
            return [ImagePart(jpeg, float(k)) for k, jpeg in enumerate(jpegs)]
        from senri.decode import carrier_frame_count, carrier_from_jpegs

        mp4 = carrier_from_jpegs(jpegs, fps=1.0)
        count = carrier_frame_count(mp4)
        if count != len(jpegs):  # the paper's carrier check: exactly the sampled frames, nothing dropped or added
            raise RuntimeError(f"verifier carrier holds {count} frames, {len(jpegs)} were sampled")
        return [VideoPart(mp4, 1.0, tuple(times), timeline="carrier")]

    def _verifier_request(self, check: Check, cell: Cell, times: list[float], jpegs: list[bytes]) -> ChatRequest:
        """Choice-blind: only the check's task (or, without target guidance, a general prompt under its own
        system prompt, with no requirement list), the frames and their timestamps: the carrier timeline the
        citations use, and where on the source timeline the frames were sampled."""
        if self.target_guided:
            ids = check.requirement_ids()
            listed = "\n".join(f"{rid}: {text}" for rid, text in ids[1:]) or "(none beyond R1)"
            task = self.prompt_set.render("verifier", objective=check.objective,
                                          target_context=check.target_context, requirements=listed)
        else:
            ids = []
            task = self.prompt_set.render("verifier_general")
        as_video = self._as_video()
        timeline = self._verifier_timeline(len(jpegs), as_video)
        reply = self.prompt_set.render(
            self.verifier_reply_role, timeline=timeline,
            source_timing=source_timing(cell, times, check.fps, self.sample_unit),
            finding_form=", ".join(f'"{rid}": "<finding>"' for rid, _ in ids),
            moment_form=", ".join(f'"{rid}": [{{"offset_sec": <seconds>}}]' for rid, _ in ids))
        sampling = self.sampling()
        sampling["max_tokens"] = self.role_max_tokens("verifier")
        return ChatRequest(
            messages=(Message.text("system", self.prompt_set.render(
                          self.verifier_system_role if self.target_guided else "verifier_system_general")),
                      Message("user", (task + "\n", *self._verifier_visual(jpegs, as_video, times), "\n" + reply))),
            json_schema=request_schema(self.context.backend, REPORT_SCHEMA),
            purpose="verify", **sampling)

    def _send(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        if self.parallel:
            return self.chat_many(requests)
        return [self.chat_many([r])[0] for r in requests]

    def _ask_verifiers(self, ep: Episode, requests: list[ChatRequest]) -> list[StructuredReply]:
        """All verifier calls of a verify in one batch (sent the way ``parallel`` says); every malformed reply
        (a reply cut at the token limit included) gets up to ``json_retries`` repair turns, the repairs batched
        too."""
        return ask_json_many(self, requests, _report_valid, self.prompt_set.render("repair", form=REPORT_FORM),
                             ep.tally, self.retries, send=self._send)

    def _cells_frames(self, wanted: list[list[float]]) -> list[tuple[list[float], list[bytes]]]:
        """Frames of every cell of a verify in one pass over the video (one packet index, frames shared by
        overlapping cells decoded once): per cell, (absolute times, JPEGs)."""
        from senri.decode import encode_jpeg, read_frames

        flat = sorted({t for times in wanted for t in times})
        decoded: dict[float, tuple[float, bytes]] = {}
        for target, frame in zip(flat, read_frames(self.context.media.video, flat, short_side=self.short_side)):
            if frame.image is not None:
                decoded[target] = (float(frame.pts_s), encode_jpeg(frame.image))
        out = []
        for times in wanted:
            pts: list[float] = []
            jpegs: list[bytes] = []
            for t in times:
                # Two targets the decoder resolves to one frame would repeat it on the carrier: kept once, so a
                # cell's frames are strictly increasing in source time.
                if t in decoded and (not pts or decoded[t][0] > pts[-1]):
                    pts.append(decoded[t][0])
                    jpegs.append(decoded[t][1])
            out.append((pts, jpegs))
        return out

    def _verify(self, ep: Episode, raw_checks: Any) -> dict[str, Any]:
        q = ep.question
        checks, problems = validate_checks(raw_checks, self.duration_s, q.question, q.options)
        stripped, refused = validation_counts(checks, problems)
        ep.tally.count("stripped_checks", stripped)
        ep.tally.count("refused_checks", refused)
        all_cells = check_cells(checks, split=self.split_cells)
        cells, caps = cap_cells(all_cells, self.max_cells)
        coverage = window_coverage(checks, cells)
        requested_s, seen_s = requested_and_seen_s(checks, cells)
        ep.tally.count("capped_cells", len(all_cells) - len(cells))
        ep.tally.count("cell_s_requested", round(requested_s))
        ep.tally.count("cell_s_seen", round(seen_s))
        ep.checks += len(checks)
        ep.cells += len(cells)
        frames_per_cell = self._cells_frames([cell_times(c, checks[c.check].fps, checks[c.check].budget)
                                              for c in cells])
        jobs: list[tuple[Cell, Check, list[float], list[bytes]]] = []
        empty = 0
        for cell, (pts, jpegs) in zip(cells, frames_per_cell):
            if not jpegs:
                empty += 1
                continue
            jobs.append((cell, checks[cell.check], pts, jpegs))
            ep.frames_inspected += len(jpegs) if self.reads_frames else 0
        # Carriers are H.264-encoded per cell; encoding runs outside the GIL, so threads overlap it (3x on 2 cores).
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(jobs), os.cpu_count() or 1))) as pool:
            requests = list(pool.map(lambda job: self._verifier_request(job[1], job[0], job[2], job[3]), jobs))
        results = self._ask_verifiers(ep, requests) if requests else []
        ep.verifier_calls += len(requests)
        new, failures, reasoning = [], [], {}
        for (cell, check, pts, jpegs), reply in zip(jobs, results):
            report_id = f"r{len(ep.reports) + 1}"
            report = read_report(report_id, cell.check, check, cell, reply.value, pts, reply.error,
                                 guided=self.target_guided)
            evidence = Evidence(report, self._evidence_of(report, pts, jpegs))
            ep.reports.append(evidence)
            new.append(evidence)
            if reply.error:
                failures.append(f"{report_id}: {reply.error}"
                                + (f" after {reply.attempts} attempts" if reply.attempts > 1 else ""))
            if reply.reasoning:
                reasoning[report_id] = reply.reasoning
        # What the controller hears about its action in the next round.
        ep.feedback_action = "verify"
        feedback = list(problems)
        for check in checks:
            feedback += [f"check {check.position}: {a}" for a in check.adjustments if not a.startswith("B from preset")]
        for c in caps:
            position = checks[c["check"]].position
            seen = "; ".join(f"window [{w['window'][0]:g}, {w['window'][1]:g}]: {w['seen_s']:g} of "
                             f"{w['requested_s']:g} s seen" for w in coverage if w["check"] == position)
            feedback.append(f"check {position}: {c['cells']} cells, capped to {c['kept']} spread evenly "
                            f"(at most {self.max_cells} verifier cells per verify); {seen}")
        if empty:
            feedback.append(f"{empty} cell(s) had no decodable frame and were skipped")
        feedback += [f"verifier {f}" for f in failures]
        ep.feedback = feedback
        record: dict[str, Any] = {
            "checks": [{"target_context": c.target_context, "objective": c.objective,
                        "requirements": list(c.requirements), "windows": [list(w) for w in c.windows],
                        "candidate_refs": list(c.candidate_refs), "fps": c.fps, "budget": c.budget,
                        "adjustments": list(c.adjustments)} for c in checks],
            "problems": problems, "cell_caps": caps, "cells_asked": len(all_cells), "coverage": coverage,
            "cells": [[round(c.start_s, 3), round(c.end_s, 3)] for c in cells],
            "verifier_input": self._verifier_input_name() if requests else None,
            "repairs": sum(1 for r in results if r.attempts > 1), "failures": failures,
            "reports": [e.report.summary() for e in new], "report_records": [e.report.record() for e in new],
            "verifier_calls": [reply.record("verify") for reply in results], "feedback": feedback}
        if reasoning:
            record["verifier_reasoning"] = reasoning
        if self.working_memory and new:
            record["working_memory"] = self._update_memory(ep, new)
        return record

    def _update_memory(self, ep: Episode, new: list[Evidence]) -> dict[str, Any]:
        """The updater's call over the pool (retained + latest batch), sized to the model's limits first
        (:data:`TRIM_RULE`; a report left out of the request cannot be selected). When the update fails (its
        reply unusable after the repair, the call rejected, or nothing fits), the note stays, the pool's most
        recent reports are kept within the bound (newest first), the controller is told, and the failure is
        counted ``failed_memory_updates``: a failed update never drops the batch."""
        pool = {e.report.report_id: e for e in ep.retained + new}

        def valid(obj: dict) -> dict | None:
            note, ids = obj.get("note"), obj.get("selected_report_ids")
            if not isinstance(note, str) or not isinstance(ids, list):
                return None
            return {"note": note.strip(), "ids": [str(i).strip() for i in ids]}

        q = ep.question

        def messages_for(shown: list[Evidence]) -> tuple[Message, ...]:
            text = self.prompt_set.render(
                "updater", memories=self._memories_text(ep), question=question_block(q.question, q.options),
                note=ep.note or "(empty)", reports="\n".join(e.report.summary() for e in shown),
                max_reports=self.wm_reports)
            parts = self._evidence_parts(shown) if self.updater_images else []
            return (Message.text("system", self.prompt_set.render("updater_system")), Message("user", (*parts, text)))

        offered = [Evidence(e.report, e.frames[: self.wm_frames]) for e in pool.values()]
        shown, trim = self._fit(offered, messages_for, "updater", ep.tally)
        if trim is not None and trim.get("still_over"):
            entry: dict[str, Any] = {"call": "update", "attempts": 0, "reply": None, "trim": trim,
                                     "failure": f"not sent: over the model's limits ({trim['still_over']})"}
            ep.trace["calls"].append(entry)
            return self._memory_update_failed(ep, pool, entry["failure"])
        reply = ask_json(self, messages_for(shown), UPDATE_SCHEMA, valid,
                         self.prompt_set.render("repair", form=UPDATE_FORM), "update", ep.tally, self.retries,
                         max_tokens=self.role_max_tokens("updater"))
        entry = reply.record("update")
        if trim is not None:
            entry["trim"] = trim
        ep.trace["calls"].append(entry)
        if reply.value is None:
            return self._memory_update_failed(ep, pool, reply.error or "malformed")
        selectable = {e.report.report_id for e in shown}
        unknown = [i for i in reply.value["ids"] if i not in selectable]
        picked = list(dict.fromkeys(i for i in reply.value["ids"] if i in selectable))
        selected, truncated = picked[: self.wm_reports], picked[self.wm_reports:]
        ep.note = reply.value["note"]
        # Copied unchanged: the report as the verifier wrote it, its first evidence frames as decoded.
        ep.retained = [Evidence(pool[i].report, pool[i].frames[: self.wm_frames]) for i in selected]
        return {"note": ep.note, "kept": selected, "truncated": truncated, "dropped_unknown_ids": unknown}

    def _memory_update_failed(self, ep: Episode, pool: dict[str, Evidence], error: str) -> dict[str, Any]:
        """The pool's newest reports within the bound become the working memory (the note stays as it was);
        the controller hears it next round and the failure is counted."""
        recent = sorted(pool.values(), key=_age, reverse=True)[: self.wm_reports]
        ep.retained = [Evidence(e.report, e.frames[: self.wm_frames]) for e in recent]
        kept = [e.report.report_id for e in ep.retained]
        ep.tally.count("failed_memory_updates")
        ep.feedback.append(f"working memory update failed ({error}): the note is unchanged and the "
                           f"{len(kept)} most recent reports are kept ({', '.join(kept) or 'none'})")
        return {"kept": kept, "failure": error}

    # -------------------------------------------------------------------------------------------- loop
    def answer(self, question: Question) -> MethodAnswer:
        """Up to ``max_rounds`` controller rounds (search / verify / answer), then — SENRI-Agent's protocol —
        one forced answer round whose letter is the answer; or, for a workflow with its own QA call
        (:attr:`qa_call`, MAGIC-Video's), that QA call once the rounds end, however they ended (an answer
        decision, the last round spent, or an invalid reply under ``invalid_reply: answer``): the releases always
        run it, so no question of theirs ends without its QA call."""
        started = time.monotonic()
        ep = Episode(question)
        ep.tally.book_store(self.store.question_counts())
        letter, text = None, None
        last_round = self.max_rounds + (1 if self.forced_round else 0)
        ended_by = "rounds"
        errors = 0
        controller_errors: list[str] = []
        for round_no in range(1, last_round + 1):
            forced = self.forced_round and round_no == last_round
            ep.round_context = self._round_context(ep)
            booked = len(ep.tally.errors)
            reply, trim = self._controller(ep, round_no, forced)
            controller_errors += ep.tally.errors[booked:]
            ep.tally.did("rounds")
            entry = reply.record("control")
            if trim is not None:
                entry["trim"] = trim
            ep.trace["calls"].append(entry)
            step: dict[str, Any] = {"round": round_no, "forced": forced}
            if ep.feedback:
                step["feedback_shown"] = list(ep.feedback)
                ep.feedback = []
            if reply.value is None and forced and not self.qa_call:
                # The last chance: the project's answer parser reads the replies, latest first ("C, I guess").
                parsed = next((p for p in (parse_answer(t, question.options) for t in reversed(reply.texts))
                               if p.ok), None)
                if parsed is not None:
                    letter, text = parsed.letter, reply.text
                    step.update(action="answer", recovered_by_parser=parsed.rule)
                    ep.tally.count("forced_answers")
                    ep.tally.count("forced_recovered")
                    ep.trace["rounds"].append(step)
                    ended_by = "answer"
                    break
            if reply.value is None:
                step["action"] = "malformed"
                ep.trace["rounds"].append(step)
                text = reply.text
                if self.invalid_reply == "answer":  # the releases' parsers (release_reading)
                    reading = release_reading(reply)
                    step["read_as"] = reading
                    if reading == "answer":
                        ended_by = "invalid_reply"
                        break
                    errors += 1
                    if errors >= self.max_errors:
                        ended_by = "errors"
                        break
                    continue
                # The next round says what was wrong, so greedy decoding does not repeat it unchanged.
                ep.feedback = [_what_was_wrong(reply, self._actions_text(forced, round_no)[0], self.store.memory_types,
                                               question.letters)]
                ep.feedback_action = "reply"
                ep.invalid_reply = " ".join(split_reasoning(reply.text)[0].split())[:200]
                continue
            action = reply.value["action"]
            step["action"] = action
            if reply.value.get("rationale"):
                step["rationale"] = reply.value["rationale"]
            if action == "answer":
                letter, text = reply.value["answer"], reply.text
                if forced:
                    ep.tally.count("forced_answers")
                ep.trace["rounds"].append(step)
                ended_by = "answer"
                break
            step.update(self._search(ep, reply.value["query"], reply.value.get("memory_type")) if action == "search"
                        else self._verify(ep, reply.value["checks"]))
            ep.trace["rounds"].append(step)
        if self.qa_call:
            booked = len(ep.tally.errors)
            letter, text = self._final_answer(ep, letter, text)
            if controller_errors and len(ep.tally.errors) == booked:
                # The QA call answered: a failed controller call only spent its round (the releases log it and
                # go on), it is the trace's, not the question's error.
                ep.tally.errors[:] = [e for e in ep.tally.errors if e not in controller_errors]
                ep.trace["controller_errors"] = controller_errors
        for name, n in (("checks", ep.checks), ("cells", ep.cells), ("frames_seen", ep.frames_inspected),
                        ("answered_without_retrieval", int(not ep.retrieved))):
            ep.tally.did(name, n)
        ep.trace.update(
            n_rounds=len(ep.trace["rounds"]), actions=[r["action"] for r in ep.trace["rounds"]], ended_by=ended_by,
            checks=ep.checks, cells=ep.cells, verifier_calls=ep.verifier_calls,
            frames_inspected=ep.frames_inspected, retriever=self.store.retriever, note=ep.note,
            wall_s=round(time.monotonic() - started, 3),
            tokens=ep.tally.prompt_tokens + ep.tally.completion_tokens,
        )
        return MethodAnswer(letter, text, letter is not None, ep.tally, ep.trace)

    def _final_answer(self, ep: Episode, proposed: str | None, text: str | None) -> tuple[str | None, str | None]:
        """A workflow's own QA call (:meth:`_answer_request`) once the rounds end: its reply, read by the answer
        parser, is the answer (the controller's letter, if it gave one, is kept in the trace as ``proposed``;
        an unparsable or failed QA reply is no answer, counted wrong)."""
        request = self._answer_request(ep, proposed)
        if request is None:
            return proposed, text
        response = self.chat_many([request])[0]
        ep.tally.add(request, response)
        ep.tally.did("qa_calls")
        parsed = parse_answer(response.text, ep.question.options) if not response.error else None
        ep.trace["calls"].append({**call_record(request, response), "call": "answer"})
        ep.trace["proposed"] = proposed
        return (parsed.letter if parsed is not None and parsed.ok else None), response.text


class SenriAgent(MemorySearch):
    can_verify = True
    default_prompts = "senri_agent"

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        self.refuse_missing_capabilities()

    @classmethod
    def capability_problems(cls, method: str, spec: Mapping[str, Any], model: str,
                            capabilities: Capabilities | None,
                            roles: Mapping[str, tuple[str, Capabilities | None]] | None = None) -> list[str]:
        """The verifiers look at frames: images, or video under ``verifier_input`` auto / video."""
        if capabilities is None or not (capabilities.images or capabilities.video):
            return [f"method {method!r}: its verifiers look at frames, but model {model!r} takes neither images "
                    f"nor video; run it with a vision-language model (memory_search is the text-only workflow)"]
        wanted = str(spec.get("verifier_input", "auto"))
        if wanted == "video" and not capabilities.video:
            return [f"method {method!r}: verifier_input video, but model {model!r} takes no video; use "
                    f"verifier_input images or auto"]
        if wanted == "images" and not capabilities.images:
            return [f"method {method!r}: verifier_input images, but model {model!r} takes no images; use "
                    f"verifier_input video or auto"]
        return []


class SenriAgentNoTargetGuidance(SenriAgent):
    target_guided = False


class SenriAgentNoParallelVerifiers(SenriAgent):
    split_cells = False


class SenriAgentNoWorkingMemory(SenriAgent):
    working_memory = False

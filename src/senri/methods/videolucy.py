"""``videolucy``: hierarchical memory with iterative backtracking (VideoLucy, Algorithm 1; appendix Tables 5–7).

1. The coarse memory of the whole video comes from the memory stage (question-independent, shared).
2. Sparse init (Table 5): the localization agent reads the coarse memory and, only when very confident, names
   the ``sparse_periods`` (3) most relevant periods, each kept with its two neighbours; otherwise the whole
   video is kept (the paper's bias).
3. The answering agent (Table 7) replies ``{Confidence, Answer, Time Period, Reason}``. While it is not
   confident and fewer than ``max_iterations`` (5) iterations ran: one localization+instruction call
   (Table 6) names the single most relevant period not yet searched and an instruction for the captioner;
   the period is re-captioned at its own depth with the instruction (a failed re-caption keeps the old
   text) and split into the next depth's clips, captioned with the same instruction; the answering agent
   replies again.
4. After the cap (or when every period was searched), one forced answer. ``forced_answer: full_memory``
   (default, as the released code): a must-answer call over the full coarse memory plus every fine and
   ultra-fine caption gathered; ``current_memory`` (the paper read literally): the cap-th answer call is
   itself forced, over the current memory. ``trace.forced`` is true only when a forced call was made.

Options from the released code (github.com/Zplusdragon/VideoLucy @f7e4730, ``demo.py``), off by default
(the paper's Algorithm 1): ``answer_full_coarse_first`` (answer over the full coarse memory before sparse
init; a confident answer ends there) and ``ordinal_whole_video`` (questions with ordinal words keep the whole
video without a localization call). ``reason_first`` (off: the paper's key order) makes the answering agent
write ``Reason`` before ``Confidence`` and ``Answer`` (``answer_reason_first.txt``, ``forced_reason_first.txt``
and the schemas): the paper's agent is a reasoning model that thinks before its JSON, so its instruction to
check that the reasoning supports the answer (A6) holds; a model without a thinking phase that writes the
letter first reasons after the fact. Prompts are files in ``config/prompts/videolucy/`` (``prompts_dir``
for your own wording): each role's instructions in its system file (with the video's duration), the memory
list first and the question last in the user message, so a server's prefix cache reuses the long shared part
across a video's questions. Completion limits per role come from ``max_tokens`` (capped by the model config's
``max_tokens_cap``); a thinking model's reasoning is cut off before the JSON is read and kept in the trace.

Memory depth (Fig. 6(a)): ``max_depth`` (``ultra_fine``, the default, is Algorithm 1) is the deepest level
backtracking may split a period into; a period at that depth is still re-captioned with the agent's instruction
but never split further (``coarse``: only coarse periods, refreshed). ``summary``, the figure's "rough summary
only" arm, answers from one model-written summary of the whole coarse memory (the released code's
summarisation step, ``summarize.txt`` in our words), made once per video and shown to the answering agent in
place of the memory list: one answer call, and the forced answer over the same summary when it is not
confident; no localization and no backtracking.

Call cap (appendix A.8, "at most 20 LLM calls"): ``max_llm_calls`` (null: uncapped, the paper's main runs)
bounds the agent model's calls per question, repairs and the summary call included, captioner calls not. The
last call is kept for the forced answer: a call that would leave no room for it is not made, the forced answer
is given over the memory gathered so far, the trace records the cap (``llm_call_cap``) and the question counts
as ``capped_llm_calls``.

Context guard (senri's; the paper has none): every agent request is sized against the model config's context
window before it is sent (:meth:`VideoLucy._fit`). Past it, the memory shown loses what :func:`fit_memory`'s
rule says (``context_trim: focus_then_coarse``: deeper captions outside the period searched last, earliest
first; then coarse captions shortened evenly), recorded on the call (``context_trim``) and counted
(``context_trims``), so a long VLM memory never costs the question its letter. The prompts' wording follows
the videos' viewpoint (``memory.viewpoint``: first-person only for egocentric videos).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import polars as pl

from senri.answers import letter_of, question_block, split_reasoning
from senri.backends.base import ChatRequest, ChatResponse, Message
from senri.backends.budget import overflow, request_limits
from senri.captioners.base import Clip
from senri.memory.hierarchy import (LEVELS, caption_health, choose_preset, deeper_instruction, described, keep_good_caption,
                          next_level, open_service, prompt_variant, row_context, split)
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.methods.structured import StructuredReply, ask_json, call_record
from senri.records import LETTERS, MemoryRow, Question, letters_in_words, read_table

_PERIOD = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
_PERIODS = {"type": "array", "items": _PERIOD}
#: The texts the prompts ask for when there is no period or answer (localize.txt, answer.txt): a
#: schema-constrained backend must be able to write them, so they are the "false" shape of each reply (_either).
NO_PERIODS, NO_TIME, NO_ANSWER = "No Time Periods.", "No Time", "No Answer"
_REASON = {"type": "string"}


def _either(yes: dict, no: dict, switch: str) -> dict:
    """The prompts' two reply shapes as one schema: ``switch`` true with ``yes``'s fields, or false with
    ``no``'s fixed texts. A constrained decoder then cannot write the contradictions a small model otherwise
    writes ("Confidence": true with "Answer": "No Answer"), each of which costs a repair call."""
    def shape(flag: bool, fields: dict) -> dict:
        properties = {switch: {"const": flag}, **fields, "Reason": _REASON}
        return {"type": "object", "properties": properties, "required": list(properties)}

    return {"anyOf": [shape(True, yes), shape(False, no)]}


LOCALIZE_SCHEMA = _either({"Time Period": {**_PERIODS, "minItems": 1}}, {"Time Period": {"const": NO_PERIODS}}, "Flag")
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"Time Period": _PERIOD, "Instruction": {"type": "string"}, "Reason": _REASON},
    "required": ["Time Period", "Instruction", "Reason"],
}


def answer_schema(letters: Sequence[str] = LETTERS) -> dict:
    """The answering agent's reply shapes, its ``Answer`` one of the question's ``letters``."""
    return _either({"Answer": {"type": "string", "enum": list(letters)}, "Time Period": _PERIODS},
                   {"Answer": {"const": NO_ANSWER}, "Time Period": {"const": NO_TIME}}, "Confidence")


def forced_schema(letters: Sequence[str] = LETTERS) -> dict:
    """The forced answer's reply shape, its ``Answer`` one of the question's ``letters``."""
    return {
        "type": "object",
        "properties": {"Answer": {"type": "string", "enum": list(letters)},
                       "Time Period": _PERIODS, "Reason": _REASON},
        "required": ["Answer", "Time Period", "Reason"],
    }


#: The shapes of a four-option (SENRI) question.
ANSWER_SCHEMA = answer_schema()
FORCED_SCHEMA = forced_schema()


def budgeted(schema: dict, limit: int, max_periods: int) -> dict:
    """``schema`` bounded so a constrained reply always closes its JSON within ``limit`` completion tokens
    (a reply cut off mid-JSON is unreadable): free strings get at most limit − 64 characters (at least 32),
    period lists at most (limit − 64) // 24 periods (at least 1, at most ``max_periods``). At the default
    limits (8,192) these bounds are far beyond any reply; they bite only for a small model run with a small
    limit (the demo)."""
    chars = max(32, limit - 64)
    periods_fit = max(1, min(max_periods, (limit - 64) // 24))

    def bound(spec: dict) -> dict:
        if "anyOf" in spec:  # alternatives (reply shapes; a list of periods or a fixed text): bound each
            return {**spec, "anyOf": [bound(s) for s in spec["anyOf"]]}
        if spec.get("type") == "object":
            return {**spec, "properties": {name: bound(sub) for name, sub in spec["properties"].items()}}
        if spec.get("type") == "string" and "enum" not in spec:
            return {**spec, "maxLength": chars}
        if spec.get("type") == "array" and spec.get("items") == _PERIOD:
            return {**spec, "maxItems": periods_fit}
        return spec

    return bound(schema)


LOCALIZE_FORM = '{"Flag": true|false, "Time Period": [[start, end], ...] or "No Time Periods.", "Reason": "..."}'
SEARCH_FORM = '{"Time Period": [start, end], "Instruction": "...", "Reason": "..."}'


def answer_form(letters: Sequence[str] = LETTERS) -> str:
    """The answering reply's form in a repair prompt, naming the question's letters."""
    return ('{"Confidence": true|false, "Answer": "' + "|".join(letters) + '" or "No Answer", '
            '"Time Period": [[start, end], ...] or "No Time", "Reason": "..."}')


def forced_form(letters: Sequence[str] = LETTERS) -> str:
    """The forced reply's form in a repair prompt, naming the question's letters."""
    return '{"Answer": "' + "|".join(letters) + '", "Time Period": [[start, end], ...], "Reason": "..."}'


ANSWER_FORM = answer_form()
FORCED_FORM = forced_form()
FORCED_MODES = ("full_memory", "current_memory")
#: The ``max_depth`` arms of Fig. 6(a), shallowest first: a summary of the coarse memory, then each level.
SUMMARY = "summary"
DEPTHS = (SUMMARY, *LEVELS)


class CallCapReached(Exception):
    """Raised before an agent call that ``max_llm_calls`` leaves no room for; :meth:`VideoLucy.answer` then
    gives the forced answer (the call the cap keeps for it)."""


def reason_first(schema: dict) -> dict:
    """``schema`` with ``Reason`` as the first key of every reply shape: a constrained decoder then writes the
    reasoning before the letter (``reason_first``)."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [reason_first(s) for s in schema["anyOf"]]}
    properties = {"Reason": schema["properties"]["Reason"],
                  **{k: v for k, v in schema["properties"].items() if k != "Reason"}}
    return {**schema, "properties": properties, "required": list(properties)}


def reason_first_form(form: str) -> str:
    """A repair prompt's reply form with ``"Reason"`` moved to the front."""
    return "{" + '"Reason": "...", ' + form[1:].replace(', "Reason": "..."', "")


#: Ordinal words that make the released code skip sparse init (``utils.contains_ordinal_number``), restated.
ORDINALS = re.compile(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
                      r"(thir|four|fif|six|seven|eigh|nine)teenth|(twen|thir|for|fif|six|seven|eigh|nine)tieth|"
                      r"hundredth|last|\d+(st|nd|rd|th))\b", re.IGNORECASE)
_NUMBER_PAIR = re.compile(r"(-?\d+(?:\.\d+)?)\s*s?\s*(?:,|–|-|to)\s*(-?\d+(?:\.\d+)?)")


@dataclass
class Episode:
    """What one question has gathered: its current memory and, under ``max_depth: summary``, the video's summary
    (what a forced answer at the call cap is given)."""

    memory: list["Entry"]
    summary: str | None = None


@dataclass
class Entry:
    """One period of the current memory: a caption at a depth, and whether backtracking searched it."""

    row: MemoryRow
    searched: bool = False

    @property
    def key(self) -> tuple[str, float, float]:
        return self.row.level, self.row.start_s, self.row.end_s

    def label(self) -> str:
        return f"{self.row.level} {self.row.start_s:g}–{self.row.end_s:g}s"


def seconds(value: float) -> str:
    return f"{round(float(value), 1):g}"


def memory_list(entries: list[Entry]) -> str:
    """The memory list the agents read: one line per period, ``[start, end]`` in seconds (the form their JSON
    uses), deeper levels indented under the period they refine, in time order. A period whose caption failed
    is left out (its backend error is not the video's; the question books it as ``failed_captions``)."""
    lines = []
    for entry in sorted(entries, key=lambda e: (e.row.start_s, LEVELS.index(e.row.level), e.row.end_s)):
        row = entry.row
        if not described(row):
            continue
        context = row_context(row.__dict__)
        text = row.text
        lines.append(f"{'    ' * LEVELS.index(row.level)}[{seconds(row.start_s)}, {seconds(row.end_s)}] "
                     f"({row.level.replace('_', '-')}{'; ' + context if context else ''}): {text}")
    return "\n".join(lines)


def caption_label(row: MemoryRow) -> str:
    """A caption as the trace names it: level and span, and its error or its cut where it has one."""
    note = f": {row.error}" if row.error else (": cut at the token limit" if caption_health([row])[0] else "")
    return f"{row.level} {row.start_s:g}–{row.end_s:g}s{note}"


def periods(value: Any) -> list[tuple[float, float]]:
    """Time periods as the agents write them: ``[s, e]``, ``[[s, e], …]``, or text like ``"(60, 90)"``; the
    prompts' "no period" texts ("No Time Periods.", "No Time") give none."""
    if isinstance(value, str):
        return [(float(a), float(b)) for a, b in _NUMBER_PAIR.findall(value)]
    if isinstance(value, (list, tuple)):
        if len(value) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return [(float(value[0]), float(value[1]))]
        return [p for item in value for p in periods(item)]
    return []


def _field(obj: dict, name: str) -> Any:
    """A JSON field by the protocol's name, tolerating case and ``_`` for spaces (``time_period``)."""
    wanted = name.lower().replace(" ", "_")
    return next((v for k, v in obj.items() if str(k).lower().replace(" ", "_") == wanted), None)


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def python_literal_objects(text: str) -> list[dict]:
    """Dicts written as Python literals (``True``, tuples), as the released code's parser accepts them."""
    found = []
    for span in re.findall(r"\{[^{}]*\}", text):
        try:
            value = ast.literal_eval(span.replace("true", "True").replace("false", "False"))
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Intersection over union of period ``a`` with a listed period ``b`` (0 when they do not meet); a period
    of no length (a moment) inside ``b`` scores a small positive value, so it still names ``b``."""
    if a[1] <= a[0]:
        return 1e-6 if b[0] <= a[0] < b[1] else 0.0
    inter = min(a[1], b[1]) - max(a[0], b[0])
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if inter > 0 and union > 0 else 0.0


def best_entry(period: tuple[float, float], entries: list[Entry]) -> int | None:
    """The entry a period names: the one it overlaps most (an exact copy overlaps 1.0), or None."""
    scored = [(overlap(period, (e.row.start_s, e.row.end_s)), -LEVELS.index(e.row.level), i)
              for i, e in enumerate(entries)]
    best = max(scored, default=(0.0, 0, None))
    return best[2] if best[0] > 0 else None


TRIM_RULES = ("focus_then_coarse", "off")
#: The mark a caption shortened to fit the context ends with (the agents read that it goes on).
CUT_MARK = " […]"


def cut(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters (then :data:`CUT_MARK`), or whole when it is that short."""
    return text if len(text) <= chars else text[:chars].rstrip() + CUT_MARK


def inside(entry: Entry, focus: tuple[float, float] | None) -> bool:
    return focus is not None and focus[0] <= entry.row.start_s and entry.row.end_s <= focus[1]


@dataclass
class Fitted:
    """A call's messages after the context guard: ``messages`` None when nothing fits; ``trim`` is what the
    call's trace entry records (None when the request fitted as it was)."""

    messages: tuple[Message, Message] | None
    max_tokens: int
    trim: dict[str, Any] | None = None
    trimmed: bool = False


def fit_memory(entries: list[Entry], build: Callable[[list[Entry]], tuple[Message, Message]],
               fits: Callable[[tuple[Message, Message]], bool], focus: tuple[float, float] | None
               ) -> tuple[tuple[Message, Message] | None, dict[str, Any]]:
    """The memory a call can carry, by VideoLucy's trimming rule (``context_trim: focus_then_coarse``):

    1. deeper (fine, ultra-fine) captions outside the period in focus (the one backtracking searched last)
       are left out one by one, the earliest gathered first;
    2. then every coarse caption is shortened to one common length (the longest that fits), cut at its end
       with " […]": each period keeps its opening, none is dropped, and the agents still see the whole
       video's timeline;
    3. only if coarse captions cut to nothing still do not fit, the captions in focus are shortened the same way.

    Returns the messages (None when even that does not fit) and what was done, for the call's trace."""
    shown = list(entries)
    record: dict[str, Any] = {"dropped": [], "shortened": {}}
    for victim in [e for e in entries if e.row.level != "coarse" and not inside(e, focus)]:
        shown = [e for e in shown if e is not victim]
        record["dropped"].append(victim.label())
        if fits(build(shown)):
            return build(shown), record
    for step, chosen in (("coarse", lambda e: e.row.level == "coarse"),
                         ("in_focus", lambda e: e.row.level != "coarse")):
        targets = [i for i, e in enumerate(shown) if chosen(e) and e.row.text]
        if not targets:
            continue

        def shortened(chars: int) -> list[Entry]:
            return [dataclasses.replace(e, row=dataclasses.replace(e.row, text=cut(e.row.text, chars)))
                    if i in targets else e for i, e in enumerate(shown)]

        low, high = 0, max(len(shown[i].row.text or "") for i in targets)
        if fits(build(shortened(low))):
            while low < high:  # the longest common length that fits
                middle = (low + high + 1) // 2
                low, high = (middle, high) if fits(build(shortened(middle))) else (low, middle - 1)
            record["shortened"][step] = {"chars": low, "captions": sum(len(shown[i].row.text) > low for i in targets)}
            return build(shortened(low)), record
        shown = shortened(0)
        record["shortened"][step] = {"chars": 0, "captions": len(targets)}
    return None, record


class VideoLucy(Method):
    approach = "persistent_memory"
    uses_model = True
    uses_memory = True
    recaptions = True

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        if context.memory is None or context.media is None or context.memory_config is None:
            raise ValueError(f"method {context.method_name!r} needs the video's memory (memory stage output)")
        config = context.method_config
        self.max_iterations = int(config.get("max_iterations", 5))
        self.sparse_periods = int(config.get("sparse_periods", 3))
        self.retries = int(config.get("json_retries", 1))
        self.forced_mode = str(config.get("forced_answer", "full_memory"))
        if self.forced_mode not in FORCED_MODES:
            raise ValueError(f"config.method.{context.method_name}.forced_answer: {self.forced_mode!r} is not one of "
                             f"{', '.join(FORCED_MODES)}")
        self.full_coarse_first = bool(config.get("answer_full_coarse_first", False))
        self.ordinal_whole_video = bool(config.get("ordinal_whole_video", False))
        self.reason_first = bool(config.get("reason_first", False))
        self.trim_rule = str(config.get("context_trim", "focus_then_coarse"))
        if self.trim_rule not in TRIM_RULES:
            raise ValueError(f"config.method.{context.method_name}.context_trim: {self.trim_rule!r} is not one of "
                             f"{', '.join(TRIM_RULES)}")
        self.min_reply_tokens = int(config.get("min_reply_tokens", 512))
        self.max_depth = str(config.get("max_depth", LEVELS[-1]))
        if self.max_depth not in DEPTHS:
            raise ValueError(f"config.method.{context.method_name}.max_depth: {self.max_depth!r} is not one of "
                             f"{', '.join(DEPTHS)}")
        cap = config.get("max_llm_calls")
        self.max_llm_calls = None if cap is None else int(cap)
        if self.max_llm_calls is not None and self.max_llm_calls < 1:
            raise ValueError(f"config.method.{context.method_name}.max_llm_calls: {cap!r} is below 1 (the forced "
                             f"answer needs one call); null leaves the calls uncapped")
        #: The video's summary (``max_depth: summary``), made by the first question that needs it.
        self.video_summary: str | None = None
        #: The period backtracking searched last (the context guard keeps its captions longest).
        self.focus: tuple[float, float] | None = None
        # The video's viewpoint (memory.viewpoint) picks the wording: first-person only for egocentric videos.
        self.templates = self.prompts(prompt_variant(context.memory_config["memory"]))
        memory = read_table(context.memory, MemoryRow)
        self.coarse = [MemoryRow(**row) for row in memory.filter(pl.col("level") == "coarse").sort("start_s")
                       .select(list(MemoryRow.__dataclass_fields__)).iter_rows(named=True)]
        if not self.coarse:
            raise ValueError(f"{context.memory}: the memory holds no coarse caption")
        self.memory_settings = context.memory_config["memory"]
        self.preset, self.levels = choose_preset(self.memory_settings, context.video.duration_s)
        self.duration = seconds(context.video.duration_s)
        self.service = open_service(context.memory_config, context.media, context.caption_cache)

    def close(self) -> None:
        self.service.close()

    def summary(self) -> str:
        stats = self.service.stats
        return (f"captioner {self.service.name}: {stats.computed} caption(s) computed, {stats.reused} reused from "
                f"the caption cache, {stats.failed} failed, {stats.unsent} failed before any call ({stats.calls} "
                f"captioner call(s)); {stats.frames} frame(s) read, {stats.dropped_frames} dropped by the frame "
                f"cap; preset {self.preset}")

    # ------------------------------------------------------------------------------------------ calls
    def _ask(self, role: str, user_role: str, values: dict[str, Any], entries: list[Entry], schema: dict, valid,
             form: str, purpose: str, limit_role: str, tally: CallTally) -> StructuredReply:
        """One structured call over the memory ``entries``: JSON (or, as the released code's parser also takes,
        a Python-literal dict), reasoning cut off first; an unreadable reply gets up to ``json_retries`` repair
        turns (repair.txt). The request is sized before it is sent (:meth:`_fit`); a trim is recorded on the
        call's trace entry and counted (``context_trims``). Under ``max_llm_calls`` a call the cap leaves no
        room for raises :class:`CallCapReached`, and its repairs are bounded by the calls left."""
        retries = self._retries_within_cap(tally, forced=purpose == "answer:forced")
        fitted = self._fit(role, user_role, values, entries, self.role_max_tokens(limit_role))
        if fitted.messages is None:
            reply = StructuredReply(None, "", 0, error="request does not fit the model's context even after trimming")
        else:
            schema = budgeted(schema, fitted.max_tokens, self.sparse_periods if role == "localize" else 9)
            reply = ask_json(self, fitted.messages, schema, valid, self.templates.render("repair", form=form),
                             purpose, tally, retries, max_tokens=fitted.max_tokens,
                             fallback=python_literal_objects, send=self._send_sized)
        reply.context_trim = fitted.trim
        if fitted.trimmed:
            tally.count("context_trims")
        return reply

    @staticmethod
    def agent_calls(tally: CallTally) -> int:
        """The agent model's calls so far on this question (the captioner's are booked apart, at the end)."""
        return tally.n_llm_calls + tally.n_vlm_calls

    def _retries_within_cap(self, tally: CallTally, forced: bool) -> int:
        """The repair turns the next call may make: ``json_retries``, fewer where ``max_llm_calls`` leaves less
        room; a call other than the forced answer keeps the cap's last call free for it, and raises
        :class:`CallCapReached` when that leaves it none."""
        if self.max_llm_calls is None:
            return self.retries
        room = self.max_llm_calls - self.agent_calls(tally) - (0 if forced else 1)
        if room < 1 and not forced:
            raise CallCapReached
        return max(0, min(self.retries, room - 1))

    def _fit(self, role: str, user_role: str, values: dict[str, Any], entries: list[Entry], limit: int) -> Fitted:
        """The call's messages and completion limit, sized against the model config's context window
        (:func:`senri.backends.budget.overflow`, prompt tokens by the backend's tokenizer where it has one).
        A prompt that leaves less than the role's limit but at least ``min_reply_tokens`` (or the limit, if
        smaller) keeps its memory and gets the room left as its limit; one that leaves less loses memory by
        :func:`fit_memory`'s rule (``context_trim: off`` sends it as it is, for the engine to reject)."""
        def build(shown: list[Entry]) -> tuple[Message, Message]:
            return self._messages(role, user_role, {**values, "memory": memory_list(shown)})

        messages = build(entries)
        backend = self.context.backend
        context = request_limits(backend.config).context_tokens if backend is not None else None
        if context is None or self.trim_rule == "off":
            return Fitted(messages, limit)
        reserve = min(limit, self.min_reply_tokens)

        def fits(candidate: tuple[Message, Message]) -> bool:
            return overflow(backend, ChatRequest(messages=candidate, max_tokens=reserve)) is None

        def room(candidate: tuple[Message, Message]) -> int:
            return context - backend.count_tokens(ChatRequest(messages=candidate))

        before = room(messages)
        if before >= limit:
            return Fitted(messages, limit)
        if fits(messages):
            return Fitted(messages, before, {"context_tokens": context, "max_tokens": before,
                                             "role_max_tokens": limit})
        trimmed, record = fit_memory(entries, build, fits, self.focus)
        record = {"rule": self.trim_rule, "context_tokens": context, "prompt_tokens_before": context - before,
                  **record, "focus": None if self.focus is None else [seconds(t) for t in self.focus]}
        if trimmed is None:
            return Fitted(None, limit, {**record, "fits": False})
        left = room(trimmed)
        return Fitted(trimmed, min(limit, left), {**record, "prompt_tokens_after": context - left,
                                                  "max_tokens": min(limit, left)}, trimmed=True)

    def _send_sized(self, batch: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Send ``batch``, each request's completion limit lowered to the context room its prompt leaves (a
        repair turn carries the first reply too, so it can need a lower limit than the first call)."""
        backend = self.context.backend
        context = request_limits(backend.config).context_tokens
        sized = []
        for request in batch:
            if context is not None and self.trim_rule != "off" and overflow(backend, request) is not None:
                room = context - backend.count_tokens(request)
                if room > 0:
                    request = dataclasses.replace(request, max_tokens=min(request.max_tokens, room))
            sized.append(request)
        return self.chat_many(sized)

    def _ask_answering(self, role: str, values: dict[str, Any], memory: list[Entry], schema: dict, valid, form: str,
                       purpose: str, tally: CallTally) -> StructuredReply:
        """An answering call (``answer`` or ``forced``), in the paper's key order or, with ``reason_first``,
        from the ``<role>_reason_first`` prompt with ``Reason`` first in its schema and repair form."""
        user_role = f"{role}_user"
        if self.reason_first:
            role, schema, form = f"{role}_reason_first", reason_first(schema), reason_first_form(form)
        return self._ask(role, user_role, values, memory, schema, valid, form, purpose, "answer", tally)

    def _messages(self, role: str, user_role: str, values: dict[str, Any]) -> tuple[Message, Message]:
        """One system prompt for every role, then the memory list, then the role's task, then the question.
        Calls over the same memory share everything up to the task — an iteration's answer and search calls,
        a video's sparse-init calls — so llama.cpp's prompt cache and vLLM's prefix cache evaluate the memory
        once; a new deeper caption keeps the prefix up to where it is inserted."""
        values = {"duration": self.duration, "n_periods": self.sparse_periods, **values}
        listed, summary = values.pop("memory"), values.pop("summary", None)
        # max_depth: summary — the video's summary stands in for the memory list
        memory = (self.templates.render("memory", memory=listed) if summary is None
                  else self.templates.render("summary_memory", summary=summary))
        user = "\n\n".join((memory, self.templates.render(role, **values), self.templates.render(user_role, **values)))
        return Message.text("system", self.templates.render("system", **values)), Message.text("user", user)

    def _question(self, question: Question) -> str:
        return question_block(question.question, question.options)

    def _localize(self, question: Question, tally: CallTally) -> StructuredReply:
        entries = [Entry(row) for row in self.coarse]

        def valid(obj: dict) -> dict | None:
            flag = _bool(_field(obj, "Flag"))
            if flag is None:
                return None
            if not flag:
                return {"flag": False, "periods": []}
            picked = [best_entry(p, entries) for p in periods(_field(obj, "Time Period"))]
            picked = list(dict.fromkeys(i for i in picked if i is not None))[: self.sparse_periods]
            return {"flag": True, "periods": picked} if picked else None

        return self._ask("localize", "localize_user", {"question": self._question(question)}, entries,
                         LOCALIZE_SCHEMA, valid, LOCALIZE_FORM, "localize", "localize", tally)

    def _answer(self, question: Question, memory: list[Entry], tally: CallTally, purpose: str,
                summary: str | None = None) -> StructuredReply:
        def valid(obj: dict) -> dict | None:
            confidence = _bool(_field(obj, "Confidence"))
            letter = letter_of(_field(obj, "Answer"), question.letters)
            if confidence is None or (confidence and letter is None):
                return None
            return {"confidence": confidence, "answer": letter, "time_period": periods(_field(obj, "Time Period")),
                    "reason": str(_field(obj, "Reason") or "")}

        return self._ask_answering("answer", self._answer_values(question, summary), memory,
                                   answer_schema(question.letters), valid, answer_form(question.letters), purpose,
                                   tally)

    def _answer_values(self, question: Question, summary: str | None) -> dict[str, Any]:
        return {"question": self._question(question), "letters": letters_in_words(question.letters),
                **({"summary": summary} if summary is not None else {})}

    def _forced(self, question: Question, memory: list[Entry], tally: CallTally,
                summary: str | None = None) -> StructuredReply:
        def valid(obj: dict) -> dict | None:
            letter = letter_of(_field(obj, "Answer"), question.letters)
            if letter is None:
                return None
            return {"confidence": False, "answer": letter, "time_period": periods(_field(obj, "Time Period")),
                    "reason": str(_field(obj, "Reason") or "")}

        return self._ask_answering("forced", self._answer_values(question, summary), memory,
                                   forced_schema(question.letters), valid, forced_form(question.letters),
                                   "answer:forced", tally)

    def _search(self, question: Question, memory: list[Entry], tally: CallTally) -> StructuredReply:
        def valid(obj: dict) -> dict | None:
            found = periods(_field(obj, "Time Period"))
            instruction = _field(obj, "Instruction")
            if not found or not isinstance(instruction, str) or not instruction.strip():
                return None
            # Matched against every listed period first: naming an already-searched one is an invalid reply (it
            # goes to the repair turn), never silently one of its deeper clips.
            index = best_entry(found[0], memory)
            if index is None or memory[index].searched:
                return None
            return {"entry": index, "instruction": instruction.strip(), "reason": str(_field(obj, "Reason") or "")}

        searched = "; ".join(f"[{seconds(e.row.start_s)}, {seconds(e.row.end_s)}]" for e in memory if e.searched)
        return self._ask("search", "search_user", {"searched": searched or "none yet",
                                                   "question": self._question(question)}, memory,
                         SEARCH_SCHEMA, valid, SEARCH_FORM, "search", "search", tally)

    # ------------------------------------------------------------------------------------------ the loop
    def _sparse_init(self, reply: StructuredReply) -> tuple[list[Entry], dict[str, Any]]:
        n = len(self.coarse)
        if reply.value is None or not reply.value["flag"]:
            why = "localizer: whole video" if reply.value is not None else "localizer reply unusable: whole video"
            return [Entry(row) for row in self.coarse], {"whole_video": True, "why": why}
        keep = sorted({j for i in reply.value["periods"] for j in (i - 1, i, i + 1) if 0 <= j < n})
        return [Entry(self.coarse[j]) for j in keep], {"whole_video": False, "picked": reply.value["periods"],
                                                       "kept": keep}

    def _backtrack(self, entry: Entry, instruction: str) -> list[MemoryRow]:
        """Re-caption ``entry`` at its depth with ``instruction`` and split it into the next depth's clips."""
        row = entry.row
        full = deeper_instruction(self.memory_settings, instruction)
        clips = [Clip(row.start_s, row.end_s, self.levels[row.level].fps, full, row.level)]
        deeper = next_level(row.level, self.max_depth)
        if deeper is not None:
            spec = self.levels[deeper]
            clips += [Clip(s, e, spec.fps, full, deeper) for s, e in split(row.start_s, row.end_s, spec.clip_s)]
        return self.service.captions(clips)

    def _forced_memory(self, memory: list[Entry]) -> list[Entry]:
        """The released code's must-answer memory: every coarse period (its re-caption where backtracking
        refreshed it) plus every fine and ultra-fine caption gathered."""
        gathered = {e.key: e for e in memory}
        coarse = [gathered.get(("coarse", r.start_s, r.end_s)) or Entry(r) for r in self.coarse]
        return coarse + [e for e in memory if e.row.level != "coarse"]

    def answer(self, question: Question) -> MethodAnswer:
        tally = CallTally()
        self.focus = None
        before = self.service.stats.snapshot()
        trace: dict[str, Any] = {"preset": self.preset, "captioner": self.service.name, "max_depth": self.max_depth,
                                 "calls": [], "iterations": [], "forced": False,
                                 "failed_captions": [caption_label(r) for r in self.coarse if not described(r)],
                                 "truncated_captions": [caption_label(r) for r in self.coarse
                                                        if caption_health([r])[0]]}
        # The coarse memory's failed and cut captions are the video's memory, the same on every question: the
        # store's share (counted once per video in the report); those of this question's backtracking are its own.
        coarse = {"failed_captions": len(trace["failed_captions"]), "truncated_captions": len(trace["truncated_captions"])}
        episode = Episode([Entry(row) for row in self.coarse])
        capped = False
        try:
            reply = (self._answer_from_summary(question, tally, trace, episode) if self.max_depth == SUMMARY
                     else self._backtracking(question, tally, trace, episode))
        except CallCapReached:
            capped = True
            reply = self._force_at_cap(question, tally, trace, episode)
        if self.max_llm_calls is not None:
            trace["llm_call_cap"] = {"cap": self.max_llm_calls, "reached": capped,
                                     "agent_calls": self.agent_calls(tally)}
        tally.book_store(coarse)
        for name, n in coarse.items():
            tally.count(name, len(trace[name]) - n)
        spent = self.service.stats.since(before)
        tally.add_captions(spent.calls, spent.reused, spent.prompt_tokens, spent.completion_tokens, spent.seconds,
                           self.service.captioner.is_vlm)
        # the texts beside their labels: the richness / relevance analysis (Fig. 5) reads each level's text here
        trace.update(final_memory=[SUMMARY] if self.max_depth == SUMMARY else [e.label() for e in episode.memory],
                     final_memory_texts=[] if self.max_depth == SUMMARY else [e.row.text for e in episode.memory],
                     captions=spent.as_dict())
        letter = reply.value["answer"] if reply is not None and reply.value else None
        return MethodAnswer(letter, reply.text if reply else None, letter is not None, tally, trace)

    def _backtracking(self, question: Question, tally: CallTally, trace: dict, episode: Episode
                      ) -> StructuredReply | None:
        """Algorithm 1 (with the released code's options): sparse init, then the answer-search-backtrack loop."""
        reply: StructuredReply | None = None
        if self.full_coarse_first:
            reply = self._answer(question, episode.memory, tally, "answer:full_coarse")
            trace["calls"].append(reply.record("answer:full_coarse"))
        if not self._confident(reply):
            episode.memory, trace["sparse_init"] = self._initial_memory(question, tally, trace)
            reply = self._loop(question, episode.memory, tally, trace)
        return reply

    def _answer_from_summary(self, question: Question, tally: CallTally, trace: dict, episode: Episode
                             ) -> StructuredReply | None:
        """Fig. 6(a)'s summary-only arm: the answering agent reads the video's summary instead of the memory
        list; when it is not confident, the forced answer over the same summary. None when no summary could be
        made (the question is unanswered, its failure in the trace)."""
        episode.memory = []
        episode.summary = self._summary(tally, trace)
        if episode.summary is None:
            return None
        reply = self._answer(question, [], tally, "answer", episode.summary)
        trace["calls"].append(reply.record("answer"))
        if self._confident(reply):
            return reply
        return self._force(question, [], tally, trace, episode.summary)

    def _summary(self, tally: CallTally, trace: dict) -> str | None:
        """The video's summary, written by the run's model from the whole coarse memory (``summarize.txt``): one
        call per video, made by the first question that needs it (the trace says which), like the released
        code's summary cached per video; a failed or empty one is retried by the next question."""
        if self.video_summary is not None:
            trace["summary"] = {"made_by_this_question": False, "text": self.video_summary}
            return self.video_summary
        self._retries_within_cap(tally, forced=False)  # the cap may leave no room for it
        fitted = self._fit("summarize", "summarize_user", {}, [Entry(row) for row in self.coarse],
                           self.role_max_tokens("summary"))
        if fitted.messages is None:
            trace["summary"] = {"made_by_this_question": False,
                                "failure": "the coarse memory does not fit the model's context even after trimming"}
            return None
        if fitted.trimmed:
            tally.count("context_trims")
        request = ChatRequest(messages=fitted.messages, purpose="summary",
                              **{**self.sampling(), "max_tokens": fitted.max_tokens})
        (response,) = self._send_sized([request])
        tally.add(request, response)
        record = call_record(request, response)
        if fitted.trim:
            record["context_trim"] = fitted.trim
        trace["calls"].append(record)
        body, _ = split_reasoning(response.text or "")
        if response.error or not body.strip():
            trace["summary"] = {"made_by_this_question": True, "failure": response.error or "empty summary"}
            return None
        self.video_summary = body.strip()
        trace["summary"] = {"made_by_this_question": True, "text": self.video_summary}
        return self.video_summary

    def _force_at_cap(self, question: Question, tally: CallTally, trace: dict, episode: Episode) -> StructuredReply:
        """The forced answer ``max_llm_calls`` kept room for, over what the question had gathered: the summary
        (or, when none was made yet, the full coarse memory) under ``max_depth: summary``, else the memory the
        ``forced_answer`` mode names. Counted as ``capped_llm_calls``."""
        tally.count("capped_llm_calls")
        if self.max_depth == SUMMARY:
            memory = [] if episode.summary is not None else [Entry(row) for row in self.coarse]
            return self._force(question, memory, tally, trace, episode.summary)
        literal = self.forced_mode == "current_memory"
        return self._force(question, episode.memory if literal else self._forced_memory(episode.memory), tally,
                           trace)

    @staticmethod
    def _confident(reply: StructuredReply | None) -> bool:
        return bool(reply is not None and reply.value and reply.value["confidence"])

    def _initial_memory(self, question: Question, tally: CallTally, trace: dict) -> tuple[list[Entry], dict]:
        if self.ordinal_whole_video and ORDINALS.search(question.question):
            return [Entry(row) for row in self.coarse], {"whole_video": True, "why": "ordinal word in the question"}
        located = self._localize(question, tally)
        trace["calls"].append(located.record("localize"))
        return self._sparse_init(located)

    def _loop(self, question: Question, memory: list[Entry], tally: CallTally, trace: dict) -> StructuredReply:
        literal = self.forced_mode == "current_memory"
        if literal and self.max_iterations == 0:
            return self._force(question, memory, tally, trace)
        reply = self._answer(question, memory, tally, "answer")
        trace["calls"].append(reply.record("answer"))
        iterations = trace["iterations"]
        while not self._confident(reply) and len(iterations) < self.max_iterations:
            if all(e.searched for e in memory):
                break
            search = self._search(question, memory, tally)
            trace["calls"].append(search.record("search"))
            if search.value is not None:
                target, instruction = memory[search.value["entry"]], search.value["instruction"]
            else:  # recorded above; backtracking goes on from the earliest unsearched period
                target = next(e for e in memory if not e.searched)
                instruction = f"Describe in detail everything relevant to: {question.question.strip()}"
            target.searched = True
            self.focus = (target.row.start_s, target.row.end_s)
            rows = self._backtrack(target, instruction)
            for row in rows:
                if (row.level, row.start_s, row.end_s) == target.key:
                    target.row = keep_good_caption(target.row, row)
            known = {e.key for e in memory}
            memory += [Entry(r) for r in rows if (r.level, r.start_s, r.end_s) not in known and r.error is None]
            trace["failed_captions"] += [caption_label(r) for r in rows if r.error]
            trace["truncated_captions"] += [caption_label(r) for r in rows if caption_health([r])[0]]
            iterations.append({"period": target.label(), "instruction": instruction,
                               "captions": [f"{r.level} {r.start_s:g}–{r.end_s:g}s" for r in rows]})
            if literal and len(iterations) == self.max_iterations:
                return self._force(question, memory, tally, trace)
            reply = self._answer(question, memory, tally, "answer")
            trace["calls"].append(reply.record("answer"))
            iterations[-1]["confident"] = self._confident(reply)
        if self._confident(reply):
            return reply
        forced_memory = memory if literal else self._forced_memory(memory)
        return self._force(question, forced_memory, tally, trace)

    def _force(self, question: Question, memory: list[Entry], tally: CallTally, trace: dict,
               summary: str | None = None) -> StructuredReply:
        """The forced answering call, booked as ``forced_answers`` (the answer came from a forced call, as
        every method counts it); over ``summary`` in place of the memory list when one is given."""
        reply = self._forced(question, memory, tally, summary)
        tally.count("forced_answers")
        trace["calls"].append(reply.record("answer:forced"))
        trace.update(forced=True, forced_memory=[SUMMARY] if summary is not None else [e.label() for e in memory])
        return reply

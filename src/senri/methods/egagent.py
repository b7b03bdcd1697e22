"""EG-Agent's original workflow over its store (E-L1..L8 of ``shared/spec/egagent.md``): plan once, then every
step runs the three tools in the release's fixed order — frames, entity graph, transcript — each appending
what it found to one working-memory string; the grader is asked after every step and ignored; the answer is
one text-only call over the plan and the working memory.

- planner (E1, ``planner.txt``): the question and options only; its steps are the plan, never revised (E-L3);
- frames (E-R1): the window writer (E3) names up to :data:`~senri.memory.egagent.frames.MAX_WINDOWS` windows of
  1–3 image queries; each window's frames are ranked as E-R2 ranks them (≤ 50) and shown to the analyzer (E5)
  with labels "HH:MM:SS on DAY1"; appended as "Between … and … on Day 1 : <relevance> " in window order (the
  release: completion order of its parallel calls). A window without a day or a time, or no window at all,
  fails the question as the release's error does (``incomplete_window: error``; ``whole_day`` reads it as the
  whole video instead);
- entity graph (E-R4): the SQL writer (E6) gives a ladder of queries, run on the store's read-only table; the
  kept rows are appended as "EntityGraph_Search: …" (``NONE`` when empty);
- transcript (E-R5): the reader (E8) over the whole transcript (the question is asked at the end of the video,
  S3), its relevance appended as "Transcript_Search: …";
- grader (E11, ``grader.txt``): asked, its tokens counted, its verdict ignored (E-L4);
- answer (E12): "Plan:… Context relevant to plan: …", the question, the options, the query time.

A failed or unreadable call of any role fails the question (the release skips it on any exception, E-L6): the
question is recorded as an error, counted wrong. The egocentric adapter choices of S3 (the camera wearer, one
video = DAY1, query time = the end of the video, zero-padded times) are the store's and the prompts'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

from senri.answers import format_options
from senri.backends.base import ImagePart, Message
from senri.memory.egagent.common import VIDEO_DAY, clock, hms6, seconds_from_t8, t8_from_seconds
from senri.memory.egagent.frames import MAX_FRAMES, MAX_WINDOWS
from senri.memory.egagent.graph import render_rows, run_ladder
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.methods.structured import ask_json
from senri.records import LETTERS, Question

#: The working memory a question starts with (E-L2, "Jake" as "the camera wearer": S3).
INITIAL_MEMORY = "The long video is taken from the first-person perspective of the camera wearer. "
INCOMPLETE_WINDOWS = ("error", "whole_day")
#: E-R5 (``llm``: the reader over the whole transcript, the release's default) or E-R6 (``bm25``).
TRANSCRIPT_SEARCHES = ("llm", "bm25")
#: E-R6: cues each BM25 query takes.
BM25_K = 100


class QuestionFailed(RuntimeError):
    """A role's call failed or its reply could not be read: the release loses the question (E-L6)."""


def _strings(value: Any, limit: int | None = None) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value) or not value:
        return None
    return [v.strip() for v in value][:limit]


def _plan(value: dict) -> dict | None:
    steps = _strings(value.get("plan"))
    return {"plan": steps} if steps else None


def _windows(value: dict) -> dict | None:
    windows = value.get("fs_params")
    if not isinstance(windows, list):
        return None
    out = []
    for window in windows:
        if not isinstance(window, Mapping):
            return None
        queries = _strings(window.get("text_queries"), 3)
        if queries is None:
            return None
        out.append({"text_queries": queries, "day": window.get("day"), "start_t": window.get("start_t"),
                    "end_t": window.get("end_t")})
    return {"fs_params": out}


def _field(name: str):
    def check(value: dict) -> dict | None:
        text = value.get(name)
        return {name: text.strip()} if isinstance(text, str) and text.strip() else None
    return check


def _sql(value: dict) -> dict | None:
    queries = _strings(value.get("sql_queries"))
    return {"reasoning": str(value.get("reasoning") or ""), "sql_queries": queries} if queries else None


def _transcript(value: dict) -> dict | None:
    relevance = value.get("relevance")
    return {"relevance": relevance.strip(), "rel_tscripts": value.get("rel_tscripts") or []} \
        if isinstance(relevance, str) and relevance.strip() else None


def _grade(value: dict) -> dict | None:
    score = str(value.get("binary_score") or "").strip().lower()
    return {"binary_score": score} if score in ("yes", "no") else None


def _answer(value: dict) -> dict | None:
    letter = str(value.get("mcq_prediction") or "").strip().upper()[:1]
    return {"mcq_prediction": letter, "justification": str(value.get("justification") or "")} \
        if letter in LETTERS else None


SCHEMAS: dict[str, dict] = {
    "planner": {"type": "object", "properties": {"plan": {"type": "array", "items": {"type": "string"}}},
                "required": ["plan"]},
    "frame_windows": {"type": "object", "properties": {"fs_params": {"type": "array", "items": {
        "type": "object", "properties": {"text_queries": {"type": "array", "items": {"type": "string"}},
                                         "day": {"type": ["integer", "null"]},
                                         "start_t": {"type": ["integer", "null"]},
                                         "end_t": {"type": ["integer", "null"]}},
        "required": ["text_queries", "day", "start_t", "end_t"]}}}, "required": ["fs_params"]},
    "frame_analyzer": {"type": "object", "properties": {"relevance": {"type": "string"}}, "required": ["relevance"]},
    "sql_writer": {"type": "object", "properties": {"reasoning": {"type": "string"},
                                                    "sql_queries": {"type": "array", "items": {"type": "string"}}},
                   "required": ["reasoning", "sql_queries"]},
    "transcript_reader": {"type": "object", "properties": {"rel_tscripts": {"type": "array",
                                                                            "items": {"type": "string"}},
                                                           "relevance": {"type": "string"}},
                          "required": ["rel_tscripts", "relevance"]},
    "grader": {"type": "object", "properties": {"binary_score": {"enum": ["yes", "no"]}},
               "required": ["binary_score"]},
    "answer": {"type": "object", "properties": {"mcq_prediction": {"enum": list(LETTERS)},
                                                "justification": {"type": "string"}},
               "required": ["mcq_prediction", "justification"]},
}
SCHEMAS["transcript_queries"] = {"type": "object", "properties": {"text_queries": {"type": "array",
                                                                                    "items": {"type": "string"}}},
                                  "required": ["text_queries"]}
SCHEMAS["transcript_analyzer"] = SCHEMAS["frame_analyzer"]


def _queries(value: dict) -> dict | None:
    queries = _strings(value.get("text_queries"), 3)
    return {"text_queries": queries} if queries else None


VALIDATORS = {"planner": _plan, "frame_windows": _windows, "frame_analyzer": _field("relevance"),
              "sql_writer": _sql, "transcript_reader": _transcript, "grader": _grade, "answer": _answer,
              "transcript_queries": _queries, "transcript_analyzer": _field("relevance")}


def bm25_hits(texts: Sequence[str], queries: Sequence[str], k: int = BM25_K) -> list[int]:
    """E-R6: each query's top ``min(k, N)`` cues by BM25 (senri's Okapi BM25: Lucene idf, k1 1.5, b 0.75, on
    ``\\w+`` words; the release's bm25s 0.2.14 drops one-letter words), merged and in row order."""
    import numpy as np

    from senri.memory.retrieval import BM25

    if not texts:
        return []
    index = BM25(texts)
    hits: set[int] = set()
    for query in queries:
        scores = index.scores(query)
        top = min(int(k), len(texts))
        order = np.argsort(-scores, kind="stable")[:top]
        hits.update(int(i) for i in order if scores[i] > 0)
    return sorted(hits)


@dataclass
class Episode:
    """One question's run: its tally, its trace and the working memory string."""

    question: Question
    tally: CallTally = field(default_factory=CallTally)
    memory: str = INITIAL_MEMORY
    calls: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    found: int = 0


class EGAgent(Method):
    approach: ClassVar[str] = "persistent_memory"
    uses_model: ClassVar[bool] = True
    uses_memory: ClassVar[bool] = True
    extra_code: ClassVar[tuple[str, ...]] = ("memory/egagent/store.py", "memory/egagent/graph.py",
                                             "memory/egagent/frames.py", "memory/egagent/common.py")

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        from senri.memory.store import store_class

        if context.memory_system != "egagent" or context.memory_store is None:
            raise ValueError(f"method {context.method_name!r} reads an EG-Agent store (memory_system: egagent), "
                             f"got {context.memory_system!r}")
        config = context.method_config
        self.incomplete = str(config.get("incomplete_window", "error"))
        if self.incomplete not in INCOMPLETE_WINDOWS:
            raise ValueError(f"method {context.method_name!r}: incomplete_window {self.incomplete!r} is not one of "
                             f"{', '.join(INCOMPLETE_WINDOWS)}")
        self.max_windows = int(config.get("max_windows", MAX_WINDOWS))
        self.frames_per_call = int(config.get("frames_per_call", MAX_FRAMES))
        self.image_max_side = int(config.get("image_max_side", 384))
        self.jpeg_quality = int(config.get("jpeg_quality", 85))
        self.retries = int(config.get("json_retries", 0))
        self.transcript_search = str(config.get("transcript_search", "llm"))
        if self.transcript_search not in TRANSCRIPT_SEARCHES:
            raise ValueError(f"method {context.method_name!r}: transcript_search {self.transcript_search!r} is not "
                             f"one of {', '.join(TRANSCRIPT_SEARCHES)}")
        self.store = store_class("egagent").open(context.memory_store, dict(context.memory_system_config or {}),
                                                 context.video)
        self.text = self.prompts()
        self.duration_s = float(context.video.duration_s or 0.0)
        self.query_t8 = t8_from_seconds(self.duration_s)  # S3: the question is asked at the end of the video
        #: E-R5's cue list, the same for every step of every question (the whole transcript, S3)
        self.transcript_lines = [f"{clock(r['start_s'])} --> {clock(r['end_s'])} : {r['text']!r}"
                                 for r in self.store.transcript.iter_rows(named=True)]

    # ------------------------------------------------------------------------------------------- one call
    def _ask(self, ep: Episode, role: str, parts: Sequence[Any] | None = None, **fields: Any) -> dict:
        prompt = self.text.render(role, **fields)
        content = (prompt,) if not parts else (prompt, *parts)
        reply = ask_json(self, (Message("user", tuple(content)),), SCHEMAS[role], VALIDATORS[role],
                         self.text.render("repair"), f"egagent:{role}", ep.tally, retries=self.retries,
                         max_tokens=self.role_max_tokens(role))
        ep.calls.append(reply.record(role))
        if reply.value is None:
            raise QuestionFailed(f"{role}: {reply.error or 'malformed'}")
        return reply.value

    def query_time(self) -> str:
        return f"{clock(seconds_from_t8(self.query_t8))} on DAY{VIDEO_DAY}"

    # ------------------------------------------------------------------------------------------- the tools
    def _window_span(self, window: Mapping[str, Any]) -> tuple[float, float]:
        """A window's span in seconds (its HHMMSS bounds, closed), or the whole video (``whole_day``) where its
        day or a bound is missing; QuestionFailed (the release's error) otherwise."""
        day, start, end = window.get("day"), window.get("start_t"), window.get("end_t")
        if day is None or start is None or end is None:
            if self.incomplete == "whole_day":
                return 0.0, self.duration_s
            raise QuestionFailed(f"frame window without a day or time: {dict(window)}")
        try:
            return seconds_from_t8(int(start) * 100), seconds_from_t8(int(end) * 100)
        except (TypeError, ValueError) as exc:
            raise QuestionFailed(f"frame window time unreadable ({exc}): {dict(window)}") from None

    def _frames(self, ep: Episode, step: str) -> None:
        reply = self._ask(ep, "frame_windows", step=step, query_time=self.query_time(), memory=ep.memory,
                          day_ranges=f"DAY{VIDEO_DAY}: 000000 to {hms6(self.query_t8):06d}")
        windows = reply["fs_params"][:self.max_windows]
        if not windows and self.incomplete == "error":
            raise QuestionFailed("the frame-window writer gave no window")
        for window in windows or [{"text_queries": [step], "day": None, "start_t": None, "end_t": None}]:
            start_s, end_s = self._window_span(window)
            end_s = min(end_s, self.duration_s)
            hits = self.store.frame_search(window["text_queries"], self.frames_per_call, window=(start_s, end_s))
            ep.tally.did("searches")
            images = self._images(ep, [h.start_s for h in hits])
            ep.tally.did("frames_seen", sum(1 for part in images if isinstance(part, ImagePart)))
            ep.tally.did("memories_returned", len(hits))
            ep.found += len(hits)
            relevance = self._ask(ep, "frame_analyzer", parts=images, step=step,
                                  queries=", ".join(window["text_queries"]))["relevance"]
            ep.memory += (f"Frame_Search: Between {clock(start_s)} and {clock(end_s)} on Day {VIDEO_DAY} : "
                          f"{relevance} \n")
            ep.steps[-1].setdefault("frames", []).append({"queries": window["text_queries"], "span": [start_s, end_s],
                                                          "frames": [h.start_s for h in hits]})

    def _images(self, ep: Episode, times: Sequence[float]) -> list[Any]:
        """The frames at ``times``, each after its label "HH:MM:SS on DAY1"; one that fails to decode is left
        out and counted ``black_frames``."""
        if not times:
            return []
        from senri.decode import encode_jpeg, read_frames

        video = self.context.pixels or (self.context.media.video if self.context.media is not None else None)
        if video is None:
            raise ValueError(f"method {self.context.method_name!r}: the frame analyzer needs the video")
        info = self.context.video
        short, long = sorted((int(info.width or 0), int(info.height or 0)))
        short_side = max(1, int(self.image_max_side * short / long)) if long > self.image_max_side else None
        parts: list[Any] = []
        failed = 0
        for t, frame in zip(times, read_frames(video, list(times), short_side=short_side)):
            if frame.image is None:
                failed += 1
                continue
            parts += [f"{clock(t)} on DAY{VIDEO_DAY}", ImagePart(encode_jpeg(frame.image, quality=self.jpeg_quality))]
        if failed:
            ep.tally.count("black_frames", failed)
        return parts

    def _entity_graph(self, ep: Episode, step: str, question: Question) -> None:
        block = f"{question.question}\n{format_options(question.options)}"
        reply = self._ask(ep, "sql_writer", question=block, query_time=self.query_time(), memory=ep.memory, step=step)
        result = run_ladder(self.store.db, reply["sql_queries"])
        ep.tally.did("searches")
        ep.tally.did("memories_returned", len(result.rows))
        ep.found += len(result.rows)
        if result.errors:
            ep.tally.count("failed_search_calls", len(result.errors))
        ep.memory += f"EntityGraph_Search: {render_rows(result.rows)}\n"
        ep.steps[-1]["entity_graph"] = {"queries": reply["sql_queries"], "rung": result.rung, "tried": result.tried,
                                        "rows": len(result.rows), "errors": list(result.errors)}

    def _transcript(self, ep: Episode, step: str) -> None:
        if self.transcript_search == "bm25":
            return self._transcript_bm25(ep, step)
        lines = self.transcript_lines
        reply = self._ask(ep, "transcript_reader", step=step, memory=ep.memory,
                          transcript="\n".join(lines) if lines else "NO TRANSCRIPTS AVAILABLE ")
        ep.tally.did("searches")
        if lines:
            ep.found += 1
        ep.memory += f"Transcript_Search: {reply['relevance']}\n"

    def _transcript_bm25(self, ep: Episode, step: str) -> None:
        """E-R6: the query writer (E9), BM25 over the cues before the query time (here: all), the analyzer (E10)."""
        queries = self._ask(ep, "transcript_queries", step=step, memory=ep.memory)["text_queries"]
        rows = [r for r in self.store.transcript.iter_rows(named=True)
                if t8_from_seconds(float(r["start_s"])) < self.query_t8 or self.query_t8 == 0]
        hits = bm25_hits([str(r["text"]) for r in rows], queries)
        ep.tally.did("searches")
        ep.tally.did("memories_returned", len(hits))
        ep.found += len(hits)
        cues = "\n".join(f"Day{VIDEO_DAY} {clock(rows[i]['start_s'])} to {clock(rows[i]['end_s'])} - "
                         f"'{rows[i]['text']}'" for i in hits)
        relevance = self._ask(ep, "transcript_analyzer", cues=cues or "(none found)", step=step)["relevance"]
        ep.memory += f"Transcript_Search: {relevance}\n"
        ep.steps[-1]["transcript"] = {"queries": queries, "cues": len(hits)}

    # ------------------------------------------------------------------------------------------- the loop
    def answer(self, question: Question) -> MethodAnswer:
        ep = Episode(question)
        ep.tally.book_store(self.store.question_counts())
        options = format_options(question.options)
        pred, raw = None, None
        try:
            plan = self._ask(ep, "planner", question=question.question, options=options)["plan"]
            for n, step in enumerate(plan):
                ep.steps.append({"step": step})
                ep.tally.did("rounds")
                self._frames(ep, step)
                self._entity_graph(ep, step, question)
                self._transcript(ep, step)
                ep.tally.did("tool_calls", 3)
                self._ask(ep, "grader", plan=plan, done=plan[:n + 1], memory=ep.memory)  # asked, then ignored
            context = f"Plan:{plan}\n\n Context relevant to plan: {ep.memory}"
            reply = self._ask(ep, "answer", context=context, question=question.question, options=options,
                              query_time=self.query_time())
            ep.tally.did("qa_calls")
            pred, raw = reply["mcq_prediction"], reply["justification"]
            if not ep.found:
                ep.tally.did("answered_without_retrieval")
        except QuestionFailed as exc:
            ep.tally.errors.append(f"egagent: {exc} (the release loses the question)")
        trace = {"plan_steps": ep.steps, "working_memory": ep.memory, "calls": ep.calls,
                 "retriever": self.store.retriever}
        return MethodAnswer(pred, raw, pred is not None, ep.tally, trace)

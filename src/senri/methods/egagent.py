"""EG-Agent's original workflow over its store (E-L1..L8 of ``shared/spec/egagent.md``): plan once, then every
step runs the three tools in the release's fixed order — frames, entity graph, transcript — each appending
what it found to one working-memory string; the grader is asked after every step and ignored; the answer is
one text-only call over the plan and the working memory.

- planner (E1, ``planner.txt``): the question and options only; its steps are the plan, never revised (E-L3);
- frames (E-R1): the window writer (E3) names windows of image queries, every one of which runs (the release
  runs them all, 4 at a time); each window's frames are selected as the release's merged table selects them
  (its times compared as text, ``window_compare``), ranked as E-R2 ranks them (≤ 50) and shown to the
  analyzer (E5) with labels "HH:MM:SS on DAY1"; appended as "Between … and … on Day d : <relevance> " in
  window order (the release: completion order of its parallel calls). A window on another day than the
  video's, or on day None, finds no frame and the analyzer is still asked ("on Day None"); a window without a
  time, without a query, or no window at all, loses the question as the release's error does
  (``incomplete_window: release``; ``whole_day`` reads a missing day or time as the whole video instead);
- entity graph (E-R4): the SQL writer (E6) gives a ladder of queries, run on the store's read-only table; the
  kept rows are appended as "EntityGraph_Search: …" (``NONE`` when empty);
- transcript (E-R5): the reader (E8) over the whole transcript (the question is asked at the end of the video,
  S3), its relevance appended as "Transcript_Search: …";
- grader (E11, ``grader.txt``): asked after every step, its tokens counted; on the last step any verdict goes
  on to the answer, before it only exactly "yes" or "no" go on (both to the next step) and anything else loses
  the question as the release's unmapped route does (``grader_routing: release``; ``ignore``: never lost);
- answer (E12): "Plan:… Context relevant to plan: …", the question, the options, the query time.

A failed or unreadable call of any role fails the question (the release skips it on any exception, E-L6): the
question is recorded as an error, counted wrong. The egocentric adapter choices of S3 (the camera wearer, one
video = DAY1, query time = the end of the video, zero-padded times) are the store's and the prompts'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

from senri.answers import format_options
from senri.backends.base import ImagePart, Message
from senri.memory.egagent.build import Cue, cue_time_line
from senri.memory.egagent.common import VIDEO_DAY, clock, hms6, seconds_from_t8, t8_from_seconds, tf
from senri.memory.egagent.frames import MAX_FRAMES, WINDOW_COMPARES
from senri.memory.egagent.graph import ROW_READINGS, UnrenderableRows, render_rows, run_ladder
from senri.methods.base import CallTally, Method, MethodAnswer, RunContext
from senri.methods.structured import ask_json
from senri.records import LETTERS, Question

#: The working memory a question starts with (E-L2, "Jake" as "the camera wearer": S3).
INITIAL_MEMORY = "The long video is taken from the first-person perspective of the camera wearer. "
INCOMPLETE_WINDOWS = ("release", "whole_day")
ANSWER_READINGS = ("release", "lenient")
GRADER_ROUTINGS = ("release", "ignore")
#: The options whose non-default value departs from the release (name -> the release's value): a run that sets
#: one is marked in the report (see :mod:`senri.report`), as restated prompts are.
DEVIATIONS: dict[str, Any] = {"incomplete_window": "release", "answer_reading": "release",
                              "grader_routing": "release", "window_compare": "text", "ladder_rows": "positional",
                              "bm25_positive_only": False, "max_windows": None}
#: E-R5 (``llm``: the reader over the whole transcript, the release's default) or E-R6 (``bm25``).
TRANSCRIPT_SEARCHES = ("llm", "bm25")
#: E-R6: cues each BM25 query takes.
BM25_K = 100


class QuestionFailed(RuntimeError):
    """A role's call failed or its reply could not be read: the release loses the question (E-L6)."""


def _str_list(value: Any) -> list[str] | None:
    """A list of strings, as the release's pydantic ``list[str]`` accepts one (empty and blank items included)."""
    return list(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _plan(value: dict) -> dict | None:
    steps = _str_list(value.get("plan"))
    return {"plan": steps} if steps is not None else None


_INT_TEXT = re.compile(r"^\s*[+-]?\d+\s*$")


def _lax_int(value: Any) -> tuple[bool, int | None]:
    """pydantic's lax ``int | None``: None, an int (a bool as 0/1), a float without a fraction, digits as text
    ("095950" is 95950); (False, None) for anything else."""
    if value is None:
        return True, None
    if isinstance(value, bool):
        return True, int(value)
    if isinstance(value, int):
        return True, value
    if isinstance(value, float) and value.is_integer():
        return True, int(value)
    if isinstance(value, str) and _INT_TEXT.match(value):
        return True, int(value)
    return False, None


def _day(value: Any) -> tuple[bool, int | None]:
    """The release's ``day: Literal[0..7] | None``: equal to one of 0–7 (1.0 and True read as 1), never text."""
    if value is None:
        return True, None
    if isinstance(value, (bool, int, float)) and value in range(8):
        return True, int(value)
    return False, None


def _windows(value: dict) -> dict | None:
    """FrameSearchQueries: ``fs_params``, each window with ``text_queries`` (strings, any number), ``day`` (0–7
    or None), ``start_t`` and ``end_t`` (HHMMSS ints or None; every key required)."""
    windows = value.get("fs_params")
    if not isinstance(windows, list):
        return None
    out = []
    for window in windows:
        if not isinstance(window, Mapping) or not {"text_queries", "day", "start_t", "end_t"} <= set(window):
            return None
        queries = _str_list(window["text_queries"])
        (day_ok, day), (start_ok, start), (end_ok, end) = (_day(window["day"]), _lax_int(window["start_t"]),
                                                           _lax_int(window["end_t"]))
        if queries is None or not (day_ok and start_ok and end_ok):
            return None
        out.append({"text_queries": queries, "day": day, "start_t": start, "end_t": end})
    return {"fs_params": out}


def _strings(*names: str):
    """A reply whose ``names`` are all strings (the release's ``str`` fields: empty allowed, none missing)."""
    def check(value: dict) -> dict | None:
        return {n: value[n] for n in names} if all(isinstance(value.get(n), str) for n in names) else None
    return check


def _sql(value: dict) -> dict | None:
    queries = _str_list(value.get("sql_queries"))
    return {"reasoning": value["reasoning"], "sql_queries": queries} \
        if queries is not None and isinstance(value.get("reasoning"), str) else None


def _answer(value: dict, letters: Sequence[str] = LETTERS) -> dict | None:
    """FinalAnswer: ``mcq_prediction`` exactly one of "A"–"D" ("a", " B", "C." are not), a ``justification``.
    A question of other than four options offers its own ``letters`` (the release's four are A–D)."""
    letter = value.get("mcq_prediction")
    return {"mcq_prediction": letter, "justification": value["justification"]} \
        if isinstance(letter, str) and letter in letters and isinstance(value.get("justification"), str) \
        else None


def _lenient_answer(value: dict, letters: Sequence[str] = LETTERS) -> dict | None:
    """``answer_reading: lenient`` (senri's option): the first letter of the stripped, upper-cased prediction,
    a missing justification read as empty."""
    letter = str(value.get("mcq_prediction") or "").strip().upper()[:1]
    return {"mcq_prediction": letter, "justification": str(value.get("justification") or "")} \
        if letter and letter in letters else None


def answer_schema(letters: Sequence[str] = LETTERS) -> dict:
    """FinalAnswer's schema, ``mcq_prediction`` one of the question's letters (the release's: A–D)."""
    return {"type": "object", "properties": {"mcq_prediction": {"enum": list(letters)},
                                             "justification": {"type": "string"}},
            "required": ["mcq_prediction", "justification"]}


SCHEMAS: dict[str, dict] = {
    "planner": {"type": "object", "properties": {"plan": {"type": "array", "items": {"type": "string"}}},
                "required": ["plan"]},
    "frame_windows": {"type": "object", "properties": {"fs_params": {"type": "array", "items": {
        "type": "object", "properties": {"text_queries": {"type": "array", "items": {"type": "string"}},
                                         "day": {"enum": [*range(8), None]},
                                         "start_t": {"type": ["integer", "null"]},
                                         "end_t": {"type": ["integer", "null"]}},
        "required": ["text_queries", "day", "start_t", "end_t"]}}}, "required": ["fs_params"]},
    "frame_analyzer": {"type": "object", "properties": {"relevance": {"type": "string"}}, "required": ["relevance"]},
    "sql_writer": {"type": "object", "properties": {"reasoning": {"type": "string"},
                                                    "sql_queries": {"type": "array", "items": {"type": "string"}}},
                   "required": ["reasoning", "sql_queries"]},
    "transcript_reader": {"type": "object", "properties": {"rel_tscripts": {"type": "string"},
                                                           "relevance": {"type": "string"}},
                          "required": ["rel_tscripts", "relevance"]},
    "grader": {"type": "object", "properties": {"binary_score": {"type": "string"}},
               "required": ["binary_score"]},
    "answer": answer_schema(),
}
SCHEMAS["transcript_queries"] = {"type": "object", "properties": {"text_queries": {"type": "array",
                                                                                    "items": {"type": "string"}}},
                                  "required": ["text_queries"]}
SCHEMAS["transcript_analyzer"] = SCHEMAS["frame_analyzer"]


def _queries(value: dict) -> dict | None:
    queries = _str_list(value.get("text_queries"))
    return {"text_queries": queries} if queries is not None else None


#: Each role's reply as the release's pydantic class reads it (the release case ``structured_reply_validation``).
VALIDATORS = {"planner": _plan, "frame_windows": _windows, "frame_analyzer": _strings("relevance"),
              "sql_writer": _sql, "transcript_reader": _strings("rel_tscripts", "relevance"),
              "grader": _strings("binary_score"), "answer": _answer, "transcript_queries": _queries,
              "transcript_analyzer": _strings("relevance")}


def grader_route(steps: int, done: int, verdict: str) -> str | None:
    """The release's route after the grader (lg 708-735): "complete" when the done steps equal the plan's,
    whatever the verdict; before that "incomplete" for exactly "yes" or "no" (both go on) and None for any other
    verdict ("Yes", "maybe": a route the graph does not map, which loses the question)."""
    if done == steps:
        return "complete"
    return "incomplete" if verdict in ("yes", "no") else None


def answer_context(plan: Sequence[str], memory: str) -> str:
    """What the answerer (E12) reads besides the question: the plan's Python repr and the working memory."""
    return f"Plan:{list(plan)}\n\n Context relevant to plan: {memory}"


def day_search_dict(days: Mapping[int, tuple[int, int]], query_day: int, query_hms6: int) -> dict[str, dict]:
    """E-L2's windows the frame writer is offered: each day up to the query's, its first and last frame's
    HHMMSS (ints, so before 10:00 without the leading zero), the query day ending at the query time."""
    return {f"DAY{d}": {"start": first, "end": query_hms6 if d == query_day else last}
            for d, (first, last) in sorted(days.items()) if d <= query_day}


def day_transcript(day: int, files: Sequence[Sequence[Any]]) -> str:
    """E-R5's transcript string of a day (EgoLife path, u 431-460): "DAY d SUBTITLES:\n " then each SRT file's
    kept lines (its time lines "HH:MM:SS,mmm --> HH:MM:SS,mmm" and text lines) as a Python list, each followed by
    a blank line. ``files``: each file's cues (:class:`~senri.memory.egagent.build.Cue`)."""
    lists = [f"{transcript_lines(cues)}\n\n" for cues in files]
    return f"DAY {day} SUBTITLES:\n " + ("".join(lists) if lists else "\n\n")


def transcript_lines(cues: Sequence[Any]) -> list[str]:
    """An SRT file's lines as the release keeps them for E-R5 (``keep_english_subs``): each cue's time line
    "HH:MM:SS,mmm --> HH:MM:SS,mmm", then its text lines."""
    lines: list[str] = []
    for cue in cues:
        lines.append(cue_time_line(cue))
        lines.extend(cue.text.splitlines())
    return lines


#: bm25s 0.2.14's default English stopwords (``stopwords="en"``: Lucene's English stop set).
BM25_STOPWORDS = frozenset(("a an and are as at be but by for if in into is it no not of on or such that the their "
                            "then there these they this to was will with").split())
_BM25_WORD = re.compile(r"(?u)\b\w\w+\b")


def bm25_tokens(text: str) -> list[str]:
    """A text as bm25s 0.2.14 tokenizes it by default: lower case, words of two or more word characters, the
    English stopwords dropped ("I am a" is ["am"], "don't Jake's" ["don", "jake"])."""
    return [w for w in _BM25_WORD.findall(str(text).lower()) if w not in BM25_STOPWORDS]


class BM25Raises(ValueError):
    """An E-R6 search on which bm25s raises in the release, so the question is lost (one subclass a cause)."""


class SmallCorpus(BM25Raises):
    """BM25 asked for more cues than the corpus holds (or an empty corpus): bm25s raises."""


class NoQueries(BM25Raises):
    """The query writer gave an empty list (its class accepts one): bm25s's tokenizer gives nothing to retrieve
    with and the release's unpacking raises."""


class CueNotText(BM25Raises):
    """A cue whose text is not a string (a null cell; the release's CSV cache reads an empty English cell back as
    NaN): bm25s's tokenizer raises on it, and the release loses the question."""


def bm25_hits(texts: Sequence[str | None], queries: Sequence[str], k: int = BM25_K,
              positive_only: bool = False) -> list[int]:
    """E-R6: each query's top ``k`` cues by BM25 (bm25s 0.2.14's defaults: Lucene idf, k1 1.5, b 0.75,
    :func:`bm25_tokens`), merged and in row order.

    As the release: a corpus of fewer than ``k`` cues raises :class:`SmallCorpus` (bm25s's ValueError: the
    question is lost), and every query takes exactly ``k`` cues, zero scores included (which tied cues is
    ``numpy.argpartition``'s choice, as in bm25s). ``positive_only`` (senri's option): ``k``
    capped at the corpus and only cues with a positive score kept, a cue that is not text read as empty.
    A cue that is not text (None, NaN) raises :class:`CueNotText` as bm25s's tokenizer does, an empty corpus
    :class:`SmallCorpus`, an empty query list :class:`NoQueries` (checked in the order the release meets them:
    the corpus is tokenized and indexed before the queries)."""
    import numpy as np

    from senri.memory.retrieval import BM25

    bad = [n for n, text in enumerate(texts) if not isinstance(text, str)]
    if bad and not positive_only:
        raise CueNotText(f"cue {bad[0]} of the BM25 corpus is {texts[bad[0]]!r}, not text (bm25s raises)")
    texts = [text if isinstance(text, str) else "" for text in texts]
    if not texts and not positive_only:
        raise SmallCorpus("BM25 over no cue before the query time (bm25s raises indexing an empty corpus)")
    if not queries and not positive_only:
        raise NoQueries("the BM25 query writer gave no query (bm25s raises)")
    if len(texts) < int(k) and not positive_only:
        raise SmallCorpus(f"BM25 k {k} is more than the {len(texts)} cues before the query time (bm25s raises)")
    if not texts:
        return []
    index = BM25(texts, tokenize=bm25_tokens)
    hits: set[int] = set()
    for query in queries:
        scores = index.scores(query)
        # bm25s's top-k: the last k of an argpartition (which tied cues it keeps is numpy's choice, as there)
        top = np.argpartition(scores, -min(int(k), len(texts)))[-min(int(k), len(texts)):]
        hits.update(int(i) for i in top if scores[i] > 0 or not positive_only)
    return sorted(hits)


def window_failure(window: Mapping[str, Any]) -> str | None:
    """Why the release's frame step loses the question on one of the writer's windows (E-R1), or None: a window
    without a time (``f"{None:06d}"``: TypeError) or without a query (SigLIP on an empty list: ValueError). A
    reply with no window at all is lost too (its thread pool of 0 workers: ValueError)."""
    if window["start_t"] is None or window["end_t"] is None:
        return f"frame window without a time (the release's TypeError): {dict(window)}"
    if not window["text_queries"]:
        return "a frame window without a query (the release's ValueError)"
    return None


def window_entry(start_hms6: int, end_hms6: int, day: int | None, relevance: str) -> str:
    """A frame window's working-memory entry (E-R1): "Between HH:MM:SS and HH:MM:SS on Day d : <relevance> "
    (times zero-padded, D7; day None renders "None")."""
    return f"Between {tf(int(start_hms6) * 100)[:8]} and {tf(int(end_hms6) * 100)[:8]} on Day {day} : {relevance} "


def sql_writer_inputs(question: str, options: str, query_t8: int, day: int = VIDEO_DAY) -> tuple[str, str]:
    """What the SQL writer (E6) is told: the question and its options joined with no separator (re 45-93) and
    the query time "HH:MM:SS,CC on DAYd"."""
    return f"{question}{options}", f"{tf(query_t8)} on DAY{day}"


def _choice(config: Mapping[str, Any], key: str, choices: Sequence[str], method: str) -> str:
    value = str(config.get(key, choices[0]))
    if value not in choices:
        raise ValueError(f"method {method!r}: {key} {value!r} is not one of {', '.join(choices)}")
    return value


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

    def __init__(self, context: RunContext) -> None:
        super().__init__(context)
        from senri.memory.store import store_class

        if context.memory_system != "egagent" or context.memory_store is None:
            raise ValueError(f"method {context.method_name!r} reads an EG-Agent store (memory_system: egagent), "
                             f"got {context.memory_system!r}")
        config = context.method_config
        name = context.method_name
        self.incomplete = _choice(config, "incomplete_window", INCOMPLETE_WINDOWS, name)
        self.answer_reading = _choice(config, "answer_reading", ANSWER_READINGS, name)
        self.grader_routing = _choice(config, "grader_routing", GRADER_ROUTINGS, name)
        self.window_compare = _choice(config, "window_compare", WINDOW_COMPARES, name)
        self.ladder_rows = _choice(config, "ladder_rows", ROW_READINGS, name)
        self.bm25_positive_only = bool(config.get("bm25_positive_only", False))
        cap = config.get("max_windows")
        self.max_windows = None if cap is None else int(cap)
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
        #: E-R5's day string, the same for every step of every question (the whole transcript, S3)
        cues = [Cue(float(r["start_s"]), float(r["end_s"]), str(r["text"]))
                for r in self.store.transcript.iter_rows(named=True)]
        self.transcript_day = day_transcript(VIDEO_DAY, [cues] if cues else [])

    # ------------------------------------------------------------------------------------------- one call
    def _ask(self, ep: Episode, role: str, parts: Sequence[Any] | None = None, **fields: Any) -> dict:
        prompt = self.text.render(role, **fields)
        content = (prompt,) if not parts else (prompt, *parts)
        validator, schema = VALIDATORS[role], SCHEMAS[role]
        if role == "answer":  # the question's own letters: A–D for four options, A–F for six
            letters = ep.question.letters
            reading = _lenient_answer if self.answer_reading == "lenient" else _answer
            validator, schema = (lambda value: reading(value, letters)), answer_schema(letters)
        reply = ask_json(self, (Message("user", tuple(content)),), schema, validator,
                         self.text.render("repair"), f"egagent:{role}", ep.tally, retries=self.retries,
                         max_tokens=self.role_max_tokens(role))
        ep.calls.append(reply.record(role))
        if reply.value is None:
            raise QuestionFailed(f"{role}: {reply.error or 'malformed'}")
        return reply.value

    def query_time(self) -> str:
        return f"{clock(seconds_from_t8(self.query_t8))} on DAY{VIDEO_DAY}"

    # ------------------------------------------------------------------------------------------- the tools
    def _window_span(self, window: Mapping[str, Any]) -> tuple[int, int, int | None]:
        """A window's day and HHMMSS bounds. A missing time is the release's TypeError (the question is lost);
        ``whole_day`` reads a missing day or time as the whole video instead."""
        day, start, end = window["day"], window["start_t"], window["end_t"]
        if self.incomplete == "whole_day" and (day is None or start is None or end is None):
            return 0, hms6(self.query_t8), VIDEO_DAY
        if start is None or end is None:
            raise QuestionFailed(window_failure(window))
        return int(start), int(end), day

    def _frames(self, ep: Episode, step: str) -> None:
        days = {VIDEO_DAY: (0, hms6(self.query_t8))}
        reply = self._ask(ep, "frame_windows", step=step, query_time=self.query_time(), memory=ep.memory,
                          day_ranges=str(day_search_dict(days, VIDEO_DAY, hms6(self.query_t8))))
        windows = reply["fs_params"] if self.max_windows is None else reply["fs_params"][:self.max_windows]
        if not windows:
            if self.incomplete != "whole_day":
                raise QuestionFailed("the frame-window writer gave no window (the release's ValueError)")
            windows = [{"text_queries": [step], "day": None, "start_t": None, "end_t": None}]
        entries: list[str] = []
        for window in windows:
            start, end, day = self._window_span(window)
            if not window["text_queries"]:
                raise QuestionFailed(window_failure({**window, "start_t": start, "end_t": end}))
            # one video is DAY1 (S3): a window on another day, or on day None, finds no frame (the release's
            # "dayNone" search), and the analyzer is still asked
            hits = self.store.frame_search(window["text_queries"], self.frames_per_call, hms6_window=(start, end),
                                           compare=self.window_compare) if day == VIDEO_DAY else []
            ep.tally.did("searches")
            images = self._images(ep, [h.start_s for h in hits])
            ep.tally.did("frames_seen", sum(1 for part in images if isinstance(part, ImagePart)))
            ep.tally.did("memories_returned", len(hits))
            ep.found += len(hits)
            relevance = self._ask(ep, "frame_analyzer", parts=images, step=step,
                                  queries=", ".join(window["text_queries"]))["relevance"]
            entries.append(window_entry(start, end, day, relevance))
            ep.steps[-1].setdefault("frames", []).append({"queries": window["text_queries"], "day": day,
                                                          "span": [start, end], "frames": [h.start_s for h in hits]})
        # one line for the step, its windows' entries joined, as the release appends its analysis_result
        ep.memory += "Frame_Search: " + "".join(entries) + "\n"

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
        block, query_time = sql_writer_inputs(question.question, format_options(question.options), self.query_t8)
        reply = self._ask(ep, "sql_writer", question=block, query_time=query_time, memory=ep.memory, step=step)
        result = run_ladder(self.store.db, reply["sql_queries"])
        ep.tally.did("searches")
        ep.tally.did("memories_returned", len(result.rows))
        ep.found += len(result.rows)
        if result.errors:
            ep.tally.count("failed_search_calls", len(result.errors))
        try:
            rendered = render_rows(result.rows, self.ladder_rows)
        except UnrenderableRows as exc:
            raise QuestionFailed(f"entity-graph rows unreadable by position ({exc}; the release's IndexError)") \
                from None
        ep.memory += f"EntityGraph_Search: {rendered}\n"
        ep.steps[-1]["entity_graph"] = {"queries": reply["sql_queries"], "rung": result.rung, "tried": result.tried,
                                        "rows": len(result.rows), "errors": list(result.errors)}

    def _transcript(self, ep: Episode, step: str) -> None:
        if self.transcript_search == "bm25":
            return self._transcript_bm25(ep, step)
        reply = self._ask(ep, "transcript_reader", step=step, memory=ep.memory, transcript=self.transcript_day)
        ep.tally.did("searches")
        if len(self.store.transcript):
            ep.found += 1
        ep.memory += f"Transcript_Search: {reply['relevance']}\n"

    def _transcript_bm25(self, ep: Episode, step: str) -> None:
        """E-R6: the query writer (E9), BM25 over the cues before the query time (here: all), the analyzer (E10)."""
        queries = self._ask(ep, "transcript_queries", step=step, memory=ep.memory)["text_queries"]
        rows = [r for r in self.store.transcript.iter_rows(named=True)
                if t8_from_seconds(float(r["start_s"])) < self.query_t8 or self.query_t8 == 0]
        try:
            hits = bm25_hits([r["text"] for r in rows], queries, positive_only=self.bm25_positive_only)
        except BM25Raises as exc:
            raise QuestionFailed(str(exc)) from None
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
            if not plan:
                raise QuestionFailed("an empty plan (the release's IndexError on its first step)")
            for n, step in enumerate(plan):
                ep.steps.append({"step": step})
                ep.tally.did("rounds")
                self._frames(ep, step)
                self._entity_graph(ep, step, question)
                self._transcript(ep, step)
                ep.tally.did("tool_calls", 3)
                verdict = self._ask(ep, "grader", plan=plan, done=plan[:n + 1], memory=ep.memory)["binary_score"]
                if self.grader_routing == "release" and grader_route(len(plan), n + 1, verdict) is None:
                    raise QuestionFailed(f"grader verdict {verdict!r} before the last step (a route the release's "
                                         "graph does not map)")
            context = answer_context(plan, ep.memory)
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

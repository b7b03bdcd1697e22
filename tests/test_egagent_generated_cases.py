"""EG-Agent against cases generated from its release's own functions (egagent @ 9137bd8) on Hypothesis-drawn
inputs (``tests/reference/generated/egagent/``; ``bench/release_cases/egagent.py`` made them). Every case of a
kind goes through the same comparison: senri's function on the case's input against the release's output,
ties unordered where the release's own order comes from an unstable sort, and each named deviation checked
case by case. The suite reads a deterministic sample; ``python bench/generated_cases.py egagent`` reads all."""

from __future__ import annotations

import math
import re
import types
import sqlite3
import numpy as np
import pytest

from reference import release_cases
from release_generated import book, generated_cases, sample
from test_egagent_release_cases import _without_silent_cues, _without_speaker
from senri.memory.egagent import graph as eg
from senri.memory.egagent.common import clock, hms6, seconds_from_t8, t8_from_clock, tf, tf_value
from senri.memory.egagent.frames import rank_frames, window_rows
from senri.methods import egagent as m

SYSTEM = "egagent"
#: The release's reply classes and the senri role whose reader stands for each.
ROLES = {"FinalAnswer": "answer", "GradePlanCompletion": "grader", "SQLQueryEG": "sql_writer",
         "MultiHopPlan": "planner", "BM25QuerySelector": "transcript_queries",
         "AudioTranscriptRetrieval": "transcript_reader", "AnalyzeVideoFrames": "frame_analyzer",
         "AnalyzeTranscripts": "transcript_analyzer", "FrameSearchQueries": "frame_windows"}


@pytest.fixture(scope="module")
def cases() -> dict:
    return generated_cases(SYSTEM)


def _kind(cases: dict, kind: str) -> list[dict]:
    return sample(cases["kinds"][kind])


def _same(a, b, tol: float = 1e-6) -> bool:
    """Equal values, floats within ``tol``, NaN equal to NaN."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return False
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tol
    return a == b


def test_every_reply_is_accepted_or_rejected_as_the_release_s_pydantic_class_does(cases):
    for case in _kind(cases, "structured_reply"):
        inp, out = case["input"], case["output"]
        value = m.VALIDATORS[ROLES[inp["schema"]]](inp["reply"])
        if out["accepted"]:
            assert value == out["value"], case
        else:
            assert value is None, case
        book(SYSTEM, "structured_reply")


def test_times_render_as_the_release_s_character_cuts(cases):
    for case in _kind(cases, "timeformatter"):
        assert tf_value(case["input"]["s"]) == case["output"]["value"], case  # text: the release's cuts
        book(SYSTEM, "timeformatter")


def test_interval_times_read_as_the_release_s_builder_reads_them(cases):
    for case in _kind(cases, "ts_to_int_centiseconds"):
        text, out = case["input"]["ts"], case["output"]
        if out.get("value") is not None:
            assert t8_from_clock(text) == out["value"], case
            book(SYSTEM, "ts_to_int_centiseconds")
            continue
        with pytest.raises(ValueError):  # the release: ValueError, or NULL for an empty time
            t8_from_clock(text)
        if "raised" in out:
            assert out["raised"] == "ValueError", case
            book(SYSTEM, "ts_to_int_centiseconds")
        else:  # the named deviation (protocol.md, E-C8): an empty time is an error here, the builder drops it
            assert not text, case
            book(SYSTEM, "ts_to_int_centiseconds", "deviation:empty_time_is_an_error")


def _key(score: float) -> float:
    return -math.inf if math.isnan(score) else score


def _same_scores(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(sorted(a, key=_key), sorted(b, key=_key)))


def test_frames_are_ranked_as_the_release_ranks_them_ties_unordered(cases):
    """Per query the same top-k (its set: any choice among frames tied at the k-th score is one the release's
    ``argpartition`` can make), the same hit counts in the same order of counts, within a run of equal counts any
    order (the release's unstable ``argsort``), and each frame's best cosine."""
    for case in _kind(cases, "frame_ranking"):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        day = inp["day"].lower()
        table = [(n, f) for n, f in enumerate(inp["frames"])]
        merged = sorted(table, key=lambda nf: (nf[1][0], nf[0]))  # the merged table: day by day, in file order
        mine = [(n, f) for n, f in merged if f"day{f[0]}" == day]
        rows = window_rows([f[1] for _, f in mine], inp["start_t"], inp["end_t"])
        queries = np.array(inp["queries"], dtype=np.float32)
        frames = np.array([mine[r][1][2] for r in rows], dtype=np.float32).reshape(len(rows), queries.shape[1])
        label = [f"DAY{mine[r][1][0]}/{mine[r][0]}.jpg" for r in rows]
        ranked = rank_frames(queries, frames, top_k=inp["topk"], keep=10 ** 6)
        ours = [(label[r.row], r.hits, r.best) for r in ranked]
        theirs = out["ranked"]
        assert {p for p, _, _ in ours} <= set(label) and len(ours) == len(theirs), case
        # each query's top-k set, as a multiset of the release's scores (ties at the k-th score unordered)
        k = min(int(inp["topk"]), len(rows))
        if out["topk_rows"]:
            scores = -np.array(_partition_input(case), dtype=np.float32)
        else:
            scores = None
        window_of = {p: n for n, p in enumerate(label)}
        for q in range(len(queries)):
            single = [label[r.row] for r in rank_frames(queries[q:q + 1], frames, top_k=inp["topk"], keep=10 ** 6)]
            release_rows = out["topk_rows"][q] if out["topk_rows"] else list(range(len(rows)))
            if scores is not None:
                assert _same_scores([float(scores[q][window_of[p]]) for p in single],
                                    [float(scores[q][r]) for r in release_rows]), case
            else:
                assert len(single) == k == len(release_rows), case
        # the merged order: the same sequence of hit counts where the per-query sets are the same frames
        best = {p: s for p, s in theirs}
        for path, hits, score in ours:
            if path in best:
                assert _same(score, float(best[path])), case
        if {p for p, _, _ in ours} == {p for p, _ in theirs}:
            hits = dict((p, h) for p, h, _ in ours)
            assert [hits[p] for p, _ in theirs] == [h for _, h, _ in ours], case
            book(SYSTEM, "frame_ranking")
        else:
            book(SYSTEM, "frame_ranking", "pass:tie_at_the_k_boundary")


def _partition_input(case: dict) -> list[list[float]]:
    """The cosine matrix the release partitioned (queries × window frames), as the generator recorded it."""
    return case["output"]["neg_sims"]


@pytest.fixture(scope="module")
def graph_table(tmp_path_factory) -> sqlite3.Connection:
    fixture = release_cases("egagent")["fixtures"]
    path = tmp_path_factory.mktemp("eg") / "entity_graph.db"
    columns = fixture["entity_graph_columns"]
    with sqlite3.connect(path) as db:
        db.execute(eg.SCHEMA)
        db.executemany(f"INSERT INTO {eg.TABLE} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                       fixture["entity_graph_table"])
    db.close()
    return eg.open_read_only(path)


def _release_times(text: str, rows) -> str:
    """The release's rendering with D7 applied (a T8 before 10:00 zero-padded where the release reads the int's
    digits): the rows' time columns, rendered both ways."""
    for row in rows:
        for value in tuple(row)[2:4]:
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10000000:
                text = text.replace(f" {tf_value(str(value))} ", f" {tf(value)} ") \
                    .replace(f" {tf_value(str(value))}. ", f" {tf(value)}. ")
    return text


def test_the_sql_ladder_keeps_and_renders_the_release_s_rows(cases, graph_table):
    """The writer's reply read as the release's class reads it, the ladder run on the read-only table, its rows
    rendered by position; a rung senri refuses (a write, a PRAGMA) is the named deviation ``read_only_ladder``."""
    for case in _kind(cases, "eg_sql_ladder"):
        queries, out = case["input"]["sql_queries"], case["output"]
        reply = m.VALIDATORS["sql_writer"]({"reasoning": "", "sql_queries": queries})
        if out.get("raised") == "ValidationError":
            assert reply is None, case
            book(SYSTEM, "eg_sql_ladder")
            continue
        assert reply is not None, case
        result = eg.run_ladder(graph_table, reply["sql_queries"])
        refused = [e for e in result.errors if "refused" in e]
        try:
            ours = {"appended": f"EntityGraph_Search: {eg.render_rows(result.rows)}\n"}
        except eg.UnrenderableRows:
            ours = {"raised": "IndexError"}
        theirs = dict(out)
        if "appended" in theirs:
            theirs["appended"] = _release_times(theirs["appended"], result.rows)
        theirs.pop("message", None)
        if ours == theirs:
            book(SYSTEM, "eg_sql_ladder")
        else:
            assert refused, case  # the only difference senri allows: it refuses what is not one read
            book(SYSTEM, "eg_sql_ladder", "deviation:read_only_ladder")


def test_bm25_shows_the_analyzer_the_release_s_cues_and_loses_the_question_where_it_raises(cases):
    """The corpus as the release's cache reader gave it (an empty or "NaN" cell is NaN, not text): its error
    where bm25s raises (a cue that is not text, fewer than 100 cues), else the merged hits in row order. Which
    zero-score cues fill a query's 100 is ``argpartition``'s choice in both: equal where the scores order alike,
    and otherwise the same number of cues holding every positive-score hit (booked as such)."""
    for case in _kind(cases, "bm25_transcript_search"):
        inp, out = case["input"], case["output"]
        corpus = [None if isinstance(v, float) and math.isnan(v) else v for v in inp["corpus"]]
        if "raised" in out:  # AttributeError: a cue that is not text; ValueError: no query, no cue, or k > cues
            expected = {"AttributeError": m.CueNotText, "ValueError": (m.SmallCorpus, m.NoQueries)}[out["raised"]]
            with pytest.raises(expected):
                m.bm25_hits(corpus, inp["text_queries"])
            book(SYSTEM, "bm25_transcript_search")
            continue
        hits = m.bm25_hits(corpus, inp["text_queries"])
        if hits == out["hit_rows"]:
            book(SYSTEM, "bm25_transcript_search")
            continue
        positive = set(m.bm25_hits(corpus, inp["text_queries"], positive_only=True))
        assert len(hits) == len(out["hit_rows"]) and positive <= set(hits) and positive <= set(out["hit_rows"]), case
        book(SYSTEM, "bm25_transcript_search", "pass:zero_score_ties")


def _cues_in_time_order(lines: list[str]) -> list[str]:
    """The release's kept lines with each cue (its time line and the text lines after it) moved into time order,
    as senri's reader orders a file's cues (a stable sort by start, then end, in milliseconds)."""
    from senri.memory.egagent.common import millis_from_clock

    groups: list[list[str]] = []
    for line in lines:
        if "-->" in line or not groups:
            groups.append([line])
        else:
            groups[-1].append(line)

    def when(group: list[str]) -> tuple[int, int]:
        if "-->" not in group[0]:
            return (-1, -1)
        start, end = group[0].split(" --> ")
        return millis_from_clock(start), millis_from_clock(end)

    return [line for group in sorted(groups, key=when) for line in group]


def test_an_srt_file_gives_the_release_s_english_lines(cases, tmp_path_factory):
    """E-R5: senri's cues of the file (``read_srt``) rendered as the release's kept lines (``transcript_lines``),
    against ``shift_srt_file`` + ``keep_english_subs``. Named deviations (docs/protocol.md E-C4, E-R5), each
    checked and booked: ``silent_cue_left_out`` (a cue without an English line drops its time line),
    ``cues_in_time_order`` (a file's cues ordered by time; the release keeps file order), ``no_speaker_names``
    (with ``remove_diarization`` the release strips "Name:" prefixes senri's transcripts never carry),
    ``time_with_a_dot_read`` (a time "00:00:01.500" read where the release raises) and
    ``file_without_text_refused`` (a file none of whose cues has an English line names itself as an error)."""
    from senri.memory.egagent.build import read_srt

    folder = tmp_path_factory.mktemp("srt")
    for n, case in enumerate(_kind(cases, "srt_english_lines")):
        inp, out = case["input"], case["output"]
        path = folder / f"{n}.srt"
        path.write_text(inp["srt"], encoding="utf-8", newline="")
        try:
            lines = m.transcript_lines(read_srt(path))
        except ValueError as exc:
            if "raised" in out:
                book(SYSTEM, "srt_english_lines")
            else:
                assert "no transcript cue" in str(exc) and all("-->" in x for x in out["value"]), case
                book(SYSTEM, "srt_english_lines", "deviation:file_without_text_refused")
            continue
        if "raised" in out:
            assert out["raised"] == "ValueError" and re.search(r"\d\d\.\d", inp["srt"]), case
            book(SYSTEM, "srt_english_lines", "deviation:time_with_a_dot_read")
            continue
        outcome = "pass"
        theirs = _without_silent_cues(out["value"])
        if theirs != out["value"]:
            outcome = "deviation:silent_cue_left_out"
        if _cues_in_time_order(theirs) != theirs:
            theirs, outcome = _cues_in_time_order(theirs), "deviation:cues_in_time_order"
        if inp["remove_diarization"] and [_without_speaker(x) for x in lines] != lines:
            lines, outcome = [_without_speaker(x) for x in lines], "deviation:no_speaker_names"
        assert lines == theirs, case
        book(SYSTEM, "srt_english_lines", outcome)


def test_the_grader_s_verdict_routes_as_the_release(cases):
    """The grader's reply read as its class reads it (a verdict that is not a string loses the question), then
    routed: "complete" when the done steps equal the plan's, else "incomplete" for exactly "yes" or "no", else
    None (a route the graph does not map: the question is lost)."""
    for case in _kind(cases, "grader_routing"):
        inp, out = case["input"], case["output"]
        reply = m.VALIDATORS["grader"]({"binary_score": inp["binary_score"]})
        if "raised" in out:
            assert out["raised"] == "ValidationError" and reply is None, case
        else:
            assert reply is not None, case
            assert m.grader_route(inp["plan_steps"], inp["previous_tasks"] - 1, reply["binary_score"]) == \
                out["value"], case
        book(SYSTEM, "grader_routing")


def test_an_interval_gets_the_nearest_cue_s_last_line_as_the_release(cases):
    """E-C7 over an hour's kept lines as senri's store holds them (cues with text, in time order). Named
    deviations, booked: ``cues_in_time_order`` (where the hour's cues are not in time order and two are equally
    near, the release takes the first in file order, senri the earlier), ``no_cue_no_transcript`` (an hour
    without a cue gives an empty transcript where the release's ``min`` raises)."""
    from senri.memory.egagent.build import Cue, nearest_cue_text
    from senri.memory.egagent.common import millis_from_clock

    for case in _kind(cases, "nearest_cue"):
        inp, out = case["input"], case["output"]
        cues: list[Cue] = []
        for line in inp["dt_hour"]:
            if "-->" in line:
                start, end = line.split(" --> ")
                cues.append(Cue(millis_from_clock(start) / 1000, millis_from_clock(end) / 1000, ""))
            else:
                cues[-1] = Cue(cues[-1].start_s, cues[-1].end_s, f"{cues[-1].text}\n{line}".lstrip("\n"))
        cues = [c for c in cues if c.text]
        ours = nearest_cue_text(sorted(cues, key=lambda c: (c.start_s, c.end_s)), inp["interval_start"])
        if "raised" in out:
            assert not cues and ours == "", case
            book(SYSTEM, "nearest_cue", "deviation:no_cue_no_transcript")
        elif ours == out["value"]:
            book(SYSTEM, "nearest_cue")
        else:
            target = millis_from_clock(inp["interval_start"])
            distance = [(abs(round(c.start_s * 1000) - target), c.text.splitlines()[-1]) for c in cues]
            nearest = min(d for d, _ in distance)
            assert (nearest, ours) in distance and (nearest, out["value"]) in distance, case  # equally near
            assert [c.start_s for c in cues] != sorted(c.start_s for c in cues), case
            book(SYSTEM, "nearest_cue", "deviation:cues_in_time_order")


def _frame_step(inp: dict) -> tuple[str | None, list[tuple]]:
    """senri's frame step (:meth:`EGAgent._frames`, its defaults: ``incomplete_window: release``, no window cap)
    on the case's scripted replies — the writer's read by its class's reader (:data:`VALIDATORS`), the analyzer's
    relevance in window order — over a store whose frame search records its calls and finds nothing (the
    ranking is the ``frame_ranking`` kind): the working memory the step adds (None: the question is lost) and
    the searches made (queries, HHMMSS bounds)."""
    agent = object.__new__(m.EGAgent)
    agent.incomplete, agent.window_compare = m.INCOMPLETE_WINDOWS[0], m.WINDOW_COMPARES[0]
    agent.max_windows, agent.frames_per_call, agent.query_t8 = None, m.MAX_FRAMES, int(inp["query_time"])
    searches: list[tuple] = []
    agent.store = types.SimpleNamespace(frame_search=lambda queries, k, hms6_window, compare: searches.append(
        (list(queries), list(hms6_window))) or [])
    replies = iter([inp["reply"], *({"relevance": r} for r in inp["relevance"])])

    def ask(ep, role, **inputs):
        value = m.VALIDATORS[role](next(replies))
        if value is None:
            raise m.QuestionFailed(f"{role}: malformed")
        return value

    agent._ask = ask
    ep = m.Episode(None, memory="")
    ep.steps.append({"step": "find the cup"})
    try:
        agent._frames(ep, "find the cup")
    except m.QuestionFailed:
        return None, searches
    return ep.memory, searches


def test_the_frame_window_step_searches_and_records_the_release_s_windows(cases):
    """E-R1: senri's frame step against the release's ``search_and_analyze_frames`` (the writer's reply and the
    analyzer's relevance scripted): a reply the release's class refuses, no window, a window without a time or a
    query loses the question in both; otherwise every window of the video's day (DAY1, S3) searches its bounds
    with its queries, a window of another day finds nothing without a search, and the step appends one line,
    its windows' entries in window order. Named deviation ``times_zero_padded`` (D7): a bound before 10:00 is
    written zero-padded ("09:59:50") where the release's ``timeformatter`` reads the int's digits ("95:95:0")."""
    for case in _kind(cases, "frame_window_step"):
        inp, out = case["input"], case["output"]
        memory, searches = _frame_step(inp)
        if "raised" in out:
            assert memory is None and out["raised"] in ("ValidationError", "ValueError", "TypeError"), case
            book(SYSTEM, "frame_window_step")
            continue
        assert memory is not None, case
        value = out["value"]
        assert searches == [(r["queries"], [r["start_t"], r["end_t"]]) for r in value["retrievals"]
                            if r["selected_video"] == f"day{m.VIDEO_DAY}"], case
        if memory == value["memory"]:
            book(SYSTEM, "frame_window_step")
            continue
        # D7: each bound as the release renders it (the int's digits), then senri's line must be the release's
        windows = m.VALIDATORS["frame_windows"](inp["reply"])["fs_params"]
        padded = value["memory"]
        for w in windows:
            for bound in (w["start_t"], w["end_t"]):
                padded = padded.replace(f" {tf_value(str(bound))[:-1]} ", f" {tf(bound * 100)[:8]} ", 1)
        assert padded == memory and any(min(w["start_t"], w["end_t"]) < 100000 for w in windows), case
        book(SYSTEM, "frame_window_step", "deviation:times_zero_padded")


def test_the_day_ranges_the_writer_sees_are_the_release_s(cases):
    """E-L2: ``day_search_dict`` of each day's first and last frame (HHMMSS) up to the query's day, the query day
    ending at the query time (HHMMSS of its T8), and its str() as the writer sees it."""
    for case in _kind(cases, "day_search_dict"):
        inp, out = case["input"], case["output"]
        assert "raised" not in out, case
        days = {d: (min(frames) // 100, max(frames) // 100) for d, frames in enumerate(inp["days"], start=1)}
        date, time = inp["query_time"]["date"], inp["query_time"]["time"]
        shown = m.day_search_dict(days, int(date[3:]), hms6(int(time)))
        assert shown == out["value"]["dict"] and str(shown) == out["value"]["as_given_to_writer"], case
        book(SYSTEM, "day_search_dict")


def test_the_answer_step_gives_the_answerer_the_release_s_context_and_reads_its_reply(cases):
    """E12 through the release's ``generate_answer`` (reply scripted): the context "Plan:[…]\\n\\n Context
    relevant to plan: …" (:func:`answer_context`), the query time (senri's :meth:`EGAgent.query_time` clock on
    the case's day) and the reply accepted or refused as its class ``FinalAnswer`` does."""
    for case in _kind(cases, "answer_step"):
        inp, out = case["input"], case["output"]
        reply = m.VALIDATORS["answer"](inp["reply"])
        if reply is None:
            assert out.get("raised") == "ValidationError", case
            book(SYSTEM, "answer_step")
            continue
        value = out["value"]
        assert reply == value["answer"], case
        assert m.answer_context(inp["plan"], inp["memory"]) == value["context"], case
        date, time = inp["query_time"]["date"], inp["query_time"]["time"]
        assert f"Query Time: {clock(seconds_from_t8(int(time)))} on {date}" == value["query_time"], case
        book(SYSTEM, "answer_step")


def test_every_generated_kind_is_read(cases):
    tested = {"structured_reply", "timeformatter", "ts_to_int_centiseconds", "frame_ranking", "eg_sql_ladder",
              "bm25_transcript_search", "srt_english_lines", "grader_routing", "nearest_cue", "frame_window_step",
              "day_search_dict", "answer_step"}
    assert set(cases["kinds"]) == tested
    assert cases["meta"]["commit"] == "9137bd8c7efcb06d8eabe2f2ce065c897005b57d"
    assert all(len(v) >= 50 for v in cases["kinds"].values()), {k: len(v) for k, v in cases["kinds"].items()}

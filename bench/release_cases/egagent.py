"""EG-Agent's deterministic kinds, computed by the release's own functions on Hypothesis-drawn inputs.

    python bench/release_cases/egagent.py [--src /work/wt/_src/egagent] [--n 400]

Needs a checkout of github facebookresearch/egagent at ``COMMIT`` (``git checkout COMMIT`` under ``--src``),
pydantic 2.14.4, numpy 2.4.6 and hypothesis (the dev extra). Imports ``utils``, ``egagent/langgraph_agent``,
``egagent/run_egagent_on_egolife`` and ``prepare_datasources/create_db_*`` from the checkout with stand-ins
(:mod:`standins`) for LangChain/LangGraph, the model clients, SigLIP and ``paths``; the structured workers pop
scripted replies through the release's own pydantic classes. Writes ``tests/reference/generated/egagent/``.

Kinds:
- ``structured_reply`` — ``Cls.model_validate(reply)`` for every reply class (accepted value or rejected);
- ``timeformatter`` — ``utils.timeformatter(s)``; ``ts_to_int_centiseconds`` — ``cdb.ts_to_int_centiseconds``;
- ``frame_ranking`` — ``lg.frame_retriever_sql`` over a frames table made by ``cdv.merge_day_dbs`` from day
  tables, with ``utils.search_sql``'s full ranked list and each query's top-k rows (a spy on
  ``np.argpartition``, no logic replaced);
- ``eg_sql_ladder`` — ``re.search_entity_graph`` with a scripted SQL-writer reply over a fresh copy of the
  vendored entity-graph table (``release_cases/egagent`` fixture): the appended text or the exception;
- ``bm25_transcript_search`` — ``re.search_and_analyze_transcripts_bm25`` over a transcript CSV cache
  (bm25s 0.2.14, the release's pin) with the query writer's reply scripted: the rows shown to the analyzer;
- ``srt_english_lines`` — ``utils.shift_srt_file`` then ``utils.keep_english_subs`` (E-R5's reading of a file),
  with and without speaker removal;
- ``grader_routing`` — ``lg.grade_plan_completion`` with the grader's reply scripted;
- ``nearest_cue`` — ``create_entity_graph.add_dtranscripts_to_rel_dict`` (an interval's transcript, E-C7);
- ``frame_window_step`` — ``re.search_and_analyze_frames`` (E-R1), the writer's and analyzer's replies scripted, the
  release's retriever over an empty table, the thread pool in submission order;
- ``day_search_dict`` — ``re.get_egolife_daysearchdict`` over a drawn frames folder;
- ``answer_step`` — ``lg.generate_answer`` (E12) with the answerer's reply scripted.

``--kinds`` regenerates only the kinds named and keeps the others as stored.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import REPO, SRC, examples, kept_kinds, outcome, write_cases  # noqa: E402

COMMIT = "9137bd8c7efcb06d8eabe2f2ce065c897005b57d"
RELEASE = {"release": "github facebookresearch/egagent", "commit": COMMIT}


def load(src: Path, root: Path) -> dict:
    import standins

    standins.install_langchain()
    standins.install_paths(root)
    standins.install_retrieval_model(QUERY_VECTORS)
    sys.path[:0] = [str(src), str(src / "egagent"), str(src / "prepare_datasources")]
    import create_db_entity_graph as cdb
    import create_db_visual_frames as cdv
    import langgraph_agent as lg
    import run_egagent_on_egolife as re_
    import utils

    for module in (lg, re_, cdv):  # the two globals the release's README says to edit (lg 34-35)
        module.dataset = "egolife"
        module.agent_backbone = "gpt-4.1"
    return {"lg": lg, "re": re_, "utils": utils, "cdb": cdb, "cdv": cdv}


# ------------------------------------------------------------------------------------------------ strategies
def weighted(*choices):
    """A strategy drawing from ``choices`` ((weight, strategy) pairs) in proportion to their weights (Hypothesis's
    ``one_of`` draws its branches evenly)."""
    from hypothesis import strategies as st

    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda n: table[n])


def strategies() -> dict:
    from hypothesis import strategies as st

    tricky_text = st.sampled_from(["", " ", "A", "a", " B", "C.", "D", "E", "yes", "no", "Yes", "1", "095950",
                                   " 12 ", "+5", "-3", "1_000", "12.0", "1e3", "0x10", "١٢", "None", "null",
                                   "day1", "DAY1", "11:00:00", "true", "ＡＢ", "A\n", "\tA"])
    text = st.one_of(tricky_text, st.text(max_size=12))
    floats = st.one_of(st.sampled_from([0.0, 1.0, -1.0, 1.5, 2.0, 7.0, 8.0, float("nan"), float("inf"), 1e20]),
                       st.floats(allow_nan=True, allow_infinity=True))
    ints = st.one_of(st.sampled_from([0, 1, 7, 8, -1, 95950, 110000, 235959, 2 ** 63, -(2 ** 63) - 1]),
                     st.integers(-10 ** 7, 10 ** 7))
    scalar = st.one_of(st.none(), st.booleans(), ints, floats, text)
    value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.text(max_size=4), inner, max_size=2)),
                         max_leaves=5)
    str_list = st.one_of(st.lists(text, max_size=4), st.lists(st.one_of(text, scalar), max_size=4), value)
    #: per field type: values the class should accept (drawn three times as often) and anything else
    valid = {"str": text, "list[str]": st.lists(text, max_size=4), "letter": st.sampled_from(["A", "B", "C", "D"]),
             "day": st.one_of(st.integers(0, 7), st.none()),
             "opt_int": st.one_of(st.integers(0, 235959), st.none())}
    odd = {"str": value, "list[str]": str_list, "letter": st.one_of(text, value),
           "day": st.one_of(st.sampled_from([8, -1, 1.0, 1.5, True, False, "1", "day1", 7.0, "7"]), value),
           "opt_int": st.one_of(ints, floats, text, value,
                                st.sampled_from([" 12 ", "095950", "1_000", "12.0", "+5", True, 3.0, 3.5]))}

    def obj(fields: dict[str, str]):
        parts = {name: weighted((8, valid[kind]), (1, odd[kind]), (1, st.just("<missing>")))
                 for name, kind in fields.items()}
        extra = st.one_of(st.just({}), st.dictionaries(st.sampled_from(["extra", "notes"]), scalar, max_size=1))
        return st.builds(lambda d, e: {**{k: v for k, v in d.items() if v != "<missing>"}, **e},
                         st.fixed_dictionaries(parts), extra)

    window = obj({"text_queries": "list[str]", "day": "day", "start_t": "opt_int", "end_t": "opt_int"})
    schemas = {"MultiHopPlan": obj({"plan": "list[str]"}),
               "AudioTranscriptRetrieval": obj({"rel_tscripts": "str", "relevance": "str"}),
               "BM25QuerySelector": obj({"text_queries": "list[str]"}),
               "SQLQueryEG": obj({"reasoning": "str", "sql_queries": "list[str]"}),
               "FrameSearchQueries": st.one_of(
                   st.builds(lambda w: {"fs_params": w}, st.lists(window, max_size=3)),
                   obj({"fs_params": "str"})),
               "AnalyzeVideoFrames": obj({"relevance": "str"}),
               "AnalyzeTranscripts": obj({"relevance": "str"}),
               "GradePlanCompletion": obj({"binary_score": "str"}),
               "FinalAnswer": obj({"mcq_prediction": "letter", "justification": "str"})}
    return schemas


QUERY_VECTORS: dict[str, list[float]] = {}


# --------------------------------------------------------------------------------------------------- kinds
def structured_reply(mods: dict, n: int) -> list[dict]:
    schemas = strategies()
    cases = []
    for schema, strategy in schemas.items():
        cls = getattr(mods["lg"], schema)
        for reply in examples(strategy, n):
            try:
                value = cls.model_validate(reply).model_dump()
                out = {"accepted": True, "value": value}
            except Exception as exc:  # pydantic's ValidationError: the question is lost
                errors = [{"loc": list(e["loc"]), "type": e["type"]} for e in exc.errors()]
                out = {"accepted": False, "errors": errors}
            cases.append({"input": {"schema": schema, "reply": reply}, "output": out})
    return cases


def timeformatter(mods: dict, n: int) -> list[dict]:
    from hypothesis import strategies as st

    t8 = st.integers(0, 23595999).map(str)
    strategy = st.one_of(t8, t8.map(lambda s: s.zfill(8)), st.text(max_size=10),
                         st.sampled_from(["None", "", "9050350", "95950", "25000000", "-1000000"]))
    return [{"input": {"s": s}, "output": outcome(lambda: mods["utils"].timeformatter(s))}
            for s in examples(strategy, n)]


def ts_to_int_centiseconds(mods: dict, n: int) -> list[dict]:
    from hypothesis import strategies as st

    def some(good: list[str], bad: list[str]):
        return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(good), st.sampled_from(bad))

    clock = st.builds(lambda h, m, s, ms, pre, post: f"{pre}{h}:{m}:{s},{ms}{post}",
                      some(["0", "9", "09", "11", "23", "25"], ["123", "", "١", "1a"]),
                      some(["00", "05", "59", "60"], ["5", "٠٥", "123"]), some(["00", "30", "99", "07"], ["7", ""]),
                      some(["0", "5", "7", "07", "070", "700", "999"], ["", "1234", "5 ", "-1"]),
                      some(["", " "], ["\t", "\n", "\u00a0", "\u2003"]),
                      some(["", " "], ["\n", "\n\n", "x", "\u00a0", "\r\n"]))
    strategy = st.one_of(clock, clock, st.text(max_size=14), st.sampled_from(["", "11:20:00.000", "11:00:00"]))
    return [{"input": {"ts": s}, "output": outcome(lambda: mods["cdb"].ts_to_int_centiseconds(s))}
            for s in examples(strategy, n)]


def _frames_db(mods: dict, root: Path, frames: list[list]) -> None:
    """The release's frames table: day tables as ``process_egolife_day`` creates them (timestamp INTEGER), merged
    by the release's ``merge_day_dbs`` (the merged column is TEXT)."""
    import numpy as np

    folder = root / "dbs" / "egolife"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.db"):
        old.unlink()
    for day in range(1, 8):
        with sqlite3.connect(folder / f"egolife_jake_frames_day{day}.db") as db:
            db.execute("CREATE TABLE IF NOT EXISTS frames (id INTEGER PRIMARY KEY, timestamp INTEGER, path TEXT, "
                       "embedding BLOB)")
            db.executemany("INSERT INTO frames (timestamp, path, embedding) VALUES (?, ?, ?)",
                           [(t8, f"DAY{day}/{n}.jpg", np.asarray(v, dtype=np.float32).tobytes())
                            for n, (d, t8, v) in enumerate(frames) if d == day])
        db.close()
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        mods["cdv"].merge_day_dbs(folder / "egolife_jake_frames.db")


def frame_ranking(mods: dict, n: int, root: Path) -> list[dict]:
    import numpy as np
    from hypothesis import strategies as st

    component = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, 0.25])
    vector = st.one_of(st.lists(component, min_size=3, max_size=3),
                       st.lists(st.floats(-1, 1, width=32), min_size=3, max_size=3))
    t8 = st.one_of(st.integers(10595900, 11000500), st.sampled_from([9595500, 10000500, 11000000, 30000, 500,
                                                                       11000100]), st.integers(0, 23595999))
    frame = st.tuples(st.sampled_from([1, 1, 1, 2]), t8, vector)
    near = st.tuples(st.just(1), st.integers(11000000, 11005900), vector)
    hms = st.one_of(st.sampled_from([0, 95955, 100005, 110000, 110001, 235959, 10, -1, 1000000]),
                    st.integers(105959, 110005), st.integers(0, 240000))
    case = st.fixed_dictionaries({
        "frames": st.lists(frame, min_size=0, max_size=16),
        "queries": st.lists(vector, min_size=1, max_size=3),
        "day": st.sampled_from(["day1", "DAY1", "day2", "Day2", "day3"]),
        "start_t": st.one_of(st.just(0), hms), "end_t": st.one_of(st.just(235959), hms),
        "topk": st.sampled_from([100, 100, 1, 2, 3, 5, 50])})
    # a window over the frames, fewer than topk of them and ties likely: the k boundary decides
    dense = st.fixed_dictionaries({
        "frames": st.lists(near, min_size=1, max_size=20),
        "queries": st.lists(vector, min_size=1, max_size=4),
        "day": st.sampled_from(["day1", "DAY1"]),
        "start_t": st.sampled_from([110000, 0, 105959]), "end_t": st.sampled_from([110059, 235959, 110030]),
        "topk": st.sampled_from([1, 2, 3, 4, 5, 8, 100])})
    case = st.one_of(case, dense, dense)
    lg, utils = mods["lg"], mods["utils"]
    cases = []
    for inp in examples(case, n):
        QUERY_VECTORS.clear()
        names = [f"q{k}" for k in range(len(inp["queries"]))]
        QUERY_VECTORS.update(zip(names, inp["queries"]))
        frames = [list(f) for f in inp["frames"]]
        _frames_db(mods, root, frames)
        spy = _NumpySpy(np)
        ranked: list = []
        search_sql = utils.search_sql

        def recording(*args, **kwargs):
            result = search_sql(*args, **kwargs)
            ranked.extend(result)
            return result

        utils.np, lg.search_sql = spy, recording
        try:
            out = outcome(lambda: lg.frame_retriever_sql.invoke({
                "selected_video": inp["day"], "queries": names, "topk": inp["topk"], "start_t": inp["start_t"],
                "end_t": inp["end_t"]}))
        finally:
            utils.np, lg.search_sql = np, search_sql
        if "value" in out:
            out = {"kept": out["value"], "ranked": [[p, float(s)] for p, s in ranked],
                   "topk_rows": [p[:, :min(int(inp["topk"]), p.shape[1])] for p in spy.partitions][0]
                   if spy.partitions else [],
                   "neg_sims": spy.partitioned[0] if spy.partitioned else []}
        cases.append({"input": inp, "output": out})
    return cases


class _NumpySpy:
    """numpy as ``utils`` sees it, recording what ``argpartition`` returned (each query's top-k rows)."""

    def __init__(self, np):
        self._np = np
        self.partitions: list = []
        self.partitioned: list = []

    def __getattr__(self, name):
        return getattr(self._np, name)

    def argpartition(self, *args, **kwargs):
        result = self._np.argpartition(*args, **kwargs)
        self.partitions.append(result)
        self.partitioned.append(args[0])
        return result


def eg_sql_ladder(mods: dict, n: int, root: Path) -> list[dict]:
    from hypothesis import strategies as st

    fixture = json.loads((REPO / "tests/reference/release_cases/egagent/cases.json").read_text())["fixtures"]
    columns = fixture["entity_graph_columns"]
    table = fixture["entity_graph_table"]
    base = "SELECT * FROM entity_graph_table"
    cond = st.sampled_from(["source_id='Jake'", "target_id='Shure'", "rel_type='USES'", "day=1", "day<=2",
                            "source_id LIKE '%a%'", "target_id='Nobody'", "end_t IS NULL", "start_t>=11000000",
                            "start_t<10000000", "transcript LIKE '%cake%'"])
    where = st.lists(cond, min_size=0, max_size=3).map(lambda cs: (" WHERE " + " AND ".join(cs)) if cs else "")
    select = st.builds(lambda w, lim, end: f"{base}{w}{lim}{end}", where,
                       st.sampled_from(["", "", " LIMIT 2", " LIMIT 4", " ORDER BY id DESC"]),
                       st.sampled_from(["", "", ";", " ;", "\n"]))
    other = st.sampled_from([
        "SELECT source_id, target_id FROM entity_graph_table", "SELECT rel_type, * FROM entity_graph_table",
        "SELECT * FROM entity_graph_table WHERE", "SELEC * FROM x", "", "   ", "-- a comment",
        "SELECT * FROM entity_graph_table; SELECT 1", "DELETE FROM entity_graph_table WHERE day=2",
        "PRAGMA table_info(entity_graph_table)", "SELECT * FROM nosuch",
        "UPDATE entity_graph_table SET day=9", "select * from ENTITY_GRAPH_TABLE where SOURCE_ID='Jake'"])
    query = weighted((8, select), (4, other), (1, st.one_of(st.none(), st.integers(0, 9), st.text(max_size=6))))
    strategy = weighted((6, st.lists(query, min_size=1, max_size=5)), (1, st.just([])), (1, st.none()),
                        (1, st.text(max_size=5)))
    re_ = mods["re"]
    import standins

    cases = []
    for queries in examples(strategy, n):
        path = root / "dbs" / "egolife" / "egolife_jake_entity_graph_dtonly_concatwith_fused_dt_and_gpt-4.1captions.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE entity_graph_table (id INTEGER PRIMARY KEY AUTOINCREMENT, day INTEGER, "
                       "start_t INTEGER, end_t INTEGER, transcript TEXT, source_id TEXT, source_type TEXT, "
                       "target_id TEXT, target_type TEXT, rel_type TEXT)")
            db.executemany(f"INSERT INTO entity_graph_table ({', '.join(columns)}) VALUES "
                           f"({', '.join('?' * len(columns))})", table)
        db.close()
        standins.ScriptedStructured.replies[:] = [{"reasoning": "", "sql_queries": queries}]
        state = {"current_task": "find it", "working_memory": "", "question": "Q?", "candidates": "A.x",
                 "query_time": {"date": "DAY2", "time": "15000000"}, "total_tokens": []}
        out = outcome(lambda: re_.search_entity_graph(state))
        if "value" in out:
            out = {"appended": out["value"]["working_memory"]}
        cases.append({"input": {"sql_queries": queries}, "output": out})
    return cases


def bm25_transcript_search(mods: dict, n: int, root: Path) -> list[dict]:
    """The release's transcript search over a CSV cache (``utils.get_egolife_transcript_df`` reads
    ``transcript_csv/diarized_transcripts_all_days_JAKE.csv`` from the working directory) with the query writer's
    reply scripted; the analyzer's input (the rendered hits) is what the case records, as row positions."""
    import csv
    import os

    from hypothesis import strategies as st

    import standins

    words = ["cake", "knife", "the", "a", "I", "cut", "Cake", "cakes", "oven", "bake", "don't", "Jake's", "ok",
             "ok.", "1", "42", "你好", "café", "x", "to be or not"]
    text = st.lists(st.sampled_from(words), min_size=1, max_size=6).map(" ".join)
    cell = weighted((20, text), (1, st.none()), (1, st.sampled_from(["", " ", "NaN", "null", "None", "NA"])),
                    (2, st.text(max_size=8)))
    corpus = weighted((4, st.lists(text, min_size=100, max_size=130)), (2, st.lists(cell, min_size=100, max_size=130)),
                      (1, st.lists(cell, min_size=0, max_size=99)))
    queries = weighted((8, st.lists(st.one_of(st.sampled_from(words), text, st.text(max_size=5)), min_size=1,
                                    max_size=3)), (1, st.just([])))
    strategy = st.tuples(corpus, queries)
    re_ = mods["re"]
    cases = []
    here = os.getcwd()
    os.chdir(root)
    try:
        (root / "transcript_csv").mkdir(exist_ok=True)
        for texts, text_queries in examples(strategy, n):
            with open(root / "transcript_csv" / "diarized_transcripts_all_days_JAKE.csv", "w", newline="",
                      encoding="utf-8") as f:
                writer = csv.writer(f)
                writer.writerow(["day", "start_t", "end_t", "transcript_chinese", "transcript_english"])
                for k, text in enumerate(texts):
                    start = f"10:{k // 60:02d}:{k % 60:02d}"
                    writer.writerow([1, start, start, "", "" if text is None else text])
            standins.ScriptedStructured.replies[:] = [{"text_queries": text_queries}, {"relevance": "r"}]
            standins.ScriptedStructured.seen[:] = []
            state = {"current_task": "find it", "working_memory": "", "previous_tasks": ["empty"],
                     "query_time": {"date": "DAY1", "time": "23595900"}, "total_tokens": []}
            out = outcome(lambda: re_.search_and_analyze_transcripts_bm25(state))
            if "value" in out:
                shown = standins.ScriptedStructured.seen[-1]["relevant_transcripts"]
                out = {"hit_rows": [_row_of(line) for line in shown]}
            import pandas as pd  # the corpus as the release's cache reader gave it ("" and "NaN" cells: NaN)

            read = pd.read_csv(root / "transcript_csv" / "diarized_transcripts_all_days_JAKE.csv")
            corpus = [v.item() if hasattr(v, "item") else v for v in read["transcript_english"].tolist()]
            cases.append({"input": {"texts": texts, "corpus": corpus, "text_queries": text_queries},
                          "output": out})
    finally:
        os.chdir(here)
    return cases


def srt_english_lines(mods: dict, n: int, root: Path) -> list[dict]:
    """E-R5's reading of one SRT file as the release's day string takes it: ``utils.shift_srt_file`` (a file
    named ``DAY1_00000000.srt``: offset 0, every time line re-formatted) then ``utils.keep_english_subs`` with and
    without speaker removal."""
    from hypothesis import strategies as st

    utils = mods["utils"]
    clock = weighted((6, st.builds(lambda h, m, s_, ms: f"{h:02d}:{m:02d}:{s_:02d},{ms}", st.integers(0, 2),
                                   st.integers(0, 59), st.integers(0, 59),
                                   st.sampled_from(["000", "500", "5", "07", "999", "250"]))),
                     (1, st.sampled_from(["00:00:01.500", "0:00:01,000", "00:00:01"])))
    text = st.sampled_from(["hello there", "Jake: let's go", "Jake:", "Jake: ", "Tasha: 好的", "你好", "OK。",
                            "カメラ", "「quote」", "42", "Shure:Shure: twice", "jake: lower", "Bob: hi", "Alice:",
                            "Violet:   spaced", "two\tparts", "°C", "ok"])
    cue = st.tuples(st.sampled_from(["1", "2", "17", ""]), st.tuples(clock, clock),
                    st.lists(text, min_size=0, max_size=3))
    strategy = st.tuples(st.lists(cue, min_size=1, max_size=6), st.booleans(),
                         st.sampled_from(["\n\n", "\n\n", "\n \n", "\r\n\r\n"]))
    cases = []
    for cues, remove, sep in examples(strategy, n):
        blocks = ["\n".join(([number] if number else []) + [f"{a} --> {b}"] + lines)
                  for number, (a, b), lines in cues]
        srt = sep.join(blocks) + "\n"
        path = root / "DAY1_00000000.srt"
        path.write_text(srt, encoding="utf-8", newline="")
        out = outcome(lambda: utils.keep_english_subs(str(path), remove, newlines=utils.shift_srt_file(str(path))))
        cases.append({"input": {"srt": srt, "remove_diarization": remove}, "output": out})
    return cases


def grader_routing(mods: dict, n: int) -> list[dict]:
    """``lg.grade_plan_completion`` with the grader's reply scripted (through its class ``GradePlanCompletion``):
    the route, ``None`` (a route the graph does not map) or the exception."""
    from hypothesis import strategies as st

    import standins

    verdict = weighted((6, st.sampled_from(["yes", "no", "Yes", "NO", " yes", "yes.", "", "maybe", "complete"])),
                       (2, st.text(max_size=5)), (1, st.one_of(st.none(), st.booleans(), st.integers(0, 2))))
    strategy = st.tuples(st.integers(0, 5), st.integers(1, 7), verdict)
    cases = []
    for steps, previous, binary_score in examples(strategy, n):
        standins.ScriptedStructured.replies[:] = [{"binary_score": binary_score}]
        state = {"plan": [f"step {k}" for k in range(steps)], "previous_tasks": ["empty"] * previous,
                 "working_memory": "", "total_tokens": []}
        cases.append({"input": {"plan_steps": steps, "previous_tasks": previous, "binary_score": binary_score},
                      "output": outcome(lambda: mods["lg"].grade_plan_completion(state))})
    return cases


class _Sequential:
    """``concurrent.futures`` for the frame step, run in submission order: the release's pool completes its
    windows in whatever order its threads finish (an order not defined by the inputs); one after the other is
    one such order, and its scripted analyzer replies are popped in that order."""

    class ThreadPoolExecutor:
        def __init__(self, max_workers=None):
            if max_workers is not None and max_workers <= 0:
                raise ValueError("max_workers must be greater than 0")  # the pool's own check (no window)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, *args, **kwargs):
            import concurrent.futures

            future = concurrent.futures.Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:  # as a pool's future holds it: raised by result()
                future.set_exception(exc)
            return future

    @staticmethod
    def as_completed(futures):
        return iter(futures)


def frame_window_step(mods: dict, n: int, root: Path) -> list[dict]:
    """``re.search_and_analyze_frames`` (E-R1) with the window writer's reply scripted (through its class
    ``FrameSearchQueries``) and each window's analyzer relevance scripted; the release's frame retriever over
    an empty frames table (its ranking is the ``frame_ranking`` kind), each call recorded, and the pool run in
    submission order
    (:class:`_Sequential`): each window's retriever call (day, start_t, end_t, queries) and the working memory
    the step returns, or the exception."""
    from hypothesis import strategies as st

    import standins

    re_ = mods["re"]
    hhmmss = st.one_of(st.sampled_from([0, 95950, 100000, 110000, 235959, 5, 120000]), st.integers(0, 235959))
    window = st.fixed_dictionaries({
        "text_queries": st.lists(st.sampled_from(["red cup", "kitchen", "", "東京", "cup"]), min_size=1, max_size=3),
        "day": st.sampled_from([1, 1, 1, 0, 2, 7, None]), "start_t": st.one_of(hhmmss, hhmmss, st.none()),
        "end_t": st.one_of(hhmmss, hhmmss, st.none())})
    # the drawn replies of every shape (``structured_reply``'s) and, three times as often, well-formed windows
    windows = st.one_of(strategies()["FrameSearchQueries"],
                        *[st.builds(lambda w: {"fs_params": w}, st.lists(window, min_size=1, max_size=3))] * 3)
    relevance = st.sampled_from(["", "a cup on the table", "nothing relevant", "東京", "x\ny"])
    strategy = st.fixed_dictionaries({"reply": windows, "relevance": st.lists(relevance, min_size=3, max_size=3),
                                      "query_time": st.sampled_from(["11210217", "09300000", "23595900"])})
    calls: list = []

    lg = mods["lg"]
    release_retriever = lg.frame_retriever_sql.fn

    def retriever(selected_video, queries, topk, start_t, end_t):
        calls.append({"selected_video": selected_video, "queries": list(queries), "topk": topk,
                      "start_t": start_t, "end_t": end_t})
        return release_retriever(start_t, end_t, selected_video, queries, topk)

    _frames_db(mods, root, [])
    saved = (re_.frame_retriever_sql, re_.ThreadPoolExecutor, re_.as_completed, re_.framesearchquery)
    re_.frame_retriever_sql = standins._Tool(retriever)
    # the window writer as the module builds it with agent_backbone = "gpt-4.1" (the README's edit, set by load()
    # after import, when the pinned 'gemini-2.5-pro' had already chosen FrameSearchQueries_Gemini)
    re_.framesearchquery = lg.get_llm_worker(lg.framesearchquery_system, lg.framesearchquery_human,
                                             lg.FrameSearchQueries, "gpt-4.1")
    re_.ThreadPoolExecutor, re_.as_completed = _Sequential.ThreadPoolExecutor, _Sequential.as_completed
    cases = []
    try:
        for inp in examples(strategy, n):
            calls.clear()
            QUERY_VECTORS.clear()  # any query text embeds (the table is empty: no frame to compare with)
            for window in (inp["reply"].get("fs_params") if isinstance(inp["reply"].get("fs_params"), list) else []):
                for query in (window.get("text_queries") if isinstance(window, dict) and
                              isinstance(window.get("text_queries"), list) else []):
                    if isinstance(query, str):
                        QUERY_VECTORS[query] = [1.0, 0.0, 0.0]
            standins.ScriptedStructured.replies[:] = [inp["reply"]] + [{"relevance": r} for r in inp["relevance"]]
            state = {"query_time": {"date": "DAY1", "time": inp["query_time"]}, "working_memory": "",
                     "day_search_dict": {"DAY1": {"start": 0, "end": int(inp["query_time"][:6])}},
                     "current_task": "find the cup", "total_tokens": []}
            out = outcome(lambda: re_.search_and_analyze_frames(state)["working_memory"])
            if "value" in out:
                out = {"value": {"memory": out["value"], "retrievals": list(calls)}}
            cases.append({"input": inp, "output": out})
    finally:
        re_.frame_retriever_sql, re_.ThreadPoolExecutor, re_.as_completed, re_.framesearchquery = saved
    return cases


def day_search_dict(mods: dict, n: int, root: Path) -> list[dict]:
    """``re.get_egolife_daysearchdict(query_time)`` over a frames folder of the drawn days (each day's frames
    ``HHMMSSFF.jpg`` and a file that is not a frame): the dict the window writer is shown and its str()."""
    import shutil

    from hypothesis import strategies as st

    frame = st.integers(0, 235959).map(lambda t: t * 100)
    day = st.lists(st.one_of(frame, st.sampled_from([0, 9595900, 10000000, 23595900, 11094300])), min_size=1,
                   max_size=5, unique=True)
    strategy = st.builds(
        lambda days, pick, t: {"days": days, "query_time": {"date": f"DAY{1 + pick % len(days)}", "time": t}},
        st.lists(day, min_size=1, max_size=7), st.integers(0, 6),
        st.one_of(st.sampled_from(["11210217", "09300000", "00000000", "23595999", "10000000"]),
                  st.integers(0, 23595999).map(lambda t: f"{t:08d}")))
    re_ = mods["re"]
    folder = root / "frames_1fps"
    saved = re_.frames_dir
    re_.frames_dir = str(folder)
    cases = []
    try:
        for inp in examples(strategy, n):
            shutil.rmtree(folder, ignore_errors=True)
            for d, frames in enumerate(inp["days"], start=1):
                (folder / f"DAY{d}").mkdir(parents=True)
                (folder / f"DAY{d}" / "notes.txt").write_text("not a frame")
                for t8 in frames:
                    (folder / f"DAY{d}" / f"{t8:08d}.jpg").write_bytes(b"")
            out = outcome(lambda: re_.get_egolife_daysearchdict(inp["query_time"]))
            if "value" in out:
                out = {"value": {"dict": out["value"], "as_given_to_writer": str(out["value"])}}
            cases.append({"input": inp, "output": out})
    finally:
        re_.frames_dir = saved
    return cases


def answer_step(mods: dict, n: int) -> list[dict]:
    """``lg.generate_answer`` (E12) with the answerer's reply scripted (through its class ``FinalAnswer``): what
    the answerer is given (context, query time) and the answer it returns, or the exception."""
    from hypothesis import strategies as st

    import standins

    reply = strategies()["FinalAnswer"]
    text = st.sampled_from(["", "find the cup", "ステップ", "it's \"quoted\"", "a\nb"])
    strategy = st.fixed_dictionaries({
        "plan": st.lists(text, max_size=3), "memory": st.sampled_from(
            ["", "The long video is taken from the first-person perspective of Jake. ",
             "Frame_Search: Between 11:00:00 and 11:05:00 on Day 1 : a cup \nEntityGraph_Search: NONE\n"]),
        "query_time": st.fixed_dictionaries({"date": st.sampled_from(["DAY1", "DAY3"]),
                                             "time": st.sampled_from(["11210217", "09300000", "23595900",
                                                                      "00000100"])}),
        "reply": reply})
    cases = []
    for inp in examples(strategy, n):
        standins.ScriptedStructured.replies[:] = [inp["reply"]]
        standins.ScriptedStructured.seen[:] = []
        state = {"plan": inp["plan"], "working_memory": inp["memory"], "query_time": inp["query_time"],
                 "question": "Where is the cup?", "candidates": "A. a\nB. b\nC. c\nD. d", "total_tokens": []}

        def run():
            answer = mods["lg"].generate_answer(state)["answer"].model_dump()
            seen = standins.ScriptedStructured.seen[-1]
            return {"answer": answer, "context": seen["context"], "query_time": seen["query_time"]}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def nearest_cue(mods: dict, n: int) -> list[dict]:
    """``create_entity_graph.add_dtranscripts_to_rel_dict``: the transcript an interval gets from an hour's kept
    lines (time lines, each followed by its text lines), as E-C7 reads it."""
    from hypothesis import strategies as st

    import create_entity_graph as ce

    def clock(h, m, s_, ms):
        return f"{h:02d}:{m:02d}:{s_:02d},{ms}"

    times = st.builds(clock, st.just(11), st.integers(0, 2), st.integers(0, 59),
                      st.sampled_from(["000", "5", "7", "07", "070", "700", "500", "999"]))
    cue = st.tuples(times, times, st.lists(st.sampled_from(["hi", "ok then", "Jake: go", "two", "lines"]),
                                           min_size=0, max_size=2))
    strategy = st.tuples(st.lists(cue, min_size=0, max_size=6).map(lambda cs: sorted(cs) if len(cs) % 2 else cs),
                         st.builds(lambda m, s_, ms: f"11:{m:02d}:{s_:02d},{ms}", st.integers(0, 2),
                                   st.integers(0, 59), st.sampled_from(["000", "5", "07", "500"])))
    cases = []
    for cues, start in examples(strategy, n):
        lines = [x for a, b, texts in cues for x in [f"{a} --> {b}", *texts]]
        rel = [{"intervals": [{"start_t": start}]}]
        out = outcome(lambda: ce.add_dtranscripts_to_rel_dict(str(lines), rel)[0]["intervals"][0]["transcript"])
        cases.append({"input": {"dt_hour": lines, "interval_start": start}, "output": out})
    return cases


def _row_of(line: str) -> int:
    """The corpus row of a rendered hit "Day1 10:MM:SS to … - '…'" (each row's start time is unique)."""
    clock = line.split(" ")[1]
    _, minutes, seconds = (int(x) for x in clock.split(":"))
    return minutes * 60 + seconds


#: Each kind: its generator, its share of ``--n`` and whether it needs the scratch root.
KINDS = {"structured_reply": (structured_reply, 0.5, False), "timeformatter": (timeformatter, 1, False),
         "ts_to_int_centiseconds": (ts_to_int_centiseconds, 1, False), "frame_ranking": (frame_ranking, 1, True),
         "eg_sql_ladder": (eg_sql_ladder, 1, True), "bm25_transcript_search": (bm25_transcript_search, 0.5, True),
         "srt_english_lines": (srt_english_lines, 1, True), "grader_routing": (grader_routing, 0.5, False),
         "nearest_cue": (nearest_cue, 0.5, False), "frame_window_step": (frame_window_step, 1, True),
         "day_search_dict": (day_search_dict, 0.5, True), "answer_step": (answer_step, 0.5, False)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=SRC / "egagent")
    parser.add_argument("--n", type=int, default=400, help="examples drawn per kind (per class for replies)")
    parser.add_argument("--kinds", nargs="*", default=list(KINDS),
                        help="the kinds to regenerate (the others are kept as stored); default: all")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mods = load(args.src.resolve(), root)
        made = {}
        for kind in args.kinds:
            fn, share, needs_root = KINDS[kind]
            made[kind] = fn(mods, int(args.n * share), *([root] if needs_root else []))
    kinds = kept_kinds("egagent", made, list(KINDS))
    path = write_cases("egagent", RELEASE, kinds)
    print(path, {k: len(v) for k, v in kinds.items()})


if __name__ == "__main__":
    main()

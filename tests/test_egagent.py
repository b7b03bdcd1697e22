"""EG-Agent's memory (issue 37, shared/spec/egagent.md): time conventions, frame ranking, the entity-graph table
and its SQL ladder."""

from __future__ import annotations

import numpy as np
import pytest

from senri.memory.egagent.common import clock, hms6, seconds_from_t8, t8_from_clock, t8_from_seconds, tf
from senri.memory.egagent.frames import MAX_FRAMES, rank_frames, window_rows
from senri.memory.egagent.graph import (RefusedQuery, Relationship, open_read_only, render_rows, run_ladder,
                                        run_query, write_graph)


# --- T8 (spec Notation, E-C8, D7) ---------------------------------------------------------------------------------
def test_t8_round_trips_and_renders_zero_padded_before_ten_o_clock():
    assert t8_from_seconds(0) == 0 and tf(0) == "00:00:00,00"  # the release's tf would read "0" (D7)
    assert t8_from_seconds(3725.5) == 1020550 and tf(1020550) == "01:02:05,50"
    assert t8_from_seconds(36000.25) == 10000025 and tf(10000025) == "10:00:00,25"
    for seconds in (0.0, 0.01, 59.99, 61.0, 3599.99, 9000.5):
        assert seconds_from_t8(t8_from_seconds(seconds)) == pytest.approx(seconds)
    assert hms6(1020550) == 10205 and clock(59.99) == "00:00:59"
    # "H:MM:SS,mmm": milliseconds right-padded to 3 digits, then // 10 (E-C8)
    assert t8_from_clock("1:02:05,5") == 1020550 and t8_from_clock("00:00:07,123") == 712
    # the release's format (release case ts_to_int_centiseconds): a comma and a fraction required
    for bad in ("7 s", "00:00:07", "00:00:07.5", "1:2:3"):
        with pytest.raises(ValueError):
            t8_from_clock(bad)
    with pytest.raises(ValueError):
        seconds_from_t8(7000)  # 70 seconds is no HHMMSSCC


# --- frame ranking (E-R2) -----------------------------------------------------------------------------------------
def _release_window(name):
    """A ``frame_ranking`` release case's window: its frames (time order), their vectors, the query vectors."""
    from reference import release_cases

    data = release_cases("egagent")
    case = next(c for c in data["kinds"]["frame_ranking"] if c["name"] == name)
    day = f"day{case['input']['selected_video'][3:]}"
    frames = [r for r in data["fixtures"]["frames_table"] if r["day"] == day]
    rows = window_rows([int(r["timestamp"]) for r in frames], case["input"]["start_t"], case["input"]["end_t"])
    vectors = np.array([frames[r]["vector"] for r in rows], dtype=np.float32)
    queries = np.array([data["fixtures"]["text_vectors"][q] for q in case["input"]["queries"]], dtype=np.float32)
    return case, [frames[r]["file"] for r in rows], vectors, queries


def test_frames_rank_by_query_hits_then_later_rows_first_and_at_most_fifty_are_kept():
    # the release's case with hit counts 1..3 and no tie inside the kept frames: its order exactly
    case, files, vectors, queries = _release_window("k_equals_n_two_queries")
    ranked = rank_frames(queries, vectors)
    assert [files[r.row] for r in ranked] == case["output"]["kept_files"]
    assert [r.hits for r in ranked] == sorted((r.hits for r in ranked), reverse=True)
    for a, b in zip(ranked, ranked[1:]):  # equal hits: the later row first (one order the release's sort gives)
        if a.hits == b.hits:
            assert a.row > b.row


def test_with_one_query_the_release_keeps_the_latest_fifty_of_the_top_hundred_and_the_option_the_closest():
    case, files, vectors, queries = _release_window("one_query_top100_of_130")
    released = rank_frames(queries, vectors)
    assert len(released) == MAX_FRAMES == len(case["output"]["kept_files"])
    assert [files[r.row] for r in released] == case["output"]["kept_files"]  # the latest 50, not the closest
    # frame_order: similarity (senri's option): the 50 with the release's highest cosines, closest first
    cosine = dict(zip(case["output"]["ranked_files"], case["output"]["ranked_max_cosine"]))
    closest = [files[r.row] for r in rank_frames(queries, vectors, order="similarity")]
    assert [cosine[f] for f in closest] == sorted(cosine.values(), reverse=True)[:50]
    assert set(closest) != set(case["output"]["kept_files"])
    with pytest.raises(ValueError, match="dimension"):
        rank_frames(np.ones((1, 3)), vectors)
    assert rank_frames(queries, np.zeros((0, 4))) == []


# --- the entity-graph table and the SQL ladder (E-F4, E-R4) -------------------------------------------------------
@pytest.fixture
def graph(tmp_path):
    rows = [Relationship(1, t8_from_seconds(s), t8_from_seconds(s + 5), f"line {s}", "Camera Wearer", "Person",
                         f"Cup {s % 3}", "Object", "USES") for s in range(0, 100, 10)]
    path = tmp_path / "entity_graph.db"
    assert write_graph(rows, path) == 10
    return open_read_only(path)


def test_the_ladder_stops_at_the_first_result_of_more_than_three_rows_else_keeps_the_last_that_ran(graph):
    table = "SELECT * FROM entity_graph_table"
    ladder = [f"{table} WHERE target_id = 'Cup 9'",          # 0 rows
              f"{table} WHERE broken syntax",                  # an error: skipped
              f"{table} WHERE target_id = 'Cup 1'",            # 3 rows: not enough, go on
              f"{table} WHERE source_type = 'Person'",         # 10 rows: stop here
              f"{table} WHERE target_id = 'Cup 2'"]
    result = run_ladder(graph, ladder)
    assert (result.rung, result.tried, len(result.rows)) == (3, 4, 10)  # no row cap
    assert len(result.errors) == 1 and result.errors[0].startswith("1: OperationalError")
    result = run_ladder(graph, ladder[:3])
    assert (result.rung, len(result.rows)) == (2, 3)  # none had > 3 rows: the last successful one
    result = run_ladder(graph, [ladder[2], ladder[0], ladder[1]])
    assert (result.rung, result.rows) == (1, [])  # the last successful result, although empty
    assert run_ladder(graph, [ladder[1]]).rung is None
    rendered = render_rows(run_ladder(graph, [f"{table} WHERE target_id = 'Cup 1'"]).rows)
    assert rendered.startswith("Camera Wearer (Person) USES Cup 1 (Object) on day 1 between time 00:00:10,00 and "
                               "00:00:15,00. ") and "line" not in rendered  # the transcript is never shown
    assert render_rows([]) == "NONE"


@pytest.mark.parametrize("query", [
    "DROP TABLE entity_graph_table",
    "DELETE FROM entity_graph_table",
    "UPDATE entity_graph_table SET day = 2",
    "INSERT INTO entity_graph_table (day) VALUES (3)",
    "SELECT 1; DELETE FROM entity_graph_table",
    "ATTACH DATABASE 'elsewhere.db' AS other",
    "PRAGMA writable_schema = 1",
    "SELECT load_extension('evil')",
    "CREATE TABLE t (x)",
])
def test_a_model_written_statement_that_is_not_one_read_is_refused_and_changes_nothing(graph, query):
    with pytest.raises(RefusedQuery):
        run_query(graph, query)
    assert run_query(graph, "SELECT COUNT(*) AS n FROM entity_graph_table") == [{"n": 10}]
    assert len(run_query(graph, "SELECT * FROM entity_graph_table WHERE target_id LIKE '%;%'")) == 0


# --- the build (E-C4..C8) -----------------------------------------------------------------------------------------
SRT = """1
00:00:04,000 --> 00:00:06,500
Pass me the red cup.

2
00:00:40,000 --> 00:00:42,000
你好
Thanks, Anna.

3
00:01:05,200 --> 00:01:07,000
The kettle is on.
"""


def _builder(tmp_path, rules):
    import json as _json

    from senri.backends.scripted import ScriptedBackend
    from senri.memory.egagent.build import BuilderCalls
    from senri.prompts import prompt_set

    script = tmp_path / "builder.jsonl"
    script.write_text("".join(_json.dumps(r) + "\n" for r in rules))
    backend = ScriptedBackend({"backend": "scripted", "script": str(script), "record": str(tmp_path / "calls.jsonl")})
    return BuilderCalls(backend, prompt_set("egagent")), tmp_path / "calls.jsonl"


def test_srt_cues_keep_their_text_lines_and_a_bad_time_names_the_file(tmp_path):
    from senri.memory.egagent.build import read_srt

    (tmp_path / "v.srt").write_text(SRT)
    cues = read_srt(tmp_path / "v.srt")
    assert [(c.start_s, c.end_s, c.text) for c in cues] == [
        (4.0, 6.5, "Pass me the red cup."), (40.0, 42.0, "Thanks, Anna."), (65.2, 67.0, "The kettle is on.")]
    (tmp_path / "bad.srt").write_text("1\n00:00:04 --> later\nhello\n")
    with pytest.raises(ValueError, match=r"bad\.srt: block 1"):
        read_srt(tmp_path / "bad.srt")
    (tmp_path / "empty.srt").write_text("\n\n")
    with pytest.raises(ValueError, match="no transcript cue"):
        read_srt(tmp_path / "empty.srt")


def test_clips_with_speech_are_fused_the_others_keep_their_caption_and_the_graph_is_built_from_both(tmp_path):
    import json as _json

    from senri.memory.egagent.build import (GraphCounts, caption_clips, fuse, graph_rows, hour_documents,
                                            read_srt)

    (tmp_path / "v.srt").write_text(SRT)
    cues = read_srt(tmp_path / "v.srt")
    rows = [{"start_s": float(s), "text": f"caption at {s}"} for s in (0, 10, 20, 30, 60, 95)]
    clips = caption_clips(rows, 100.0)
    assert [(a, b) for a, b, _ in clips] == [(0.0, 30.0), (30.0, 60.0), (60.0, 90.0), (90.0, 100.0)]
    assert clips[0][2] == "caption at 0 caption at 10 caption at 20"
    extract = {"relationships": [
        {"source": {"id": "camera wearer", "type": "person"}, "target": {"id": "red cup", "type": "Object"},
         "type": "USES"},
        {"source": {"id": "camera wearer", "type": "Person"}, "target": {"id": "anna", "type": "Person"},
         "type": "TALKS_TO"},
        {"source": {"id": "x", "type": "Animal"}, "target": {"id": "y", "type": "Object"}, "type": "USES"},
        {"source": {"id": "x", "type": "Person"}, "target": {"id": "y", "type": "Object"}, "type": "OWNS"}]}
    stamps = {"relationships": [
        {"relationship_id": 1, "intervals": [{"start_t": "00:00:04,000", "end_t": "00:00:06,500"},
                                              {"start_t": "soon", "end_t": "00:00:09,000"}]},
        {"relationship_id": 2, "intervals": []}]}
    builder, calls = _builder(tmp_path, [
        {"match": "Speech in this time", "text": '{"fused_caption": "I ask for the red cup."}'},
        {"match": "Build a knowledge graph", "text": _json.dumps(extract)},
        {"match": "numbered relationships", "text": _json.dumps(stamps)}])
    fused = fuse(builder, clips, cues)
    # clip 0 hears cue 1, clip 1 cue 2 (40 s), clip 2 cue 3; clip 3 (90-100 s) hears nothing: its caption stays
    assert [c.fused for c in fused] == ["I ask for the red cup."] * 3 + ["caption at 95"]
    first = _json.loads(calls.read_text().splitlines()[0])
    assert "Pass me the red cup." in _json.dumps(first) and "00:00:30" in _json.dumps(first)  # end = next start
    docs = hour_documents(fused, cues)
    assert [d["graph"] for d in docs] == ["transcript_only", "fused"]
    assert docs[1]["document"].splitlines()[0] == "00:00:00,000 --> 00:00:30,000 : I ask for the red cup."
    counts = GraphCounts()
    table = graph_rows(builder, docs, cues, counts)
    # per document: 2 readable relationships (2 dropped by the strict types), the first with one readable span
    assert [(r.source_id, r.source_type, r.rel_type, r.target_id, r.start_t, r.end_t, r.transcript)
            for r in table] == [("Camera Wearer", "Person", "USES", "Red Cup", 400, 650, "Pass me the red cup.")] * 2
    assert (counts.dropped_relationships, counts.unsupported_relationships, counts.unreadable_spans) == (4, 2, 2)
    assert builder.record() == {"calls": 3 + 2 + 2, "failed": 0, "unparsed": 0, "cut": 0, "left_out": 0}


def test_a_reply_cut_at_the_token_limit_is_left_out_and_counted_never_read_as_one_of_its_inner_objects(tmp_path):
    """Seen on the reading model (bench/memory_systems.py): a timestamps reply of 24 relationships cut at 2,048
    tokens holds complete span objects; reading the first of them as the reply dropped every relationship as
    "without a span" while the store counted no loss. A cut reply that does not read whole is left out (a builder
    loss) and counted cut."""
    import json as _json

    from senri.memory.egagent.build import GraphCounts, graph_rows

    extract = {"relationships": [{"source": {"id": "camera wearer", "type": "Person"},
                                  "target": {"id": "museum", "type": "Location"}, "type": "INTERACTS_WITH"}]}
    cut = '{\n  "relationships": [\n    {"relationship_id": 1, "intervals": [{"start_t": "00:00:05,000", ' \
          '"end_t": "00:00:09,500"}], "confidence": 0.9}, {"relationship_id": 2, "intervals": [{"start_t": "'
    builder, _ = _builder(tmp_path, [{"match": "Build a knowledge graph", "text": _json.dumps(extract)},
                                     {"match": "numbered relationships", "text": cut, "finish_reason": "length"}])
    docs = [{"graph": "fused", "hour": 0, "clips": [], "cues": [], "document": "00:00:00,000 --> x : museum"}]
    counts = GraphCounts()
    assert graph_rows(builder, docs, [], counts) == []
    assert builder.record() == {"calls": 2, "failed": 0, "unparsed": 1, "cut": 1, "left_out": 1}


# --- the store: build, open, search (S4) --------------------------------------------------------------------------
def build_store(tmp_path, clip_model):
    """An EG-Agent store built from a 120-s test clip's captions, an SRT and a scripted builder (the fused
    graph's timestamp reply unreadable), with 1-fps vectors by the tiny CLIP: (folder, config, info, video)."""
    import json as _json

    import yaml

    from seeker_replay import probed_clip
    from senri.captioners.base import VideoMedia
    from senri.memory.egagent.store import EGAgentStore
    from senri.memory.store import BuildRequest
    from senri.records import MemoryRow, to_frame, write_table

    video, info = probed_clip(tmp_path, "eg")  # encoded and probed once per session
    rows = [MemoryRow("eg", "coarse", float(s), float(s + 10), 1.0, 10, "h", f"I hold the red cup at {s}",
                      "perception", "t", None, None, None) for s in range(0, 120, 10)]
    table = write_table(to_frame(rows, MemoryRow), tmp_path / "captions.parquet", MemoryRow)
    (tmp_path / "srt").mkdir()
    (tmp_path / "srt" / "eg.srt").write_text(SRT)
    extract = {"relationships": [{"source": {"id": "camera wearer", "type": "Person"},
                                  "target": {"id": "red cup", "type": "Object"}, "type": "USES"}]}
    stamps = {"relationships": [{"relationship_id": 1, "intervals": [{"start_t": "00:00:04,000",
                                                                       "end_t": "00:00:06,500"}]}]}
    script = tmp_path / "builder.jsonl"
    script.write_text("".join(_json.dumps(r) + "\n" for r in [
        {"match": "Speech in this time", "text": '{"fused_caption": "I ask for the red cup."}'},
        {"match": "Build a knowledge graph", "text": _json.dumps(extract)},
        {"match": ["numbered relationships", "Captions:"], "text": "not JSON at all"},  # the fused graph's stamps
        {"match": "numbered relationships", "text": _json.dumps(stamps)}]))
    cfg = {**yaml.safe_load(open("config/memory_system/egagent.yaml")), "transcripts_dir": str(tmp_path / "srt"),
           "frame_short_side": 48}
    request = BuildRequest(video=info, system="egagent", system_config=cfg, memory_config={},
                           out_dir=tmp_path / "store", captions=table,
                           media=VideoMedia("eg", video, info.fingerprint, info.duration_s),
                           models={"builder": ("scripted", {"backend": "scripted", "script": str(script)}),
                                   "embedder": ("tiny_clip", clip_model)})
    EGAgentStore.build(request)
    return tmp_path / "store", cfg, info, video


def test_the_store_builds_from_captions_and_a_transcript_and_its_search_returns_anchored_rows_and_frames(
        tmp_path, tiny_clip):
    import yaml

    from senri.memory.egagent.store import EGAgentStore
    from senri.memory.store import SearchContext

    folder, cfg, info, _ = build_store(tmp_path, tiny_clip)
    record = yaml.safe_load((folder / "config.yaml").read_text())
    assert record["clips"] == 4 and record["fused_clips"] == 3 and record["relationships"] == 1
    assert record["builder"]["unparsed"] == 1 and record["builder"]["left_out"] == 1  # the fused stamps
    assert record["frames"].startswith("120 at 1 fps, embedded (tiny_clip)")
    store = EGAgentStore.open(folder, cfg, info)
    assert store.question_counts() == {"builder_losses": 1}
    (row,) = store.graph_rows()
    assert (row["day"], row["start_t"], row["end_t"], row["transcript"]) == (1, 400, 650, "Pass me the red cup.")
    context = SearchContext()
    found = store.search("where did I use the red cup", 6, context=context)
    assert found[0].kind == "entity" and (found[0].start_s, found[0].end_s) == (4.0, 6.5)
    assert found[0].text == "Camera Wearer (Person) USES Red Cup (Object) on day 1 between time 00:00:04,00 and " \
                            "00:00:06,50."
    frames = [i for i in found if i.kind == "frame"]
    assert frames and all(i.end_s - i.start_s == 1.0 for i in frames) and len(found) == 6
    assert store.search("red cup", 6, context=SearchContext(query_time_s=3.0))[0].kind == "frame"  # row not yet
    assert [i.kind for i in store.items()].count("transcript") == 3
    with pytest.raises(ValueError, match="missing"):
        EGAgentStore.open(tmp_path, cfg, info)


# --- the workflow (E-L1..L8) --------------------------------------------------------------------------------------
QUESTION_TEXT = "What did I use in the kitchen?"


@pytest.fixture(scope="module")
def eg_store(tmp_path_factory, tiny_clip):
    """One :func:`build_store` for the episode tests, built once per module (an episode only reads its store; the
    build itself is checked by the store test above)."""
    return build_store(tmp_path_factory.mktemp("eg_store"), tiny_clip)


def _episode(tmp_path, clip_model, rules, built=None, **method):
    """One question through EGAgent on the scripted model; ``built``: a store from :func:`build_store` to reuse
    (the store is read only), else one is built under ``tmp_path``."""
    import json as _json

    import yaml

    from senri.backends.scripted import ScriptedBackend
    from senri.captioners.base import VideoMedia
    from senri.methods.base import RunContext
    from senri.methods.egagent import EGAgent
    from senri.prompts import prompt_identity
    from senri.records import Question

    tmp_path.mkdir(parents=True, exist_ok=True)
    folder, store_cfg, info, video = built or build_store(tmp_path, clip_model)
    script, record = tmp_path / "agent.jsonl", tmp_path / "agent.calls.jsonl"
    script.write_text("".join(_json.dumps(r) + "\n" for r in rules))
    model = {"backend": "scripted", "script": str(script), "record": str(record), "images": True}
    config = {**yaml.safe_load(open("config/method/egagent.yaml")), **method}
    config["prompt_identity"] = prompt_identity(config)
    context = RunContext(video=info, method_name="egagent", method_config=config, model_name="scripted",
                         model_config=model, seed=0, backend=ScriptedBackend(model),
                         media=VideoMedia("eg", video, info.fingerprint, info.duration_s), pixels=video,
                         memory_system="egagent", memory_system_config=store_cfg, memory_store=folder)
    question = Question("eg", "q1", "L", "none", QUESTION_TEXT, "a red cup", "a kettle", "a knife", "a phone", "A")
    answer = EGAgent(context).answer(question)
    calls = [_json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return answer, calls


PLAN = {"plan": ["Find what I held in the kitchen", "Find what I used it for"]}
WINDOWS = {"fs_params": [{"text_queries": ["cup"], "day": 1, "start_t": 0, "end_t": 30},
                         {"text_queries": ["kettle", "stove"], "day": 1, "start_t": 100, "end_t": 200}]}
SQL = {"reasoning": "strict to relaxed", "sql_queries": [
    "SELECT * FROM entity_graph_table WHERE target_id = 'Knife'",
    "DELETE FROM entity_graph_table",
    "SELECT * FROM entity_graph_table WHERE target_id LIKE '%Cup%'"]}
AGENT_RULES = [
    {"match": "You are planning", "text": __import__("json").dumps(PLAN)},
    {"match": "You choose where to look", "text": __import__("json").dumps(WINDOWS)},
    {"match": "Below are frames", "text": '{"relevance": "a red cup on the counter"}'},
    {"match": "You search an SQLite table", "text": __import__("json").dumps(SQL)},
    {"match": "Below is everything said", "text": '{"rel_tscripts": "Pass me the red cup.", '
                                                  '"relevance": "I asked for the red cup"}'},
    {"match": "Does what was found cover", "text": '{"binary_score": "yes"}'},
    {"match": "Choose the best option", "text": '{"mcq_prediction": "A", "justification": "the red cup"}'},
]


def test_every_step_runs_frames_then_the_graph_then_the_transcript_and_the_grader_is_ignored(tmp_path, tiny_clip,
                                                                                              eg_store):
    # windows by time here (the release compares them as text: its cases in test_egagent_release_cases.py)
    answer, calls = _episode(tmp_path, tiny_clip, AGENT_RULES, eg_store, window_compare="numeric")
    assert answer.pred == "A" and answer.error is None
    roles = [c["purpose"].split(":")[1] for c in calls]
    step = ["frame_windows", "frame_analyzer", "frame_analyzer", "sql_writer", "transcript_reader", "grader"]
    # the planner once; both steps although the grader said yes after the first (ignored); one answer
    assert roles == ["planner", *step, *step, "answer"]
    memory = answer.trace["working_memory"]
    assert memory.startswith("The long video is taken from the first-person perspective of the camera wearer. ")
    # one line per step, its two windows' entries joined (100-200 HHMMSS: the video's end), as the release appends
    assert memory.count("Frame_Search: Between 00:00:00 and 00:00:30 on Day 1 : a red cup on the counter Between "
                        "00:01:00 and 00:02:00 on Day 1 : a red cup on the counter \n") == 2
    assert memory.count("EntityGraph_Search: Camera Wearer (Person) USES Red Cup (Object) on day 1 between time "
                        "00:00:04,00 and 00:00:06,50. \n") == 2  # the DELETE refused, the LIKE rung kept
    assert memory.count("Transcript_Search: I asked for the red cup\n") == 2
    graph = answer.trace["plan_steps"][0]["entity_graph"]
    assert (graph["rung"], graph["tried"], graph["rows"]) == (2, 3, 1) and len(graph["errors"]) == 1
    frames = answer.trace["plan_steps"][0]["frames"]
    # closed windows within the video; the second (60 frames, 60-119 s) keeps 50: one query, the latest 50
    assert len(frames[0]["frames"]) == 31 and frames[1]["frames"] == [float(t) for t in range(119, 69, -1)]
    assert all(0 <= t <= 30 for t in frames[0]["frames"])
    tally = answer.tally
    assert tally.behaviour["rounds"] == 2 and tally.behaviour["qa_calls"] == 1 and tally.behaviour["tool_calls"] == 6
    assert tally.behaviour["frames_seen"] == 2 * (31 + 50)  # <= 50 frames per analyzer call
    assert tally.health["failed_search_calls"] == 2 and tally.health["builder_losses"] == 1
    def images(call):
        return sum(isinstance(part, dict) and "image" in part for m in call["payload"]["messages"]
                   for part in (m["content"] if isinstance(m["content"], list) else []))
    analyzers = [c for c in calls if c["purpose"] == "egagent:frame_analyzer"]
    assert [images(c) for c in analyzers] == [31, 50, 31, 50]  # only the analyzer ever sees images (E-L5)
    assert analyzers[0]["payload"]["messages"][0]["content"][1] == "00:00:30 on DAY1"  # its label before it
    assert all(images(c) == 0 for c in calls if c["purpose"] != "egagent:frame_analyzer")
    final = [c for c in calls if c["purpose"] == "egagent:answer"][0]
    assert "Query Time" not in str(final) and "The question is asked at 00:02:00 on DAY1" in str(final)


def test_a_window_without_a_time_loses_the_question_as_the_release_does_unless_whole_day_is_chosen(
        tmp_path, tiny_clip, eg_store):
    import json as _json

    open_window = {"fs_params": [{"text_queries": ["cup"], "day": 1, "start_t": None, "end_t": None}]}
    rules = [{"match": "You choose where to look", "text": _json.dumps(open_window)}, *AGENT_RULES]
    built = eg_store
    answer, calls = _episode(tmp_path / "error", tiny_clip, rules, built)
    assert answer.pred is None and "frame window without a time" in answer.error
    assert [c["purpose"] for c in calls] == ["egagent:planner", "egagent:frame_windows"]
    answer, _ = _episode(tmp_path / "whole", tiny_clip, rules, built, incomplete_window="whole_day")
    assert answer.pred == "A" and "Between 00:00:00 and 00:02:00 on Day 1" in answer.trace["working_memory"]


# --- the release's layout (E-F4..F6) ------------------------------------------------------------------------------
def _release_folder(root, vectors):
    """A hand-written EgoLife-layout release folder: two days of an entity graph under the agent's DB name, the
    merged frames table with float32 BLOBs, the transcript cache."""
    import csv
    import sqlite3

    from senri.memory.egagent.graph import INDEXES, SCHEMA, TABLE

    graph = root / "dbs/egolife/egolife_jake_entity_graph_dtonly_concatwith_fused_dt_and_gpt-4.1captions.db"
    graph.parent.mkdir(parents=True)
    with sqlite3.connect(graph) as db:
        db.execute(SCHEMA)
        for n, columns in enumerate(INDEXES):
            db.execute(f"CREATE INDEX i{n} ON {TABLE} ({columns})")
        db.executemany(f"INSERT INTO {TABLE} (day, start_t, end_t, transcript, source_id, source_type, target_id, "
                       f"target_type, rel_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       [(1, 9300000, 9301050, "hi", "Jake", "Person", "Tasha", "Person", "TALKS_TO"),  # 09:30:00
                        (2, 11000000, 11000500, "", "Jake", "Person", "Guitar", "Object", "USES")])
    db.close()
    with sqlite3.connect(root / "dbs/egolife/egolife_jake_frames.db") as db:
        db.execute("CREATE TABLE frames (id INTEGER PRIMARY KEY, day TEXT, timestamp TEXT, path TEXT, embedding BLOB)")
        db.executemany("INSERT INTO frames (day, timestamp, path, embedding) VALUES (?, ?, ?, ?)",
                       [("day1", str(9300000 + 100 * k), f"f{k}.jpg", v.astype("float32").tobytes())
                        for k, v in enumerate(vectors)] + [("day2", "11000000", "g.jpg", vectors[0].tobytes())])
    db.close()
    (root / "transcript_csv").mkdir()
    with (root / "transcript_csv/diarized_transcripts_all_days_JAKE.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["day", "start_t", "end_t", "transcript_chinese", "transcript_english"])
        writer.writerow([1, "09:30:00", "09:30:02", "你好", "Hello Tasha"])
        writer.writerow([2, "11:00:00", "11:00:01", "", "Play it"])
    return graph


def test_a_release_day_imports_into_a_store_and_a_store_exports_back_into_the_release_layout(tmp_path):
    import yaml

    from senri.memory.egagent.release import export_release, import_release
    from senri.memory.egagent.store import EGAgentStore

    vectors = np.eye(3, 4, dtype=np.float32) * 2.0
    _release_folder(tmp_path / "release", vectors)
    cfg = {**yaml.safe_load(open("config/memory_system/egagent.yaml"))}
    record = import_release(tmp_path / "release", tmp_path / "store", cfg, "eg")
    assert record["relationships"] == 1 and record["transcript"].startswith("1 cues")
    assert record["frames"].startswith("3 frame vectors of dimension 4")
    store = EGAgentStore.open(tmp_path / "store", cfg, None)
    (row,) = store.graph_rows()
    assert (row["day"], row["start_t"], row["source_id"], row["target_id"]) == (1, 9300000, "Jake", "Tasha")
    assert store.items()[0].start_s == 9 * 3600 + 30 * 60  # T8 → seconds, before 10:00 included
    assert np.allclose(np.linalg.norm(store.frame_vectors, axis=1), 1.0)  # normalised as the release does at query time
    assert store.transcript["text"].to_list() == ["Hello Tasha"]
    written = export_release(tmp_path / "store", tmp_path / "out")
    again = import_release(tmp_path / "out", tmp_path / "store2", cfg, "eg")
    assert again["relationships"] == 1 and again["frames"].startswith("3 frame vectors")
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == [
        "dbs/egolife/egolife_jake_entity_graph_dtonly_concatwith_fused_dt_and_gpt-4.1captions.db",
        "dbs/egolife/egolife_jake_frames.db", "transcript_csv/diarized_transcripts_all_days_JAKE.csv"]


def test_the_release_s_known_path_mismatches_and_bad_fields_are_named(tmp_path):
    import sqlite3

    from senri.memory.egagent.release import import_release

    root = tmp_path / "builder_only"
    (root / "dbs/entity_graph").mkdir(parents=True)
    sqlite3.connect(root / "dbs/entity_graph/egolife_entity_graph_fused.db").close()
    with pytest.raises(ValueError, match=r"missing .* found the builder's per-graph output "
                                         r"dbs/entity_graph/egolife_entity_graph_fused\.db .* merge"):
        import_release(root, tmp_path / "s1", {}, "eg")
    root = tmp_path / "unmerged"
    graph = _release_folder(root, np.eye(2, 4, dtype=np.float32))
    (root / "dbs/egolife/egolife_jake_frames.db").rename(root / "dbs/egolife/egolife_jake_frames_day1.db")
    with pytest.raises(ValueError, match=r"egolife_jake_frames_day1\.db exists: the release merges"):
        import_release(root, tmp_path / "s2", {}, "eg")
    with sqlite3.connect(graph) as db:
        db.execute("UPDATE entity_graph_table SET start_t = 9999999 WHERE day = 1")  # 99 seconds past a minute
    db.close()
    (root / "dbs/egolife/egolife_jake_frames_day1.db").rename(root / "dbs/egolife/egolife_jake_frames.db")
    with pytest.raises(ValueError, match="field 'start_t'/'end_t' is not a T8 time"):
        import_release(root, tmp_path / "s3", {}, "eg")


def test_the_bm25_transcript_search_writes_keyword_queries_and_shows_the_analyzer_the_hits_in_row_order(
        tmp_path, tiny_clip, eg_store):
    from senri.methods.egagent import bm25_hits

    texts = ["Pass me the red cup.", "Thanks, Anna.", "The kettle is on.", "Where is the red kettle?"]
    assert bm25_hits(texts, ["kettle"], positive_only=True) == [2, 3]
    assert bm25_hits(texts, ["red cup", "anna"], positive_only=True) == [0, 1, 3]
    assert bm25_hits(texts, ["kettle"], k=1) in ([2], [3]) and bm25_hits([], ["x"], positive_only=True) == []
    rules = [{"match": "You search the transcript", "text": '{"text_queries": ["red cup"]}'},
             {"match": "found by a keyword search", "text": '{"relevance": "I asked for the red cup at 00:00:04"}'},
             *AGENT_RULES]
    built = eg_store
    answer, _ = _episode(tmp_path / "release", tiny_clip, rules, built, transcript_search="bm25")
    assert answer.pred is None and "more than the 3 cues" in answer.error  # under 100 cues: bm25s raises
    answer, calls = _episode(tmp_path / "option", tiny_clip, rules, built, transcript_search="bm25",
                             bm25_positive_only=True)
    assert answer.pred == "A"
    roles = [c["purpose"].split(":")[1] for c in calls]
    assert "transcript_reader" not in roles and roles.count("transcript_queries") == 2
    analyzer = [c for c in calls if c["purpose"] == "egagent:transcript_analyzer"][0]
    assert "Day1 00:00:04 to 00:00:06 - 'Pass me the red cup.'" in analyzer["payload"]["messages"][0]["content"][0]
    assert answer.trace["working_memory"].count("Transcript_Search: I asked for the red cup at 00:00:04\n") == 2


def test_a_frame_step_searches_every_window_and_max_windows_caps_them(tmp_path, tiny_clip, eg_store):
    import json as _json

    six = {"fs_params": [{"text_queries": [f"q{k}"], "day": 1, "start_t": 10 * k, "end_t": 10 * k + 5}
                         for k in range(6)]}
    rules = [{"match": "You choose where to look", "text": _json.dumps(six)}, *AGENT_RULES]
    built = eg_store
    answer, calls = _episode(tmp_path / "release", tiny_clip, rules, built)
    windows = answer.trace["plan_steps"][0]["frames"]
    assert [w["queries"] for w in windows] == [[f"q{k}"] for k in range(6)]  # E-R1: the release runs them all
    assert [c["purpose"] for c in calls].count("egagent:frame_analyzer") == 2 * 6
    answer, calls = _episode(tmp_path / "capped", tiny_clip, rules, built, max_windows=4)
    windows = answer.trace["plan_steps"][0]["frames"]
    assert [w["queries"] for w in windows] == [["q0"], ["q1"], ["q2"], ["q3"]]  # senri's option: the first 4
    assert [c["purpose"] for c in calls].count("egagent:frame_analyzer") == 2 * 4

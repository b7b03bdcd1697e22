import csv
from pathlib import Path

import polars as pl
import pytest

from senri.aggregate import AggregateError, aggregate, percent_value
from senri.benchmarks.senri import LAYOUT as SENRI_LAYOUT, TASK_DIRECTION
from senri.records import LETTERS, Prediction, Question, to_frame

#: SENRI-Bench's main-table columns (Total, ES, L, NP, OC, RR, SE, RER, TER), from its benchmark module.
CATEGORIES = SENRI_LAYOUT.keys

from reference import reference_file
#: SENRI-Bench category sizes (benchmark.md).
SIZES = {"L": 89, "RR": 90, "OC": 86, "NP": 69, "RER": 88, "TER": 78}


def _questions(sizes=SIZES, n_videos=10):
    rows, k = [], 0
    for task, n in sizes.items():
        for i in range(n):
            rows.append(Question(video_id=f"v{k % n_videos:02d}", qid=f"{task}-{i}", task_type=task,
                                 direction=TASK_DIRECTION[task], question="?", option_a="a", option_b="b",
                                 option_c="c", option_d="d", answer=LETTERS[k % 4]))
            k += 1
    return to_frame(rows, Question)


def _predictions(questions, method, model, correct_by_task, parse_fail=(), error=()):
    rows, seen = [], {t: 0 for t in SIZES}
    for q in questions.iter_rows(named=True):
        right = seen[q["task_type"]] < correct_by_task.get(q["task_type"], 0)
        seen[q["task_type"]] += 1
        pred = q["answer"] if right else LETTERS[(LETTERS.index(q["answer"]) + 1) % 4]
        if q["qid"] in parse_fail or q["qid"] in error:
            pred = None
        rows.append(Prediction(video_id=q["video_id"], qid=q["qid"], task_type=q["task_type"], method=method,
                               model=model, pred=pred, answer=q["answer"], correct=pred == q["answer"],
                               parse_ok=pred is not None, raw_output=pred, n_llm_calls=0, n_vlm_calls=0,
                               prompt_tokens=0, completion_tokens=0, latency_s=0.0,
                               error="TimeoutError" if q["qid"] in error else None))
    return to_frame(rows, Prediction)


def test_half_up_rounding_from_integers():
    assert percent_value(1, 16) == 6.3  # 6.25: Python's round() would give 6.2
    assert percent_value(3, 16) == 18.8
    assert percent_value(1, 3) == 33.3 and percent_value(2, 3) == 66.7
    assert percent_value(0, 0) is None and percent_value(500, 500) == 100.0


def test_hand_computed_case(tmp_path):
    questions = _questions({"L": 4, "RR": 2, "OC": 2, "NP": 2, "RER": 3, "TER": 1}, n_videos=2)
    preds = _predictions(questions, "m", "x", {"L": 3, "RR": 1, "OC": 0, "NP": 2, "RER": 1, "TER": 1})
    path = tmp_path / "p.parquet"
    preds.write_parquet(path)
    row = aggregate([path], questions, tmp_path / "t")["main"].row(0, named=True)
    # ES: 3+1+0+2 = 6 of 10; SE: 1+1 = 2 of 4; total 8 of 14 = 57.142… → 57.1
    assert (row["correct_es"], row["n_es"], row["es"]) == (6, 10, 60.0)
    assert (row["correct_se"], row["n_se"], row["se"]) == (2, 4, 50.0)
    assert (row["correct_total"], row["n_total"], row["total"]) == (8, 14, 57.1)
    assert (row["l"], row["rr"], row["oc"], row["np"], row["rer"], row["ter"]) == (75.0, 50.0, 0.0, 100.0, 33.3, 100.0)


def _reference_rows():
    for name in ("paper_table2.csv", "paper_table3.csv", "paper_table4.csv", "paper_table11.csv"):
        with reference_file(name).open() as handle:
            for i, row in enumerate(csv.DictReader(handle)):
                label = row.get("setting") or row.get("method") or row.get("memory_system") or row.get("variant")
                if label and label.startswith("Random guessing"):
                    continue  # an expectation (25.0 everywhere), not counts
                yield f"{name}:{i}", row


def _reconstruct(row):
    counts = {}
    for task, n in SIZES.items():
        matches = [c for c in range(n + 1) if percent_value(c, n) == float(row[task.lower()])]
        assert len(matches) == 1, (task, row[task.lower()], matches)
        counts[task] = matches[0]
    return counts


def test_every_printed_number_of_the_paper_tables_is_reproduced(tmp_path):
    questions = _questions()
    assert questions.height == 500
    rows = list(_reference_rows())
    assert len(rows) == 28 + 8 + 4 + 4
    paths = []
    for k, (label, row) in enumerate(rows):
        path = tmp_path / f"{k}.parquet"
        _predictions(questions, label, "ref", _reconstruct(row)).write_parquet(path)
        paths.append(path)
    main = aggregate(paths, questions, tmp_path / "tables")["main"]
    assert main.height == len(rows)
    for label, row in rows:
        got = main.filter(pl.col("method") == label).row(0, named=True)
        for column in CATEGORIES:
            assert got[column] == float(row[column]), (label, column, got[column], row[column])
        assert got["n"] == 500 and got["n_es"] == 334 and got["n_se"] == 166


def test_failures_and_missing_predictions_count_wrong_and_show(tmp_path):
    questions = _questions({"L": 4, "RR": 4, "OC": 4, "NP": 4, "RER": 4, "TER": 4}, n_videos=2)
    everything = {t: 4 for t in SIZES}
    preds = _predictions(questions, "m", "x", everything, parse_fail={"L-0"}, error={"L-1"})
    preds.filter(pl.col("qid") != "TER-3").write_parquet(tmp_path / "p.parquet")
    tables = aggregate([tmp_path / "p.parquet"], questions, tmp_path / "t")
    row = tables["main"].row(0, named=True)
    assert (row["correct_total"], row["n_total"]) == (21, 24)
    assert (row["parse_failures"], row["errors"], row["missing"]) == (1, 1, 1)
    assert row["timeouts"] == 1  # the error reads "TimeoutError": the match ignores case
    markdown = (tmp_path / "t" / "main.md").read_text()
    assert "| m † | x |" in markdown and "† run with" in markdown
    positions = tables["answer_positions"]
    assert positions.filter(pl.col("method") == "m").row(0, named=True)["none"] == 3  # 2 failed + 1 missing
    per_video = tables["per_video"]
    assert per_video["n"].sum() == 24 and per_video["correct"].sum() == 21


def test_a_prediction_cannot_claim_correctness_it_lacks(tmp_path):
    questions = _questions({"L": 2, "RR": 2, "OC": 2, "NP": 2, "RER": 2, "TER": 2}, n_videos=1)
    preds = _predictions(questions, "m", "x", {}).with_columns(correct=pl.lit(True))
    preds.write_parquet(tmp_path / "p.parquet")
    assert aggregate([tmp_path / "p.parquet"], questions, tmp_path / "t")["main"]["correct_total"][0] == 0


def test_duplicate_and_stale_predictions_are_errors(tmp_path):
    questions = _questions({"L": 2, "RR": 2, "OC": 2, "NP": 2, "RER": 2, "TER": 2}, n_videos=1)
    preds = _predictions(questions, "m", "x", {})
    preds.write_parquet(tmp_path / "a.parquet")
    preds.head(1).write_parquet(tmp_path / "b.parquet")
    with pytest.raises(AggregateError, match="more than once"):
        aggregate([tmp_path / "a.parquet", tmp_path / "b.parquet"], questions, tmp_path / "t")
    with pytest.raises(AggregateError, match="not in the question table"):
        aggregate([tmp_path / "a.parquet"], questions.tail(5), tmp_path / "t")


def test_prediction_files_read_at_once_or_one_by_one_give_the_same_rows_and_name_a_bad_file(tmp_path):
    """Issue 53: files of one schema are read and checked at once; an older file without a later column (filled
    with its default) or a file that breaks the contract sends the read file by file, the error naming it."""
    from senri.aggregate import load_predictions
    from senri.records import TableError

    questions = _questions({"L": 2, "RR": 2}, n_videos=2)
    a, b = _predictions(questions, "m", "x", {"L": 1}), _predictions(questions, "n", "x", {"RR": 2})
    a.write_parquet(tmp_path / "a.parquet")
    b.write_parquet(tmp_path / "b.parquet")
    together = load_predictions([tmp_path / "a.parquet", tmp_path / "b.parquet"])
    assert together.equals(pl.concat([a, b]))
    b.drop("memory", "rounds").write_parquet(tmp_path / "old.parquet")  # written before those columns
    mixed = load_predictions([tmp_path / "a.parquet", tmp_path / "old.parquet"])
    assert mixed.equals(together)
    a.with_columns(qid=pl.lit(None, pl.String)).write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(TableError, match=rf"bad\.parquet: not a valid Prediction table: column 'qid' has {a.height} null"):
        load_predictions([tmp_path / "b.parquet", tmp_path / "bad.parquet"])


def test_outputs_in_every_format(tmp_path):
    questions = _questions({"L": 2, "RR": 2, "OC": 2, "NP": 2, "RER": 2, "TER": 2}, n_videos=2)
    _predictions(questions, "random", "none", {"L": 1}).write_parquet(tmp_path / "p.parquet")
    aggregate([tmp_path], questions, tmp_path / "t")  # a folder works too
    for name in ("main", "per_video", "answer_positions"):
        assert pl.read_parquet(tmp_path / "t" / f"{name}.parquet").height > 0
        assert pl.read_csv(tmp_path / "t" / f"{name}.csv").height > 0
        assert (tmp_path / "t" / f"{name}.md").read_text().startswith("| ")


def test_the_memory_captioner_is_part_of_a_runs_identity(tmp_path):
    questions = _questions({"L": 4, "RR": 2, "OC": 2, "NP": 2, "RER": 3, "TER": 1}, n_videos=2)
    perception = _predictions(questions, "videolucy", "m", {"L": 4}).with_columns(memory=pl.lit("perception"))
    vlm = _predictions(questions, "videolucy", "m", {"L": 2}).with_columns(memory=pl.lit("qwen25vl7b_vllm"))
    old = _predictions(questions, "blind", "m", {"L": 1}).drop("memory", "n_caption_calls", "caption_s")
    for name, frame in (("p", perception), ("v", vlm), ("old", old)):
        frame.write_parquet(tmp_path / f"{name}.parquet")
    tables = aggregate([tmp_path / f"{n}.parquet" for n in ("p", "v", "old")], questions, tmp_path / "out")
    main = tables["main"]
    assert main.select("method", "memory", "correct_l").rows() == [
        ("blind", "none", 1), ("videolucy", "perception", 4), ("videolucy", "qwen25vl7b_vllm", 2)]
    assert set(tables["per_video"]["memory"]) == {"none", "perception", "qwen25vl7b_vllm"}
    assert tables["answer_positions"]["memory"].to_list() == ["", "none", "perception", "qwen25vl7b_vllm"]
    assert "| Method | Model | Memory |" in (tmp_path / "out/main.md").read_text()


def test_run_health_sums_each_runs_prediction_columns_and_counts_its_failed_questions(tmp_path):
    from senri.aggregate import RUN_HEALTH_COLUMNS, load_predictions, run_health_table, score
    from senri.records import BEHAVIOUR_COUNTS, HEALTH_COUNTS, STORE_COUNTS

    questions = _questions({"L": 2, "RR": 2, "OC": 2, "NP": 2, "RER": 2, "TER": 2}, n_videos=2)
    agent = _predictions(questions, "senri_agent", "x", {"L": 2, "RR": 2, "OC": 1}, parse_fail={"NP-0"},
                         error={"NP-1"})
    # Hand-set counts on three questions; every other row keeps the contract's default of 0.
    counts = {
        "L-0": {"forced_answers": 1, "forced_recovered": 1, "context_trims": 2, "capped_cells": 5,
                "cell_s_requested": 800, "cell_s_seen": 320, "stripped_checks": 1, "repeated_queries": 2,
                "rounds": 6, "searches": 5, "memories_returned": 9, "checks": 3, "cells": 40, "frames_seen": 320},
        "RR-1": {"forced_answers": 1, "timeouts": 3, "failed_memory_updates": 1, "refused_checks": 2,
                 "cell_s_requested": 200, "cell_s_seen": 200, "rounds": 2, "searches": 1, "qa_calls": 1,
                 "bypasses": 2, "failed_search_calls": 1, "unparsed_tool_calls": 1, "spent_steps": 2,
                 "rejected_tool_calls": 3, "truncated_replies": 1, "black_frames": 4, "tool_calls": 5},
        "TER-1": {"truncated_captions": 4, "failed_captions": 1, "context_trims": 1, "rounds": 1,
                  "answered_without_retrieval": 1},
        # a store's builder losses are repeated on each question over it, 3 on each of two questions, and
        # marked as the store's (issue 39 item 6): counted once per store (video) the run read
        "OC-0": {"builder_losses": 3, "store_builder_losses": 3, "failed_search_calls": 2},
        "OC-1": {"builder_losses": 3, "store_builder_losses": 3},
    }
    agent = agent.with_columns(
        pl.col("qid").replace_strict({q: c.get(name, 0) for q, c in counts.items()}, default=0,
                                     return_dtype=pl.Int64).alias(name)
        for name in (*HEALTH_COUNTS, *BEHAVIOUR_COUNTS, *STORE_COUNTS.values())
    ).filter(pl.col("qid") != "TER-0")  # one missing prediction
    store_videos = agent.filter(pl.col("qid").is_in(["OC-0", "OC-1"]))["video_id"].n_unique()
    perception = _predictions(questions, "senri_agent", "x", {"L": 1}).with_columns(
        memory=pl.lit("perception"), context_trims=pl.lit(1, dtype=pl.Int64))
    predictions = pl.concat([agent, perception])
    predictions.write_parquet(tmp_path / "p.parquet")
    loaded = load_predictions([tmp_path])
    table = run_health_table(loaded, score(loaded, questions))
    assert table.columns == ["method", "model", "memory", *RUN_HEALTH_COLUMNS]
    vlm, text = table.row(0, named=True), table.row(1, named=True)
    assert (vlm["memory"], text["memory"]) == ("none", "perception")
    assert {k: vlm[k] for k in RUN_HEALTH_COLUMNS} == {
        "questions": 12, "correct": 5, "accuracy": 41.7, "forced_answers": 2, "forced_recovered": 1,
        "parse_failures": 1, "errors": 1, "timeouts": 3, "context_trims": 3, "truncated_captions": 4,
        "failed_captions": 1, "builder_losses": 3 * store_videos, "capped_cells": 5, "cell_s_requested": 1000, "cell_s_seen": 520, "seen_share": 52.0,
        "failed_memory_updates": 1, "stripped_checks": 1, "refused_checks": 2, "repeated_queries": 2,
        "failed_search_calls": 3, "unparsed_tool_calls": 1, "spent_steps": 2, "rejected_tool_calls": 3,
        "truncated_replies": 1, "black_frames": 4, "context_overflows": 0, "defaulted_answers": 0, "capped_llm_calls": 0, "missing": 1,
        # behaviour: means over the 11 answered questions (rounds 9, searches 6, memories 9, QA calls 1), totals
        "rounds_per_q": 0.8, "searches_per_q": 0.5, "memories_per_q": 0.8, "qa_calls_per_q": 0.1, "bypasses": 2,
        "checks": 3, "cells": 40, "frames_seen": 320, "tool_calls": 5, "no_retrieval": 1}
    assert (text["questions"], text["correct"], text["context_trims"], text["missing"]) == (12, 1, 12, 0)
    assert text["seen_share"] is None  # no check asked for any seconds: no share, not 0 %


def test_a_store_s_counts_are_counted_once_per_store_not_once_per_question():
    """Issue 39 item 6: three questions over one WorldMM store that lost 4 items, and one that also had a caption
    of its own fail, give the run 4 builder losses and 2 failed captions (1 the store's, 1 the question's), and
    the per-store table one row with the store's own counts."""
    from senri.aggregate import run_health_table, score, store_health_table, with_defaults

    questions = _questions({"L": 3}, n_videos=1)
    preds = with_defaults(_predictions(questions, "worldmm", "m", {"L": 2})).with_columns(
        memory=pl.lit("worldmm/perception"), builder_losses=pl.lit(4, pl.Int64), store_builder_losses=pl.lit(4, pl.Int64),
        failed_captions=pl.lit(1, pl.Int64), store_failed_captions=pl.lit(1, pl.Int64))
    preds = preds.with_columns(pl.when(pl.col("qid") == preds["qid"][0]).then(2).otherwise(1).cast(pl.Int64)
                               .alias("failed_captions"))
    health = run_health_table(preds, score(preds, questions)).row(0, named=True)
    assert (health["builder_losses"], health["failed_captions"]) == (4, 2)
    stores = store_health_table(preds)
    assert stores.rows(named=True) == [{"memory": "worldmm/perception", "video_id": preds["video_id"][0], "runs": 1,
                                        "questions": 3, "failed_captions": 1, "truncated_captions": 0,
                                        "builder_losses": 4}]
    # Files written before the store columns read them as 0: the old sum over questions.
    old = preds.drop("store_builder_losses", "store_failed_captions", "store_truncated_captions")
    again = run_health_table(with_defaults(old), score(preds, questions)).row(0, named=True)
    assert again["builder_losses"] == 12


@pytest.mark.parametrize("error, timed_out", [("TimeoutError", True), ("ReadTimeout: read timed out", True),
                                              ("request TIMED OUT after 600 s", True), ("time out", True),
                                              ("ConnectionError", False), ("timestamp missing", False)])
def test_a_timeout_is_counted_whatever_its_case(tmp_path, error, timed_out):
    """Backends spell a timeout "TimeoutError", "ReadTimeout", "timed out": each counts, in any case."""
    questions = _questions({"L": 1, "RR": 0, "OC": 0, "NP": 0, "RER": 0, "TER": 0}, n_videos=1)
    preds = _predictions(questions, "m", "x", {}, error={"L-0"}).with_columns(error=pl.lit(error))
    preds.write_parquet(tmp_path / "p.parquet")
    row = aggregate([tmp_path / "p.parquet"], questions, tmp_path / "t")["main"].row(0, named=True)
    assert (row["errors"], row["timeouts"]) == (1, int(timed_out))


def test_llm_calls_per_question_by_role_as_mean_median_and_max_with_the_call_cap_and_a8_beside_them():
    """Issue 52 item 3: agent calls (LLM and VLM calls less a VLM captioner's, which CallTally books in both) and
    captioner calls apart, per run; VideoLucy appendix A.8's published rows under them, marked."""
    from senri.aggregate import llm_call_table
    from senri.report.published import with_a8_rows

    rows = [("videolucy", "m", "captions/qwen25vl7b_vllm", *calls) for calls in ((5, 3, 3), (7, 2, 2), (12, 0, 0))]
    rows += [("videolucy", "m", "captions/perception", 4, 0, 6), ("blind", "m", "none", 1, 0, 0)]
    predictions = pl.DataFrame(rows, schema=["method", "model", "memory", "n_llm_calls", "n_vlm_calls",
                                             "n_caption_calls"], orient="row")
    caps = pl.DataFrame({"method": ["videolucy", "blind"], "model": ["m", "m"], "max_llm_calls": [20, None]})
    table = llm_call_table(predictions, caps)
    by_memory = {r["memory"]: r for r in table.iter_rows(named=True)}
    vlm, perception = by_memory["captions/qwen25vl7b_vllm"], by_memory["captions/perception"]
    assert {k: vlm[k] for k in ("questions", "agent_mean", "agent_median", "agent_max", "caption_mean",
                                "caption_median", "caption_max", "max_llm_calls")} == {
        "questions": 3, "agent_mean": 8.0, "agent_median": 7.0, "agent_max": 12, "caption_mean": 1.7,
        "caption_median": 2.0, "caption_max": 3, "max_llm_calls": 20}
    assert (perception["agent_max"], perception["caption_max"]) == (4, 6)  # perception captions are no VLM calls
    assert by_memory["none"]["max_llm_calls"] is None
    shown = with_a8_rows(table)
    published = shown.filter(pl.col("source").str.starts_with("published"))
    assert published["method"].to_list() == ["VideoLucy (published)", "VideoAgent (published)",
                                             "VideoTree (published)"]
    assert published["agent_mean"].to_list() == [6.3, 14.1, 9.6] and set(published["max_llm_calls"]) == {20}
    assert set(shown.filter(~pl.col("source").str.starts_with("published"))["source"]) == {"this run set"}


def test_a_native_benchmark_s_main_table_shows_its_own_columns_under_its_official_scorer(tmp_path):
    """SENRI's direction and task-type columns mean nothing for Video-MME's questions: its main table has Video-MME's
    own columns (Short / Medium / Long / Avg, VideoLucy Table 1), counted by Video-MME's official scorer (a reply it
    cannot read is left out of N), and says so; SENRI's questions keep their columns and get no note."""
    questions = _questions({"L": 2, "RR": 2, "OC": 0, "NP": 0, "RER": 0, "TER": 0}, n_videos=1)
    path = tmp_path / "p.parquet"
    _predictions(questions, "m", "x", {"L": 1}).write_parquet(path)
    senri_md = (tmp_path / "senri") / "main.md"
    aggregate([path], questions, tmp_path / "senri")
    assert "| ES |" in senri_md.read_text() and "official scorer" not in senri_md.read_text()

    native = questions.with_columns(benchmark=pl.lit("videomme"), task_type=pl.lit("Temporal Reasoning"),
                                    categories=pl.lit(["Temporal Reasoning"]),
                                    split=pl.Series(["short", "short", "long", "long"]))
    # The first reply is one the official scorer reads; the last one it cannot (no capital A–D): skipped.
    replies = _predictions(questions, "m", "x", {"L": 1})
    replies = replies.with_columns(raw_output=pl.Series([replies["raw_output"][0], "B", "C", "i am not sure"]))
    replies.write_parquet(path)
    tables = aggregate([path], native, tmp_path / "native")
    text = (tmp_path / "native" / "main.md").read_text()
    header = text.splitlines()[0]
    assert "| Short | Medium | Long | Avg |" in header and not any(f"| {c} |" in header for c in ("ES", "L", "TER"))
    assert "videomme_official" in text and "results/report/tables/benchmark_videomme.md" in text
    columns = pl.read_parquet(tmp_path / "native" / "main.parquet").columns
    assert {"short", "avg", "correct_avg", "n_avg"} <= set(columns) and "es" not in columns
    row = tables["main"].row(0, named=True)
    answers = native["answer"].to_list()
    right = [replies["raw_output"][0] == answers[0], answers[1] == "B", answers[2] == "C"]
    assert (row["correct_avg"], row["n_avg"], row["n"]) == (sum(right), 3, 3)
    assert (row["correct_short"], row["n_short"], row["n_long"], row["n_medium"]) == (sum(right[:2]), 2, 1, 0)
    assert row["medium"] is None

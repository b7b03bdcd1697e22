"""A benchmark's report tables on hand-made runs: the official table with integer counts and the published
rows, every scorer side by side on the same replies, the flips between them, paired statistics per column."""

from __future__ import annotations

import polars as pl

from senri.benchmarks import BENCHMARKS
from senri.benchmarks.layouts import layout
from senri.records import Prediction, Question, to_frame
from senri.benchmarks.scoring import question_options
from senri.report.benchmark import benchmark_tables

VIDEOMME = BENCHMARKS.load("videomme")
#: (qid, split, answer, reply of run "m/x"): the spec's tricky replies (VM9, VM10, VM13).
CASES = [("001-1", "short", "C", "C. Berries."), ("001-2", "short", "B", "Best answer: C"),
         ("301-1", "medium", "C", "Answer: C. Jade."),
         ("301-2", "medium", "A", "i think it is probably the one with the most items shown in the clip"),
         ("601-1", "long", "D", "The answer is D"), ("601-2", "long", "A", None)]


def _questions() -> pl.DataFrame:
    return to_frame([Question(video_id=qid[:3], qid=qid, task_type="Counting Problem", direction="",
                              question="?", option_a="Apples", option_b="Candles", option_c="Jade", option_d="Berries",
                              answer=answer, benchmark="videomme", split=split, categories=["Counting Problem"])
                     for qid, split, answer, _ in CASES], Question)


def _predictions(method: str, replies: dict[str, str | None]) -> pl.DataFrame:
    return to_frame([Prediction(video_id=qid[:3], qid=qid, task_type="Counting Problem", method=method, model="x",
                                pred=None, answer=answer, correct=False, parse_ok=False, raw_output=replies[qid],
                                n_llm_calls=0, n_vlm_calls=0, prompt_tokens=0, completion_tokens=0, latency_s=0.0,
                                error=None) for qid, _, answer, _ in CASES if qid in replies], Prediction)


CONFIG = {"pairs": [{"baseline": "c/x", "treatment": "m/x"}], "bootstrap_resamples": 200, "confidence": 0.95}


def _tables():
    runs = pl.concat([_predictions("m", {qid: reply for qid, _, _, reply in CASES}),
                      _predictions("c", {qid: answer for qid, _, answer, _ in CASES if qid != "601-2"})])
    return benchmark_tables(runs, _questions(), VIDEOMME, CONFIG, seed=0)


def test_official_table_with_counts_and_published_rows():
    tables = _tables()
    m = tables.table.filter(pl.col("method") == "m").row(0, named=True)
    # short: C right, "Best answer: C" read as B: right; medium: "Answer: C. Jade." right, the long reply skipped;
    # long: the reply None makes the official scorer raise, and its way around that (skip_missing) leaves the
    # whole video 601 out: both long questions skipped.
    assert (m["correct_short"], m["n_short"], m["correct_medium"], m["n_medium"], m["correct_long"], m["n_long"]) \
        == (2, 2, 1, 1, 0, 0)
    assert (m["avg"], m["correct_avg"], m["n_avg"], m["skipped"], m["missing"]) == (100.0, 3, 3, 3, 0)
    c = tables.table.filter(pl.col("method") == "c").row(0, named=True)
    assert (c["correct_avg"], c["n_avg"], c["missing"]) == (4, 4, 1)       # absent: its video left out (VM12)
    lucy = tables.published.filter(pl.col("method") == "VideoLucy").row(0, named=True)
    assert (lucy["source"], lucy["short"], lucy["avg"]) == ("published", 78.6, 72.5)
    assert tables.published.height == 20


def test_every_scorer_on_the_same_replies_and_the_flips():
    tables = _tables()
    scorers = tables.scorers.filter(pl.col("method") == "m")
    assert scorers["scorer"].to_list() == list(layout("videomme").scorers)
    row = {r["scorer"]: r for r in scorers.iter_rows(named=True)}
    assert row["videomme_official"]["official"] and row["videomme_official"]["flips"] == 0
    # The old rule reads "Answer: C. Jade." as A: one question lost (video 601 is left out by both).
    assert (row["videomme_old"]["correct"], row["videomme_old"]["lost"]) == (2, 1)
    # lmms-eval 2025 counts the two unreadable replies wrong: 3 of 6 (and loses "Answer: C. Jade.").
    assert (row["lmms_eval_2025"]["correct"], row["lmms_eval_2025"]["counted"]) == (3, 6)
    flips = tables.flips.filter((pl.col("method") == "m") & (pl.col("scorer") == "videomme_old"))
    assert flips.select("qid", "official_letter", "letter", "verdict").rows() == [("301-1", "C", "A", "wrong")]
    # senri's strict parse reads "Best answer: C" as C (wrong here), and counts the unreadable replies wrong.
    strict = tables.flips.filter((pl.col("method") == "m") & (pl.col("scorer") == "senri_strict"))
    assert set(strict["qid"]) >= {"001-2", "301-2", "601-2"}


def test_paired_statistics_per_layout_column():
    stats = _tables().stats
    assert set(stats["category"]) == {"short", "medium", "avg"}      # video 601 is counted by neither run
    assert set(stats["comparison"]) == {"c/x → m/x"}   # no random run: no comparison with chance
    avg = stats.filter(pl.col("category") == "avg").row(0, named=True)
    # Questions both runs had counted: the three m answered outside video 601 (c answered all of those).
    assert (avg["n"], avg["baseline_correct"], avg["treatment_correct"]) == (3, 3, 3)


def test_question_options_drop_the_padding_of_short_option_lists():
    assert question_options({"option_a": "x", "option_b": "y", "option_c": "", "option_d": "", "option_e": None,
                             "option_f": None}) == ("x", "y")
    assert question_options({"option_a": "x", "option_b": "", "option_c": "z", "option_d": "w", "option_e": "v",
                             "option_f": "u"}) == ("x", "", "z", "w", "v", "u")

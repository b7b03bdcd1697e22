"""Caption memory, the shared caption cache and VideoLucy backtracking, with a scripted VLM captioner and a
scripted agent model over a generated video (real decoding, real caption cache, real method code)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import make_probed_clip
from senri.answer import MemoryInputs, answer_video
from senri.captioners.base import Clip, VideoMedia
from senri.memory import CaptionCache, build_memory, choose_preset, level_clips, open_service, split
from senri.records import MemoryCost, MemoryRow, Question, check_frame, to_frame, write_table

REPO = Path(__file__).resolve().parents[1]
MEMORY = yaml.safe_load((REPO / "config/memory/auto.yaml").read_text())


def test_split_covers_the_span_with_a_shorter_last_clip():
    assert split(0, 25, 10) == [(0, 10), (10, 20), (20, 25)]
    assert split(60, 90, 10) == [(60, 70), (70, 80), (80, 90)]
    assert split(0, 10, 10) == [(0, 10)]
    with pytest.raises(ValueError):
        split(0, 10, 0)


def test_presets_follow_video_length():
    assert choose_preset(MEMORY, 120)[0] == "short"
    assert choose_preset(MEMORY, 2 * 3600)[0] == "medium"
    name, levels = choose_preset(MEMORY, 6 * 3600)
    assert name == "long" and levels["coarse"].clip_s == 800 and levels["ultra_fine"].fps == 1.0
    # A 2.5 h SENRI video: coarse 150 s clips at 1 fps → 60 coarse captions.
    assert len(level_clips(MEMORY, 9000, "coarse", "x")) == 60
    with pytest.raises(ValueError, match="no preset named"):
        choose_preset({**MEMORY, "preset": "huge"}, 10)


def test_caption_cache_round_trip_and_damaged_entries(tmp_path):
    cache = CaptionCache(tmp_path / "captions")
    clip = Clip(0, 30, 1.0, "describe", "coarse")
    key = CaptionCache.key("fp", {"captioner": "x"}, clip)
    assert key != CaptionCache.key("fp", {"captioner": "y"}, clip)
    assert key != CaptionCache.key("fp", {"captioner": "x"}, Clip(0, 30, 1.0, "other", "coarse"))
    assert cache.get(key) is None
    cache.put(key, {"text": "hello", "n_frames": 3, "error": None, "created_at": "t"})
    assert cache.get(key)["text"] == "hello" and len(cache) == 1
    (tmp_path / "captions" / key[:2] / f"{key}.json").write_text("{broken")
    assert cache.get(key) is None  # recomputed, not trusted
    assert not list((tmp_path / "captions").glob("*/.*.tmp"))


# ------------------------------------------------------------------------------------------- VideoLucy

NEEDLE = "I hold a red cup"
QUESTION = Question(video_id="hall", qid="hall_1", task_type="OC", direction="ES",
                    question="What was I holding in my hand?", option_a="A phone", option_b="A red cup",
                    option_c="A book", option_d="Nothing", answer="B",
                    evidence_start_s=64.0, evidence_end_s=66.0)


def _answer(confident: bool, letter: str) -> str:
    return json.dumps({"confidence": confident, "answer": letter, "time_period": "1:04-1:06", "reason": "r"})


def _script(path: Path, localize: str, search: list[tuple[str, str]]) -> Path:
    rules = [
        # The captioner (the scripted backend's captioning rules): the needle is only in one 2 s clip.
        {"match": "from 64s to 66s", "text": f"{NEEDLE}."},
        {"match": "frames of my first-person video", "text": "I walk along a grey corridor."},
        {"match": "Which time periods", "text": localize},
        *({"match": m, "text": t} for m, t in search),
        {"match": NEEDLE, "text": _answer(True, "B")},  # the answering agent, once the needle is in memory
        {"match": "You must choose", "text": _answer(False, "A")},
        {"match": "Set confidence to true only", "text": _answer(False, "A")},
        {"match": "Periods not yet searched", "text": "I think period two"},  # malformed: no JSON
        {"match": "That reply was not valid", "text": "period two, as I said"},  # the repair fails too
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rules))
    return path


@pytest.fixture(scope="module")
def hall(tmp_path_factory):
    """A 120 s generated video, its probe facts, and its coarse memory built by a scripted VLM captioner."""
    out = tmp_path_factory.mktemp("hall")
    video, info = make_probed_clip(out, "hall")
    return {"dir": out, "video": video, "info": info}


def _memory_slice(script: Path, record: Path) -> dict:
    return {"memory": {**MEMORY, "captioner": "scripted_vlm", "max_frames": 8, "short_side": 64},
            "track": {}, "captioner_model": {"backend": "scripted", "script": str(script), "record": str(record)}}


def _run(hall, tmp_path, localize: str, search: list[tuple[str, str]], max_iterations: int = 5,
         caption_cache: Path | None = None) -> tuple[dict, list[dict], dict]:
    script = _script(tmp_path / "script.jsonl", localize, search)
    record = tmp_path / "calls.jsonl"
    memory_slice = _memory_slice(script, record)
    cache_dir = caption_cache or tmp_path / "captions"
    media = VideoMedia("hall", hall["video"], hall["info"].fingerprint, hall["info"].duration_s)
    service = open_service(memory_slice, media, cache_dir)
    rows, cost = build_memory(service, memory_slice["memory"], hall["info"].duration_s)
    service.close()
    write_table(rows, tmp_path / "memory.parquet", MemoryRow)
    check_frame(cost, MemoryCost, "cost")
    stage = {"seed": 0,
             "method": {"name": "videolucy", "implementation": "videolucy", "approach": "persistent_memory",
                        "uses_model": True, "uses_memory": True, "max_iterations": max_iterations,
                        "sparse_periods": 3, "json_retries": 1},
             "model": {"name": "agent", "backend": "scripted", "script": str(script), "record": str(record)},
             "memory": memory_slice}
    inputs = MemoryInputs(tmp_path / "memory.parquet", hall["video"], None, None, None, cache_dir)
    questions = to_frame([QUESTION], Question)
    predictions = answer_video(questions, hall["info"], stage, memory=inputs)
    row = predictions.row(0, named=True)
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    return row, calls, {"rows": rows, "cost": cost}


SEARCH_PATH = [("Periods not yet searched: [0, 1, 2]", json.dumps({"period": 1, "instruction": "what do I hold?"})),
               ("Periods not yet searched: [0, 2, 3, 4, 5]",
                json.dumps({"period": 2, "instruction": "what do I hold?"}))]


def test_the_needle_is_found_only_after_backtracking_to_ultra_fine(hall, tmp_path):
    row, calls, built = _run(hall, tmp_path, json.dumps({"periods": [2], "whole_video": False}), SEARCH_PATH)
    assert built["rows"].height == 4 and set(built["rows"]["level"]) == {"coarse"}
    assert row["pred"] == "B" and row["correct"]
    trace = json.loads(row["trace"])
    assert trace["sparse_init"] == {"whole_video": False, "picked": [2], "kept": [1, 2, 3]}
    # The path: coarse 60–90 s (re-captioned, split into fine), then fine 60–70 s (split into ultra-fine).
    assert [it["period"] for it in trace["iterations"]] == ["coarse 60–90s", "fine 60–70s"]
    assert trace["iterations"][1]["captions"][:2] == ["fine 60–70s", "ultra_fine 60–62s"]
    assert "ultra_fine 64–66s" in trace["final_memory"]
    assert not trace["forced"] and row["n_llm_calls"] == 6  # localize, answer, 2 × (search, answer)
    # Captions: 4 coarse by the memory stage; then 1 + 3 and 1 + 5 by backtracking, of which the re-caption
    # of fine 60–70 s with the same instruction is the caption its split already made (a cache hit).
    assert trace["captions"]["computed"] == 9 and trace["captions"]["reused"] == 1
    captions = [c for c in calls if c["purpose"].startswith("caption:")]
    assert len(captions) == 4 + 9


def test_without_enough_depth_the_answer_is_forced_and_wrong(hall, tmp_path):
    row, _, _ = _run(hall, tmp_path, json.dumps({"periods": [2], "whole_video": False}), SEARCH_PATH,
                     max_iterations=1)
    trace = json.loads(row["trace"])
    assert [it["period"] for it in trace["iterations"]] == ["coarse 60–90s"]
    assert trace["forced"] and row["pred"] == "A" and not row["correct"]
    assert trace["calls"][-1]["call"] == "answer" and row["n_llm_calls"] == 4


def test_malformed_json_is_repaired_once_then_recorded_and_calls_stay_bounded(hall, tmp_path):
    row, calls, _ = _run(hall, tmp_path, json.dumps({"periods": [2], "whole_video": False}), [], max_iterations=5)
    trace = json.loads(row["trace"])
    searches = [c for c in trace["calls"] if c["call"] == "search"]
    assert len(searches) == 5 and all(c["attempts"] == 2 and c["failure"] for c in searches)
    assert any(c["purpose"] == "search:repair" for c in calls)
    assert len(trace["iterations"]) == 5 and trace["forced"]
    # 1 localize + 1 answer + 5 × (search + repair + answer); the bound is (2 + 2·5)·(1 + retries) = 24.
    assert row["n_llm_calls"] == 17 <= 24
    assert row["error"] is None and row["pred"] in "ABCD"


def test_a_whole_video_question_skips_sparse_init(hall, tmp_path):
    row, calls, _ = _run(hall, tmp_path, json.dumps({"periods": [], "whole_video": True}), SEARCH_PATH[:0])
    trace = json.loads(row["trace"])
    assert trace["sparse_init"]["whole_video"] is True
    first_answer = next(c for c in calls if c["purpose"] == "answer")
    prompt = json.dumps(first_answer["payload"])
    assert all(f"[{i}] coarse" in prompt for i in range(4))


def test_a_rerun_makes_no_captioner_call(hall, tmp_path):
    shared = tmp_path / "shared_captions"
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    localize = json.dumps({"periods": [2], "whole_video": False})
    _, first_calls, _ = _run(hall, first_dir, localize, SEARCH_PATH, caption_cache=shared)
    row, second_calls, built = _run(hall, second_dir, localize, SEARCH_PATH, caption_cache=shared)
    assert [c for c in first_calls if c["purpose"].startswith("caption:")]
    assert not [c for c in second_calls if c["purpose"].startswith("caption:")]
    assert built["cost"]["reused"].sum() == 4 and built["cost"]["computed"].sum() == 0
    trace = json.loads(row["trace"])
    assert trace["captions"]["computed"] == 0 and trace["captions"]["reused"] == 10 and row["correct"]
    assert not list(shared.glob("*/.*.tmp"))

"""The persistent-memory interface (:mod:`senri.memory.store`) and the caption store behind ``memory_system=captions``.

The pin: ``memory_search``, SENRI-Agent and its three ablations read their memory only through a
:class:`~senri.memory.store.MemoryStore` since issue 25, and over the caption store they must send exactly the
requests and write exactly the prediction rows they did when they read the caption table themselves.
``tests/data/captions_golden.json`` holds those requests and rows as the code before the interface produced
them (``python tests/test_memory_store.py --write`` rewrites it — only ever from that code); this test replays
the same scripted episodes and compares, request by request and column by column.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest import make_probed_clip  # noqa: E402
from senri.answer import MemoryInputs, answer_video  # noqa: E402
from senri.records import MemoryRow, Question, read_table, to_frame, write_table  # noqa: E402
from test_agent import DEFAULT_CONTROLLER, QUESTION, _rules  # noqa: E402

GOLDEN = Path(__file__).parent / "data" / "captions_golden.json"
#: Fields that measure this run's clock, not what the method decided.
CLOCK_FIELDS = {"wall_s", "latency_s"}
SECOND = Question(video_id="shop", qid="shop_2", task_type="TR", direction="ES",
                  question="What did I do right after looking at the shelves?",
                  option_a="Paid", option_b="Picked up a figure", option_c="Left", option_d="Sat down", answer="B")
#: (name, method, memory variant, settings): every memory method, each retriever setting, and a memory with a
#: caption cut at its token limit plus a failed one (the run-health counts the store books).
SCENARIOS = [
    ("memory_search_bm25", "memory_search", "plain", {"retriever": "bm25"}),
    ("memory_search_embedding", "memory_search", "plain", {"retriever": "embedding"}),
    ("memory_search_hybrid_health", "memory_search", "health", {"retriever": "hybrid"}),
    ("senri_agent", "senri_agent", "plain", {"retriever": "bm25"}),
    ("senri_agent_health", "senri_agent", "health", {"retriever": "bm25"}),
    ("senri_agent_no_tg", "senri_agent_no_tg", "plain", {"retriever": "bm25"}),
    ("senri_agent_no_pv", "senri_agent_no_pv", "plain", {"retriever": "bm25"}),
    ("senri_agent_no_wm", "senri_agent_no_wm", "plain", {"retriever": "bm25"}),
]
#: A controller that searches twice (a new query, then the same one) before verifying, so the retrieved
#: memories, the candidates and the nothing-new feedback all reach the prompts.
CONTROLLER = [
    {"match": "4 shelf rows", "text": json.dumps({"action": "answer", "answer": "C"})},
    {"match": "This is the last round", "text": json.dumps({"action": "answer", "answer": "A"})},
    {"match": "were all retrieved already", "text": json.dumps(
        {"action": "verify", "rationale": "look", "checks": [{
            "target_context": "the moment I pick up the figure", "objective": "count the shelf rows",
            "requirements": ["the shelf is fully visible"], "windows": [[60, 70]], "fps": 1, "budget": 8}]})},
    {"match": "c2 [", "text": json.dumps({"action": "search", "rationale": "again", "query": "figure shelf"})},
    {"match": "search, verify, answer", "text": json.dumps(
        {"action": "search", "rationale": "find it", "query": "figure shelf"})},
    *DEFAULT_CONTROLLER,
]


def _memories(out: Path) -> dict[str, Path]:
    texts = ["I walk into a toy shop.", "I look at shelves of figures.", "I pick up a figure from a shelf.",
             "I pay at the counter."]
    rows = [MemoryRow("shop", "coarse", 30.0 * i, 30.0 * (i + 1), 1.0, 30, "h", text, "perception", "t",
                      90.0 if i == 2 else None, "EXIT" if i == 1 else None, None) for i, text in enumerate(texts)]
    rows += [MemoryRow("shop", "fine", 60.0 + 10 * i, 70.0 + 10 * i, 1.0, 10, "h", f"a figure on shelf {i}",
                       "perception", "t", None, None, None) for i in range(3)]
    plain = out / "plain.parquet"
    write_table(to_frame(rows, MemoryRow), plain, MemoryRow)
    health = [dataclasses.replace(r, finish_reason="length") if "pick up" in r.text else r for r in rows]
    health.append(MemoryRow("shop", "coarse", 120.0, 150.0, 1.0, 0, "h", "", "perception", "t", None, None,
                            "CUDA out of memory"))
    cut = out / "health.parquet"
    write_table(to_frame(health, MemoryRow), cut, MemoryRow)
    return {"plain": plain, "health": cut}


def _without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_clock(v) for k, v in value.items() if k not in CLOCK_FIELDS}
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def run_scenarios(out: Path) -> dict[str, Any]:
    """Every scenario's requests (sorted: verifier batches run concurrently) and prediction rows, clock-free."""
    video, info = make_probed_clip(out, "shop")
    memories = _memories(out)
    results: dict[str, Any] = {}
    for name, method, variant, settings in SCENARIOS:
        script, record = out / f"{name}.jsonl", out / f"{name}.calls.jsonl"
        script.write_text("".join(json.dumps(r) + "\n" for r in _rules(CONTROLLER)))
        stage = {"seed": 0,
                 "method": {"name": method, "implementation": method, "approach": "persistent_memory",
                            "uses_model": True, "uses_memory": True, "max_rounds": 5, "top_k": 2,
                            "json_retries": 1, "wm_reports": 3, "wm_frames": 4, "verifier_short_side": 64,
                            **settings},
                 "model": {"name": "agent", "backend": "scripted", "script": str(script), "record": str(record),
                           "concurrency": 4},
                 "memory": {"memory": {"captioner": "perception"}}}
        inputs = MemoryInputs(memories[variant], video, None, None, None, out / f"{name}.captions")
        frame = answer_video(to_frame([QUESTION, SECOND], Question), info, stage, memory=inputs)
        rows = []
        for row in frame.iter_rows(named=True):
            row = {k: v for k, v in row.items() if k not in CLOCK_FIELDS and k != "memory"}
            row["trace"] = _without_clock(json.loads(row["trace"])) if row["trace"] else None
            rows.append(row)
        calls = sorted(json.dumps(json.loads(line), sort_keys=True) for line in record.read_text().splitlines())
        results[name] = {"rows": rows, "calls": [json.loads(c) for c in calls]}
    return results


def test_captions_store_keeps_every_memory_method_s_requests_and_rows_unchanged(tmp_path):
    """Issue 25 item 1: ``memory_system=captions`` is byte-identical to the pre-interface code path."""
    golden = json.loads(GOLDEN.read_text())
    now = run_scenarios(tmp_path)
    assert sorted(now) == sorted(golden)
    for name in golden:
        assert len(now[name]["calls"]) == len(golden[name]["calls"]), name
        for i, (new, old) in enumerate(zip(now[name]["calls"], golden[name]["calls"])):
            assert new == old, f"{name}: request {i} differs"
        assert now[name]["rows"] == golden[name]["rows"], name


if __name__ == "__main__" and "--write" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        GOLDEN.write_text(json.dumps(run_scenarios(Path(folder)), sort_keys=True, indent=0) + "\n")
    print(f"wrote {GOLDEN}")

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


def test_editing_the_memory_interface_or_retrieval_reruns_memory_methods_only(tmp_path, monkeypatch):
    """The answer stage's code digest of a memory method covers the store interface, the caption store and
    retrieval (an edit of ``retrieval.py`` used to leave finished ``memory_search`` runs standing)."""
    from senri import workflow
    from senri.methods.agent import MemorySearch

    package = tmp_path / "src" / "senri"
    (tmp_path / "workflow" / "schemas").mkdir(parents=True)
    for rel in {r for files in workflow.STAGE_CODE.values() for r in files} | set(MemorySearch.extra_code):
        target = (package / rel).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((workflow.PACKAGE_DIR / rel).read_bytes())
    monkeypatch.setattr(workflow, "PACKAGE_DIR", package)
    methods = ("memory_search", "senri_agent", "senri_agent_no_wm", "random", "direct")
    for rel in ("memory/retrieval.py", "memory/captions.py", "memory/store.py"):
        before = {m: workflow.code_digest("answer", m) for m in methods}
        (package / rel).write_text((package / rel).read_text() + "\n# changed\n")
        after = {m: workflow.code_digest("answer", m) for m in methods}
        assert [m for m in methods if before[m] != after[m]] == ["memory_search", "senri_agent",
                                                                 "senri_agent_no_wm"], rel


# ------------------------------------------------------------------ the hooks, over a store with memory types

from fake_store import TableStore, write_items  # noqa: E402
from senri.memory.store import MemoryItem, SearchContext, store_class  # noqa: E402
from senri.methods import METHODS  # noqa: E402
from senri.methods.agent import MemorySearch  # noqa: E402
from senri.backends.base import ChatRequest, Message  # noqa: E402

FAKE_ITEMS = [MemoryItem("e0", "episodic", "I walk into a toy shop.", 0.0, 30.0, level="30sec"),
              MemoryItem("e1", "episodic", "I look at shelves of figures.", 30.0, 60.0, level="30sec"),
              MemoryItem("e2", "episodic", "I pick up a figure from a shelf.", 60.0, 90.0, level="30sec"),
              MemoryItem("s0", "semantic", "the figure stands on the shelf"),
              MemoryItem("s1", "semantic", "the shop sells toys")]
FAKE_CONTROLLER = [
    {"match": "Final QA", "text": "The answer is B."},
    {"match": "Rank these facts", "text": "1, 0"},
    {"match": "[episodic] I pick up", "text": json.dumps({"action": "answer", "rationale": "seen", "answer": "C"})},
    {"match": "[semantic]", "text": json.dumps({"action": "search", "rationale": "when", "query": "pick up figure",
                                                "memory_type": "episodic"})},
    {"match": "a search needs a memory_type", "text": json.dumps(
        {"action": "search", "rationale": "facts", "query": "figure shelf", "memory_type": "semantic"})},
    {"match": "search, answer", "text": json.dumps({"action": "search", "rationale": "x", "query": "figure"})},
]


class ChainWorkflow(MemorySearch):
    """A workflow with its own round context and final QA call (the shape of MAGIC-Video's and WorldMM's)."""

    def _round_context(self, ep) -> str:
        return f"Chain facts (round {len(ep.trace['rounds']) + 1}): the figure is on the top shelf"

    def _answer_request(self, ep, proposed):
        return ChatRequest(messages=(Message.text("user", f"Final QA after {proposed}: "
                                                          f"{self.store.render(list(ep.retrieved.values()))}"),),
                           max_tokens=32, purpose="qa")


METHODS.register("test_chain_workflow", "test_memory_store:ChainWorkflow")


def _fake_run(tmp_path: Path, shop_clip, method: str, implementation: str) -> tuple[dict, list[dict]]:
    video, info = shop_clip
    folder = tmp_path / "store"
    write_items(FAKE_ITEMS, folder, {"store": "fake_store:TableStore"})
    script, record = tmp_path / "script.jsonl", tmp_path / "calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in FAKE_CONTROLLER))
    stage = {"seed": 0,
             "method": {"name": method, "implementation": implementation, "approach": "persistent_memory",
                        "uses_model": True, "uses_memory": True, "max_rounds": 5, "top_k": 2, "json_retries": 1,
                        "prompts": "memory_search"},
             "model": {"name": "agent", "backend": "scripted", "script": str(script), "record": str(record)},
             "memory": {"memory": {"captioner": "perception"}},
             "memory_system": {"name": "fake", "store": "fake_store:TableStore", "import_dir": None}}
    table = tmp_path / "captions.parquet"
    write_table(to_frame([], MemoryRow), table, MemoryRow)
    inputs = MemoryInputs(table, video, None, None, None, tmp_path / "captions", folder)
    row = answer_video(to_frame([QUESTION], Question), info, stage, memory=inputs).row(0, named=True)
    return row, [json.loads(line) for line in record.read_text().splitlines()]


@pytest.fixture(scope="module")
def shop_clip(tmp_path_factory):
    return make_probed_clip(tmp_path_factory.mktemp("clip"), "shop")


def _user_text(call: dict) -> str:
    return "\n".join(p for m in call["payload"]["messages"] if m["role"] == "user" for p in m["content"]
                     if isinstance(p, str))


def test_memory_search_reads_a_typed_store_through_the_interface(tmp_path, shop_clip):
    """A search names a memory type; an item without an interval is a text memory and no visual candidate;
    the store's own model call goes through ``SearchContext.ask`` and is booked on the question."""
    row, calls = _fake_run(tmp_path, shop_clip, "memory_search", "memory_search")
    trace = json.loads(row["trace"])
    assert row["pred"] == "C" and row["error"] is None
    assert trace["actions"] == ["malformed", "search", "search", "answer"]
    semantic, episodic = trace["rounds"][1], trace["rounds"][2]
    assert semantic["memory_type"] == "semantic" and semantic["notes"] == ["ranked by the model: '1, 0'"]
    assert len(semantic["hits"]) == 2 and all(h.startswith("semantic (") for h in semantic["hits"])
    assert episodic["memory_type"] == "episodic" and episodic["hits"][0].startswith("30sec 60–90s")
    assert trace["retriever"] == "fake"
    controller = [c for c in calls if c["purpose"].startswith("control")]
    after_semantic = next(_user_text(c) for c in controller if "[semantic]" in _user_text(c))
    assert "[semantic] the figure stands on the shelf" in after_semantic
    assert "Visual candidates (ref, interval, valid_absolute_sec, description):\n(none yet)" in after_semantic
    after_episodic = next(_user_text(c) for c in controller if "[episodic]" in _user_text(c))
    assert "- c1 [60, 90] s, valid_absolute_sec [0, " in after_episodic
    assert "I pick up a figure from a shelf." in after_episodic.split("Visual candidates")[1]
    # The repair and the next round said what was missing: the memory type.
    assert any("a search needs a memory_type, one of episodic, semantic" in _user_text(c) for c in controller)
    ranks = [c for c in calls if c["purpose"] == "rank"]
    assert len(ranks) == 2 and [c["call"] for c in trace["calls"]].count("retrieve:rank") == 2
    assert row["n_llm_calls"] == len(calls)  # every call, the store's included, is booked on the question


def test_a_workflow_s_round_context_and_final_qa_call(tmp_path, shop_clip):
    row, calls = _fake_run(tmp_path, shop_clip, "chain", "test_chain_workflow")
    trace = json.loads(row["trace"])
    assert row["pred"] == "B" and trace["rounds"][-1]["proposed"] == "C"
    controller = [_user_text(c) for c in calls if c["purpose"].startswith("control")]
    assert "Chain facts (round 1): the figure is on the top shelf" in controller[0]
    assert "Chain facts (round 4)" in controller[-1]
    qa = [c for c in calls if c["purpose"] == "qa"]
    assert len(qa) == 1 and "Final QA after C: [semantic] the figure stands" in _user_text(qa[0])
    assert row["n_llm_calls"] == len(calls)


def test_without_a_model_a_store_takes_its_no_llm_path_and_says_so():
    store = TableStore(FAKE_ITEMS)
    context = SearchContext(question=QUESTION)
    found = store.search("figure shelf", 2, exclude={"s0"}, memory_type="semantic", context=context)
    assert [i.item_id for i in found] == ["s1"] and context.notes == ["no model: BM25 order kept"]
    with pytest.raises(ValueError, match="memory_type 'visual' is not one of"):
        store.search("x", 1, memory_type="visual")
    assert [i.item_id for i in store.window(50, 70)] == ["e1", "e2"]


def test_an_unknown_store_names_the_system_and_the_registered_ones():
    from senri.registry import RegistryError

    with pytest.raises(RegistryError, match=r"memory system 'no_such_system': store 'no_such_system' is not "
                                            r"registered \(known: captions"):
        store_class("no_such_system")
    assert store_class("fake_store:TableStore", "fake") is TableStore
    with pytest.raises(TypeError, match="not a MemoryStore subclass"):
        store_class("fake_store:write_items", "fake")

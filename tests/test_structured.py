"""Structured (JSON) calls: a batch of requests, validated, each malformed reply repaired in a batched round."""

from __future__ import annotations

import json
from pathlib import Path

from senri.backends.base import ChatRequest, Message
from senri.backends.scripted import ScriptedBackend
from senri.methods.base import CallTally, Method, RunContext
from senri.methods.structured import ask_json_many


def _ask_two(tmp_path: Path, repaired: dict, first: dict, second: dict, retries: int = 1):  # noqa: ANN202
    """Two structured calls ("first …", "second …") in one batch over a scripted backend whose rules answer
    the repair turn (``repaired``) and each question: (the two replies, the tally, the calls the backend got)."""
    script, record = tmp_path / "script.jsonl", tmp_path / "calls.jsonl"
    rules = [{"match": "REPAIR", **repaired}, {"match": "first", **first}, {"match": "second", **second}]
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    backend = ScriptedBackend({"script": str(script), "record": str(record)})
    method = Method(RunContext(video=None, method_name="probe", method_config={}, model_name="scripted",
                               model_config={}, seed=0, backend=backend))
    requests = [ChatRequest(messages=(Message.text("user", f"{name} question"),), purpose="probe")
                for name in ("first", "second")]
    tally = CallTally()
    replies = ask_json_many(method, requests, _valid, "REPAIR: the JSON object only", tally, retries)
    return replies, tally, [json.loads(line) for line in record.read_text().splitlines()]


def _valid(obj: dict) -> dict | None:
    return obj if isinstance(obj.get("answer"), str) else None


def test_ask_json_many_repairs_only_the_malformed_reply_in_one_batched_round(tmp_path):
    (first, second), tally, calls = _ask_two(tmp_path, {"text": '<think>fixed it</think>{"answer": "B"}'},
                                             {"text": '{"answer": "A"}'}, {"text": '<think>hmm</think>{"answer": B'})
    assert (first.value, first.attempts, first.error) == ({"answer": "A"}, 1, None)
    assert (second.value, second.attempts, second.error) == ({"answer": "B"}, 2, None)
    assert second.reasoning == "fixed it"
    assert [c["purpose"] for c in calls].count("probe:repair") == 1 and len(calls) == 3
    repair = next(c for c in calls if c["purpose"] == "probe:repair")
    # The repair turn quotes the malformed reply without its reasoning, then the repair text.
    assert [m["role"] for m in repair["payload"]["messages"]] == ["user", "assistant", "user"]
    assert repair["payload"]["messages"][1]["content"] == ['{"answer": B']
    assert tally.n_llm_calls == 3 and tally.errors == []


def test_ask_json_many_records_a_failed_call_and_a_malformed_repair(tmp_path):
    (failed, malformed), tally, _ = _ask_two(tmp_path, {"text": "still not JSON"}, {"error": "timeout"},
                                             {"text": "<think>plan</think>no JSON here"})
    assert (failed.value, failed.attempts, failed.error) == (None, 1, "model call failed: timeout")
    assert (malformed.value, malformed.attempts, malformed.error) == (None, 2, "malformed JSON after repair")
    assert malformed.reasoning == "plan"  # the latest reasoning given, kept when the repair reply has none
    assert tally.n_llm_calls == 3 and tally.errors == ["probe: timeout"]
    (tmp_path / "no_retries").mkdir()
    (_, alone), _, calls = _ask_two(tmp_path / "no_retries", {"text": "x"}, {"text": "{}"}, {"text": "no JSON"},
                                    retries=0)
    assert len(calls) == 2
    assert (alone.attempts, alone.error) == (1, "malformed JSON")  # no repair turn: not "after repair"


def test_a_reasoning_model_gets_the_schema_only_where_the_backend_applies_it_after_the_thinking(tmp_path):
    from senri.methods.structured import request_schema

    script = tmp_path / "script.jsonl"
    script.write_text('{"text": "{}"}\n')
    schema = {"type": "object"}

    def backend(**config):
        return ScriptedBackend({"script": str(script), **config})

    assert request_schema(backend(), schema) == schema
    assert request_schema(backend(reasoning=True), schema) is None  # constrained from token one it cannot think
    assert request_schema(backend(reasoning=True, reasoning_parser="deepseek_r1"), schema) == schema
    assert request_schema(backend(reasoning_parser="deepseek_r1"), schema) == schema
    assert request_schema(None, schema) is None

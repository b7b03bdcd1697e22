"""VideoLucy (Algorithm 1, Tables 5–7): scripted episodes over a generated 120 s video — a scripted VLM captioner
and a scripted agent model, real decoding, the real caption cache, the real method code and prompt files.

At 120 s the `auto` rule gives mlvu_short: coarse 30 s at 1 fps (4 periods), fine 5 s at 2 fps, ultra-fine
1 s at 2 fps. The needle is visible only in the ultra-fine clip 64–65 s."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from seeker_replay import probed_clip
from senri.answer import MemoryInputs, answer_video
from senri.captioners.base import VideoMedia
from senri.memory.hierarchy import build_memory, open_service
from senri.methods.videolucy import letter_of, periods
from senri.records import MemoryCost, MemoryRow, Question, check_frame, to_frame, write_table

REPO = Path(__file__).resolve().parents[1]
MEMORY = {**yaml.safe_load((REPO / "config/memory/auto.yaml").read_text())}
METHOD = yaml.safe_load((REPO / "config/method/videolucy.yaml").read_text())

NEEDLE = "I hold a red cup"
QUESTION = Question(video_id="hall", qid="hall_1", task_type="OC", direction="ES",
                    question="What was I holding in my hand?", option_a="A phone", option_b="A red cup",
                    option_c="A book", option_d="Nothing", answer="B", evidence_start_s=64.0, evidence_end_s=65.0)
CORRIDOR = "I walk along a grey corridor."
FORCED = "Choose one option now, for the question below."
ANSWER_USER = "Your task: judge whether the descriptions above answer"


def answer_json(confident: bool, letter: str = "B") -> str:
    return json.dumps({"Confidence": confident, "Answer": letter if confident else "No Answer",
                       "Time Period": [[64, 65]] if confident else "No Time", "Reason": "r"})


def forced_json(letter: str = "A") -> str:
    return json.dumps({"Answer": letter, "Time Period": [[0, 30]], "Reason": "best guess"})


LOCALIZE_60_90 = json.dumps({"Flag": True, "Time Period": [[60, 90]], "Reason": "the hands are seen there"})
SEARCH_PATH = [("Already searched (do not pick these): none yet",
                json.dumps({"Time Period": [60, 90], "Instruction": "what do I hold?", "Reason": "r"})),
               ("Already searched (do not pick these): [60, 90]\n",
                json.dumps({"Time Period": [60, 65], "Instruction": "what do I hold?", "Reason": "r"}))]


def script_rules(localize: str, search: list[tuple[str, str]], answer: str | None = None,
                 captions: list[dict] | None = None) -> list[dict]:
    return [
        *(captions or []),
        # The captioner: the needle is only in one 1 s ultra-fine clip.
        {"match": "from 64 s to 65 s", "text": f"{NEEDLE}."},
        {"match": "This clip is my first-person video", "text": CORRIDOR},
        {"match": "Your task: decide which periods", "text": localize},
        *({"match": m, "text": t} for m, t in search),
        {"match": FORCED, "text": forced_json("A")},
        {"match": NEEDLE, "text": answer or answer_json(True, "B")},  # once the needle is in memory
        {"match": ANSWER_USER, "text": answer_json(False)},
        {"match": "Already searched", "text": "I think period two"},  # malformed: no JSON
        {"match": "Your reply could not be read", "text": "period two, as I said"},  # the repair fails too
    ]


@pytest.fixture(scope="module")
def hall(tmp_path_factory):
    out = tmp_path_factory.mktemp("hall")
    video, info = probed_clip(out, "hall")  # the session's clip, encoded once
    return {"dir": out, "video": video, "info": info}


def run(hall, tmp_path: Path, rules: list[dict], caption_cache: Path | None = None,
        **method) -> tuple[dict, list[dict], dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    record = tmp_path / "calls.jsonl"
    memory_extra = method.pop("memory_extra", {})
    memory_slice = {"memory": {**MEMORY, "captioner": "scripted_vlm", "short_side": 64, **memory_extra}, "track": {},
                    "captioner_model": {"backend": "scripted", "script": str(script), "record": str(record)}}
    cache_dir = caption_cache or tmp_path / "captions"
    media = VideoMedia("hall", hall["video"], hall["info"].fingerprint, hall["info"].duration_s)
    service = open_service(memory_slice, media, cache_dir)
    rows, cost = build_memory(service, memory_slice["memory"], hall["info"].duration_s)
    service.close()
    write_table(rows, tmp_path / "memory.parquet", MemoryRow)
    check_frame(cost, MemoryCost, "cost")
    questions = method.pop("questions", [QUESTION])
    model_name = method.pop("model_name", "agent")
    model_extra = method.pop("model_extra", {})
    stage = {"seed": 0, "method": {"name": "videolucy", **METHOD, **method},
             "model": {"name": model_name, "backend": "scripted", "script": str(script), "record": str(record),
                       "max_tokens": 64, **model_extra},
             "memory": memory_slice}
    inputs = MemoryInputs(tmp_path / "memory.parquet", hall["video"], None, None, None, cache_dir)
    predictions = answer_video(to_frame(questions, Question), hall["info"], stage, memory=inputs)
    row = predictions.row(0, named=True)
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    return row, calls, {"rows": rows, "cost": cost, "predictions": predictions}


def texts(call: dict) -> tuple[str, str]:
    """(system, user) text of a recorded agent call."""
    messages = call["payload"]["messages"]
    return messages[0]["content"][0], messages[-1]["content"][0]


def agent_calls(calls: list[dict], purpose: str) -> list[dict]:
    return [c for c in calls if c["purpose"] == purpose]


def test_the_needle_is_found_only_after_backtracking_to_ultra_fine(hall, tmp_path):
    row, calls, built = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH))
    assert built["rows"].height == 4 and set(built["rows"]["level"]) == {"coarse"}
    assert row["pred"] == "B" and row["correct"] and row["memory"] == "captions/scripted_vlm"
    trace = json.loads(row["trace"])
    assert trace["preset"] == "mlvu_short" and trace["sparse_init"] == {"whole_video": False, "picked": [2],
                                                                        "kept": [1, 2, 3]}
    # coarse 60–90 s (re-captioned, split into 6 fine clips), then fine 60–65 s (split into 5 ultra-fine clips)
    assert [it["period"] for it in trace["iterations"]] == ["coarse 60–90s", "fine 60–65s"]
    assert trace["iterations"][1]["captions"][:2] == ["fine 60–65s", "ultra_fine 60–61s"]
    assert "ultra_fine 64–65s" in trace["final_memory"]
    assert not trace["forced"] and row["n_llm_calls"] == 6  # localize, answer, 2 × (search, answer)
    assert row["forced_answers"] == 0
    # 1 + 6 and 1 + 5 captions by backtracking; the re-caption of fine 60–65 s with the same instruction is the
    # caption its split already made (a cache hit, no call).
    assert trace["captions"]["computed"] == 12 and trace["captions"]["reused"] == 1
    assert (row["n_caption_calls"], row["n_captions_reused"], row["n_vlm_calls"]) == (12, 1, 12)
    assert len([c for c in calls if c["purpose"].startswith("caption:")]) == 4 + 12
    # Deeper captions carry the released code's visible-text request before the agent's instruction.
    deeper = [c for c in calls if c["purpose"] == "caption:fine"][0]["payload"]["messages"][0]["content"][0]
    assert "Any text in view" in deeper and deeper.rstrip().endswith("what do I hold?")


#: One phrase per instruction id of shared/spec/prompts.md (VideoLucy), as docs/protocol.md maps them, and the
#: role whose request must carry it.
PHRASES = {
    "K1": ("caption:coarse",
           "describe every detail you can see, as completely as possible, in one smooth and coherent passage"),
    "K2": ("caption:coarse", "must be described explicitly and in detail, word for word"),
    "L1": ("localize", "these descriptions are coarse and have lost many details"),
    "L2": ("localize", "would let me answer the question with more confidence"),
    "L3": ("localize", "most relevant to the question, so that they can be reviewed again"),
    "L4a": ("localize", "Some questions can be settled from a few short periods"),
    "L4b": ("localize", "Other questions need the whole video"),
    "L5": ("localize", "Set Flag to true only when you are very confident"),
    "B1": ("search", "do not answer the question"),
    "B2": ("search", "Never pick a period listed as already searched"),
    "B3": ("search", "write that instruction so that it focuses on the detail the question needs"),
    "B4": ("search", "Write your instruction following the phrasing pattern of this example"),
    "A1": ("answer", "that lasts 120 seconds in total"),
    "A2": ("answer", "decide whether the descriptions alone let you answer the question accurately"),
    "A3": ("answer", "Answer only if you are absolutely confident"),
    "A4": ("answer", "If the descriptions are not yet enough, do not answer; say why in Reason"),
    "A5": ("answer", "give the time periods of the descriptions your answer relies on"),
    "A6": ("answer", "check that your reasoning fully supports your answer"),
}
JSON_FIELDS = {"localize": ['"Flag"', '"Time Period"', '"Reason"', "No Time Periods."],
               "search": ['"Time Period"', '"Instruction"', '"Reason"'],
               "answer": ['"Confidence"', '"Answer"', '"Time Period"', '"Reason"', "No Answer", "No Time"],
               "answer:forced": ['"Answer"', '"Time Period"', '"Reason"']}


def test_every_prompt_carries_its_instructions_json_fields_duration_memory_and_question(hall, tmp_path):
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]), max_iterations=1)
    by_role, systems = {}, set()
    for purpose in ("localize", "search", "answer", "answer:forced"):
        system, user = texts(agent_calls(calls, purpose)[0])
        by_role[purpose] = system + "\n" + user
        systems.add(system)
        assert "120 seconds" in system  # the video's total duration
        for field in JSON_FIELDS[purpose]:
            assert field in user, (purpose, field)
        # One system prompt, then the memory list, the role's task, the question last: calls over the same
        # memory share everything before the task (a server's prefix cache evaluates the memory once).
        assert user.startswith("Descriptions of the video, period by period")
        assert user.index("[60, 90] (coarse") < user.index("Your task:") < user.index("Question: What was I holding")
        assert user.rstrip().endswith("D. Nothing")
    assert len(systems) == 1
    coarse = [c for c in calls if c["purpose"] == "caption:coarse"][0]["payload"]["messages"][0]["content"][0]
    by_role["caption:coarse"] = coarse
    for instruction, (role, phrase) in PHRASES.items():
        assert phrase in by_role[role], instruction
    assert "Already searched (do not pick these): none yet" in by_role["search"]
    assert "[0, 30] (coarse): I walk along a grey corridor." in by_role["localize"]


def test_the_forced_call_sees_the_full_coarse_memory_and_every_deeper_caption(hall, tmp_path):
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]), max_iterations=1)
    trace = json.loads(row["trace"])
    assert trace["forced"] and row["pred"] == "A" and not row["correct"]
    assert row["forced_answers"] == 1  # the run-health table counts it as every method's forced answer
    assert [c["call"] for c in trace["calls"]] == ["localize", "answer", "search", "answer", "answer:forced"]
    answers = [texts(c)[1] for c in agent_calls(calls, "answer")]
    assert "[0, 30]" not in answers[0]  # sparse init kept 30–120 s
    _, forced = texts(agent_calls(calls, "answer:forced")[0])
    for start, end in ((0, 30), (30, 60), (60, 90), (90, 120)):
        assert f"[{start}, {end}] (coarse" in forced
    assert all(f"    [{s}, {s + 5}] (fine" in forced for s in range(60, 90, 5))
    assert row["n_llm_calls"] == 5


def test_the_paper_literal_variant_forces_the_cap_th_answer_over_the_current_memory(hall, tmp_path):
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]), max_iterations=1,
                        forced_answer="current_memory")
    trace = json.loads(row["trace"])
    assert [c["call"] for c in trace["calls"]] == ["localize", "answer", "search", "answer:forced"]
    _, forced = texts(agent_calls(calls, "answer:forced")[0])
    assert "[0, 30]" not in forced and "[60, 90] (coarse" in forced and trace["forced"]


def test_a_confident_answer_makes_no_forced_call(hall, tmp_path):
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, [], answer=None) + [],
                        answer_full_coarse_first=True, max_iterations=0)
    trace = json.loads(row["trace"])
    # Not confident over the full coarse memory, no iteration allowed: the forced call is made.
    assert trace["forced"] and [c["call"] for c in trace["calls"]] == [
        "answer:full_coarse", "localize", "answer", "answer:forced"]
    rules = [{"match": ANSWER_USER, "text": answer_json(True, "C")}, *script_rules(LOCALIZE_60_90, [])]
    row, calls, _ = run(hall, tmp_path / "confident", rules, answer_full_coarse_first=True)
    trace = json.loads(row["trace"])
    assert row["pred"] == "C" and not trace["forced"] and [c["call"] for c in trace["calls"]] == [
        "answer:full_coarse"]


def test_ordinal_questions_skip_sparse_init_in_the_released_code_variant(hall, tmp_path):
    from senri.methods.videolucy import ORDINALS

    assert ORDINALS.search("Where was I the second time I crossed the bridge?")
    assert ORDINALS.search("what did I buy at the 3rd shop") and not ORDINALS.search("What did I hold?")
    assert not ORDINALS.search("I waited for a secondhand bookshop")


def test_malformed_json_is_repaired_once_then_recorded_and_calls_stay_bounded(hall, tmp_path):
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, []), max_iterations=5)
    trace = json.loads(row["trace"])
    searches = [c for c in trace["calls"] if c["call"] == "search"]
    assert len(searches) == 5 and all(c["attempts"] == 2 and c["failure"] for c in searches)
    assert any(c["purpose"] == "search:repair" for c in calls)
    assert len(trace["iterations"]) == 5 and trace["forced"]
    # 1 localize + 1 answer + 5 × (search + repair + answer) + 1 forced
    assert row["n_llm_calls"] == 18 and row["error"] is None and row["pred"] in "ABCD"


def test_a_whole_video_question_keeps_every_coarse_period(hall, tmp_path):
    localize = json.dumps({"Flag": False, "Time Period": "No Time Periods.", "Reason": "needs all of it"})
    row, calls, _ = run(hall, tmp_path, script_rules(localize, []), max_iterations=0)
    trace = json.loads(row["trace"])
    assert trace["sparse_init"]["whole_video"] is True
    _, prompt = texts(agent_calls(calls, "answer")[0])
    assert all(f"[{s}, {s + 30}] (coarse" in prompt for s in (0, 30, 60, 90))


def test_a_thinking_models_reply_parses_and_its_reasoning_is_kept(hall, tmp_path):
    think = ("<think>The memory says " + "hmm {not json} " * 50 + "so it is B.</think>\n"
             + "```json\n" + answer_json(True, "B") + "\n```")
    r1 = "Okay, let me look at the periods {draft}. It is C.\n</think>\n\n" + answer_json(True, "C")
    for reply, letter in ((think, "B"), (r1, "C")):
        rules = [{"match": ANSWER_USER, "text": reply}, *script_rules(LOCALIZE_60_90, [])]
        row, _, _ = run(hall, tmp_path / letter, rules)
        trace = json.loads(row["trace"])
        answer = next(c for c in trace["calls"] if c["call"] == "answer")
        assert row["pred"] == letter and answer["attempts"] == 1 and answer["reasoning"]
    # The released code's parser also reads Python literals (True, tuples): so does ours.
    literal = "{'Confidence': True, 'Answer': 'D', 'Time Period': [(64, 65)], 'Reason': 'seen'}"
    rules = [{"match": ANSWER_USER, "text": literal}, *script_rules(LOCALIZE_60_90, [])]
    row, _, _ = run(hall, tmp_path / "literal", rules)
    assert row["pred"] == "D"


def test_token_limits_come_from_config_per_role_capped_by_the_model(hall, tmp_path):
    _, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]), max_iterations=1,
                      max_tokens={"localize": 3000, "search": 4000, "answer": 5000})
    limits = {c["purpose"]: c["payload"]["max_tokens"] for c in calls if not c["purpose"].startswith("caption")}
    assert limits == {"localize": 3000, "search": 4000, "answer": 5000, "answer:forced": 5000}
    _, calls, _ = run(hall, tmp_path / "smol", script_rules(LOCALIZE_60_90, []), max_iterations=0,
                      model_extra={"max_tokens_cap": 96})
    limits = {c["purpose"]: c["payload"]["max_tokens"] for c in calls if not c["purpose"].startswith("caption")}
    assert limits == {"localize": 96, "answer": 96, "answer:forced": 96}  # the model config's max_tokens_cap
    source = (REPO / "src/senri/methods/videolucy.py").read_text()
    assert not re.search(r"max_tokens\s*=\s*\d", source)  # no literal limit in the method


def test_a_failed_re_caption_keeps_the_old_caption_and_counts_as_a_call(hall, tmp_path):
    fail = {"match": "from 60 s to 90 s: 30 frames sampled at 1 per second, in time order (each image follows its "
                     "timestamp).\nAny text", "error": "CUDA out of memory"}
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1], captions=[fail]),
                        max_iterations=1)
    trace = json.loads(row["trace"])
    assert trace["failed_captions"] == ["coarse 60–90s: CUDA out of memory"]
    _, after = texts(agent_calls(calls, "answer")[1])
    assert f"[60, 90] (coarse): {CORRIDOR}" in after and "no caption" not in after
    assert trace["captions"]["failed"] == 1 and trace["captions"]["computed"] == 6
    assert row["n_caption_calls"] == 7 and row["n_vlm_calls"] == 7  # every call made, failed ones included


def test_a_rerun_makes_no_captioner_call(hall, tmp_path):
    shared = tmp_path / "shared_captions"
    rules = script_rules(LOCALIZE_60_90, SEARCH_PATH)
    _, first_calls, _ = run(hall, tmp_path / "first", rules, caption_cache=shared)
    row, second_calls, built = run(hall, tmp_path / "second", rules, caption_cache=shared)
    assert [c for c in first_calls if c["purpose"].startswith("caption:")]
    assert not [c for c in second_calls if c["purpose"].startswith("caption:")]
    assert built["cost"]["reused"].sum() == 4 and built["cost"]["computed"].sum() == 0
    trace = json.loads(row["trace"])
    assert trace["captions"]["computed"] == 0 and trace["captions"]["reused"] == 13 and row["correct"]
    assert row["n_caption_calls"] == 0 and row["n_captions_reused"] == 13 and row["n_vlm_calls"] == 0


def test_periods_and_letters_as_agents_write_them():
    assert periods([[0, 30], [60, 90]]) == [(0, 30), (60, 90)] and periods([60, 90]) == [(60, 90)]
    assert periods("(60, 90); from 100s to 130s") == [(60, 90), (100, 130)] and periods("No Time") == []
    assert [letter_of(a) for a in ("B", "(c)", "D. Nothing", "No Answer", "A red cup")] == ["B", "C", "D", None, None]


def protocol_rows() -> list[list[str]]:
    """The instruction rows of docs/protocol.md's VideoLucy section: id, instruction, carried by, phrase, test."""
    text = (REPO / "docs/protocol.md").read_text()
    start = text.index("## VideoLucy")
    section = text[start:text.index("\n## ", start + 1)]
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in section.splitlines()
            if line.startswith("| ") and ".txt:" in line]
    assert rows and all(len(r) == 5 for r in rows)
    return rows


ROLE_OF_FILE = {"system": "answer", "memory": "answer", "coarse": "caption:coarse", "deeper": "caption:fine", "clip": "caption:coarse",
                "localize": "localize", "localize_user": "localize", "search": "search", "search_user": "search",
                "answer": "answer", "answer_user": "answer", "forced": "answer:forced", "forced_user": "answer:forced"}


def test_every_protocol_row_points_at_its_prompt_line_and_the_sent_request_carries_it(hall, tmp_path):
    _, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]), max_iterations=1)
    sent = {}
    for call in calls:
        parts = [p for m in call["payload"]["messages"] for p in m["content"] if isinstance(p, str)]
        sent.setdefault(call["purpose"], "\n".join(parts))
    ids = set()
    for instruction_id, _, carried_by, phrase, test in protocol_rows():
        path, line = carried_by.rsplit(":", 1)
        assert phrase in (REPO / path).read_text().splitlines()[int(line) - 1], instruction_id
        assert phrase in sent[ROLE_OF_FILE[Path(path).stem]], instruction_id
        test_file, test_name = test.split("::")
        assert f"def {test_name}(" in (REPO / test_file).read_text(), instruction_id
        ids.add(instruction_id.rstrip("'"))
    assert {"K1", "K2", "L1", "L2", "L3", "L4", "L5", "B1", "B2", "B3", "B4", "A1", "A2", "A3", "A4", "A5",
            "A6"} <= ids


def test_the_plan_only_dry_run_shows_the_preset_and_frames_per_clip(capsys):
    from senri.cli import main

    assert main(["memory", "--plan-only", "--duration", "9000"]) == 0
    out = capsys.readouterr().out
    assert "duration 9000 s → preset egomem (by the auto rule)" in out
    assert "coarse: 12 clip(s) of 800 s at 0.25 fps → 200 frames per clip" in out
    assert main(["config", "memory.preset=auto"]) == 0
    assert "duration > 7200 s: egomem (coarse 800 s @ 0.25 fps" in capsys.readouterr().out


def test_llm_calls_stay_within_the_bound_when_every_reply_is_malformed(hall, tmp_path):
    rules = [{"match": "This clip is my first-person video", "text": CORRIDOR},
             {"match": "Your reply could not be read", "text": "still no JSON"}, {"text": "no JSON here"}]
    row, _, _ = run(hall, tmp_path, rules)
    trace = json.loads(row["trace"])
    # (localize + answer + 5 × (search + answer) + forced) × (1 + json_retries) = (3 + 2·5)·2
    assert row["n_llm_calls"] == (3 + 2 * 5) * 2 and trace["forced"] and row["pred"] is None
    assert not row["parse_ok"] and row["error"] is None and trace["sparse_init"]["whole_video"]


def test_constrained_replies_are_bounded_to_close_within_the_token_limit():
    from senri.methods.videolucy import ANSWER_SCHEMA, budgeted

    confident, unsure = (shape["properties"] for shape in budgeted(ANSWER_SCHEMA, 96, 9)["anyOf"])
    assert confident["Reason"]["maxLength"] == 32 and confident["Time Period"]["maxItems"] == 1
    assert confident["Answer"]["enum"] == ["A", "B", "C", "D"] and "maxLength" not in confident["Answer"]
    assert unsure["Reason"]["maxLength"] == 32 and unsure["Answer"] == {"const": "No Answer"}
    confident = budgeted(ANSWER_SCHEMA, 8192, 9)["anyOf"][0]["properties"]
    assert confident["Reason"]["maxLength"] == 8128 and confident["Time Period"]["maxItems"] == 9


def test_a_constrained_backend_can_write_the_no_period_texts_the_prompts_ask_for():
    import jsonschema

    from senri.methods.videolucy import ANSWER_SCHEMA, LOCALIZE_SCHEMA, budgeted

    localize, answer = budgeted(LOCALIZE_SCHEMA, 8192, 3), budgeted(ANSWER_SCHEMA, 8192, 9)
    # localize.txt asks for "No Time Periods.", answer.txt for "No Time": both must satisfy the schema.
    jsonschema.validate({"Flag": False, "Time Period": "No Time Periods.", "Reason": "r"}, localize)
    jsonschema.validate({"Flag": True, "Time Period": [[0, 30]], "Reason": "r"}, localize)
    jsonschema.validate(json.loads(answer_json(False)), answer)
    jsonschema.validate(json.loads(answer_json(True)), answer)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"Flag": False, "Time Period": "none", "Reason": "r"}, localize)
    # The contradictions a small model writes, each of which would cost a repair call, are not in the schema.
    for contradiction, schema in (({"Confidence": True, "Answer": "No Answer", "Time Period": "No Time",
                                    "Reason": "r"}, answer),
                                  ({"Confidence": False, "Answer": "B", "Time Period": [[0, 30]], "Reason": "r"}, answer),
                                  ({"Flag": True, "Time Period": "No Time Periods.", "Reason": "r"}, localize),
                                  ({"Flag": True, "Time Period": [], "Reason": "r"}, localize)):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(contradiction, schema)


def test_the_paper_literal_forced_answer_does_not_claim_the_whole_video(hall, tmp_path):
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]), max_iterations=1,
                        forced_answer="current_memory")
    trace = json.loads(row["trace"])
    assert trace["forced"] and "coarse 0–30s" not in trace["forced_memory"]  # sparse: not the whole video
    system, user = texts(agent_calls(calls, "answer:forced")[0])
    assert "whole video" not in system + user and "all of it" not in system + user


def test_naming_an_already_searched_period_is_an_invalid_search_reply(hall, tmp_path):
    again = [SEARCH_PATH[0], ("Already searched (do not pick these): [60, 90]\n",
                              json.dumps({"Time Period": [60, 90], "Instruction": "again", "Reason": "r"}))]
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, again), max_iterations=2)
    trace = json.loads(row["trace"])
    second = [c for c in trace["calls"] if c["call"] == "search"][1]
    assert second["attempts"] == 2 and second["failure"]  # invalid, then its repair turn
    assert len(agent_calls(calls, "search:repair")) == 1
    # Never silently one of the searched period's fine clips: the fallback is the earliest unsearched period.
    assert trace["iterations"][1]["period"] == "coarse 30–60s"


def test_reason_first_puts_the_reasoning_before_the_letter_only_when_asked(hall, tmp_path):
    from senri.methods.videolucy import ANSWER_FORM, ANSWER_SCHEMA, reason_first, reason_first_form

    def keys_in_prompt(user: str) -> list[str]:
        listed = user.split("exactly these keys:")[1]
        return re.findall(r'^"([A-Za-z ]+)":', listed, re.MULTILINE)

    def schema_keys(call: dict) -> list[list[str]]:
        schema = call["payload"]["json_schema"]
        return [list(shape["properties"]) for shape in schema.get("anyOf", [schema])]

    for option, first in ((False, "Confidence"), (True, "Reason")):
        row, calls, _ = run(hall, tmp_path / str(option), script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]),
                            max_iterations=1, reason_first=option)
        answer, forced = agent_calls(calls, "answer")[0], agent_calls(calls, "answer:forced")[0]
        assert keys_in_prompt(texts(answer)[1])[0] == first
        assert keys_in_prompt(texts(forced)[1])[0] == ("Reason" if option else "Answer")
        assert {keys[0] for keys in schema_keys(answer)} == {first}
        assert schema_keys(forced)[0][0] == ("Reason" if option else "Answer")
        # The localizer keeps the paper's order either way; the replies are read by key name.
        assert schema_keys(agent_calls(calls, "localize")[0])[0][0] == "Flag"
        assert row["pred"] == "A" and json.loads(row["trace"])["forced"]
    assert [list(s["properties"]) for s in reason_first(ANSWER_SCHEMA)["anyOf"]] == [
        ["Reason", "Confidence", "Answer", "Time Period"]] * 2
    assert reason_first_form(ANSWER_FORM).startswith('{"Reason": "...", "Confidence": true|false')
    assert reason_first_form(ANSWER_FORM).count('"Reason"') == 1
    # The reason-first prompts are the paper-order ones with only the Reason line moved (and saying so): an edit
    # to answer.txt or forced.txt that is not carried over fails here.
    prompts = REPO / "config/prompts/videolucy"
    for role in ("answer", "forced"):
        paper, first = ((prompts / name).read_text().splitlines() for name in (f"{role}.txt", f"{role}_reason_first.txt"))
        assert [line for line in first if not line.startswith('"Reason"')] == [
            line for line in paper if not line.startswith('"Reason"')]
        assert first.index(next(line for line in first if line.startswith('"Reason"'))) == first.index(
            next(line for line in first if line.endswith("exactly these keys:"))) + 1


#: A VLM caption as long as the paper's captioner writes them (up to 2,048 tokens): ~1,000 estimated tokens.
LONG_CAPTION = ("I walk along a grey corridor past numbered doors, a fire extinguisher and a notice board. " * 34).strip()


def long_caption_rules() -> list[dict]:
    return script_rules(LOCALIZE_60_90, SEARCH_PATH,
                        captions=[{"match": "from 64 s to 65 s", "text": f"{NEEDLE}."},
                                  {"match": "This clip is my first-person video", "text": LONG_CAPTION}])


def estimated_tokens(call: dict) -> int:
    """The scripted backend's (default) prompt-token estimate of a recorded request."""
    from senri.backends.base import Backend, ChatRequest, Message

    messages = tuple(Message(m["role"], tuple(p for p in m["content"] if isinstance(p, str)))
                     for m in call["payload"]["messages"])
    return Backend({}).count_tokens(ChatRequest(messages=messages))


def test_a_memory_past_the_context_window_is_trimmed_by_the_rule_and_the_question_gets_its_letter(hall, tmp_path):
    context = {"model_extra": {"context_tokens": 2600}, "max_iterations": 2}
    # Without the guard (context_trim: off) every agent call is past the window and fails: no letter.
    row, calls, _ = run(hall, tmp_path / "off", long_caption_rules(), context_trim="off", **context)
    trace = json.loads(row["trace"])
    assert row["pred"] is None and row["context_trims"] == 0
    assert all("exceeds the model's limits" in c["failure"] for c in trace["calls"])
    # With it (the default), every request fits before it is sent, and the needle is found.
    row, calls, _ = run(hall, tmp_path / "on", long_caption_rules(), **context)
    trace = json.loads(row["trace"])
    assert row["pred"] == "B" and row["correct"] and not trace["forced"]
    agents = [c for c in calls if not c["purpose"].startswith("caption")]
    assert all(estimated_tokens(c) + c["payload"]["max_tokens"] <= 2600 for c in agents)
    assert all("failure" not in c for c in trace["calls"])
    trims = [c["context_trim"] for c in trace["calls"] if c.get("context_trim", {}).get("rule")]
    assert row["context_trims"] == len(trims) == len(trace["calls"])  # each trimmed call counted once
    # Step 2 on the coarse memory alone (sparse init): coarse captions cut to one common length, none dropped.
    localize = trace["calls"][0]["context_trim"]
    assert localize["dropped"] == [] and localize["shortened"]["coarse"]["captions"] == 4
    _, user = texts(agent_calls(calls, "localize")[0])
    assert user.count(" […]") == 4 and all(f"[{s}, {s + 30}] (coarse)" in user for s in (0, 30, 60, 90))
    # Step 1 after backtracking into fine 60–65 s: the fine clips outside it go first, earliest first; what is
    # in focus (its ultra-fine clips, the needle among them) stays, shortened evenly only as a last step.
    last = trace["calls"][-1]["context_trim"]
    assert last["focus"] == ["60", "65"]
    assert last["dropped"] == [f"fine {s}–{s + 5}s" for s in range(65, 90, 5)]
    _, user = texts(agent_calls(calls, "answer")[-1])
    assert f"[64, 65] (ultra-fine): {NEEDLE}." in user and "[65, 70] (fine" not in user



def sent_texts(calls: list[dict]) -> list[tuple[str, str, str]]:
    """(purpose, role, text) of every message of every recorded request."""
    return [(c["purpose"], m["role"], "".join(p for p in m["content"] if isinstance(p, str)))
            for c in calls for m in c["payload"]["messages"]]


@pytest.mark.parametrize("preset", ["mlvu_short", "videomme_medium", "lvbench_long"])
def test_prompts_say_first_person_only_for_egocentric_videos(hall, tmp_path, preset):
    from senri.memory.hierarchy import captioner_prompts, prompt_variant
    from senri.prompts import prompt_set

    general = {"match": "This clip is the part of the video", "text": CORRIDOR}
    rules = [general, *script_rules(LOCALIZE_60_90, SEARCH_PATH[:1])]
    row, calls, _ = run(hall, tmp_path, rules, max_iterations=1, memory_extra={"preset": preset})
    sent = sent_texts(calls)
    assert {p.split(":")[0] for p, _, _ in sent} >= {"caption", "localize", "search", "answer"}
    assert not [p for p, _, text in sent if "first-person" in text or "camera wearer" in text]
    # Every file either wording can render, per preset the project ships: first-person only where egocentric.
    for name, levels in MEMORY["presets"].items():
        memory = {**MEMORY, "preset": name}
        files = [captioner_prompts(memory)[role].text for role in captioner_prompts(memory).roles()]
        agents = prompt_set("videolucy", variant=prompt_variant(memory))
        files += [agents[role].text for role in agents.roles()]
        says = any("first-person" in text for text in files)
        assert says == (levels["viewpoint"] == "egocentric") == (name == "egomem"), name
    # preset auto is the SENRI-format (egocentric) setting; memory.viewpoint overrides either way.
    assert prompt_variant({**MEMORY, "preset": "auto"}) is None
    assert prompt_variant({**MEMORY, "preset": "auto", "viewpoint": "general"}) == "general"
    assert prompt_variant({**MEMORY, "preset": preset, "viewpoint": "egocentric"}) is None


def test_the_question_is_stated_once_per_agent_message(hall, tmp_path):
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1]), max_iterations=1)
    users = [(c["purpose"], texts(c)[1]) for c in calls if not c["purpose"].startswith("caption")]
    assert {p for p, _ in users} == {"localize", "search", "answer", "answer:forced"}
    for purpose, user in users:
        assert "Question:\nQuestion:" not in user and user.count("Question:") == 1, purpose
        assert "Question: What was I holding in my hand?\nOptions:\nA. A phone" in user


def test_a_reasoning_model_thinks_first_the_schema_only_where_the_backend_applies_it_after(hall, tmp_path):
    thinking = ("<think>The memory list shows the needle at 64–65 s, so the cup is held there.</think>\n"
                + answer_json(True, "B"))
    rules = [{"match": NEEDLE, "text": thinking}, *script_rules(LOCALIZE_60_90, SEARCH_PATH)]
    # A reasoning model on a backend without a reasoning parser: free generation, the parser, one repair.
    row, calls, _ = run(hall, tmp_path / "free", rules, model_extra={"reasoning": True})
    agents = [c for c in calls if not c["purpose"].startswith("caption")]
    assert agents and all(c["payload"]["json_schema"] is None for c in agents)
    trace = json.loads(row["trace"])
    assert row["pred"] == "B" and trace["calls"][-1]["reasoning"].startswith("The memory list shows")
    # With the backend's reasoning parser the schema constrains the final answer (it is sent with every call).
    row, calls, _ = run(hall, tmp_path / "parser", rules,
                        model_extra={"reasoning": True, "reasoning_parser": "deepseek_r1"})
    agents = [c for c in calls if not c["purpose"].startswith("caption")]
    assert all(c["payload"]["json_schema"] is not None for c in agents) and row["pred"] == "B"
    # A model that is not marked reasoning is constrained as before.
    _, calls, _ = run(hall, tmp_path / "plain", rules)
    assert all(c["payload"]["json_schema"] is not None for c in calls if not c["purpose"].startswith("caption"))


def test_a_failed_coarse_caption_is_left_out_of_every_prompt_and_counted_and_a_cut_one_is_marked(hall, tmp_path):
    captions = [{"match": "from 30 s to 60 s: 30 frames", "error": "CUDA out of memory (tried to allocate 2 GiB)"},
                {"match": "from 90 s to 120 s: 30 frames", "text": "I walk along a grey corridor and",
                 "finish_reason": "length"}]
    row, calls, built = run(hall, tmp_path, script_rules(LOCALIZE_60_90, SEARCH_PATH[:1], captions=captions),
                            max_iterations=1)
    memory = built["rows"]
    assert memory.filter(memory["start_s"] == 90)["finish_reason"].to_list() == ["length"]
    assert memory.filter(memory["start_s"] == 0)["finish_reason"].to_list() == ["stop"]
    agents = [c for c in calls if not c["purpose"].startswith("caption")]
    assert agents
    for call in agents:
        _, user = texts(call)
        assert "CUDA" not in user and "no caption" not in user and "[30, 60]" not in user
    _, localize = texts(agent_calls(calls, "localize")[0])
    assert "[0, 30] (coarse" in localize and "[90, 120] (coarse" in localize
    trace = json.loads(row["trace"])
    assert trace["failed_captions"] == ["coarse 30–60s: CUDA out of memory (tried to allocate 2 GiB)"]
    assert trace["truncated_captions"] == ["coarse 90–120s: cut at the token limit"]
    assert (row["failed_captions"], row["truncated_captions"]) == (1, 1)


# ------------------------------------------------------------------ Fig. 6(a) memory depth, A.8 call cap (issue 52)
def caption_levels(trace: dict) -> set[str]:
    """The levels of every caption backtracking asked for, and of the final memory."""
    names = [c for it in trace["iterations"] for c in it["captions"]] + trace["final_memory"]
    return {name.split(" ")[0] for name in names}


def test_max_depth_stops_backtracking_at_its_level_and_the_needle_then_stays_unseen(hall, tmp_path):
    rules = script_rules(LOCALIZE_60_90, SEARCH_PATH)
    row, _, _ = run(hall, tmp_path / "fine", rules, max_iterations=2, max_depth="fine")
    trace = json.loads(row["trace"])
    # coarse 60–90 s split into fine clips; fine 60–65 s re-captioned at its own depth, never split
    assert [it["period"] for it in trace["iterations"]] == ["coarse 60–90s", "fine 60–65s"]
    assert trace["iterations"][1]["captions"] == ["fine 60–65s"]
    assert caption_levels(trace) == {"coarse", "fine"} and trace["max_depth"] == "fine"
    assert trace["forced"] and row["pred"] == "A" and "llm_call_cap" not in trace  # uncapped by default
    row, _, _ = run(hall, tmp_path / "coarse", rules, max_iterations=2, max_depth="coarse")
    trace = json.loads(row["trace"])
    assert [it["captions"] for it in trace["iterations"]][0] == ["coarse 60–90s"]
    assert caption_levels(trace) == {"coarse"} and row["n_caption_calls"] == 2  # one re-caption per iteration


SUMMARY_TEXT = "Summary: I walk along grey corridors from start to end."
SECOND_QUESTION = Question(video_id="hall", qid="hall_2", task_type="OC", direction="ES",
                           question="What colour were the corridor walls?", option_a="Grey", option_b="Red",
                           option_c="Blue", option_d="Green", answer="A")


def test_the_summary_arm_makes_one_summary_call_per_video_and_answers_from_it(hall, tmp_path):
    rules = [{"match": "write one summary of the whole video", "text": SUMMARY_TEXT},
             {"match": [SUMMARY_TEXT, "Your task: judge", "What was I holding"], "text": answer_json(True, "B")},
             *script_rules(LOCALIZE_60_90, SEARCH_PATH)]
    first, calls, built = run(hall, tmp_path, rules, max_depth="summary", questions=[QUESTION, SECOND_QUESTION])
    second = built["predictions"].row(1, named=True)
    summaries = agent_calls(calls, "summary")
    assert len(summaries) == 1  # one per video, whichever question asks first
    system, user = texts(summaries[0])
    assert "120 seconds" in system and all(f"[{s}, {s + 30}] (coarse): {CORRIDOR}" in user for s in (0, 30, 60, 90))
    one, two = json.loads(first["trace"]), json.loads(second["trace"])
    assert [c["call"] for c in one["calls"]] == ["summary", "answer"] and one["summary"]["made_by_this_question"]
    assert first["pred"] == "B" and first["n_llm_calls"] == 2 and not one["forced"]
    # the second question reads the same summary: no call for it, and its forced answer is over the summary too
    assert [c["call"] for c in two["calls"]] == ["answer", "answer:forced"]
    assert two["summary"] == {"made_by_this_question": False, "text": SUMMARY_TEXT} and two["forced_memory"] == ["summary"]
    for call in agent_calls(calls, "answer") + agent_calls(calls, "answer:forced"):
        _, user = texts(call)
        assert SUMMARY_TEXT in user and "(coarse)" not in user
    assert not agent_calls(calls, "localize") and not agent_calls(calls, "search")
    assert first["n_caption_calls"] == second["n_caption_calls"] == 0 and second["n_llm_calls"] == 2


def test_the_call_cap_keeps_the_last_call_for_the_forced_answer_and_counts_the_question(hall, tmp_path):
    # Every search reply is malformed: uncapped, each search costs a repair too (see the test above).
    row, calls, _ = run(hall, tmp_path, script_rules(LOCALIZE_60_90, []), max_llm_calls=4)
    trace = json.loads(row["trace"])
    # localize, answer, search (no room left for its repair), then the cap: the 4th call is the forced answer
    assert [c["call"] for c in trace["calls"]] == ["localize", "answer", "search", "answer:forced"]
    assert trace["calls"][2]["attempts"] == 1 and len(trace["iterations"]) == 1
    assert trace["llm_call_cap"] == {"cap": 4, "reached": True, "agent_calls": 4} and trace["forced"]
    assert row["n_llm_calls"] == 4 and row["capped_llm_calls"] == 1 and row["forced_answers"] == 1
    assert row["pred"] == "A" and len([c for c in calls if not c["purpose"].startswith("caption")]) == 4

"""VideoLucy Fig. 5: Shannon entropy per memory level (Table 11) and the relevance evaluator's replies (Table 12)."""

import json
import math

import polars as pl
import pytest
import yaml

from senri.analysis.richness import (curves, level_texts, parse_relevance, run_richness, shannon_entropy,
                                     texts_to_score, words)
from senri.records import Prediction, Question, to_frame

REPO_CONFIG = yaml.safe_load(open("config/config.yaml").read())["analysis"]["richness"]


@pytest.mark.parametrize("text, bits", [
    ("", 0.0),
    ("door door door", 0.0),                       # one word: no uncertainty
    ("a red door", math.log2(3)),                   # three words once each
    ("The door, the DOOR!", 1.0),                   # case and punctuation do not make words: {the: 2, door: 2}
    # {a: 2, red: 1, door: 1}: -(1/2 log2 1/2 + 2 * 1/4 log2 1/4) = 0.5 + 1.0
    ("a red door a", 1.5),
    # {i: 3, walk: 1}: -(3/4 log2 3/4 + 1/4 log2 1/4)
    ("I walk, I I", -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))),
])
def test_the_entropy_of_hand_computed_texts(text, bits):
    assert shannon_entropy(text) == pytest.approx(bits, abs=1e-12)


def test_words_are_lower_cased_letter_and_digit_runs():
    assert words("Room 12B: the red_door, I'm here") == ["room", "12b", "the", "red", "door", "i", "m", "here"]


@pytest.mark.parametrize("reply, score, status", [
    ('{"score": 7, "reason": "names the cup"}', 7, "ok"),
    ('Here: {"Score": "3", "reason": "x"} done', 3, "ok"),          # key in any case, a whole number as text
    ('<think>maybe 9?</think>{"score": 0, "reason": "off topic"}', 0, "ok"),  # the thinking is never read
    ('{"score": 10.0, "reason": "x"}', 10, "ok"),
    ('{"score": 11, "reason": "x"}', None, "out_of_scale"),
    ('{"score": -1, "reason": "x"}', None, "out_of_scale"),
    ('{"score": 6.5, "reason": "x"}', None, "unparsed"),           # not on the whole-number scale: not rounded
    ('{"score": "high", "reason": "x"}', None, "unparsed"),
    ('{"score": true}', None, "unparsed"),
    ('{"relevance": 8}', None, "unparsed"),                         # no score key
    ("I would say 8 out of 10.", None, "unparsed"),                 # free text: never guessed
    ("", None, "unparsed"),
    (None, None, "unparsed"),
])
def test_the_relevance_parser_on_well_formed_malformed_and_out_of_scale_replies(reply, score, status):
    parsed = parse_relevance(reply, 0, 10)
    assert (parsed.score, parsed.status) == (score, status)


TRACE_DEEP = {"final_memory": ["coarse 0–30s", "coarse 30–60s", "fine 30–35s", "ultra_fine 31–32s"],
              "final_memory_texts": ["a hall", "a red door", "I open the red door", "my hand on the handle"]}
TRACE_COARSE = {"final_memory": ["coarse 0–30s"], "final_memory_texts": ["a hall"]}


def test_each_level_text_joins_the_final_memory_at_that_level():
    assert level_texts(TRACE_DEEP) == {"coarse": "a hall\na red door", "fine": "I open the red door",
                                       "ultra_fine": "my hand on the handle"}
    assert level_texts({}) == {}


def _question(qid):
    return Question(video_id="v", qid=qid, task_type="OC", direction="ES", question="What did I open?",
                    option_a="A door", option_b="A box", option_c="A bag", option_d="A tap", answer="A",
                    evidence_start_s=None, evidence_end_s=None)


def _prediction(qid, trace, method="videolucy"):
    return Prediction(video_id="v", qid=qid, task_type="OC", method=method, model="agent", pred="A", answer="A",
                      correct=True, parse_ok=True, raw_output="", n_llm_calls=2, n_vlm_calls=0, prompt_tokens=0,
                      completion_tokens=0, latency_s=0.0, error=None, trace=json.dumps(trace),
                      memory="captions/perception")


def test_only_questions_that_reached_the_level_are_scored_at_every_level_up_to_it():
    predictions = to_frame([_prediction("q1", TRACE_DEEP), _prediction("q2", TRACE_COARSE)], Prediction)
    items = texts_to_score(predictions, "ultra_fine")
    assert [(i.qid, i.level) for i in items] == [("q1", "coarse"), ("q1", "fine"), ("q1", "ultra_fine")]
    assert [(i.qid, i.level) for i in texts_to_score(predictions, "coarse")] == [("q1", "coarse"), ("q2", "coarse")]


def test_the_stage_on_a_scripted_evaluator_counts_unscored_replies_and_writes_both_tables(tmp_path):
    """The evaluator answers per level: coarse well-formed, fine out of the scale, ultra-fine malformed; the
    unscored ones stay null and are counted in the curves."""
    script = tmp_path / "evaluator.jsonl"
    rules = [{"match": "my hand on the handle", "text": "fairly relevant, I think"},
             {"match": "I open the red door", "text": '{"score": 42, "reason": "x"}'},
             {"match": "a red door", "text": '{"score": 4, "reason": "a door"}'}]
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    record = tmp_path / "record.jsonl"
    predictions = tmp_path / "p.parquet"
    to_frame([_prediction("q1", TRACE_DEEP), _prediction("q2", TRACE_COARSE)], Prediction).write_parquet(predictions)
    spec = {**REPO_CONFIG, "evaluator": "judge",
            "evaluator_config": {"backend": "scripted", "script": str(script), "record": str(record)}}
    questions = to_frame([_question("q1"), _question("q2")], Question)
    levels, table = run_richness({"richness": spec, "seed": 0}, [str(predictions)], questions,
                                 str(tmp_path / "cache.sqlite"), str(tmp_path / "out"))
    assert levels.select("level", "relevance", "relevance_status").rows() == [
        ("coarse", 4, "ok"), ("fine", None, "out_of_scale"), ("ultra_fine", None, "unparsed")]
    # coarse "a hall / a red door": {a: 2, hall, red, door: 1}; fine and ultra-fine: 5 distinct words each
    coarse_bits = -(0.4 * math.log2(0.4) + 3 * 0.2 * math.log2(0.2))
    assert levels["entropy_bits"].to_list() == pytest.approx([coarse_bits, math.log2(5), math.log2(5)])
    sent = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(sent) == 3 and "Question: What did I open?" in json.dumps(sent[0])
    assert "from 0 to 10" in json.dumps(sent[0])  # the scale of the config reaches the prompt
    assert table.select("level", "questions", "scored", "unparsed", "out_of_scale").rows() == [
        ("coarse", 1, 1, 0, 0), ("fine", 1, 0, 0, 1), ("ultra_fine", 1, 0, 1, 0)]
    assert pl.read_parquet(tmp_path / "out" / "curves.parquet").equals(table)
    # a rerun reads every reply from the evaluator's response cache
    run_richness({"richness": spec, "seed": 0}, [str(predictions)], questions, str(tmp_path / "cache.sqlite"),
                 str(tmp_path / "out"))
    assert len(record.read_text().splitlines()) == 3


def test_curves_of_no_question_are_an_empty_table():
    from senri.analysis.richness import LEVEL_COLUMNS

    assert curves(pl.DataFrame(schema=LEVEL_COLUMNS)).is_empty()

"""Spec S3: a question with N options (2–6) offers exactly the letters A up to the N-th, for every method.

Each method family is checked on a six-option question whose answer is E and a two-option one whose answer is B:
its prompt lists exactly the options and names exactly their letters, its reading of a reply accepts exactly those
letters ("E" is no answer on a four- or two-option question, "C" none on a two-option one), and random never
draws a letter that is not an option. Four-option (SENRI) questions keep their A–D prompts byte for byte.
"""

import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from senri.answers import answer_schema, format_instruction, parse_answer, question_prompt, videomme_official_letter
from senri.records import LETTERS, Question, VideoInfo, letters_in_words, option_letters

SIX = Question(video_id="v", qid="six_1", task_type="needle", direction="none", question="Which tool did I use?",
               option_a="a hammer", option_b="a saw", option_c="a drill", option_d="a wrench",
               option_e="a paintbrush", option_f="a ladder", answer="E", benchmark="mlvu")
TWO = Question(video_id="v", qid="two_1", task_type="needle", direction="none", question="Was the door open?",
               option_a="no, it was shut", option_b="yes, wide open", option_c=None, option_d=None, answer="B",
               benchmark="mlvu")
FOUR = Question(video_id="v", qid="four_1", task_type="L", direction="ES", question="Where was I?",
                option_a="kitchen", option_b="garden", option_c="garage", option_d="attic", answer="C")
INFO = VideoInfo(video_id="v", path="v.mp4", duration_s=120.0, avg_fps=30.0, r_fps=30.0, n_frames=3600, width=64,
                 height=48, rotation=0, codec="h264", keyframe_interval_s=None, is_vfr=False, has_audio=False,
                 size_bytes=1, fingerprint="f")


def _lettered(text: str) -> list[str]:
    """The option letters a prompt lists ("A. text" lines or "(A) text" choices)."""
    return re.findall(r"(?m)^([A-F])\. ", text) or re.findall(r"\(([A-F])\) ", text)


# --------------------------------------------------------------------------------- the shared answer rule
def test_a_question_offers_the_letters_of_its_options_and_no_more():
    assert (SIX.letters, TWO.letters, FOUR.letters) == (tuple("ABCDEF"), ("A", "B"), LETTERS)
    assert [letters_in_words(q.letters) for q in (SIX, TWO, FOUR)] == ["A, B, C, D, E or F", "A or B", "A, B, C or D"]
    with pytest.raises(ValueError, match="2–6 options"):
        option_letters(7)


@pytest.mark.parametrize("reply, six, four, two", [
    ("E", "E", None, None), ("F.", "F", None, None), ("(E)", "E", None, None), ("C", "C", "C", None),
    ("The answer is E.", "E", None, None), ("Answer: (f)", "F", None, None), ("I choose B", "B", "B", "B"),
    ('{"answer": "E"}', "E", None, None), ('{"answer": "C"}', "C", "C", None), ("\\boxed{F}", "F", None, None),
    ("E. a paintbrush", "E", None, None), ("Z", None, None, None),
])
def test_the_parser_reads_exactly_the_question_s_letters(reply, six, four, two):
    assert parse_answer(reply, SIX.options).letter == six
    assert parse_answer(reply, FOUR.options).letter == four
    assert parse_answer(reply, TWO.options).letter == two


def test_option_text_reaches_every_option_and_the_declarations_skip_a_letter_that_is_not_one():
    assert parse_answer("I used a ladder to reach it.", SIX.options).letter == "F"
    assert parse_answer("It was yes, wide open.", TWO.options).letter == "B"
    # "E" is no declaration on a four-option question, so the earlier declared letter decides, as with "Z"
    assert parse_answer("The answer is B. Final answer: E", FOUR.options).letter == "B"
    assert parse_answer("The answer is B. Final answer: E", SIX.options).letter == "E"


def test_the_prompt_lists_exactly_the_options_and_names_their_letters():
    for question, words in ((SIX, "A, B, C, D, E or F"), (TWO, "A or B")):
        for answer_format in ("text", "json", "logprobs"):
            prompt = question_prompt(question.question, question.options, answer_format)
            assert _lettered(prompt) == list(question.letters) and f"{words}" in prompt
            assert all(option in prompt for option in question.options)
        assert answer_schema(len(question.options))["properties"]["answer"]["enum"] == list(question.letters)
    assert format_instruction("text") == "Answer with the option's letter (A, B, C or D)."  # SENRI's, unchanged


def test_no_prompt_file_hard_codes_four_letters():
    """Every prompt naming the answer letters names the question's ($letters), so none offers a five- or
    six-option question only A–D."""
    from senri.paths import CONFIG_DIR

    texts = {path: path.read_text() for path in (CONFIG_DIR / "prompts").rglob("*.txt")}
    assert not [p for p, t in texts.items() if re.search(r"A, B, C(,)? (or|and) D|A\|B\|C\|D", t)]
    assert len([p for p, t in texts.items() if "$letters" in t]) == 13
    assert len([p for p, t in texts.items() if "<$answer_letters>" in t]) == 6


# --------------------------------------------------------------------------------- random, the contract
def test_random_draws_uniformly_over_the_question_s_letters_only():
    from senri.methods.random import seeded_letter

    two = Counter(seeded_letter(0, f"q{i}", 2) for i in range(1200))
    six = Counter(seeded_letter(0, f"q{i}", 6) for i in range(1200))
    assert set(two) == {"A", "B"} and all(500 <= n <= 700 for n in two.values())
    assert set(six) == set("ABCDEF") and all(150 <= n <= 250 for n in six.values())
    assert [seeded_letter(3, f"q{i}") for i in range(40)] == [seeded_letter(3, f"q{i}", 4) for i in range(40)]


def test_the_prediction_contract_keeps_only_the_question_s_letters():
    from senri.answer import prediction_row
    from senri.methods.base import MethodAnswer

    def row(question, letter):
        return prediction_row(question, "m", "x", "none", MethodAnswer(letter, letter, True), None)

    assert (row(SIX, "E").pred, row(SIX, "E").correct, row(SIX, "E").parse_ok) == ("E", True, True)
    for question, letter in ((FOUR, "E"), (TWO, "C"), (TWO, "Z")):
        refused = row(question, letter)
        assert (refused.pred, refused.correct, refused.parse_ok) == (None, False, False)
    assert row(TWO, "B").correct


def test_letter_counts_have_e_and_f_columns_only_where_they_occur():
    from senri.aggregate import answer_positions

    scored = pl.DataFrame({"method": ["m"] * 3, "model": ["x"] * 3, "memory": ["none"] * 3,
                           "pred": ["E", "B", None], "answer": ["E", "B", "C"]})
    questions = pl.DataFrame({"answer": ["E", "B", "C"]})
    positions = answer_positions(scored, questions)
    assert [c for c in positions.columns if c in "ABCDEF"] == ["A", "B", "C", "D", "E"]
    assert positions.filter(pl.col("method") == "m").select("E", "B", "none").row(0) == (1, 1, 1)
    senri = answer_positions(scored.with_columns(pl.lit("B").alias("pred")), pl.DataFrame({"answer": ["B"]}))
    assert [c for c in senri.columns if c in "ABCDEF"] == list(LETTERS)
    from senri.aggregate import letter_columns  # the letter figure's bars follow the table's columns

    assert letter_columns(positions.columns) == ["A", "B", "C", "D", "E", "none"]
    assert letter_columns(senri.columns) == [*LETTERS, "none"]


# --------------------------------------------------------------------------- blind, blind_letter, blind_debiased
def _blind(tmp_path: Path, rules: list[dict], **method):
    from senri.backends.scripted import ScriptedBackend
    from senri.methods.base import RunContext
    from senri.methods.blind import Blind

    script, record = tmp_path / "model.jsonl", tmp_path / "calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    model = {"backend": "scripted", "script": str(script), "record": str(record)}
    config = {"implementation": "blind", "prompts": "answer", **method}
    context = RunContext(video=INFO, method_name="blind", method_config=config, model_name="scripted",
                         model_config=model, seed=0, backend=ScriptedBackend(model))
    return Blind(context), record


def _sent(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def _user_text(call: dict) -> str:
    content = call["payload"]["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(p for p in content if isinstance(p, str))


def test_blind_json_and_text_offer_and_read_exactly_the_question_s_letters(tmp_path):
    method, record = _blind(tmp_path, [{"match": "paintbrush", "text": '{"answer": "E"}'},
                                       {"match": "wide open", "text": "C"}], answer_format="json")
    six, two = method.answer_many([SIX, TWO])
    assert (six.pred, two.pred) == ("E", None)  # C is not an option of the two-option question
    sent = _sent(record)
    assert [_lettered(_user_text(c)) for c in sent] == [list("ABCDEF"), ["A", "B"]]
    assert "A, B, C, D, E or F" in _user_text(sent[0]) and "A or B" in _user_text(sent[1])
    schemas = [json.dumps(c["payload"]) for c in sent]
    assert '"enum": ["A", "B", "C", "D", "E", "F"]' in schemas[0] and '"enum": ["A", "B"]' in schemas[1]


def test_blind_letter_scores_the_question_s_letters_and_debiasing_rotates_all_of_them(tmp_path):
    """blind_letter asks for the question's letters' log-probabilities; blind_debiased asks N orderings of N
    options and reads each option's score at every position it was shown in."""
    scores = {letter: -float(i + 1) for i, letter in enumerate("ABCDEF")}
    method, record = _blind(tmp_path, [{"text": "A", "letter_logprobs": scores}], answer_format="logprobs")
    six, two = method.answer_many([SIX, TWO])
    assert (six.pred, two.pred) == ("A", "A") and set(six.trace["scores_by_letter"]) == set("ABCDEF")
    assert [c["payload"]["letter_logprobs"] for c in _sent(record)] == [list("ABCDEF"), ["A", "B"]]

    # A model that prefers the first position whatever it holds and also likes option E ("a paintbrush") wherever
    # it stands: a single ordering says A, debiasing over the six orderings finds E.
    rules = [{"match": f"{shown}. a paintbrush", "text": "A",
              "letter_logprobs": {**{c: -5.0 for c in "ABCDEF"}, "A": -1.0, shown: -0.5 if shown == "A" else -1.5}}
             for shown in "ABCDEF"]
    # The two-option question: "yes" (B) is liked in both orderings; the letter C, scored highest, is never read.
    rules += [{"match": "B. no, it was shut", "text": "A", "letter_logprobs": {"A": -1.0, "B": -3.0, "C": 0.0}},
              {"text": "B", "letter_logprobs": {"A": -3.0, "B": -1.0, "C": 0.0}}]
    (tmp_path / "debiased").mkdir()
    method, record = _blind(tmp_path / "debiased", rules, answer_format="logprobs", debias=True)
    six, two = method.answer_many([SIX, TWO])
    sent = _sent(record)
    assert len(sent) == 6 + 2 and len(six.trace["calls"]) == 6 and six.pred == "E"
    assert six.trace["scores"][4] == -0.5 + 5 * -1.5 and six.trace["calls"][4]["shown_as"]["A"] == "E"
    assert two.trace["scores"] == [-3.0 + -3.0, -1.0 + -1.0] and two.pred == "B"
    assert all(c["payload"]["letter_logprobs"] == ["A", "B"] for c in sent[6:])


# --------------------------------------------------------------------------- memory_search, senri_agent*
def test_the_memory_agents_controller_offers_and_accepts_the_question_s_letters(tmp_path):
    from senri.answer import MemoryInputs, answer_video
    from senri.records import MemoryRow, to_frame, write_table

    rows = [MemoryRow("v", "coarse", 0.0, 60.0, 1.0, 30, "h", "I paint the fence with a brush.", "perception", "t",
                      None, None, None)]
    write_table(to_frame(rows, MemoryRow), tmp_path / "memory.parquet", MemoryRow)
    script, record = tmp_path / "agent.jsonl", tmp_path / "agent.calls.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in [
        {"match": "paintbrush", "text": json.dumps({"action": "answer", "rationale": "r", "answer": "E"})},
        {"match": "wide open", "text": json.dumps({"action": "answer", "rationale": "r", "answer": "C"})}]))
    stage = {"seed": 0, "method": {"name": "memory_search", "implementation": "memory_search",
                                   "approach": "persistent_memory", "uses_model": True, "uses_memory": True,
                                   "max_rounds": 1, "top_k": 1, "retriever": "bm25", "json_retries": 0},
             "model": {"name": "agent", "backend": "scripted", "script": str(script), "record": str(record)},
             "memory": {"memory": {"captioner": "perception"}}}
    inputs = MemoryInputs(tmp_path / "memory.parquet", tmp_path / "v.mp4", None, None, None, tmp_path / "captions")
    out = answer_video(to_frame([SIX, TWO], Question), INFO, stage, memory=inputs).sort("qid")
    assert out["pred"].to_list() == ["E", None]  # six_1, two_1: C is no letter of a two-option question
    calls = _sent(record)
    six = [c for c in calls if "paintbrush" in _user_text(c)]
    two = [c for c in calls if "wide open" in _user_text(c)]
    assert _lettered(_user_text(six[0])) == list("ABCDEF") and _lettered(_user_text(two[0])) == ["A", "B"]
    assert '"answer": {"enum": ["A", "B", "C", "D", "E", "F"]}' in json.dumps(six[0]["payload"])
    assert '"answer": {"enum": ["A", "B"]}' in json.dumps(two[0]["payload"])
    assert any("answer must be one of A, B (got 'C')" in _user_text(c) for c in two[1:])


# --------------------------------------------------------------------------- worldmm, magic_video, videoarm
def test_the_workflows_state_every_option_and_name_its_letters():
    from senri.answers import question_block
    from senri.methods.worldmm import query_block
    from senri.prompts import prompt_set

    assert query_block(SIX).endswith("(E) a paintbrush (F) a ladder") and _lettered(query_block(TWO)) == ["A", "B"]
    for question, words in ((SIX, "A, B, C, D, E or F"), (TWO, "A or B")):
        letters = letters_in_words(question.letters)
        assert f"({words})" in prompt_set("worldmm").render("qa_final", letters=letters)
        magic = prompt_set("magic_video").render("answer", context="", letters=letters,
                                                 question=question_block(question.question, question.options))
        assert _lettered(magic) == list(question.letters) and f"({words})" in magic
        arm = prompt_set("videoarm")
        assert f"({words})" in arm.render("instruction", letters=letters)
        assert f"({words})" in arm.render("forced_letter", letters=letters)


# --------------------------------------------------------------------------- videolucy
def test_videolucy_s_schemas_prompts_and_reading_follow_the_question_s_letters():
    from senri.methods import videolucy as lucy
    from senri.prompts import prompt_set

    assert lucy.answer_schema(SIX.letters)["anyOf"][0]["properties"]["Answer"]["enum"] == list("ABCDEF")
    assert lucy.forced_schema(TWO.letters)["properties"]["Answer"]["enum"] == ["A", "B"]
    assert (lucy.ANSWER_SCHEMA, lucy.FORCED_FORM) == (lucy.answer_schema(), lucy.forced_form())
    assert '"Answer": "A|B|C|D|E|F"' in lucy.forced_form(SIX.letters) and '"A|B" or' in lucy.answer_form(TWO.letters)
    assert [lucy.letter_of(a, SIX.letters) for a in ("E", "(f)", "F. a ladder", "G")] == ["E", "F", "F", None]
    assert [lucy.letter_of(a, TWO.letters) for a in ("B", "C", "E")] == ["B", None, None]
    assert lucy.letter_of("E") is None  # the release's A–D for a four-option question
    prompts = prompt_set("videolucy")
    for role in ("answer", "forced", "answer_reason_first", "forced_reason_first"):
        assert "(A, B, C, D, E or F)" in prompts.render(role, letters=letters_in_words(SIX.letters))


# --------------------------------------------------------------------------- egagent
def test_egagent_s_final_answer_takes_the_question_s_letters():
    from senri.methods import egagent

    answer = {"mcq_prediction": "E", "justification": "seen"}
    assert egagent._answer(answer, SIX.letters) == answer and egagent._answer(answer) is None
    assert egagent._answer({**answer, "mcq_prediction": "C"}, TWO.letters) is None
    assert egagent._lenient_answer({"mcq_prediction": " f. "}, SIX.letters)["mcq_prediction"] == "F"
    assert egagent._lenient_answer({"mcq_prediction": "c"}, TWO.letters) is None
    assert egagent.answer_schema(TWO.letters)["properties"]["mcq_prediction"]["enum"] == ["A", "B"]
    assert egagent.SCHEMAS["answer"] == egagent.answer_schema(LETTERS)  # the release's A–D


# --------------------------------------------------------------------------- paravt, video_o3, longvideo_r1
def test_the_seekers_final_readings_keep_only_the_question_s_letters():
    from senri.methods import longvideo_r1, paravt, video_o3

    for reader, reply in (("release", "<answer>{}</answer>"), ("senri", "The answer is {}.")):
        assert paravt.answer_letter(reply.format("E"), SIX, reader) == "E"
        assert paravt.answer_letter(reply.format("E"), FOUR, reader) is None
        assert paravt.answer_letter(reply.format("C"), TWO, reader) is None
        assert paravt.answer_letter(reply.format("B"), TWO, reader) == "B"
        assert video_o3.answer_letter("The answer is F", SIX, reader) == "F"
        assert video_o3.answer_letter("The answer is B", TWO, reader) == "B"
    assert video_o3.answer_letter("The answer is E", FOUR) is None and videomme_official_letter("E") is None
    assert video_o3.answer_letter("Clearly C", TWO) is None  # no capital A or B left: no answer
    assert [longvideo_r1.answer_letter(f, SIX) for f in ("E", "F", "G", None)] == ["E", "F", None, None]
    assert [longvideo_r1.answer_letter(f, TWO) for f in ("B", "C")] == ["B", None]

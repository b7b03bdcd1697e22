"""The named scorers on the spec's tricky cases (benchmarks.md: VM9–VM15, LV8–LV12, ML10–ML13, EM8–EM9) and on
the Video-MME template's own sample responses."""

from __future__ import annotations

import json
import re

import pytest

from senri.answers import videomme_official_letter
from senri.benchmarks.scoring import SCORERS, Scorer, ToolRaised, scored_reply, scorer
from tests.reference import reference_file

FOUR = ("Apples", "Candles", "Berries", "Fishing")
LONG_NO_CAPITAL = "i think it is probably the one with the most items shown in the video clip"


def letter(name: str, reply: str | None, options=FOUR) -> str | None:
    return scorer(name).extract(reply, options)


def test_the_official_videomme_scorer_is_the_answers_function_vm9():
    for reply in ("Best answer: C", "Answer: C. Jade.", LONG_NO_CAPITAL, "<think>A</think>B"):
        assert letter("videomme_official", reply) == videomme_official_letter(reply)
    # The scorer raises on a missing response (``None.strip``): recorded, and the question is not counted.
    with pytest.raises(ToolRaised):
        letter("videomme_official", None)
    outcome = scorer("videomme_official").score(None, "A", FOUR)
    assert (outcome.verdict, outcome.raised) == ("skipped", "AttributeError")


def test_videomme_old_lacks_answer_colon_vm13():
    assert letter("videomme_old", "Answer: C. Jade.") == "A"
    assert letter("lmms_eval_2025", "Answer: C. Jade.") == "A"       # VM14: lmms-eval kept the old list
    assert letter("vlmevalkit_videomme", "Answer: C. Jade.") == "C"  # VM15: VLMEvalKit has "Answer:"
    assert letter("vlmevalkit_videomme", "The correct answer C") == "C" and letter("videomme_official", "The correct answer C") == "C"


def test_denominators_vm10_vm14_lv9_ml11():
    options = FOUR
    official, lmms, strict = scorer("videomme_official"), scorer("lmms_eval_2025"), scorer("senri_strict")
    # A 12-word reply with no capital: skipped officially, wrong for lmms-eval and senri.
    assert official.verdict(official.extract(LONG_NO_CAPITAL, options), "A", options) == "skipped"
    assert lmms.verdict(lmms.extract(LONG_NO_CAPITAL, options), "A", options) == "wrong"
    assert strict.verdict(strict.extract(LONG_NO_CAPITAL, options), "A", options) == "wrong"
    # An absent LVBench question is not scored; an absent MLVU one is wrong.
    assert scorer("lvbench_official").verdict(None, "B", options, present=False) == "skipped"
    assert scorer("mlvu_official").verdict(None, "B", options, present=False) == "wrong"
    # Video-MME's official scorer never counts a question without a prediction (it raises, or skip_missing
    # leaves the video out).
    assert scorer("videomme_official").verdict(None, "B", options, present=False) == "skipped"


@pytest.mark.parametrize("reply, expected", [
    ("Answer: B", "A"), ("the answer is B", "t"), ("(B) 1366", "B"), ("B. 1366", "B"), ("b", "b"),
    ("I think (C)", "C"),
])
def test_lvbench_polish_answer_lv11(reply, expected):
    assert letter("lvbench_polish", reply) == expected


def test_lvbench_official_is_exact_and_case_sensitive_lv8():
    lv = scorer("lvbench_official")
    assert lv.verdict(lv.extract("B", FOUR), "B", FOUR) == "correct"
    assert lv.verdict(lv.extract("b", FOUR), "B", FOUR) == "wrong"
    assert lv.verdict(lv.extract("B.", FOUR), "B", FOUR) == "wrong"
    assert lv.verdict(lv.extract(" B", FOUR), "B", FOUR) == "wrong"
    polish = scorer("lvbench_polish")
    assert polish.verdict(polish.extract("b", FOUR), "B", FOUR) == "wrong"


@pytest.mark.parametrize("reply, expected", [
    ("B", "B"), ("(B) Fishing", "B"), ("Best option: (C)", "C"), ("B.", "B."),
    ("The answer is B (Fishing)", "g"), ("B) ... (see A)", "B"),
])
def test_mlvu_official_ml10(reply, expected):
    assert letter("mlvu_official", reply) == expected
    assert letter("lmms_eval_2025_mlvu", reply) == expected        # ML12: the same rule (after a trim)
    assert letter("lmms_eval_2025_mlvu", f"  {reply}\n") == expected


def test_mlvu_verdicts_and_vlmevalkit_fallback_ml11_ml13():
    ml = scorer("mlvu_official")
    assert ml.verdict(ml.extract("B.", FOUR), "B", FOUR) == "wrong"
    assert ml.verdict(ml.extract("The answer is B (Fishing)", FOUR), "B", FOUR) == "wrong"
    # VLMEvalKit falls back to can_infer (option letters, then option texts) where ML10 is not the gold.
    vl = scorer("vlmevalkit_mlvu")
    assert vl.score("I would say fishing.", "D", FOUR).letter == "D"
    assert vl.score("The answer is B (Fishing)", "D", FOUR).letter == "B"   # can_infer: the lone B token
    assert vl.score("Neither apples nor candles", "A", FOUR).letter == "Z"   # two options named: 'Z'
    # An empty or "NA" prediction comes back from VLMEvalKit's xlsx file as NaN, on which its evaluation raises.
    assert vl.score("NA", "A", FOUR).raised == "TypeError" and vl.score("", "A", FOUR).verdict == "wrong"


def test_six_options_and_flagged_answers():
    six = ("a", "b", "c", "d", "e", "f")
    assert scorer("mlvu_official").verdict("F", "F", six) == "correct"
    # A flagged record (EgoMem's answer "" or "E" with four options) is wrong whatever the reply.
    em = scorer("egomem_official")
    assert em.verdict(None, "", FOUR) == "wrong"
    assert em.verdict("E", "E", FOUR) == "wrong"
    assert em.score('{"Confidence": true, "Answer": "B. Candles"}', "B", FOUR).verdict == "correct"
    assert em.extract("{'Answer': '(C)'}", FOUR) == "C" and em.extract("{'Answer': 'No Answer'}", FOUR) is None
    assert em.extract("B. Candles", FOUR) is None        # VideoLucy's parser reads only a {...} literal


@pytest.mark.parametrize("reply, expected", [
    ("B", "B"),
    ("I pick (D) over A.", "A"),                     # a trailing lone letter beats everything
    ("So the answer is C, not (B) really", "B"),     # after "answer is", the later of the letters found wins
    ("So the answer is C, not that", "C"),           # "answer is X" beats "X "
    ("It is (B) or maybe (C) here", "C"),            # last occurrence within a format
    ("Answer: C. Jade.", "C"),                       # "X." found after the lone-letter and "answer is" steps fail
    ("nothing here", None),
])
def test_lmms_eval_2026_priorities_vm14(reply, expected):
    assert letter("lmms_eval_2026", reply) == expected


def test_senri_strict_never_guesses_and_method_reads_pred():
    assert letter("senri_strict", "Best answer: C") == "C"
    assert letter("senri_strict", "Based on the video, hmm.") is None
    method = scorer("method")
    assert method.reads == "pred" and method.extract("D", FOUR) == "D"


def test_scored_reply_reads_a_structured_answer_field():
    assert scored_reply('{"Confidence": true, "Answer": "B", "Time Period": [[0, 5]]}') == "B"
    assert scored_reply("{'Confidence': True, 'Answer': 'C. Jade', 'Reason': 'x'}") == "C. Jade"
    assert scored_reply("<think>A or B?</think>Best answer: C") == "Best answer: C"
    assert scored_reply(None) is None


def test_registry_names_every_scorer():
    assert {"videomme_official", "videomme_old", "lvbench_official", "lvbench_polish", "mlvu_official",
            "egomem_official", "lmms_eval_2025", "lmms_eval_2025_mlvu", "lmms_eval_2026", "vlmevalkit_videomme",
            "vlmevalkit_mlvu", "senri_strict", "method"} <= set(SCORERS.names())
    assert all(isinstance(scorer(name), Scorer) and scorer(name).name == name for name in SCORERS.names())


def _template_questions() -> list[dict]:
    """The official template's questions; the file is not valid JSON as stored (VM8), so its trailing commas
    are dropped here (the reader's own handling of it is tested with the reader)."""
    text = reference_file("benchmarks/videomme/output_test_template.json").read_text(encoding="utf-8")
    videos = json.loads(re.sub(r",(\s*[}\]])", r"\1", text))
    return [q for video in videos for q in video["questions"]]


@pytest.mark.parametrize("name, correct, counted", [
    ("videomme_official", 7, 9),   # only 002-1 ("Answer: C. Jade.") differs from the old rule
    ("videomme_old", 6, 9),
    ("lmms_eval_2026", 7, 9),
    ("mlvu_official", 2, 9),       # "D" and "B" alone: no ")" and not exactly the letter elsewhere
    ("lvbench_polish", 6, 9),      # "Answer: …" reads as A
])
def test_the_template_sample_responses(name, correct, counted):
    s = scorer(name)
    verdicts = [s.verdict(s.extract(q["response"], q["options"]), q["answer"], q["options"])
                for q in _template_questions()]
    assert len(verdicts) == 9
    assert (verdicts.count("correct"), len(verdicts) - verdicts.count("skipped")) == (correct, counted)

"""The answer parser's documented rule, and letter scoring with position debiasing."""

import pytest

from senri.answers import (ANSWER_SCHEMA, FORMAT_INSTRUCTIONS, best_letter, cyclic_order, debiased_scores,
                           format_instruction, parse_answer, question_prompt, split_reasoning,
                           videomme_official_letter)

OPTIONS = ["To my rear left", "To my rear right", "To my front left", "To my front right"]


@pytest.mark.parametrize("text, letter, rule", [
    # The cases.
    ("The answer is B because A is wrong.", "B", "declaration"),
    ("A person walks in. The correct option is C.", "C", "declaration"),
    ("Based on the video, the answer is D", "D", "declaration"),
    ("Answer: (b)", "B", "declaration"),
    ("I think it was to my front left of me.", "C", "option_text"),
    # More declarations: the last one wins.
    ("At first I thought the answer is A, but on reflection the answer is C.", "C", "declaration"),
    ("Final answer: D", "D", "declaration"),
    ("Option B is correct.", "B", "declaration"),
    ("I choose (a).", "A", "declaration"),
    ("So the result is \\boxed{C}", "C", "declaration"),
    ("A. green\n\nThe answer is D. black", "D", "declaration"),
    ("<think>the answer is A? no</think>The answer is B", "B", "declaration"),
    # Structured output.
    ('{"answer": "C"}', "C", "json"),
    ('```json\n{"answer": "(d)"}\n```', "D", "json"),
    ('{"answer": "To my rear right"}', "B", "json"),
    # Bare letters.
    ("B", "B", "bare_letter"),
    ("(C)", "C", "bare_letter"),
    ("D. To my front right", "D", "bare_letter"),
    ("C, I guess", "C", "bare_letter"),
])
def test_parses(text, letter, rule):
    parsed = parse_answer(text, OPTIONS)
    assert (parsed.letter, parsed.rule) == (letter, rule)
    assert parsed.ok


@pytest.mark.parametrize("text", [
    "",
    "I cannot tell from the video.",
    "the answer is a person walking",            # lower-case 'a' inside a sentence is not a letter
    "Either to my rear left or to my rear right.",  # two options' texts: ambiguous
    "A person walks in.",                        # a capital A starting a sentence is not an answer
    '{"answer": "E"}',
])
def test_unparseable_outputs_are_failures_not_guesses(text):
    parsed = parse_answer(text, OPTIONS)
    assert parsed.letter is None and not parsed.ok and parsed.rule == "none"


def test_an_option_inside_a_longer_matching_option_yields_to_it():
    options = ["red", "red car", "blue bus", "green"]
    assert parse_answer("I saw a red car.", options).letter == "B"
    assert parse_answer("It was red.", options).letter == "A"


def test_prompt_lists_options_and_format():
    prompt = question_prompt("Where was I?", OPTIONS, "json")
    assert "A. To my rear left\nB. To my rear right" in prompt and '{"answer"' in prompt
    assert ANSWER_SCHEMA["properties"]["answer"]["enum"] == ["A", "B", "C", "D"]


def test_cyclic_orders_show_every_option_in_every_position():
    orders = [cyclic_order(k) for k in range(4)]
    assert orders[1] == [1, 2, 3, 0]
    for position in range(4):
        assert sorted(order[position] for order in orders) == [0, 1, 2, 3]


def test_debiasing_cancels_a_fixed_position_preference():
    # A model that adds +2 to whatever sits in position A, on top of a real preference for option C (index 2).
    def model(shift):
        order = cyclic_order(shift)
        return {letter: (2.0 if position == 0 else 0.0) + (1.0 if order[position] == 2 else 0.0)
                for position, letter in enumerate("ABCD")}

    assert best_letter(list(model(0).values())) == "A"          # the biased single ordering says A
    scores = debiased_scores({k: model(k) for k in range(4)})
    assert scores == [2.0, 2.0, 6.0, 2.0]                          # hand-computed: bias spread evenly
    assert best_letter(scores) == "C"


def test_no_letter_seen_or_a_tie_is_no_prediction():
    assert best_letter([-1e9] * 4) is None
    assert best_letter([-1.0, -1.0, -2.0, -3.0]) is None


def test_the_answer_prompt_family_keeps_the_built_in_format_lines():
    """The format lines moved into config/prompts/answer/ (where prompts_dir can replace them); their default
    text is the built-in one, so prompts of existing runs are byte-identical."""
    from senri.prompts import prompt_set

    prompts = prompt_set("answer")
    for answer_format, line in FORMAT_INSTRUCTIONS.items():
        assert prompts.render(f"format_{answer_format}", letters="$letters") == line
        assert prompts.render(f"format_{answer_format}", letters="A, B, C or D") == format_instruction(answer_format)
        four = prompts.render(f"format_{answer_format}", letters="A, B, C or D")
        assert question_prompt("Where was I?", OPTIONS, answer_format, instruction=four) == question_prompt(
            "Where was I?", OPTIONS, answer_format)


@pytest.mark.parametrize("text, reply, reasoning", [
    ("<think>A is wrong, so B</think>The answer is C", "The answer is C", "A is wrong, so B"),
    ("so B</think> C", "C", "so B"),
    ("<think>A is wrong, so the answer is B", "", "A is wrong, so the answer is B"),  # cut at the token limit
    ("  <think>\nB because", "", "B because"),
    ("The answer is B", "The answer is B", None),
    ("Answer B, not <think>", "Answer B, not <think>", None),  # a tag after the reply opens no block
])
def test_split_reasoning_never_reads_an_unclosed_block_as_the_reply(text, reply, reasoning):
    """A reply cut inside its ``<think>`` block has no answer: scoring its reasoning as the answer would credit a
    cut-off model with whatever letter it was weighing."""
    assert split_reasoning(text) == (reply, reasoning)
    if reply == "":
        assert parse_answer(text, ("a", "b", "c", "d")).letter is None


@pytest.mark.parametrize("reply, letter", [
    # spec benchmarks.md VM9 and its tricky cases
    ("Best answer: C", "B"),                       # "Best answer:" is fused with "Best option:": never removed alone
    ("The best option is C", "C"),                 # fused with "The correct option is": "The best option is" stays
    ("The best option isThe correct option is B", "B"),  # the fused string itself is removed
    ("Based on the video the answer is (c).", "B"),
    ("Answer: C. Jade.", "C"),
    ("Option: D", "D"),
    ("The correct answer: A", "A"),
    ("The correct option D", "D"),
    ("  (A)  ", "A"),
    ("ANSWER: D", "A"),                            # case-sensitive: "ANSWER:" is not a lead-in
    ("c", None),
    ("", None),
    (None, None),
    ("the cat sat on the mat while the dog barked at the mailman in the rain", None),  # > 10 words, no capital A–D
    ("one two three four five six seven eight nine ten eleven twelve, so D", "D"),
    ("The best answer is D", "D"),
    ("Best option: D", "B"),                       # "Best option:" is only removed fused
    ("i think it is probably the one with the most items shown in the video clip", None),
])
def test_videomme_official_letter_is_the_official_scorer_s_rule(reply, letter):
    assert videomme_official_letter(reply) == letter

"""Named answer scorers: how each benchmark's own scorer and each common harness reads a reply, whom it counts,
and how it prints the accuracy.

A scorer named after a tool returns what that tool returns, on the **raw reply** as the tool receives it (no
``<think>`` cut, no JSON field taken unless the tool does so itself): the same extraction, the same "not counted"
rule, the same exceptions (a reply that makes the tool's code raise is counted as the tool's run counts such a
question, and flagged with the exception's name), the same macro/micro aggregation and the same printed rounding
(:func:`tool_percent`). Each is checked on cases the tool's own code computed (tests/reference/scorers/, made by
bench/scorer_cases.py; repositories, commits and functions in :data:`SOURCES` and docs/protocol.md).

Every scorer re-reads the same stored replies (``raw_output`` of the prediction files), so one run is scored by
all of them without asking a model again, and the report shows where they disagree (spec benchmarks.md; issue 58).

Registered names (:data:`SCORERS`):

- ``videomme_official`` — VM9–VM12, ``extract_characters_regex`` of the scorer Video-MME's README links: lead-in
  phrases removed (two fused by a missing comma), first capital A–D anywhere; an empty extraction is in no
  count. A question without a prediction makes the scorer raise; its own way around that (``skip_missing``)
  leaves the whole video out, so every question of such a video is skipped.
- ``videomme_old`` — VM13, the copy in Video-MME's repository until June 2024: the shorter phrase list.
- ``lvbench_official`` — LV8–LV10, ``compute_accuracy``: the prediction equals the letter exactly; a question
  without a prediction is not scored.
- ``lvbench_polish`` — LV11, ``polish_answer`` (the authors' inference helper) before the exact comparison.
- ``mlvu_official`` — ML10–ML11, ``check_ans``: the character before the first ")", else the whole reply; the
  gold is the last candidate equal to the answer text, "@" when none is; every question counted.
- ``egomem_official`` — EM8/EM9: VideoLucy's ``parse_answer`` (the last ``{...}`` after any ``</think>``, read as
  a Python literal), then senri's reading of its ``Answer`` string (the release publishes none); all counted.
- ``lmms_eval_2025`` — VM14/LV12, lmms-eval's Video-MME and LVBench task functions of 2025 (the old phrase list);
  every question in the denominator.
- ``lmms_eval_2025_mlvu`` — ML12, lmms-eval's MLVU task of 2025: strip, then the ML10 rule on letters; the
  mean divides by all seven task types, also on a subset run.
- ``lmms_eval_2026`` — VM14, lmms-eval's ``extract_mcq_answer`` (choices A–D) as its 2026 tasks call it.
- ``vlmevalkit_videomme`` — VM15 under ``exact_matching``: the prediction as read back from VLMEvalKit's xlsx
  file, its regex, then ``can_infer`` on option lines a Video-MME question does not have: unreadable is 0.
- ``vlmevalkit_mlvu`` — ML13 under ``exact_matching``: the ML10 rule, then ``can_infer`` (option letters and
  option texts); an empty / "NA" prediction makes its evaluation raise (counted wrong, flagged); its M-Avg is
  the micro mean.
- ``senri_prereading`` — senri's own pre-reading (``<think>`` cut, a JSON/dict ``answer`` field taken:
  :func:`scored_reply`) followed by Video-MME's official letter rule, unreadable wrong; what every scorer read
  before issue 58, now a scorer of its own.
- ``senri_strict`` — senri's strict parse (:func:`senri.answers.parse_answer`): never guesses; unreadable wrong.
- ``method`` — the method's own letter as it recorded it in ``pred`` (SENRI-Bench's scoring).

A record kept but flagged at ingest (answer "" or a letter that is not an option) is never right, except under
the MLVU tools, whose gold for an answer in no candidate is "@".
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

from senri.answers import VIDEOMME_LEAD_INS, json_objects, lead_in_letter, parse_answer, split_reasoning
from senri.records import OPTION_LETTERS
from senri.registry import Registry

#: What a reply without an extraction (or a question without a prediction) does to the accuracy.
Denominator = Literal["wrong", "skipped"]
#: A question's verdict under one scorer.
Verdict = Literal["correct", "wrong", "skipped"]
#: How a scorer's macro column (MLVU's M-Avg) is made: the mean over the member columns that have questions
#: (MLVU's ``choice_bench``), over all members with an empty one counted 0 (lmms-eval), or the micro accuracy
#: over the members' questions (VLMEvalKit).
Macro = Literal["present", "all", "micro"]
#: The question table's option columns, in letter order (2–6 options: MLVU's test set has A–F).
OPTION_COLUMNS = tuple(f"option_{letter.lower()}" for letter in OPTION_LETTERS)


class ToolRaised(Exception):
    """The tool's own code raises on this reply (``kind``: the exception's name in the tool)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class Outcome:
    """One question under one scorer: the letter the tool compared (any string; None: no extraction), the verdict,
    and the exception the tool raised on the reply (None when it did not)."""

    letter: str | None
    verdict: Verdict
    raised: str | None = None


def tool_percent(correct: int, counted: int, decimals: int = 1, form: str = "100*c/n") -> float | None:
    """An accuracy as the Python tools print it: the float the tool computes (``form``: ``100*c/n``, or
    ``c/n*100`` as MLVU's ``choice_bench`` and VLMEvalKit write it), rounded by Python's float rounding, which is
    what ``f"{x:.1f}"`` prints — 1/16 is 6.2 and 5/16 is 31.2 (6.25 and 31.25 are exact binary ties, rounded to
    even). None for an empty column (the tools print 0 there; senri shows it empty)."""
    if not counted:
        return None
    if form == "fraction":  # VLMEvalKit's Video-MME rating: the mean score printed with ".3f" (1/16 → "0.062")
        return round(round(correct / counted, decimals + 2) * 100, decimals)
    value = correct / counted * 100 if form == "c/n*100" else 100 * correct / counted
    return round(value, decimals)


@dataclass(frozen=True)
class Scorer:
    """One named way to read and count replies. ``extract`` maps (reply, options) to the letter the tool
    compares, or None (no extraction), or raises :class:`ToolRaised` where the tool's code raises; ``unreadable``,
    ``absent`` and ``raised`` say what a reply with no extraction, a question with no prediction and a reply the
    tool raises on count as; ``absent_scope`` ``video``: the tool leaves the whole video of a question without a
    prediction out (Video-MME's ``skip_missing``); ``fallback``: a second reading compared when the first is not
    the gold (VLMEvalKit's ``can_infer``); ``gold_unmatched``: the gold the tool gives an answer in no candidate
    (MLVU's "@"); ``percent`` / ``macro``: the tool's arithmetic for a column and a macro column (None: the
    layout's); ``reads``: ``reply`` (the stored raw reply) or ``pred`` (the method's own letter); ``source``: the
    spec statements; ``origin``: repository @ commit, path, function."""

    name: str
    extract: Callable[[str | None, Sequence[str]], str | None]
    unreadable: Denominator
    absent: Denominator
    source: str
    description: str
    reads: Literal["reply", "pred"] = "reply"
    raised: Denominator = "wrong"
    absent_scope: Literal["question", "video"] = "question"
    fallback: Callable[[str | None, Sequence[str]], str | None] | None = None
    gold_unmatched: str | None = None
    percent: str | None = None
    macro: Macro | None = None
    origin: str = ""

    def gold(self, answer: str, options: Sequence[str]) -> str | None:
        """The letter that is right: the answer when it is one of the question's letters; otherwise the tool's
        gold for an answer in no candidate, or None (a flagged record is never right)."""
        if answer in OPTION_LETTERS[:len(options)]:
            return answer
        return self.gold_unmatched

    def verdict(self, letter: str | None, answer: str, options: Sequence[str], present: bool = True) -> Verdict:
        """The verdict on one question given this scorer's ``letter`` (None: no extraction). ``present`` is
        False when the run has no prediction for it."""
        if not present:
            return "wrong" if self.absent == "wrong" else "skipped"
        if letter is None:
            return "wrong" if self.unreadable == "wrong" else "skipped"
        return "correct" if letter == self.gold(answer, options) else "wrong"

    def score(self, reply: str | None, answer: str, options: Sequence[str], present: bool = True) -> Outcome:
        """The tool's verdict on one reply (``present`` False: the run has no prediction for the question)."""
        if not present:
            return Outcome(None, self.verdict(None, answer, options, present=False))
        try:
            letter = self.extract(reply, options)
        except ToolRaised as error:
            return Outcome(None, self.raised, error.kind)
        verdict = self.verdict(letter, answer, options)
        if verdict == "wrong" and letter is not None and self.fallback is not None:
            try:
                second = self.fallback(reply, options)
            except ToolRaised as error:
                return Outcome(None, self.raised, error.kind)
            if second is not None and second == self.fallback_gold(answer, options):
                return Outcome(second, "correct")
            letter = second
        return Outcome(letter, verdict)

    def fallback_gold(self, answer: str, options: Sequence[str]) -> str | None:
        """The letter the fallback reading must hit: VLMEvalKit's MLVU evaluation sets the item's answer to the
        *first* candidate with the answer's text (its "(X)" gold keeps the last), so a duplicated answer text has
        two golds there."""
        gold = self.gold(answer, options)
        if gold is None or gold not in OPTION_LETTERS[:len(options)]:
            return None
        return OPTION_LETTERS[list(options).index(options[OPTION_LETTERS.index(gold)])]

    def column_percent(self, correct: int, counted: int, decimals: int = 1) -> float | None:
        """A (non-macro) column as this tool prints it."""
        return tool_percent(correct, counted, decimals, self.percent or "100*c/n")

    def macro_percent(self, members: Sequence[tuple[int, int]], decimals: int = 1) -> float | None:
        """A macro column (MLVU's M-Avg) from its members' ``(correct, counted)`` as this tool makes it."""
        present = [(c, n) for c, n in members if n]
        if not present:
            return None
        if self.macro == "micro":
            return self.column_percent(sum(c for c, _ in present), sum(n for _, n in present), decimals)
        form = self.percent or "100*c/n"
        values = [(c / n * 100 if form == "c/n*100" else 100 * c / n) for c, n in present]
        divisor = len(members) if self.macro == "all" else len(values)
        return round(sum(values) / divisor, decimals)


def layout_value(s: Scorer, layout: Any, counts: Mapping[str, tuple[int, int]], key: str,
                 decimals: int = 1) -> float | None:
    """Column ``key`` of ``layout`` (a :class:`senri.benchmarks.layouts.Layout`) as scorer ``s``'s tool prints
    it, from the ``(correct, counted)`` per column: a plain column by the tool's arithmetic and rounding
    (:func:`tool_percent`), a macro column by its macro rule; a scorer that is no tool (senri's own) is shown by
    the layout's rule (:func:`senri.benchmarks.layouts.column_value`). The one function the report calls for a
    scorer's numbers."""
    from senri.benchmarks.layouts import column_value

    column = layout.column(key)
    if s.percent is None and s.macro is None:
        return column_value(layout, counts, key, decimals)
    if column.over == "macro":
        if s.macro is None:
            return column_value(layout, counts, key, decimals)
        return s.macro_percent([counts[m] for m in column.members], decimals)
    return s.column_percent(*counts[key], decimals)


def question_options(row: Mapping[str, Any]) -> tuple[str, ...]:
    """A question row's options in letter order: ``option_a``…``option_f`` without the absent ones (null, or the
    empty C/D padding of a two- or three-option question)."""
    options = [row.get(column) for column in OPTION_COLUMNS]
    present = [o for o in options if o is not None]
    while len(present) > 2 and present[-1] == "":
        present.pop()
    return tuple(present)


# --- senri's own pre-reading (the ``senri_prereading`` scorer; no tool scorer reads through it) ------------------

_ANSWER_FIELD = re.compile(r"""["']answer["']\s*:\s*["']([^"']*)["']""", re.IGNORECASE)


def scored_reply(raw_output: str | None) -> str | None:
    """senri's pre-reading of a reply: the final reply after any ``<think>`` block, or, where that reply is a
    structured object with an ``answer`` field (VideoLucy's ``{"Confidence", "Answer", ...}``, a ``{"answer": ...}``
    JSON reply), that field's text — what the method's own protocol calls its answer. No benchmark tool reads a
    reply this way, so only the scorer named for it does (``senri_prereading``); the tools' scorers read the raw
    reply (issue 58). Reading the whole object with Video-MME's rule takes the A of "Answer" for every reply."""
    if raw_output is None:
        return None
    reply = split_reasoning(raw_output)[0]
    for obj in json_objects(reply):
        for key, value in obj.items():
            if str(key).lower() == "answer" and isinstance(value, str):
                return value
    if reply.lstrip().startswith("{"):
        match = _ANSWER_FIELD.search(reply)  # a Python-literal dict (single quotes), as VideoLucy's release reads
        if match:
            return match.group(1)
    return reply


# --- extractions: each the rule of the tool it is named after, on the raw reply -----------------------------------

#: VM13 / VM14: the phrase list of Video-MME's old scorer and of lmms-eval's Video-MME and LVBench tasks (2025): no
#: "Answer:", "Option:", "The correct answer", "The correct option"; the same two fused entries.
VIDEOMME_OLD_LEAD_INS: tuple[str, ...] = VIDEOMME_LEAD_INS[:6]
#: VM15: VLMEvalKit's list: the old one plus "Answer:" and "Option:".
VLMEVALKIT_LEAD_INS: tuple[str, ...] = VIDEOMME_LEAD_INS[:8]


def _text(reply: str | None, exception: str = "AttributeError") -> str:
    """The reply as a string; a tool that calls a string method on a missing prediction raises ``exception``."""
    if reply is None:
        raise ToolRaised(exception)
    return reply


def _empty_is_none(letter: str) -> str | None:
    return letter or None


def videomme_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """VM9 on the raw reply (the official list); a missing prediction raises in the scorer (``None.strip``)."""
    return lead_in_letter(_text(reply), VIDEOMME_LEAD_INS)


def videomme_old_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    return lead_in_letter(_text(reply), VIDEOMME_OLD_LEAD_INS)


def exact_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """LV8: the prediction is compared as it is, so the "letter" is the whole reply (right only when it is the
    gold letter, case and whitespace included)."""
    return reply


def polish_answer(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """LV11, LVBench's ``polish_answer``: trim; what precedes the first ")", trimmed; when a "(" is left, what
    lies between it and the next "(", trimmed; the first space-separated token; its first character, or "" when
    nothing is left (then wrong). "Answer: B" reads as A, "the answer is B" as t, "( B)" as B."""
    text = _text(reply).strip().split(")")[0].strip()
    if "(" in text:
        text = text.split("(")[1].strip()
    token = text.split(" ")[0]
    return token[:1]


def mlvu_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """ML10, ``check_ans``: with a ")", the one character right before the first ")" ("" when the reply starts
    with it; "g" for "The answer is B (Fishing)"); without one, the whole reply, right only when it is the letter.
    ``")" in None`` raises a TypeError."""
    text = _text(reply, "TypeError")
    cut = text.find(")")
    return text[max(cut - 1, 0):cut] if cut >= 0 else text


def lmms_mlvu_2025_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """ML12, lmms-eval's MLVU task of 2025: the reply trimmed first, then the ML10 rule."""
    return _empty_is_none(mlvu_letter(_text(reply).strip()))


def lmms_videomme_2025_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """VM14 / LV12, lmms-eval's Video-MME and LVBench tasks of 2025: the old list on the raw reply (the same
    function in both tasks); a missing reply raises (``None.strip``)."""
    return videomme_old_letter(reply)


#: The pandas missing-value strings: VLMEvalKit writes predictions to xlsx and reads them back with pandas, so a
#: reply that is exactly one of these (or empty) comes back as NaN.
PANDAS_NA_STRINGS = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                               "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
_XLSX_ESCAPED = re.compile(r"[\x00-\x08\x0b-\x1f]")


def vlmevalkit_prediction(reply: str | None) -> str | None:
    """The prediction as VLMEvalKit's evaluation reads it back from its xlsx file: None for NaN (no reply, or a
    pandas missing-value string), control characters other than tab and newline as xlsx's ``_xHHHH_`` escapes
    (so a carriage return reads as "_x000D_", which holds a D)."""
    if reply is None or reply in PANDAS_NA_STRINGS:
        return None
    return _XLSX_ESCAPED.sub(lambda m: f"_x{ord(m.group()):04X}_", reply)


def vlmevalkit_videomme_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """VM15 under ``exact_matching``: ``str()`` of the prediction ("nan" for NaN), VLMEvalKit's phrase list; its
    option fallback reads option lines from the question, which a Video-MME question has none of, so it ends in
    'Z' (wrong)."""
    prediction = vlmevalkit_prediction(reply)
    return _empty_is_none(lead_in_letter("nan" if prediction is None else prediction, VLMEVALKIT_LEAD_INS) or "")


_FAIL_MSG = "Failed to obtain answer via API."
_REFUSALS = ("Sorry, I can't help with images of people yet.", "I can't process this file.",
             "I'm sorry, but without the image provided", "Cannot determine the answer")
_VERBOSE_ANSWER = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")


def _option_tokens(answer: str) -> list[str]:
    for char in ".()[],:;!*#{}":
        answer = answer.replace(char, " ")
    return answer.split()


def can_infer_letter(answer: str, choices: Mapping[str, str]) -> str | None:
    """VLMEvalKit's ``can_infer`` without a judge: (1) the API-failure text reads nothing, a refusal reads 'Z';
    exactly one choice letter standing as a token (punctuation split off) reads as it when it is among the last
    five tokens; no letter but a lone 'Z' token reads 'Z'; "(correct) answer is X" (A–D) reads X; (2) otherwise,
    when the reply is at most twice as long as all option texts together, the one option whose lower-cased text
    occurs in it. None when nothing is read."""
    if _FAIL_MSG in answer:
        return None
    if any(refusal in answer for refusal in _REFUSALS):
        return "Z"
    tokens = _option_tokens(answer)
    named = [letter for letter in choices if letter in tokens]
    if len(named) == 1:
        for letter in choices:
            if letter in tokens and tokens.index(letter) > len(tokens) - 5:
                return letter
    elif not named and "Z" in tokens:
        return "Z"
    verbose = _VERBOSE_ANSWER.search(answer)
    if verbose and verbose.group(1).upper() in choices:
        return verbose.group(1).upper()
    lowered = answer.lower()
    if len(lowered) > 2 * sum(len(str(text)) for text in choices.values()):
        return None
    found = [letter for letter, text in choices.items() if str(text).lower() in lowered]
    return found[0] if len(found) == 1 else None


def vlmevalkit_mlvu_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """ML13's first step: the ML10 rule on the prediction read back from the xlsx file; a NaN prediction makes
    ``FAIL_MSG in pred`` raise (TypeError)."""
    prediction = vlmevalkit_prediction(reply)
    if prediction is None:
        raise ToolRaised("TypeError")
    if _FAIL_MSG in prediction:
        return None  # scored -1 and left to the rating (which adds the -1 in; senri counts it wrong)
    return mlvu_letter(prediction)


def vlmevalkit_mlvu_fallback(reply: str | None, options: Sequence[str]) -> str | None:
    """ML13's second step: ``can_infer`` with the candidates as options A…, else 'Z' (``exact_matching``)."""
    prediction = vlmevalkit_prediction(reply) or ""
    return can_infer_letter(prediction, dict(zip(OPTION_LETTERS, options))) or "Z"


#: lmms-eval's ``extract_mcq_answer`` (2026): phrases after which the first occurrence of each choice letter is
#: a candidate (compared lower-cased), in its order.
LMMS_ANSWER_PHRASES = (
    "the answer is", "answer is", "the correct answer is", "correct answer is", "the best answer is",
    "best answer is", "the correct option is", "correct option is", "the best option is", "best option is",
    "the choice is", "choice is", "the correct choice is", "correct choice is", "i choose", "i select", "i pick",
    "my answer is", "my choice is", "옵션", "정답은", "답은", "답:", "答案是", "答案为", "选", "答えは")
#: Its candidate formats by priority (higher wins; within one, the later position).
_LMMS_SUFFIX_FORMATS = ((".", 5), (":", 4), (")", 3), (" ", 2))


def lmms_mcq_letter(reply: str | None, choices: str = "ABCD") -> str | None:
    """lmms-eval's generic extractor (2026), as its Video-MME, LVBench and MLVU tasks call it (choices A–D).
    The reply is trimmed, then stripped of , . ! ? ; : ' " (each in turn, from both ends) and padded with a space
    on each side. Every choice letter yields candidates: its last "(X)" (priority 6), last "X." (5), "X:" (4),
    "X)" (3), "X " (2); after the first occurrence of each answer phrase, the first X that follows (7); X leading
    the trimmed text and not followed by a letter (10), or closing it and not preceded by one (9). Without any
    candidate, the last occurrence of any choice (0). The highest priority wins, then the later position; no
    candidate reads nothing."""
    if not reply or not reply.strip():
        return None
    text = reply.strip()
    for char in ",.!?;:'\"":
        text = text.strip(char)
    text = f" {text} "
    found: list[tuple[int, int, str]] = []
    for letter in choices:
        if f"({letter})" in text:
            found.append((6, text.rfind(f"({letter})"), letter))
        for suffix, priority in _LMMS_SUFFIX_FORMATS:
            if letter + suffix in text:
                found.append((priority, text.rfind(letter + suffix), letter))
    lowered = text.lower()
    for phrase in LMMS_ANSWER_PHRASES:
        at = lowered.find(phrase)
        if at >= 0:
            for letter in choices:
                position = text.find(letter, at + len(phrase))
                if position >= 0:
                    found.append((7, position, letter))
    body = text.strip()
    for letter in choices:
        if body.startswith(letter) and (len(body) == 1 or not body[1].isalpha()):
            found.append((10, 0, letter))
        if body.endswith(letter) and (len(body) == 1 or not body[-2].isalpha()):
            found.append((9, len(text) - 1, letter))
    if not found:
        found = [(0, text.rfind(letter), letter) for letter in choices if letter in text]
    return max(found)[2] if found else None


def lmms_eval_2026_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    return lmms_mcq_letter(reply)


def videolucy_reply(reply: str | None) -> Any:
    """VideoLucy's ``parse_answer`` (EM9): what follows the last "</think>"; the last ``{...}`` without nested
    braces; "false"/"true" made Python's, line breaks removed; read as a Python literal (a dict, or whatever
    literal it is). None when there is no such span or it does not parse; another error in the literal reader (an
    unhashable key: ``{[1]: 2}``) is raised as the release raises it."""
    tail = _text(reply).split("</think>")[-1]
    spans = re.findall(r"\{[^{}]*\}", tail)
    if not spans:
        return None
    literal = spans[-1].replace("false", "False").replace("true", "True").replace("\n", "")
    try:
        return ast.literal_eval(literal)
    except (SyntaxError, ValueError):
        return None
    except Exception as error:  # the release lets every other error of the literal reader through
        raise ToolRaised(type(error).__name__) from error


def egomem_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """EM9: VideoLucy's parse of the reply, then senri's reading of its ``Answer`` string ("B", "(B)", "B. text",
    "option B"; the release publishes no letter step)."""
    from senri.answers import letter_of  # VideoLucy's reader (the method imports it too): one rule, not a copy

    parsed = videolucy_reply(reply)
    if not isinstance(parsed, dict) or not isinstance(parsed.get("Answer"), str):
        return None
    return letter_of(parsed["Answer"], OPTION_LETTERS[:len(options) or 4])


def senri_prereading_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """senri's pre-reading (:func:`scored_reply`), then Video-MME's official letter rule."""
    return lead_in_letter(scored_reply(reply), VIDEOMME_LEAD_INS)


def senri_strict_letter(reply: str | None, options: Sequence[str]) -> str | None:
    return parse_answer(reply, options).letter


def method_letter(pred: str | None, options: Sequence[str] = ()) -> str | None:
    """The method's own recorded letter (``pred``): what SENRI-Bench's tables have always scored."""
    return pred


# --- the registry -------------------------------------------------------------------------------------------------

#: Where each tool scorer comes from: repository @ commit, path, function (docs/protocol.md, the scorer cases).
SOURCES = {
    "videomme_official": "thanku-all/parse_answer @ afd52cfe3dde5b3685e0d4f760c10c756860c758, eval_your_results.py, "
                         "extract_characters_regex + eval_your_results",
    "videomme_old": "BradyFU/Video-MME @ 4e7566d36f63121fc72f040654d6f38f83f30125, evaluation/eval_your_results.py, "
                    "extract_characters_regex + eval_your_results",
    "lvbench_official": "THUDM/LVBench @ f998d95541cd5f0953c52449b185c6467b9b099d, "
                        "lvbench/metrics/compute_accuracy.py, compute_accuracy",
    "lvbench_polish": "THUDM/LVBench @ f998d95541cd5f0953c52449b185c6467b9b099d, lvbench/utils/answer_util.py, "
                      "polish_answer (then compute_accuracy)",
    "mlvu_official": "JUNJIE99/MLVU @ fd060c10a43ea48a35100a22688a927b8e531199, "
                     "evaluation/multiple_choice_evaluation/choice_bench.py, MLVU.qa_template + check_ans + main's "
                     "aggregation",
    "egomem_official": "Zplusdragon/VideoLucy @ f7e4730b7e4494e7ceaa6ee80602cd660cef70a2, utils.py, parse_answer "
                       "(letter: senri.answers.letter_of)",
    "lmms_eval_2025": "EvolvingLMMs-Lab/lmms-eval @ e7e78ed57eb5f8407c2d06acaf144772a89ac881, "
                      "lmms_eval/tasks/videomme/utils.py, videomme_process_results + videomme_aggregate_results; "
                      "@ e8b44ffd93e77ab5af1111115b1dd51a514d14f0, lmms_eval/tasks/lvbench/utils.py, "
                      "lvbench_process_results",
    "lmms_eval_2025_mlvu": "EvolvingLMMs-Lab/lmms-eval @ 9596fbd7fc421dfc5cd584efcaf9a3d806c98c66 (unchanged at "
                           "e7e78ed and e8b44ff), lmms_eval/tasks/mlvu/utils.py, mlvu_process_results + "
                           "mlvu_aggregate_results_dev",
    "lmms_eval_2026": "EvolvingLMMs-Lab/lmms-eval @ 75571cfe0fa36ca5ec2e6aa2bb268f9d38295af3, "
                      "lmms_eval/tasks/_task_utils/mcq_extract.py extract_mcq_answer via "
                      "tasks/{videomme,mlvu,lvbench}/utils.py *_process_results and aggregations",
    "vlmevalkit_videomme": "open-compass/VLMEvalKit @ e8e78f05f3080fe28154f2130321f17951c3be94, "
                           "vlmeval/dataset/videomme.py VideoMME.evaluate (exact_matching), "
                           "dataset/utils/videomme.py extract_characters_regex, extract_option, get_dimension_rating",
    "vlmevalkit_mlvu": "open-compass/VLMEvalKit @ e8e78f05f3080fe28154f2130321f17951c3be94, "
                       "vlmeval/dataset/mlvu.py MLVU_MCQ.evaluate + MLVU.evaluate (exact_matching), "
                       "dataset/utils/mlvu.py check_ans_with_model, utils/matching_util.py can_infer",
}

_ALL: tuple[Scorer, ...] = (
    Scorer("videomme_official", videomme_letter, "skipped", "skipped", "VM9-VM12",
           "Video-MME official (lead-ins removed, first capital A-D; empty extraction skipped)",
           raised="skipped", absent_scope="video", percent="100*c/n", origin=SOURCES["videomme_official"]),
    Scorer("videomme_old", videomme_old_letter, "skipped", "skipped", "VM13",
           "Video-MME's scorer before June 2024 (shorter lead-in list)",
           raised="skipped", absent_scope="video", percent="100*c/n", origin=SOURCES["videomme_old"]),
    Scorer("lvbench_official", exact_letter, "wrong", "skipped", "LV8-LV10",
           "LVBench official (the reply must be the letter; absent question not scored)",
           percent="c/n*100", origin=SOURCES["lvbench_official"]),
    Scorer("lvbench_polish", polish_answer, "wrong", "skipped", "LV11",
           "LVBench's polish_answer helper, then the exact letter", raised="skipped", percent="c/n*100",
           origin=SOURCES["lvbench_polish"]),
    Scorer("mlvu_official", mlvu_letter, "wrong", "wrong", "ML10-ML11",
           "MLVU official (character before the first ')', else the whole reply; M-Avg over the tasks present)",
           gold_unmatched="@", percent="c/n*100", macro="present", origin=SOURCES["mlvu_official"]),
    Scorer("egomem_official", egomem_letter, "wrong", "wrong", "EM8-EM9",
           "EgoMem as the paper counts it (VideoLucy's parse_answer, its Answer's letter; all questions counted)",
           origin=SOURCES["egomem_official"]),
    Scorer("lmms_eval_2025", lmms_videomme_2025_letter, "wrong", "wrong", "VM14, LV12",
           "lmms-eval 2025 Video-MME/LVBench tasks (old Video-MME regex, unreadable wrong)",
           percent="100*c/n", macro="all", origin=SOURCES["lmms_eval_2025"]),
    Scorer("lmms_eval_2025_mlvu", lmms_mlvu_2025_letter, "wrong", "wrong", "ML12",
           "lmms-eval 2025 MLVU task (trim, the ML10 rule; mean over all 7 tasks)",
           percent="100*c/n", macro="all", origin=SOURCES["lmms_eval_2025_mlvu"]),
    Scorer("lmms_eval_2026", lmms_eval_2026_letter, "wrong", "wrong", "VM14, LV12, ML12",
           "lmms-eval 2026 extract_mcq_answer (priority formats, A-D; MLVU mean over all 7 tasks)",
           percent="100*c/n", macro="all", origin=SOURCES["lmms_eval_2026"]),
    Scorer("vlmevalkit_videomme", vlmevalkit_videomme_letter, "wrong", "wrong", "VM15",
           "VLMEvalKit Video-MME, exact_matching (xlsx-read prediction, regex; unreadable 0)",
           percent="fraction", origin=SOURCES["vlmevalkit_videomme"]),
    Scorer("vlmevalkit_mlvu", vlmevalkit_mlvu_letter, "wrong", "wrong", "ML13",
           "VLMEvalKit MLVU, exact_matching (ML10 rule, then can_infer; M-Avg micro)",
           fallback=vlmevalkit_mlvu_fallback, gold_unmatched="@", percent="c/n*100", macro="micro",
           origin=SOURCES["vlmevalkit_mlvu"]),
    Scorer("senri_prereading", senri_prereading_letter, "wrong", "wrong", "issue 58",
           "senri's pre-reading (<think> cut, JSON/dict answer field), then the Video-MME official rule"),
    Scorer("senri_strict", senri_strict_letter, "wrong", "wrong", "S1",
           "senri's strict parse of the reply (never guesses)"),
    Scorer("method", method_letter, "wrong", "wrong", "SENRI",
           "the method's own recorded letter (SENRI-Bench's scoring)", reads="pred"),
)

#: name → Scorer, found like every other pluggable thing: through a lazy registry.
SCORERS = Registry("scorer")
for _scorer in _ALL:
    SCORERS.register(_scorer.name, f"senri.benchmarks.scoring:{_scorer.name.upper()}")
    globals()[_scorer.name.upper()] = _scorer
del _scorer


def scorer(name: str) -> Scorer:
    """The registered scorer ``name`` (an unknown name fails with the known ones listed)."""
    return SCORERS.load(name)

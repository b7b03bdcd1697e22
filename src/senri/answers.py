"""Question prompts, the one answer-parsing rule, and letter scoring with position debiasing.

**Parsing rule** (:func:`parse_answer`), applied to a model's output in this order; the first step that
yields a letter decides, and nothing is ever guessed:

1. Reasoning wrapped in ``<think>…</think>`` is dropped; only what follows it is read.
2. *Structured*: a JSON object (the whole output, a fenced block, or the first ``{…}``) with an ``answer``
   field whose value is a letter ("B", "(b)", "B. …") or exactly one option's text.
3. *Declarations*: the **last** explicit answer declaration — "answer is B", "Answer: (b)", "the correct
   option is C", "option C is correct", "I choose D", "final answer: A", ``\\boxed{B}``. Upper-case letters
   stand alone; a lower-case letter counts only in parentheses or before punctuation / the end, so "the
   answer is a person" is not read as A.
4. *Bare letter*: the whole output is a letter ("B", "(B)", "B.") or starts with one followed by ".", ")",
   ":" or "," ("B. Blue", "C, I guess").
5. *Option text*: exactly one option's full text appears in the output (word-bounded, case- and
   space-insensitive; an option contained in another matching option yields to the longer one).
6. Otherwise a **parse failure**: ``letter=None``, counted wrong, shown in the tables' failure column.

**Letters**: a question with N options (2–6) offers exactly the letters A up to the N-th
(:func:`senri.records.option_letters`): its prompt lists those options and names those letters, and every rule
above reads only those — "E" on a four-option question is no answer, as "Z" is; on a five-option one it is E.
A SENRI question has four (A–D), so its prompts, schemas and readings are the four-letter ones.

**Letter scoring**: with log-probabilities of the question's letters as the first answer token, the prediction
is the arg-max. Small models prefer a position ("A") whatever it holds; *position debiasing* asks the same
question under the N cyclic reorderings of the options and sums each option's log-probability over the N
positions it occupied, which cancels a fixed position preference without any labels.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from senri.records import LETTERS, letters_in_words, option_letters


def answer_schema(n_options: int = len(LETTERS)) -> dict:
    """JSON schema of a structured answer: one of the question's letters (A–D for four options)."""
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(option_letters(n_options))}},
        "required": ["answer"],
        "additionalProperties": False,
    }


#: The schema of a four-option (SENRI) question's answer.
ANSWER_SCHEMA: dict = answer_schema()

#: The format lines of ``config/prompts/answer/format_<format>.txt``, ``$letters`` the question's letters in
#: words (:func:`senri.records.letters_in_words`).
FORMAT_INSTRUCTIONS = {
    "text": "Answer with the option's letter ($letters).",
    "json": 'Reply with JSON only: {"answer": "<letter>"} where <letter> is $letters.',
    "logprobs": "Answer with the option's letter ($letters) only.",
}


def format_instruction(answer_format: str, n_options: int = len(LETTERS)) -> str:
    """The built-in format line for a question with ``n_options`` options."""
    return FORMAT_INSTRUCTIONS[answer_format].replace("$letters", letters_in_words(option_letters(n_options)))


def format_options(options: Sequence[str]) -> str:
    """"A. text" lines, one per option: every option the question has, lettered A up to the last."""
    return "\n".join(f"{letter}. {text}" for letter, text in zip(option_letters(len(options)), options))


def question_block(question: str, options: Sequence[str]) -> str:
    """"Question: …", "Options:" and the lettered options, one per line: how every prompt states a question."""
    return "\n".join([f"Question: {question.strip()}", "Options:", format_options(options)])


def question_prompt(question: str, options: Sequence[str], answer_format: str, context: str = "",
                    instruction: str | None = None) -> str:
    """The text part of an answering prompt: optional context, the question, lettered options, the format.

    ``instruction`` replaces the built-in format line: methods pass the one of their prompt family
    (``config/prompts/answer/format_<format>.txt``, whose default text is :data:`FORMAT_INSTRUCTIONS`)."""
    parts = [context.strip()] if context.strip() else []
    instruction = instruction or format_instruction(answer_format, len(options))
    parts += [question_block(question, options), instruction.strip()]
    return "\n".join(parts)


@dataclass(frozen=True)
class ParsedAnswer:
    letter: str | None
    rule: str  # json | declaration | bare_letter | option_text | none

    @property
    def ok(self) -> bool:
        return self.letter is not None


@dataclass(frozen=True)
class _LetterPatterns:
    """The parsing rule's regular expressions for one set of letters (A–D, A–B, A–F, …)."""

    declaration: re.Pattern
    bare: re.Pattern
    leading: re.Pattern
    value: re.Pattern


@functools.lru_cache(maxsize=None)
def _letter_patterns(n_options: int) -> _LetterPatterns:
    """Built once per option count, so a reply is read against exactly the question's letters: the
    four-option patterns are the rule's A–D ones character for character."""
    letters = option_letters(n_options)
    if not letters:
        raise ValueError("a question without options has no letter to read")
    upper = f"{letters[0]}-{letters[-1]}"
    lower = upper.lower()
    letter = rf"(?:\(\s*([{upper}{lower}])\s*\)|\b([{upper}])\b(?![-'’])|\b([{lower}])(?=\s*(?:$|[.,;:!?)\]])))"
    # Keywords are case-insensitive (scoped ``(?i:…)``); the letter alternatives stay case-sensitive.
    declarations = [
        rf"(?i:\banswer\s*(?:is|:|=|would be|should be|will be|must be)?\s*:?\s*(?:option|choice|letter)?\s*:?)"
        rf"\s*{letter}",
        rf"(?i:\b(?:correct|right|best)\s+(?:option|choice|answer|letter)\s*(?:is|:|=|would be|should be)?\s*:?"
        rf"\s*(?:option|choice|letter)?)\s*{letter}",
        rf"(?i:\b(?:option|choice))\s*{letter}\s*(?i:(?:is|seems|appears)\s+(?:the\s+)?(?:correct|right|best|answer))",
        rf"(?i:\bI\s+(?:choose|pick|select|go with)\s*(?:option|choice)?)\s*{letter}",
        rf"\\boxed\{{\s*{letter}\s*\}}",
    ]
    return _LetterPatterns(
        declaration=re.compile("|".join(f"(?:{d})" for d in declarations)),
        bare=re.compile(rf"^\s*\(?([{upper}])\)?\s*(?:[.:)]\s*(.*))?$", re.DOTALL),
        leading=re.compile(rf"^\s*\(?([{upper}])[.):,](?:\s|$)"),
        value=re.compile(rf"\(?\s*([{upper}{lower}])\s*\)?(?:[.:)]\s*.*)?", re.DOTALL),
    )


def _declared_letters(text: str, n_options: int = len(LETTERS)) -> list[str]:
    """Letters of every declaration in ``text``, in order of appearance."""
    letters = []
    for match in _letter_patterns(n_options).declaration.finditer(text):
        groups = [g for g in match.groups() if g]
        if groups:
            letters.append(groups[-1].upper())
    return letters


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _option_from_text(text: str, options: Sequence[str]) -> str | None:
    body = f" {_normalise(text)} "
    matches = [i for i, option in enumerate(options) if _normalise(option) and f" {_normalise(option)} " in body]
    # An option contained in another matching option ("red" in "red car") yields to the longer one.
    kept = [i for i in matches
            if not any(j != i and f" {_normalise(options[i])} " in f" {_normalise(options[j])} " for j in matches)]
    return option_letters(len(options))[kept[0]] if len(kept) == 1 else None


def _letter_from_value(value: object, options: Sequence[str]) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    bare = _letter_patterns(len(options)).value.fullmatch(value)
    if bare:
        return bare.group(1).upper()
    return _option_from_text(value, options) if value else None


def json_objects(text: str) -> list[dict]:
    """JSON objects in a model output: the whole text, fenced blocks, then flat `{…}` spans, in that order."""
    candidates = [text.strip()]
    candidates += re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidates += re.findall(r"\{[^{}]*\}", text)
    found = []
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def split_reasoning(text: str | None) -> tuple[str, str | None]:
    """``(reply, reasoning)`` of a model output: a reasoning model's ``<think>…</think>`` block is cut off.

    Covers the three shapes seen in practice: ``<think>…</think>reply`` (Qwen3, QwQ); ``…</think>reply`` when
    the chat template already opened the block (DeepSeek-R1 distills); and an unclosed ``<think>…`` cut at the
    token limit, whose reply is empty. Backends that return reasoning in a separate field (``reasoning_content``
    of OpenAI-compatible servers) hand it over in the same ``<think>`` form, so this is the one place it is read.
    """
    text = text or ""
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        last = closes[-1]
        reasoning = _THINK_OPEN.sub("", text[:last.start()], count=1).strip()
        return text[last.end():].strip(), reasoning
    opened = _THINK_OPEN.search(text)
    if opened and not text[:opened.start()].strip():
        return "", text[opened.end():].strip()
    return text, None


def parse_answer(text: str | None, options: Sequence[str]) -> ParsedAnswer:
    """Apply the module's parsing rule to one model output."""
    text = split_reasoning(text)[0]
    if not text or not text.strip() or not options:
        return ParsedAnswer(None, "none")
    for obj in json_objects(text):
        fields = {str(k).lower(): v for k, v in obj.items()}
        if "answer" in fields:
            letter = _letter_from_value(fields["answer"], options)
            if letter:
                return ParsedAnswer(letter, "json")
    patterns = _letter_patterns(len(options))
    declared = _declared_letters(text, len(options))
    if declared:
        return ParsedAnswer(declared[-1], "declaration")
    bare = patterns.bare.match(text) if len(text.strip()) <= 3 else patterns.leading.match(text)
    if bare:
        return ParsedAnswer(bare.group(1), "bare_letter")
    letter = _option_from_text(text, options)
    if letter:
        return ParsedAnswer(letter, "option_text")
    return ParsedAnswer(None, "none")


def cyclic_order(shift: int, n: int = len(LETTERS)) -> list[int]:
    """Original option index shown at each position under cyclic ``shift``: position j shows (j + shift) % n."""
    return [(j + shift) % n for j in range(n)]


def debiased_scores(per_shift: Mapping[int, Mapping[str, float]], n_options: int = len(LETTERS)) -> list[float]:
    """Each original option's summed log-probability over the orderings it was shown in.

    ``per_shift[k]`` holds the letter log-probabilities returned for the ordering :func:`cyclic_order`
    (k, ``n_options``); a letter the question does not have is never read.
    """
    letters = option_letters(n_options)
    totals = [0.0] * n_options
    for shift, letter_logprobs in per_shift.items():
        for position, original in enumerate(cyclic_order(shift, n_options)):
            totals[original] += float(letter_logprobs.get(letters[position], -1e9))
    return totals


def best_letter(scores: Sequence[float]) -> str | None:
    """Arg-max letter (one score per option, in letter order), or None when no letter was seen at all (every
    score at the -1e9 floor) or on a tie."""
    top = max(scores)
    if top <= -1e8 or list(scores).count(top) > 1:
        return None
    return option_letters(len(scores))[list(scores).index(top)]


#: Video-MME's official lead-in phrases (spec VM9, the scorer its README links), in the order they are removed.
#: Two entries are each two phrases fused by a missing comma in the official list, so "The best option is" and
#: "Best answer:" are never removed on their own; they are kept fused here on purpose.
VIDEOMME_LEAD_INS: tuple[str, ...] = (
    "The best answer is", "The correct answer is", "The answer is", "The answer",
    "The best option is" + "The correct option is", "Best answer:" + "Best option:",
    "Answer:", "Option:", "The correct answer", "The correct option",
)
#: Above this many words with no capital A–D left, Video-MME's rule reads a reply as no answer.
VIDEOMME_MAX_WORDS = 10


def lead_in_letter(reply: str | None, lead_ins: Sequence[str], letters: str = "ABCD",
                   max_words: int = VIDEOMME_MAX_WORDS) -> str | None:
    """The Video-MME family of letter rules: trim, delete every occurrence of each lead-in phrase
    (case-sensitive, anywhere, in list order), then the first capital of ``letters`` anywhere in what is left
    (no word boundary, so "Based" reads as B). None when nothing is found (a long reply without any such capital
    included). Shared by the official rule and the harnesses' copies of it, which differ only in ``lead_ins``."""
    text = (reply or "").strip()
    for phrase in lead_ins:
        text = text.replace(phrase, "")
    match = re.search(f"[{letters}]", text)
    if len(text.split()) > max_words and match is None:
        return None  # the official long-reply rule; a short reply without a capital ends the same way below
    return match.group(0) if match else None


def videomme_official_letter(reply: str | None, letters: Sequence[str] = LETTERS) -> str | None:
    """Video-MME's official answer extraction (spec VM9): :data:`VIDEOMME_LEAD_INS` removed, then the first
    capital A–D anywhere; None is the official empty extraction, which the official scorer leaves out of the
    denominator (VM10). "Best answer: C" reads as B and "Answer: C. Jade." as C. ``letters``: a method reading
    a question of other than four options passes its letters (the official rule is A–D, Video-MME's four)."""
    return lead_in_letter(reply, VIDEOMME_LEAD_INS, "".join(letters))


#: A caller's check of one JSON object read from a reply: the object (possibly normalised), or None to refuse it.
Validator = Callable[[dict], "dict | None"]
#: Another way to read candidate objects from a reply, tried after :func:`json_objects` finds none valid.
Fallback = Callable[[str], Iterable[dict]]


def first_valid(body: str, validate: Validator, fallback: Fallback | None = None) -> dict | None:
    """The first JSON object in ``body`` (a reply with its reasoning already cut off) that ``validate``
    accepts, validated; then the first such object ``fallback`` reads, if given."""
    for reader in (json_objects, fallback) if fallback else (json_objects,):
        for candidate in reader(body):
            checked = validate(candidate)
            if checked is not None:
                return checked
    return None
def letter_of(answer: Any, letters: Sequence[str] = LETTERS) -> str | None:
    """The option letter an ``Answer`` field gives ("B", "(B)", "B. A red cup"), or None: VideoLucy's reading of
    its agent's reply, and EgoMem's official scorer (here, below both, so that neither imports the other). Only the
    question's ``letters`` are read (A–D, the release's, for four options; "E" is a letter of a five-option question)."""
    if not letters:
        return None
    span = f"{letters[0]}-{letters[-1]}"
    match = re.match(rf"^\s*(?:option\s+)?\(?([{span}])(?:\s*$|\s*[).:\-–])", str(answer or ""), re.IGNORECASE)
    return match.group(1).upper() if match else None

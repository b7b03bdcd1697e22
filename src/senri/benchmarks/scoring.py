"""Named answer scorers: how each benchmark and each common harness reads a reply, and whom it counts.

A scorer is two things: an **extraction** (reply text, the question's options → a letter or None), pure and
cheap, and a **denominator rule** (what an unreadable reply and an absent prediction do to the accuracy: counted
wrong, or left out of the denominator). Every scorer re-reads the same stored replies (``raw_output`` of the
prediction files), so one run is scored by all of them without asking a model again, and the report shows where
they disagree (spec benchmarks.md, "Official scoring"; issue 51).

Registered names (:data:`SCORERS`):

- ``videomme_official`` — VM9–VM11, the scorer Video-MME's README links: lead-in phrases removed (two of them
  fused by a missing comma), first capital A–D anywhere; an empty extraction is skipped. A question with no
  prediction counts wrong: the official scorer refuses a file that lacks one (VM12) rather than skipping it.
- ``videomme_old`` — VM13, the copy that lived in Video-MME's repository until June 2024: a shorter phrase
  list ("Answer: C. Jade." reads as A); skipped as above.
- ``lvbench_official`` — LV8–LV10: the prediction must equal the letter exactly (the scorer extracts nothing);
  an absent question is not scored.
- ``lvbench_polish`` — LV11: LVBench's ``polish_answer`` helper (used by the authors' inference) before the
  exact comparison.
- ``mlvu_official`` — ML10–ML11: the character before the first ")", otherwise the whole reply must be the
  letter; unreadable is wrong.
- ``egomem_official`` — EM8/EM9: VideoLucy's own reading of its answer ("B", "(B)", "B. text"); all questions
  counted (the 4 with an invalid answer necessarily wrong), as the paper's 286/504 shows.
- ``lmms_eval_2025`` — VM14/LV12: lmms-eval's Video-MME regex of Aug 2025 (the old phrase list), used for
  Video-MME and LVBench; every question in the denominator.
- ``lmms_eval_2025_mlvu`` — ML12: lmms-eval's MLVU task of 2025, the ML10 rule on letters.
- ``lmms_eval_2026`` — VM14: lmms-eval's generic priority extractor (since Apr 2026) as the spec restates it.
- ``vlmevalkit_videomme`` — VM15, without the LLM-judge fallback (option-text matching only): a reply neither
  rule reads is left out (VLMEvalKit's score −1, outside its "valid" rating).
- ``vlmevalkit_mlvu`` — ML13, the ML10 rule then option-text matching, without the LLM judge.
- ``senri_strict`` — senri's strict parse (:func:`senri.answers.parse_answer`): never guesses; unreadable wrong.
- ``method`` — the method's own parse as it recorded it in ``pred`` (SENRI-Bench's scoring, unchanged): for
  methods that read a letter another way (log-probabilities, a structured field) this is their letter.

A record kept but flagged at ingest (answer "" or a letter that is not an option) is always wrong when scored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

from senri.answers import (VIDEOMME_LEAD_INS, json_objects, lead_in_letter, parse_answer, split_reasoning,
                           videomme_official_letter)
from senri.records import OPTION_LETTERS
from senri.registry import Registry

#: What a reply without an extraction (or a question without a prediction) does to the accuracy.
Denominator = Literal["wrong", "skipped"]
#: A question's verdict under one scorer.
Verdict = Literal["correct", "wrong", "skipped"]
#: The question table's option columns, in letter order (2–6 options: MLVU's test set has A–F).
OPTION_COLUMNS = tuple(f"option_{letter.lower()}" for letter in OPTION_LETTERS)


@dataclass(frozen=True)
class Scorer:
    """One named way to read and count replies. ``extract`` maps (reply, options) to a letter (any string the
    rule yields; only the gold letter is right) or None; ``unreadable`` and ``absent`` say whether a reply with
    no extraction and a question with no prediction count wrong or are left out; ``reads`` is ``reply`` (the
    stored reply text) or ``pred`` (the method's own recorded letter); ``source`` names the spec statements."""

    name: str
    extract: Callable[[str | None, Sequence[str]], str | None]
    unreadable: Denominator
    absent: Denominator
    source: str
    description: str
    reads: Literal["reply", "pred"] = "reply"

    def verdict(self, letter: str | None, answer: str, options: Sequence[str], present: bool = True) -> Verdict:
        """The verdict on one question given this scorer's ``letter`` (None: no extraction). ``present`` is
        False when the run has no prediction for it. A gold answer that is not one of the question's option
        letters (a flagged record) is never right."""
        if not present:
            return "wrong" if self.absent == "wrong" else "skipped"
        if letter is None:
            return "wrong" if self.unreadable == "wrong" else "skipped"
        valid = answer in OPTION_LETTERS[:len(options)]
        return "correct" if valid and letter == answer else "wrong"


def question_options(row: Mapping[str, Any]) -> tuple[str, ...]:
    """A question row's options in letter order: ``option_a``…``option_f`` without the absent ones (null, or the
    empty C/D padding of a two- or three-option question)."""
    options = [row.get(column) for column in OPTION_COLUMNS]
    present = [o for o in options if o is not None]
    while len(present) > 2 and present[-1] == "":
        present.pop()
    return tuple(present)


# --- the reply the scorers read --------------------------------------------------------------------------------

_ANSWER_FIELD = re.compile(r"""["']answer["']\s*:\s*["']([^"']*)["']""", re.IGNORECASE)


def scored_reply(raw_output: str | None) -> str | None:
    """The text every reply-reading scorer reads: the final reply after any ``<think>`` block, or, where that
    reply is a structured object with an ``answer`` field (VideoLucy's ``{"Confidence", "Answer", ...}``, a
    ``{"answer": ...}`` JSON reply), that field's text — what the method's own protocol calls its answer. How
    VideoLucy's benchmark letters were extracted is not published (EM9); reading the whole object with Video-MME's
    rule would take the A of "Answer" for every reply."""
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


# --- extractions ------------------------------------------------------------------------------------------------

#: VM13 / VM14: the phrase list of Video-MME's old scorer and of lmms-eval's Video-MME task (2025): no "Answer:",
#: "Option:", "The correct answer", "The correct option"; the same two fused entries.
VIDEOMME_OLD_LEAD_INS: tuple[str, ...] = VIDEOMME_LEAD_INS[:6]
#: VM15: VLMEvalKit's list: the old one plus "Answer:" and "Option:".
VLMEVALKIT_LEAD_INS: tuple[str, ...] = VIDEOMME_LEAD_INS[:8]


def videomme_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """VM9 through the one official function (shared with Video-o3's scoring)."""
    return videomme_official_letter(reply)


def videomme_old_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    return lead_in_letter(reply, VIDEOMME_OLD_LEAD_INS)


def exact_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """LV8: the prediction compared as it is; only a one-character prediction can equal a letter, so anything
    longer (or padded with whitespace) is no extraction, which is wrong all the same."""
    return reply if reply is not None and len(reply) == 1 else None


def polish_answer(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """LV11, LVBench's reply helper: trim; keep what precedes the first ")"; if a "(" is left keep what follows
    it; keep the first space-separated token; its first character. "Answer: B" reads as A, "the answer is B" as
    t (both then wrong), "(B) 1366" and "B. 1366" as B."""
    text = (reply or "").strip().split(")", 1)[0]
    if "(" in text:
        text = text.split("(", 1)[1]
    token = text.split(" ")[0] if text else ""
    return token[0] if token else None


def mlvu_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """ML10: with a ")", the one character right before the first ")" (which may be no letter at all: "The
    answer is B (Fishing)" gives "g"); without one, the whole reply, which is right only when it is the letter."""
    if reply is None:
        return None
    head, paren, _ = reply.partition(")")
    if paren:
        return head[-1] if head else None
    return exact_letter(reply)


def option_text_letter(reply: str | None, options: Sequence[str]) -> str | None:
    """VLMEvalKit's fallback without a judge: the letter of the one option whose text (a leading "A. " label
    dropped) occurs in the reply, case-insensitively; None when none or several do."""
    body = (reply or "").strip().lower()
    if not body:
        return None
    texts = [re.sub(r"^[A-F]\.\s+", "", option).strip().rstrip(".").lower() for option in options]
    found = [OPTION_LETTERS[i] for i, text in enumerate(texts) if text and text in body]
    return found[0] if len(found) == 1 else None


def vlmevalkit_videomme_letter(reply: str | None, options: Sequence[str]) -> str | None:
    return lead_in_letter(reply, VLMEVALKIT_LEAD_INS) or option_text_letter(reply, options)


def vlmevalkit_mlvu_letter(reply: str | None, options: Sequence[str]) -> str | None:
    letter = mlvu_letter(reply)
    return letter if letter is not None and letter in OPTION_LETTERS else option_text_letter(reply, options)


def egomem_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """EM9: VideoLucy's own reading of an ``Answer`` string ("B", "(B)", "B. text", "option B")."""
    from senri.answers import letter_of  # VideoLucy's reader (the method imports it too): one rule, not a copy

    return letter_of(reply)


_LMMS_CHOICES = "ABCD"
#: VM14's formats after the lone letters and "answer is X", in priority order; the last occurrence of the
#: first format that occurs wins.
_LMMS_FORMATS = (rf"\(([{_LMMS_CHOICES}])\)", rf"\b([{_LMMS_CHOICES}])\.", rf"\b([{_LMMS_CHOICES}]):",
                 rf"\b([{_LMMS_CHOICES}])\)", rf"\b([{_LMMS_CHOICES}]) ")
_LMMS_LONE = re.compile(rf"^[(\[*\s]*([{_LMMS_CHOICES}])[)\].:*\s]*$")
_LMMS_ANSWER_IS = re.compile(rf"(?i:answer\s+is)\s*:?\s*\(?([{_LMMS_CHOICES}])\b")


def lmms_eval_2026_letter(reply: str | None, options: Sequence[str] = ()) -> str | None:
    """VM14, lmms-eval's generic extractor as the spec restates it (choices A–D): a lone letter leading or
    closing the reply (its first or last whitespace-separated token, brackets and punctuation aside) beats the
    last "answer is X", which beats the last "(X)", then "X.", "X:", "X)", "X ". A restatement of the rule's
    priorities, not of its code."""
    text = (reply or "").strip()
    if not text:
        return None
    tokens = text.split()
    for token in (tokens[0], tokens[-1]):
        lone = _LMMS_LONE.match(token)
        if lone:
            return lone.group(1)
    declared = _LMMS_ANSWER_IS.findall(text)
    if declared:
        return declared[-1]
    for pattern in _LMMS_FORMATS:
        found = re.findall(pattern, text + " ")
        if found:
            return found[-1]
    return None


def senri_strict_letter(reply: str | None, options: Sequence[str]) -> str | None:
    return parse_answer(reply, options).letter


def method_letter(pred: str | None, options: Sequence[str] = ()) -> str | None:
    """The method's own recorded letter (``pred``): what SENRI-Bench's tables have always scored."""
    return pred


# --- the registry -------------------------------------------------------------------------------------------------

_ALL: tuple[Scorer, ...] = (
    Scorer("videomme_official", videomme_letter, "skipped", "wrong",
           "VM9-VM12", "Video-MME official (lead-ins removed, first capital A-D; empty extraction skipped)"),
    Scorer("videomme_old", videomme_old_letter, "skipped", "wrong", "VM13",
           "Video-MME's scorer before June 2024 (shorter lead-in list)"),
    Scorer("lvbench_official", exact_letter, "wrong", "skipped", "LV8-LV10",
           "LVBench official (exact letter; absent question not scored)"),
    Scorer("lvbench_polish", polish_answer, "wrong", "skipped", "LV11",
           "LVBench's polish_answer helper, then the exact letter"),
    Scorer("mlvu_official", mlvu_letter, "wrong", "wrong", "ML10-ML11",
           "MLVU official (character before the first ')', else the whole reply)"),
    Scorer("egomem_official", egomem_letter, "wrong", "wrong", "EM8-EM9",
           "EgoMem as the paper counts it (VideoLucy's answer letter; all questions counted)"),
    Scorer("lmms_eval_2025", videomme_old_letter, "wrong", "wrong", "VM14, LV12",
           "lmms-eval Aug 2025 (Video-MME regex, unreadable wrong)"),
    Scorer("lmms_eval_2025_mlvu", mlvu_letter, "wrong", "wrong", "ML12",
           "lmms-eval 2025 MLVU task (the ML10 rule, unreadable wrong)"),
    Scorer("lmms_eval_2026", lmms_eval_2026_letter, "wrong", "wrong", "VM14, LV12, ML12",
           "lmms-eval 2026 generic extractor (priority rules, A-D)"),
    Scorer("vlmevalkit_videomme", vlmevalkit_videomme_letter, "skipped", "wrong", "VM15",
           "VLMEvalKit Video-MME (regex, option text; no LLM judge)"),
    Scorer("vlmevalkit_mlvu", vlmevalkit_mlvu_letter, "wrong", "wrong", "ML13",
           "VLMEvalKit MLVU (ML10 rule, option text; no LLM judge)"),
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

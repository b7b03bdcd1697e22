"""Random guessing: the floor every accuracy is read against (expected 25.0 on four-choice questions, 100/N on a
question with N options)."""

from __future__ import annotations

import hashlib

from senri.methods.base import Method, MethodAnswer
from senri.records import LETTERS, Question, option_letters


def seeded_letter(seed: int, qid: str, n_options: int = len(LETTERS)) -> str:
    """The letter for ``qid`` under ``seed``: uniform over the question's ``n_options`` letters (A–D for four),
    stable across runs, machines and Python versions; a four-option question draws what it always drew.

    Seeding per question id (not one stream over the run) keeps a question's guess unchanged when other
    questions are added, removed or reordered.
    """
    digest = hashlib.sha256(f"senri-random:{seed}:{qid}".encode()).digest()
    letters = option_letters(n_options)
    return letters[int.from_bytes(digest[:8], "big") % len(letters)]


class RandomGuess(Method):
    approach = "baseline"
    uses_model = False

    def answer(self, question: Question) -> MethodAnswer:
        letter = seeded_letter(self.context.seed, question.qid, len(question.options))
        return MethodAnswer(pred=letter, raw_output=letter, parse_ok=True)

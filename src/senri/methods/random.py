"""Random guessing: the floor every accuracy is read against (expected 25.0 on four-choice questions)."""

from __future__ import annotations

import hashlib

from senri.methods.base import Method, MethodAnswer
from senri.records import LETTERS, Question


def seeded_letter(seed: int, qid: str) -> str:
    """The letter for ``qid`` under ``seed``: uniform over A–D, stable across runs, machines and Python versions.

    Seeding per question id (not one stream over the run) keeps a question's guess unchanged when other
    questions are added, removed or reordered.
    """
    digest = hashlib.sha256(f"senri-random:{seed}:{qid}".encode()).digest()
    return LETTERS[int.from_bytes(digest[:8], "big") % len(LETTERS)]


class RandomGuess(Method):
    approach = "baseline"
    uses_model = False

    def answer(self, question: Question) -> MethodAnswer:
        letter = seeded_letter(self.context.seed, question.qid)
        return MethodAnswer(pred=letter, raw_output=letter, parse_ok=True)

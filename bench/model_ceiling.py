"""How much of a memory method's accuracy the demo model itself caps: the same questions asked with no
context, with the video's coarse memory, and with a context that states the correct option word for word.

    python bench/model_ceiling.py [--model smollm2] [--task NP]

Needs a finished demo run (`make demo`: `results/questions.parquet` and the perception memories). Every
question is scored by the four letters' log-probabilities summed over the four cyclic orders of its options
(as `blind_debiased`), so letter bias cannot pass for understanding. If a model stays near chance even when
the context hands it the answer, a memory method on that model cannot beat chance however good its memory
is: the limit is the model, and the method needs a stronger one (`model=[…]`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from senri.answers import best_letter, cyclic_order, debiased_scores, question_prompt  # noqa: E402
from senri.backends import open_backend  # noqa: E402
from senri.backends.base import ChatRequest, Message  # noqa: E402
from senri.config import compose  # noqa: E402
from senri.memory.hierarchy import format_memory  # noqa: E402
from senri.records import LETTERS  # noqa: E402

CONTEXTS = ("none", "memory", "answer stated")


def debiased_letter(backend, question: str, options: list[str], context: str) -> str | None:  # noqa: ANN001
    """The letter `blind_debiased` would give with this context (None on a tie, counted wrong)."""
    per_shift = {}
    for shift in range(len(options)):
        text = question_prompt(question, [options[i] for i in cyclic_order(shift)], "logprobs", context)
        response = backend.complete(ChatRequest(messages=(Message.text("user", text),), max_tokens=1,
                                                letter_logprobs=tuple(LETTERS)))
        if response.error:
            raise RuntimeError(response.error)
        per_shift[shift] = response.letter_logprobs
    return best_letter(debiased_scores(per_shift))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="a model config name (config/model/)")
    parser.add_argument("--task", default=None, help="only this task type (e.g. NP); default: all questions")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    args = parser.parse_args()
    questions = pl.read_parquet(args.results / "questions.parquet")
    if args.task:
        questions = questions.filter(pl.col("task_type") == args.task)
    backend = open_backend(compose(f"model=[{args.model}]")["model"][args.model], cache_path=None)
    memories = {video: format_memory(pl.read_parquet(args.results / f"memory/perception/{video}.parquet")
                                     .filter(pl.col("level") == "coarse"))
                for video in questions["video_id"].unique()}
    right = dict.fromkeys(CONTEXTS, 0)
    for q in questions.iter_rows(named=True):
        options = [q[f"option_{letter.lower()}"] for letter in LETTERS]
        stated = f"What I did: {options[LETTERS.index(q['answer'])]}."
        for name, context in zip(CONTEXTS, ("", "Memory of the video:\n" + memories[q["video_id"]], stated)):
            right[name] += debiased_letter(backend, q["question"], options, context) == q["answer"]
    backend.close()
    n = questions.height
    print(f"model {args.model}, {n} question(s){' of task ' + args.task if args.task else ''}; chance {n / 4:.1f}")
    for name in CONTEXTS:
        print(f"  context {name:<14} {right[name]:>3}/{n} right ({100 * right[name] / n:.1f} %)")


if __name__ == "__main__":
    main()

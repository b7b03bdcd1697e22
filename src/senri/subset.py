"""A seeded, recorded question subset of any benchmark (``dataset.subset: {n, seed}``).

VideoLucy's Table 13 scores its captioner × reasoning-model grid on 200 random LVBench questions and its
appendix A.8 counts LLM calls on 42 random EgoMem questions; neither says which. senri draws such a subset
the same way everywhere: the question ids are sorted first (so neither file order nor file format changes the
draw), then ``n`` of them are sampled with ``random.Random(seed)``. The same ids and seed give the same
subset on every machine and Python version (``Random.sample`` over a sorted list is stable), and the ingest
stage records the drawn ids beside its table, so a run says which questions it answered.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import polars as pl

from senri.errors import ConfigError


class SubsetError(ConfigError):
    """A subset that cannot be drawn (asks for more questions than the benchmark has)."""


@dataclass(frozen=True)
class Subset:
    """``n`` questions drawn with ``seed`` (config ``dataset.subset``)."""

    n: int
    seed: int

    @classmethod
    def from_config(cls, value: Mapping[str, Any] | None) -> "Subset | None":
        """The subset a dataset config asks for, or None (``subset`` absent or null: every question)."""
        if not value:
            return None
        return cls(n=int(value["n"]), seed=int(value["seed"]))


def draw_qids(qids: Iterable[str], subset: Subset) -> list[str]:
    """The ``subset.n`` question ids drawn from ``qids`` with ``subset.seed``, in sorted order.

    Raises :class:`SubsetError` when fewer than ``n`` distinct ids exist (a subset that silently shrank
    would be scored as if it had its stated size)."""
    pool = sorted(set(qids))
    if subset.n > len(pool):
        raise SubsetError(f"config.dataset.subset.n: {subset.n} questions asked, the question files hold "
                          f"{len(pool)}")
    return sorted(random.Random(subset.seed).sample(pool, subset.n))


def apply_subset(questions: pl.DataFrame, subset: Subset | None) -> tuple[pl.DataFrame, list[str] | None]:
    """The question table cut to the drawn subset (rows keep their order) and the drawn ids; the table as it
    is and None without a subset."""
    if subset is None:
        return questions, None
    drawn = draw_qids(questions["qid"].to_list(), subset)
    return questions.filter(pl.col("qid").is_in(drawn)), drawn


def subset_video_ids(pairs: Sequence[tuple[str, str]], subset: Subset) -> list[str]:
    """The videos (first-seen order) of the questions a subset draws from ``(qid, video_id)`` pairs: what the
    planner needs before ingest runs, so no job is planned for a video none of the drawn questions is on."""
    drawn = set(draw_qids([qid for qid, _ in pairs], subset))
    return list(dict.fromkeys(video for qid, video in pairs if qid in drawn))


def question_video_pairs(question_files: Sequence[str]) -> list[tuple[str, str]]:
    """``(qid, video_id)`` of every question in the files, read leniently as the planner reads video ids
    (:func:`senri.ingest.video_ids_in`): the ingest job reports the files' problems; when it succeeds these
    are exactly its table's questions, so the planner's draw is the ingest's."""
    from senri.ingest import IngestError, Problem, normalize, read_records

    pairs: list[tuple[str, str]] = []
    for file in question_files:
        try:
            records = [normalize(raw.data) for raw in read_records(file) if not isinstance(raw, Problem)]
        except IngestError:
            continue
        pairs += [(r["qid"], r["video_id"]) for r in records
                  if isinstance(r.get("qid"), str) and isinstance(r.get("video_id"), str)]
    return pairs

"""How a benchmark's tables are laid out: columns, which questions each column counts, micro or macro, the
scorers shown side by side, its breakdown tables and its bar figure. Each benchmark module declares its own
:class:`Layout` (``senri.benchmarks.<name>``); :mod:`senri.aggregate` and :mod:`senri.report` build every table
from it and name no benchmark.

A column counts a question by the question's **split** (Video-MME's short / medium / long label), by its
**categories** (a list: LVBench is multi-label, so one question counts once in each of its categories), or
every question; a **macro** column is the unweighted mean of other columns' accuracies (MLVU's M-Avg, EgoMem's
Avg). Integer counts are kept for every column — correct and counted questions, where "counted" follows the
scorer's denominator rule (a skipped reply is in neither) — and a percentage is made from them only for display,
rounded half-up (:func:`senri.percent.percent_value`); a macro mean is taken over the exact fractions.

The first of a layout's ``scorers`` scores its main table: ``method`` (the method's own letter) for SENRI-Bench,
the official scorer for a native benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Literal, Mapping, Sequence

from senri.percent import percent_value, round_half_up

Over = Literal["all", "split", "category", "macro"]


@dataclass(frozen=True)
class Column:
    """One column of a layout. ``members``: the split labels (``over="split"``) or categories
    (``over="category"``) a question must carry one of to count, compared case-insensitively; for
    ``over="macro"`` the keys of the columns whose accuracies are averaged."""

    key: str
    label: str
    over: Over
    members: tuple[str, ...] = ()

    def counts(self, split: str | None, categories: Sequence[str]) -> bool:
        """Whether a question with this split and these categories counts in this (non-macro) column."""
        wanted = {m.lower() for m in self.members}
        if self.over == "all":
            return True
        if self.over == "split":
            return split is not None and split.lower() in wanted
        if self.over == "category":
            return any(c.lower() in wanted for c in categories)
        raise ValueError(f"column {self.key!r} is a macro mean; it counts no question itself")


@dataclass(frozen=True)
class Layout:
    """A benchmark's table. ``headline``: the column that is the run's one number; ``scorers``: the scorers
    shown side by side, its official one first; ``published``: the file of published rows under
    ``senri/report/published/`` (headers are the paper's, matched to the column labels)."""

    name: str
    title: str
    columns: tuple[Column, ...]
    headline: str
    scorers: tuple[str, ...]
    published: str | None = None
    #: The bar figure of the report: one bar group per column key, its title and the chance line (None: none
    #: drawn; a native benchmark's questions have 2–6 options, so no one line is chance for all of them).
    figure: Figure | None = None
    #: The benchmark's own breakdown tables, as its official tool prints them (report ``breakdown_<name>``).
    breakdowns: tuple[Breakdown, ...] = ()

    @property
    def official_scorer(self) -> str:
        return self.scorers[0]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.columns)

    def column(self, key: str) -> Column:
        return next(c for c in self.columns if c.key == key)


@dataclass(frozen=True)
class Figure:
    """The report's bar figure of a layout: accuracy per column (``columns``: keys of the layout), one bar per run."""

    columns: tuple[str, ...]
    title: str
    chance: float | None = None


@dataclass(frozen=True)
class Breakdown:
    """One breakdown table: accuracy per value of a question's grouping (``by``: ``category`` — the question's
    categories that are no facet —, or a facet key such as ``domain``, read from ``key=value`` entries of its
    categories), under the main-table scorer. ``by_split``: one block per split label and one over every split
    (Video-MME's official scorer prints each duration and then all of them)."""

    name: str
    title: str
    by: str
    by_split: bool = False
    #: The values in the tool's print order (the rest follow sorted); empty: sorted.
    order: tuple[str, ...] = ()


Counts = Mapping[str, tuple[int, int]]


def column_counts(layout: Layout, questions: Iterable[tuple[str | None, Sequence[str], str]]) -> dict[str, tuple[int, int]]:
    """``(correct, counted)`` per column over ``questions``, each ``(split, categories, verdict)`` with verdict
    correct / wrong / skipped (a skipped question is in no denominator). A macro column carries the sums of its
    members' counts (what it is made of; its value is the mean of their accuracies, :func:`column_value`)."""
    counts = {c.key: [0, 0] for c in layout.columns}
    direct = [c for c in layout.columns if c.over != "macro"]
    for split, categories, verdict in questions:
        if verdict == "skipped":
            continue
        for column in direct:
            if column.counts(split, categories):
                counts[column.key][1] += 1
                counts[column.key][0] += verdict == "correct"
    for column in layout.columns:
        if column.over == "macro":
            counts[column.key] = [sum(counts[m][0] for m in column.members), sum(counts[m][1] for m in column.members)]
    return {key: (correct, n) for key, (correct, n) in counts.items()}


def column_value(layout: Layout, counts: Counts, key: str, decimals: int = 1) -> float | None:
    """The displayed percentage of column ``key``: 100·correct/counted, or for a macro column the mean of its
    members' exact accuracies (members with no counted question are left out of the mean); None when empty."""
    column = layout.column(key)
    if column.over == "macro":
        parts = [Fraction(100 * counts[m][0], counts[m][1]) for m in column.members if counts[m][1]]
        return round_half_up(sum(parts, Fraction(0)) / len(parts), decimals) if parts else None
    return percent_value(*counts[key], decimals)


def micro_value(counts: Counts, layout: Layout, decimals: int = 1) -> float | None:
    """Accuracy over every counted question (VLMEvalKit's M-Avg for MLVU, ML13), whatever the headline's rule."""
    return percent_value(*column_counts_total(counts, layout), decimals)


def column_counts_total(counts: Counts, layout: Layout) -> tuple[int, int]:
    """The counts of the layout's all-questions column, or the sums over its macro headline's members."""
    every = [c for c in layout.columns if c.over == "all"]
    return counts[every[0].key] if every else counts[layout.headline]


def layout(benchmark: str) -> Layout:
    """The layout the registered benchmark ``benchmark`` declares."""
    from senri.benchmarks import BENCHMARKS

    return BENCHMARKS.load(benchmark).layout

"""Each benchmark's table layout: its columns, which questions each column counts, micro or macro, its
published rows, and the scorers shown side by side.

A column counts a question by the question's **split** (Video-MME's short / medium / long label), by its
**categories** (a list: LVBench is multi-label, so one question counts once in each of its categories), or
every question; a **macro** column is the unweighted mean of other columns' accuracies (MLVU's M-Avg, EgoMem's
Avg). Integer counts are kept for every column — correct and counted questions, where "counted" follows the
scorer's denominator rule (a skipped reply is in neither) — and a percentage is made from them only for display,
rounded half-up (:func:`senri.aggregate.percent_value`); a macro mean is taken over the exact fractions.

Registered layouts (:data:`LAYOUTS`):

- ``senri`` — SENRI-Bench's main table (Total, ES, L, NP, OC, RR, SE, RER, TER), as :mod:`senri.aggregate` has
  always computed it;
- ``videomme`` — VideoLucy Table 1: Short / Medium / Long / Avg, each micro over its split, Avg micro over all
  answered questions (VM11);
- ``lvbench`` — Table 2: ER / EU / KIR / TG / Rea / Sum (multi-label) / Overall over questions (LV6, LV10);
- ``mlvu`` — Table 3: the seven multiple-choice tasks and M-Avg, the macro mean of the seven (ML11);
- ``egomem`` — Table 4: Event / Detail / Avg, the mean of the two (EM8).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Literal, Mapping, Sequence

from senri.aggregate import percent_value
from senri.registry import Registry

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

    @property
    def official_scorer(self) -> str:
        return self.scorers[0]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.columns)

    def column(self, key: str) -> Column:
        return next(c for c in self.columns if c.key == key)


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


def round_half_up(value: Fraction, decimals: int) -> float:
    """An exact fraction rounded half-up for display, as :func:`senri.aggregate.percent_value` rounds counts."""
    scale = 10**decimals
    return float((2 * value * scale + 1) // 2) / scale


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


# --- the layouts -------------------------------------------------------------------------------------------------

SENRI = Layout(
    "senri", "SENRI-Bench (Table 2 layout)",
    (Column("total", "Total", "all"), Column("es", "ES", "category", ("L", "NP", "OC", "RR")),
     Column("l", "L", "category", ("L",)), Column("np", "NP", "category", ("NP",)),
     Column("oc", "OC", "category", ("OC",)), Column("rr", "RR", "category", ("RR",)),
     Column("se", "SE", "category", ("RER", "TER")), Column("rer", "RER", "category", ("RER",)),
     Column("ter", "TER", "category", ("TER",))),
    headline="total", scorers=("method", "senri_strict"))

VIDEOMME = Layout(
    "videomme", "Video-MME w/o subtitles (VideoLucy Table 1 layout)",
    (Column("short", "Short", "split", ("short",)), Column("medium", "Medium", "split", ("medium",)),
     Column("long", "Long", "split", ("long",)), Column("avg", "Avg", "all")),
    headline="avg",
    scorers=("videomme_official", "videomme_old", "lmms_eval_2025", "lmms_eval_2026", "vlmevalkit_videomme",
             "senri_prereading", "senri_strict", "method"),
    published="videolucy_table1_videomme.csv")

LVBENCH = Layout(
    "lvbench", "LVBench (VideoLucy Table 2 layout)",
    tuple(Column(k.lower(), k, "category", (k,)) for k in ("ER", "EU", "KIR", "TG", "Rea", "Sum"))
    + (Column("overall", "Overall", "all"),),
    headline="overall",
    scorers=("lvbench_official", "lvbench_polish", "lmms_eval_2025", "lmms_eval_2026", "senri_prereading",
             "senri_strict", "method"),
    published="videolucy_table2_lvbench.csv")

#: MLVU's seven multiple-choice dev tasks (the category names the reader gives, ML3; needle as "needle") and the
#: abbreviations of MLVU's own tables.
MLVU_TASKS = (("plotQA", "PQA"), ("needle", "NQA"), ("ego", "ER"), ("count", "AC"), ("order", "AO"),
              ("anomaly_reco", "AR"), ("topic_reasoning", "TR"))
MLVU = Layout(
    "mlvu", "MLVU dev (VideoLucy Table 3 layout)",
    tuple(Column(task.lower(), label, "category", (task,)) for task, label in MLVU_TASKS)
    + (Column("m_avg", "M-Avg", "macro", tuple(task.lower() for task, _ in MLVU_TASKS)),),
    headline="m_avg",
    scorers=("mlvu_official", "lmms_eval_2025_mlvu", "lmms_eval_2026", "vlmevalkit_mlvu", "senri_prereading",
             "senri_strict", "method"),
    published="videolucy_table3_mlvu.csv")

EGOMEM = Layout(
    "egomem", "EgoMem (VideoLucy Table 4 layout)",
    (Column("event", "Event", "category", ("Event",)), Column("detail", "Detail", "category", ("Detail",)),
     Column("avg", "Avg", "macro", ("event", "detail"))),
    headline="avg",
    scorers=("egomem_official", "videomme_official", "lmms_eval_2026", "senri_prereading", "senri_strict",
             "method"),
    published="videolucy_table4_egomem.csv")

#: name → Layout (a benchmark's ``layout`` names one).
LAYOUTS = Registry("layout")
for _name, _object in (("senri", "SENRI"), ("videomme", "VIDEOMME"), ("lvbench", "LVBENCH"), ("mlvu", "MLVU"),
                       ("egomem", "EGOMEM")):
    LAYOUTS.register(_name, f"senri.benchmarks.layouts:{_object}")


def layout(name: str) -> Layout:
    return LAYOUTS.load(name)

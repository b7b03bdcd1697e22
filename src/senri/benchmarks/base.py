"""What every benchmark module provides (:class:`Benchmark`) and what its reader returns (:class:`NativeSet`).

A reader turns a benchmark's native files into :class:`~senri.records.Question` rows *as the benchmark has them*:
a record that SENRI's strict rules would refuse (a repeated option, an empty or impossible answer, an empty
record) is kept, its quirks named in ``Question.flags`` and counted in the ingest report
(:class:`~senri.records.IngestQuirk` rows), because the papers score the full sets (EgoMem's 504 include its four
invalid answers). A file that is not what it claims (invalid JSON) is refused with its position, or repaired
only behind a named option (``dataset.repair_json``) that the report states.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from senri.benchmarks.layouts import Layout
from senri.records import OPTION_LETTERS, IngestQuirk, Question

#: A video id of a native benchmark: YouTube ids may start with "-" or "_" (Video-MME 24 of 900); no path parts.
NATIVE_VIDEO_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Problem:
    """One problem of a question file: where (file, 1-based row, field) and what."""

    file: str
    row: int | None  # 1-based data row (JSON list index + 1, JSONL line, CSV data row); None: whole file
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file + (f", row {self.row}" if self.row is not None else "")
        return f"{where}{f', field {self.field!r}' if self.field else ''}: {self.message}"


class IngestError(ValueError):
    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"{len(self.problems)} problem(s) in the question files:\n" + "\n".join(f"  {p}" for p in self.problems)
        )


class NativeFileError(ValueError):
    """A native file that cannot be read as what it claims to be; the message names the file and position."""


@dataclass(frozen=True)
class NativeVideo:
    """One video of a benchmark: where its file may be (paths relative to ``dataset.videos_dir``, the first that
    exists wins), its split label and the duration the native file states (seconds; None where it states none)."""

    video_id: str
    files: tuple[str, ...]
    split: str | None = None
    duration_s: float | None = None


@dataclass
class NativeSet:
    """What a reader made of a benchmark's files: questions, their videos, every kept quirk, and notes on whole
    files (a repair, a skipped generation task) for the ingest report."""

    questions: list[Question] = field(default_factory=list)
    videos: dict[str, NativeVideo] = field(default_factory=dict)
    quirks: list[IngestQuirk] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def flag(self, question_file: str, record: str, video_id: str, flag: str, detail: str) -> str:
        self.quirks.append(IngestQuirk(file=question_file, record=record, video_id=video_id, flag=flag, detail=detail))
        return flag

    def note(self, question_file: str, text: str) -> None:
        self.notes.append(text)
        self.quirks.append(IngestQuirk(file=question_file, record="", video_id="", flag="file_note", detail=text))


#: A reader: the dataset config (``questions`` files, options such as ``repair_json``) → the native set.
Reader = Callable[[Mapping[str, Any]], NativeSet]
#: The memory preset of one video (a name in ``memory.presets``), or None for ``memory.preset`` (``auto``).
PresetRule = Callable[[Mapping[str, Any], NativeVideo], str | None]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark, everything senri knows of it in one object: its reader and the dataset keys that reader
    takes (``options``: its share of the ingest config; ``dataset.benchmark`` is always part of it), categories
    (display order), splits, official scorer (a name in ``senri.benchmarks.scoring.SCORERS``), its table
    :class:`~senri.benchmarks.layouts.Layout` (main table, published rows, scorers, breakdowns, figure), the preset
    rule by which VideoLucy's appendix sets a video's temporal scopes, and a glossary of its codes for the
    question browser (``(title, {code: meaning})`` groups)."""

    name: str
    title: str
    categories: tuple[str, ...]
    splits: tuple[str, ...]
    official_scorer: str
    layout: Layout
    read: Reader
    preset: PresetRule
    #: SENRI format: one record that fails validation refuses the whole ingest (with every problem listed).
    strict: bool = False
    #: The ``dataset.*`` keys its reader reads beyond questions / videos_dir / video_ext (config/dataset/<name>.yaml).
    options: tuple[str, ...] = ()
    glossary: tuple[tuple[str, Mapping[str, str]], ...] = ()


#: Separates a facet's key from its value in ``Question.categories`` (``domain=Knowledge``).
FACET = "="


def facet(key: str, value: object) -> list[str]:
    """``[key=value]`` for a non-empty value, else ``[]``."""
    text = str(value).strip() if value is not None else ""
    return [f"{key}{FACET}{text}"] if text else []


def no_preset(dataset: Mapping[str, Any], video: NativeVideo) -> str | None:
    """``memory.preset`` decides (SENRI-format data: ``auto``, by measured length)."""
    return None


def preset_by_bins(bins: Mapping[str, float | None], duration_s: float) -> str:
    """The preset whose bin holds ``duration_s``: the smallest upper bound ≥ the duration (a duration on an edge
    takes the shorter bin, as ``memory.auto`` does); None = no upper bound. Below the first bin's lower edge the
    first preset applies (the paper leaves shorter videos open: recorded in the dataset config)."""
    bounded = sorted((float(bound), name) for name, bound in bins.items() if bound is not None)
    unbounded = [name for name, bound in bins.items() if bound is None]
    for bound, name in bounded:
        if duration_s <= bound + 1e-9:
            return name
    if unbounded:
        return unbounded[0]
    return bounded[-1][1]


def question_files(dataset: Mapping[str, Any]) -> list[Path]:
    return [Path(p) for p in dataset["questions"]]


def load_json(path: Path, repair: bool, native: NativeSet) -> Any:
    """Parse a JSON file; invalid JSON is refused with line and column, unless ``repair`` is set, in which case
    trailing commas before ``]``/``}`` (Video-MME's official template) are removed and the ingest report says so."""
    text = path.read_text(encoding="utf-8-sig")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if not repair:
            raise NativeFileError(
                f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); set "
                f"dataset.repair_json=true to remove trailing commas (Video-MME's official template has them)"
            ) from None
        repaired, count = TRAILING_COMMA.subn(r"\1", text)
        try:
            data = json.loads(repaired)
        except json.JSONDecodeError as again:
            raise NativeFileError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}), and "
                                  f"still not after removing {count} trailing comma(s): line {again.lineno}, column "
                                  f"{again.colno} ({again.msg})") from None
        native.note(str(path), f"repaired: removed {count} trailing comma(s) (dataset.repair_json=true); first "
                               f"error was at line {exc.lineno}, column {exc.colno}")
        return data


#: A comma, then only whitespace, before a closing bracket or brace (outside strings: a JSON string cannot hold
#: a raw line break, and the pattern requires the closer to follow whitespace only).
TRAILING_COMMA = re.compile(r",(\s*[\]}])")


def strip_letter_prefixes(options: Sequence[str]) -> list[str]:
    """Drop "A. " / "B) " prefixes that repeat each option's own letter (Video-MME, EgoMem write them)."""
    out = []
    for letter, option in zip(OPTION_LETTERS, options):
        match = re.match(rf"^{letter}[.)]\s*", option)
        out.append(option[match.end():] if match else option)
    return out


def repeated_options(options: Sequence[str]) -> list[tuple[int, int]]:
    """(index of the first, index of the repeat) for each option that reads like an earlier one (whitespace and
    case aside); empty options are not compared."""
    pairs, seen = [], {}
    for i, option in enumerate(options):
        key = " ".join(option.split()).casefold()
        if key and key in seen:
            pairs.append((seen[key], i))
        elif key:
            seen[key] = i
    return pairs


def option_flags(options: Sequence[str]) -> list[tuple[str, str]]:
    """(flag, detail) for options that repeat another's text (:func:`repeated_options`, SENRI's rule too) or are
    empty."""
    flags = [("empty_option", f"option {letter} is empty") for letter, option in zip(OPTION_LETTERS, options)
             if not option.strip()]
    flags += [("repeated_option", f"options {OPTION_LETTERS[first]} and {OPTION_LETTERS[i]} read the same "
                                  f"({options[i]!r})") for first, i in repeated_options(options[: len(OPTION_LETTERS)])]
    return flags


def make_question(*, benchmark: str, video_id: str, qid: str, categories: Sequence[str], question: str,
                  options: Sequence[str], answer: str, flags: Sequence[str], split: str | None = None,
                  evidence: tuple[float, float] | None = None) -> Question:
    """A native question row: 2–6 options spread over ``option_a``…``option_f`` (None after the last; A and B ""
    on a record without options), the first category as ``task_type``, no SENRI direction."""
    padded: list[str | None] = list(options[:6]) + [None] * max(0, 6 - len(options))
    padded[:2] = [o if o is not None else "" for o in padded[:2]]
    return Question(
        video_id=video_id, qid=qid, task_type=categories[0] if categories else "", direction="",
        question=question, option_a=padded[0], option_b=padded[1], option_c=padded[2], option_d=padded[3],
        answer=answer, evidence_start_s=evidence[0] if evidence else None,
        evidence_end_s=evidence[1] if evidence else None, benchmark=benchmark, split=split,
        categories=list(categories), option_e=padded[4], option_f=padded[5], flags=sorted(set(flags)),
    )


def answer_flags(answer: str, n_options: int) -> list[tuple[str, str]]:
    if not answer:
        return [("empty_answer", "the answer is empty")]
    if answer not in OPTION_LETTERS[:n_options]:
        return [("answer_not_an_option", f"answer {answer!r} is not one of {', '.join(OPTION_LETTERS[:n_options])}")]
    return []


def unusable_video_id(native: NativeSet, question_file: str, record: str, video_id: str) -> bool:
    """Whether a record's video id cannot name a file (empty, a path separator, a space, …): the record is left
    out and reported ``bad_video_id`` instead of refusing the whole file."""
    if NATIVE_VIDEO_ID.match(video_id):
        return False
    native.flag(question_file, record, video_id, "bad_video_id",
                f"video id {video_id!r} cannot name a file (letters, digits, '_', '-', '.'): the record is left out")
    return True

"""What every benchmark module provides (:class:`Benchmark`) and what its reader returns (:class:`NativeSet`).

A reader turns a benchmark's native files into :class:`~senri.records.Question` rows *as the benchmark has them*:
a record that SENRI's strict rules would refuse (a repeated option, an empty or impossible answer, an empty
record) is kept, its quirks named in ``Question.flags`` and counted in the ingest report
(:class:`~senri.records.IngestQuirk` rows), because the papers score the full sets (EgoMem's 504 include its four
invalid answers). A file that is not what it claims (invalid JSON, not UTF-8, empty) is refused with its position,
or repaired only behind a named option (``dataset.repair_json``) that the report states. A record the benchmark's
tool could not use as it stands (no or a repeated id, options as one string, an answer that is not text, …) is a
:class:`NativeProblem` naming file, record and field; a reader collects them all and raises them together
(:meth:`NativeSet.check`). Nothing is rewritten silently: no position ids, no split strings, no coerced answers.
"""

from __future__ import annotations

import json
import math
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
    """One problem of a question file: where (file, 1-based row or a native file's record, field) and what."""

    file: str
    row: int | None  # 1-based data row (JSON list index + 1, JSONL line, CSV data row); None: whole file
    field: str | None
    message: str
    #: a native file's record (``item [3] (question_id '004-1')``, ``line 7, qa [2]``) where ``row`` does not apply
    record: str = ""

    def __str__(self) -> str:
        where = self.file + (f", row {self.row}" if self.row is not None else "") + (f", {self.record}" if self.record else "")
        return f"{where}{f', field {self.field!r}' if self.field else ''}: {self.message}"


class IngestError(ValueError):
    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"{len(self.problems)} problem(s) in the question files:\n" + "\n".join(f"  {p}" for p in self.problems)
        )


@dataclass(frozen=True)
class NativeProblem:
    """One reason a native file cannot be read as its benchmark's tool would read it: the file, the record
    (``item [3]``, ``line 7, qa [2]``, with its id where it has one; "" for the whole file), the field and why."""

    file: str
    record: str
    field: str | None
    message: str

    def __str__(self) -> str:
        where = ", ".join(part for part in (self.record, f"field {self.field!r}" if self.field else "") if part)
        return f"{self.file}: {where + ': ' if where else ''}{self.message}"


class NativeFileError(ValueError):
    """Native files that cannot be read as what they claim to be: every problem found (file, record, field), so
    that a damaged file is fixed in one pass. Raised by a reader before any question leaves it, so at ingest
    (and at planning, which then plans no video and lets the ingest job report it)."""

    def __init__(self, problems: Sequence["NativeProblem"]) -> None:
        self.problems = list(problems)
        text = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(str(self.problems[0]) if len(self.problems) == 1
                         else f"{len(self.problems)} problems in the question files:\n{text}")


def file_error(path: Path | str, message: str) -> NativeFileError:
    """A problem with a whole file (missing, empty, not UTF-8, not JSON, the wrong top level)."""
    return NativeFileError([NativeProblem(str(path), "", None, message)])


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
    #: Records that cannot be read as the tool reads them; :meth:`check` raises them all at once.
    problems: list[NativeProblem] = field(default_factory=list)
    #: Where each question id was first read (``file``, record): a repeat names both places.
    first_seen: dict[str, str] = field(default_factory=dict)

    def problem(self, question_file: str, record: str, field_name: str | None, message: str) -> None:
        self.problems.append(NativeProblem(question_file, record, field_name, message))

    def check(self) -> "NativeSet":
        """Raise every problem found (:class:`NativeFileError`); a set whose files hold no question at all is
        refused as such (blamed on the files, not on the videos)."""
        if self.problems:
            raise NativeFileError(self.problems)
        return self

    def claim_id(self, question_file: str, record: str, id_field: str, qid: str) -> bool:
        """Whether ``qid`` is new; a repeat is a problem naming where it was first read (the tool keys its
        answers by id, so two questions with one id cannot both be scored)."""
        if qid in self.first_seen:
            self.problem(question_file, record, id_field, f"duplicate question id {qid!r} (first at "
                                                      f"{self.first_seen[qid]})")
            return False
        self.first_seen[qid] = f"{question_file}, {record}"
        return True

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


def read_text(path: Path) -> str:
    """A native text file's content: a file that is missing, a folder, empty (blamed on the file, not on the
    videos later) or not UTF-8 (the byte, its offset, line and column) is refused; a byte-order mark is dropped."""
    if path.is_dir():
        raise file_error(path, "is a folder, not a question file")
    if not path.is_file():
        raise file_error(path, "file not found")
    data = path.read_bytes()
    if not data.strip():
        raise file_error(path, f"is empty ({len(data)} bytes): the download is incomplete or the wrong file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise file_error(path, f"not UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start} (line {line}, "
                               f"column {column}); save the file as UTF-8") from None


def load_json(path: Path, repair: bool, native: NativeSet) -> Any:
    """Parse a JSON file; invalid JSON is refused with line and column, unless ``repair`` is set, in which case
    trailing commas before ``]``/``}`` (Video-MME's official template) are removed and the ingest report says so."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if not repair:
            raise file_error(path, f"not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); set "
                                   f"dataset.repair_json=true to remove trailing commas (Video-MME's official template "
                                   f"has them)") from None
        repaired, count = TRAILING_COMMA.subn(r"\1", text)
        try:
            data = json.loads(repaired)
        except json.JSONDecodeError as again:
            raise file_error(path, f"not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}), and still "
                                   f"not after removing {count} trailing comma(s): line {again.lineno}, column "
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


# --- record fields: what each reader requires of a record, refused with file, record and field -----------------

#: A missing key and a JSON null read the same: absent.
MISSING = object()


def describe(value: Any) -> str:
    """A value as a user would name it in an error: its JSON type and (short) text."""
    kind = {bool: "a boolean", int: "the number", float: "the number", str: "the text", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
    shown = json.dumps(value, ensure_ascii=False) if isinstance(value, (str, int, float, bool)) else ""
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{kind} {shown}".strip() if kind.startswith("the") or isinstance(value, bool) else kind


def text_field(native: NativeSet, file: str, record: str, data: Mapping[str, Any], key: str,
               required: bool = True, numbers: bool = False) -> str | None:
    """The trimmed string of ``data[key]``; None (and a problem when ``required``) when it is absent, null or not
    a string. ``numbers``: an integer is taken as its decimal text (an id such as LVBench's ``uid``), never
    another type (an answer ``0`` is not the answer ""). No value is coerced silently."""
    value = data.get(key, MISSING)
    if value is MISSING or value is None:
        if required:
            native.problem(file, record, key, "missing" if value is MISSING else "is null")
        return None
    if isinstance(value, str):
        return value.strip()
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    native.problem(file, record, key, f"expected {'text or an integer' if numbers else 'text'}, got "
                                      f"{describe(value)}")
    return None


def id_field(native: NativeSet, file: str, record: str, data: Mapping[str, Any], key: str) -> str | None:
    """A record's question id (text or integer), claimed in the set: a missing, empty or repeated id is a
    problem, never replaced by the record's position."""
    qid = text_field(native, file, record, data, key, numbers=True)
    if qid == "":
        native.problem(file, record, key, "is empty")
        return None
    if qid is not None and not native.claim_id(file, record, key, qid):
        return None
    return qid


def with_id(where: str, key: str, qid: str | None) -> str:
    """A record's name in a problem, its id added once read: ``item [3] (question_id '004-1')``."""
    return where if qid is None else f"{where} ({key} {qid!r})"


def option_list(native: NativeSet, file: str, record: str, data: Mapping[str, Any], key: str) -> list[str] | None:
    """A record's options: a JSON list of 2–6 strings (A–F), trimmed. One string holding every option, a
    null, a number among them, one option or seven are problems; nothing is split or dropped."""
    value = data.get(key, MISSING)
    if value is MISSING or value is None:
        native.problem(file, record, key, "missing" if value is MISSING else "is null")
        return None
    if not isinstance(value, list):
        native.problem(file, record, key, f"expected a list of option texts, got {describe(value)}")
        return None
    bad = [f"{OPTION_LETTERS[i] if i < len(OPTION_LETTERS) else i + 1} is {describe(v)}"
           for i, v in enumerate(value) if not isinstance(v, str)]
    if bad:
        native.problem(file, record, key, f"every option must be text: {'; '.join(bad)}")
        return None
    if not 2 <= len(value) <= len(OPTION_LETTERS):
        native.problem(file, record, key, f"{len(value)} option(s); a question has 2 to {len(OPTION_LETTERS)} "
                                          f"({', '.join(OPTION_LETTERS)})")
        return None
    return [v.strip() for v in value]


def duration_field(native: NativeSet, file: str, record: str, video_id: str, value: Any,
                   key: str) -> tuple[float | None, list[str]]:
    """A stated duration in seconds (or minutes, as stated): a finite number ≥ 0; anything else (NaN, text, a
    negative number) is flagged ``bad_duration`` and not used (the preset falls back to ``memory.preset``)."""
    if value is None:
        return None, []
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value), []
    return None, [native.flag(file, record, video_id, "bad_duration",
                              f"{key} {describe(value)} is not a duration: the memory preset is memory.preset's")]


def note_unread_fields(native: NativeSet, file: str, counts: Mapping[str, int], known: set[str]) -> None:
    """One note per file naming the fields no reader (and no tool) uses, with how many records carry each:
    ignored as the tools ignore them, but said."""
    extra = {k: n for k, n in counts.items() if k not in known}
    if extra:
        native.note(file, "fields not read: " + ", ".join(f"{k} ({n} record(s))" for k, n in sorted(extra.items())))

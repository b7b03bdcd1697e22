"""The SENRI format's strict reader: question files (JSON, JSONL, CSV, Parquet) → validated questions.

Validation reports every problem at once, each with file, row and field, because a researcher fixing a
500-question file one error per run would rerun it 500 times. Nothing is written when validation fails. The
record schema is ``workflow/schemas/questions.schema.json``; its task types are SENRI-Bench's
(:data:`senri.benchmarks.senri.TASK_TYPES`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import jsonschema
import polars as pl

from senri.benchmarks.base import IngestError, Problem, repeated_options
from senri.benchmarks.senri.taxonomy import TASK_DIRECTION
from senri.paths import SCHEMA_DIR
from senri.records import LETTERS, Question, to_frame

QUESTION_SCHEMA = SCHEMA_DIR / "questions.schema.json"
OPTION_COLUMNS = ("option_a", "option_b", "option_c", "option_d")
SUPPORTED = (".json", ".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class RawRecord:
    file: str
    row: int
    data: dict[str, Any]


def question_schema() -> dict[str, Any]:
    """The record schema, its task types SENRI-Bench's (one list: :data:`~senri.benchmarks.senri.TASK_TYPES`)."""
    schema = json.loads(QUESTION_SCHEMA.read_text())
    schema["properties"]["task_type"]["enum"] = list(TASK_DIRECTION)
    return schema


def read_records(path: str | Path) -> Iterator[RawRecord | Problem]:
    """Yield the raw records of one question file, or a :class:`Problem` for a row that is not a record
    (so the rows after it are still checked); a file that cannot be read at all raises :class:`IngestError`."""
    path = Path(path)
    name = str(path)
    if not path.is_file():
        raise IngestError([Problem(name, None, None, "file not found")])
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is fine, as in CSV
            if isinstance(data, dict) and isinstance(data.get("questions"), list):
                data = data["questions"]
            if not isinstance(data, list):
                raise IngestError([Problem(name, None, None, "expected a JSON list of questions "
                                                             "(or an object with a 'questions' list)")])
            rows: Iterable[tuple[int, Any]] = enumerate(data, start=1)
        elif suffix == ".jsonl":
            rows = _jsonl_rows(path)
        elif suffix == ".csv":
            rows = enumerate(pl.read_csv(path, infer_schema=False).iter_rows(named=True), start=1)
        elif suffix == ".parquet":
            rows = enumerate(pl.read_parquet(path).iter_rows(named=True), start=1)
        else:
            raise IngestError([Problem(name, None, None, f"unsupported file type {suffix!r}; use one of {SUPPORTED}")])
        for row, record in rows:
            if isinstance(record, Problem):
                yield record
            elif not isinstance(record, dict):
                yield Problem(name, row, None, f"expected an object, got {type(record).__name__}")
            else:
                yield RawRecord(name, row, record)
    except (json.JSONDecodeError, UnicodeDecodeError, pl.exceptions.PolarsError, OSError) as exc:
        raise IngestError([Problem(name, None, None, f"cannot be read: {exc}")]) from exc


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8-sig") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line)
            except json.JSONDecodeError as exc:
                yield line_no, Problem(str(path), line_no, None, f"invalid JSON: {exc.msg}")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def normalize(record: dict[str, Any]) -> dict[str, Any]:
    """Gather options into a list, make ids strings and trim whitespace; leave validation to the schema."""
    out = {k: v for k, v in record.items() if k not in OPTION_COLUMNS}
    if "options" not in record and any(c in record for c in OPTION_COLUMNS):
        out["options"] = [record.get(c) for c in OPTION_COLUMNS if not _blank(record.get(c))]
    elif isinstance(record.get("options"), str):
        try:  # CSV cells holding a JSON list
            out["options"] = json.loads(record["options"])
        except json.JSONDecodeError:
            pass
    for key in ("video_id", "qid"):
        if isinstance(out.get(key), (int, float)) and not isinstance(out.get(key), bool):
            out[key] = str(out[key])
    for key in ("video_id", "qid", "task_type", "answer", "question"):
        if isinstance(out.get(key), str):
            out[key] = out[key].strip()
    for key in ("evidence_start_s", "evidence_end_s"):
        if isinstance(out.get(key), str):
            try:
                out[key] = float(out[key]) if out[key].strip() else None
            except ValueError:
                pass
    options = out.get("options")
    if isinstance(options, list) and all(isinstance(o, str) for o in options):
        options = [o.strip() for o in options]
        # "A. 3" / "B) 1" prefixes that repeat the option's own letter carry no content: drop them.
        prefixed = [re.match(rf"^{letter}[.)]\s+", o) for letter, o in zip(LETTERS, options)]
        if len(options) == 4 and all(prefixed):
            options = [o[m.end():] for o, m in zip(options, prefixed)]
        out["options"] = options
    return out


def _schema_problems(validator: jsonschema.Draft202012Validator, raw: RawRecord, record: dict) -> list[Problem]:
    problems = []
    for error in validator.iter_errors(record):
        if error.validator == "required":
            field = re.match(r"'([^']+)'", error.message)
            problems.append(Problem(raw.file, raw.row, field.group(1) if field else None, "missing"))
            continue
        field = str(error.absolute_path[0]) if error.absolute_path else None
        if field == "options" and error.validator in ("minItems", "maxItems", "type"):
            got = record.get("options")
            count = len(got) if isinstance(got, list) else "no list of"
            message = f"expected exactly 4 options, got {count}"
        elif error.validator == "enum":
            message = f"{error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
        elif error.validator == "pattern" and field in ("question", "options"):
            message = "empty text"
        else:
            message = error.message
        problems.append(Problem(raw.file, raw.row, field, message))
    return problems


def _consistency_problems(raw: RawRecord, record: dict) -> list[Problem]:
    """What a schema cannot say: two options that read the same, an evidence window that ends before it starts."""
    problems = []
    options = record.get("options")
    if isinstance(options, list) and all(isinstance(o, str) for o in options):
        for first, i in repeated_options(options[: len(LETTERS)]):
            problems.append(Problem(raw.file, raw.row, "options",
                                    f"options {LETTERS[first]} and {LETTERS[i]} are identical ({options[i]!r})"))
    start, end = record.get("evidence_start_s"), record.get("evidence_end_s")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and start > end:
        problems.append(Problem(raw.file, raw.row, "evidence_start_s",
                                f"evidence window ends before it starts ({start:g} s > evidence_end_s {end:g} s)"))
    return problems


def find_video(videos_dir: str | Path, video_id: str, extensions: Sequence[str]) -> Path | None:
    for ext in extensions:
        candidate = Path(videos_dir) / f"{video_id}{ext}"
        if candidate.is_file():
            return candidate
    return None


def ingest(
    question_files: Sequence[str | Path],
    videos_dir: str | Path,
    video_ext: Sequence[str],
) -> pl.DataFrame:
    """Read, normalize and validate every SENRI-format question file; return the question table or raise with
    all problems."""
    return to_frame(validated_questions(question_files, videos_dir, video_ext), Question).sort(
        "video_id", maintain_order=True)


def validated_questions(
    question_files: Sequence[str | Path],
    videos_dir: str | Path,
    video_ext: Sequence[str],
) -> list[Question]:
    """The SENRI format's strict reader: every record valid and every video present, or :class:`IngestError`
    listing every problem."""
    validator = jsonschema.Draft202012Validator(question_schema())
    problems: list[Problem] = []
    questions: list[Question] = []
    first_seen: dict[str, RawRecord] = {}
    video_found: dict[str, bool] = {}  # one lookup per video, not per question
    for file in question_files:
        try:
            raws = list(read_records(file))
        except IngestError as exc:
            problems.extend(exc.problems)
            continue
        if not raws:
            problems.append(Problem(str(file), None, None, "no questions in file"))
        for raw in raws:
            if isinstance(raw, Problem):
                problems.append(raw)
                continue
            record = normalize(raw.data)
            record_problems = _schema_problems(validator, raw, record) + _consistency_problems(raw, record)
            qid = record.get("qid")
            if isinstance(qid, str) and qid:
                if qid in first_seen:
                    first = first_seen[qid]
                    record_problems.append(
                        Problem(raw.file, raw.row, "qid", f"duplicate qid {qid!r} (first at {first.file}, row {first.row})")
                    )
                else:
                    first_seen[qid] = raw
            video_id = record.get("video_id")
            if isinstance(video_id, str) and video_id and not any(p.field == "video_id" for p in record_problems):
                if video_id not in video_found:  # a missing video is reported once, at its first question
                    video_found[video_id] = find_video(videos_dir, video_id, video_ext) is not None
                    if not video_found[video_id]:
                        record_problems.append(
                            Problem(raw.file, raw.row, "video_id",
                                    f"video {video_id!r} not found as {Path(videos_dir) / video_id}{{{','.join(video_ext)}}}")
                        )
            problems.extend(record_problems)
            if not record_problems:
                options = record["options"]
                questions.append(
                    Question(
                        video_id=record["video_id"],
                        qid=record["qid"],
                        task_type=record["task_type"],
                        direction=TASK_DIRECTION[record["task_type"]],
                        question=record["question"].strip(),
                        option_a=options[0],
                        option_b=options[1],
                        option_c=options[2],
                        option_d=options[3],
                        answer=record["answer"],
                        evidence_start_s=_float_or_none(record.get("evidence_start_s")),
                        evidence_end_s=_float_or_none(record.get("evidence_end_s")),
                        categories=[record["task_type"]],
                    )
                )
    if problems:
        raise IngestError(problems)
    return questions


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def video_ids_in(question_files: Sequence[str | Path]) -> list[str]:
    """Video ids named in question files, read leniently (for planning jobs before validation runs)."""
    ids: dict[str, None] = {}
    for file in question_files:
        try:
            for raw in read_records(file):
                if isinstance(raw, Problem):
                    continue
                video_id = normalize(raw.data).get("video_id")
                if isinstance(video_id, str) and video_id:
                    ids[video_id] = None
        except IngestError:
            continue  # the ingest job reports it, with every other problem
    return list(ids)

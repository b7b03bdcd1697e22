"""Every table that crosses a stage boundary, declared once.

Each record is a dataclass; its Parquet schema is derived from the dataclass annotations, so the writer, the
readers and the tests cannot drift apart. Stages write with :func:`write_table` (which checks the columns and
types against the record) and read with :func:`read_table` (which checks them again, naming the file).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import types
import typing
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Sequence

import polars as pl

LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
#: Letters a native benchmark's question may carry: 2–6 options (MLVU's test set has A–F).
OPTION_LETTERS: tuple[str, ...] = ("A", "B", "C", "D", "E", "F")


def option_letters(n_options: int) -> tuple[str, ...]:
    """The letters a question with ``n_options`` options offers, A up to the n-th: what every method shows,
    accepts and draws from (spec S3), so a five- or six-option question can be answered E or F and a two-option
    one never gets C. More options than :data:`OPTION_LETTERS` cannot be lettered and are refused."""
    if not 0 <= n_options <= len(OPTION_LETTERS):
        raise ValueError(f"a question has 2–{len(OPTION_LETTERS)} options; got {n_options}")
    return OPTION_LETTERS[:n_options]


def counted_letters(present: Iterable[str | None]) -> tuple[str, ...]:
    """The letters a letter count shows: SENRI's four always (its tables, figure and log line unchanged), E and
    F only where ``present`` (answers, predictions or a table's columns) has them."""
    seen = set(present)
    return tuple(letter for letter in OPTION_LETTERS if letter in LETTERS or letter in seen)


def letters_in_words(letters: Sequence[str]) -> str:
    """The letters as a prompt names them: "A, B, C or D", "A or B", "A"."""
    if len(letters) <= 1:
        return "".join(letters)
    return f"{', '.join(letters[:-1])} or {letters[-1]}"


@dataclass(frozen=True)
class Question:
    """One multiple-choice question about one video.

    SENRI-format questions have exactly four options and a valid letter (strict validation). A benchmark read
    from its native files (:mod:`senri.benchmarks`) may have 2–6 options (``option_e``/``option_f``; ``option_c``
    /``option_d`` None where fewer than four) and keeps records SENRI's rules would refuse, naming each quirk in
    ``flags`` (``repeated_option``, ``empty_answer``, ``answer_not_an_option``, …); such a question's ``answer``
    may be "" or a letter that is not an option, and it is always scored wrong (the papers count it). A record
    without any option (flagged ``no_options`` or ``empty_record``) keeps ``option_a``/``option_b`` as "".
    ``task_type`` is the primary category, ``categories`` all of them (LVBench is multi-label); an entry written
    ``key=value`` is a facet a table may group by but never a category column (Video-MME ``domain=…``,
    ``sub_category=…``; EgoMem ``subtype=…``; LVBench ``video_type=…``).
    """

    video_id: str
    qid: str
    task_type: str
    #: A benchmark's second grouping of its questions, where it has one (SENRI-Bench's direction of the task
    #: type, filled in by its reader); "" for a native benchmark.
    direction: str
    question: str
    option_a: str
    option_b: str
    option_c: str | None  # None: a native question with fewer options (never in the SENRI format)
    option_d: str | None
    answer: str
    evidence_start_s: float | None = None
    evidence_end_s: float | None = None
    #: The registered benchmark (senri.benchmarks.BENCHMARKS) whose file this question came from.
    benchmark: str = "senri"
    #: The benchmark's split label (Video-MME short/medium/long; a duration bin for MLVU and LVBench).
    split: str | None = None
    categories: list[str] = dataclasses.field(default_factory=list)
    option_e: str | None = None
    option_f: str | None = None
    flags: list[str] = dataclasses.field(default_factory=list)

    @property
    def options(self) -> tuple[str, ...]:
        """The question's options in letter order (2–6; a SENRI question always has four)."""
        every = (self.option_a, self.option_b, self.option_c, self.option_d, self.option_e, self.option_f)
        return tuple(o for o in every if o is not None)

    @property
    def letters(self) -> tuple[str, ...]:
        """The letters of its options (:func:`option_letters`): A–D for a SENRI question, A–F for six options."""
        return option_letters(len(self.options))


@dataclass(frozen=True)
class IngestQuirk:
    """One row of the ingest report (``results/questions.report.parquet``): a native record kept although SENRI's
    rules would refuse it, and why (``flag``: repeated_option, empty_answer, answer_not_an_option, …), a question
    left out, one row each with its reason (``video_missing``, ``bad_video_id``, ``not_drawn``), or a note on the
    whole set (``file_note``: a repair; ``filter``: a selection; ``empty_task_file``). :mod:`senri.coverage` reads
    them."""

    file: str
    record: str     # the question id (or task file + index); "" for a whole-file note
    video_id: str
    flag: str
    detail: str


@dataclass(frozen=True)
class VideoInfo:
    """What ffprobe (plus a bounded packet scan) says about one video file."""

    video_id: str
    path: str
    duration_s: float
    avg_fps: float
    r_fps: float
    n_frames: int
    width: int
    height: int
    rotation: int
    codec: str
    keyframe_interval_s: float | None
    is_vfr: bool
    has_audio: bool
    size_bytes: int
    fingerprint: str
    #: Whether the decodable length falls short of the declared duration (or decoding ends in an error).
    truncated: bool = False
    #: Seconds from the first frame to the end of the last frame that decodes (None: not checked).
    decodable_s: float | None = None
    #: The stream's start time in container seconds: 0 s of the video's timeline, which every stage uses
    #: (an MPEG program stream starts at 0.54 s, a transport stream at 1.4 s or later; an MP4 at 0).
    start_s: float = 0.0
    #: Where ``duration_s`` came from: stream | tag | container | decoded (none declared, or contradicted by
    #: what decodes: the decoded extent replaces it).
    duration_source: str = "stream"
    #: The video stream's time base as ffprobe reports it ("1/15360"): the unit its timestamps count in. A
    #: decoder that compares timestamps, not seconds, rounds window bounds to it (ParaVT's torchvision fallback,
    #: :func:`senri.resample.torchvision_window`). None: not known (a record not made by the probe stage).
    time_base: str | None = None

    @property
    def stream_time_base(self) -> Fraction | None:
        """:attr:`time_base` as a fraction of a second (None when not known)."""
        return Fraction(self.time_base) if self.time_base else None


@dataclass(frozen=True)
class Prediction:
    """One method × model answer to one question; the answer-stage contract every method fulfils."""

    video_id: str
    qid: str
    task_type: str
    method: str
    model: str
    pred: str | None
    answer: str
    correct: bool
    parse_ok: bool
    raw_output: str | None
    n_llm_calls: int
    n_vlm_calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None
    #: JSON record of the method's steps (prompts' purposes, parse rule, scores, ...), for inspection.
    trace: str | None = None
    #: The memory's captioner (``perception`` or a VLM model config's name); ``none`` for methods without a
    #: memory. Part of a run's identity in every table.
    memory: str = "none"
    #: Captioner calls this question made (computed and failed; VLM ones are also in ``n_vlm_calls``),
    #: captions it reused from the caption cache (no call), and the captioner's tokens and model seconds.
    n_caption_calls: int = 0
    n_captions_reused: int = 0
    caption_prompt_tokens: int = 0
    caption_completion_tokens: int = 0
    caption_s: float = 0.0
    # Run health (HEALTH_COUNTS): integer counts of the ways this question may have lost accuracy to the
    # harness rather than to the method, summed per run in the report's run-health table.
    forced_answers: int = 0
    forced_recovered: int = 0
    timeouts: int = 0
    context_trims: int = 0
    truncated_captions: int = 0
    failed_captions: int = 0
    builder_losses: int = 0
    capped_cells: int = 0
    cell_s_requested: int = 0
    cell_s_seen: int = 0
    failed_memory_updates: int = 0
    stripped_checks: int = 0
    refused_checks: int = 0
    repeated_queries: int = 0
    failed_search_calls: int = 0
    unparsed_tool_calls: int = 0
    spent_steps: int = 0
    rejected_tool_calls: int = 0
    truncated_replies: int = 0
    black_frames: int = 0
    context_overflows: int = 0
    defaulted_answers: int = 0
    capped_llm_calls: int = 0
    # Behaviour (BEHAVIOUR_COUNTS): what the method did on this question, whatever it scored.
    rounds: int = 0
    searches: int = 0
    memories_returned: int = 0
    qa_calls: int = 0
    bypasses: int = 0
    checks: int = 0
    cells: int = 0
    frames_seen: int = 0
    tool_calls: int = 0
    answered_without_retrieval: int = 0
    # Per memory store (STORE_COUNTS): of the failed_captions, truncated_captions and builder_losses above, what
    # the store the question read carries as a whole (the same on each of its questions), so that a run's
    # table counts each store once instead of once per question.
    store_failed_captions: int = 0
    store_truncated_captions: int = 0
    store_builder_losses: int = 0


#: The run-health counts of a prediction row, in the order the run-health table prints them:
#: ``forced_answers`` answers that came from a forced round or call; ``forced_recovered`` of those, replies
#: invalid after the repair whose letter the answer parser still found; ``timeouts`` calls that timed out;
#: ``context_trims`` requests shortened to fit the model's context or image limit before they were sent;
#: ``truncated_captions`` captions cut at their token limit; ``failed_captions`` captions that failed;
#: ``builder_losses`` items the persistent memory's builder left out of the store the question read (failed,
#: unreadable or over-limit builder calls: :meth:`senri.memory.store.MemoryStore.question_counts`), the
#: store's total repeated on each of its questions like ``failed_captions``;
#: ``capped_cells`` verifier cells dropped by the cell cap; ``cell_s_requested`` / ``cell_s_seen`` seconds of
#: candidate windows the checks asked for / that the kept cells covered (rounded); ``failed_memory_updates``
#: working-memory updates whose reply was unusable; ``stripped_checks`` checks whose text lost choice text;
#: ``refused_checks`` checks refused as invalid; ``repeated_queries`` searches that repeated an earlier query;
#: ``failed_search_calls`` model calls a memory's retriever made inside a search (WorldMM's fact filter W8 and
#: ranking W9, MAGIC-Video's time-range extractor G13) that failed or came back unreadable, so the search took
#: its fallback path; ``unparsed_tool_calls`` replies holding a tool call that could not be read (invalid or
#: cut off), or a forced answer that was a tool call, never taken for an answer; ``spent_steps`` controller
#: steps that made no tool call and gave no answer (no tool call where one is required, an error-like reply,
#: an unreadable tool call); ``rejected_tool_calls`` tool calls refused as invalid (unknown tool, unreadable or
#: missing arguments, a bad frame range); ``truncated_replies`` model replies cut at their token limit
#: (``finish_reason: length``) other than the memory captions of ``truncated_captions``; ``black_frames``
#: frames that failed to decode (sent black by VideoARM, left out of the memory workflows' QA calls, and of
#: ParaVT's and Video-o3's overviews and crops); ``context_overflows`` requests of an evidence seeker's
#: whole re-sent history that no longer fit the model's context or image limits: not sent, and the question
#: ends there without an answer (the release's call fails on it); ``defaulted_answers`` questions without an
#: answer that the method's release scores as a fixed letter (LongVideo-R1's "missing answer counts as A");
#: ``capped_llm_calls`` questions whose agent calls reached the method's call cap (VideoLucy's
#: ``max_llm_calls``, appendix A.8), so the forced answer came early.
HEALTH_COUNTS: tuple[str, ...] = (
    "forced_answers", "forced_recovered", "timeouts", "context_trims", "truncated_captions", "failed_captions",
    "builder_losses", "capped_cells", "cell_s_requested", "cell_s_seen", "failed_memory_updates", "stripped_checks",
    "refused_checks", "repeated_queries", "failed_search_calls", "unparsed_tool_calls", "spent_steps",
    "rejected_tool_calls", "truncated_replies", "black_frames", "context_overflows", "defaulted_answers",
    "capped_llm_calls",
)

#: What a method did on a question, as integer columns of its prediction row (0 where a method has no such
#: step), so a run that never searched, or answered from nothing, shows at a glance: ``rounds`` controller
#: rounds used (calls made, the forced one included); ``searches`` searches run against the memory;
#: ``memories_returned`` items those searches returned that the question did not hold yet; ``qa_calls`` final
#: answer calls of a workflow with its own QA step (a text-only retry is a second one); ``bypasses`` searches a
#: store served by a shortcut instead of its retrieval (MAGIC-Video's time bypass); ``checks`` / ``cells`` /
#: ``frames_seen`` SENRI-Agent's visual checks, their verifier cells and the frames those looked at
#: (``frames_seen`` is also the frames direct perception sends and those VideoARM's tools decoded);
#: ``tool_calls`` an evidence seeker's tool calls (VideoARM's, rejected ones included);
#: ``answered_without_retrieval`` 1 when the answer was given with no memory item retrieved (a memory method
#: that answered at once, or whose searches all came back empty), else 0.
BEHAVIOUR_COUNTS: tuple[str, ...] = (
    "rounds", "searches", "memories_returned", "qa_calls", "bypasses", "checks", "cells", "frames_seen",
    "tool_calls", "answered_without_retrieval",
)

#: The run-health counts a memory store books on every question that reads it (its
#: :meth:`~senri.memory.store.MemoryStore.question_counts`), each with the prediction column that says how much
#: of the question's count is the store's: the report counts a store's share once per store and video.
STORE_COUNTS: dict[str, str] = {"failed_captions": "store_failed_captions",
                                "truncated_captions": "store_truncated_captions",
                                "builder_losses": "store_builder_losses"}


@dataclass(frozen=True)
class FrameRow:
    """One target of a sampling plan in the frame store; ``jpeg`` is None when ``error`` says why."""

    video_id: str
    plan: str
    target_s: float
    frame_index: int | None
    pts_s: float | None
    deviation_s: float | None
    width: int | None
    height: int | None
    jpeg: bytes | None
    error: str | None


@dataclass(frozen=True)
class Detection:
    """One face or plate box in one frame of the anonymization stage (after the box scale factor)."""

    video_id: str
    frame_index: int
    pts_s: float
    cls: str        # face | plate
    score: float
    x0: float
    y0: float
    x1: float
    y1: float
    source: str     # detected | propagated (covered from the bracketing detections)


_POLARS_TYPES: dict[Any, pl.DataType] = {
    bytes: pl.Binary(),
    str: pl.String(),
    int: pl.Int64(),
    float: pl.Float64(),
    bool: pl.Boolean(),
}


def _polars_type(annotation: Any) -> pl.DataType:
    """Map ``T``, ``T | None`` or ``list[T]`` to the polars dtype of ``T`` (nullability is a column property in
    Arrow; a list column holds one list per row)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        non_null = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(non_null) != 1:
            raise TypeError(f"unsupported annotation {annotation!r}")
        annotation = non_null[0]
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        return pl.List(_POLARS_TYPES[item])
    return _POLARS_TYPES[annotation]


def schema_of(record: type) -> pl.Schema:
    """The Parquet/polars schema of a record dataclass, in field order."""
    hints = typing.get_type_hints(record)
    return pl.Schema({f.name: _polars_type(hints[f.name]) for f in dataclasses.fields(record)})


def nullable_columns(record: type) -> set[str]:
    hints = typing.get_type_hints(record)
    return {
        f.name
        for f in dataclasses.fields(record)
        if type(None) in typing.get_args(hints[f.name])
    }


def to_frame(rows: Iterable[Any], record: type) -> pl.DataFrame:
    """Build a typed DataFrame from record instances (an empty iterable gives an empty, typed frame)."""
    dicts = [dataclasses.asdict(r) for r in rows]
    return pl.DataFrame(dicts, schema=schema_of(record), orient="row" if not dicts else None)


def from_frame(df: pl.DataFrame, record: type) -> list[Any]:
    names = [f.name for f in dataclasses.fields(record)]
    return [record(**{k: row[k] for k in names}) for row in df.select(names).iter_rows(named=True)]


class TableError(ValueError):
    """A table does not have the columns or types its record declares."""


def check_frame(df: pl.DataFrame, record: type, source: str) -> pl.DataFrame:
    """Check ``df`` against ``record``; return it with columns in declared order (extra columns kept after)."""
    schema = schema_of(record)
    nullable = nullable_columns(record)
    problems = []
    for name, dtype in schema.items():
        if name not in df.columns:
            problems.append(f"missing column {name!r}")
        elif df.schema[name] != dtype and not (df.schema[name] == pl.Null):
            problems.append(f"column {name!r} has type {df.schema[name]}, expected {dtype}")
        elif name not in nullable and df[name].null_count():
            problems.append(f"column {name!r} has {df[name].null_count()} null value(s)")
    if problems:
        raise TableError(f"{source}: not a valid {record.__name__} table: " + "; ".join(problems))
    extra = [c for c in df.columns if c not in schema]
    return df.select([pl.col(n).cast(t) for n, t in schema.items()] + extra)


def write_table(df: pl.DataFrame, path: str | os.PathLike, record: type) -> Path:
    """Validate and write atomically (temp file + rename), so a killed job never leaves a half table."""
    path = Path(path)
    df = check_frame(df, record, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        df.write_parquet(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class TableStream:
    """Write record rows to Parquet as they come, ``batch_size`` per row group, so memory stays flat however
    long the input; the file appears atomically on a clean exit and is removed on an exception."""

    def __init__(self, path: str | os.PathLike, record: type, batch_size: int = 4096) -> None:
        self.path, self.record, self.batch_size = Path(path), record, batch_size
        self.tmp = self.path.with_name(f".{self.path.name}.tmp")
        self.schema = to_frame([], record).to_arrow().schema
        self.batch: list[Any] = []
        self.rows = 0

    def __enter__(self) -> "TableStream":
        import pyarrow.parquet as pq

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = pq.ParquetWriter(self.tmp, self.schema)
        return self

    def write(self, row: Any) -> None:
        self.batch.append(row)
        self.rows += 1
        if len(self.batch) >= self.batch_size:
            self._flush()

    def _flush(self) -> None:
        self.writer.write_table(to_frame(self.batch, self.record).to_arrow().cast(self.schema))
        self.batch.clear()

    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        try:
            if exc_type is None and (self.batch or not self.rows):
                self._flush()
            self.writer.close()
            if exc_type is None:
                self.tmp.replace(self.path)
        finally:
            self.tmp.unlink(missing_ok=True)


def read_table(path: str | os.PathLike, record: type) -> pl.DataFrame:
    return check_frame(pl.read_parquet(path), record, str(path))


@dataclass(frozen=True)
class TrackRow:
    """One sample of a video's ego-motion track (the ``track`` stage), at the track's frame rate.

    ``heading_deg`` is cumulative yaw since the start (positive = clockwise = turning right), integrated
    from the horizontal image motion through the configured field of view; ``turn_event`` names the turn
    a sample belongs to ("right 90°", "U-turn left 180°"); ``place_label`` the most prominent stationary
    sign text read at or shortly before t.
    """

    video_id: str
    t_s: float
    frame_index: int
    shift_px: float          # horizontal image motion since the previous sample, at full width
    turn_rate_deg_s: float
    heading_deg: float
    motion: float            # median optical-flow magnitude, frame widths per second
    moving: bool
    appearance_change: float  # 1 − colour-histogram correlation with the previous sample
    scene_cut: bool
    turn_event: str | None
    place_label: str | None


@dataclass(frozen=True)
class OcrRow:
    """One text line read in one frame (``reused`` when the view had not changed since the last read)."""

    video_id: str
    t_s: float
    frame_index: int
    text: str
    score: float
    x0: float
    y0: float
    x1: float
    y1: float
    reused: bool


@dataclass(frozen=True)
class MemoryRow:
    """One caption of a video's hierarchical memory (the ``memory`` stage, or a method's re-captions).

    ``created_at`` is when the caption was first computed (kept in the caption cache, so a rebuilt memory
    is byte-identical); ``heading_change_deg`` and ``place_labels`` are the clip's ego-motion context.
    """

    video_id: str
    level: str               # coarse | fine | ultra_fine
    start_s: float
    end_s: float
    fps: float
    n_frames: int
    instruction_hash: str
    text: str
    captioner: str
    created_at: str
    heading_change_deg: float | None
    place_labels: str | None
    error: str | None
    #: Frames the level's rate gave but a frame cap (``memory.max_frames``) left out (0: every frame sent).
    dropped_frames: int = 0
    #: Why the caption's model call ended: ``stop``, or ``length`` — cut at the captioner's token limit, the
    #: caption is incomplete (kept, and counted as ``truncated_captions`` by the questions that read it); null
    #: for a measuring captioner, a failed caption, or a cached caption from before it was recorded.
    finish_reason: str | None = None


@dataclass(frozen=True)
class MemoryCost:
    """What building one video's memory cost: captions computed vs reused and frames the captioner read."""

    video_id: str
    captioner: str
    level: str
    clips: int
    computed: int
    reused: int
    frames: int
    failed: int
    wall_s: float
    #: The memory preset the video got (named, or by the ``auto`` rule) and this level's clip span and rate.
    preset: str = ""
    clip_s: float = 0.0
    fps: float = 0.0
    dropped_frames: int = 0
    caption_prompt_tokens: int = 0
    caption_completion_tokens: int = 0
    caption_s: float = 0.0


@dataclass(frozen=True)
class StoreCost:
    """One row of a memory system store's cost table (``cost.parquet`` in the store's folder,
    :mod:`senri.memory.cost`): one builder role of one video's store, as :class:`MemoryCost` is for the caption
    memory. ``model_s``: the seconds its replies took when first made (a cached rebuild reports the same)."""

    system: str
    video_id: str
    role: str
    model: str
    calls: int
    failed: int
    cut: int
    prompt_tokens: int
    completion_tokens: int
    model_s: float


# ------------------------------------------------------------------------------------ WorldMM store tables
@dataclass(frozen=True)
class WorldMMEntity:
    """A named entity the extractor found in one episodic caption (WorldMM W4; ``passage_id`` is the item id)."""

    passage_id: str
    level: str
    entity: str


@dataclass(frozen=True)
class WorldMMTriple:
    """An episodic [subject, predicate, object] triple of one caption (WorldMM W5, after the invalid and
    duplicate triples are dropped)."""

    passage_id: str
    level: str
    subject: str
    predicate: str
    object: str


@dataclass(frozen=True)
class WorldMMSnapshot:
    """One triple of a cumulative semantic-memory snapshot (WorldMM W-C7): every key ``key_s`` (the end time of
    the last caption the snapshot has read, absolute seconds) holds the whole accumulated list, in order;
    ``evidence`` is the JSON list of episodic-triple ids that support the triple."""

    key_s: float
    position: int
    subject: str
    predicate: str
    object: str
    evidence: str

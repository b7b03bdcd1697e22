"""Damaged native files, as a new user would meet them (issue 58 item 3): each of the four formats is generated
from a small valid sample, damaged one way at a time and ingested. Every variant is either refused at ingest —
before any video is decoded or question answered — with the file, the record and the field named, or kept with
a named flag (and counted in the ingest report) where the record is still usable as the benchmark's tool would
use it. Nothing is rewritten silently: no position ids, no split option strings, no coerced answers, no vanished
task. A case table below lists every variant and its outcome; ``test_every_variant`` runs them all (~90, a
second)."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import polars as pl
import pytest

from senri import coverage
from senri.ingest import IngestError, ingest_dataset

LETTERS = "ABCD"


# --- valid samples ----------------------------------------------------------------------------------------------
def videomme_sample() -> list[dict]:
    """Nested layout (VM1 b): two videos, two questions each."""
    videos = []
    for v, youtube in enumerate(("-ApL8d6tX5U", "fFjv93ACGo8")):
        number = f"{v + 1:03d}"
        videos.append({"video_id": number, "duration": "short", "domain": "Knowledge",
                       "sub_category": "Humanity & History", "url": youtube, "questions": [
                           {"question_id": f"{number}-{k + 1}", "task_type": "Counting Problem",
                            "question": f"How many ({k})?", "options": [f"{L}. {k + j}" for j, L in enumerate(LETTERS)],
                            "answer": LETTERS[k], "response": ""} for k in range(2)]})
    return videos


def lvbench_sample() -> list[dict]:
    lines = []
    for v, key in enumerate(("-abcdefghij", "klmnopqrstu")):
        lines.append({"key": key, "type": "documentary", "video_info": {"duration_minutes": 40.0 + v},
                      "qa": [{"uid": 10 * v + k, "question": "What?\n" + "\n".join(f"({L}) x{j}" for j, L in
                                                                                   enumerate(LETTERS)),
                              "answer": LETTERS[k], "question_type": ["reasoning"], "time_reference": "00:01-00:02"}
                             for k in range(2)]})
    return lines


def mlvu_sample() -> dict[str, list[dict]]:
    return {folder: [{"video": f"movie_{i}.mp4", "duration": 300 + i, "question": f"What ({i})?",
                      "candidates": [f"c{j}" for j in range(4)], "answer": f"c{i}", "question_type": task}
                     for i in range(2)]
            for folder, task in (("1_plotQA", "plotQA"), ("2_needle", "findNeedle"))}


def egomem_sample() -> list[dict]:
    records = []
    for kind in ("Detail", "Event"):
        for video_id in ("A1_JAKE_DAY1", "A2_ALICE_DAY1"):
            records.append({"videoID": video_id, "question_id": str(len(records)), "type": kind,
                            "question": f"Which ({kind})?", "options": [f"{L}. o{j}" for j, L in enumerate(LETTERS)],
                            "answer": "B"})
    return records


@dataclass
class Sample:
    """A benchmark's sample written under ``root``: its question files (relative path → JSON value; a JSONL
    file is a list of lines), the video files its rule names, and the dataset config that reads it."""

    benchmark: str
    files: dict[str, Any]
    videos: list[str]
    videos_dir: str = ""  # under root

    def write(self, root: Path, raw: dict[str, bytes] | None = None) -> dict[str, Any]:
        for name, value in self.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if raw and name in raw:
                path.write_bytes(raw[name])
            elif name.endswith(".jsonl"):
                path.write_text("".join(json.dumps(line) + "\n" for line in value))
            else:
                path.write_text(json.dumps(value, indent=1))
        for video in self.videos:
            (root / video).parent.mkdir(parents=True, exist_ok=True)
            (root / video).touch()
        return {"benchmark": self.benchmark, "questions": [str(root / n) for n in self.files],
                "videos_dir": str(root / self.videos_dir), "video_ext": [".mp4"], "video_ids": [], "splits": []}

    def encoded(self, name: str) -> bytes:
        value = self.files[name]
        if name.endswith(".jsonl"):
            return "".join(json.dumps(line) + "\n" for line in value).encode()
        return json.dumps(value, indent=1).encode()


def sample(benchmark: str) -> Sample:
    if benchmark == "videomme":
        return Sample("videomme", {"videomme.json": videomme_sample()},
                      ["data/-ApL8d6tX5U.mp4", "data/fFjv93ACGo8.mp4"])
    if benchmark == "lvbench":
        return Sample("lvbench", {"video_info.meta.jsonl": lvbench_sample()},
                      ["videos/-abcdefghij.mp4", "videos/klmnopqrstu.mp4"])
    if benchmark == "mlvu":
        return Sample("mlvu", {f"MLVU/json/{folder}.json": records for folder, records in mlvu_sample().items()},
                      [f"MLVU/video/{f}/movie_{i}.mp4" for f in ("1_plotQA", "2_needle") for i in range(2)], "MLVU")
    return Sample("egomem", {"EgoMem.json": egomem_sample()}, ["videos/A1_JAKE_DAY1.mp4", "videos/A2_ALICE_DAY1.mp4"])


# --- where a format keeps its question records -------------------------------------------------------------------
def first_file(s: Sample) -> str:
    return next(iter(s.files))


def question(s: Sample, i: int = 0) -> dict:
    """The i-th question record of the sample's first file."""
    data = s.files[first_file(s)]
    if s.benchmark == "videomme":
        return [q for v in data for q in v["questions"]][i]
    if s.benchmark == "lvbench":
        return [q for v in data for q in v["qa"]][i]
    return data[i]


ID = {"videomme": "question_id", "lvbench": "uid", "mlvu": "question_id", "egomem": "question_id"}
OPTIONS = {"videomme": "options", "lvbench": None, "mlvu": "candidates", "egomem": "options"}
DURATION = {"lvbench": "video_info", "mlvu": "duration"}
#: How each format names a record in an error (the second question of the first file).
SECOND = {"videomme": "item [0] (video_id '001'), questions [1]", "lvbench": "line 1 (key '-abcdefghij'), qa [1]",
          "mlvu": "item [1]", "egomem": "item [1]"}


# --- the variants ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    benchmarks: tuple[str, ...]
    damage: Callable[[Sample], dict[str, bytes] | None]  # mutates the sample; or returns raw bytes per file
    #: ("error", field or None, words every problem line holds) | ("flag", flag) | ("note", words) | ("ok",)
    outcome: tuple


ALL = ("videomme", "lvbench", "mlvu", "egomem")
JSON_ARRAYS = ("videomme", "mlvu", "egomem")


def _set(field: str, value: Any, i: int = 1) -> Callable[[Sample], None]:
    def damage(s: Sample) -> None:
        question(s, i)[field] = value
    return damage


def _drop(field: str, i: int = 1) -> Callable[[Sample], None]:
    def damage(s: Sample) -> None:
        question(s, i).pop(field, None)
    return damage


def _raw(make: Callable[[bytes], bytes]) -> Callable[[Sample], dict[str, bytes]]:
    def damage(s: Sample) -> dict[str, bytes]:
        return {first_file(s): make(s.encoded(first_file(s)))}
    return damage


def _non_utf8(data: bytes) -> bytes:
    at = data.index(b"?")  # inside the first question's text
    return data[:at] + b"\xff" + data[at:]


def _options(s: Sample, value: Any) -> None:
    if s.benchmark == "lvbench":  # LVBench's options live in the question text (LV4): no list to damage
        question(s, 1)["question"] = value
    else:
        question(s, 1)[OPTIONS[s.benchmark]] = value


def _answer_zero(s: Sample) -> None:
    question(s, 1)["answer"] = 0


def _duplicate_id(s: Sample) -> None:
    if s.benchmark == "mlvu":  # dev files have no ids; test files do: give every record one, two the same
        for i, record in enumerate(s.files[first_file(s)]):
            record["question_id"] = f"Q_{min(i, 1)}" if i else "Q_1"
        return
    question(s, 1)[ID[s.benchmark]] = question(s, 0)[ID[s.benchmark]]


def _missing_id(s: Sample) -> None:
    if s.benchmark == "mlvu":  # a test file whose records carry ids, one without
        s.files[first_file(s)][0]["question_id"] = "PQA_0"
    question(s, 1).pop(ID[s.benchmark], None)


def _record_is_text(s: Sample) -> None:
    data = s.files[first_file(s)]
    if s.benchmark == "videomme":
        data[0]["questions"][1] = "How many?"
    elif s.benchmark == "lvbench":
        data[0]["qa"][1] = "What?"
    else:
        data[1] = "a question"


def _qa_is_text(s: Sample) -> None:
    s.files[first_file(s)][0]["qa"] = "What is shown?\n(A) a\n(B) b"


def _top_level_object(s: Sample) -> None:
    name = first_file(s)
    if s.benchmark == "lvbench":
        s.files[name][0] = [s.files[name][0]]  # a line that is a list, not a video object
    else:
        s.files[name] = {"questions": s.files[name]}


def _empty_list(s: Sample) -> None:
    s.files[first_file(s)] = []


def _nan_duration(s: Sample) -> None:
    if s.benchmark == "lvbench":
        s.files[first_file(s)][0]["video_info"]["duration_minutes"] = math.nan
    elif s.benchmark == "mlvu":
        for record in s.files[first_file(s)]:
            if record["video"] == "movie_1.mp4":
                record["duration"] = math.nan
    else:
        s.files[first_file(s)][0]["duration"] = math.nan


def _five_options(s: Sample) -> None:
    _options(s, [f"{L}. o" for L in "ABCDE"] if s.benchmark != "lvbench"
             else "Q?\n" + "\n".join(f"({L}) o{j}" for j, L in enumerate("ABCDE")))


def _lowercase_type(s: Sample) -> None:
    question(s, 2)["type"] = "event"


def _extra_field(s: Sample) -> None:
    question(s, 1)["my_notes"] = "checked"


CASES = [
    # the file as a whole
    Case("non_utf8_byte", ALL, _raw(_non_utf8), ("error", None, ["not UTF-8", "byte 0xff at byte offset", "line"])),
    Case("empty_file", ALL, _raw(lambda data: b""), ("error", None, ["is empty (0 bytes)"])),
    Case("whitespace_only_file", ALL, _raw(lambda data: b"\n\n  \n"), ("error", None, ["is empty"])),
    Case("truncated_json", JSON_ARRAYS, _raw(lambda data: data[: len(data) // 2]),
         ("error", None, ["not valid JSON at line"])),
    Case("truncated_jsonl_line", ("lvbench",), _raw(lambda data: data[: len(data) - 20]),
         ("error", None, ["line 2, column", "invalid JSON"])),
    Case("byte_order_mark", ALL, _raw(lambda data: "\ufeff".encode() + data), ("ok",)),
    Case("top_level_object", ALL, _top_level_object, ("error", None, ["expected a"])),
    Case("empty_list", ("videomme", "egomem"), _empty_list, ("error", None, ["holds no questions"])),
    Case("empty_task_file", ("mlvu",), _empty_list, ("flag", "empty_task_file")),
    # a record
    Case("record_is_text", ALL, _record_is_text, ("error", None, ["expected a question object, got the text"])),
    Case("qa_is_text", ("lvbench",), _qa_is_text, ("error", "qa", ["expected a list of question objects"])),
    Case("duplicate_id", ALL, _duplicate_id, ("error", "id", ["duplicate question id", "first at"])),
    Case("missing_id", ("videomme", "lvbench", "egomem", "mlvu"), _missing_id, ("error", "id", ["missing"])),
    Case("null_id", ("videomme", "lvbench", "egomem"), lambda s: _set(ID[s.benchmark], None)(s),
         ("error", "id", ["is null"])),
    Case("empty_id", ("videomme", "lvbench", "egomem"), lambda s: _set(ID[s.benchmark], " ")(s),
         ("error", "id", ["is empty"])),
    Case("id_is_a_list", ("videomme", "lvbench", "egomem"), lambda s: _set(ID[s.benchmark], [1])(s),
         ("error", "id", ["expected text or an integer, got a list"])),
    Case("answer_integer_zero", ALL, _answer_zero, ("error", "answer", ["expected text, got the number 0"])),
    Case("answer_null", ALL, _set("answer", None), ("error", "answer", ["is null"])),
    Case("answer_missing", ALL, _drop("answer"), ("error", "answer", ["missing"])),
    Case("answer_unknown_letter", ("videomme", "lvbench", "egomem"), _set("answer", "Z"),
         ("flag", "answer_not_an_option")),
    Case("answer_lower_case", ("videomme", "lvbench", "egomem"), _set("answer", "b"),
         ("flag", "answer_not_an_option")),
    Case("answer_text_in_no_candidate", ("mlvu",), _set("answer", "nowhere"),
         ("flag", "answer_text_not_in_candidates")),
    Case("question_null", ALL, _set("question", None), ("error", "question", ["is null"])),
    Case("question_a_number", ALL, _set("question", 7), ("error", "question", ["expected text, got the number 7"])),
    Case("options_one_string", JSON_ARRAYS, lambda s: _options(s, "A. one\nB. two\nC. three\nD. four"),
         ("error", "options", ["expected a list of option texts, got the text"])),
    Case("options_null", JSON_ARRAYS, lambda s: _options(s, None), ("error", "options", ["is null"])),
    Case("one_option", JSON_ARRAYS, lambda s: _options(s, ["A. only"]), ("error", "options", ["1 option(s)"])),
    Case("seven_options", JSON_ARRAYS, lambda s: _options(s, [f"{L}. o" for L in "ABCDEFG"]),
         ("error", "options", ["7 option(s)", "2 to 6"])),
    Case("option_null", JSON_ARRAYS, lambda s: _options(s, ["A. a", None, "C. c", "D. d"]),
         ("error", "options", ["every option must be text", "B is"])),
    Case("five_options", ("videomme", "egomem"), _five_options, ("flag", "option_count")),
    Case("lvbench_no_option_lines", ("lvbench",), lambda s: _options(s, "What, no options?"), ("flag", "no_options")),
    Case("repeated_option", ("videomme", "egomem"), lambda s: _options(s, ["A. same", "B. same", "C. c", "D. d"]),
         ("flag", "repeated_option")),
    Case("extra_field", ALL, _extra_field, ("note", ["fields not read: my_notes (1 record(s))"])),
    Case("nan_duration", ("lvbench", "mlvu"), _nan_duration, ("flag", "bad_duration")),
    Case("duration_a_number", ("videomme",), _nan_duration, ("error", "duration", ["expected text, got the number NaN"])),
    Case("lower_case_type", ("egomem",), _lowercase_type, ("error", "type", ["'event' is not one of Event, Detail",
                                                                            "case matters"])),
    Case("type_missing", ("egomem",), _drop("type"), ("error", "type", ["missing"])),
    Case("video_missing_field", ("mlvu", "egomem"), lambda s: _drop("video" if s.benchmark == "mlvu" else "videoID")(s),
         ("error", "video", ["missing"])),
    Case("question_type_a_string", ("lvbench",), _set("question_type", "reasoning"), ("flag", "question_type_not_a_list")),
    Case("task_type_missing", ("videomme",), _drop("task_type"), ("flag", "missing_field")),
]
VARIANTS = [(case, benchmark) for case in CASES for benchmark in case.benchmarks]


def test_the_matrix_covers_every_variant_the_issue_names():
    names = {(c.name, b) for c, b in VARIANTS}
    for name in ("non_utf8_byte", "duplicate_id", "answer_integer_zero", "empty_file", "byte_order_mark",
                 "top_level_object", "extra_field", "answer_unknown_letter"):
        assert any(n == name for n, _ in names), name
    assert {("record_is_text", "videomme"), ("qa_is_text", "lvbench"), ("missing_id", "egomem"),
            ("lower_case_type", "egomem"), ("options_one_string", "videomme"), ("empty_task_file", "mlvu"),
            ("one_option", "mlvu"), ("seven_options", "egomem"), ("nan_duration", "mlvu")} <= names
    assert len(VARIANTS) >= 76  # the issue tried 76


def _ingest(s: Sample, root: Path, raw: dict[str, bytes] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    return ingest_dataset(s.write(root, raw))


@pytest.fixture(scope="module")
def valid_tables(tmp_path_factory) -> dict[str, pl.DataFrame]:
    """Each sample's question table undamaged (and a check that every sample is valid and quirk-free)."""
    tables = {}
    for benchmark in ALL:
        tables[benchmark], report = _ingest(sample(benchmark), tmp_path_factory.mktemp(benchmark))
        assert report.height == 0 and tables[benchmark].height == 4, report
    return tables


@pytest.mark.parametrize("case,benchmark", VARIANTS, ids=[f"{b}-{c.name}" for c, b in VARIANTS])
def test_every_variant(tmp_path, valid_tables, case, benchmark):
    valid = sample(benchmark)
    table0 = valid_tables[benchmark]
    s = copy.deepcopy(valid)
    raw = case.damage(s)
    root = tmp_path / "damaged"
    kind = case.outcome[0]
    if kind == "error":
        with pytest.raises(IngestError) as caught:
            _ingest(s, root, raw)
        field, words = case.outcome[1], case.outcome[2]
        problems = caught.value.problems
        assert problems, "an error names its problems"
        for problem in problems:
            text = str(problem)
            assert str(root) in problem.file and problem.file in text, text  # the file
            for word in words:
                assert word in text, (word, text)
        if field is not None:  # the record (index and id where it has one) and the field
            expected = {"id": ID[benchmark], "options": OPTIONS[benchmark] or "question",
                        "video": "video" if benchmark == "mlvu" else "videoID"}.get(field, field)
            assert any(p.field == expected and p.record for p in problems), [str(p) for p in problems]
        if case.name in ("answer_integer_zero", "options_one_string", "missing_id", "null_id"):
            assert any(p.record.startswith(SECOND[benchmark]) for p in problems), [str(p) for p in problems]
        return
    table, report = _ingest(s, root, raw)
    if kind == "ok":
        assert table.drop("flags").equals(table0.drop("flags")) and table["qid"].to_list() == table0["qid"].to_list()
        return
    if kind == "note":
        notes = report.filter(pl.col("flag") == "file_note")["detail"].to_list()
        assert any(all(w in n for w in case.outcome[1]) for n in notes), notes
        assert table["qid"].to_list() == table0["qid"].to_list()
        return
    flag = case.outcome[1]
    rows = report.filter(pl.col("flag") == flag)
    assert rows.height >= 1, report
    if flag == "empty_task_file":  # stated: the set is marked partial, the other task still read
        assert rows["file"].to_list() == [str(root / first_file(s))]
        cover = coverage.coverage(table, report)
        assert cover.partial and "1_plotQA.json: the task file holds no questions" in cover.line()
        assert table.height == 2 and set(table["categories"].list.first()) == {"needle"}
        return
    flagged = table.filter(pl.col("flags").list.contains(flag))
    assert flagged.height >= 1 and set(flagged["qid"]) <= set(table0["qid"])  # the record keeps its id
    assert table["qid"].to_list() == table0["qid"].to_list()                  # and every other record too
    kept, left = coverage.flag_counts(table, report)
    assert kept[flag] == rows.height and flag not in left


def test_an_mlvu_task_file_that_is_a_folder_or_a_folder_without_task_files_is_refused(tmp_path):
    s = sample("mlvu")
    dataset = s.write(tmp_path)
    folder = tmp_path / "MLVU" / "json" / "3_ego.json"
    folder.mkdir()
    with pytest.raises(IngestError, match=r"3_ego.json: is a folder, not a task file"):
        ingest_dataset({**dataset, "questions": [*dataset["questions"], str(folder)]})
    empty = tmp_path / "MLVU" / "nothing"
    empty.mkdir()
    with pytest.raises(IngestError, match=r"nothing: folder holds no \*.json task file"):
        ingest_dataset({**dataset, "questions": [str(empty)]})
    every_file_empty = {"1_plotQA": [], "2_needle": []}
    for name, records in every_file_empty.items():
        (tmp_path / "MLVU" / "json" / f"{name}.json").write_text(json.dumps(records))
    with pytest.raises(IngestError, match="hold no questions"):
        ingest_dataset(dataset)


def test_egomem_positions_are_never_shifted_and_a_seventh_event_question_has_no_subtype(tmp_path):
    records = [{"videoID": "A1_JAKE_DAY1", "question_id": str(i), "type": "Event", "question": "Q?",
                "options": ["A. a", "B. b", "C. c", "D. d"], "answer": "A"} for i in range(7)]
    path = tmp_path / "EgoMem.json"
    path.write_text(json.dumps(records))
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "A1_JAKE_DAY1.mp4").touch()
    table, report = ingest_dataset({"benchmark": "egomem", "questions": [str(path)], "videos_dir": str(tmp_path),
                                    "video_ext": [".mp4"]})
    subtypes = [next((c for c in cats if c.startswith("subtype=")), None) for cats in table["categories"].to_list()]
    assert subtypes[:6] == ["subtype=Event Order", "subtype=Temporal Judge", "subtype=Temporal Align",
                            "subtype=Event Context", "subtype=Event Rectification", "subtype=Event Reconstruction"]
    assert subtypes[6] is None and report.filter(pl.col("flag") == "no_subtype")["record"].to_list() == ["6"]


@pytest.mark.parametrize("benchmark", ALL)
def test_unknown_split_or_video_id_is_refused_listing_the_valid_ones(tmp_path, benchmark):
    s = sample(benchmark)
    dataset = s.write(tmp_path)
    with pytest.raises(IngestError) as caught:
        ingest_dataset({**dataset, "splits": ["lnog"]})
    text = str(caught.value)
    assert "dataset.splits" in text and "'lnog'" in text
    assert {"videomme": "short, medium, long", "lvbench": "short, medium, long", "mlvu": "short, medium, long, "
            "extra_long", "egomem": "no split labels"}[benchmark] in text
    table, _ = ingest_dataset(dataset)
    real = table["video_id"][0]
    with pytest.raises(IngestError) as caught:
        ingest_dataset({**dataset, "video_ids": [real, real[:-1] + "#"]})
    text = str(caught.value)
    n_videos = table["video_id"].n_unique()
    assert "dataset.video_ids" in text and repr(real) in text.partition("did you mean")[2] and f"the files name {n_videos} videos" in text
    only, report = ingest_dataset({**dataset, "video_ids": [real]})
    assert set(only["video_id"]) == {real}
    assert coverage.coverage(only, report).partial  # a selection is stated and marks the tables
    assert (f"dataset.video_ids (1 id(s)) keep {only.height} of the files' 4 questions"
            in coverage.coverage(only, report).line())


def test_a_damaged_native_file_plans_no_video_and_the_ingest_job_names_the_problem(tmp_path):
    """The planner reads the native files too (video ids, presets): a damaged file must not stop it with a
    traceback; it plans nothing and the ingest job reports the problems."""
    from senri import workflow

    s = sample("egomem")
    _answer_zero(s)
    dataset = s.write(tmp_path)
    cfg = {"dataset": {**dataset, "name": "egomem", "subset": None}, "memory": {"preset": "auto"}}
    assert workflow.planned_video_ids(cfg) == []


def test_a_videomme_parquet_that_is_not_parquet_or_holds_damaged_rows_is_refused_naming_row_and_field(tmp_path):
    """The official layout (one row per question): the same checks on its rows as on the nested JSON."""
    rows = [{"video_id": v["video_id"], "duration": v["duration"], "domain": v["domain"],
             "sub_category": v["sub_category"], "videoID": v["url"], **{k: q[k] for k in
                                                                      ("question_id", "task_type", "question", "answer")},
             "options": "\n".join(q["options"])}  # options as one string
            for v in videomme_sample() for q in v["questions"]]
    path = tmp_path / "videomme" / "test-00000-of-00001.parquet"
    path.parent.mkdir()
    pl.DataFrame(rows).write_parquet(path)
    dataset = {"benchmark": "videomme", "questions": [str(path)], "videos_dir": str(tmp_path), "video_ext": [".mp4"]}
    with pytest.raises(IngestError) as caught:
        ingest_dataset(dataset)
    assert len(caught.value.problems) == 4 and str(caught.value.problems[1]) == (
        f"{path}, row [1] (question_id '001-2'), field 'options': expected a list of option texts, got the text "
        '"A. 1\\nB. 2\\nC. 3\\nD. 4"')
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(IngestError, match=r"test-00000-of-00001.parquet: cannot be read as Parquet"):
        ingest_dataset(dataset)

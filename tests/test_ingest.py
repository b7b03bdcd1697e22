import json
from pathlib import Path

import polars as pl
import pytest

from senri.cli import main
from senri.ingest import IngestError, ingest


def _record(qid, **changes):
    record = {"video_id": "demo_01", "qid": qid, "task_type": "L", "question": "Where?",
              "options": ["A1", "B1", "C1", "D1"], "answer": "B"}
    record.update(changes)
    return record


@pytest.fixture
def videos_dir(tmp_path, small_demo):
    folder = tmp_path / "videos"
    folder.mkdir()
    (folder / "demo_01.mp4").symlink_to(small_demo["videos"]["demo_01"])
    return folder


def _write_all_formats(tmp_path, records):
    flat = [{k: v for k, v in r.items() if k != "options"} | dict(zip(["option_a", "option_b", "option_c", "option_d"], r["options"]))
            for r in records]
    paths = {
        "json": tmp_path / "q.json",
        "jsonl": tmp_path / "q.jsonl",
        "csv": tmp_path / "q.csv",
        "parquet": tmp_path / "q.parquet",
    }
    paths["json"].write_text(json.dumps({"questions": records}))
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in records))
    pl.DataFrame(flat).write_csv(paths["csv"])
    pl.DataFrame(records).write_parquet(paths["parquet"])
    return paths


def test_all_formats_give_the_same_table(tmp_path, videos_dir):
    records = [_record("q1"), _record("q2", task_type="TER", answer="D", options=["A. x", "B. y", "C. z", "D. w"])]
    tables = [ingest([p], videos_dir, [".mp4"]) for p in _write_all_formats(tmp_path, records).values()]
    for table in tables[1:]:
        assert table.equals(tables[0])
    row = tables[0].filter(pl.col("qid") == "q2").row(0, named=True)
    assert row["direction"] == "SE" and row["option_a"] == "x" and row["option_d"] == "w"  # letter prefixes dropped


def test_every_problem_reported_at_once_with_file_row_field(tmp_path, videos_dir):
    records = [
        _record("q1"),
        _record("q1"),  # duplicate qid
        _record("q3", options=["a", "b", "c"]),  # three options
        _record("q4", answer="E"),
        _record("q5", task_type="XX"),
        _record("q6", video_id="no_such_video"),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "{not json\n")
    with pytest.raises(IngestError) as err:
        ingest([path], videos_dir, [".mp4"])
    found = {(p.row, p.field) for p in err.value.problems}
    assert found == {(2, "qid"), (3, "options"), (4, "answer"), (5, "task_type"), (6, "video_id"), (7, None)}
    message = str(err.value)
    assert f"{path}, row 3, field 'options': expected exactly 4 options, got 3" in message
    assert "duplicate qid 'q1' (first at" in message and "not found" in message


def test_csv_problems_name_rows_and_fields(tmp_path, videos_dir):
    path = tmp_path / "q.csv"
    pl.DataFrame([{"video_id": "demo_01", "qid": "1", "task_type": "L", "question": "", "option_a": "a",
                   "option_b": "b", "option_c": "c", "option_d": "", "answer": "a"}]).write_csv(path)
    with pytest.raises(IngestError) as err:
        ingest([path], videos_dir, [".mp4"])
    assert {(p.row, p.field) for p in err.value.problems} == {(1, "question"), (1, "options"), (1, "answer")}


def test_cli_writes_nothing_when_validation_fails(tmp_path, videos_dir, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([_record("q1", answer="Z")]))
    out = tmp_path / "questions.parquet"
    code = main(["ingest", "--questions", str(bad), "--videos-dir", str(videos_dir), "--out", str(out)])
    assert code == 1 and not out.exists()
    assert "field 'answer'" in capsys.readouterr().err


def test_cli_ingests_the_demo_and_writes_its_config(tmp_path, small_demo):
    out = tmp_path / "questions.parquet"
    code = main(["ingest", "--questions", str(small_demo["questions"]), "--videos-dir",
                 str(small_demo["videos_dir"]), "--out", str(out)])
    assert code == 0
    table = pl.read_parquet(out)
    assert table.height == 32 and set(table["video_id"]) == {"demo_01", "demo_02"}
    assert (tmp_path / "questions.config.yaml").exists()


def test_unreadable_and_unsupported_files(tmp_path, videos_dir):
    (tmp_path / "q.txt").write_text("x")
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(IngestError) as err:
        ingest([tmp_path / "q.txt", tmp_path / "broken.json", tmp_path / "missing.json"], videos_dir, [".mp4"])
    assert len(err.value.problems) == 3


def test_identical_options_and_inverted_evidence_windows_are_rejected(tmp_path, videos_dir):
    records = [
        _record("q1", options=["left", "right", " Left ", "ahead"]),  # A and C read the same
        _record("q2", evidence_start_s=12.0, evidence_end_s=3.5),  # ends before it starts
        _record("q3", evidence_start_s=3.5, evidence_end_s=12.0),  # fine
    ]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(IngestError) as err:
        ingest([path], videos_dir, [".mp4"])
    assert {(p.row, p.field) for p in err.value.problems} == {(1, "options"), (2, "evidence_start_s")}
    message = str(err.value)
    assert "options A and C are identical" in message and "evidence window ends before it starts" in message


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_a_byte_order_mark_is_accepted_in_every_text_format(tmp_path, videos_dir, fmt):
    path = _write_all_formats(tmp_path, [_record("q1")])[fmt]
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert ingest([path], videos_dir, [".mp4"])["qid"].to_list() == ["q1"]


# ------------------------------------------------------------------------------------ native benchmarks
NATIVE = ("videomme", "lvbench", "mlvu", "egomem")


@pytest.fixture(scope="module")
def native_instances(tmp_path_factory) -> dict:
    """Each native benchmark's generated instance (empty video files named by its file rule: planning and
    ingest only) and its config composed with the shipped config/dataset/<benchmark>.yaml, once per module."""
    from senri import config as cfgmod
    from senri.benchmarks.instance import InstanceSize, write_instance

    from omegaconf import OmegaConf

    instances = {}
    base = None
    for benchmark in NATIVE:
        root = tmp_path_factory.mktemp(benchmark)
        write_instance(benchmark, root, InstanceSize(videos=3 if benchmark == "videomme" else 2, encode=False))
        if base is None:  # one Hydra compose; the other dataset files are resolved alike and the whole validated
            base = cfgmod.compose(f"dataset={benchmark} dataset.root={root}")
            instances[benchmark] = (root, base)
            continue
        dataset = OmegaConf.load(cfgmod.CONFIG_DIR / "dataset" / f"{benchmark}.yaml")
        dataset.root = str(root)
        cfg = {**base, "dataset": OmegaConf.to_container(OmegaConf.create({"dataset": dataset}), resolve=True)["dataset"]}
        cfgmod.validate(cfg)
        instances[benchmark] = (root, cfg)
    return instances


@pytest.mark.parametrize("benchmark", NATIVE)
def test_a_native_instance_ingests_with_its_quirks_reported_and_plans_by_its_file_rule(native_instances, benchmark):
    from senri import config as cfgmod
    from senri import workflow
    from senri.ingest import ingest_dataset

    root, cfg = native_instances[benchmark]
    table, report = ingest_dataset(cfgmod.stage_slice(cfg, "ingest"))
    assert set(table["benchmark"]) == {benchmark} and table["qid"].n_unique() == table.height
    flagged = table.filter(pl.col("flags").list.len() > 0)
    assert flagged.height == 1 and report.filter(pl.col("flag") != "file_note")["record"].to_list()[0] == flagged["qid"][0]
    ids = workflow.planned_video_ids(cfg)
    assert sorted(ids) == sorted(table["video_id"].unique())
    for video_id in ids:
        assert Path(workflow.video_path(cfg, video_id)).is_file()
        assert Path(workflow.video_path(cfg, video_id)).is_relative_to(root)
        preset = workflow.video_preset(cfg, video_id)
        assert preset in cfg["memory"]["presets"] and workflow.preset_args(cfg, video_id) == ["--preset", preset]
    named = {**cfg, "memory": {**cfg["memory"], "preset": "mlvu_long"}}
    assert workflow.video_preset(named, ids[0]) is None  # a preset named in the config wins


def test_videomme_ids_with_dashes_plan_per_split_presets_and_a_missing_video_is_left_out_and_reported(
        native_instances):
    from senri import config as cfgmod
    from senri import coverage, workflow
    from senri.ingest import ingest_dataset

    root, cfg = native_instances["videomme"]
    assert [workflow.video_preset(cfg, v) for v in workflow.planned_video_ids(cfg)] == [
        "videomme_short", "videomme_medium", "videomme_long"]
    (root / "data" / "fFjv93ACGo8.mp4").rename(root / "fFjv93ACGo8.mp4")
    try:
        table, report = ingest_dataset(cfgmod.stage_slice(cfg, "ingest"))
    finally:
        (root / "fFjv93ACGo8.mp4").rename(root / "data" / "fFjv93ACGo8.mp4")
    assert table["video_id"].unique(maintain_order=True).to_list() == ["-ApL8d6tX5U", "_tvmjsKXTu8"]
    missing = report.filter(pl.col("flag") == "video_missing")  # one row per left-out question, with the reason
    assert missing.select("record", "video_id").rows() == [("003-1", "fFjv93ACGo8"), ("003-2", "fFjv93ACGo8")]
    assert coverage.coverage(table, report).line() == ("4 of 6 questions (2 of 3 videos) — 2 questions on missing "
                                                       "videos left out")
    subset, _ = ingest_dataset({**cfgmod.stage_slice(cfg, "ingest"), "video_ids": ["_tvmjsKXTu8"]})
    assert subset["qid"].to_list() == ["002-1", "002-2"]


def test_cli_ingest_of_a_native_benchmark_writes_the_report_and_refuses_the_template_with_its_position(
        native_instances, tmp_path, capsys):
    from reference import reference_file
    from senri import config as cfgmod

    root, cfg = native_instances["egomem"]
    out = tmp_path / "results" / "questions.parquet"
    ingest_slice = cfgmod.stage_slice(cfg, "ingest")
    assert main(["ingest", "--config", cfgmod.canonical_json(ingest_slice), "--out", str(out)]) == 0
    report = pl.read_parquet(tmp_path / "results" / "questions.report.parquet")
    assert report.select("record", "flag").rows() == [("4", "answer_not_an_option")]
    questions = pl.read_parquet(out)
    assert questions.filter(pl.col("qid") == "4")["answer"].to_list() == ["E"]  # kept as released
    template = reference_file("benchmarks/videomme/output_test_template.json")
    videomme = {**cfgmod.stage_slice(native_instances["videomme"][1], "ingest"), "questions": [str(template)]}
    code = main(["ingest", "--config", cfgmod.canonical_json(videomme), "--out", str(tmp_path / "vm.parquet")])
    assert code == 1 and "line 20, column 13" in capsys.readouterr().err and not (tmp_path / "vm.parquet").exists()


def test_dataset_splits_keeps_only_the_questions_and_videos_of_those_split_labels(native_instances):
    """``dataset.splits=[long]``: VideoLucy's Fig. 6 runs on Video-MME's long split only; ingest and the planner
    keep the same questions' videos."""
    from senri import config as cfgmod
    from senri import workflow
    from senri.ingest import ingest_dataset

    _, cfg = native_instances["videomme"]
    long_only = {**cfg, "dataset": {**cfg["dataset"], "splits": ["long"]}}
    cfgmod.validate(long_only)
    table, _ = ingest_dataset(cfgmod.stage_slice(long_only, "ingest"))
    assert set(table["split"]) == {"long"} and table.height > 0
    assert workflow.planned_video_ids(long_only) == table["video_id"].unique(maintain_order=True).to_list()
    both = {**cfg, "dataset": {**cfg["dataset"], "splits": ["short", "long"]}}
    assert [workflow.video_preset(both, v) for v in workflow.planned_video_ids(both)] == ["videomme_short",
                                                                                         "videomme_long"]


def test_a_root_with_spaces_and_non_ascii_characters_ingests_and_plans_with_every_path_quoted(tmp_path, caplog):
    """Issue 58 item 4: ``overrides="dataset=videomme dataset.root='/data/My Vidéos'"`` (the README's quoting, the
    value in single quotes) composes, ingests, states the partial download, and every planned shell command
    holds the path as one quoted word (``snakemake -n -p``; no job runs)."""
    import logging
    import shlex

    from dry_run import plan
    from senri import config as cfgmod
    from senri.benchmarks.instance import InstanceSize, write_instance

    root = tmp_path / "My Vidéos ü"
    write_instance("videomme", root, InstanceSize(videos=3, encode=False))
    (root / "data" / "fFjv93ACGo8.mp4").unlink()  # a partial download: 2 of 3 videos
    cfg = cfgmod.compose(f"dataset=videomme dataset.root='{root}'")
    assert cfg["dataset"]["videos_dir"] == str(root)
    accented = tmp_path / "Vidéos"  # without a space no quotes are needed (Hydra's lexer alone would refuse "é")
    assert cfgmod.compose(f"dataset=videomme dataset.root={accented}")["dataset"]["root"] == str(accented)
    out = tmp_path / "results" / "questions.parquet"
    with caplog.at_level(logging.INFO, logger="senri"):
        assert main(["ingest", "--config", cfgmod.canonical_json(cfgmod.stage_slice(cfg, "ingest")),
                     "--out", str(out)]) == 0
    assert pl.read_parquet(out).height == 4
    assert "4 of 6 questions (2 of 3 videos) — 2 questions on missing videos left out" in caplog.text
    # and a damaged native file (an answer given as the number 0): the DAG still builds, planning no video, and
    # only the ingest job — which names the problem — stands before the rest
    damaged = tmp_path / "damaged"
    egomem = write_instance("egomem", damaged, InstanceSize(videos=1, encode=False))
    records = json.loads(egomem.read_text())
    records[1]["answer"] = 0
    egomem.write_text(json.dumps(records))
    plans = plan(tmp_path / "plan", {"root": f"dataset=videomme dataset.root='{root}' method=[random] model=[]",
                                     "damaged": f"dataset=egomem dataset.root={damaged} method=[random] model=[]"},
                 commands=True)
    planned = plans["root"]
    assert "failed:" not in planned and "ingest" in planned
    assert "failed:" not in plans["damaged"] and "rule ingest:" in plans["damaged"]
    assert "rule probe:" not in plans["damaged"] and "rule answer:" not in plans["damaged"]
    commands = [line.partition("Shell command: ")[2] for line in planned.splitlines() if "Shell command: " in line]
    with_root = [c for c in commands if "Vidéos" in c]
    assert len(with_root) >= 3  # ingest and one anonymize job per present video
    for command in with_root:
        words = shlex.split(command.partition(" > ")[0])
        assert any(str(root) in word for word in words) and not any(w.endswith("My") for w in words), command


def test_a_drawn_subset_of_a_partial_download_lists_every_left_out_question_and_counts_flags_apart(
        native_instances, tmp_path, caplog):
    """Left-out questions are rows of the ingest report with their reason (missing video, not drawn by
    dataset.subset); the flag counts printed are those of the kept questions, the left-out ones said apart."""
    import logging

    from senri import config as cfgmod
    from senri.coverage import coverage, flag_counts

    root, cfg = native_instances["videomme"]  # 3 videos × 2 questions; 001-1 has a repeated option
    (root / "data" / "fFjv93ACGo8.mp4").rename(root / "fFjv93ACGo8.mp4")
    ingest_slice = {**cfgmod.stage_slice(cfg, "ingest"), "subset": {"n": 2, "seed": 1}}
    out = tmp_path / "questions.parquet"
    try:
        with caplog.at_level(logging.INFO, logger="senri"):
            assert main(["ingest", "--config", cfgmod.canonical_json(ingest_slice), "--out", str(out)]) == 0
    finally:
        (root / "fFjv93ACGo8.mp4").rename(root / "data" / "fFjv93ACGo8.mp4")
    table, report = pl.read_parquet(out), pl.read_parquet(tmp_path / "questions.report.parquet")
    reasons = dict(report.filter(pl.col("flag").is_in(["video_missing", "not_drawn"])).select("record", "flag").rows())
    assert sorted(reasons) == sorted({"001-1", "001-2", "002-1", "002-2", "003-1", "003-2"} - set(table["qid"]))
    assert {reasons[q] for q in ("003-1", "003-2")} == {"video_missing"} and table.height == 2
    line = coverage(table, report).line()
    assert line.startswith("2 of 6 questions (") and "— 2 questions on missing videos left out" in line
    assert "also left out: 2 not drawn by dataset.subset" in line and line in caplog.text
    kept, left = flag_counts(table, report)
    in_table = "001-1" in table["qid"].to_list()
    assert kept == ({"repeated_option": 1} if in_table else {}) and left == ({} if in_table else {"repeated_option": 1})
    assert ("flags on left-out questions (not in the tables): repeated_option 1" in caplog.text) != in_table

"""dataset.subset: a seeded question subset, the same for the same seed whatever the benchmark or file order."""

import json

import polars as pl
import pytest
import yaml

from senri.cli import main
from senri.subset import Subset, SubsetError, apply_subset, draw_qids, question_video_pairs, subset_video_ids

#: Question-id shapes of the benchmarks the papers draw subsets from (LVBench's numeric uids, EgoMem's
#: video-prefixed ids, SENRI-format ids): the draw depends on the ids only, never on their shape or order.
BENCHMARK_QIDS = {
    "lvbench": [str(uid) for uid in range(1, 1550)],
    "egomem": [f"ego_{v:02d}_{q:03d}" for v in range(1, 43) for q in range(12)],
    "senri": [f"demo_{v:02d}_q{q:02d}" for v in range(1, 9) for q in range(16)],
}


@pytest.mark.parametrize("benchmark", sorted(BENCHMARK_QIDS))
def test_the_same_seed_draws_the_same_questions_whatever_the_order(benchmark):
    qids = BENCHMARK_QIDS[benchmark]
    subset = Subset(n=42, seed=3)
    drawn = draw_qids(qids, subset)
    assert len(drawn) == len(set(drawn)) == 42 and set(drawn) <= set(qids)
    assert draw_qids(list(reversed(qids)), subset) == drawn  # file order does not matter
    assert draw_qids(qids + qids[:5], subset) == drawn  # nor a repeated id
    assert draw_qids(qids, Subset(n=42, seed=4)) != drawn  # another seed, another subset


def test_the_lvbench_draw_is_pinned():
    """The recorded draw of Table 13's size: a change of the drawing rule changes published subsets, so it
    must show here."""
    drawn = draw_qids(BENCHMARK_QIDS["lvbench"], Subset(n=200, seed=0))
    assert len(drawn) == 200 and drawn[:6] == ["100", "1023", "1028", "1038", "104", "1047"]


def test_more_questions_than_the_files_hold_is_an_error_naming_the_key():
    with pytest.raises(SubsetError, match=r"config\.dataset\.subset\.n: 5 questions asked, .* hold 3"):
        draw_qids(["a", "b", "c"], Subset(n=5, seed=0))


def test_apply_subset_keeps_row_order_and_returns_the_ids():
    table = pl.DataFrame({"qid": ["q3", "q1", "q2", "q4"], "video_id": ["v2", "v1", "v1", "v2"]})
    cut, drawn = apply_subset(table, Subset(n=2, seed=1))
    assert cut["qid"].to_list() == [q for q in table["qid"] if q in drawn] and len(drawn) == 2
    assert apply_subset(table, None) == (table, None)
    assert Subset.from_config(None) is None and Subset.from_config({"n": 2, "seed": 1}) == Subset(2, 1)


def test_the_planner_plans_the_drawn_questions_videos_only(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"qid": f"q{i}", "video_id": f"v{i % 3}"}) + "\n" for i in range(9)))
    pairs = question_video_pairs([str(path)])
    assert len(pairs) == 9
    subset = Subset(n=2, seed=5)
    drawn = draw_qids([q for q, _ in pairs], subset)
    assert set(subset_video_ids(pairs, subset)) == {v for q, v in pairs if q in drawn}


def test_cli_ingest_draws_and_records_the_subset(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    for video in ("v1", "v2"):
        (videos / f"{video}.mp4").write_bytes(b"")  # ingest checks that the file is there, never reads it
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"video_id": f"v{1 + i % 2}", "qid": f"q{i}", "task_type": "L",
                                             "question": "Where?", "options": ["a", "b", "c", "d"], "answer": "B"})
                                 + "\n" for i in range(8)))
    stage = {"name": "x", "questions": [str(questions)], "videos_dir": str(videos), "video_ext": [".mp4"],
             "subset": {"n": 5, "seed": 11}}
    outs = []
    for run in ("a", "b"):
        out = tmp_path / run / "questions.parquet"
        assert main(["ingest", "--config", json.dumps(stage), "--out", str(out)]) == 0
        outs.append(out)
    first, second = (pl.read_parquet(o) for o in outs)
    assert first.height == 5 and first.equals(second)
    recorded = yaml.safe_load((tmp_path / "a" / "questions.config.yaml").read_text())["config"]
    assert recorded["subset"] == {"n": 5, "seed": 11} and recorded["subset_qids"] == sorted(first["qid"])
    too_many = {**stage, "subset": {"n": 9, "seed": 11}}
    assert main(["ingest", "--config", json.dumps(too_many), "--out", str(tmp_path / "c.parquet")]) == 2
    assert not (tmp_path / "c.parquet").exists()

import subprocess
import sys
import types
from collections import Counter

import polars as pl
import pytest

from senri.answer import answer_video
from senri.ingest import ingest
from senri.methods import METHODS
from senri.methods.base import Method, MethodAnswer
from senri.methods.random import seeded_letter
from senri.probe import probe
from senri.records import Prediction, schema_of

RANDOM = {"seed": 0, "method": {"name": "random", "implementation": "random", "approach": "baseline",
                                "uses_model": False}, "model": {"name": "none", "backend": "none"}}


@pytest.fixture(scope="module")
def demo_tables(small_demo):
    questions = ingest([small_demo["questions"]], small_demo["videos_dir"], [".mp4"])
    return questions, probe(small_demo["videos"]["demo_01"], "demo_01")


def test_random_is_seeded_per_qid_and_uniform():
    assert seeded_letter(0, "q1") == seeded_letter(0, "q1")
    counts = Counter(seeded_letter(0, f"q{i}") for i in range(4000))
    assert set(counts) == {"A", "B", "C", "D"} and all(900 <= c <= 1100 for c in counts.values())
    assert [seeded_letter(0, f"q{i}") for i in range(50)] != [seeded_letter(1, f"q{i}") for i in range(50)]


def test_random_run_fulfils_the_contract_and_ignores_question_order(demo_tables):
    questions, video = demo_tables
    first = answer_video(questions, video, RANDOM)
    shuffled = answer_video(questions.sample(fraction=1.0, shuffle=True, seed=3), video, RANDOM)
    assert first.schema == schema_of(Prediction)
    assert set(first["video_id"]) == {"demo_01"} and first.height == 16
    assert first.sort("qid")["pred"].to_list() == shuffled.sort("qid")["pred"].to_list()
    assert (first["correct"] == (first["pred"] == first["answer"])).all()
    assert first["parse_ok"].all() and first["error"].is_null().all()


class _Flaky(Method):
    approach = "baseline"
    uses_model = False

    def answer(self, question):
        if question.qid.endswith("_L_1"):
            raise RuntimeError("backend exploded")
        if question.qid.endswith("_L_2"):
            return MethodAnswer(pred=None, raw_output="I think it is the bakery", parse_ok=False)
        return MethodAnswer(pred=question.answer, raw_output=question.answer, parse_ok=True, n_llm_calls=1)


def test_a_failing_question_is_recorded_and_the_run_goes_on(demo_tables, monkeypatch):
    module = types.ModuleType("senri_test_flaky")
    module.Flaky = _Flaky
    monkeypatch.setitem(sys.modules, "senri_test_flaky", module)
    monkeypatch.setitem(METHODS._targets, "flaky", "senri_test_flaky:Flaky")
    config = {**RANDOM, "method": {**RANDOM["method"], "name": "flaky", "implementation": "flaky"}}
    questions, video = demo_tables
    out = answer_video(questions, video, config).sort("qid")
    failed = out.filter(pl.col("qid") == "demo_01_L_1").row(0, named=True)
    assert failed["error"] == "RuntimeError: backend exploded"
    assert failed["pred"] is None and failed["correct"] is False and failed["parse_ok"] is False
    unparsed = out.filter(pl.col("qid") == "demo_01_L_2").row(0, named=True)
    assert unparsed["parse_ok"] is False and unparsed["error"] is None and unparsed["correct"] is False
    assert unparsed["raw_output"] == "I think it is the bakery"
    assert out["correct"].sum() == out.height - 2 and out["n_llm_calls"].sum() == out.height - 2


def test_config_and_class_must_agree_on_uses_model(demo_tables):
    questions, video = demo_tables
    config = {**RANDOM, "method": {**RANDOM["method"], "uses_model": True}}
    with pytest.raises(ValueError, match="uses_model"):
        answer_video(questions, video, config)


def test_cli_answer_without_a_tty_prints_no_progress_bar(tmp_path, demo_tables, senri_env):
    questions, video = demo_tables
    q_path, v_path = tmp_path / "q.parquet", tmp_path / "v.parquet"
    questions.write_parquet(q_path)
    from senri.records import VideoInfo, to_frame

    to_frame([video], VideoInfo).write_parquet(v_path)
    out = tmp_path / "pred" / "demo_01.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "senri", "answer", "--questions", str(q_path), "--video-info", str(v_path),
         "--method", "random", "--model", "none", "--out", str(out)],
        capture_output=True, text=True, env=senri_env, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "q/s" not in proc.stderr and "%|" not in proc.stderr
    assert pl.read_parquet(out).height == 16
    assert (tmp_path / "pred" / "demo_01.config.yaml").exists()

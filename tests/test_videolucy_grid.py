"""VideoLucy's Table 13 (captioner × reasoning model): several captioners in one run, each run over its own
memory, and the report's grid beside the published numbers; Fig. 5's richness stage in the same DAG."""

import json
import re

import polars as pl
import pytest
import yaml

from conftest import ONE_VIDEO_DEMO, REPO, snakemake
from reference import reference_file
from senri import config as cfgmod
from senri import workflow
from senri.report.model_grid import PUBLISHED_DIR, model_grid_display, model_grid_table


def test_one_captioner_as_a_name_or_a_list_plans_what_it_always_did():
    one = cfgmod.compose("method=[videolucy,random] memory.captioner=qwen25vl7b_vllm")
    listed = cfgmod.compose("method=[videolucy,random] memory.captioner=[qwen25vl7b_vllm]")
    assert cfgmod.runs(one) == cfgmod.runs(listed) == [("videolucy", "smollm2"), ("random", "none")]
    assert (cfgmod.stage_slice(one, "answer", "videolucy", "smollm2")
            == cfgmod.stage_slice(listed, "answer", "videolucy", "smollm2"))
    assert cfgmod.stage_slice(one, "memory") == cfgmod.stage_slice(listed, "memory")


def test_several_captioners_give_every_memory_method_one_run_over_each_memory():
    cfg = cfgmod.compose("method=[videolucy,random] memory.captioner=[perception,qwen25vl7b_vllm]")
    assert cfgmod.runs(cfg) == [("videolucy+perception", "smollm2"), ("videolucy+qwen25vl7b_vllm", "smollm2"),
                                ("random", "none")]
    vlm = cfgmod.stage_slice(cfg, "answer", "videolucy+qwen25vl7b_vllm", "smollm2")["memory"]
    assert vlm["memory"]["captioner"] == "qwen25vl7b_vllm" and vlm["captioner_model"]["backend"] == "vllm"
    perception = workflow.answer_inputs(cfg, "videolucy+perception", "smollm2", "v1")
    assert perception["memory"] == "results/memory/perception/v1.parquet" and "track" in perception
    inputs = workflow.answer_inputs(cfg, "videolucy+qwen25vl7b_vllm", "smollm2", "v1")
    assert inputs["memory"] == "results/memory/qwen25vl7b_vllm/v1.parquet" and "track" not in inputs
    assert "results/cache/captions/qwen25vl7b_vllm/v1" in workflow.answer_media_args(
        cfg, inputs, "v1", "videolucy+qwen25vl7b_vllm")
    with pytest.raises(cfgmod.ConfigError, match="memory.captioner: one captioner or a list of distinct"):
        cfgmod.expand_captioners({"memory": {"captioner": ["perception", "perception"]}, "method": {}}, REPO)


def test_the_table13_experiment_plans_the_grid_by_name():
    cfg = cfgmod.compose("experiment=videolucy_models")
    captioners = ["qwen25vl7b_vllm", "qwen25vl72b_vllm", "internvl25_8b_vllm", "internvl25_78b_vllm"]
    assert cfgmod.runs(cfg) == [(f"videolucy+{c}", m) for c in captioners
                                for m in ("deepseek_r1_vllm", "qwen25_72b_vllm")]
    assert cfg["dataset"]["subset"] == {"n": 200, "seed": 0}
    api = yaml.safe_load((REPO / "config/model/deepseek_r1_api.yaml").read_text())  # the API arm: reasoning apart
    assert api["reasoning"] is True and api["json_schema"] is False and api["backend"] == "openai"


def test_the_shipped_published_table_is_the_vendored_one():
    assert ((PUBLISHED_DIR / "videolucy_table13_models.csv").read_bytes()
            == reference_file("videolucy/videolucy_table13_models.csv").read_bytes())


def test_the_grid_puts_each_run_beside_its_published_cell():
    main = pl.DataFrame({"method": ["videolucy+cap7", "videolucy+cap7", "random"], "model": ["r1", "qwen", "none"],
                         "memory": ["captions/cap7", "captions/cap7", "none"], "n": [4, 4, 4],
                         "total": [50.0, 25.0, 25.0]})
    spec = {"method": "videolucy", "published": "videolucy_table13_models",
            "names": {"cap7": "Qwen2.5-VL-7B", "r1": "DeepSeek-R1", "qwen": "Qwen2.5-72B"}}
    grid = model_grid_table(main, spec)
    ours = grid.filter(pl.col("source") == "ours")
    assert ours.select("captioner", "reasoner", "accuracy").rows() == [("Qwen2.5-VL-7B", "DeepSeek-R1", 50.0),
                                                                      ("Qwen2.5-VL-7B", "Qwen2.5-72B", 25.0)]
    assert grid.filter(pl.col("source") == "published").height == 8
    shown = model_grid_display(grid)
    assert shown.row(0, named=True) == {"MLLM (captioner)": "Qwen2.5-VL-7B", "DeepSeek-R1": "50.0 (published 57.5)",
                                        "Qwen2.5-72B": "25.0 (published 48.0)"}
    assert shown.filter(pl.col("MLLM (captioner)") == "InternVL2.5-78B")["DeepSeek-R1"][0] == "– (published 65.5)"


@pytest.mark.workflow
def test_two_captioners_build_two_memories_in_one_dag_and_the_richness_stage_reads_both(tmp_path, prepared_demo):
    """memory.captioner=[perception, cap] (cap: a scripted VLM captioner): the DAG builds both memories of the
    one-video demo, VideoLucy runs once over each (its own memory column and caption cache), the richness
    analysis scores every run's coarse texts with the scripted evaluator, and the report shows the grid and
    Fig. 5."""
    captioner = tmp_path / "cap.jsonl"
    captioner.write_text(json.dumps({"text": "A corridor with a red door and a sign."}) + "\n")
    agent = tmp_path / "agent.jsonl"
    rules = [{"match": "You judge how relevant", "text": json.dumps({"score": 6, "reason": "r"})},
             {"match": "Your task: decide which periods",
              "text": json.dumps({"Flag": False, "Time Period": "No Time Periods.", "Reason": "r"})},
             {"match": "Your task: judge whether the descriptions above answer",
              "text": json.dumps({"Confidence": True, "Answer": "B", "Time Period": [[0, 10]], "Reason": "r"})}]
    agent.write_text("".join(json.dumps(r) + "\n" for r in rules))
    prepared_demo(tmp_path, ONE_VIDEO_DEMO)
    overrides = (f"{ONE_VIDEO_DEMO} method=[videolucy] method.videolucy.models=[agent] model=[] "
                 f"+model.agent={{backend:scripted,script:{agent}}} "
                 f"+model.cap={{backend:scripted,script:{captioner},images:true}} memory.captioner=[perception,cap] "
                 "analysis.richness.evaluator=agent analysis.richness.level=coarse "
                 "+report.model_grid={method:videolucy,published:videolucy_table13_models,"
                 "names:{cap:Qwen2.5-VL-7B,agent:DeepSeek-R1}}")
    snakemake(tmp_path, "-c2", "--config", f"overrides={overrides}")
    results = tmp_path / "results"
    vlm_memory = pl.read_parquet(results / "memory/cap/demo_01.parquet")
    assert set(vlm_memory["text"]) == {"A corridor with a red door and a sign."}
    assert "A corridor" not in " ".join(pl.read_parquet(results / "memory/perception/demo_01.parquet")["text"])
    questions = pl.read_parquet(results / "questions.parquet").height
    for name in ("perception", "cap"):
        predictions = pl.read_parquet(results / f"predictions/videolucy+{name}/agent/demo_01.parquet")
        assert predictions.height == questions and (predictions["memory"] == f"captions/{name}").all()
        assert predictions["error"].is_null().all() and (predictions["pred"] == "B").all()
    curves = pl.read_parquet(results / "analysis/richness/curves.parquet")
    assert sorted(curves["method"]) == ["videolucy+cap", "videolucy+perception"]
    assert (curves["questions"] == questions).all() and (curves["relevance"] == 6.0).all()
    assert (curves["unparsed"] == 0).all() and (curves["entropy_bits"] > 0).all()
    grid = (results / "report/tables/model_grid.md").read_text()
    assert re.search(r"\| Qwen2\.5-VL-7B \| \d+\.\d \(published 57\.5\) \|", grid), grid
    assert (results / "report/figures/richness_relevance.png").stat().st_size > 1000
    assert "VideoLucy Table 13 layout" in (results / "report.html").read_text()

"""Planning at benchmark scale (issue 53): ``bench/plan.py`` prints senri's ``snakemake -n`` beside Snakemake's own
floor for the same number of jobs; that comparison means something only if each floor workflow plans exactly the
jobs it is asked for, with the directives it claims."""

from __future__ import annotations

import importlib.util
import sys

from conftest import REPO

spec = importlib.util.spec_from_file_location("plan_bench", REPO / "bench" / "plan.py")
plan_bench = importlib.util.module_from_spec(spec)
sys.modules["plan_bench"] = plan_bench
spec.loader.exec_module(plan_bench)


def test_each_floor_workflow_plans_the_asked_number_of_jobs(tmp_path):
    for shape in plan_bench.FLOOR_SNAKEFILES:
        jobs, seconds, cpu = plan_bench.plan_floor(tmp_path / shape, shape, 7)
        assert jobs == 7 and seconds > 0 and cpu > 0, shape


def test_the_answer_shaped_floor_has_every_directive_of_senri_s_answer_rule():
    rule = (REPO / "rules" / "answer.smk").read_text()
    floor = plan_bench.FLOOR_SNAKEFILES["answer-shaped"]
    for directive in ("input:", "output:", "params:", "log:", "benchmark:", "threads:", "resources:", "shell:"):
        assert directive in rule and directive in floor, directive
    for field in ("{params.config:q}", "{input.questions}", "{input.video}", "{params.media}", "{params.cache}",
                  "{output.table}", "{log}"):
        assert field in rule and field in floor, field


def test_a_job_holding_a_model_asks_for_its_gpu_and_memory_by_backend():
    """One rule for answer and memory jobs: a GPU backend holds a GPU and 16 GB of host memory unless its config
    says otherwise; a CPU model holds what the stage gives it (2 GB for answer, none of its own for a captioner,
    whose memory job is sized to the video instead); in-process llama.cpp computes on two threads."""
    from senri.workflow import model_job_resources

    assert model_job_resources({"backend": "vllm"}, cpu_mem_mb=0) == {"gpu": 1, "mem_mb": 16000, "threads": 1}
    assert model_job_resources({"backend": "transformers", "gpus": 2, "mem_mb": 64000}, 0)["gpu"] == 2
    assert model_job_resources({"backend": "openai"}, cpu_mem_mb=0) == {"gpu": 0, "mem_mb": 0, "threads": 1}
    assert model_job_resources({"backend": "llamacpp"}, cpu_mem_mb=2000) == {"gpu": 0, "mem_mb": 2000, "threads": 2}
    assert model_job_resources(None, cpu_mem_mb=0) == {"gpu": 0, "mem_mb": 0, "threads": 1}  # perception captioner

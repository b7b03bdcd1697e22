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

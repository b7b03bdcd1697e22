"""Model loads of the SENRI paper-sized plan, answered in process versus in served batches (a dry run).

The answer stage is one job per method × model × video; in process, every job of a model-calling method loads
its model. Served (``serving.models``), each batch starts its model's server once. This bench plans — without
running anything — 10 videos (500 questions: 50 per video), 14 model-calling method variants (the 13 method
configs that call a model, ``direct`` at two frame budgets) and 3 GPU models, and prints the answer jobs and
model loads of both modes, per batch granularity and ``serving.replicas`` (data parallel: N batch jobs per
model over shares of the videos, N loads each).

The three GPU models are copies of the shipped ``config/model/qwen25vl7b_vllm.yaml`` (``vlm_a``, ``vlm_b``,
``vlm_c``; ``video: true``: served, a carrier travels with its source times to senri's video loader in the
server, :mod:`senri.backends.vllm_video`): the plan depends on their backend only. A model the batches cannot
serve would be printed as refused, with one load per job. ``role models``: loads beside the servers, of the
models an answer's roles open that its server does not serve (tool models, a memory system's query roles,
VideoLucy's VLM captioner; :func:`senri.serving.answer_role_models`) — none with the paper plan's defaults.

    python bench/serving_plan.py
    python bench/serving_plan.py --videos 10 --questions 500 --replicas 1 2 4
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from senri import config as cfgmod  # noqa: E402
from senri import serving  # noqa: E402

METHODS = ["random", "blind", "blind_letter", "blind_debiased", "direct", "memory_search", "senri_agent",
           "senri_agent_no_pv", "senri_agent_no_tg", "senri_agent_no_wm", "videoarm", "videoarm_text_only",
           "videolucy", "videolucy_release"]
GPU_MODELS = ("vlm_a", "vlm_b", "vlm_c")


def paper_plan(granularity: str, replicas: int = 1) -> dict:
    cfg = cfgmod.compose(f"dataset=demo method=[{','.join(METHODS)}] method.direct.frames=[64,512] "
                         "model=[qwen25vl7b_vllm]")
    template = cfg["model"].pop("qwen25vl7b_vllm")
    for name in GPU_MODELS:
        cfg["model"][name] = dict(template)
    servable = []
    for name in GPU_MODELS:
        try:
            serving.served_models({**cfg, "serving": {**cfg["serving"], "models": [name], "batch": {}}})
            servable.append(name)
        except cfgmod.ConfigError as exc:
            refused = str(exc)
    cfg["serving"] = {**cfg["serving"], "models": servable, "batch": {m: granularity for m in servable},
                      "replicas": {m: replicas for m in servable}}
    runs = [(m, model) for m, model in cfgmod.runs(cfg) if model != cfgmod.NO_MODEL]
    return {"cfg": cfg, "variants": len({m for m, _ in runs}), "servable": servable,
            "refused": None if servable else refused}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=10)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 4],
                        help="serving.replicas per model to plan (data parallel: batch jobs per model)")
    args = parser.parse_args(argv)
    videos = [f"video_{i:02d}" for i in range(1, args.videos + 1)]
    print(f"plan: {args.videos} videos, {args.questions} questions ({args.questions / args.videos:g} per video), "
          f"{len(GPU_MODELS)} GPU models (vLLM)")
    print(f"{'GPU models':<22} {'batches':<13} {'replicas':>8} {'variants':>8} {'answer jobs':>11} "
          f"{'loads in process':>16} {'loads served':>12} {'batch jobs':>10} {'role models':>11}")
    for granularity in serving.GRANULARITIES:
        for replicas in args.replicas:
            plan = paper_plan(granularity, replicas)
            counts = serving.load_counts(plan["cfg"], videos)
            print(f"{'video: true (shipped)':<22} {granularity:<13} {replicas:>8} {plan['variants']:>8} "
                  f"{counts['answer_jobs']:>11} {counts['in_process']:>16} {counts['served']:>12} {counts['batches']:>10} "
                  f"{counts['role_loads_served']:>11}")
        if plan["refused"] and granularity == serving.GRANULARITIES[0]:
            print(f"  not served: {plan['refused']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

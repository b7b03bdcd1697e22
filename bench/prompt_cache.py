"""Time per question with and without llama.cpp's prompt-cache reuse, through a real method on a real memory.

llama.cpp keeps the previous prompt's KV cache in its slot (``cache_prompt``); a call whose prompt starts with
the same tokens evaluates only the rest. Memory methods put the long shared part (the video's memory) first
and the question last, so a video's questions share that prefix. This bench answers the first N questions of
one video with the same method and model twice — ``cache_prompt: true`` then ``false`` — each with a fresh
response cache (so every call reaches the model) and prints wall time per question, model calls, prompt
tokens, and the agreement of the two runs' answers.

Needs a finished run's files (``make evidence`` or ``snakemake`` with the memory method), by default under
``results/evidence/demo``:

    python bench/prompt_cache.py                                  # memory_search on demo_01, 4 questions
    python bench/prompt_cache.py --method videolucy --questions 3 --results results
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from senri import config as cfgmod  # noqa: E402
from senri.answer import MemoryInputs, answer_video  # noqa: E402
from senri.records import Question, VideoInfo, from_frame, read_table  # noqa: E402


def run(results: Path, method: str, model: str, video_id: str, n_questions: int, cache_prompt: bool,
        overrides: list[str]) -> dict:
    cfg = cfgmod.compose([f"method=[{method}]", f"model=[{model}]", *overrides,
                          f"model.{model}.cache_prompt={str(cache_prompt).lower()}"])
    stage = cfgmod.stage_slice(cfg, "answer", method=method, model=model)
    questions = read_table(results / "questions.parquet", Question)
    questions = questions.filter(questions["video_id"] == video_id).head(n_questions)
    video = from_frame(read_table(results / "probe" / f"{video_id}.parquet", VideoInfo), VideoInfo)[0]
    captioner = cfgmod.run_captioner(cfg, method)  # memory.captioner may list several: the run's own
    memory = MemoryInputs(
        memory=results / "memory" / captioner / f"{video_id}.parquet",
        video=Path(video.path) if Path(video.path).is_absolute() else results.parent / video.path,
        track=results / "track" / f"{video_id}.parquet", ocr=results / "track" / f"{video_id}.ocr.parquet",
        detections=(results / "anonymized" / f"{video_id}.detections.parquet") if cfg["anonymize"]["enabled"] else None,
        caption_cache=results / "cache" / "captions" / captioner / video_id)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        predictions = answer_video(questions, video, stage, cache=Path(tmp) / "calls.sqlite", memory=memory)
        wall = time.perf_counter() - started
    return {"cache_prompt": cache_prompt, "questions": predictions.height, "wall_s": wall,
            "s_per_question": wall / max(1, predictions.height),
            "model_s_per_question": float(predictions["latency_s"].sum()) / max(1, predictions.height),
            "llm_calls": int(predictions["n_llm_calls"].sum()), "prompt_tokens": int(predictions["prompt_tokens"].sum()),
            "preds": predictions["pred"].to_list()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results" / "evidence" / "demo" / "results",
                        help="a run's results folder (questions.parquet, probe/, memory/, track/, cache/)")
    parser.add_argument("--method", default="memory_search")
    parser.add_argument("--model", default="qwen15_coder")
    parser.add_argument("--video", default="demo_01")
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--overrides", default="anonymize=off",
                        help="the Hydra overrides the run was made with (make evidence: anonymize=off)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = [run(args.results, args.method, args.model, args.video, args.questions, flag, args.overrides.split())
            for flag in (True, False)]
    print(f"{args.method} / {args.model} on {args.video}, first {args.questions} questions, fresh response caches")
    print("| cache_prompt | questions | wall s | s / question | model s / question | LLM calls | prompt tokens |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['cache_prompt']} | {r['questions']} | {r['wall_s']:.1f} | {r['s_per_question']:.1f} | "
              f"{r['model_s_per_question']:.1f} | {r['llm_calls']} | {r['prompt_tokens']} |")
    on, off = rows
    same = sum(a == b for a, b in zip(on["preds"], off["preds"]))
    print(f"speed-up with reuse: {off['s_per_question'] / max(on['s_per_question'], 1e-9):.2f}×; "
          f"same answer on {same}/{len(on['preds'])} questions")


if __name__ == "__main__":
    main()

"""SENRI-Agent's parallel verifiers against sequential execution, at the same number of verifier calls.

    python bench/agent.py [--latency 0.5] [--concurrency 8] [--questions 3]

A scripted model backend sleeps ``--latency`` seconds per call (a remote API or a GPU server with
``--concurrency`` slots); its controller asks for one verify of 3 checks × 3 cells each (9 verifier calls),
then answers. The same episodes run with the cells' verifier calls in one batch (``parallel_verifiers:
true``, the default) and one after another (false); the script prints both wall times, their ratio
(target ≥ 2.5×) and the calls per question. Frames are decoded from a generated video in both runs.
With ``--video`` the scripted model takes video, so every verifier gets its cell as a 1 frame/s carrier (the
paper's native-video input); the script also prints what building one carrier costs at 8, 16 and 64 frames.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

CHECK = {"objective": "count the items on the shelf", "requirements": ["the shelf is visible"], "fps": 1, "budget": 8}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--concurrency", type=int, default=16, help="calls the backend serves at once (a server's slots)")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--video", action="store_true", help="verifiers get 1 frame/s carrier videos")
    args = parser.parse_args()

    from senri.answer import MemoryInputs, answer_video
    from senri.media import run_ffmpeg
    from senri.probe import probe
    from senri.records import MemoryRow, Question, to_frame, write_table

    work = Path(tempfile.mkdtemp(prefix="senri-bench-agent-"))
    video = work / "v.mp4"
    run_ffmpeg(["-y", "-f", "lavfi", "-i", "testsrc2=s=320x180:r=10:d=300", "-c:v", "libx264", "-g", "10",
                "-pix_fmt", "yuv420p", str(video)], what="bench video")
    info = probe(video, "v")
    rows = [MemoryRow("v", "coarse", 60.0 * i, 60.0 * (i + 1), 1.0, 60, "h", f"I walk through hall {i}.", "perception",
                      "t", None, None, None) for i in range(5)]
    write_table(to_frame(rows, MemoryRow), work / "memory.parquet", MemoryRow)
    # Windows of 16 s at f = 1, B = 8: τ = 8 s, L = ⌈2·16/8 − 1⌉ = 3 cells each; 3 checks → 9 verifier calls.
    verify = {"action": "verify", "checks": [{**CHECK, "target_context": f"the shelf in hall {k}",
                                              "windows": [[60 * k + 10, 60 * k + 26]]} for k in range(3)]}
    report = {"observation": "a shelf", "evidence_moments": [1], "requirement_findings": {"R1": "seen", "R2": "seen"},
              "requirement_evidence_moments": {"R1": [1], "R2": [2]}}
    rules = [
        {"match": "Update the working memory", "text": json.dumps({"note": "shelves seen", "selected_report_ids": ["r1"]}),
         "delay_s": args.latency},
        {"match": "Target context (R1)", "text": json.dumps(report), "delay_s": args.latency},
        {"match": "Working memory note", "text": json.dumps({"action": "answer", "answer": "B"}), "delay_s": args.latency},
        {"match": "search, verify, answer", "text": json.dumps(verify), "delay_s": args.latency},
    ]
    questions = [Question("v", f"q{i}", "OC", "ES", f"How many items were on shelf {i}?", "1", "2", "3", "4", "B")
                 for i in range(args.questions)]
    results = {}
    for label, parallel in (("parallel verifiers", True), ("sequential verifiers", False)):
        script = work / f"script-{parallel}.jsonl"
        script.write_text("".join(json.dumps(r) + "\n" for r in rules))
        stage = {"seed": 0,
                 "method": {"name": "senri_agent", "implementation": "senri_agent", "approach": "persistent_memory",
                            "uses_model": True, "uses_memory": True, "max_rounds": 5, "top_k": 3, "retriever": "bm25",
                            "json_retries": 1, "wm_reports": 3, "wm_frames": 4, "verifier_short_side": 180,
                            "parallel_verifiers": parallel},
                 "model": {"name": "sleepy", "backend": "scripted", "script": str(script), "video": args.video,
                           "concurrency": args.concurrency, "batch_questions": 1},
                 "memory": {"memory": {"captioner": "perception"}}}
        inputs = MemoryInputs(work / "memory.parquet", video, None, None, None, work / "captions")
        started = time.perf_counter()
        predictions = answer_video(to_frame(questions, Question), info, stage, memory=inputs)
        wall = time.perf_counter() - started
        traces = [json.loads(t) for t in predictions["trace"]]
        results[label] = {
            "wall_s": wall,
            "verifier_calls": sum(t["verifier_calls"] for t in traces) / len(traces),
            "calls": float((predictions["n_llm_calls"] + predictions["n_vlm_calls"]).mean()),
            "correct": int(predictions["correct"].sum()),
        }
    print(f"model latency {args.latency} s per call, backend concurrency {args.concurrency}, {args.questions} questions")
    print("| execution | wall s | per question s | verifier calls / q | model calls / q | correct |")
    print("|---|---|---|---|---|---|")
    for label, r in results.items():
        print(f"| {label} | {r['wall_s']:.2f} | {r['wall_s'] / args.questions:.2f} | {r['verifier_calls']:.0f} | "
              f"{r['calls']:.0f} | {r['correct']}/{args.questions} |")
    ratio = results["sequential verifiers"]["wall_s"] / results["parallel verifiers"]["wall_s"]
    print(f"speed-up of parallel verifiers at the same calls: {ratio:.2f}× (target ≥ 2.5×)")
    if args.video:
        carrier_cost(video)


def carrier_cost(video: Path) -> None:
    """Wall time of packing one verifier cell's frames into its 1 frame/s carrier (448-pixel short side)."""
    from senri.decode import carrier_frame_count, carrier_from_jpegs, encode_jpeg, read_frames

    jpegs = [encode_jpeg(f.image) for f in read_frames(video, [float(t) for t in range(64)], short_side=448)]
    print("| carrier frames | build ms | bytes |")
    print("|---|---|---|")
    for n in (8, 16, 64):
        started = time.perf_counter()
        mp4 = carrier_from_jpegs(jpegs[:n])
        wall = time.perf_counter() - started
        assert carrier_frame_count(mp4) == n
        print(f"| {n} | {1000 * wall:.0f} | {len(mp4)} |")


if __name__ == "__main__":
    main()

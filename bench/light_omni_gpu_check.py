"""Light-Omni's load-and-answer check, for the day a GPU, the weights and the release checkout are at hand (never
run in CI; never run here: no GPU task has had the weights).

    SENRI_LIGHT_OMNI_CHECKOUT=/src/Light-Omni SENRI_LIGHT_OMNI_MODEL=/models/Light-Omni \
        python bench/light_omni_gpu_check.py [--env-cache DIR] [--pip-arg ARG ...]

It builds (once) the worker environment from envs/light_omni.txt, starts the release's own model in it
(config/model/light_omni.yaml with the checkout and checkpoint given), streams a generated 40-s video with a
440-Hz tone (two segments by the background rule) through senri's Light-Omni memory, asks one question and prints
what each step took and returned: the logs, the reaction's latent decisions, the retrieved counts, the response and
its first-character letter. Exit status 1 when any step fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def main() -> int:
    import os

    from senri.media import run_ffmpeg
    from senri.memory.light_omni import agent, memory, replies, stream
    from senri.memory.light_omni.engine import WorkerOmniModel
    from senri.memory.light_omni.units import extract_units

    parser = argparse.ArgumentParser()
    parser.add_argument("--env-cache", default=None)
    parser.add_argument("--pip-arg", action="append", default=[])
    args = parser.parse_args()
    checkout = os.environ.get("SENRI_LIGHT_OMNI_CHECKOUT")
    checkpoint = os.environ.get("SENRI_LIGHT_OMNI_MODEL")
    if not checkout or not checkpoint:
        raise SystemExit("set SENRI_LIGHT_OMNI_CHECKOUT (a git checkout of Clare-Nie/Light-Omni) and "
                         "SENRI_LIGHT_OMNI_MODEL (the ClareNie/Light-Omni checkpoint folder)")
    config = yaml.safe_load((REPO / "config/model/light_omni.yaml").read_text())
    config.update(release_checkout=checkout, model=checkpoint, env_cache=args.env_cache, pip_args=args.pip_arg)
    work = Path(tempfile.mkdtemp(prefix="light-omni-gpu-check-"))
    video = work / "tone.mp4"
    run_ffmpeg(["-y", "-f", "lavfi", "-i", "testsrc2=s=640x360:r=10:d=40", "-f", "lavfi", "-i",
                "sine=frequency=440:duration=40", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac",
                "-shortest", str(video)], what="Light-Omni check video")
    t0 = time.monotonic()
    model = WorkerOmniModel(config)
    try:
        units = extract_units(video, work / "input")
        print(f"units: {len(units.units)} ({units.audio_source})")
        mem = memory.LightOmniMemory(model)
        vad = stream.silero_activity()
        record = agent.stream_video(units.units, mem, work, lambda i: vad.push(agent.read_wav(units.units[i].audio)),
                                    vad.reset)
        print(f"streamed {record.segments} in {time.monotonic() - t0:.0f} s (model load included)")
        for log in mem.logs:
            print("log:", {k: log.get(k) for k in ("start_time", "end_time", "visual", "auditory", "semantic_memory")})
        t1 = time.monotonic()
        outcome = agent.answer_question(mem, model, replies.question_text(
            "What sound plays during the video?", ["A. Speech", "B. A steady tone", "C. Music", "D. Silence"]))
        print(f"answered in {time.monotonic() - t1:.1f} s: is_response={outcome.reaction.is_response} "
              f"is_retrieve={outcome.reaction.is_retrieve} semantic={outcome.semantic_hits} "
              f"episodic={outcome.episodic_hits} response={outcome.response!r}")
        print("letter:", replies.first_character(outcome.response) if outcome.response else None)
        print("calls:", model.calls)
        return 0 if outcome.response else 1
    finally:
        model.close()


if __name__ == "__main__":
    raise SystemExit(main())

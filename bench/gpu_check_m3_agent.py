"""GPU check of M3-Agent's two models (never run in CI; run where a GPU and the weights are at hand).

1. the memorizer (M3-Agent-Memorization, transformers, ``model_class: Qwen2_5OmniThinkerForConditionalGeneration``):
   a 30-s synthetic clip WITH a tone as its sound through senri's transformers backend (``use_audio_in_video``),
   the reply read by the release's rule (:func:`senri.memory.m3_agent.perception.memorize`): it must parse into the
   two lists;
2. the controller (M3-Agent-Control, vLLM, thinking on): one round on a question with an empty memory; its reply is
   parsed after the last ``</think>`` (:func:`senri.memory.m3_agent.control.parse_reply`): it must be an Answer or a
   Search.

    python bench/gpu_check_m3_agent.py --memorizer /models/M3-Agent-Memorization --controller /models/M3-Agent-Control
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def synthetic_clip(folder: Path) -> Path:
    path = folder / "clip.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=640x360:rate=10:d=30",
                    "-f", "lavfi", "-i", "sine=frequency=440:d=30", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                    "-c:a", "aac", "-shortest", "-y", str(path)], check=True)
    return path


def check_memorizer(path: str) -> bool:
    from senri.backends.base import AudioPart, ChatRequest, Message, VideoPart
    from senri.backends.transformers import TransformersBackend
    from senri.decode import at_fps, carrier_from_jpegs, encode_jpeg, read_frames
    from senri.media import clip_wav
    from senri.memory.m3_agent import perception
    from senri.prompts import prompt_set

    backend = TransformersBackend({"path": path, "model_class": "Qwen2_5OmniThinkerForConditionalGeneration",
                                   "dtype": "bfloat16", "video": True, "audio": True})
    with tempfile.TemporaryDirectory() as tmp:
        clip = synthetic_clip(Path(tmp))
        frames = [f for f in read_frames(clip, at_fps(2.0, 0.0, 30.0)) if f.image is not None]
        video = VideoPart(carrier_from_jpegs([encode_jpeg(f.image) for f in frames], 2.0), 2.0,
                          tuple(f.target_s for f in frames), audio=AudioPart(clip_wav(clip, 0.0, 30.0)))
    parts = perception.memorizer_parts(prompt_set("m3_agent").render("memorize"), video, {}, {})
    request = ChatRequest((Message("user", tuple(parts)),), max_tokens=4096)
    replies = []

    def call() -> str:
        response = backend.complete(request)
        replies.append(response)
        return response.text

    try:
        result = perception.memorize(call)
    except perception.MemorizerReplyError as exc:
        print("memorizer: reply of the wrong shape:", exc)
        return False
    print(f"memorizer: {result.calls} call(s), {replies[0].prompt_tokens} prompt tokens; episodic {result.episodic[:3]}"
          f" semantic {result.semantic[:3]}")
    return not result.failed


def check_controller(path: str) -> bool:
    from senri.backends.base import ChatRequest, Message
    from senri.backends.vllm import VLLMBackend
    from senri.memory.m3_agent.control import SEARCH_PREFIX, parse_reply
    from senri.prompts import prompt_set

    text = prompt_set("m3_agent")
    backend = VLLMBackend({"model": path, "thinking": True, "max_model_len": 16384, "gpus": 1, "images": False})
    system = text["system"].render(question="What did the person cook?")
    request = ChatRequest((Message.text("system", system),
                           Message.text("user", SEARCH_PREFIX + "{}" + text["instruction"].text)),
                          max_tokens=1024, temperature=0.6, top_p=0.95, seed=0)
    response = backend.complete(request)
    action = parse_reply(response.text)
    print(f"controller: {response.completion_tokens} tokens, finish {response.finish_reason}; answer={action.answer!r} "
          f"query={action.query!r}")
    return response.error is None and (action.answer is not None or action.query is not None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memorizer")
    parser.add_argument("--controller")
    args = parser.parse_args()
    ok = True
    if args.memorizer:
        ok &= check_memorizer(args.memorizer)
    if args.controller:
        ok &= check_controller(args.controller)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""LongVideo-R1's differential cases (issue 60): the release's own functions at 77c87ec on Hypothesis-drawn
inputs.

    python bench/release_cases/longvideo_r1.py [--src /work/wt/_src/longvideo_r1] [--n 600] [--kinds episodes ...]

``--src`` is a checkout of github qiujihao19/LongVideo-R1 at 77c87ec64779375b07e23f7f9b40a91f84d7dc35. Modules:
``eval/utils.py`` (with ``eval/constant.py``), ``data/utils.py`` and ``data/videocaption_generation.py`` (with
``data/constant.py``). Stand-ins: ``decord`` (a VideoReader that reports a drawn frame count and average rate
and returns black frames for the indices asked, which it records), ``pysrt`` (subtitles are not exercised),
``openai`` (imported by the caption script; its client is scripted), and in the caption_tree kind
``sample_video_woid`` (its JPEGs are the caption_frame_size kind; the tree records only how many frames each
call shows). Frame sizes are read back from the JPEG the release's ``encode_image`` writes (real PIL). The
episodes kind runs the release's own evaluation loop (longvideo_r1_episodes.py). Writes
``tests/reference/generated/longvideo_r1/cases.json`` (``--kinds``: only those kinds redrawn, the rest kept).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SRC, examples, kept_kinds, outcome, write_cases  # noqa: E402
from release_import import load_file, stub  # noqa: E402
from reply_strategies import JSON_VALUE, NUMBER, TEXT  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

COMMIT = "77c87ec64779375b07e23f7f9b40a91f84d7dc35"
#: The kinds in cases.json's order.
KINDS = ["tree_width", "video_qa_frames", "caption_frame_size", "video_qa_frame_size", "parse_function_call",
         "extract_blocks", "extract_caption", "caption_tree", "episodes"]


class Video:
    """What the decord stand-in reports for the next VideoReader: frame count, average rate, asked indices."""

    n_frames, fps, asked, side = 0, 1.0, None, 8


class VideoReader:
    def __init__(self, path, ctx=None, num_threads=0):
        pass

    def __len__(self):
        return Video.n_frames

    def get_avg_fps(self):
        return Video.fps

    def get_batch(self, indices):
        Video.asked = [int(i) for i in indices]
        frames = np.zeros((len(Video.asked), Video.side, Video.side, 3), dtype=np.uint8)
        return type("Batch", (), {"asnumpy": lambda self: frames})()


def load_release(src: Path):
    stub("decord", VideoReader=VideoReader, cpu=lambda i: i)
    stub("pysrt", open=None)
    stub("openai", OpenAI=None)
    sys.path.insert(0, str(src / "eval"))  # eval/utils.py does `from constant import *`
    eval_utils = load_file("lvr1_eval_utils", src / "eval" / "utils.py")
    data_utils = load_file("lvr1_data_utils", src / "data" / "utils.py")
    # data/videocaption_generation.py does `from constant import *` and `from utils import *`: data's own two
    eval_modules = {name: sys.modules.get(name) for name in ("constant", "utils")}
    sys.modules["constant"] = load_file("lvr1_data_constant", src / "data" / "constant.py")
    sys.modules["utils"] = data_utils
    captions = load_file("lvr1_videocaption_generation", src / "data" / "videocaption_generation.py")
    for name, module in eval_modules.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
    return eval_utils, data_utils, captions


class CaptionClient:
    """The caption model as process_level calls it: each completion is logged (its system prompt, how many
    frames, max_tokens) and returns a fixed ``<caption>`` reply."""

    def __init__(self) -> None:
        self.log: list[dict] = []
        self.chat = type("Chat", (), {})()
        self.chat.completions = type("Completions", (), {"create": self.create})()

    def create(self, *, model, messages, max_tokens):
        images = sum(1 for part in messages[1]["content"] if part["type"] == "image_url")
        self.log.append({"system": messages[0]["content"], "num_frame": images, "max_tokens": max_tokens})
        message = type("Message", (), {"content": "<caption>c</caption>"})()
        return type("Response", (), {"choices": [type("Choice", (), {"message": message})()]})()


def prompt_template(captions, system: str, n_frames: int) -> str:
    """Which of the release's caption prompts ``system`` is ("low", "high"; "?" neither), each filled as
    process_level and format_message fill it for ``n_frames`` frames."""
    for name, template, words in (("low", captions.CAPTION_SYSTEM_PROMPT_LOW, captions.LOW_LEVEL_CAPTION_WORDS),
                                  ("high", captions.CAPTION_SYSTEM_PROMPT, captions.HIGH_LEVEL_CAPTION_WORDS)):
        if system == template.format(num_frame=n_frames, num_word=words).format(num_frame=n_frames):
            return name
    return "?"


def caption_tree(captions, n_frames: int, fps: float) -> dict:
    """caption_generation(video, no subtitles, scripted client, max_workers 1) on a video of ``n_frames`` at
    ``fps``: the width and, per level (high, medium, low), the node count, the first node's frame ids, and a
    digest of every node's [frame_ids, frame_time, prompt template, frames shown, max_tokens] (the template read
    off the system prompt the release chose) — the whole tree compared, a few bytes stored."""
    import hashlib
    import json

    Video.n_frames, Video.fps, Video.side = n_frames, fps, 1  # 1-pixel frames: their pixels are not recorded
    client = CaptionClient()
    encode = captions.sample_video_woid  # its JPEGs are the kind caption_frame_size; here only their count shows
    captions.sample_video_woid = lambda video, scale_factor: ["jpeg"] * len(video)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            levels, width = captions.caption_generation("v.mp4", None, client, max_workers=1)
    finally:
        Video.side, captions.sample_video_woid = 8, encode
    calls = iter(client.log)
    out = []
    for nodes in levels:
        rows = []
        for node in nodes:
            call = next(calls)
            template = prompt_template(captions, call["system"], call["num_frame"])
            rows.append([node["frame_ids"], node["frame_time"], template, call["num_frame"], call["max_tokens"]])
        text = json.dumps(rows, separators=(",", ":"))
        out.append({"nodes": len(nodes), "first_frame_ids": rows[0][0] if rows else None,
                    "digest": hashlib.sha256(text.encode()).hexdigest()})
    return {"width": width, "levels": out}


def jpeg_size(encoded: str) -> list[int]:
    from PIL import Image

    return list(Image.open(io.BytesIO(base64.b64decode(encoded))).size)


def call_text() -> st.SearchStrategy[str]:
    ident = st.sampled_from(["get_caption", "video_qa", "answer", "f", "get caption", "_x", "1a", "ビデオ", ""])
    ids = st.lists(st.one_of(st.integers(-1, 9), st.floats(allow_nan=True), TEXT.map(repr), st.none()), max_size=4)
    literal = st.one_of(ids.map(lambda xs: "(" + ", ".join(map(str, xs)) + ")"),
                        ids.map(lambda xs: "[" + ", ".join(map(str, xs)) + "]"),
                        st.tuples(ids, TEXT).map(lambda t: f"({', '.join(map(str, t[0]))}), {t[1]!r}"),
                        st.tuples(ids, TEXT).map(lambda t: f"({', '.join(map(str, t[0]))}), \"{t[1]}\""),
                        JSON_VALUE.map(repr), TEXT,
                        st.sampled_from(["", "(1,2)", "((1,2))", "(1,2,3), 'what color?'", "{1, 2}", "1+2j",
                                         "b'x'", "(1,2", "1,2)", "'a' 'b'", "x=1", "__import__('os')", "\n(1,2)\n",
                                         "(1,\n2)", "((1,2,3), 'q')\nvideo_qa((1,1,1), 'x')"]))
    space = st.sampled_from(["", " ", "\n", "  \n"])
    return st.tuples(space, ident, st.sampled_from(["(", " (", "("]), literal, st.sampled_from([")", "", ") ", "))"]),
                     space, st.one_of(st.just(""), TEXT)).map("".join)


def tagged_text() -> st.SearchStrategy[str]:
    tags = ["think", "answer", "tool", "caption", "reasoning"]
    block = st.tuples(st.sampled_from(tags), st.one_of(TEXT, st.just(" B "), st.just("\n get_caption((1,2)) \n")),
                      st.sampled_from(["open", "closed", "closed", "upper"])).map(
        lambda t: {"open": f"<{t[0]}>{t[1]}", "closed": f"<{t[0]}>{t[1]}</{t[0]}>",
                   "upper": f"<{t[0].upper()}>{t[1]}</{t[0].upper()}>"}[t[2]])
    return st.lists(st.one_of(block, block, TEXT, st.sampled_from(["\n", "</think>", "<answer></answer>"])),
                    max_size=5).map("".join)


def function_kinds(args, eval_utils, data_utils, captions) -> dict[str, list[dict]]:
    """Every kind but episodes (each drawn on its own, so computing them together changes none)."""
    kinds: dict[str, list[dict]] = {}
    quiet = contextlib.redirect_stdout(io.StringIO())

    frames = st.one_of(st.integers(0, 5_000_000), st.sampled_from([0, 1, 50, 63, 64, 480, 108000, 100003]))
    fps = st.one_of(st.floats(0.05, 240), st.sampled_from([0.0, -1.0, 1.0, 4.0, 25.0, 30.0, 29.97002997002997]))
    duration_s = st.sampled_from([2662, 4394, 6750, 1458, 16 * 91.125, 3600, 1800, 600, 10800])

    def width(n, f, seg, lo, hi):
        Video.n_frames, Video.fps = n, f
        return data_utils.get_video_duration_cuberoot("v.mp4", seg, lo, hi)

    drawn = examples(st.one_of(st.tuples(frames, fps, st.sampled_from([16, 16, 8, 30]), st.integers(1, 5),
                                     st.sampled_from([8, 8, 6, 3])),
                           duration_s.map(lambda d: (int(d * 30), 30.0, 16, 4, 8))), args.n)
    kinds["tree_width"] = [{"input": {"n_frames": n, "fps": f, "segment_len": s, "min_width": lo, "max_width": hi},
                            "output": outcome(lambda: width(n, f, s, lo, hi))} for n, f, s, lo, hi in drawn]

    def qa_frames(n, f, w, ids):
        Video.n_frames, Video.fps, Video.asked = n, f, None
        with quiet:
            data = eval_utils.prepare_video_wid("v.mp4", ids, w)
        return {"frame_ids": Video.asked, "times": data["time"]}

    # run_multistep_vqa asserts every id in [1, width] before it calls prepare_video_wid
    widths = st.integers(4, 8).flatmap(lambda w: st.tuples(st.just(w), st.tuples(*[st.integers(1, w)] * 3)))
    drawn = examples(st.tuples(st.one_of(st.integers(0, 3_000_000), st.sampled_from([480, 1800, 100003, 108000, 60])),
                           st.sampled_from([4.0, 25.0, 30.0, 29.97002997002997, 1.0]), widths), args.n // 2)
    drawn = [(n, f, w, i) for n, f, (w, i) in drawn]
    kinds["video_qa_frames"] = [{"input": {"n_frames": n, "fps": f, "width": w, "segment_id": list(i)},
                                 "output": outcome(lambda: qa_frames(n, f, w, i))} for n, f, w, i in drawn]

    side = st.one_of(st.integers(1, 1600), st.sampled_from([1, 140, 141, 256, 362, 512, 513, 1024, 1025, 1080]))
    drawn = examples(st.tuples(side, side, st.sampled_from([1, 2, 4, 16, 0.5, 100]), st.sampled_from([512, 512, 300]),
                           st.sampled_from([140, 140, 600])), args.n // 2)
    kinds["caption_frame_size"] = [
        {"input": {"height": h, "width": w, "scale_factor": s, "max_length": mx, "min_length": mn},
         "output": outcome(lambda: jpeg_size(data_utils.sample_video_woid(
             [np.zeros((h, w, 3), np.uint8)], s, mx, mn)[0]))} for h, w, s, mx, mn in drawn]
    drawn = examples(st.tuples(st.one_of(side, st.integers(1000, 3000)), st.one_of(side, st.integers(1000, 3000))),
                 args.n // 3)
    kinds["video_qa_frame_size"] = [
        {"input": {"height": h, "width": w, "max_length": eval_utils.VIDEOQA_IMAGE_MAX_LENGTH},
         "output": outcome(lambda: jpeg_size(eval_utils.encode_image(np.zeros((h, w, 3), np.uint8))))}
        for h, w in drawn]

    def parse(text):
        with quiet:
            name, arguments, legal = eval_utils.parse_function_call(text)
        return {"name": name, "args_repr": repr(arguments), "legal": legal}

    kinds["parse_function_call"] = [{"input": {"call": c}, "output": outcome(lambda: parse(c))}
                                    for c in examples(call_text(), args.n * 2)]
    texts = examples(tagged_text(), args.n)
    kinds["extract_blocks"] = [{"input": {"text": t}, "output": outcome(lambda: eval_utils.extract_and_validate(t))}
                               for t in texts]
    kinds["extract_caption"] = [{"input": {"text": t}, "output": outcome(lambda: data_utils.extract_and_validate(t))}
                                for t in texts]
    # videos from a few frames (fewer than w³: the release's job fails) to hours, odd and zero rates
    frames = st.one_of(st.integers(0, 400_000), st.integers(0, 3000),
                       st.sampled_from([0, 1, 63, 64, 65, 100, 480, 511, 512, 100003, 108000, 324000]))
    rates = st.one_of(st.floats(0.05, 120), st.sampled_from([0.0, -1.0, 1.0, 4.0, 25.0, 30.0, 29.97002997002997]))
    kinds["caption_tree"] = [{"input": {"n_frames": n, "fps": f}, "output": outcome(lambda: caption_tree(captions, n, f))}
                             for n, f in examples(st.tuples(frames, rates), args.n // 4)]
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SRC / "longvideo_r1")
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=KINDS,
                        help="regenerate only these kinds (the others are kept as cases.json holds them)")
    args = parser.parse_args()
    eval_utils, data_utils, captions = load_release(args.src)
    kinds: dict[str, list[dict]] = {}
    if set(args.kinds) - {"episodes"}:
        kinds.update({k: v for k, v in function_kinds(args, eval_utils, data_utils, captions).items()
                      if k in args.kinds})
    if "episodes" in args.kinds:
        from longvideo_r1_episodes import episode_cases

        kinds["episodes"] = episode_cases(args.src, captions, eval_utils, Video, args.n // 2)
    print(write_cases("longvideo_r1", {"release": "github qiujihao19/LongVideo-R1", "commit": COMMIT},
                      kept_kinds("longvideo_r1", kinds, KINDS)))


if __name__ == "__main__":
    main()

"""ParaVT's differential cases (issue 60): the release's own functions at cf55249 on Hypothesis-drawn inputs.

    python bench/release_cases/paravt.py [--src /work/wt/_src/paravt] [--qvu /work/wt/_src/qvu]
        [--torchvision /work/wt/_src/_pydeps_b] [--n 600]

``--src`` is a checkout of github EvolvingLMMs-Lab/ParaVT at cf55249e391004b5aafea3f19cf5580d3517cb43;
``--qvu`` holds qwen-vl-utils 0.0.14 (the version requirements/eval.lock pins; ``pip download --no-deps
qwen-vl-utils==0.0.14`` and unzip); ``--torchvision`` holds torchvision 0.25.0, eval.lock's pin (``pip download
--no-deps torchvision==0.25.0`` and unzip; it is not installed: its wheel requires torch 2.10 and its CUDA-linked
``_C`` cannot load beside the CPU torch, so its operators are declared by schema only — nothing here calls one;
torchvision 0.28, the match of the venv's torch 2.13, no longer has ``io.read_video``, the fallback's reader).
Stand-ins: ``openai`` (the client is scripted), ``torchcodec`` (a decoder reporting the drawn geometry that
refuses an index outside the video, as torchcodec does, and returns black frames), torchvision's resize on
those black frames (a spy that records the size asked and returns zeros: no pixel is recorded; on the real
fixture files of crop_frames_torchvision torchvision's own resize runs), and in ``eval_one`` the two frame
readers ``utils.get_frames`` / ``utils.crop_frames`` are spies that record the window asked for and return no
frames (the cases record how replies are read, which does not depend on the pixels). The kind
crop_frames_torchvision runs the release's crop_frames on real lossless H.264 files (PyAV decodes them through
torchvision 0.25's own ``read_video``) whose frames carry their index as a colour, for the windows torchcodec
refuses. Writes ``tests/reference/generated/paravt/cases.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import types
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SRC, examples, outcome, write_cases  # noqa: E402
from release_import import Anything, stub  # noqa: E402
from reply_strategies import JSON_VALUE, NUMBER, TEXT, numeric_text  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

COMMIT = "cf55249e391004b5aafea3f19cf5580d3517cb43"


# ------------------------------------------------------------------------------------------------ strategies
def time_value() -> st.SearchStrategy:
    """What a model may put in start_time/end_time: numbers, numeric and clock strings, null, bools, lists."""
    return st.one_of(NUMBER, numeric_text(), st.none(), st.booleans(), st.lists(NUMBER, max_size=2),
                     st.dictionaries(TEXT, NUMBER, max_size=1))


def arguments() -> st.SearchStrategy:
    keys = st.sampled_from(["start_time", "end_time", "start", "end", "video_path", "fps", "Start_time"])
    return st.one_of(st.dictionaries(keys, time_value(), max_size=4), JSON_VALUE)


def call_object() -> st.SearchStrategy:
    name = st.one_of(st.just("crop_video"), TEXT)
    full = st.fixed_dictionaries({"name": name, "arguments": arguments()})
    partial = st.dictionaries(st.sampled_from(["name", "arguments", "args", "parameters"]),
                              st.one_of(name, arguments()), max_size=3)
    return st.one_of(full, full, partial, JSON_VALUE)


def call_body() -> st.SearchStrategy[str]:
    """A ``<tool_call>`` body: JSON (spaced or not), truncated JSON, single-quoted JSON, JSON5-ish, blanks."""
    dumped = call_object().map(json.dumps)
    return st.one_of(dumped, dumped, call_object().map(lambda c: json.dumps(c, indent=1)),
                     st.tuples(dumped, st.integers(0, 60)).map(lambda t: t[0][:t[1]]),
                     dumped.map(lambda s: s.replace('"', "'")), TEXT, st.just(""),
                     st.sampled_from(['{"name": "crop_video", "arguments": {"start_time": 1,}}',
                                      '{name: "crop_video"}', "NaN", "[1, 2]", '"text"', "null",
                                      '{"arguments": {"start_time": 1e400}}']))


def tool_code() -> st.SearchStrategy[str]:
    value = st.one_of(numeric_text(), NUMBER.map(str), numeric_text().map(lambda s: f'"{s}"'),
                      numeric_text().map(lambda s: f"'{s}'"))
    key = st.sampled_from(["start_time", "end_time", "start", "end", "video_path", "x", "start_time ", "2a"])
    pair = st.tuples(key, st.sampled_from(["=", " = ", "=="]), value).map("".join)
    args = st.lists(st.one_of(pair, pair, value), max_size=4).map(
        lambda xs: ", ".join(xs) if xs else "")
    name = st.sampled_from(["crop_video", "crop_video ", "Crop_video", "video_crop", "<|im_end|>crop_video", ""])
    close = st.sampled_from([")", ")", " )\n", "", "))"])
    return st.tuples(name, st.sampled_from(["(", "( "]), args, close).map("".join)


def segment() -> st.SearchStrategy[str]:
    return st.one_of(
        TEXT,
        call_body().map(lambda b: f"<tool_call>{b}</tool_call>"),
        call_body().map(lambda b: f"<tool_call>\n{b}\n</tool_call>"),
        call_body().map(lambda b: f"<tool_call>{b}"),  # unclosed
        tool_code().map(lambda b: f"<tool_code>{b}</tool_code>"),
        tool_code().map(lambda b: f"<tool_code>\n{b}\n</tool_code>"),
        st.sampled_from(["<answer>B</answer>", "<think>crop 3 s</think>", "</tool_call>", "<tool_call>",
                         "<tool_code></tool_code>", "<TOOL_CALL>{}</TOOL_CALL>", "\n", " "]))


REPLY = st.lists(segment(), min_size=0, max_size=5).map("".join)


def letter_text() -> st.SearchStrategy[str]:
    fragment = st.one_of(
        TEXT, st.sampled_from(list("ABCDEFGHIJKabcdj")),
        st.sampled_from(["<answer>", "</answer>", "answer", "Answer", "ANSWER", " is ", ":", " ", "\n", "(", ")",
                         ".", "The answer is ", "Answer: ", "answer:", "Definitely ", "option ", "I think ", "A.",
                         "(B)", "**C**", "é", "Ａ", "\t", "<answer> ", " </answer>", "None"]))
    return st.lists(fragment, max_size=8).map("".join)


# -------------------------------------------------------------------------------------------------- release
#: The release's own frame readers, kept before eval_one's spies replace them on the module.
REAL: dict = {}


class Geometry:
    """The video the torchcodec stand-in reports for the next decoder, and the indices it was asked for."""

    n_frames, fps, height, width = 480, 4.0, 120, 160
    asked: list | None = None
    sizes: list = []


class VideoDecoder:
    """torchcodec's decoder: the drawn geometry's metadata; get_frames_at records the indices (refusing one
    outside the video, as torchcodec does) and returns black frames."""

    def __init__(self, path, num_ffmpeg_threads=0):
        self.metadata = types.SimpleNamespace(average_fps=Geometry.fps, num_frames=Geometry.n_frames)

    def get_frames_at(self, indices):
        import torch

        if any(not 0 <= i < Geometry.n_frames for i in indices):
            raise IndexError(f"frame index out of bounds: {indices}")
        Geometry.asked = list(indices)
        frame = torch.zeros((1, 3, Geometry.height, Geometry.width), dtype=torch.uint8)
        return types.SimpleNamespace(data=frame.expand(len(indices), -1, -1, -1))  # one frame's memory


class Functional:
    """A spy on torchvision's resize: records the size asked for; on the real frames of a fixture file
    (``real``) it runs torchvision's own resize, otherwise it returns zeros of the size (a side of 0 is refused,
    as torch's interpolate refuses it), so the overview of a drawn 4K, 3-hour geometry costs nothing."""

    resize_of_torchvision = None
    real = False

    @staticmethod
    def resize(video, size, interpolation=None, antialias=True):
        import torch

        Geometry.sizes.append(list(size))
        if Functional.real:
            return Functional.resize_of_torchvision(video, size, interpolation=interpolation, antialias=antialias)
        if min(size) <= 0:
            raise RuntimeError(f"Input and output sizes should be greater than 0, but got {size}")
        return torch.zeros((1, video.shape[1], *size)).expand(video.shape[0], -1, -1, -1)


#: torchvision's compiled operators, declared by schema only: the PyPI wheel of the release's torchvision
#: (0.25.0, CUDA-linked) cannot load its ``_C`` beside the CPU torch here, and its module registers a fake for
#: ``torchvision::nms`` at import. Nothing the cases run calls an operator (read_video is PyAV, resize is torch).
OPERATOR_SCHEMAS: list = []


def load_torchvision(path: Path) -> None:
    """The release's torchvision (``path``: the unpacked 0.25.0 wheel) with the resize spied on."""
    import torch

    library = torch.library.Library("torchvision", "DEF")
    library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    OPERATOR_SCHEMAS.append(library)  # kept alive: dropping the library drops the schema
    sys.path.insert(0, str(path))
    import torchvision.transforms.functional as functional

    Functional.resize_of_torchvision = functional.resize
    functional.resize = Functional.resize


def load_release(src: Path, qvu: Path, torchvision: Path):
    """The release's ``paravt.eval.utils`` and ``paravt.eval.driver`` from ``src`` (qwen-vl-utils from ``qvu``,
    torchvision from ``torchvision``)."""
    import os

    os.environ["FORCE_QWENVL_VIDEO_READER"] = "torchcodec"  # read at import; the release's backend
    load_torchvision(torchvision)
    sys.path[:0] = [str(src), str(qvu)]
    stub("openai", OpenAI=Anything)
    stub("torchcodec.decoders", VideoDecoder=VideoDecoder)
    from paravt.eval import driver, utils
    REAL.update(get_frames=utils.get_frames, crop_frames=utils.crop_frames)
    return utils, driver


class ScriptedClient:
    """The OpenAI client as eval_one uses it: each completion returns the next scripted reply and is logged."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.log = list(replies), []
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self.create))

    def create(self, *, model, messages, max_tokens, temperature):
        self.log.append({"max_tokens": max_tokens, "n_messages": len(messages)})
        if not self.replies:
            raise RuntimeError("no scripted reply left")
        message = types.SimpleNamespace(content=self.replies.pop(0))
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


def run_eval_one(utils, driver, video: str, replies: list[str], is_mcq: bool, max_turns: int,
                 max_parallel: int) -> dict:
    """eval_one (agentic_general, nframes 64) on scripted replies: every completion's max_tokens, the windows
    crop_frames was asked for, and the result's pred / tool_calls / error."""
    crops: list[list[float]] = []
    utils.get_frames = lambda path, nframes=64: []
    utils.crop_frames = lambda path, st_, et, max_frames=16: crops.append([st_, et]) or []
    client = ScriptedClient(replies)
    sample = {"id": "q", "video_path": video, "question": "Which room? (A) hall (B) kitchen", "answer": "B",
              "is_mcq": is_mcq, "gt_start": 1.0, "gt_end": 2.0}
    result = driver.eval_one(client, "m", sample, 64, max_turns, "agentic_general", max_parallel)
    return {"max_tokens": [c["max_tokens"] for c in client.log], "crops": crops,
            "tool_calls": result.get("tool_calls"), "pred": result.get("pred"), "error": result.get("error")}


def read_frames(utils, video: str, geometry: tuple, window: tuple | None) -> dict:
    """utils.get_frames (window None: the 64-frame overview) or utils.crop_frames (window (st, et)) on a video
    of the drawn geometry: the indices torchcodec was asked for (None where it refused the window: the
    release then falls back to torchvision's decoder, which these cases do not run), the frames returned and
    the size they were resized to."""
    Geometry.n_frames, Geometry.fps, Geometry.height, Geometry.width = geometry
    Geometry.asked, Geometry.sizes = None, []
    get_frames, crop_frames = REAL["get_frames"], REAL["crop_frames"]  # eval_one's spies replace them on utils
    frames = get_frames(video, 64) if window is None else crop_frames(video, *window)
    return {"torchcodec_indices": Geometry.asked, "returned_frames": len(frames),
            "resize_hw": Geometry.sizes[-1] if Geometry.sizes else None}


#: The fixture files of the torchvision crops: frame count, rate (the 29.97 one as its exact fraction), size.
FIXTURES = ((480, "4", 120, 160), (50, "25", 120, 160), (64, "32", 120, 160), (600, "30000/1001", 120, 160),
            (300, "30", 72, 96))


def colour(index: int) -> tuple[int, int, int]:
    """Frame ``index``'s solid colour in a fixture: three base-10 digits, 24 levels apart (a resize that moves
    a level by a few units still names the frame)."""
    return tuple((index // 10 ** k) % 10 * 24 + 12 for k in range(3))


def frame_index(pixel) -> int:
    """The fixture frame whose colour ``pixel`` is (nearest level per digit)."""
    return sum(min(9, max(0, round((int(v) - 12) / 24))) * 10 ** k for k, v in enumerate(pixel))


def make_fixture(path: Path, n_frames: int, rate: str, height: int, width: int) -> None:
    """A real H.264 file (libx264rgb, lossless) whose frame i is :func:`colour` (i)."""
    import subprocess

    import numpy as np

    encoder = subprocess.Popen(["ffmpeg", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
                                f"{width}x{height}", "-r", rate, "-i", "-", "-c:v", "libx264rgb", "-qp", "0",
                                "-preset", "ultrafast", str(path)], stdin=subprocess.PIPE)
    for i in range(n_frames):
        encoder.stdin.write(np.full((height, width, 3), colour(i), np.uint8).tobytes())
    encoder.stdin.close()
    if encoder.wait():
        raise RuntimeError(f"ffmpeg could not write {path}")


def stream_time_base(path: Path) -> str:
    """The video stream's time base (the unit torchvision's read_video rounds the window's bounds to)."""
    import av

    with av.open(str(path)) as container:
        return str(container.streams.video[0].time_base)


def torchvision_crop(utils, qvu, path: Path, fixture: tuple, start, end) -> dict:
    """utils.crop_frames on a real fixture file: the torchcodec indices (its decoder a stand-in over the file's
    geometry; None where calculate_video_frame_range refuses the window), and where torchcodec refused, the
    frames torchvision.io.read_video decoded (by colour; None where it raised) and the frames crop_frames
    returned (by colour), with the size they were resized to — torchvision's own read_video and resize."""
    n_frames, rate, height, width = fixture
    Geometry.n_frames, Geometry.fps = n_frames, float(Fraction(rate))
    Geometry.height, Geometry.width, Geometry.asked, Geometry.sizes = height, width, None, []
    decoded: dict = {"frames": None}
    read_video = qvu.io.read_video

    def spy(*args, **kwargs):
        video, audio, info = read_video(*args, **kwargs)
        decoded["frames"] = [frame_index(frame[:, 0, 0].tolist()) for frame in video]
        return video, audio, info

    qvu.io.read_video, Functional.real = spy, True
    try:
        frames = REAL["crop_frames"](str(path), start, end)
    finally:
        qvu.io.read_video, Functional.real = read_video, False
    return {"torchcodec_indices": Geometry.asked, "torchvision_decoded": decoded["frames"],
            "returned_indices": [frame_index(f.getpixel((0, 0))) for f in frames] if Geometry.asked is None else None,
            "returned_frames": len(frames), "resize_hw": Geometry.sizes[-1] if Geometry.sizes else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SRC / "paravt")
    parser.add_argument("--qvu", type=Path, default=SRC / "qvu")
    parser.add_argument("--torchvision", type=Path, default=SRC / "_pydeps_b",
                        help="the unpacked torchvision 0.25.0 wheel (requirements/eval.lock's pin)")
    parser.add_argument("--n", type=int, default=600, help="draws per kind (duplicates are dropped)")
    args = parser.parse_args()
    utils, driver = load_release(args.src, args.qvu, args.torchvision)
    import qwen_vl_utils.vision_process as qvu
    import logging
    logging.disable(logging.CRITICAL)

    kinds: dict[str, list[dict]] = {}
    kinds["parse_time_val"] = [{"input": {"value": v}, "output": outcome(lambda: utils.parse_time_val(v))}
                               for v in examples(time_value(), args.n)]
    kinds["extract_letter"] = [{"input": {"text": t}, "output": outcome(lambda: utils.extract_letter(t))}
                               for t in examples(letter_text(), args.n)]
    replies = examples(REPLY, args.n * 2)
    kinds["parse_tool_calls"] = [{"input": {"reply": r}, "output": outcome(lambda: driver.parse_tool_calls(r))}
                                 for r in replies]
    with tempfile.NamedTemporaryFile(suffix=".mp4") as video:
        kinds["eval_one_calls"] = [
            {"input": {"reply": r, "max_parallel": p},
             "output": run_eval_one(utils, driver, video.name, [r, "<answer>B</answer>"], True, 3, p)}
            for r, p in examples(st.tuples(REPLY, st.sampled_from([5, 5, 5, 1, 2, 0])), args.n)]
        call = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 4}}</tool_call>'
        finals = st.one_of(st.just(""), st.just(call), letter_text())
        kinds["forced_turn"] = [
            {"input": {"is_mcq": mcq, "max_turns": turns, "tool_turns": tools, "final": final},
             "output": run_eval_one(utils, driver, video.name, [call] * tools + [final] * 6, mcq, turns, 5)}
            for mcq, turns, tools, final in examples(st.tuples(st.booleans(), st.integers(0, 4), st.integers(0, 5),
                                                           finals), 200)]
    geometry = st.tuples(st.one_of(st.integers(1, 400_000), st.sampled_from([1, 2, 63, 64, 65, 480, 1800, 324000])),
                         st.one_of(st.floats(0.5, 120), st.sampled_from([1.0, 4.0, 25.0, 29.97002997002997, 30.0])),
                         st.sampled_from([120, 180, 360, 720, 1080, 32]), st.sampled_from([160, 320, 640, 1280, 1920, 4000]))
    with tempfile.NamedTemporaryFile(suffix=".mp4") as video:
        kinds["overview_frames"] = [
            {"input": {"video": dict(zip(("n_frames", "avg_fps", "height", "width"), g))},
             "output": read_frames(utils, video.name, g, None)} for g in examples(geometry, args.n // 2)]
        bound = st.one_of(st.floats(-5, 4000, allow_nan=False), st.integers(-3, 500), numeric_text().map(
            utils.parse_time_val), st.sampled_from([0.0, 0.1, 0.3, 10.01, 10.05, 119.99, 120.0, float("inf")]))
        small = st.tuples(st.sampled_from([480, 1800, 600, 50, 64]), st.sampled_from([4.0, 30.0, 29.97002997002997,
                                                                                       25.0, 32.0]),
                          st.just(120), st.sampled_from([160, 320, 4000]))
        # windows inside the video (the torchcodec path) twice as often as drawn bounds (mostly refused)
        valid = st.tuples(st.one_of(small, geometry), st.floats(0, 1), st.floats(0, 60)).map(
            lambda t: (t[0], t[1] * t[0][0] / t[0][1], t[1] * t[0][0] / t[0][1] + t[2]))
        kinds["crop_frames"] = [
            {"input": {"video": dict(zip(("n_frames", "avg_fps", "height", "width"), g)), "start": a, "end": b},
             "output": read_frames(utils, video.name, g, (a, b))}
            for g, a, b in examples(st.one_of(st.tuples(st.one_of(small, small, geometry), bound, bound), valid, valid),
                                args.n)]
    # windows torchcodec refuses (first frame not before the last): between two frames, reversed, past the end,
    # before the start, at the bounds; drawn on real files, the rest of the draws (accepted) left out
    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / f"fixture{k}.mp4" for k in range(len(FIXTURES))]
        for path, fixture in zip(paths, FIXTURES):
            make_fixture(path, *fixture)
        rate = {k: float(Fraction(f[1])) for k, f in enumerate(FIXTURES)}
        time_base = {k: stream_time_base(path) for k, path in enumerate(paths)}
        duration = {k: FIXTURES[k][0] / rate[k] for k in rate}
        start = st.one_of(st.floats(-2, 200, allow_nan=False), st.integers(-1, 130),
                          st.sampled_from([0.0, 0.1, 10.01, 2.0, 1.99, 15.0, 16.0, 20.0, 119.99, 120.0, 125.0]))
        delta = st.one_of(st.floats(-3, 0.3, allow_nan=False), st.sampled_from([0.0, 0.01, 0.04, 0.05, -1.0, 1.0]))
        window = st.one_of(
            st.tuples(st.integers(0, len(FIXTURES) - 1), start, delta).map(lambda t: (t[0], t[1], t[1] + t[2])),
            st.tuples(st.integers(0, len(FIXTURES) - 1), st.floats(0, 1), delta).map(
                lambda t: (t[0], t[1] * duration[t[0]], t[1] * duration[t[0]] + t[2])),
            st.tuples(st.integers(0, len(FIXTURES) - 1), start, start),
            # across one frame boundary, starting between two frames: torchcodec's first and last frame are
            # the same one; torchvision decodes it and the frame before
            st.tuples(st.integers(0, len(FIXTURES) - 1), st.integers(0, 700), st.floats(0.01, 0.99),
                      st.floats(0, 0.99)).map(lambda t: (t[0], (t[1] % FIXTURES[t[0]][0] + t[2]) / rate[t[0]],
                                                         (t[1] % FIXTURES[t[0]][0] + 1 + t[3]) / rate[t[0]])))
        kinds["crop_frames_torchvision"] = [
            {"input": {"video": dict(zip(("n_frames", "avg_fps", "height", "width", "time_base"),
                                         (FIXTURES[k][0], rate[k], *FIXTURES[k][2:], time_base[k]))),
                       "start": a, "end": b},
             "output": out}
            for k, a, b in examples(window, args.n)
            if (out := torchvision_crop(utils, qvu, paths[k], FIXTURES[k], a, b))["torchcodec_indices"] is None]
    size = st.one_of(st.integers(-2, 40), st.integers(1, 5000), st.sampled_from([0, 1, 27, 28, 29, 56, 14, 3]))
    pixels = st.one_of(st.integers(0, 2_000_000), st.sampled_from([784, 50176, 100352, 602112, 15680]))
    kinds["qvu_smart_resize"] = [
        {"input": {"height": h, "width": w, "factor": f, "min_pixels": lo, "max_pixels": hi},
         "output": outcome(lambda: qvu.smart_resize(h, w, f, lo, hi))}
        for h, w, f, lo, hi in examples(st.tuples(size, size, st.sampled_from([28, 28, 14, 32, 56, 1]), pixels, pixels),
                                    args.n)]
    ele_value = st.one_of(st.integers(-2, 1000), st.floats(-1, 100, allow_nan=False), st.just(float("nan")))
    # the callers pass nframes or fps, never both (qwen-vl-utils asserts that)
    ele = st.dictionaries(st.sampled_from(["nframes", "fps", "min_frames", "max_frames"]), ele_value,
                          max_size=3).filter(lambda e: not ("fps" in e and "nframes" in e))
    fps = st.one_of(st.floats(0.1, 120), st.sampled_from([1, 2, 4, 25, 29.97002997002997, 30, 0.5]))
    kinds["qvu_smart_nframes"] = [
        {"input": {"ele": e, "total_frames": n, "video_fps": f}, "output": outcome(lambda: qvu.smart_nframes(e, n, f))}
        for e, n, f in examples(st.tuples(ele, st.integers(0, 200_000), fps), args.n)]
    bound = st.one_of(st.none(), st.floats(-5, 5000, allow_nan=False), st.integers(-3, 4000),
                      st.sampled_from([0.0, 0.1, 0.3, 10.01, 10.05, 119.99, 120.0]))
    kinds["qvu_frame_range"] = [
        {"input": {"video_start": s, "video_end": e, "total_frames": n, "video_fps": f},
         "output": outcome(lambda: qvu.calculate_video_frame_range({"video_start": s, "video_end": e}, n, f))}
        for s, e, n, f in examples(st.tuples(bound, bound, st.one_of(st.integers(-1, 200_000), st.just(480)),
                                         st.one_of(fps, st.just(0), st.just(-1))), args.n)]
    print(write_cases("paravt", {"release": "github EvolvingLMMs-Lab/ParaVT", "commit": COMMIT,
                              "qwen_vl_utils": "0.0.14"}, kinds))


if __name__ == "__main__":
    main()

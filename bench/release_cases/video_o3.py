"""Video-o3's differential cases (issue 60): the release's own functions at a6e0973 on Hypothesis-drawn inputs.

    python bench/release_cases/video_o3.py [--src /work/wt/_src/video_o3] [--n 600]

``--src`` is a checkout of github ZZQ987/Video-o3-Qwen3VL at a6e0973c6e5c8a8478c9ea7aa05304dfa247b2ea (its
``Eval/`` folder is enough). The modules are imported as the package ``vlmeval`` without running its
``__init__`` (which imports every model of the kit); stand-ins: ``torch``'s and ``transformers``' names that
model.py imports at module level, ``torchvision``, and the kit's ``smp`` / ``base`` / ``dataset`` helpers —
none of them is used by the functions called: ``VideoO3Chat.extract_grounding_info`` (no ``self`` state),
``dataset/utils/videomme.py`` ``extract_characters_regex`` and the release's own ``vision_process.py``
(``smart_resize``, ``smart_nframes``, ``calculate_video_frame_range``). Writes
``tests/reference/generated/video_o3/cases.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import copy
import json
import logging
import os
import re
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SRC, examples, outcome, write_cases  # noqa: E402
from release_import import Anything, failure, package, stub  # noqa: E402
from reply_strategies import JSON_VALUE, NUMBER, TEXT, numeric_text  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

COMMIT = "a6e0973c6e5c8a8478c9ea7aa05304dfa247b2ea"


def load_release(src: Path):
    os.environ["FORCE_QWENVL_VIDEO_READER"] = "decord"  # read at import: the decord stand-in below
    stub("decord", VideoReader=VideoReader)
    kit = src / "Eval" / "vlmeval"
    for name in ("transformers", "torchvision", "torchvision.io", "torchvision.transforms"):
        stub(name)
    stub("transformers", StoppingCriteria=object, StoppingCriteriaList=list, DynamicCache=Anything,
         StaticCache=Anything)
    stub("torchvision.transforms", InterpolationMode=Anything(), functional=Resize)
    package("vlmeval", kit)
    package("vlmeval.vlm", kit / "vlm")
    package("vlmeval.vlm.video_o3", kit / "vlm" / "video_o3")
    package("vlmeval.dataset", kit / "dataset")
    package("vlmeval.dataset.utils", kit / "dataset" / "utils")
    stub("vlmeval.vlm.base", BaseModel=object)
    stub("vlmeval.smp", get_gpu_memory=Anything(), listinstr=lambda words, s: any(w in s for w in words),
         __all__=[])
    stub("vlmeval.dataset", DATASET_MODALITY=Anything())
    stub("vlmeval.dataset.utils.multiple_choice", extract_answer_from_item=Anything())
    import vlmeval.dataset.utils.videomme as videomme
    import vlmeval.vlm.video_o3.model as model
    import vlmeval.vlm.video_o3.vision_process as vision
    logging.disable(logging.CRITICAL)
    return model, videomme, vision


class VideoReader:
    """decord's reader over the ``pv`` geometry (480 frames, 4 fps, 160×120): black frames for the indices
    asked (the crop's pixels do not change how a reply is read)."""

    def __init__(self, path, ctx=None, num_threads=0):
        pass

    def __len__(self):
        return 480

    def get_avg_fps(self):
        return 4.0

    def get_batch(self, indices):
        import numpy as np

        frames = np.zeros((len(indices), 120, 160, 3), dtype=np.uint8)
        return type("Batch", (), {"asnumpy": lambda self: frames})()


class Resize:
    """torchvision's ``transforms.functional.resize`` stand-in: a zero tensor of the size asked (a side of 0
    refused, as torch's interpolate refuses it); the shape it was given and the size asked are kept, and with
    ``shared`` set the frames share one zero frame's memory (a 768-frame main video stays small)."""

    asked: tuple | None = None
    shared = False

    @staticmethod
    def resize(video, size, interpolation=None, antialias=True):
        import torch

        Resize.asked = (list(video.shape), list(size))
        if min(size) <= 0:
            raise RuntimeError(f"Input and output sizes should be greater than 0, but got output size {size}")
        if Resize.shared:
            return torch.zeros((1, video.shape[1], *size)).expand(video.shape[0], -1, -1, -1)
        return torch.zeros((video.shape[0], video.shape[1], *size))


def main_video_sizes(model, vision, folder: Path, height: int, width: int, n_frames: int) -> dict:
    """The main video as generate_inner_transformers_tools prepares it (Qwen2.5-VL variant): ``_prepare_content``
    on a list of ``n_frames`` JPEG frame paths of ``width`` × ``height`` (the chat's pixel settings as the config
    sets them), then ``process_vision_info``: every frame's size after ``fetch_image`` (all frames are alike),
    the frame count after the even padding, and the size the whole video is resized to."""
    from PIL import Image

    path = folder / f"{width}x{height}.jpg"
    if not path.exists():
        Image.new("RGB", (width, height), (90, 120, 150)).save(path)
    chat = model.VideoO3Chat.__new__(model.VideoO3Chat)
    for key, value in {"min_pixels": 20 * 784, "max_pixels": 768 * 784, "total_pixels": 16384 * 784,
                       "patch_size": 14, "use_dynamic_quota": True, "crop_quota": (2048, 4096, 6144)}.items():
        setattr(chat, key, value)
    Resize.asked, Resize.shared = None, True
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            content = chat._prepare_content([{"type": "video", "value": [str(path)] * n_frames}])
            videos = vision.process_vision_info([[{"role": "user", "content": content}]])[1]
        shape, size = Resize.asked
        return {"value": {"per_frame_hw": shape[2:], "padded_frames": shape[0], "video_hw": size,
                          "returned_shape": list(videos[0].shape)}}
    except Exception as exc:  # noqa: BLE001 - the release refusing the frames is an outcome
        return failure(exc)
    finally:
        Resize.shared = False


class Tokens:
    """The processor, tokenizer and model generate() as generate_inner_transformers_tools uses them: each
    generation returns the next scripted reply — cut after the first ``</grounding>`` / ``</answer>`` when the
    keyword criterion is set, as the real generation stops there — and every generation's messages are kept."""

    def __init__(self, replies: list[str]) -> None:
        import torch

        self.replies, self.sent, self.torch = list(replies), [], torch
        self.tokenizer = self
        self.video_token_id, self.bos_token_id = -1, None

    # processor
    def apply_chat_template(self, conversations, tokenize=False, add_generation_prompt=True, chat_template=None):
        self.sent.append(copy.deepcopy(conversations[0]))
        return "text"

    def __call__(self, *keyword, text=None, images=None, videos=None, padding=True, return_tensors="pt",
                 **kwargs):
        if not keyword:
            inputs = {"input_ids": self.torch.zeros((1, 3), dtype=self.torch.long)}
            return type("Inputs", (dict,), {"to": lambda self, device: self,
                                            "input_ids": property(lambda self: self["input_ids"])})(inputs)
        return type("Ids", (), {"input_ids": [7]})()  # the keyword criterion tokenising its keywords

    # tokenizer
    def decode(self, ids, skip_special_tokens=True, clean_up_tokenization_spaces=False):
        return self.current

    def batch_decode(self, ids, skip_special_tokens=True):
        return [self.current]

    # model
    def generate(self, input_ids=None, stopping_criteria=None, **kwargs):
        reply = self.replies.pop(0) if self.replies else "<answer>Z</answer>"
        if stopping_criteria is not None:
            ends = [reply.find(k) + len(k) for k in ("</grounding>", "</answer>") if k in reply]
            reply = reply[:min(ends)] if ends else reply
        self.current = reply
        return type("Out", (), {"sequences": [list(input_ids[0].tolist()) + [1]]})()


def read_replies(model, replies: list[str], max_turn: int) -> dict:
    """generate_inner_transformers_tools on a text-only question with a raw video (the ``pv`` geometry), the
    generations scripted: the final response (its [TURN_COUNT…] trailer removed), the number of generations,
    and what each later generation was sent beyond the first: per message its role, the prompt role of a
    user text (O4 crop, O5 error, O6 forced crop, O6b forced error) with the error_info an error carries, and
    a crop's window."""
    chat = model.VideoO3Chat.__new__(model.VideoO3Chat)
    tokens = Tokens(replies)
    for key, value in {"model_path": "video-o3", "is_qwen3vl": False, "system_prompt": "S", "max_turn": max_turn,
                       "generate_kwargs": {}, "post_process": False, "processor": tokens, "model": tokens,
                       "min_pixels": 20 * 784, "max_pixels": 768 * 784, "total_pixels": 16384 * 784,
                       "patch_size": 14, "use_dynamic_quota": True, "crop_quota": (2048, 4096, 6144)}.items():
        setattr(chat, key, value)
    roles = [("O6b", model.FORCE_FINAL_ANSWER_PROMPT_ERROR_INFO), ("O5", model.ERROR_INFO_MULTI_TURN_PROMPT),
             ("O6", model.FORCE_FINAL_ANSWER_PROMPT), ("O4", model.TOOL_CALL_CROP_VIDEO_MULTI_TRUN_PROMPT_MC)]

    def role_of(text: str) -> dict:
        for role, template in roles:
            pieces = re.split(r"\{(\w+)(?::[^}]*)?\}", template)  # text, field, text, field, …, text
            pattern = "".join(re.escape(piece) if i % 2 == 0 else f"(?P<{piece}>.*?)" for i, piece in enumerate(pieces))
            found = re.fullmatch(pattern, text, re.DOTALL)
            if found:
                return {"prompt": role, **found.groupdict()}
        return {"prompt": "?"}

    message = [{"type": "text", "value": "Which room?"}, {"type": "raw_video", "value": "file:///videos/pv.mp4"}]
    with contextlib.redirect_stdout(io.StringIO()):
        response = chat.generate_inner_transformers_tools(message)
    final = response.split("\n[TURN_COUNT:")[0]
    later = []
    for sent in tokens.sent[1:]:
        added = []
        for m in sent[2:]:
            if m["role"] == "assistant":
                added.append({"role": "assistant", "text": m["content"]})
                continue
            item = {"role": "user"}
            content = m["content"]
            for part in ([{"type": "text", "text": content}] if isinstance(content, str) else content):
                if part["type"] == "text":
                    item.update(role_of(part["text"]))
                elif part["type"] == "video":
                    item["crop"] = [part["video_start"], part["video_end"], part["sampling_strategy"]]
            added.append(item)
        later.append(added)
    return {"final_response": final, "generations": len(tokens.sent), "sent_after_first": later[:1]}


# ------------------------------------------------------------------------------------------------ strategies
def segment_value() -> st.SearchStrategy:
    return st.one_of(NUMBER, numeric_text(), st.none(), st.booleans(), st.lists(NUMBER, max_size=2))


def grounding_json() -> st.SearchStrategy[str]:
    strategy = st.one_of(st.sampled_from(["coarse", "medium", "fine", "Medium", "", "ultra"]), JSON_VALUE)
    segment = st.one_of(st.lists(segment_value(), min_size=0, max_size=3), JSON_VALUE)
    body = st.dictionaries(st.sampled_from(["temporal_segment", "sampling_strategy", "reason", "Temporal_segment"]),
                           st.one_of(segment, strategy), max_size=3)
    full = st.fixed_dictionaries({"temporal_segment": segment, "sampling_strategy": strategy})
    dumped = st.one_of(full, full, body).map(json.dumps)
    return st.one_of(dumped, dumped.map(lambda s: s.replace('"', "'")),
                     st.tuples(dumped, st.integers(0, 60)).map(lambda t: t[0][:t[1]]),
                     dumped.map(lambda s: s + "}"), dumped.map(lambda s: "{" + s), TEXT,
                     st.sampled_from(['{"temporal_segment": [1, 2], "sampling_strategy": "medium",}',
                                      "{'temporal_segment': [3.5, 7], 'sampling_strategy': 'fine'}",
                                      '{"temporal_segment": [1, 2], "sampling_strategy": "it\'s fine"}',
                                      '{"temporal_segment": (1, 2), "sampling_strategy": "fine"}',
                                      '{"temporal_segment": [NaN, Infinity], "sampling_strategy": "fine"}',
                                      '{}', '{ }', '}{']))


def near_valid_grounding() -> st.SearchStrategy[str]:
    """A grounding block a model would write, with the edges of each field: times inside and around the
    120-s ``pv`` clip as numbers, numeric strings (spaces, underscores, exponents, non-ASCII digits), bools
    and nulls; a strategy from the three (other cases too); extra keys; single quotes; text around the JSON."""
    second = st.one_of(st.integers(-5, 130), st.floats(-1, 130), st.sampled_from([0, 0.1, 10, 20, 119.9, 120, 121]))
    time = st.one_of(second, second, second.map(str), second.map(lambda v: f" {v} "),
                     st.sampled_from(["1_0", "1e1", "١٠", "２０", "nan", "inf", "10s", "", None, True, False]))
    strategy = st.one_of(st.sampled_from(["coarse", "medium", "fine"]),
                         st.sampled_from(["Medium", " fine", "fine ", "", "ultra", None, 1]))
    body = st.fixed_dictionaries({"temporal_segment": st.one_of(st.tuples(time, time).map(list), st.tuples(time, time)),
                                  "sampling_strategy": strategy},
                                 optional={"reason": TEXT, "confidence": NUMBER})
    dumped = st.one_of(body.map(json.dumps), body.map(lambda b: json.dumps(b).replace('"', "'")),
                       body.map(lambda b: json.dumps(b, indent=2)))
    inside = st.tuples(st.sampled_from(["", " ", "\n", "JSON: ", "{", "segment "]), dumped,
                       st.sampled_from(["", " ", "\n", " }", " end", "}"])).map("".join)
    return inside.map(lambda b: f"<grounding>{b}</grounding>")


def reply() -> st.SearchStrategy[str]:
    segment = st.one_of(
        TEXT, near_valid_grounding(), near_valid_grounding(), near_valid_grounding(),
        grounding_json().map(lambda b: f"<grounding>{b}</grounding>"),
        st.tuples(TEXT, grounding_json(), TEXT).map(lambda t: f"<grounding>{t[0]}{t[1]}{t[2]}</grounding>"),
        grounding_json().map(lambda b: f"<grounding>\n{b}\n"),
        st.sampled_from(["<grounding>", "</grounding>", "<answer>B</answer>", "<answer>", "</answer>",
                         "<think>look</think>", "\n", " ", "<Grounding>{}</Grounding>"]))
    return st.one_of(near_valid_grounding(), st.lists(segment, max_size=4).map("".join))


def prediction() -> st.SearchStrategy[str]:
    fragment = st.one_of(
        TEXT, st.sampled_from(list("ABCDEabcd")),
        st.sampled_from(["The best answer is", "The correct answer is", "The answer is", "The answer",
                         "The best option is", "The correct option is", "Best answer:", "Best option:", "Answer:",
                         "Option:", " ", "\n", "(", ")", ".", "word ", "Definitely ", "**", "<answer>", "Ｂ"]))
    return st.lists(fragment, max_size=16).map("".join)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SRC / "video_o3")
    parser.add_argument("--n", type=int, default=600)
    args = parser.parse_args()
    model, videomme, vision = load_release(args.src)
    extract = lambda r: model.VideoO3Chat.extract_grounding_info(None, r)  # noqa: E731 - no self state used
    kinds: dict[str, list[dict]] = {}
    kinds["grounding_parse"] = [{"input": {"reply": r}, "output": outcome(lambda: extract(r))}
                                for r in examples(reply(), args.n * 2)]
    kinds["videomme_extract"] = [{"input": {"prediction": p}, "output": outcome(lambda: videomme.extract_characters_regex(p))}
                                 for p in examples(prediction(), args.n)]
    size = st.one_of(st.integers(-2, 40), st.integers(1, 5000), st.sampled_from([0, 1, 27, 28, 56, 360, 640, 1080]))
    pixels = st.one_of(st.integers(0, 2_000_000), st.sampled_from([15680, 16464, 602112, 784 * 2048]))
    kinds["vp_smart_resize"] = [
        {"input": {"height": h, "width": w, "factor": f, "min_pixels": lo, "max_pixels": hi},
         "output": outcome(lambda: vision.smart_resize(h, w, f, lo, hi))}
        for h, w, f, lo, hi in examples(st.tuples(size, size, st.sampled_from([28, 28, 56, 14]), pixels, pixels),
                                    args.n)]
    fps = st.one_of(st.floats(0.1, 120), st.sampled_from([1, 2, 4, 25, 29.97002997002997, 30, 0.5]))
    bound = st.one_of(st.none(), st.floats(-5, 5000, allow_nan=False), st.integers(-3, 4000),
                      st.sampled_from([0.0, 0.04, 10.0, 10.04, 11.0, 40.0, 119.99, 120.0]))
    kinds["vp_frame_range"] = [
        {"input": {"video_start": s, "video_end": e, "total_frames": n, "video_fps": f},
         "output": outcome(lambda: vision.calculate_video_frame_range({"video_start": s, "video_end": e}, n, f))}
        for s, e, n, f in examples(st.tuples(bound, bound, st.one_of(st.integers(-1, 200_000), st.just(480)),
                                         st.one_of(fps, st.just(0))), args.n)]
    drawn = examples(st.tuples(reply(), st.booleans()), args.n * 2)
    valid = '<grounding>{"temporal_segment": [10, 20], "sampling_strategy": "medium"}</grounding>'
    kinds["reply_reading"] = [
        {"input": {"reply": r, "forced_mode": forced},
         "output": read_replies(model, [valid, r] if forced else [r, "<answer>Z</answer>"], 1 if forced else 3)}
        for r, forced in drawn]
    # frames of every shape (thin, tiny, 4K) and counts up to the 768-frame cap, within a memory and decoding budget
    side = st.one_of(st.integers(1, 2000), st.sampled_from([1, 2, 27, 28, 55, 56, 57, 120, 360, 480, 720, 1080,
                                                            1280, 1920, 3840]))
    count = st.one_of(st.integers(1, 768), st.sampled_from([1, 2, 3, 41, 42, 43, 767, 768]))
    drawn = [(h, w, n) for h, w, n in examples(st.tuples(side, side, count), args.n // 2)
             if n * min(h * w, 602112) <= 40_000_000 and n * h * w <= 150_000_000]
    with tempfile.TemporaryDirectory() as folder:
        kinds["main_video_resize"] = [{"input": {"frame_height": h, "frame_width": w, "n_frames": n},
                                       "output": main_video_sizes(model, vision, Path(folder), h, w, n)}
                                      for h, w, n in drawn]
    print(write_cases("video_o3", {"release": "github ZZQ987/Video-o3-Qwen3VL", "commit": COMMIT}, kinds))


if __name__ == "__main__":
    main()

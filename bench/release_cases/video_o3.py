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
import json
import logging
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (JSON_VALUE, NUMBER, SRC, TEXT, Anything, draw, numeric_text, outcome,  # noqa: E402
                     package, stub, write)
from hypothesis import strategies as st  # noqa: E402

COMMIT = "a6e0973c6e5c8a8478c9ea7aa05304dfa247b2ea"


def load_release(src: Path):
    kit = src / "Eval" / "vlmeval"
    for name in ("transformers", "torchvision", "torchvision.io", "torchvision.transforms"):
        stub(name)
    stub("transformers", StoppingCriteria=object, StoppingCriteriaList=list, DynamicCache=Anything,
         StaticCache=Anything)
    stub("torchvision.transforms", InterpolationMode=Anything(), functional=Anything())
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


def reply() -> st.SearchStrategy[str]:
    segment = st.one_of(
        TEXT,
        grounding_json().map(lambda b: f"<grounding>{b}</grounding>"),
        st.tuples(TEXT, grounding_json(), TEXT).map(lambda t: f"<grounding>{t[0]}{t[1]}{t[2]}</grounding>"),
        grounding_json().map(lambda b: f"<grounding>\n{b}\n"),
        st.sampled_from(["<grounding>", "</grounding>", "<answer>B</answer>", "<answer>", "</answer>",
                         "<think>look</think>", "\n", " ", "<Grounding>{}</Grounding>"]))
    return st.lists(segment, max_size=4).map("".join)


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
    kinds["grounding_parse"] = [{"input": {"reply": r}, "output": outcome(extract, r)}
                                for r in draw(reply(), args.n * 2)]
    kinds["videomme_extract"] = [{"input": {"prediction": p}, "output": outcome(videomme.extract_characters_regex, p)}
                                 for p in draw(prediction(), args.n)]
    size = st.one_of(st.integers(-2, 40), st.integers(1, 5000), st.sampled_from([0, 1, 27, 28, 56, 360, 640, 1080]))
    pixels = st.one_of(st.integers(0, 2_000_000), st.sampled_from([15680, 16464, 602112, 784 * 2048]))
    kinds["vp_smart_resize"] = [
        {"input": {"height": h, "width": w, "factor": f, "min_pixels": lo, "max_pixels": hi},
         "output": outcome(vision.smart_resize, h, w, f, lo, hi)}
        for h, w, f, lo, hi in draw(st.tuples(size, size, st.sampled_from([28, 28, 56, 14]), pixels, pixels),
                                    args.n)]
    fps = st.one_of(st.floats(0.1, 120), st.sampled_from([1, 2, 4, 25, 29.97002997002997, 30, 0.5]))
    bound = st.one_of(st.none(), st.floats(-5, 5000, allow_nan=False), st.integers(-3, 4000),
                      st.sampled_from([0.0, 0.04, 10.0, 10.04, 11.0, 40.0, 119.99, 120.0]))
    kinds["vp_frame_range"] = [
        {"input": {"video_start": s, "video_end": e, "total_frames": n, "video_fps": f},
         "output": outcome(vision.calculate_video_frame_range, {"video_start": s, "video_end": e}, n, f)}
        for s, e, n, f in draw(st.tuples(bound, bound, st.one_of(st.integers(-1, 200_000), st.just(480)),
                                         st.one_of(fps, st.just(0))), args.n)]
    write("video_o3", {"repository": "ZZQ987/Video-o3-Qwen3VL", "commit": COMMIT}, kinds)


if __name__ == "__main__":
    main()

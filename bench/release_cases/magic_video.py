"""MAGIC-Video's deterministic kinds, computed by the release's own functions on Hypothesis-drawn inputs.

    python bench/release_cases/magic_video.py [--src /work/wt/_src/magic_video] [--n 400]

Needs a checkout of github lijiazheng0917/MAGIC-video at ``COMMIT``. Loads ``src/worldmm/memory/memory.py`` and
``src/worldmm/memory/visual/memory.py`` from it with stand-ins for the package imports they make but these
functions do not use (the LLM, embedding and sibling memory packages) and for ``decord`` (it reports a frame rate
and a frame count and returns black frames of the indices asked for). Writes
``tests/reference/generated/magic_video/``.

Kinds:
- ``extract_frames`` — ``VisualMemory._extract_frames(video, fps, max_frames, start_sec, end_sec)``: the frame
  indices decord is asked for (``[]`` where the release returns no frame, its exceptions included);
- ``time_reference_reply`` — ``parse_time_reference(query)`` with the time-extraction model's reply scripted:
  ``[start, end]`` or ``None``;
- ``qa_frame_budget`` — ``unified/memory.py`` ``UnifiedMemory.format_results`` over visual-clip nodes: each clip's
  frames under the per-clip cap and the total left (igraph 1.0.0 is imported by ``unified/graph.py``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import SRC, examples, outcome, write_cases  # noqa: E402

COMMIT = "0f2273f7f07360cc58588399553b5a6ea758b084"
RELEASE = {"release": "github lijiazheng0917/MAGIC-video", "commit": COMMIT}


class _Anything:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return _Anything


class Decord:
    """decord's VideoReader: the registered rate and frame count; ``get_batch`` records the indices asked for."""

    fps = 30.0
    frames = 0
    asked: list = []

    class VideoReader:
        def __init__(self, path, ctx=None):
            pass

        def get_avg_fps(self):
            return Decord.fps

        def __len__(self):
            return Decord.frames

        def get_batch(self, indices):
            import numpy as np

            Decord.asked.append(list(indices))
            return types.SimpleNamespace(asnumpy=lambda: np.zeros((len(indices), 2, 2, 3), dtype=np.uint8))


def load(src: Path) -> dict:
    package = src / "src" / "worldmm"
    for name, path in (("worldmm", package), ("worldmm.memory", package / "memory"),
                       ("worldmm.memory.visual", package / "memory" / "visual"),
                       ("worldmm.memory.unified", package / "memory" / "unified")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    stub = {"worldmm.llm": {"LLMModel": _Anything, "PromptTemplateManager": _Anything},
            "worldmm.embedding": {"EmbeddingModel": _Anything},
            "worldmm.memory.episodic": {"EpisodicMemory": _Anything, "CaptionEntry": _Anything},
            "worldmm.memory.semantic": {"SemanticMemory": _Anything, "SemanticTripleEntry": _Anything},
            "decord": {"VideoReader": Decord.VideoReader, "cpu": lambda n=0: None}}
    for name, attrs in stub.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    sys.modules["worldmm.memory.unified"].UnifiedMemory = _Anything  # the graph backend: not used here
    visual = importlib.import_module("worldmm.memory.visual.memory")
    sys.modules["worldmm.memory.visual"].VisualMemory = visual.VisualMemory
    utils = importlib.import_module("worldmm.memory.utils")
    del utils
    memory = importlib.import_module("worldmm.memory.memory")
    logging.disable(logging.CRITICAL)
    return {"visual": visual, "memory": memory}


def extract_frames(mods: dict, n: int, video: Path) -> list[dict]:
    from hypothesis import strategies as st

    seconds = st.one_of(st.floats(-10, 4000, allow_nan=False), st.sampled_from([0.0, 0.5, 10.0, 29.99, 30.0, 599.5,
                                                                                   600.0, float("inf"),
                                                                                   float("-inf")]),
                        st.integers(0, 700).map(float))
    strategy = st.fixed_dictionaries({
        "video_fps": st.one_of(st.sampled_from([30.0, 29.97002997002997, 25.0, 24.0, 1.0, 0.5, 60.0, 2.0, 0.0]),
                               st.floats(0.1, 120)),
        "n_frames": st.one_of(st.sampled_from([0, 1, 2, 16, 17, 600, 601, 18000]), st.integers(0, 40000)),
        "fps": st.sampled_from([1.0, 1.0, 1.0, 0.5, 2.0, 3.0]),
        "max_frames": st.sampled_from([16, 16, 64, 1, 2, 5]),
        "start_sec": seconds, "end_sec": seconds})
    cases = []
    extract = mods["visual"].VisualMemory._extract_frames
    for inp in examples(strategy, n):
        Decord.fps, Decord.frames, Decord.asked = inp["video_fps"], inp["n_frames"], []

        def run():
            frames = extract(object(), str(video), inp["fps"], inp["max_frames"], inp["start_sec"], inp["end_sec"])
            return {"indices": [f.frame_index for f in frames], "asked": Decord.asked}

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def qa_frame_budget(mods: dict, n: int, video: Path) -> list[dict]:
    """``UnifiedMemory.format_results`` over retrieved visual-clip nodes (no episode node: the release's branch
    then shows the clip's caption, empty here) with the release's ``VisualMemory._extract_frames``: each clip's
    frames under the per-clip cap and the 64-frame total, starting from the frames earlier rounds spent."""
    from hypothesis import strategies as st

    nodes = importlib.import_module("worldmm.memory.unified.nodes")
    unified = importlib.import_module("worldmm.memory.unified.memory")
    extract = mods["visual"].VisualMemory._extract_frames
    span = st.tuples(st.integers(0, 700).map(float), st.integers(0, 120).map(float)).map(lambda p: [p[0], p[0] + p[1]])
    strategy = st.fixed_dictionaries({
        "video_fps": st.sampled_from([30.0, 25.0, 1.0, 0.5, 29.97002997002997]),
        "n_frames": st.sampled_from([600, 18000, 21000, 30]), "clips": st.lists(span, min_size=0, max_size=8),
        "per_clip": st.sampled_from([16, 16, 4, 1]), "total": st.sampled_from([64, 64, 20, 0]),
        "used": st.sampled_from([0, 0, 10, 60, 64, 70])})
    cases = []
    for inp in examples(strategy, n):
        Decord.fps, Decord.frames = inp["video_fps"], inp["n_frames"]
        per_clip: list = []

        def extracting(**kwargs):
            frames = extract(object(), **kwargs)
            per_clip.append([kwargs["start_sec"], [f.frame_index for f in frames]])
            return frames

        results = [(nodes.GraphNode(id=f"vis_{k}", node_type=nodes.NodeType.VISUAL_CLIP, text="", start_ts=k,
                                    end_ts=k, metadata={"video_path": str(video), "start_sec": a, "end_sec": b}), 1.0)
                   for k, (a, b) in enumerate(inp["clips"])]
        memory = types.SimpleNamespace(_full_graph=None)

        def run():
            unified.UnifiedMemory.format_results(memory, results, types.SimpleNamespace(_extract_frames=extracting),
                                                 max_frames_per_clip=inp["per_clip"], max_total_frames=inp["total"],
                                                 _current_total_frames=inp["used"])
            return per_clip

        cases.append({"input": inp, "output": outcome(run)})
    return cases


def time_reference_reply(mods: dict, n: int) -> list[dict]:
    from hypothesis import strategies as st

    number = st.one_of(st.integers(-100, 100000), st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from(['"40"', '"x"', "null", "true", "[1]", '"1e3"', "NaN", "Infinity", "1e400"]))
    obj = st.builds(lambda s, e, order, extra: "{" + ", ".join(
        ([f'"start": {_num(s)}', f'"end": {_num(e)}'] if order else [f'"end": {_num(e)}', f'"start": {_num(s)}'])
        + extra) + "}", number, number, st.booleans(),
        st.lists(st.sampled_from(['"note": "x"', '"start_s": 1']), max_size=1))
    wrapped = st.builds(lambda pre, o, post: f"{pre}{o}{post}", st.sampled_from(["", " ", "\n", "```json\n",
                                                                                "Sure: ", "["]),
                        obj, st.sampled_from(["", " ", "\n", "\n```", ".", "]", " null"]))
    strategy = st.one_of(obj, wrapped, st.sampled_from(["null", " NULL ", "Null", "None", "", "   ", "nil", "{}",
                                                        '{"start": 1}', '{"end": 2}', "[]", "0", '"null"',
                                                        '{"start": 1, "end": 2}{"start": 3, "end": 4}']),
                         st.text(max_size=12))
    memory = mods["memory"]
    cases = []
    for reply in examples(strategy, n):
        memory._time_extract_llm = types.SimpleNamespace(generate=lambda prompt, r=reply: r)
        out = outcome(lambda: memory.parse_time_reference("what happens at 0:45"))
        if "value" in out and out["value"] is not None:
            out = {"value": list(out["value"])}
        cases.append({"input": {"reply": reply}, "output": out})
    return cases


def _num(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else \
            ("NaN" if value != value else ("Infinity" if value > 0 else "-Infinity"))
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=SRC / "magic_video")
    parser.add_argument("--n", type=int, default=400)
    args = parser.parse_args()
    mods = load(args.src.resolve())
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "video.mp4"
        video.write_bytes(b"")
        kinds = {"extract_frames": extract_frames(mods, args.n, video),
                 "time_reference_reply": time_reference_reply(mods, args.n),
                 "qa_frame_budget": qa_frame_budget(mods, args.n // 2, video)}
    path = write_cases("magic_video", RELEASE, kinds)
    print(path, {k: len(v) for k, v in kinds.items()})


if __name__ == "__main__":
    main()

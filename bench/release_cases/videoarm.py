"""VideoARM's differential cases (issue 60): the release's own modules, imported whole, on Hypothesis-drawn inputs.

    PYTHONHASHSEED=0 python bench/release_cases/videoarm.py [--src /work/wt/_src/videoarm_index] [--n 400]
        [--kinds K ...]

``--src`` is a checkout of github MILVLG/videoarm outside the repository: ``videoarm/__init__.py``,
``api/client.py``, ``config/model_config.py``, ``config/settings.py``, ``core/agent.py`` and ``video/utils.py``,
all at 195e325e8e57613afe2bdc98a0f1b1174f87a976 (the commit the vendored release cases pin). No ``fetch`` snapshot
of the repository can be had here, so the checkout is assembled from the code index, each file read whole
(``read_file``, paged until its ``total_chars``) with a MANIFEST.json of sha256 per file; this generator checks
those hashes before it imports anything.

The package is imported as the release defines it (``import videoarm`` runs its ``__init__``, which imports
``core.agent``, ``api.client``, ``config.*`` and ``video.utils``): ``VideoARMAgent`` is the release's class, built by
its own ``__init__`` on the release's own ``ModelConfig`` (its PIPELINE_CONFIG, checked equal to the vendored
cases' defaults; no VIDEOARM_* variable may be set). Stand-ins only for what the computation does not use:
``settings.TEMP_DIR`` / ``RESULTS_DIR`` pointed at a temporary folder (the release writes its frames there), and
the network model call ``call_openai_model_with_tools`` as ``agent.py`` bound it (the model "returns" the drawn
reply; the images it was given are recorded). API keys are never read by the stand-in. Frames: a real 3000-frame
30-fps MJPG clip read by real OpenCV, its metadata read by the release's own ``_initialize_video``; indices are
read from the ``frame_%06d.jpg`` names the release writes.

Before writing anything the generator reproduces every vendored VideoARM release case
(tests/reference/release_cases/videoarm: frame splits with their results and mosaic counts, reply parses, clip
ranges, mosaic layouts) and stops if one differs. ``--kinds`` regenerates the kinds named; every other kind keeps
its stored inputs, which are run again through the release and must give the stored outputs (else it stops).
Writes ``tests/reference/generated/videoarm/cases.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENERATED, REPO, SRC, examples, jsonable, write_cases  # noqa: E402
from release_import import failure  # noqa: E402
from reply_strategies import JSON_VALUE, NUMBER, TEXT, numeric_text  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


COMMIT = "195e325e8e57613afe2bdc98a0f1b1174f87a976"
VENDORED = json.loads((REPO / "tests/reference/release_cases/videoarm/cases.json").read_text(encoding="utf-8"))
DEFAULTS = VENDORED["pipeline_defaults_used"]
TOTAL, FPS = VENDORED["video_fixture"]["total_frames"], VENDORED["video_fixture"]["fps"]
KINDS = ["scene_snapper_split", "clip_reply", "clip_range", "mosaic_layout", "caption_reply", "error_like",
         "tool_arguments"]
PAD = "pad(black)"


class Model:
    """The stand-in for the network model call: answers ``reply`` and records the images it was sent."""

    reply = ""
    images: list[str] = []

    @classmethod
    def call(cls, **kwargs):
        cls.images = [str(p) for p in kwargs.get("image_paths") or []]
        return {"content": cls.reply, "tool_calls": None}


def checked_checkout(src: Path) -> None:
    """Every file of the checkout's MANIFEST.json is there with its sha256, at the pinned commit."""
    manifest = json.loads((src / "MANIFEST.json").read_text(encoding="utf-8"))
    for entry in manifest["files"]:
        data = (src / entry["path"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"] or len(data.decode("utf-8")) != entry["chars"]:
            raise SystemExit(f"{src / entry['path']}: not the file MANIFEST.json records")
        if entry["commit"] != COMMIT:
            raise SystemExit(f"{entry['path']} is at {entry['commit']}, not the pinned {COMMIT}")


def load_release(src: Path, tmp: Path, video: str):
    """The release's agent, imported whole from ``src``, on the clip ``video``."""
    if any(k.startswith("VIDEOARM_") for k in os.environ):
        raise SystemExit("unset the VIDEOARM_* variables: the release's config would read them")
    sys.path.insert(0, str(src))
    import videoarm.config.settings as settings

    settings.TEMP_DIR, settings.RESULTS_DIR = tmp / "frames", tmp / "results"  # before utils binds TEMP_DIR
    import videoarm
    import videoarm.core.agent as agent_module
    from videoarm.config.model_config import get_config

    assert Path(agent_module.__file__).resolve().is_relative_to(src.resolve()), agent_module.__file__
    if get_config().get_pipeline_config() != DEFAULTS:
        raise SystemExit(f"the release's PIPELINE_CONFIG {get_config().get_pipeline_config()} is not the vendored "
                         f"cases' {DEFAULTS}")
    agent_module.call_openai_model_with_tools = Model.call
    agent = videoarm.VideoARMAgent()
    agent._initialize_video(video)
    assert (agent.video_info["total_frames"], agent.video_info["fps"]) == (TOTAL, FPS), agent.video_info
    agent.session_id = "s"
    return agent


def make_video(path: Path) -> None:
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (32, 24))
    for i in range(TOTAL):
        writer.write(np.full((24, 32, 3), i % 256, dtype=np.uint8))
    writer.release()


def indices(paths) -> list[int]:
    return [int(re.search(r"frame_(\d+)\.jpg$", p).group(1)) for p in paths]


def snapper(agent, video: str, ranges: list[dict], num_frames) -> dict:
    """scene_snapper as the loop runs it: ``_scene_snapper`` (its frames reach ``_generate_scene_caption``, whose
    mosaics reach the model stand-in), then the frames attached for the controller — the loop's
    ``int(parsed_args.get("num_frames", 30))`` (None where that raises) and ``_attach_frames_to_messages``'s
    ``min(num_frames or limit, limit)``, then ``_extract_frames_proportional``."""
    spied = {}
    real = type(agent)._generate_scene_caption

    def spy(frame_ranges, frame_paths):
        spied["paths"] = list(frame_paths)
        return real(agent, frame_ranges, frame_paths)

    agent._generate_scene_caption = spy
    Model.reply, Model.images = "stub caption.", []
    out: dict = {}
    args = {"frame_ranges": ranges, "reason": "r"} | ({} if num_frames is None else {"num_frames": num_frames})
    try:
        result = agent._scene_snapper(video, ranges, "r", args.get("num_frames"))
        out["caption"] = {"indices": indices(spied.get("paths", [])), "error": result.get("error")}
        out["result"] = {k: result[k] for k in ("status", "frames_loaded", "total_duration", "caption", "message")
                         if k in result}
        out["mosaics"] = len(Model.images)
    except Exception as exc:  # noqa: BLE001
        out["caption"] = failure(exc)
    finally:
        del agent._generate_scene_caption
    try:
        shown = int(args.get("num_frames", 30))
    except Exception:  # noqa: BLE001
        shown = None
    limit = agent.config.get_pipeline_config("total_frames_limit")
    count = min(shown or limit, limit)
    try:
        out["controller"] = {"indices": indices(agent._extract_frames_proportional(
            video, ranges, total_frames=count, target_short_side=256, silent=True))}
    except Exception as exc:  # noqa: BLE001
        out["controller"] = failure(exc)
    return out


def clip(agent, video: str, frame_range, reply: str) -> dict:
    Model.reply = reply
    try:
        result = agent._clip_analyzer(video, frame_range, "what colour?", "r")
    except Exception as exc:  # noqa: BLE001
        return failure(exc)
    keep = ("error", "frame_range", "answer", "confidence", "sampled_frames")
    return {"value": jsonable({k: result[k] for k in keep if k in result})}


def colour(i: int) -> tuple[int, int, int]:
    """Frame i's solid BGR colour, as the vendored mosaic cases colour it (unique, never black)."""
    return 10 + 18 * i, 240 - 17 * i, (53 * i + 30) % 256


def mosaic(agent, folder: Path, frames: list) -> dict:
    """``_make_composite_grids`` on frame files: ``{"h", "w"}`` a solid-coloured PNG of that size (frame i in
    :func:`colour`), ``"missing"`` a path with no file, ``"corrupt"`` a file that is not an image. Each grid read
    back: its size, the tile size, and each tile row-major as ``frame<i>`` (its colour) or ``pad(black)``; or the
    paths handed back unchanged where no grid was made."""
    import cv2
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    paths = []
    for i, frame in enumerate(frames):
        path = folder / f"frame_{i:06d}.png"
        if isinstance(frame, dict):
            cv2.imwrite(str(path), np.full((frame["h"], frame["w"], 3), colour(i), dtype=np.uint8))
        elif frame == "corrupt":
            path.write_bytes(b"not an image")
        paths.append(str(path))
    try:
        grids = agent._make_composite_grids(paths)
    except Exception as exc:  # noqa: BLE001
        return failure(exc)
    by_colour = {colour(i): f"frame{i}" for i in range(len(frames))}
    out = []
    for grid_path in grids:
        if not str(grid_path).endswith(".png") or "_grid_" not in str(grid_path):
            return {"value": {"returned_paths": [Path(p).name for p in grids]}}
        grid = cv2.imread(str(grid_path))
        th, tw = grid.shape[0] // 2, grid.shape[1] // 3
        tiles = []
        for r in range(2):
            row = []
            for c in range(3):
                tile = grid[r * th:(r + 1) * th, c * tw:(c + 1) * tw].reshape(-1, 3)
                values = {tuple(int(v) for v in px) for px in np.unique(tile, axis=0)}
                only = next(iter(values)) if len(values) == 1 else None
                row.append(PAD if only == (0, 0, 0) else by_colour.get(only, "mixed"))
            tiles.append(row)
        out.append({"grid_hw": [int(grid.shape[0]), int(grid.shape[1])], "tile_hw": [th, tw],
                    "tiles_row_major": tiles})
    return {"value": {"grids": out}}


def caption(agent, reply) -> dict:
    """``_generate_scene_caption`` with the caption model answering ``reply`` (None: a None content)."""
    Model.reply = reply
    try:
        result = agent._generate_scene_caption([{"start_frame": 0, "end_frame": 9}], [])  # no frames: "skip"
        assert result == {"status": "skip", "caption": ""}, result
        frame = str(Path(agent.video_info["path"]).parent / "caption_frame.png")
        result = agent._generate_scene_caption([{"start_frame": 0, "end_frame": 9}], [frame])
    except Exception as exc:  # noqa: BLE001
        return failure(exc)
    return {"value": {k: result[k] for k in ("status", "caption")}}


def check_vendored(agent, video: str, tmp: Path) -> None:
    """Every vendored case, reproduced by the release's modules as imported here, or stop."""
    for case in VENDORED["scene_snapper_frame_split"]:
        ranges = [{"start_frame": s, "end_frame": e} for s, e in case["frame_ranges"]]
        got = snapper(agent, video, ranges, case["num_frames_arg"])
        if "scene_snapper_exception" in case:
            assert "raised" in got["caption"], (case["name"], got)
            continue
        assert got["caption"]["indices"] == case["caption_model_frame_indices"], case["name"]
        assert got["controller"]["indices"] == case["controller_attached_frame_indices"], case["name"]
        result = {k: v for k, v in case["scene_snapper_result"].items() if k in got["result"]}
        assert got["result"] == result, (case["name"], got["result"], result)
        assert got["mosaics"] == case["caption_model_n_mosaic_images"], case["name"]
    start, end = VENDORED["clip_analyzer_reply_parser"]["frame_range_used"]
    for case in VENDORED["clip_analyzer_reply_parser"]["cases"]:
        got = clip(agent, video, {"start_frame": start, "end_frame": end}, case["reply"])["value"]
        assert (got["answer"], got["confidence"]) == (case["answer"], case["confidence"]), case["reply"]
    for case in VENDORED["clip_analyzer_frame_sampling"]:
        s, e = case["frame_range"]
        got = clip(agent, video, {"start_frame": s, "end_frame": e}, "Answer: x")
        if case["error"]:
            assert got["value"]["error"] == case["error"] or "raised" in got, (case, got)
        else:
            assert got["value"]["frame_range"] == case["result_frame_range"], (case, got)
            assert got["value"]["sampled_frames"] == case["sampled_frames"], (case, got)
    layout = VENDORED["mosaic_layout"]
    assert (layout["rows"], layout["cols"]) == (2, 3)
    for case in layout["cases"]:
        frames = [("missing" if i in case["unreadable_inputs"] else {"h": h, "w": w})
                  for i, (h, w) in enumerate(case["input_sizes_hw"])]
        got = mosaic(agent, tmp / "mosaic", frames)["value"]["grids"]
        assert got == case["grids"], (case["name"], got)


def frame_value() -> st.SearchStrategy:
    return st.one_of(st.integers(-50, TOTAL + 50), st.integers(-50, TOTAL + 50), st.sampled_from([0, 1, TOTAL - 1, TOTAL]))


def ranges() -> st.SearchStrategy:
    one = st.tuples(frame_value(), frame_value()).map(lambda t: {"start_frame": t[0], "end_frame": t[1]})
    ordered = st.tuples(st.integers(-20, TOTAL + 20), st.integers(0, 400)).map(
        lambda t: {"start_frame": t[0], "end_frame": t[0] + t[1]})
    tiny = st.integers(0, TOTAL - 1).map(lambda s: {"start_frame": s, "end_frame": s})
    return st.lists(st.one_of(ordered, ordered, tiny, one), min_size=0, max_size=45)


def clip_reply() -> st.SearchStrategy[str]:
    line = st.one_of(
        TEXT,
        st.tuples(st.sampled_from(["Answer:", "Answer: ", "answer:", "**Answer:**", " Answer:", "ANSWER:", "Answer :"]),
                  st.one_of(TEXT, st.just("red"), st.just("2 cups"))).map("".join),
        st.tuples(st.sampled_from(["Confidence:", "Confidence: ", "confidence:", "**Confidence:**", "Confidence :"]),
                  st.one_of(numeric_text(), NUMBER.map(str), st.sampled_from(["80%", "0.8", "high", "-1", "1.5",
                                                                              ".5", "5.", "1e-3", "NaN", "inf"]))
                  ).map("".join),
        st.sampled_from(["", " ", "The colour is red.", "3 people, 0.9 sure", "v2.0", "It is 12:30"]))
    return st.lists(line, max_size=5).map("\n".join)


def mosaic_frames() -> st.SearchStrategy[list]:
    """0–20 frames: sizes shared (most chunks) or mixed, 1-pixel sides, tall and wide, missing and corrupt files."""
    size = st.fixed_dictionaries({"h": st.integers(1, 40), "w": st.integers(1, 40)})
    same = st.tuples(size, st.integers(0, 20)).map(lambda t: [t[0]] * t[1])
    mixed = st.lists(st.one_of(size, size, size, st.sampled_from(["missing", "corrupt"])), max_size=20)
    holes = st.tuples(same, st.lists(st.integers(0, 19), max_size=6)).map(
        lambda t: [("missing" if i in t[1] else f) for i, f in enumerate(t[0])])
    return st.one_of(same, mixed, holes)


def caption_reply() -> st.SearchStrategy:
    """A caption model's reply: lines with or without a ``Caption:`` label (any case, spacing, Markdown), blank
    lines first, unicode line breaks, None."""
    label = st.sampled_from(["Caption:", "caption:", "CAPTION:", "Caption :", "**Caption:**", " Caption:",
                             "Caption:Caption:", "Captions:", ""])
    line = st.one_of(TEXT, st.tuples(label, TEXT).map("".join), st.sampled_from(["", " ", "A man walks.", "\t"]))
    breaks = st.sampled_from(["\n", "\r\n", "\r", "\u2028", "\x0b", "\x1c", "\u0085", "\n\n"])
    text = st.tuples(st.lists(line, max_size=4), breaks).map(lambda t: t[1].join(t[0]))
    return st.one_of(text, text, st.none())


def error_text() -> st.SearchStrategy[str]:
    """A tool-less reply: answers, the release's error markers in any case or position, "none", blanks, unicode."""
    marker = st.sampled_from(["error:", "Error:", "ERROR:", "exception:", "Exception: x", "analysis failed",
                              "API call failed", "error :", "errors:", "none", "None", " NONE ", "", " ", "\n",
                              "B", "The answer is B.", "İ", "ERROR\u0130:"])
    return st.lists(st.one_of(marker, TEXT), max_size=4).map("".join)


def tool_arguments() -> st.SearchStrategy:
    """A tool call's ``arguments`` text: JSON objects of the tools' fields (and others), cut anywhere, fenced,
    wrapped in prose, with stray or unbalanced brackets, brackets inside strings, arrays, scalars, NaN, blanks,
    unicode; None."""

    frame = st.fixed_dictionaries({"start_frame": st.one_of(st.integers(-5, 3100), NUMBER), "end_frame":
                                   st.integers(-5, 3100)})
    obj = st.one_of(
        st.fixed_dictionaries({"frame_ranges": st.lists(frame, max_size=3), "reason": TEXT},
                              optional={"num_frames": st.sampled_from([30, 60, 150, "60", None])}),
        st.fixed_dictionaries({"frame_range": frame, "question": TEXT, "reason": TEXT}),
        st.dictionaries(TEXT, JSON_VALUE, max_size=3), JSON_VALUE)
    body = obj.map(lambda v: json.dumps(v, ensure_ascii=False))
    cut = st.tuples(body, st.integers(0, 200)).map(lambda t: t[0][:t[1]])
    piece = st.one_of(body, body, cut, TEXT, st.sampled_from(["{", "}", "[", "]", "```json", "```", "\n", '"', "'",
                                                              "{}", "[]", "null", "NaN", "{'a': 1}", '{"a": "}"}',
                                                              '{"a": [1, {"b": 2}', "Sure: ", " ", ""]))
    text = st.lists(piece, min_size=1, max_size=4).map("".join)
    return st.one_of(text, text, text, st.none())


def draw(kind: str, agent, video: str, tmp: Path, n: int) -> list[dict]:
    """``kind``'s cases: inputs drawn by Hypothesis, outputs computed by the release."""
    if kind == "scene_snapper_split":
        count = st.one_of(st.sampled_from([30, 60, 90, 150]), st.sampled_from([None, 0, 1, 45, 240, 241, 500, 60.0,
                                                                                "60", "abc", True, -5, 30.5]))
        return [run_case(kind, agent, video, tmp, {"frame_ranges": [[r["start_frame"], r["end_frame"]] for r in rs],
                                                   "num_frames": c})
                for rs, c in examples(st.tuples(ranges(), count), n)]
    if kind == "clip_reply":
        return [run_case(kind, agent, video, tmp, {"reply": r}) for r in examples(clip_reply(), n * 2)]
    if kind == "clip_range":
        bound = st.one_of(frame_value(), st.floats(-10, TOTAL + 10, allow_nan=False), numeric_text(), st.none(),
                          st.booleans())
        frame_range = st.one_of(st.fixed_dictionaries({"start_frame": bound, "end_frame": bound}),
                                st.dictionaries(st.sampled_from(["start_frame", "end_frame", "start"]), bound,
                                                max_size=2))
        return [run_case(kind, agent, video, tmp, {"frame_range": fr}) for fr in examples(frame_range, n)]
    if kind == "mosaic_layout":
        return [run_case(kind, agent, video, tmp, {"frames": f}) for f in examples(mosaic_frames(), n)]
    if kind == "caption_reply":
        return [run_case(kind, agent, video, tmp, {"reply": r}) for r in examples(caption_reply(), n)]
    if kind == "error_like":
        return [run_case(kind, agent, video, tmp, {"text": t}) for t in examples(error_text(), n)]
    if kind == "tool_arguments":
        return [run_case(kind, agent, video, tmp, {"arguments": a}) for a in examples(tool_arguments(), n * 2)]
    raise SystemExit(f"unknown kind {kind!r}")


def run_case(kind: str, agent, video: str, tmp: Path, given: dict) -> dict:
    """One case: ``given`` through the release."""
    if kind == "scene_snapper_split":
        rs = [{"start_frame": s, "end_frame": e} for s, e in given["frame_ranges"]]
        return {"input": given, "output": snapper(agent, video, rs, given["num_frames"])}
    if kind == "clip_reply":
        return {"input": given, "output": clip(agent, video, {"start_frame": 100, "end_frame": 400}, given["reply"])}
    if kind == "clip_range":
        return {"input": given, "output": clip(agent, video, given["frame_range"], "Answer: x")}
    if kind == "mosaic_layout":
        return {"input": given, "output": mosaic(agent, tmp / "mosaic", given["frames"])}
    if kind == "caption_reply":
        return {"input": given, "output": caption(agent, given["reply"])}
    if kind == "error_like":
        return {"input": given, "output": {"value": agent._looks_like_error(given["text"])}}
    if kind == "tool_arguments":  # the parser _execute_tool and the loop call, as agent.py imported it
        import videoarm.core.agent as agent_module

        try:
            value = agent_module.handle_json_parsing_error(given["arguments"], "tool arguments")
        except Exception as exc:  # noqa: BLE001
            return {"input": given, "output": failure(exc)}
        return {"input": given, "output": {"value": value, "type": type(value).__name__}}
    raise SystemExit(f"unknown kind {kind!r}")


def replayed(kind: str, stored: list[dict], agent, video: str, tmp: Path) -> list[dict]:
    """A kept kind: its stored inputs through the release again. Every field a stored output holds must come back
    the same (a field the generator records now and did not then is added); the cases are returned re-run."""
    cases = []
    for case in stored:
        again = json.loads(json.dumps(jsonable(run_case(kind, agent, video, tmp, case["input"]))))
        old, new = case["output"], again["output"]
        kept = {k: (new.get(k) if k not in old or not isinstance(old[k], dict) else
                    {f: new[k].get(f) for f in old[k]} if isinstance(new.get(k), dict) else new.get(k))
                for k in old}
        if kept != old or set(new) - set(old) - {"result", "mosaics"}:
            raise SystemExit(f"{kind}: the release now gives {new!r} for {case['input']!r}, stored {old!r}")
        cases.append(again)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SRC / "videoarm_index")
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--kinds", nargs="*", choices=KINDS, help="regenerate only these (default: all)")
    args = parser.parse_args()
    checked_checkout(args.src)
    path = GENERATED / "videoarm" / "cases.json"
    stored = json.loads(path.read_text(encoding="utf-8"))["kinds"] if path.is_file() else {}
    wanted = set(KINDS if args.kinds is None else args.kinds)
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
        tmp = Path(folder)
        video = str(tmp / "clip.avi")
        make_video(Path(video))
        import cv2
        import numpy as np

        cv2.imwrite(str(tmp / "caption_frame.png"), np.full((24, 32, 3), 128, dtype=np.uint8))
        agent = load_release(args.src.resolve(), tmp, video)
        check_vendored(agent, video, tmp)
        kinds = {}
        for kind in KINDS:
            if kind in wanted or kind not in stored:
                kinds[kind] = draw(kind, agent, video, tmp, args.n)
            else:
                kinds[kind] = replayed(kind, stored[kind], agent, video, tmp)
    print(write_cases("videoarm", {"release": "github MILVLG/videoarm", "commit": COMMIT,
                                   "source": "the release's modules imported whole from a checkout assembled from "
                                             "the code index (read_file), sha256 per file in its MANIFEST.json"},
                      kinds))


if __name__ == "__main__":
    main()

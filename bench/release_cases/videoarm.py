"""VideoARM's differential cases (issue 60): the release's functions on Hypothesis-drawn inputs.

    python bench/release_cases/videoarm.py [--src /work/wt/_src/videoarm] [--n 400]

No snapshot of github MILVLG/videoarm can be fetched here, so ``--src`` holds a verbatim transcription, outside
the repository, of the release files the cases call, taken from the indexed source text:
``videoarm/video/utils.py`` (at 195e325e8e57613afe2bdc98a0f1b1174f87a976, whole) and, from
``videoarm/core/agent.py`` (at d9fd3177e41500d16493a6351de0c242f708ec9b; the release-cases README records these
methods identical at 195e325), the methods ``_scene_snapper``, ``_clip_analyzer``,
``_extract_frames_proportional`` and ``_run_with_retry`` (``videoarm/core/agent_methods.py``; the caption call of
``_generate_scene_caption`` is not part of the cases). Before writing anything the generator reproduces every
vendored VideoARM release case of the kinds it draws (tests/reference/release_cases/videoarm: the 10 frame
splits and the 14 reply parses, made from a checkout) and stops if one differs: a transcription slip cannot
produce cases. Stand-ins: ``videoarm.api.client`` (the model returns the drawn reply), ``videoarm.config``
(the release's PIPELINE_CONFIG defaults as the vendored cases record them). Frames: a real 3000-frame 30-fps
MJPG clip read by real OpenCV; indices are read from the ``frame_%06d.jpg`` names the release writes. Writes
``tests/reference/generated/videoarm/cases.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, SRC, examples, jsonable, write_cases  # noqa: E402
from release_import import failure, package, stub  # noqa: E402
from reply_strategies import NUMBER, TEXT, numeric_text  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

COMMITS = {"utils.py": "195e325e8e57613afe2bdc98a0f1b1174f87a976", "agent.py": "d9fd3177e41500d16493a6351de0c242f708ec9b"}
VENDORED = json.loads((REPO / "tests/reference/release_cases/videoarm/cases.json").read_text(encoding="utf-8"))
DEFAULTS = VENDORED["pipeline_defaults_used"]
TOTAL, FPS = VENDORED["video_fixture"]["total_frames"], VENDORED["video_fixture"]["fps"]


class Config:
    def get_pipeline_config(self, key=None):
        return DEFAULTS if key is None else DEFAULTS.get(key)

    def get_model(self, role):
        return "m"

    def get_model_params(self, role):
        return {}

    def get_api_config(self, role):
        return None, None


class Reply:
    text = ""


def load_release(src: Path, tmp: Path):
    package("videoarm", src / "videoarm")
    package("videoarm.video", src / "videoarm" / "video")
    package("videoarm.core", src / "videoarm" / "core")
    stub("videoarm.config.settings", TEMP_DIR=tmp / "frames", RESULTS_DIR=tmp / "results")
    stub("videoarm.config.model_config", get_config=Config)
    stub("videoarm.api.client", call_openai_model_with_tools=lambda **kwargs: {"content": Reply.text},
         handle_json_parsing_error=lambda raw, what: None)
    from videoarm.core.agent_methods import VideoARMAgent

    agent = VideoARMAgent()
    agent.config, agent.session_id = Config(), "s"
    agent.video_info = {"fps": FPS, "total_frames": TOTAL}
    agent.tool_retry_attempts, agent.tool_retry_delay_base = 1, 0
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
    """scene_snapper as the loop runs it: the caption model's frames (``_scene_snapper``), then the frames
    attached for the controller — the loop's ``int(parsed_args.get("num_frames", 30))`` (None where that
    raises) and ``_attach_frames_to_messages``'s ``min(num_frames or limit, limit)``, both at agent.py's
    reasoning loop, then ``_extract_frames_proportional``."""
    captured = {}
    agent._generate_scene_caption = lambda frame_ranges, frame_paths: captured.update(paths=list(frame_paths)) or \
        {"status": "success", "caption": "caption"}
    out: dict = {}
    args = {"frame_ranges": ranges, "reason": "r"} | ({} if num_frames is None else {"num_frames": num_frames})
    try:
        result = agent._scene_snapper(video, ranges, "r", args.get("num_frames"))
        out["caption"] = {"indices": indices(captured.get("paths", [])), "error": result.get("error")}
    except Exception as exc:  # noqa: BLE001
        out["caption"] = failure(exc)
    try:
        shown = int(args.get("num_frames", 30))
    except Exception:  # noqa: BLE001
        shown = None
    limit = DEFAULTS["total_frames_limit"]
    count = min(shown or limit, limit)
    try:
        out["controller"] = {"indices": indices(agent._extract_frames_proportional(
            video, ranges, total_frames=count, target_short_side=256, silent=True))}
    except Exception as exc:  # noqa: BLE001
        out["controller"] = failure(exc)
    return out


def clip(agent, video: str, frame_range, reply: str) -> dict:
    Reply.text = reply
    try:
        result = agent._clip_analyzer(video, frame_range, "what colour?", "r")
    except Exception as exc:  # noqa: BLE001
        return failure(exc)
    keep = ("error", "frame_range", "answer", "confidence", "sampled_frames")
    return {"value": jsonable({k: result[k] for k in keep if k in result})}


def check_transcription(agent, video: str) -> None:
    """Every vendored case of the two kinds, reproduced by the transcription, or stop."""
    for case in VENDORED["scene_snapper_frame_split"]:
        ranges = [{"start_frame": s, "end_frame": e} for s, e in case["frame_ranges"]]
        got = snapper(agent, video, ranges, case["num_frames_arg"])
        if "scene_snapper_exception" in case:
            assert "raised" in got["caption"], (case["name"], got)
            continue
        assert got["caption"]["indices"] == case["caption_model_frame_indices"], case["name"]
        assert got["controller"]["indices"] == case["controller_attached_frame_indices"], case["name"]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SRC / "videoarm")
    parser.add_argument("--n", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
        tmp = Path(folder)
        video = str(tmp / "clip.avi")
        make_video(Path(video))
        agent = load_release(args.src, tmp)
        check_transcription(agent, video)
        kinds: dict[str, list[dict]] = {}
        count = st.one_of(st.sampled_from([30, 60, 90, 150]), st.sampled_from([None, 0, 1, 45, 240, 241, 500, 60.0,
                                                                                "60", "abc", True, -5, 30.5]))
        kinds["scene_snapper_split"] = [
            {"input": {"frame_ranges": [[r["start_frame"], r["end_frame"]] for r in rs], "num_frames": n},
             "output": snapper(agent, video, rs, n)} for rs, n in examples(st.tuples(ranges(), count), args.n)]
        kinds["clip_reply"] = [{"input": {"reply": r}, "output": clip(agent, video, {"start_frame": 100,
                                                                                     "end_frame": 400}, r)}
                               for r in examples(clip_reply(), args.n * 2)]
        bound = st.one_of(frame_value(), st.floats(-10, TOTAL + 10, allow_nan=False), numeric_text(), st.none(),
                          st.booleans())
        frame_range = st.one_of(st.fixed_dictionaries({"start_frame": bound, "end_frame": bound}),
                                st.dictionaries(st.sampled_from(["start_frame", "end_frame", "start"]), bound,
                                                max_size=2))
        kinds["clip_range"] = [{"input": {"frame_range": fr}, "output": clip(agent, video, fr, "Answer: x")}
                               for fr in examples(frame_range, args.n)]
    print(write_cases("videoarm", {"release": "github MILVLG/videoarm", "commit": COMMITS["agent.py"],
                                   "commits": COMMITS,
                                   "source": "verbatim transcription of the indexed files (no snapshot)"}, kinds))


if __name__ == "__main__":
    main()

"""Adapters that feed every generated case (tests/reference/generated/<system>/cases.json, issue 60) of the
evidence seekers ParaVT, Video-o3, LongVideo-R1 and of VideoARM through senri's corresponding function and compare with what
the release computed. One adapter per kind reads any case of that kind: the release's outcome is a value or
a raised exception, and the adapter says which of senri's outcomes equals it. Where senri departs on purpose,
the adapter checks the departure on that case and names it (:class:`Deviation`); any other difference is an
AssertionError. Used by tests/test_generated_seekers.py (a deterministic sample) and
bench/release_cases/check_seekers.py (every case, counted)."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

GENERATED = Path(__file__).resolve().parent / "reference" / "generated"
SYSTEMS = ("paravt", "video_o3", "longvideo_r1", "videoarm")


class Deviation(Exception):
    """A case where senri departs from the release on purpose; the message is the deviation's name (an option
    or a row of docs/protocol.md), raised only after the adapter checked senri's side of it."""


@lru_cache(maxsize=None)
def generated(system: str) -> dict[str, Any]:
    """The generated cases of ``system`` (a missing file fails: the data ships with the repository)."""
    path = GENERATED / system / "cases.json"
    if not path.is_file():
        raise AssertionError(f"{path} is missing: generate it with bench/release_cases/{system}.py")
    return json.loads(path.read_text(encoding="utf-8"))


def same(a: Any, b: Any) -> bool:
    """Equal as data: NaN equals NaN, tuples equal lists, bools stay apart from numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, (int, float)) or isinstance(b, float) and isinstance(a, (int, float)):
        return (math.isnan(a) and math.isnan(b)) if (math.isnan(a) or math.isnan(b)) else a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def run(function: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return function(), None
    except Exception as exc:  # noqa: BLE001 - the outcome is compared, whatever it is
        return None, exc


def expect(case: dict, function: Callable[[], Any], same_class: bool = False,
           convert: Callable[[Any], Any] = lambda v: v) -> None:
    """senri's ``function()`` has the release's outcome: its value (after ``convert``), or a raise where the
    release raised (of the same exception class where ``same_class``)."""
    got, raised = run(function)
    out = case["output"]
    if "raised" in out:
        assert raised is not None, f"the release raised {out['raised']}: {out['message']!r}; senri gave {got!r}"
        if same_class:
            assert type(raised).__name__ == out["raised"], (type(raised).__name__, out)
        return
    assert raised is None, f"senri raised {raised!r}; the release gave {out['value']!r}"
    assert same(convert(got), out["value"]), f"senri {convert(got)!r} != release {out['value']!r}"


# ---------------------------------------------------------------------------------------------------- ParaVT
def paravt_parse_time_val(case: dict) -> None:
    from senri.methods.paravt import parse_time

    expect(case, lambda: parse_time(case["input"]["value"]), same_class=True)


def paravt_extract_letter(case: dict) -> None:
    from senri.methods.paravt import extract_letter

    expect(case, lambda: extract_letter(case["input"]["text"]))


def paravt_parse_tool_calls(case: dict) -> None:
    from senri.methods.paravt import read_calls

    expect(case, lambda: read_calls(case["input"]["reply"])[0])


def paravt_eval_one_calls(case: dict) -> None:
    """One reply through eval_one's turn: the calls kept (first max_parallel; all for 0), the window each asks
    for, the call that loses the sample (its error text), and a crop plan senri can make for every window
    (crop_frames is fail-soft in the release: a window must never crash senri)."""
    from senri.methods.paravt import MalformedCall, call_window, crop_plan, extract_letter, plan_calls

    given, out = case["input"], case["output"]
    calls, _ = plan_calls(given["reply"], given["max_parallel"])
    if not calls:  # no call: the reply is the final answer
        assert out["crops"] == [] and out["error"] is None and out["max_tokens"] == [2048], out
        assert extract_letter(given["reply"]) == out["pred"]
        return
    windows, error = [], None
    for call in calls:
        try:
            windows.append(list(call_window(call)))
        except MalformedCall as exc:
            error = str(exc)
            break
    assert same(windows, out["crops"]), (windows, out["crops"])
    assert error == (out["error"] if out["error"] is None else out["error"][:len(error or "")]), (error, out["error"])
    if error is None:
        assert out["max_tokens"] == [2048, 2048] and out["tool_calls"] == len(windows) and out["pred"] == "B", out
    for start, end in windows:
        plan = crop_plan(start, end, 4.0, 480)
        assert isinstance(plan, list) and all(0 <= i < 480 for i in plan), (start, end, plan)


@lru_cache(maxsize=1)
def _paravt_replay():
    from seeker_replay import Replay, seeker

    backend = Replay()
    return seeker("paravt", backend), backend


def paravt_forced_turn(case: dict) -> None:
    """A whole episode of crop turns then a final (scripted), on senri's ParaVT over the ``pv`` clip: every
    completion's max_tokens, the crops and the prediction. The release's non-MCQ branch (P5, 128 tokens) is
    for grounding samples, which senri never runs (ingest keeps multiple-choice questions only): such a case
    is checked on its turns and named ``multiple_choice_only``."""
    from senri.methods.paravt import extract_letter
    from senri.records import Question

    given, out = case["input"], case["output"]
    method, backend = _paravt_replay()
    call = '<tool_call>{"name": "crop_video", "arguments": {"start_time": 1, "end_time": 4}}</tool_call>'
    method.max_turns, method.max_parallel = given["max_turns"], 5
    backend.load([call] * given["tool_turns"] + [given["final"]] * 6)
    question = Question("pv", "q", "L", "none", "Which room?", "hall", "kitchen", "garden", "street", "B")
    answer = method.answer(question)
    got = [request.max_tokens for request in backend.requests]
    crops = [[c["start_s"], c["end_s"]] for c in answer.trace["crops"]]
    assert crops == out["crops"], (crops, out["crops"])
    release_pred = out["pred"] if out["pred"] in question.letters else None
    if given["is_mcq"]:
        assert got == out["max_tokens"], (got, out["max_tokens"])
        assert answer.pred == release_pred, (answer.pred, out["pred"])
        return
    forced = [i for i, tokens in enumerate(out["max_tokens"]) if tokens == 128]
    assert got == [64 if i in forced else t for i, t in enumerate(out["max_tokens"])], (got, out["max_tokens"])
    if forced:
        raise Deviation("multiple_choice_only")
    assert answer.pred == (extract_letter(given["final"]) if given["final"] else None) or \
        answer.pred == release_pred or answer.pred is None


PARAVT_OVERVIEW, PARAVT_CROP = (100352, 602112), (784, 50176)  # P-I2, P-T1 pixel bounds


def _paravt_returned(indices: list[int], video: dict, pixels: tuple[int, int]) -> tuple[int, list | None]:
    """The frames get_frames / crop_frames hand back for ``indices`` and the size they are resized to: none
    where the size has a side of 0 (the resize raises and the reader fails soft)."""
    from senri.resample import smart_resize

    if not indices:
        return 0, None
    h, w = smart_resize(video["height"], video["width"], 28, *pixels)
    return (0, [h, w]) if min(h, w) <= 0 else (len(indices), [h, w])


def fused_linspace_indices(start: int, end: int, steps: int) -> list[int]:
    """round(torch.linspace(start, end, steps)) as the torch build that generated the cases computes it (the
    installed torch 2.13 CPU wheel, not the release's pin): each value start + step·i (first half) or
    end − step·(steps − 1 − i) (second half) rounded to float32 once, as a fused multiply-add does, with no
    vector-lane structure. Exact arithmetic, for telling that build's frames from the pinned kernel's."""
    from fractions import Fraction

    import numpy as np

    f32 = np.float32
    if steps == 1:
        return [int(np.round(f32(start)))]
    first, last = f32(start), f32(end)
    step = f32((last - first) / f32(steps - 1))
    values = [Fraction(float(first)) + Fraction(float(step)) * i if i < steps // 2 else
              Fraction(float(last)) - Fraction(float(step)) * (steps - 1 - i) for i in range(steps)]
    return [int(np.round(f32(float(v)))) for v in values]


def _linspace_build(got: list[int], release: list[int], first: int, last: int) -> None:
    """``got`` (senri: the release's pinned ATen kernel, as the vendored cases record it) and ``release`` (the
    generating torch build) differ only where that build's fused linspace differs: a named deviation."""
    assert len(got) == len(release) and release == fused_linspace_indices(first, last, len(got)), (got, release)
    raise Deviation("torch_build_linspace")


def paravt_overview_frames(case: dict) -> None:
    """The 64-frame overview: torchcodec's indices (real torch's float32 linspace), none under 64 frames, and
    the frames returned at their size."""
    from senri.resample import overview_indices

    video, out = case["input"]["video"], case["output"]
    got, raised = run(lambda: overview_indices(video["n_frames"], 64))
    got = [] if raised is not None else got
    returned, size = _paravt_returned(got, video, PARAVT_OVERVIEW)
    assert returned == out["returned_frames"] and (size == out["resize_hw"] or not got), (returned, size, out)
    if got != (out["torchcodec_indices"] or []):
        _linspace_build(got, out["torchcodec_indices"], 0, video["n_frames"] - 1)


def paravt_crop_frames(case: dict) -> None:
    """A crop: where torchcodec reads it, its indices (1 fps, 2–16 frames, real torch's float32 linspace) and
    the frames returned at their size; where torchcodec refuses the window, senri's torchcodec rule refuses it
    too (the release then decodes with torchvision: the kind crop_frames_torchvision runs that on real files)."""
    from senri.resample import window_indices

    given, out = case["input"], case["output"]
    video = given["video"]
    got, raised = run(lambda: window_indices(given["start"], given["end"], video["avg_fps"], video["n_frames"],
                                             1.0, 1, 16))
    if out["torchcodec_indices"] is None:
        assert isinstance(raised, (ValueError, OverflowError)), (got, out)
        return
    assert raised is None, (raised, out)
    returned, size = _paravt_returned(got, video, PARAVT_CROP)
    assert (returned, size) == (out["returned_frames"], out["resize_hw"]), ((returned, size), out)
    if got != out["torchcodec_indices"]:
        from senri.resample import frame_bounds

        _linspace_build(got, out["torchcodec_indices"],
                        *frame_bounds(given["start"], given["end"], video["avg_fps"], video["n_frames"]))


def paravt_crop_frames_torchvision(case: dict) -> None:
    """A crop torchcodec refuses, on a real file through torchvision 0.25's own read_video and resize: senri's
    torchcodec rule refuses it too; senri's model of read_video, given the stream's time base, decodes the
    same frames (or refuses where read_video raised) and its fallback returns the frames crop_frames returned,
    at their size; so does the method's crop_plan given the time base the probe records. Without a time base
    (a VideoInfo not made by the probe) crop_plan compares in seconds: where that gives other frames, the
    seconds window must differ from the stream-unit one (a bound within one unit of a frame)."""
    from fractions import Fraction

    from senri.methods.paravt import crop_plan
    from senri.resample import torchvision_fallback, torchvision_window, window_indices

    given, out = case["input"], case["output"]
    video, start, end = given["video"], given["start"], given["end"]
    fps, n_frames, time_base = video["avg_fps"], video["n_frames"], Fraction(video["time_base"])
    assert out["torchcodec_indices"] is None, out
    _, refused = run(lambda: window_indices(start, end, fps, n_frames, 1.0, 1, 16))
    assert isinstance(refused, (ValueError, OverflowError)), refused
    decoded, raised = run(lambda: torchvision_window(start, end, fps, n_frames, time_base))
    if out["torchvision_decoded"] is None:
        assert isinstance(raised, ValueError), decoded
    else:
        assert raised is None and decoded == out["torchvision_decoded"], (decoded, raised, out)
    exact, _ = run(lambda: torchvision_fallback(start, end, fps, n_frames, 1.0, 1, 16, time_base))
    assert (exact or []) == out["returned_indices"], (exact, out)
    got = crop_plan(start, end, fps, n_frames, time_base=time_base)
    assert got == out["returned_indices"], (got, out)
    assert _paravt_returned(got, video, PARAVT_CROP) == (out["returned_frames"], out["resize_hw"]), (got, out)
    in_seconds = crop_plan(start, end, fps, n_frames)
    if in_seconds != got:
        seconds, _ = run(lambda: torchvision_window(start, end, fps, n_frames))
        assert seconds != decoded, (seconds, decoded)


def paravt_qvu_smart_resize(case: dict) -> None:
    from senri.resample import smart_resize

    a = case["input"]
    call = lambda: smart_resize(a["height"], a["width"], a["factor"], a["min_pixels"], a["max_pixels"])  # noqa
    got, raised = run(call)
    if min(a["height"], a["width"]) <= 0 and "value" in case["output"]:
        assert isinstance(raised, ValueError), got  # senri refuses a frame without pixels
        raise Deviation("frame_without_pixels_refused")
    expect(case, call, convert=list)


def paravt_qvu_smart_nframes(case: dict) -> None:
    from senri.resample import fixed_nframes, smart_nframes

    ele, total, fps = case["input"]["ele"], case["input"]["total_frames"], case["input"]["video_fps"]
    if "nframes" in ele:
        expect(case, lambda: fixed_nframes(ele["nframes"], total))
    else:
        expect(case, lambda: smart_nframes(total, fps, ele.get("fps", 2), ele.get("min_frames", 4),
                                           ele.get("max_frames", 768)))


def frame_range(case: dict) -> None:
    """calculate_video_frame_range: (first, last, count), or a refusal where senri's bounds hold no frame."""
    from senri.resample import frame_bounds

    a, out = case["input"], case["output"]
    if a["video_start"] is None and a["video_end"] is None and a["total_frames"] > 0 and a["video_fps"] > 0:
        got = [0, a["total_frames"] - 1, a["total_frames"]]  # the release's early return: the whole video
        assert "value" in out and got == out["value"], out
        return
    start = 0.0 if a["video_start"] is None else a["video_start"]

    def bounds():
        end = a["total_frames"] / a["video_fps"] if a["video_end"] is None else a["video_end"]
        first, last = frame_bounds(start, end, a["video_fps"], a["total_frames"])
        if first >= last or a["total_frames"] <= 0 or a["video_fps"] <= 0:
            raise ValueError("no frames")
        return [first, last, last - first + 1]

    expect(case, bounds)


# -------------------------------------------------------------------------------------------------- Video-o3
def video_o3_grounding_parse(case: dict) -> None:
    from senri.methods.video_o3 import GroundingError, parse_grounding

    got, raised = run(lambda: parse_grounding(case["input"]["reply"]))
    out = case["output"]
    if "raised" in out:
        assert isinstance(raised, GroundingError), (got, raised, out)
        return
    assert raised is None, (raised, out)
    assert same(list(got), out["value"]), (got, out["value"])


def video_o3_videomme_extract(case: dict) -> None:
    from senri.answers import videomme_official_letter

    expect(case, lambda: videomme_official_letter(case["input"]["prediction"]) or "")


APOLOGY = "I'm sorry, I can't answer the question based on the video."
QUOTAS = ("coarse", "medium", "fine")  # O-T2's strategies


def _crop_refused(window: tuple[float, float, str]) -> bool:
    """senri's crop refuses the window on the ``pv`` clip (480 frames, 4 fps): an unknown strategy (the
    release's KeyError) or a range the decoder refuses."""
    from senri.methods.video_o3 import crop_plan

    start, end, strategy = window
    if strategy not in QUOTAS:
        return True
    _, raised = run(lambda: crop_plan(start, end, 4.0, 480))
    assert raised is None or isinstance(raised, ValueError), raised
    return raised is not None


def video_o3_reply_reading(case: dict) -> None:
    """One reply through the release's generation loop (O-L2…L6), read as senri's loop reads it: cut at the
    first closing tag by the stop strings (the keyword criterion), the tag put back, O-L2's cut, then
    :func:`read_turn`; the release's next step must be senri's: the end (answer / raw / apology), a repeat
    (nothing sent), an error turn (a parse error; or a grounding whose crop senri refuses too, the reply sent
    twice), or a crop of the same window. In forced mode the reply follows a valid 10–20 s crop. The error
    text in an error turn is senri's own wording (checked by the release-case tests), not compared here."""
    from senri.backends.base import stop_match
    from senri.methods.video_o3 import CLOSING_TAGS, close_stopped, cut_reply, read_turn

    given, out = case["input"], case["output"]
    forced = given["forced_mode"]
    text, matched = stop_match(given["reply"], CLOSING_TAGS)
    reply = cut_reply(close_stopped(text, matched or ""), forced)
    turn = read_turn(reply, forced)
    sent = out["sent_after_first"][0] if out["sent_after_first"] else []
    appended = sent[2:] if forced else sent  # forced: after the valid crop's reply and its O6 turn
    if forced:
        assert [m.get("prompt") for m in sent[:2]] == [None, "O6"], sent[:2]
    if turn.kind in ("answer", "raw", "apology"):
        assert out["generations"] == (2 if forced else 1), out
        assert out["final_response"] == (APOLOGY if turn.kind == "apology" else turn.text), (turn, out)
        return
    assert out["generations"] == (3 if forced else 2) and out["final_response"] == "Z", (turn, out)
    if turn.kind == "repeat":
        assert appended == [], appended
        return
    prompts = [m.get("prompt") for m in appended if m["role"] == "user"]
    assistant = [m["text"] for m in appended if m["role"] == "assistant"]
    assert set(assistant) == {reply}, (assistant, reply)
    if turn.kind == "parse_error":
        assert prompts == ["O5"] and len(assistant) == 1, (turn, appended)
        return
    assert turn.kind == "grounding", turn
    if _crop_refused(turn.window):
        assert prompts == ["O5"] and len(assistant) == 2, (turn, appended)
        return
    crop = [m for m in appended if m["role"] == "user"][0]
    assert prompts == ["O4"] and len(assistant) == 1, (turn, appended)
    assert same(crop["crop"], list(turn.window)), (crop, turn.window)


def video_o3_vp_smart_resize(case: dict) -> None:
    paravt_qvu_smart_resize(case)


def video_o3_main_video_resize(case: dict) -> None:
    """The main video's sizes (O-I2) as VideoO3.main_video computes them: each frame's own resize (its pixel
    rule at factor 56; a side of 0 refused by senri's resize, as the release's is), then the padded count and
    the whole video's size (:func:`main_video_resize`), refused where a side is 0."""
    import numpy as np

    from senri.methods.seeker import bicubic, pixel_rule
    from senri.methods.video_o3 import MAIN_FRAME_FACTOR, main_video_resize

    given = case["input"]
    tiny = np.zeros((1, 1, 3), np.uint8)

    def sizes() -> dict:
        per_frame = pixel_rule(15680, 602112, factor=MAIN_FRAME_FACTOR)(given["frame_height"], given["frame_width"])
        bicubic(tiny, *per_frame)
        padded, video_hw = main_video_resize(per_frame, given["n_frames"])
        bicubic(tiny, *video_hw)
        return {"per_frame_hw": list(per_frame), "padded_frames": padded, "video_hw": list(video_hw)}

    expect(case, sizes, convert=lambda v: {**v, "returned_shape": [v["padded_frames"], 3, *v["video_hw"]]})


# ---------------------------------------------------------------------------------------------- LongVideo-R1
def longvideo_r1_tree_width(case: dict) -> None:
    from senri.methods.longvideo_r1 import tree_width

    a = case["input"]
    expect(case, lambda: tree_width(a["n_frames"], a["fps"], a["segment_len"], a["min_width"], a["max_width"]),
           convert=lambda width: [width, a["n_frames"]])


def longvideo_r1_video_qa_frames(case: dict) -> None:
    from senri.methods.longvideo_r1 import frame_time, nested_low_part, sample_ids

    a = case["input"]

    def frames():
        ids = sample_ids(nested_low_part(a["n_frames"], a["width"], a["segment_id"]), 16)
        return {"frame_ids": ids, "times": [frame_time(i, a["fps"]) for i in ids]}

    expect(case, frames)


def _size(case: dict, side: int, rounding) -> None:
    from senri.methods.longvideo_r1 import longest_side

    a, out = case["input"], case["output"]
    h, w = longest_side(a["height"], a["width"], side, rounding)
    if "raised" in out:  # PIL refuses to resize to a side of 0
        assert min(h, w) == 0, (h, w, out)
        return
    assert [w, h] == out["value"], ([w, h], out)


def longvideo_r1_caption_frame_size(case: dict) -> None:
    from senri.methods.longvideo_r1 import scaled_side

    a = case["input"]
    _size(case, scaled_side(a["scale_factor"], a["max_length"], a["min_length"]), round)


def longvideo_r1_video_qa_frame_size(case: dict) -> None:
    _size(case, case["input"]["max_length"], int)


@lru_cache(maxsize=None)
def _longvideo_r1_defaults() -> dict:
    """The shipped method config (config/method/longvideo_r1.yaml): the defaults the cases check."""
    import yaml

    return yaml.safe_load((GENERATED.parents[2] / "config" / "method" / "longvideo_r1.yaml").read_text())


def longvideo_r1_caption_tree(case: dict) -> None:
    """The whole caption tree with the shipped defaults: the width, and per level every node's frames, their
    time labels, the prompt template, the frames shown and max_tokens (compared through the case's digest of
    the release's rows; the node count and the first node's frames compared in the clear)."""
    import hashlib
    import itertools

    from senri.methods.longvideo_r1 import LEVELS, caption_template, tree_node, tree_width

    config, given = _longvideo_r1_defaults(), case["input"]
    n_frames, fps = given["n_frames"], given["fps"]
    per_level = dict(zip(LEVELS, config["caption_frames"]))

    def tree() -> dict:
        width = tree_width(n_frames, fps, config["segment_s"], config["min_width"], config["max_width"])
        levels = []
        for depth in range(1, len(LEVELS) + 1):
            rows = []
            for ids in itertools.product(range(1, width + 1), repeat=depth):
                node = tree_node(n_frames, fps, width, ids, per_level)
                shown = len(node.frame_ids)
                rows.append([list(node.frame_ids), list(node.times),
                             caption_template(shown, config["low_prompt_max_frames"]), shown,
                             config["max_tokens"]["caption"]])
            digest = hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()
            levels.append({"nodes": len(rows), "first_frame_ids": rows[0][0] if rows else None, "digest": digest})
        return {"width": width, "levels": levels}

    expect(case, tree)


@lru_cache(maxsize=1)
def _pv_clip():
    """The shared test clip and its probe."""
    from seeker_replay import shared_clip

    return shared_clip()


@lru_cache(maxsize=8)
def longvideo_r1_episode_method(n_frames: int, fps: float):
    """senri's LongVideo-R1 (the shipped config) on a video of ``n_frames`` at ``fps`` answering through replayed
    controller, caption and video-QA models. Frames are not what an episode compares: each decodes as a 2×2
    black image (the release's decord stand-in returns black frames too)."""
    import dataclasses

    import numpy as np

    from seeker_replay import Replay, seeker
    from senri.backends.base import ChatResponse
    from senri.methods.longvideo_r1 import LEVELS, node_index

    class Captions(Replay):
        """Node k of the release's caption order (w high, w² medium, w³ low) is ``<caption>c{k}</caption>``."""

        def complete(self, request):
            self.requests.append(request)
            level, ids = request.purpose.rsplit(":", 1)[1].split("(", 1)
            ids = [int(i) for i in ids.rstrip(")").split(",") if i.strip()]
            offset = sum(method.width ** (k + 1) for k in range(LEVELS.index(level)))
            return ChatResponse(text=f"<caption>c{offset + node_index(ids, method.width)}</caption>",
                                finish_reason="stop", stop_reason="")

    controller, video_qa = Replay(), Replay()
    pixels, probed = _pv_clip()
    info = dataclasses.replace(probed, n_frames=n_frames, avg_fps=fps, duration_s=n_frames / fps)
    import seeker_replay

    clip = seeker_replay.shared_clip
    seeker_replay.shared_clip = lambda video_id="pv": (pixels, info)
    try:
        method = seeker("longvideo_r1", controller, model={"images": False})
    finally:
        seeker_replay.shared_clip = clip
    method.tool_models = {"caption": ("captions", Captions()), "video_qa": ("video_qa", video_qa)}
    method.decode = lambda indices, size, jpeg_quality=None: [np.zeros((2, 2, 3), np.uint8) for _ in indices]
    return method, controller, video_qa


def _message_text(message) -> str:
    parts = message.content if isinstance(message.content, tuple) else (message.content,)
    return "".join(p for p in parts if isinstance(p, str))


def _longvideo_r1_expected(method, label: list, replies: list, first: dict) -> tuple[str, str, bool]:
    """(role, text, whole) senri sends for a message the release built from template ``label[0]`` with the
    values ``label[1:]`` (R2's values are the episode's ``first``); ``whole`` False: senri's first turn ends
    with the text (its question part is senri's own rendering of the question, the release's is the dataset's
    string)."""
    render = method.text.render
    kind, values = label[0], label[1:]
    if kind == "R1":
        assert values[0] == method.width, f"release width {values[0]}, senri {method.width}"
        return "system", render("system", width=method.width), True
    if kind == "assistant":
        return "assistant", replies[values[0]], True
    if kind == "R2":
        lines = [render("duration", duration=float(first["duration"]))]
        lines += [render("high_caption", index=int(i), start=float(s), end=float(e)) + caption
                  for i, s, e, caption in first["high"]]
        return "user", "\n".join(lines), False
    if kind == "R3":
        *ids, start, end, caption = values
        role = {2: "medium_caption", 3: "low_caption"}[len(ids)]
        return "user", render(role, ids=",".join(ids), start=float(start), end=float(end)) + caption, True
    if kind == "R3c":
        return "user", render("information", answer=values[0]), True
    if kind in ("R4", "R5"):
        return "user", render({"R4": "nudge", "R5": "last_round"}[kind]), True
    raise AssertionError(f"the generator could not label a release message: {label}")


def longvideo_r1_episodes(case: dict) -> None:
    """A whole episode of the release's loop (process_one_entry → run_multistep_vqa) on senri's LongVideo-R1
    with the same scripted replies and a tree of the same shape: every controller call's messages by prompt
    role (R1 system, R2 first turn, R3 caption, R3c video-QA answer, R4 nudge, R5 last round, the assistant's
    replies), the tool calls read and their arguments, the video-QA calls (query, frames, their time labels,
    images), the turn count, the final answer and whether the sample was lost. A sample lost to a failed call
    (no scripted reply left) is scored "A" as run_all scores it (``failed_call: release_letter_a``, the default)
    with its error kept; the episode is replayed under ``failed_call: error_row`` too: the same calls, unanswered,
    the same error."""
    import ast

    from senri.methods.longvideo_r1 import nested_low_part, parse_call, sample_ids
    from senri.records import Question

    given, out = case["input"], case["output"]
    assert "value" in out, f"the release raised outside process_one_entry: {out}"
    out = out["value"]
    method, controller, video_qa = longvideo_r1_episode_method(given["n_frames"], given["fps"])
    controller.load(given["replies"])
    video_qa.load(given["video_qa_replies"])
    method.max_rounds = given["max_rounds"]
    method.captions.clear()
    question = Question("pv", "q", "L", "none", given["question"], "hall", "kitchen", "garden", "street", "B")
    answer = method.answer(question)
    assert method.width == out["width"], (method.width, out["width"])
    assert len(controller.requests) == out["rounds"] == len(out["turns"]), \
        f"senri made {len(controller.requests)} controller calls, the release {out['rounds']}"
    for k, (request, turn) in enumerate(zip(controller.requests, out["turns"])):
        got = [(m.role, _message_text(m)) for m in request.messages]
        assert len(got) == len(turn), f"call {k + 1}: senri sent {len(got)} messages, the release {turn}"
        for n, ((role, text), label) in enumerate(zip(got, turn)):
            want_role, want, whole = _longvideo_r1_expected(method, label, given["replies"],
                                                             out["first_turn"])
            assert role == want_role and (text == want if whole else text.endswith(want)), \
                f"call {k + 1} message {n + 1} ({label[0]}): senri {text[-300:]!r}, expected {want[-300:]!r}"
    tools = [step["call"] for step in answer.trace["steps"] if step.get("kind") == "tool"]
    assert tools == [text[:500] for text, *_ in out["tool_calls"]], (tools, out["tool_calls"])
    for text, name, args_repr, legal in out["tool_calls"]:
        got_name, args, got_legal = parse_call(text, method.call_parser)
        assert [got_name, repr(args), got_legal] == [name, args_repr, legal], (text, got_name, args, got_legal)
    assert len(video_qa.requests) == len(out["video_qa"]), (len(video_qa.requests), out["video_qa"])
    for request, call in zip(video_qa.requests, out["video_qa"]):
        parts = request.messages[-1].content
        labels = [method.text.render("video_qa_frame", time=float(t)) for t in call["time_labels"]]
        assert parts[0] == call["query"] and [p for p in parts[1:] if isinstance(p, str)] == labels, \
            (parts[0], call)
        assert sum(not isinstance(p, str) for p in parts[1:]) == call["n_images"], call
        qa_ids = ast.literal_eval(request.purpose.rsplit(":", 1)[1])  # the node senri read: its frames
        assert sample_ids(nested_low_part(method.n_frames, method.width, qa_ids), method.qa_frames) == \
            call["frame_ids"], (qa_ids, call["frame_ids"])
    lost = out["error"] is not None
    assert (answer.trace["outcome"] == "killed") == lost, (answer.trace["outcome"], out["error"])
    assert answer.trace["final"] == out["pred"], (answer.trace["final"], out["pred"])
    call_failed = bool(answer.tally.errors)  # here: no scripted reply left, as a dead server's client raises
    assert not call_failed or lost, (answer.tally.errors, out)  # a failed call always loses the sample
    assert (answer.error is not None) == call_failed and answer.trace["failed_call"] == \
        ("release_letter_a" if call_failed else None), (answer.error, answer.trace["failed_call"])
    if out["pred"] is None:  # R-A1: the release scores a question without an answer "A" (run_all)
        assert answer.pred == "A" and answer.trace["defaulted_to"] == "A", (answer.pred, out)
    else:
        assert answer.pred == (out["pred"] if out["pred"] in question.letters else None), (answer.pred, out["pred"])
    if call_failed:  # the episode again under ``failed_call: error_row`` (senri's rule): the same calls, unanswered
        method.failed_call = "error_row"
        try:
            controller.load(given["replies"])
            video_qa.load(given["video_qa_replies"])
            method.captions.clear()
            row = method.answer(question)
        finally:
            method.failed_call = "release_letter_a"
        assert len(controller.requests) == out["rounds"] and len(video_qa.requests) == len(out["video_qa"])
        assert row.pred is None and row.error == answer.error and row.trace["defaulted_to"] is None, \
            (row.pred, row.error, answer.error)
        assert row.trace["failed_call"] == "error_row" and row.trace["outcome"] == "killed", row.trace["outcome"]


def longvideo_r1_parse_function_call(case: dict) -> None:
    from senri.methods.longvideo_r1 import parse_call

    def parsed():
        name, args, legal = parse_call(case["input"]["call"])
        return {"name": name, "args_repr": repr(args), "legal": legal}

    expect(case, parsed)


def longvideo_r1_extract_blocks(case: dict) -> None:
    from senri.methods.longvideo_r1 import blocks

    expect(case, lambda: {k: v for k, v in blocks(case["input"]["text"]).items() if k in ("think", "answer", "tool")})


def longvideo_r1_extract_caption(case: dict) -> None:
    """process_segment's branch on data/utils.extract_and_validate: a reply with a ``<caption>`` block is stored
    as it is, any other wrapped; senri's stored_caption must store the same text."""
    from senri.methods.longvideo_r1 import stored_caption

    text, out = case["input"]["text"], case["output"]
    stored = text if "caption" in out["value"] else "<caption> " + text + " </caption>"
    assert stored_caption(text) == stored, (stored_caption(text), stored)


# -------------------------------------------------------------------------------------------------- VideoARM
VIDEOARM_TOTAL, VIDEOARM_FPS, VIDEOARM_LIMIT = 3000, 30.0, 240  # the generator's clip; total_frames_limit


def videoarm_scene_snapper_split(case: dict) -> None:
    """scene_snapper's frames: the caption model's (num_frames one of 30/60/90/150, else 30) and the
    controller's (the raw num_frames capped at the limit; absent: 30), split over the ranges as written; where the
    release raises or gets no frame, senri refuses or gets none. Where the release's call succeeded: its result's
    frames_loaded / total_duration / message and the number of mosaics the caption model was sent."""
    from senri.methods.videoarm_tools import TILES_PER_MOSAIC, snapshot_counts, snapshot_summary, split_frames

    given, out = case["input"], case["output"]
    wanted = 30 if given["num_frames"] is None else given["num_frames"]  # the release's .get("num_frames", 30)
    counts, refused = run(lambda: dict(zip(("caption", "controller"), snapshot_counts(wanted, VIDEOARM_LIMIT))))
    if refused is not None:  # the release's sampler fails on the count: the call is an error, nothing is shown
        assert isinstance(refused, ValueError) and ("raised" in out["caption"] or out["caption"]["error"]), \
            (refused, out)
        return
    for side in ("caption", "controller"):
        got, raised = run(lambda: [i for part in split_frames(given["frame_ranges"], counts[side], VIDEOARM_TOTAL)
                                   for i in part])
        if "raised" in out[side]:
            assert isinstance(raised, ValueError), (side, got, out[side])
        else:
            assert raised is None and got == out[side]["indices"], (side, got, raised, out[side])
    if out.get("result", {}).get("status") == "success":
        loaded = len(out["caption"]["indices"])
        summary = snapshot_summary(given["frame_ranges"], loaded, VIDEOARM_FPS)
        assert {k: summary[k] for k in out["result"] if k != "caption"} == \
            {k: v for k, v in out["result"].items() if k != "caption"}, (summary, out["result"])
        assert -(-loaded // TILES_PER_MOSAIC) == out["mosaics"], (loaded, out["mosaics"])


def videoarm_clip_reply(case: dict) -> None:
    from senri.methods.videoarm_tools import parse_clip_reply

    out = case["output"]
    assert "value" in out and "answer" in out["value"], out  # a 301-frame range: the release always answers
    answer, confidence, _ = parse_clip_reply(case["input"]["reply"])
    assert (answer, confidence) == (out["value"]["answer"], out["value"]["confidence"]), \
        ((answer, confidence), out["value"])


def videoarm_clip_range(case: dict) -> None:
    """clip_analyzer's frame_range read and clamped: the release's result range, or its refusal (an error
    result or a raise) where senri refuses."""
    from senri.methods.videoarm_tools import clip_frame_range

    out = case["output"]
    got, raised = run(lambda: clip_frame_range(case["input"]["frame_range"], VIDEOARM_TOTAL))
    if "raised" in out or "error" in out["value"]:
        assert isinstance(raised, ValueError), (got, out)
        return
    assert raised is None, (raised, out)
    assert {"start_frame": got[0], "end_frame": got[1]} == out["value"]["frame_range"], (got, out)


def videoarm_colour(i: int) -> tuple[int, int, int]:
    """The generator's solid colour of frame i, BGR as the release's files hold it (bench/release_cases/videoarm.py)."""
    return 10 + 18 * i, 240 - 17 * i, (53 * i + 30) % 256


def videoarm_mosaic_layout(case: dict) -> None:
    """The 3×2 mosaics of a list of frames (``_make_composite_grids``): senri's :func:`mosaics` on the same
    frames (a missing or corrupt file is a frame that could not be read: None) gives grids of the release's size,
    tile size and row-major tiles (each named by its solid colour, or black padding). Where the release made no
    grid (no frame of any chunk readable) it hands the unreadable paths back, which its client cannot read either:
    no image reaches the model, and senri makes no mosaic."""
    import numpy as np

    from senri.methods.videoarm_tools import MOSAIC_COLS, MOSAIC_ROWS, mosaics

    frames = [np.full((f["h"], f["w"], 3), videoarm_colour(i)[::-1], dtype=np.uint8) if isinstance(f, dict) else None
              for i, f in enumerate(case["input"]["frames"])]
    out = case["output"]
    assert "value" in out, out
    grids, raised = run(lambda: mosaics(frames))
    assert raised is None, raised
    if "returned_paths" in out["value"]:
        assert grids == [] and all(f is None for f in frames), (len(grids), out)
        return
    names = {videoarm_colour(i)[::-1]: f"frame{i}" for i in range(len(frames))}
    got = []
    for grid in grids:
        th, tw = grid.shape[0] // MOSAIC_ROWS, grid.shape[1] // MOSAIC_COLS
        tiles = []
        for r in range(MOSAIC_ROWS):
            row = []
            for c in range(MOSAIC_COLS):
                values = {tuple(int(v) for v in px) for px in
                          np.unique(grid[r * th:(r + 1) * th, c * tw:(c + 1) * tw].reshape(-1, 3), axis=0)}
                only = next(iter(values)) if len(values) == 1 else None
                row.append("pad(black)" if only == (0, 0, 0) else names.get(only, "mixed"))
            tiles.append(row)
        got.append({"grid_hw": [int(grid.shape[0]), int(grid.shape[1])], "tile_hw": [th, tw],
                    "tiles_row_major": tiles})
    assert got == out["value"]["grids"], (got, out["value"]["grids"])


def videoarm_caption_reply(case: dict) -> None:
    """The caption model's reply as ``_generate_scene_caption`` keeps it: its first line, "Caption:" stripped."""
    from senri.methods.videoarm_tools import first_caption_line

    expect(case, lambda: first_caption_line(case["input"]["reply"]), convert=lambda caption: {
        "status": "success" if caption else "empty", "caption": caption})


def videoarm_error_like(case: dict) -> None:
    """A tool-less reply that is no answer (``_looks_like_error``): senri's default reads it the same way."""
    from senri.methods.videoarm_tools import is_error_like

    expect(case, lambda: is_error_like(case["input"]["text"]))


def videoarm_tool_arguments(case: dict) -> None:
    """A tool call's arguments through the release's JSON reader: where it read an object, senri's default
    reader (:func:`read_arguments`, ``tool_arguments_parser: release``) reads the same object; where it read
    nothing (None) or another value, the release's dispatcher makes the call an error result ("Failed to parse
    arguments", or ``tool(**value)``'s TypeError), and senri refuses the arguments (ValueError: an error result)."""
    from senri.methods.videoarm_tools import read_arguments

    out = case["output"]
    got, raised = run(lambda: read_arguments(case["input"]["arguments"]))
    if out.get("type") == "dict":
        assert raised is None, f"senri raised {raised!r}; the release read {out['value']!r}"
        assert same(got, out["value"]), (got, out["value"])
    else:
        assert isinstance(raised, ValueError), f"the release gave {out!r}; senri read {got!r}"


ADAPTERS: dict[str, dict[str, Callable[[dict], None]]] = {
    "paravt": {"parse_time_val": paravt_parse_time_val, "extract_letter": paravt_extract_letter,
               "parse_tool_calls": paravt_parse_tool_calls, "eval_one_calls": paravt_eval_one_calls,
               "forced_turn": paravt_forced_turn, "qvu_smart_resize": paravt_qvu_smart_resize,
               "qvu_smart_nframes": paravt_qvu_smart_nframes, "qvu_frame_range": frame_range,
               "overview_frames": paravt_overview_frames, "crop_frames": paravt_crop_frames,
               "crop_frames_torchvision": paravt_crop_frames_torchvision},
    "video_o3": {"grounding_parse": video_o3_grounding_parse, "reply_reading": video_o3_reply_reading, "videomme_extract": video_o3_videomme_extract,
                 "vp_smart_resize": video_o3_vp_smart_resize, "vp_frame_range": frame_range,
                 "main_video_resize": video_o3_main_video_resize},
    "longvideo_r1": {"tree_width": longvideo_r1_tree_width, "video_qa_frames": longvideo_r1_video_qa_frames,
                     "caption_frame_size": longvideo_r1_caption_frame_size,
                     "video_qa_frame_size": longvideo_r1_video_qa_frame_size,
                     "parse_function_call": longvideo_r1_parse_function_call,
                     "extract_blocks": longvideo_r1_extract_blocks, "extract_caption": longvideo_r1_extract_caption,
                     "caption_tree": longvideo_r1_caption_tree, "episodes": longvideo_r1_episodes},
    "videoarm": {"scene_snapper_split": videoarm_scene_snapper_split, "clip_reply": videoarm_clip_reply,
                 "clip_range": videoarm_clip_range, "mosaic_layout": videoarm_mosaic_layout,
                 "caption_reply": videoarm_caption_reply, "error_like": videoarm_error_like,
                 "tool_arguments": videoarm_tool_arguments},
}


def verdict(system: str, kind: str, case: dict) -> str:
    """``"pass"`` or ``"deviation:<name>"``; an AssertionError (naming the case's input) where senri differs."""
    try:
        ADAPTERS[system][kind](case)
    except Deviation as named:
        return f"deviation:{named}"
    except AssertionError as exc:
        raise AssertionError(f"{system}/{kind} input {json.dumps(case['input'])[:300]}: {exc}") from None
    return "pass"


def sample(cases: list, n: int) -> list:
    """At most ``n`` cases spread evenly over the list (the same ones every run)."""
    if len(cases) <= n:
        return list(cases)
    step = len(cases) / n
    return [cases[int(i * step)] for i in range(n)]

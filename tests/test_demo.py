import dataclasses
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import SMALL_DEMO, gray_frames
from senri import demo
from senri.probe import probe
from senri.benchmarks.senri import TASK_TYPES
from senri.records import LETTERS


def _walks(small_demo):
    return {w["video_id"]: w for w in json.loads((small_demo["dir"] / "walks.json").read_text())}


def _questions(small_demo):
    return [json.loads(line) for line in small_demo["questions"].read_text().splitlines()]


def test_videos_have_the_promised_format(small_demo):
    for video_id, path in small_demo["videos"].items():
        info = probe(path, video_id)
        walk = demo.plan_walk(SMALL_DEMO, video_id)
        assert (info.width, info.height, info.codec) == (640, 360, "h264")
        assert info.avg_fps == 30.0 and not info.is_vfr
        assert info.duration_s == pytest.approx(walk.duration_s, abs=0.05)
        assert info.n_frames == walk.duration_s * 30
        assert info.keyframe_interval_s == pytest.approx(1.0)
        assert info.has_audio == walk.has_audio
    assert {probe(p, v).has_audio for v, p in small_demo["videos"].items()} == {True, False}


def test_videos_have_b_frames(small_demo):
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-read_intervals", "%+3", "-show_entries",
         "frame=pict_type", "-of", "csv=p=0", str(small_demo["videos"]["demo_01"])],
        check=True, capture_output=True, text=True,
    ).stdout
    assert "B" in out.split()


def test_burned_in_frame_index_matches_decoded_frame_number(small_demo):
    indices = [0, 1, 29, 30, 31, 777, SMALL_DEMO.fps * demo.plan_walk(SMALL_DEMO, "demo_02").duration_s - 1]
    frames = gray_frames(small_demo["videos"]["demo_02"], indices, 640, 360)
    assert [demo.read_frame_index(f) for f in frames] == indices


#: The small demo's layout (five places, its seed and frame size) on a short clock: 3-s places, 1-s turns, 10 fps.
#: Whether two renders of a walk agree does not depend on its length; the small demo's 68-s, 30-fps walk took
#: 10 s to render again.
SHORT_WALKS = dataclasses.replace(SMALL_DEMO, place_s=3, turn_s=1, fps=10)


def test_rendering_is_deterministic(tmp_path):
    """Two renders of one walk (demo_01: signs, turns, passers and the audio track) are the same bytes, and the
    walk script is the same for the same config and id and differs between ids."""
    walk = demo.plan_walk(SHORT_WALKS, "demo_01")
    assert walk.has_audio and walk.turns
    with ThreadPoolExecutor(max_workers=2) as pool:  # side by side, as the workflow renders a demo's videos
        first, again = pool.map(lambda name: demo.render_video(walk, tmp_path / name, threads=1),
                                ("first.mp4", "again.mp4"))
    assert again.read_bytes() == first.read_bytes()
    assert demo.plan_walk(SHORT_WALKS, "demo_01") == walk
    assert demo.plan_walk(SHORT_WALKS, "demo_02") != walk


def test_squares_in_the_pixels_match_the_count_the_questions_use(small_demo):
    """Count the coloured squares in a decoded frame at each place: the OC ground truth is in the video."""
    walk = _walks(small_demo)["demo_01"]
    size = 360 // 9
    indices = [(p["start_s"] + 1) * 30 for p in walk["places"]]
    frames = gray_frames(small_demo["videos"]["demo_01"], indices, 640, 360, pix_fmt="rgb24")
    for place, frame in zip(walk["places"], frames):
        row = frame[360 * 3 // 4 + size // 2]
        pixels = [row[x : x + 3] for x in range(0, len(row), 3)]
        background = pixels[5]
        squares, inside = 0, False
        for pixel in pixels:
            differs = sum(abs(a - b) for a, b in zip(pixel, background)) > 60
            squares += differs and not inside
            inside = differs
        assert squares == place["object_count"], place["name"]


def test_question_file_meets_the_brief(small_demo):
    questions = _questions(small_demo)
    for video_id in ("demo_01", "demo_02"):
        mine = [q for q in questions if q["video_id"] == video_id]
        for task in TASK_TYPES:
            assert sum(q["task_type"] == task for q in mine) >= 2, (video_id, task)
        letters = [q["answer"] for q in mine]
        assert {letters.count(letter) for letter in LETTERS} == {len(mine) // 4}
        for q in mine:
            assert len(q["options"]) == 4 and len(set(q["options"])) == 4
    assert len({q["qid"] for q in questions}) == len(questions)


def _by(items, key, value):
    found = [i for i in items if i[key] == value]
    assert len(found) == 1, (key, value)
    return found[0]


def test_every_answer_follows_from_the_walk(small_demo):
    """Re-derive each answer from the walk script, independently of how the questions were generated."""
    _assert_answers_follow_from(_walks(small_demo), _questions(small_demo))


def test_fewer_questions_per_task_keep_letters_balanced_and_answers_right():
    """`make demo` asks 8 questions a video (config/dataset/demo.yaml): the counts asked, balanced letters, every
    answer still right by the walk; the default counts give the generator's 16."""
    counts = {"L": 2, "RR": 1, "OC": 1, "NP": 1, "RER": 2, "TER": 1}
    cfg = dataclasses.replace(SMALL_DEMO, questions_per_task=counts)
    walks = {v: demo.plan_walk(cfg, v) for v in demo.video_ids(cfg)}
    for video_id, walk in walks.items():
        questions = demo.make_questions(walk, cfg.seed, cfg.questions_per_task)
        assert {t: sum(q["task_type"] == t for q in questions) for t in counts} == counts
        assert sorted(q["answer"] for q in questions) == sorted(LETTERS * 2)
        _assert_answers_follow_from({video_id: walk.to_json()}, questions)
        assert len(demo.make_questions(walk, cfg.seed)) == sum(demo.QUESTIONS_PER_TASK.values()) == 16


@pytest.mark.parametrize("counts, message", [
    ({"L": 3, "RR": 1, "OC": 1, "NP": 1, "RER": 2, "TER": 1}, "sums to 9 a video"),
    ({"L": 1, "NP": 3}, "asks more than 5 places a video allow: {'NP': (3, 2)}"),
    ({"L": 4, "XX": 4}, "unknown task types ['XX']"),
])
def test_question_counts_that_cannot_be_asked_are_refused(counts, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(SMALL_DEMO, questions_per_task=counts)


def _assert_answers_follow_from(walks, questions):
    for q in questions:
        walk, text = walks[q["video_id"]], q["question"]
        places, turns = walk["places"], walk["turns"]
        chosen = q["options"][LETTERS.index(q["answer"])]
        event = re.search(r"when I was (.+?)[,?]", text, re.IGNORECASE)
        named = [p for p in places if f"the {p['name'].title()}" in text]
        if q["task_type"] == "L":
            assert chosen == _by(places, "event", event.group(1))["name"].title()
        elif q["task_type"] == "RR":
            side = _by(places, "event", event.group(1))["landmark_side"]
            assert chosen == f"To my front {side}"
        elif q["task_type"] == "OC":
            assert chosen == str(_by(places, "event", event.group(1))["object_count"])
        elif q["task_type"] == "NP":
            start, end = sorted(places.index(p) for p in named)
            route = [t["direction"] for t in turns[start:end]]
            assert chosen.lower().replace(", then", ",") == ", ".join(f"turn {d}" for d in route)
        elif q["task_type"] == "RER":
            assert chosen == named[0]["event_past"]
        else:
            start = min(places.index(p) for p in named)
            assert chosen.upper() == turns[start]["passer"]
        assert q["evidence_start_s"] < q["evidence_end_s"] <= walk["duration_s"]

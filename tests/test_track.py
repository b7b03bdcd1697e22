"""The ego-motion track: pure turn/pause logic on hand-made series, then a generated walk with known turns
(angles 45°–180°, both directions, over a textured panorama), pauses and sign text, measured end to end."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from senri import demo
from senri.records import OcrRow, TrackRow, check_frame
from senri.track import (Interval, TrackConfig, clock, label_at, pauses, plot_track, track_intervals,
                         turn_events)

CONFIG = TrackConfig()


def _series(segments: list[tuple[float, float]], fps: float = 5.0) -> tuple[list[float], list[float]]:
    """(times, rates) from (duration_s, rate_deg_s) segments."""
    times, rates, t = [], [], 0.0
    for duration, rate in segments:
        for _ in range(round(duration * fps)):
            times.append(round(t, 6))
            rates.append(rate)
            t += 1 / fps
    return times, rates


def test_a_steady_turn_is_one_event_with_its_integrated_angle():
    times, rates = _series([(2, 0), (3, 30), (2, 0)])  # 30°/s for 3 s = 90° right
    events = turn_events(times, rates, CONFIG)
    assert len(events) == 1
    assert events[0].degrees == pytest.approx(90, abs=0.01)
    assert events[0].label == "right 90°"


def test_left_turns_are_negative_and_u_turns_are_named():
    times, rates = _series([(1, 0), (4, -45), (1, 0)])  # 180° left
    [event] = turn_events(times, rates, CONFIG)
    assert event.degrees == pytest.approx(-180, abs=0.01)
    assert event.label == "U-turn left 180°"


def test_head_wobble_is_not_a_turn():
    times, rates = _series([(1, 0), (0.4, 40), (0.4, -40), (1, 0), (1, 20), (1, 0)])  # ±16°, then 20° total
    assert turn_events(times, rates, CONFIG) == []


def test_a_turn_with_a_short_hesitation_stays_one_turn():
    times, rates = _series([(1, 0), (2, 30), (0.4, 0), (2, 30), (1, 0)])
    [event] = turn_events(times, rates, CONFIG)
    assert event.degrees == pytest.approx(120, abs=0.01)


def test_turns_in_opposite_directions_stay_apart():
    times, rates = _series([(1, 0), (3, 30), (3, -30), (1, 0)])
    events = turn_events(times, rates, CONFIG)
    assert [e.label for e in events] == ["right 90°", "left 90°"]


def test_pauses_need_the_minimum_duration():
    times = [k / 5 for k in range(50)]
    moving = [not (5 <= k < 20) and not (30 <= k < 35) for k in range(50)]  # 3 s still, then 1 s still
    found = pauses(times, moving, CONFIG)
    assert [(p.start_s, p.end_s) for p in found] == [(1.0, 3.8)]


def test_a_label_is_held_for_a_while_but_not_across_a_cut():
    labels = [(10.0, "BANK"), (30.0, "CAFE")]
    assert label_at(labels, 15.0, hold_s=10) == "BANK"
    assert label_at(labels, 25.0, hold_s=10) is None           # read 15 s ago
    assert label_at(labels, 15.0, hold_s=10, since_s=12.0) is None  # a cut after the read
    assert label_at(labels, 5.0, hold_s=10) is None
    assert clock(3725) == "1:02:05" and clock(65) == "1:05"


# ------------------------------------------------------------------------------- a generated walk


TURNS = [("right", 90), ("left", 45), ("right", 180), ("left", 120)]
PLACES = ["BAKERY", "MUSEUM", "LIBRARY", "CINEMA", "BANK"]


@pytest.fixture(scope="module")
def walk_track(tmp_path_factory):
    """A 480×270 walk: 5 places (12 s each, standing still, a sign) joined by 4 s turns of known angles."""
    from senri.track import OcrReader, compute_track

    width, height, fps, place_s, turn_s = 480, 270, 15, 12, 4
    places, turns, t = [], [], 0
    for i, name in enumerate(PLACES):
        places.append(demo.Place(name, t, t + place_s, demo.BACKGROUNDS[i], "reading a map", "Read a map", t + 4,
                                 t + 8, "red", 2, "EXIT", "left"))
        t += place_s
        if i < len(TURNS):
            direction, degrees = TURNS[i]
            turns.append(demo.Turn(direction, demo.PASSERS[i], t, t + turn_s, degrees))
            t += turn_s
    walk = demo.Walk("walk", tuple(places), tuple(turns), t, width, height, fps, 1.0, False, camera_hfov_deg=90.0)
    out = tmp_path_factory.mktemp("track")
    video = demo.render_video(walk, out / "walk.mp4")
    reader = OcrReader(CONFIG.ocr_min_score)
    track, ocr, stats = compute_track(video, "walk", CONFIG, ocr=reader)
    return {"walk": walk, "track": track, "ocr": ocr, "stats": stats, "dir": out, "reader": reader}


def test_the_turn_sequence_is_recovered(walk_track):
    turns, _ = track_intervals(walk_track["track"], CONFIG)
    truth = walk_track["walk"].turns
    assert len(turns) == len(truth), [t.label for t in turns]
    for found, expected in zip(turns, truth):
        sign = 1 if expected.direction == "right" else -1
        assert np.sign(found.degrees) == sign, (found, expected)
        assert abs(abs(found.degrees) - expected.degrees) <= 30, (found, expected)
        assert expected.start_s - 1 <= found.start_s and found.end_s <= expected.end_s + 1
    assert turns[2].label.startswith("U-turn right")
    final = walk_track["track"]["heading_deg"][-1]
    assert final == pytest.approx(sum((1 if d == "right" else -1) * a for d, a in TURNS), abs=30)


def test_pauses_are_found_at_every_place(walk_track):
    _, still = track_intervals(walk_track["track"], CONFIG)
    places = walk_track["walk"].places
    assert len(still) == len(places)
    for pause, place in zip(still, places):
        assert isinstance(pause, Interval)
        assert place.start_s - 0.5 <= pause.start_s and pause.end_s <= place.end_s + 0.5
        assert pause.end_s - pause.start_s >= place.end_s - place.start_s - 2


def test_ocr_reads_the_signs_and_labels_the_places(walk_track):
    texts = set(walk_track["ocr"]["text"].to_list())
    for name in PLACES:
        assert name in texts
    assert "READING A MAP" in texts and "EXIT" in texts
    track = walk_track["track"]
    for place in walk_track["walk"].places:
        middle = track.filter((pl.col("t_s") - (place.start_s + place.end_s) / 2).abs() < 0.1)
        assert middle["place_label"].to_list()[0] == place.name
    # An unchanged view is not read again: the still places' samples reuse the last read (the turns' and
    # the burned-in index strip's changes force the rest).
    stats = walk_track["stats"]
    assert stats["ocr_reads"] <= 0.75 * (stats["ocr_reads"] + stats["ocr_reused"])
    # RapidOCR's three sessions block while they wait, on the job's cores (senri.ort: the same reads, less CPU).
    from senri.ort import job_threads, spins

    sessions = walk_track["reader"].sessions
    assert len(sessions) == 3 and not any(spins(s) for s in sessions)
    assert {s.get_session_options().intra_op_num_threads for s in sessions} == {job_threads()}


def test_tables_and_plot(walk_track):
    check_frame(walk_track["track"], TrackRow, "track")
    check_frame(walk_track["ocr"], OcrRow, "ocr")
    png = plot_track(walk_track["track"], walk_track["dir"] / "walk.png", "walk")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000

"""Box tracks across detection frames: what covers the frames between detections, and a missed detection.

Detection runs every ``stride`` frames and can miss a face for a frame or two (small, turned, blurred by
motion). Each detected box continues a *track* (greedy match to the track's predicted box: same class,
centres closer than the larger box side). A track not matched keeps going on its last velocity for up to
``max_missed`` detection frames before it ends, so one miss does not open a gap. Frames between two
detection frames get every track's box interpolated linearly between its two ends, plus both ends' boxes
(a superset: coverage first, a slightly larger blur is the cheaper error).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from senri.anonymize.detectors.base import Box


def _centre(box: Box) -> tuple[float, float]:
    return (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2


def _shift(box: Box, delta: tuple[float, float, float, float], frames: int) -> Box:
    return replace(box, x0=box.x0 + delta[0] * frames, y0=box.y0 + delta[1] * frames,
                   x1=box.x1 + delta[2] * frames, y1=box.y1 + delta[3] * frames)


def interpolate(a: Box, b: Box, t: float) -> Box:
    return replace(a, x0=a.x0 + (b.x0 - a.x0) * t, y0=a.y0 + (b.y0 - a.y0) * t,
                   x1=a.x1 + (b.x1 - a.x1) * t, y1=a.y1 + (b.y1 - a.y1) * t)


@dataclass
class Track:
    box: Box
    frame: int
    velocity: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    missed: int = 0

    def predict(self, frame: int) -> Box:
        return _shift(self.box, self.velocity, frame - self.frame)


@dataclass(frozen=True)
class Step:
    """The outcome at one detection frame: the boxes to blur there (``detected`` and ``predicted``), and
    (box at the previous detection frame, box now) for every track alive at both, for interpolation."""

    detected: list[Box]
    predicted: list[Box]
    spans: list[tuple[Box, Box]]


class Tracker:
    def __init__(self, max_missed: int = 2) -> None:
        self.max_missed = max_missed
        self.tracks: list[Track] = []

    def update(self, frame: int, detections: list[Box]) -> Step:
        predictions = [track.predict(frame) for track in self.tracks]
        unmatched = set(range(len(self.tracks)))
        spans: list[tuple[Box, Box]] = []
        survivors: list[Track] = []
        for box in sorted(detections, key=lambda b: -b.score):
            best, best_distance = None, None
            for i in unmatched:
                guess = predictions[i]
                if guess.cls != box.cls:
                    continue
                (cx, cy), (gx, gy) = _centre(box), _centre(guess)
                distance = ((cx - gx) ** 2 + (cy - gy) ** 2) ** 0.5
                reach = max(box.x1 - box.x0, box.y1 - box.y0, guess.x1 - guess.x0, guess.y1 - guess.y0)
                if distance <= reach and (best_distance is None or distance < best_distance):
                    best, best_distance = i, distance
            if best is None:
                survivors.append(Track(box, frame))
                continue
            unmatched.discard(best)
            track = self.tracks[best]
            gap = max(1, frame - track.frame)
            velocity = ((box.x0 - track.box.x0) / gap, (box.y0 - track.box.y0) / gap,
                        (box.x1 - track.box.x1) / gap, (box.y1 - track.box.y1) / gap)
            spans.append((track.box, box))
            survivors.append(Track(box, frame, velocity))
        predicted = []
        for i in sorted(unmatched):
            track = self.tracks[i]
            if track.missed + 1 > self.max_missed:
                continue
            guess = predictions[i]
            spans.append((track.box, guess))
            predicted.append(guess)
            survivors.append(Track(guess, frame, track.velocity, track.missed + 1))
        self.tracks = survivors
        return Step(detected=list(detections), predicted=predicted, spans=spans)

"""EG-Agent's time conventions (spec "Notation", E-C8, D7).

The release stores a moment as T8 = the integer ``HHMMSSCC`` (hours, minutes, seconds, centiseconds), so a
time before 10:00 loses its leading zero once it is an int, and its text form (``tf``, "HH:MM:SS,CC") is read
back from the digits. senri keeps T8 integers (the SQL comparisons are numeric, so order is right at any hour)
and always renders them zero-padded: the spec's D7 fix, without which every time of an elapsed-time video
(which starts at 00:00:00) would be mis-rendered. One video is one day (``DAY1``, adapter choice S3), and a
second of the video is its clock time from 00:00:00.
"""

from __future__ import annotations

import re

#: The day every video is on (adapter choice S3: one video = one day).
VIDEO_DAY = 1

#: The files of a store folder (:mod:`senri.memory.egagent.store`), here so the release reader and the store
#: both name them without importing each other.
GRAPH_FILE = "entity_graph.db"
TRANSCRIPT_FILE = "transcript.parquet"
CLIPS_FILE = "clips.parquet"
FRAMES_FILE = "frames.npz"
CONFIG_FILE = "config.yaml"


def t8_from_seconds(seconds: float) -> int:
    """T8 (``HHMMSSCC`` as an int) of a moment ``seconds`` into the video (centiseconds rounded down)."""
    if seconds < 0:
        raise ValueError(f"a negative time {seconds!r} s has no T8")
    centis = int(round(float(seconds) * 100, 6))
    hours, rest = divmod(centis, 360000)
    minutes, rest = divmod(rest, 6000)
    secs, cc = divmod(rest, 100)
    return ((hours * 100 + minutes) * 100 + secs) * 100 + cc


def seconds_from_t8(t8: int) -> float:
    """The moment a T8 names, in seconds (the inverse of :func:`t8_from_seconds`)."""
    value = int(t8)
    if value < 0:
        raise ValueError(f"T8 {t8!r} is negative")
    hhmmss, cc = divmod(value, 100)
    hhmm, ss = divmod(hhmmss, 100)
    hh, mm = divmod(hhmm, 100)
    if mm > 59 or ss > 59:
        raise ValueError(f"T8 {t8!r} is not HHMMSSCC (minutes {mm}, seconds {ss})")
    return hh * 3600 + mm * 60 + ss + cc / 100


def tf(t8: int) -> str:
    """"HH:MM:SS,CC" of a T8, zero-padded (the release's ``tf`` reads the int's digits, so before 10:00 it
    shifts every field: D7, fixed here)."""
    digits = f"{int(t8):08d}"
    return f"{digits[0:2]}:{digits[2:4]}:{digits[4:6]},{digits[6:8]}"


def hms6(t8: int) -> int:
    """The HHMMSS part of a T8 (the frame-window writer's bounds, E-R1)."""
    return int(t8) // 100


_CLOCK = re.compile(r"^\s*(\d{1,2}):([0-5]\d):([0-5]\d)(?:[,.](\d{1,3}))?\s*$")


def t8_from_clock(text: str) -> int:
    """T8 of "H:MM:SS,mmm" (E-C8: milliseconds right-padded to 3 digits, then // 10). A ValueError names what
    does not read (the release drops such an interval; the builder counts it)."""
    match = _CLOCK.match(str(text))
    if not match:
        raise ValueError(f"time {text!r} is not H:MM:SS,mmm")
    hours, minutes, seconds, millis = match.groups()
    centis = int((millis or "0").ljust(3, "0")) // 10
    return ((int(hours) * 100 + int(minutes)) * 100 + int(seconds)) * 100 + centis


def clock(seconds: float) -> str:
    """"HH:MM:SS" of a moment (the frame analyzer's labels, E-R1, and the query time)."""
    return tf(t8_from_seconds(seconds))[:8]

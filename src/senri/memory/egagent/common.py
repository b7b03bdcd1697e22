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


def tf_value(value: object) -> str:
    """What the release's ``tf`` renders for a value that reaches it from a table or a reply: a T8 int as
    :func:`tf` (D7's zero padding), anything else as the release does — the characters of ``str(value)`` cut at
    2, 4, 6 and 8 (a NULL end time renders "No:ne:,", a source id in the time's column "Ja:ke:,")."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return tf(value)
    text = str(value)
    return f"{text[0:2]}:{text[2:4]}:{text[4:6]},{text[6:8]}"


def hms6(t8: int) -> int:
    """The HHMMSS part of a T8 (the frame-window writer's bounds, E-R1)."""
    return int(t8) // 100


#: E-C8's interval times as the release's builder reads them: "H:MM:SS,m" to "HH:MM:SS,mmm", a comma before the
#: fraction, surrounding blanks ignored; the minutes and seconds are any two digits ("11:60:00,000" reads).
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2}),(\d{1,3})$")


def t8_from_clock(text: str) -> int:
    """T8 of "H:MM:SS,mmm" (E-C8: milliseconds right-padded to 3 digits, then // 10, so ",7" is 700 ms and
    ",07" 70 ms). A ValueError names what does not read (the release drops such an interval; the builder
    counts it); an empty time is a ValueError here where the release stores NULL (the builder drops it)."""
    match = _CLOCK.match(str(text).strip())
    if not match:
        raise ValueError(f"time {text!r} is not H:MM:SS,mmm")
    hours, minutes, seconds, millis = match.groups()
    centis = int(millis.ljust(3, "0")) // 10
    return ((int(hours) * 100 + int(minutes)) * 100 + int(seconds)) * 100 + centis


def millis_from_clock(text: str) -> int:
    """Milliseconds of "H:MM:SS,f" as the release reads a cue's or a span's start for the nearest cue (E-C7) and
    an SRT time (``shift_timestamp``): the fraction is an integer count of milliseconds, not right-padded
    (",7" is 7 ms, ",70" 70 ms, ",700" 700 ms)."""
    match = _CLOCK.match(str(text).strip())
    if not match:
        raise ValueError(f"time {text!r} is not H:MM:SS,mmm")
    hours, minutes, seconds, millis = (int(g) for g in match.groups())
    return ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis


def clock(seconds: float) -> str:
    """"HH:MM:SS" of a moment (the frame analyzer's labels, E-R1, and the query time)."""
    return tf(t8_from_seconds(seconds))[:8]

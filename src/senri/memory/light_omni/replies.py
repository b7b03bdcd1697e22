"""Light-Omni's text handling: its clock strings, its reply repair, its query text and its letter rule.

The release keeps every time as a ``"YYYY-MM-DD HH:MM:SS"`` string from START_TIME (L-C1) and compares and
adds them through ``datetime``; a memory-adapter reply goes through a character-set strip and json_repair
(K-14); a benchmark answer is the response's first character (L-L3, K-19). These are the release's rules,
quirks included, so a test can hold them against the release cases.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import json_repair

#: L-C1: the clock every video starts at (scripts/config.py START_TIME).
START_TIME = "2026-01-01 08:00:00"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
#: LP6: the Qwen3-Embedding query instruction the patched model prefixes to every query (L-R2).
QUERY_TASK = "Given a web search query, retrieve relevant passages that answer the query"
#: L-L3: responses that count as "no response" (compared case-insensitively).
SILENT_RESPONSES = ("null", "none", "silent")


def add_time(stamp: str, add_day: float = 0, add_hour: float = 0, add_min: float = 0, add_sec: float = 1) -> str:
    """``stamp`` moved by the offsets (default one second), truncated to whole seconds as strftime prints."""
    moved = datetime.strptime(stamp, TIME_FORMAT) + timedelta(days=add_day, hours=add_hour, minutes=add_min,
                                                              seconds=add_sec)
    return moved.strftime(TIME_FORMAT)


def compare_times(first: str | None, second: str | None) -> int:
    """-1, 0 or 1 as ``first`` is before, equal to or after ``second``; 0 when either is None (the release's
    rule, which lets a missing time pass every ordering check)."""
    if first is None or second is None:
        return 0
    a, b = datetime.strptime(first, TIME_FORMAT), datetime.strptime(second, TIME_FORMAT)
    return -1 if a < b else (1 if a > b else 0)


def more_than_minutes_apart(first: str | None, second: str | None, minutes: float) -> bool:
    """Whether two times are strictly more than ``minutes`` apart (a missing time counts as apart)."""
    if first is None or second is None:
        return True
    gap = abs((datetime.strptime(second, TIME_FORMAT) - datetime.strptime(first, TIME_FORMAT)).total_seconds())
    return gap / 60 > minutes


def clock_seconds(text: str | None) -> float:
    """``"HH:MM:SS[.mmm]"`` as seconds; a full TS string as its POSIX time (local zone); anything unreadable
    is 0.0, as the release prints a warning and returns 0.0."""
    if text is None:
        return 0.0
    try:
        return datetime.strptime(text, TIME_FORMAT).timestamp()
    except ValueError:
        pass
    try:
        parts = text.split(":")
        hours, minutes = int(parts[0]), int(parts[1])
        if "." in parts[2]:
            whole, millis = parts[2].split(".")
            return float(hours * 3600 + minutes * 60 + int(whole) + int(millis) / 1000)
        return float(hours * 3600 + minutes * 60 + int(parts[2]))
    except (ValueError, IndexError):
        return 0.0


def seconds_since_start(stamp: str, start: str = START_TIME) -> float:
    """Seconds of ``stamp`` after the video's START_TIME: how senri anchors a Light-Omni item on the video."""
    return (datetime.strptime(stamp, TIME_FORMAT) - datetime.strptime(start, TIME_FORMAT)).total_seconds()


def normalize_reply(text: str) -> str:
    """K-14's strip: whitespace, then the CHARACTER SETS ``json``, ````` and ``'`` from both ends (so
    ``"null"`` loses its ``n`` and ``"nothing useful"`` its ``no``), then whitespace."""
    return text.strip().strip("json").strip("```").strip("'''").strip()


def repair_reply(text: str) -> Any:
    """K-14: control characters (except newline, return, tab) removed, json_repair, and a decoded string
    that looks like JSON decoded again. An empty text is ``{}``; an unrepairable one comes back as the
    repaired value (often ``""``), which the caller's next field assignment trips over (L-L4)."""
    if not text:
        return {}
    cleaned = "".join(ch for ch in text if ord(ch) >= 32 or ch in "\n\r\t")
    try:
        decoded = json_repair.loads(cleaned)
        if isinstance(decoded, str) and (decoded.startswith("{") or decoded.startswith("[")):
            return json.loads(decoded)
        return decoded
    except Exception:  # noqa: BLE001 - the release returns the text on any repair failure
        return text


def parse_reply(text: str) -> Any:
    """A memory-adapter reply as the release reads it: :func:`normalize_reply` then :func:`repair_reply`."""
    return repair_reply(normalize_reply(text))


def parse_action(data: Any) -> dict[str, Any]:
    """utils.parse_response: a ``{"action", "content", "thought"}`` reply as ``{thought, action, retrieve|answer}``
    (off the evaluation path; kept because its cases pin the defaults)."""
    if isinstance(data, str):
        try:
            data = json.loads(data.replace("```json", "").replace("```", "").strip())
        except Exception:  # noqa: BLE001 - the release's catch-all
            return {"action": "answer", "answer": "null", "thought": "JSON parsing failed."}
    if not isinstance(data, dict):
        return {"action": "answer", "answer": "null", "thought": "Invalid output format."}
    content = data.get("content", "null")
    result: dict[str, Any] = {"thought": data.get("thought", "No thought provided.")}
    if data.get("action", "answer") == "retrieve":
        result.update(action="retrieve", retrieve=content)
    else:
        result.update(action="answer", answer=content)
    return result


def silenced(response: str) -> str:
    """L-L3: a response that is ``null``/``none``/``silent`` (any case) becomes the empty string."""
    return "" if response.lower() in SILENT_RESPONSES else response


def first_character(response: str) -> str:
    """K-19: the predicted letter is the response's first character. An empty response raises IndexError in
    the release; senri records it as a per-question failure instead (the caller decides)."""
    return response[0]


def question_text(question: str, options: list[str]) -> str:
    """L-L1/LP7: the question message, ``question + "\\nOptions:\\n" + options`` (the options already carry
    their ``"A. "`` prefixes)."""
    return question + "\nOptions:\n" + "\n".join(options)


def query_text(text: str, asr: str = "") -> str:
    """L-R3: ``(ASR) + "\\n" + text`` with EVERY ``null`` removed (case-sensitive: "annulled" → "aned"),
    stripped. Benchmark questions have no audio, so ``asr`` is empty."""
    return (asr + "\n" + text).replace("null", "").strip()


def query_instruction(text: str) -> str:
    """LP6: the text a query is embedded as (``Instruct: …\\nQuery: …``)."""
    return f"Instruct: {QUERY_TASK}\nQuery: {text}"


MEDIA_TAG = re.compile(r"(<img>|<audio>|<video>)")
_PART_KIND = {"<img>": "image", "<audio>": "audio", "<video>": "video"}


def interleave(prompt: str, files: list[str]) -> dict[str, Any]:
    """md prepare_input: the filled prompt split at its ``<img>``/``<audio>``/``<video>`` tags into one user
    turn of text and media parts, files taken in tag order. The number of files must equal the number of
    tags (the release asserts it; a model text that itself contains a tag breaks it: L-Q4)."""
    tags = sum(prompt.count(tag) for tag in _PART_KIND)
    if len(files) != tags:
        raise AssertionError(f"Light-Omni prompt has {tags} media tags but {len(files)} files")
    parts: list[dict[str, str]] = []
    remaining = iter(files)
    for piece in MEDIA_TAG.split(prompt):
        if piece in _PART_KIND:
            kind = _PART_KIND[piece]
            parts.append({"type": kind, kind: next(remaining)})
        elif piece:
            parts.append({"type": "text", "text": piece})
    return {"role": "user", "content": parts}

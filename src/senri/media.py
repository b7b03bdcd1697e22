"""Running ffmpeg and ffprobe as child processes, the one way every stage does it.

Always ``-nostdin`` (a child ffmpeg that reads the parent's stdin stops early or hangs a pipeline), stdin
closed, stderr captured and shown in the error, so a failure names the file and what ffmpeg said.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Sequence


class MediaError(RuntimeError):
    """ffmpeg/ffprobe failed on a file; the message names the file and quotes the tool's own error."""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MediaError(f"{name} not found on PATH; install it (Debian: apt-get install ffmpeg)")
    return path


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_ffmpeg(args: Sequence[str], what: str) -> None:
    """Run ``ffmpeg -nostdin -hide_banner -loglevel error <args>``; raise :class:`MediaError` on failure."""
    cmd = [_tool("ffmpeg"), "-nostdin", "-hide_banner", "-loglevel", "error", *args]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise MediaError(f"{what}: ffmpeg failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")


def ffprobe_json(path: str | Path, args: Sequence[str]) -> dict[str, Any]:
    """Run ffprobe with JSON output on ``path``; a file ffprobe cannot read is a :class:`MediaError`."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: no such video file")
    cmd = [_tool("ffprobe"), "-v", "error", "-of", "json", *args, str(path)]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise MediaError(f"{path}: not a readable video (ffprobe exit {proc.returncode}): {_tail(proc.stderr)}")
    try:
        return json.loads(proc.stdout or "{}")
    except json.JSONDecodeError as exc:
        raise MediaError(f"{path}: ffprobe printed unreadable JSON ({exc})") from exc

"""A model that replays a release case's scripted replies in order (the k-th call gets ``replies[k]``), for the
evidence seekers' episode cases (tests/reference/release_cases/{paravt,video_o3,longvideo_r1}): the release
harness scripted its clients the same way. A reply that is an object ``{"raise": …}`` is a failed call, None a
reply whose content is null."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from senri.backends.base import Backend, ChatRequest, ChatResponse, stop_match
from senri.backends.scripted import ScriptedBackend


class Replay(ScriptedBackend):
    """The replies of one episode, in order; every request is kept in ``requests``."""

    def __init__(self, replies: Sequence[Any] = (), **config: Any) -> None:
        Backend.__init__(self, {"backend": "scripted", "images": True, **config})
        self.rules, self.record, self.concurrency = [], None, 1
        self.load(replies)

    def load(self, replies: Sequence[Any], stop: bool = True) -> None:
        """The next episode's replies; ``stop=False`` hands each over whole whatever stop strings the request
        names (a release case's reply that "could not come out of a real generation", kept to exercise the
        release's own cut)."""
        self.replies, self.requests, self.stop = list(replies), [], stop

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "replay", "replies": json.dumps(self.replies)}

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if not self.replies:
            return ChatResponse(text="", error="replay: no reply left")
        reply = self.replies.pop(0)
        if reply is None:  # the server's content: null
            return ChatResponse(text="", finish_reason="stop", stop_reason="", content_null=True)
        if isinstance(reply, dict):
            return ChatResponse(text="", error=f"replay: scripted failure {reply!r}")
        text, matched = stop_match(str(reply), request.stop if self.stop else ())
        return ChatResponse(text=text, completion_tokens=max(1, len(text.split())), finish_reason="stop",
                            stop_reason=matched or "")


_CLIPS: list[Path] = []
_SHARED: dict[str, tuple[Path, Any]] = {}


def shared_clip(video_id: str = "pv"):
    """conftest's probed test clip (160×120, 4 fps, 480 frames: the release cases' ``pv`` geometry) as
    ``video_id``, encoded and probed once per test session (another id is a copy of the same bytes), in a folder
    removed at exit. Read only: a test that changes its video makes its own (:func:`probed_clip`)."""
    from conftest import make_probed_clip

    if video_id not in _SHARED:
        if not _CLIPS:
            _CLIPS.append(Path(tempfile.mkdtemp(prefix="senri-seeker-clips-")))
            atexit.register(shutil.rmtree, _CLIPS[0], True)
        _SHARED[video_id] = (_copied(next(iter(_SHARED.values())), _CLIPS[0], video_id) if _SHARED
                             else make_probed_clip(_CLIPS[0], video_id))
    return _SHARED[video_id]


def probed_clip(folder: Path, video_id: str):  # noqa: ANN201 - (video path, VideoInfo)
    """``make_probed_clip(folder, video_id)`` without its encode and probe (about 1 s of CPU each): the shared
    clip's bytes copied to ``folder/<video_id>.mp4``, the test's own file to change or delete. A file already
    there is probed, as make_probed_clip does."""
    from senri.probe import probe

    video = Path(folder) / f"{video_id}.mp4"
    if video.exists():
        return video, probe(video, video_id)
    return _copied(shared_clip(), Path(folder), video_id)


def _copied(clip: tuple[Path, Any], folder: Path, video_id: str):  # noqa: ANN202 - (video path, VideoInfo)
    """A copy of a probed clip as ``folder/<video_id>.mp4`` and its probe facts: the same bytes give the same
    facts (the fingerprint is the content's), so only the id and the path change."""
    from dataclasses import replace

    source, info = clip
    video = folder / f"{video_id}.mp4"
    shutil.copyfile(source, video)
    return video, replace(info, video_id=video_id, path=str(video))


def seeker(method: str, backend: Replay, model: dict | None = None, **overrides: Any):
    """The ``method`` (paravt, video_o3, longvideo_r1) over the shared ``pv`` clip answering through ``backend``,
    its config file's defaults plus ``overrides``."""
    import yaml

    from senri.methods import METHODS
    from senri.methods.base import RunContext
    from senri.prompts import prompt_identity

    video, info = shared_clip()
    config = {**yaml.safe_load(open(f"config/method/{method}.yaml")), **overrides}
    config["prompt_identity"] = prompt_identity(config)
    model_config = {"backend": "scripted", "images": True, **(model or {})}
    context = RunContext(video=info, method_name=method, method_config=config, model_name="vlm",
                         model_config=model_config, seed=0, backend=backend, pixels=video)
    return METHODS.load(method)(context)

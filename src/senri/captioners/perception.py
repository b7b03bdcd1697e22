"""``perception``: a zero-GPU captioner that writes only what it measured.

For a clip it reports the text read on screen (with when each text was first and last read), the place
labels (stationary signs), the ego-motion track's turns, pauses and heading change, scene changes, and the
faces and plates the anonymization stage blurred. Text comes from the track stage's OCR table, read at the
track's ``ocr_fps``; a clip asked for at a higher frame rate (deeper memory levels) has its extra frames
decoded and read here, so deeper levels really are finer. Instructions do not change what is measured (a
measuring captioner cannot follow "look for the cup"): deeper captions differ by their finer frame rate
and time span, and a memory method's trace records the instruction it asked for.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any, Mapping, Sequence

import polars as pl

from senri.captioners.base import Caption, Captioner, Clip, VideoMedia
from senri.records import Detection, OcrRow, TrackRow, read_table, to_frame


def _source_digest(*objects: Any) -> str:
    digest = hashlib.sha256()
    for obj in objects:
        digest.update(inspect.getsource(obj).encode())
    return digest.hexdigest()[:16]


class PerceptionCaptioner(Captioner):
    is_vlm = False

    def __init__(self, config: Mapping[str, Any], media: VideoMedia) -> None:
        from senri import track

        super().__init__(config, media)
        self.track_config = track.TrackConfig.from_mapping(config.get("track", {}))
        if media.track is None or media.ocr is None:
            raise ValueError(f"{media.video_id}: the perception captioner needs the track stage's tables "
                             "(results/track/<video>.parquet and .ocr.parquet)")
        self.track = read_table(media.track, TrackRow)
        self.ocr = read_table(media.ocr, OcrRow)
        self.detections = read_table(media.detections, Detection) if media.detections else None
        self._reader = None

    def identity(self) -> dict[str, Any]:
        from senri import track

        return {"captioner": "perception", "track": self.track_config.__dict__,
                "code": _source_digest(type(self), track)}

    def caption_many(self, clips: Sequence[Clip]) -> list[Caption]:
        return [self.caption(clip) for clip in clips]

    # ------------------------------------------------------------------------------------------------
    def _texts(self, clip: Clip) -> tuple[pl.DataFrame, int]:
        """OCR rows for the clip and the number of frames they come from (extra reads above ``ocr_fps``)."""
        window = self.ocr.filter((pl.col("t_s") >= clip.start_s) & (pl.col("t_s") < clip.end_s))
        track_window = self.track.filter((pl.col("t_s") >= clip.start_s) & (pl.col("t_s") < clip.end_s))
        ocr_every = max(1, round(self.track_config.fps / self.track_config.ocr_fps))
        table_frames = len(track_window["t_s"].to_list()[::ocr_every]) if not track_window.is_empty() else 0
        if clip.fps <= self.track_config.ocr_fps * 1.001:
            return window, table_frames
        from senri.decode import at_fps, read_frames
        from senri.track import ChangeGate, OcrReader

        if self._reader is None:
            self._reader = OcrReader(self.track_config.ocr_min_score)
        gate = ChangeGate(self.track_config.ocr_change_fraction)
        rows, last, n = [], [], 0
        for frame in read_frames(self.media.video, at_fps(clip.fps, clip.start_s, clip.end_s), accuracy="exact",
                                 short_side=self.track_config.short_side):
            if frame.image is None:
                continue
            n += 1
            fresh = gate.changed(frame.image)
            if fresh:
                last = self._reader.read(frame.image)
            rows += [OcrRow(self.media.video_id, float(frame.pts_s), int(frame.frame_index), text, score, *box,
                            not fresh) for text, score, box in last]
        return to_frame(rows, OcrRow), n

    def _detections(self, clip: Clip) -> list[str]:
        if self.detections is None:
            return []
        window = self.detections.filter((pl.col("pts_s") >= clip.start_s) & (pl.col("pts_s") < clip.end_s))
        lines = []
        for cls, noun in (("face", "face"), ("plate", "licence plate")):
            boxes = window.filter(pl.col("cls") == cls)
            if boxes.is_empty():
                continue
            per_frame = boxes.group_by("frame_index").len()
            first, last = boxes["pts_s"].min(), boxes["pts_s"].max()
            lines.append(f"Blurred {noun}s: up to {per_frame['len'].max()} per frame, in {per_frame.height} frames "
                         f"between {_clock(first)} and {_clock(last)}.")
        return lines

    def caption(self, clip: Clip) -> Caption:
        from senri.track import active_labels, describe_track, iter_texts

        ocr, n_frames = self._texts(clip)
        lines = [f"Measured {_clock(clip.start_s)}–{_clock(clip.end_s)} ({clip.level}, {n_frames} frames read "
                 f"at {clip.fps:g} fps)."]
        texts = list(iter_texts(ocr, clip.start_s, clip.end_s))
        if texts:
            lines.append("Text read: " + "; ".join(
                f'"{text}" ({_clock(first)}' + (f"–{_clock(last)})" if last > first else ")")
                for text, first, last in texts) + ".")
        else:
            lines.append("No text read.")
        labels = active_labels(self.track, clip.start_s, clip.end_s)
        if labels:
            lines.append("Signs in view (place labels): " + ", ".join(labels) + ".")
        lines += describe_track(self.track, clip.start_s, clip.end_s, self.track_config)
        lines += self._detections(clip)
        return Caption(" ".join(lines), n_frames)


def _clock(seconds: float) -> str:
    from senri.track import clock

    return clock(seconds)

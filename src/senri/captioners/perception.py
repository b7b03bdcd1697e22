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
from typing import Any, Mapping, Sequence

import polars as pl

from senri.captioners.base import Caption, Captioner, Clip, VideoMedia, code_digest
from senri.records import Detection, OcrRow, TrackRow, read_table, to_frame


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
        digest = hashlib.sha256()
        for path in (media.track, media.ocr, media.detections):
            digest.update(path.read_bytes() if path else b"-")
        self._inputs_digest = digest.hexdigest()[:16]
        self._reader = None

    def identity(self) -> dict[str, Any]:
        """Its track settings and the code it runs: this class and what it reaches in the track and decode
        modules (not the whole track stage), plus the content of the tables it reads, so a track stage that
        measured differently re-keys the captions without its code being part of this digest."""
        import sys

        from senri import decode, track

        return {"captioner": "perception", "track": self.track_config.__dict__,
                "code": code_digest([type(self)], [sys.modules[__name__], track, decode]),
                "inputs": self._inputs_digest}

    def caption_many(self, clips: Sequence[Clip]) -> list[Caption]:
        return [self.caption(clip) for clip in clips]

    # ------------------------------------------------------------------------------------------------
    def _texts(self, clip: Clip) -> tuple[pl.DataFrame, int]:
        """OCR rows for the clip and the number of frames they come from (extra reads above ``ocr_fps``)."""
        from senri.track import window

        if clip.fps <= self.track_config.ocr_fps * 1.001:
            every = self.track_config.ocr_every
            table_frames = len(window(self.track, clip.start_s, clip.end_s)["t_s"].to_list()[::every])
            return window(self.ocr, clip.start_s, clip.end_s), table_frames
        from senri.decode import at_fps, read_frames
        from senri.track import OcrReader, TextReader

        if self._reader is None:
            self._reader = OcrReader(self.track_config.ocr_min_score)
        texts = TextReader(self.track_config, self._reader)
        rows, n = [], 0
        for frame in read_frames(self.media.video, at_fps(clip.fps, clip.start_s, clip.end_s), accuracy="exact",
                                 short_side=self.track_config.short_side):
            if frame.image is not None:
                n += 1
                rows += texts.rows(self.media.video_id, frame)
        return to_frame(rows, OcrRow), n

    def _detections(self, clip: Clip) -> list[str]:
        if self.detections is None:
            return []
        from senri.track import clock, window

        boxes_in_clip = window(self.detections, clip.start_s, clip.end_s, column="pts_s")
        lines = []
        for cls, noun in (("face", "face"), ("plate", "licence plate")):
            boxes = boxes_in_clip.filter(pl.col("cls") == cls)
            if boxes.is_empty():
                continue
            per_frame = boxes.group_by("frame_index").len()
            first, last = boxes["pts_s"].min(), boxes["pts_s"].max()
            lines.append(f"Blurred {noun}s: up to {per_frame['len'].max()} per frame, in {per_frame.height} frames "
                         f"between {clock(first)} and {clock(last)}.")
        return lines

    def caption(self, clip: Clip) -> Caption:
        from senri.track import active_labels, clock, describe_track, iter_texts

        ocr, n_frames = self._texts(clip)
        lines = [f"Measured {clock(clip.start_s)}–{clock(clip.end_s)} ({clip.level}, {n_frames} frames read "
                 f"at {clip.fps:g} fps)."]
        texts = list(iter_texts(ocr, clip.start_s, clip.end_s))
        if texts:
            lines.append("Text read: " + "; ".join(
                f'"{text}" ({clock(first)}' + (f"–{clock(last)})" if last > first else ")")
                for text, first, last in texts) + ".")
        else:
            lines.append("No text read.")
        labels = active_labels(self.track, clip.start_s, clip.end_s)
        if labels:
            lines.append("Signs in view (place labels): " + ", ".join(labels) + ".")
        lines += describe_track(self.track, clip.start_s, clip.end_s, self.track_config)
        lines += self._detections(clip)
        return Caption(" ".join(lines), n_frames)


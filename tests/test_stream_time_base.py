"""Issue 60: the video stream's time base, from the probe to ParaVT's torchvision fallback (P-T2). torchvision's
read_video compares a crop's window with frame timestamps in the stream's time-base units (start floored, end
ceiled), so a bound within one unit of a frame takes that frame in; the probe records ffprobe's ``time_base``
(``VideoInfo.time_base``) and ParaVT crops with it."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import polars as pl
import pytest

from seeker_replay import Replay, seeker, shared_clip


def test_the_probe_records_the_video_stream_s_time_base_as_ffprobe_reports_it():
    from senri.probe import stream_time_base

    video, info = shared_clip("pv")
    streams = json.loads(subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                                         "stream=time_base", "-of", "json", str(video)],
                                        check=True, capture_output=True, text=True).stdout)["streams"]
    assert info.time_base == streams[0]["time_base"] == "1/16384"  # ffmpeg's MP4 timescale for 4 fps
    assert info.stream_time_base == pytest.approx(1 / 16384)
    # what ffprobe writes for a stream without one, or nothing usable: not known (None), never a division by 0
    assert [stream_time_base(v) for v in ("0/0", "N/A", None, "", "-1/90000", "2/60000")] == \
        [None, None, None, None, None, "1/30000"]
    assert dataclasses.replace(info, time_base=None).stream_time_base is None


def test_a_probe_table_without_the_time_base_is_refused_naming_the_file_and_the_field(tmp_path):
    """A probe table written before the field existed: read_table names the file and the missing column (the
    workflow re-probes by itself, the probe stage's code having changed)."""
    from senri.records import TableError, VideoInfo, from_frame, read_table, to_frame

    _, info = shared_clip("pv")
    old = tmp_path / "probe" / "pv.parquet"
    old.parent.mkdir()
    to_frame([info], VideoInfo).drop("time_base").write_parquet(old)
    with pytest.raises(TableError, match=r"probe/pv\.parquet.*missing column 'time_base'"):
        read_table(old, VideoInfo)
    to_frame([info], VideoInfo).write_parquet(old)
    assert from_frame(read_table(old, VideoInfo), VideoInfo) == [info]  # what the answer stage hands a method
    # a table of records not made by the probe (time base not known) stays readable: a null column
    to_frame([dataclasses.replace(info, time_base=None)], VideoInfo).write_parquet(old)
    assert read_table(old, VideoInfo).schema["time_base"] == pl.String


def test_paravt_crops_a_window_torchcodec_refuses_in_the_stream_s_time_base_units():
    """0.15 s – (0.25 s − a third of a unit) at 4 fps: torchcodec refuses it (no frame starts inside); torchvision
    ceils the end to frame 1's timestamp, so it decodes frames 0 and 1 and the crop shows both (the release); in
    seconds the end falls short of frame 1, one frame is left and the crop is empty."""
    from senri.methods.paravt import crop_plan

    method = seeker("paravt", Replay())
    assert method.time_base == method.context.video.stream_time_base
    unit = method.time_base
    start, end = 0.15, float(0.25 - unit / 3)
    assert method.crop_indices(start, end) == [0, 1]
    assert crop_plan(start, end, method.fps, method.n_frames, 1.0, 1, 16) == []  # compared in seconds
    assert method.crop_indices(0.15, 0.25) == [0, 1]  # a bound on the frame itself: both rules agree
    method.time_base = None  # a VideoInfo not made by the probe: seconds
    assert method.crop_indices(start, end) == []

import subprocess
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from conftest import ffprobe_frames, make_indexed_video, set_display_rotation
from senri import decode
from senri.cli import main
from senri.demo import read_frame_index
from senri.media import MediaError


# ----------------------------------------------------------------------------------------- plans (by hand)

def test_uniform_placements_by_hand():
    assert decode.uniform(4, 0, 8) == [1, 3, 5, 7]  # center: (i + ½)·8/4
    assert decode.uniform(3, 0, 8, "linspace") == [0, 4, 8]  # both ends kept
    assert decode.uniform(3, 0, 8, "interior") == [2, 4, 6]  # i·8/4 for i = 1..3, both ends dropped
    assert decode.uniform(1, 10, 20) == [15]
    assert decode.uniform(2, 10, 20, "linspace") == [10, 20]
    with pytest.raises(ValueError):
        decode.uniform(0, 0, 1)
    with pytest.raises(ValueError):
        decode.uniform(3, 0, 1, "edges")


def test_fps_window_is_half_open():
    assert decode.at_fps(4, 50, 51) == [50, 50.25, 50.5, 50.75]
    assert len(decode.at_fps(4, 0, 60)) == 240
    assert decode.at_fps(0.25, 0, 10) == [0, 4, 8]
    with pytest.raises(ValueError):
        decode.at_fps(0, 0, 1)


def test_plan_defaults_to_the_whole_video():
    plan = decode.FramePlan("uniform", n=2, placement="linspace")
    assert plan.targets(0.0, 9.9) == [0.0, 9.9]
    assert decode.FramePlan("fps", rate=1, start_s=2).targets(0.0, 4.0) == [2, 3, 4]  # last frame reachable


def test_a_plan_window_is_clamped_to_the_video():
    """A window that starts before the first frame or ends after the last samples only the video's own span:
    a uniform plan spreads its n frames over the overlap, not over the window asked for."""
    plan = decode.FramePlan("uniform", n=3, placement="linspace", start_s=-5.0, end_s=100.0)
    assert plan.targets(0.0, 10.0) == [0.0, 5.0, 10.0]
    assert decode.FramePlan("uniform", n=3, placement="linspace", start_s=2.0, end_s=100.0).targets(0.0, 10.0) \
        == [2.0, 6.0, 10.0]
    assert decode.FramePlan("uniform", n=2, placement="linspace", start_s=-3.0, end_s=4.0).targets(1.0, 10.0) \
        == [1.0, 4.0]
    assert decode.FramePlan("fps", rate=1, start_s=-2.0, end_s=3.0).targets(0.0, 10.0) == [0, 1, 2]


def test_nearest_frame_ties_go_to_the_earlier_frame():
    index = decode.VideoIndex(Fraction(1, 90000), [0, 3000, 6000, 9000], [0, 6000], 3000)
    assert index.nearest_frame(1500) == 0 and index.nearest_frame(1501) == 3000
    assert index.nearest_frame(-50) == 0 and index.nearest_frame(10**6) == 9000
    assert index.nearest_keyframe(3000) == 0 and index.nearest_keyframe(3001) == 6000
    assert index.keyframe_between(0, 5999) is False and index.keyframe_between(0, 6000) is True
    assert index.frame_index(6000) == 2


def test_auto_picks_keyframes_only_when_gops_are_short_against_the_spacing():
    gop_1s = decode.VideoIndex(Fraction(1, 30), list(range(0, 30 * 9000)), list(range(0, 30 * 9000, 30)), 1)
    assert decode.choose_accuracy("auto", gop_1s, decode.uniform(512, 0, 9000)) == "keyframe"  # 17.6 s spacing
    assert decode.choose_accuracy("auto", gop_1s, decode.uniform(512, 0, 204)) == "exact"  # 0.4 s spacing
    assert decode.choose_accuracy("exact", gop_1s, decode.uniform(512, 0, 9000)) == "exact"


# ------------------------------------------------------------------------------- exactness on real files

@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("indexed")
    # As short as each case's checks allow (encoding is this module's main cost, x265 above all): 14 s hold one
    # whole 10-s GOP and the 12-13 s window of the least-work check; 8 s of 1-s GOPs give the sparse check its
    # 7 picks a keyframe apart and the exact check its 3-6 s window.
    made = {
        "h264_gop1s": make_indexed_video(folder / "gop1.mp4"),
        "h264_gop10s": make_indexed_video(folder / "gop10.mp4", seconds=14, gop=300),
        "vfr": make_indexed_video(folder / "vfr.mp4", seconds=8, vfr=True),
        "hevc": make_indexed_video(folder / "hevc.mp4", seconds=8, codec="libx265"),
    }
    rotated = folder / "rotated.mp4"
    rotated.write_bytes(made["h264_gop1s"].read_bytes())
    made["rotated"] = set_display_rotation(rotated)
    return made


def _expected_index(all_pts: list[float], target: float) -> int:
    """Nearest frame by ffprobe's timestamps, ties to the earlier one (independent of senri's index)."""
    distances = [abs(p - target) for p in all_pts]
    best = min(distances)
    return next(i for i, d in enumerate(distances) if d <= best + 1e-9)


def _stripe_index(image: np.ndarray, rotation_cw: int = 0) -> int:
    upright_to_coded = np.rot90(image, k=rotation_cw // 90)  # undo the display rotation to read the stripe
    return read_frame_index(upright_to_coded.mean(axis=2))


# Real-video streams (issue 24, items 16-17): each starts somewhere else on the container's clock, and two of
# them seek by decode time; the frame at t s of the video's own timeline is frame t·fps in every one of them.
MPEG_KINDS = {
    "program_stream": ["-c:v", "mpeg2video", "-bf", "2", "-f", "mpeg"],  # first timestamp ~0.5 s
    "transport_stream_10s_in": ["-c:v", "mpeg2video", "-bf", "2", "-output_ts_offset", "10", "-f", "mpegts"],
    "h264_transport_stream": ["-c:v", "libx264", "-preset", "veryfast", "-g", "12", "-f", "mpegts"],
    "mpeg1_elementary": ["-c:v", "mpeg1video", "-f", "mpeg1video"],  # no timestamps, no duration
}


@pytest.fixture(scope="module")
def mpeg_streams(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mpeg")
    source = make_indexed_video(folder / "source.mp4", seconds=4, fps=25, gop=12)
    made = {}
    for kind, args in MPEG_KINDS.items():
        made[kind] = folder / f"{kind}.mpg"
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(source), "-q:v", "2", *args,
                        str(made[kind])], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return made


@pytest.mark.parametrize("accuracy", ["exact", "keyframe"])
@pytest.mark.parametrize("kind", list(MPEG_KINDS))
def test_mpeg_streams_are_sampled_on_their_own_timeline(mpeg_streams, kind, accuracy):
    targets = [0.0, 0.04, 1.0, 1.52, 2.5, 3.96, 2.0, 0.5]  # out of order on purpose; 0 s is the first frame
    frames = list(decode.read_frames(mpeg_streams[kind], targets, accuracy=accuracy))
    assert all(f.error is None for f in frames), [f.error for f in frames]
    for frame in frames:
        shown = read_frame_index(frame.image.mean(axis=2))
        assert shown == round(frame.pts_s * 25), (frame.target_s, frame.pts_s, shown)  # the frame it says it is
        if accuracy == "exact":
            assert shown == round(frame.target_s * 25)  # ... and the one asked for
    assert frames[0].pts_s == 0.0


@pytest.mark.parametrize("case", ["h264_gop1s", "h264_gop10s", "vfr", "hevc", "rotated"])
def test_exact_plans_return_exactly_the_nearest_frames(videos, case):
    path = videos[case]
    all_pts, _ = ffprobe_frames(path)
    first, last = all_pts[0], all_pts[-1]
    period = (last - first) / (len(all_pts) - 1)
    targets = (
        decode.uniform(37, first, last)
        + decode.uniform(9, first, last, "linspace")
        + decode.at_fps(4, first + 3, first + 6)
        + [all_pts[10] + (all_pts[11] - all_pts[10]) / 2, all_pts[-2], 1e-3]  # a tie, the end, the start
    )
    frames = list(decode.read_frames(path, targets, accuracy="exact"))
    assert [f.target_s for f in frames] == targets  # one answer per target, in the caller's order
    rotation = 90 if case == "rotated" else 0
    for frame in frames:
        assert frame.error is None, frame.error
        assert frame.frame_index == _expected_index(all_pts, frame.target_s), (case, frame.target_s)
        assert _stripe_index(frame.image, rotation) == frame.frame_index, (case, frame.target_s)
        assert frame.pts_s == pytest.approx(all_pts[frame.frame_index], abs=1e-6)
        assert abs(frame.deviation_s) <= (period if case == "vfr" else period / 2) + 1e-6


def test_rotated_frames_come_out_upright_like_ffmpeg_shows_them(videos):
    frame = next(decode.read_frames(videos["rotated"], [5.0], accuracy="exact"))
    assert frame.image.shape == (640, 360, 3)  # coded 640×360, displayed rotated 90°
    shown = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-i", str(videos["rotated"]), "-vf", f"select=eq(n\\,{frame.frame_index})",
         "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], check=True, capture_output=True,
    ).stdout
    reference = np.frombuffer(shown, np.uint8).reshape(640, 360, 3)
    assert np.abs(reference.astype(int) - frame.image.astype(int)).mean() < 3


@pytest.mark.parametrize("case", ["h264_gop1s", "h264_gop10s", "hevc"])
def test_keyframe_plans_return_the_nearest_keyframe(videos, case):
    all_pts, keyframes = ffprobe_frames(videos[case])
    stats = {}
    targets = decode.uniform(12, all_pts[0], all_pts[-1])
    frames = list(decode.read_frames(videos[case], targets, accuracy="keyframe", stats=stats))
    ordered = sorted(keyframes)
    for frame in frames:
        assert frame.pts_s in keyframes
        nearest = min(ordered, key=lambda k: (abs(k - frame.target_s), k))
        assert frame.pts_s == pytest.approx(nearest)
        assert frame.deviation_s == pytest.approx(frame.pts_s - frame.target_s)
        assert _stripe_index(frame.image) == frame.frame_index
    # Each keyframe is decoded from its own packet and drained: exactly one decoded frame per sample.
    assert stats["decoded"] == len(set(f.pts_s for f in frames))


def test_exact_decoding_does_the_least_work(videos):
    stats = {}
    path = videos["h264_gop10s"]
    list(decode.read_frames(path, decode.at_fps(4, 12.0, 13.0), accuracy="exact", stats=stats))
    # One seek to the 10 s keyframe, then forward to 13 s: ~90 frames, not the 390 from the start.
    assert stats["seeks"] == 1 and stats["decoded"] < 120


def test_truncated_file_returns_what_exists_and_records_the_rest(videos, tmp_path):
    data = videos["h264_gop1s"].read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(MediaError, match="damaged video.*on_damaged_video"):  # the default policy: fail
        list(decode.read_frames(cut, decode.uniform(24, 0, 12), accuracy="exact", on_damaged="fail"))
    frames = list(decode.read_frames(cut, decode.uniform(24, 0, 12), accuracy="exact", watchdog_s=60,
                                     on_damaged="keep_decodable"))
    assert len(frames) == 24
    good = [f for f in frames if f.error is None]
    failed = [f for f in frames if f.error is not None]
    assert good and failed
    assert all(_stripe_index(f.image) == f.frame_index for f in good)
    assert max(f.target_s for f in good) < min(f.target_s for f in failed)
    assert "past the decodable end" in failed[-1].error


def test_file_cut_before_its_index_is_one_clear_error(videos, tmp_path):
    source = make_indexed_video(tmp_path / "moov_last.mp4", seconds=4)
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(source), "-c", "copy", str(tmp_path / "late.mp4")],
                   check=True)  # without faststart the index (moov) is written last
    data = (tmp_path / "late.mp4").read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(MediaError, match="cut.mp4: not a readable video"):
        list(decode.read_frames(cut, [0.5, 1.0, 2.0]))


def test_corrupt_middle_does_not_crash_and_answers_every_target(videos, tmp_path):
    data = bytearray(videos["h264_gop1s"].read_bytes())
    middle = len(data) // 2
    data[middle : middle + 40_000] = bytes(range(256)) * (40_000 // 256) + bytes(40_000 % 256)
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(bytes(data))
    targets = decode.uniform(24, 0, 12)
    frames = list(decode.read_frames(broken, targets, accuracy="exact", watchdog_s=60))
    assert [f.target_s for f in frames] == targets
    early = [f for f in frames if f.error is None and f.target_s < 3]
    assert early and all(_stripe_index(f.image) == f.frame_index for f in early)


def test_watchdog_gives_up_with_a_recorded_reason(videos):
    frames = list(decode.read_frames(videos["h264_gop10s"], decode.uniform(20, 0, 14), accuracy="exact",
                                     watchdog_s=1e-6))
    assert len(frames) == 20 and all("watchdog" in f.error for f in frames)


def test_frames_are_resized_while_decoding(videos):
    frame = next(decode.read_frames(videos["h264_gop1s"], [1.0], short_side=180))
    assert frame.image.shape == (180, 320, 3)
    assert decode.output_size(1280, 720, 448) == (796, 448) and decode.output_size(320, 240, 448) == (320, 240)


def test_cli_frame_store_and_carrier(videos, tmp_path):
    store = tmp_path / "store.parquet"
    assert main(["frames", str(videos["h264_gop1s"]), "--out", str(store), "--uniform", "8",
                 "--placement", "linspace", "--accuracy", "exact", "--short-side", "180"]) == 0
    table = pl.read_parquet(store)
    assert table.columns == ["video_id", "plan", "target_s", "frame_index", "pts_s", "deviation_s", "width", "height",
                             "jpeg", "error"]
    assert table["frame_index"].to_list()[0] == 0 and table["frame_index"].to_list()[-1] == 359  # both ends
    image = decode.decode_jpeg(table["jpeg"][3])
    assert image.shape == (180, 320, 3) and table["plan"][0] == "uniform_8"
    assert (tmp_path / "store.config.yaml").exists()
    carrier = tmp_path / "carrier.mp4"
    assert main(["carrier", str(store), "--out", str(carrier)]) == 0
    all_pts, _ = ffprobe_frames(carrier)
    assert len(all_pts) == 8 and all_pts[1] - all_pts[0] == pytest.approx(1.0)


def test_cli_needs_exactly_one_plan(videos, tmp_path):
    with pytest.raises(SystemExit):
        main(["frames", str(videos["h264_gop1s"]), "--out", str(tmp_path / "x.parquet")])


@pytest.mark.parametrize("case", ["h264_gop1s", "vfr", "hevc", "rotated"])
def test_sparse_exact_plans_decoded_in_parallel_stay_exact(videos, case):
    """Picks a keyframe apart or more are split over two decoders; the frames must be the same."""
    path = videos[case]
    all_pts, _ = ffprobe_frames(path)
    targets = decode.uniform(7, all_pts[0], all_pts[-1]) + [all_pts[-1], 2.5, 0.0]  # unsorted on purpose
    stats = {}
    frames = list(decode.read_frames(path, targets, accuracy="exact", threads=2, stats=stats))
    assert stats["mode"] == "exact" and stats["seeks"] >= 7
    rotation = 90 if case == "rotated" else 0
    assert [f.target_s for f in frames] == targets
    for frame in frames:
        assert frame.error is None, frame.error
        assert frame.frame_index == _expected_index(all_pts, frame.target_s)
        assert _stripe_index(frame.image, rotation) == frame.frame_index


def test_seek_bound_decides_between_one_and_several_decoders():
    index = decode.VideoIndex(Fraction(1, 30), list(range(0, 3000)), list(range(0, 3000, 30)), 1)
    assert decode._seek_bound(index, list(range(0, 3000, 90)))  # a keyframe between every two picks
    assert not decode._seek_bound(index, list(range(0, 3000, 8)))  # mostly inside one GOP


def test_a_plan_can_be_given_as_its_target_function(videos):
    plan = decode.FramePlan("uniform", n=3, placement="linspace", accuracy="exact")
    frames = list(decode.read_frames(videos["h264_gop1s"], plan.targets, accuracy=plan.accuracy))
    assert [f.frame_index for f in frames] == [0, 179, 359]  # 5.983 s lies halfway: the tie goes to 179
    with pytest.raises(MediaError, match="absent.mp4"):  # nothing to plan against: one clear error, no rows
        list(decode.read_frames(videos["h264_gop1s"].with_name("absent.mp4"), plan.targets))

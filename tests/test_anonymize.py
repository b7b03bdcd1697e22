"""Anonymization on real faces (the astronaut photograph that ships inside scikit-image), a synthetic plate,
and bad input: every pasted face is blurred in every frame it appears in, the rest of the frame is not."""

from __future__ import annotations

import subprocess
import sys

import av
import cv2
import numpy as np
import polars as pl
import pytest

from senri.anonymize.detectors import DETECTORS
from senri.anonymize.detectors.base import Box, nms
from senri.anonymize.stage import AnonymizeConfig, anonymize_video, blur_boxes
from senri.media import MediaError

WIDTH, HEIGHT, FPS, FRAMES = 1280, 720, 30, 40
#: Pasted heads: crop height in pixels (the face itself is about half of it: 48 px → a ~24 px face),
#: start position and motion in pixels per frame.
HEADS = [(160, (60, 60), (6, 0)), (96, (500, 120), (0, 3)), (48, (900, 400), (-4, 2))]
PLATE = (560, 600, 720, 640)  # x0, y0, x1, y1 of a synthetic plate in the last frames


def head_crop() -> np.ndarray:
    from skimage import data

    return data.astronaut()[30:300, 130:330]  # the astronaut's head and shoulders


def head_boxes(frame: int) -> list[tuple[int, int, int, int]]:
    crop = head_crop()
    boxes = []
    for size, (x, y), (dx, dy) in HEADS:
        w = round(size * crop.shape[1] / crop.shape[0])
        boxes.append((x + dx * frame, y + dy * frame, x + dx * frame + w, y + dy * frame + size))
    return boxes


def render(frame: int, plate: bool) -> np.ndarray:
    rng = np.random.default_rng(frame)
    image = np.clip(rng.normal(110, 25, (HEIGHT, WIDTH, 3)), 0, 255).astype(np.uint8)
    image = cv2.GaussianBlur(image, (0, 0), 3)  # a textured, camera-like background
    crop = head_crop()
    for (x0, y0, x1, y1) in head_boxes(frame):
        image[y0:y1, x0:x1] = cv2.resize(crop, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA)
    if plate:
        x0, y0, x1, y1 = PLATE
        cv2.rectangle(image, (x0, y0), (x1, y1), (235, 235, 235), -1)
        cv2.putText(image, "KA 4821", (x0 + 8, y1 - 9), cv2.FONT_HERSHEY_SIMPLEX, 0.9, (20, 20, 20), 2)
    return image


def write_video(path, frames, width=WIDTH, height=HEIGHT, rate=FPS, pix_fmt="yuv420p"):
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.options = {"crf": "12", "preset": "veryfast"}
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def decode_all(path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def sharpness(image: np.ndarray) -> float:
    return float(cv2.Laplacian(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY), cv2.CV_64F).var())


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse)


@pytest.fixture(scope="module")
def faces_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("anon")
    frames = [render(i, plate=i >= FRAMES - 10) for i in range(FRAMES)]
    src = write_video(root / "faces.mp4", frames)
    config = AnonymizeConfig(detectors=("centerface", "plates"), stride=5,
                             detector_config={"face_threshold": 0.3})
    stats = anonymize_video(src, root / "out.mp4", root / "det.parquet", "faces", config)
    return {"src": src, "original": decode_all(src), "output": decode_all(root / "out.mp4"), "stats": stats,
            "detections": pl.read_parquet(root / "det.parquet")}


def test_every_pasted_face_is_blurred_in_every_frame(faces_run):
    original, output = faces_run["original"], faces_run["output"]
    assert len(output) == len(original) == FRAMES and output[0].shape == (HEIGHT, WIDTH, 3)
    for i in range(FRAMES):
        for (x0, y0, x1, y1), (size, _, _) in zip(head_boxes(i), HEADS):
            # Eyes, nose and mouth: in the crop, the face spans x 25–70 %, y 10–55 %; take its core.
            w, h = x1 - x0, y1 - y0
            fx0, fx1 = x0 + int(0.33 * w), x0 + int(0.62 * w)
            fy0, fy1 = y0 + int(0.18 * h), y0 + int(0.47 * h)
            before, after = sharpness(original[i][fy0:fy1, fx0:fx1]), sharpness(output[i][fy0:fy1, fx0:fx1])
            assert after < before / 4, (i, size, before, after)


def test_the_detector_no_longer_finds_the_faces(faces_run):
    from senri.ort import spins

    detector = DETECTORS.load("centerface")({"face_threshold": 0.3, "threads": 2})
    # Its threads block while they wait (senri.ort: the same detections at less CPU on a busy machine).
    assert not spins(detector.session) and detector.session.get_session_options().intra_op_num_threads == 2
    for i in (0, 7, FRAMES - 1):
        assert len(detector.detect(faces_run["original"][i])) >= 3
        assert detector.detect(faces_run["output"][i]) == [], i


def test_pixels_far_from_faces_are_unchanged_but_for_codec_noise(faces_run):
    original, output = faces_run["original"], faces_run["output"]
    for i in range(0, FRAMES, 9):
        mask = np.ones((HEIGHT, WIDTH), bool)
        for (x0, y0, x1, y1) in head_boxes(i) + [PLATE]:
            margin = max(x1 - x0, y1 - y0)
            mask[max(0, y0 - margin):y1 + margin, max(0, x0 - margin):x1 + margin] = False
        assert psnr(original[i][mask], output[i][mask]) > 35, i


def test_a_synthetic_plate_is_blurred_and_the_table_says_how(faces_run):
    x0, y0, x1, y1 = PLATE
    last = FRAMES - 1
    assert sharpness(faces_run["output"][last][y0:y1, x0:x1]) < sharpness(faces_run["original"][last][y0:y1, x0:x1]) / 4
    detections = faces_run["detections"]
    assert set(detections["cls"]) == {"face", "plate"} and set(detections["source"]) == {"detected", "propagated"}
    per_frame = detections.group_by("frame_index").len()
    assert per_frame.height == FRAMES  # every frame has boxes
    stats = faces_run["stats"]
    assert (stats.frames, stats.detected_frames, stats.propagated_frames) == (FRAMES, 9, FRAMES - 9)


def test_detections_of_a_program_stream_are_on_the_videos_timeline(tmp_path):
    """A camcorder's MPEG program stream starts at ~0.5 s on its container's clock; its first frame's boxes are
    at 0 s in the detections table, where the frame stores and the track put that frame too."""
    from senri.decode import read_frames

    src = write_video(tmp_path / "plate.mp4", [render(i, plate=True) for i in range(6)])
    mpeg = tmp_path / "plate.mpg"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(src), "-c:v", "mpeg2video", "-q:v", "2",
                    "-f", "mpeg", str(mpeg)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    with av.open(str(mpeg)) as container:
        assert float(container.streams.video[0].start_time * container.streams.video[0].time_base) > 0.4
    config = AnonymizeConfig(detectors=("plates",), stride=1)
    anonymize_video(mpeg, tmp_path / "out.mp4", tmp_path / "det.parquet", "plate", config)
    detections = pl.read_parquet(tmp_path / "det.parquet").filter(pl.col("cls") == "plate")
    assert sorted(set(detections["frame_index"])) == list(range(6))
    times = dict(zip(detections["frame_index"], detections["pts_s"]))
    sampled = {f.frame_index: f.pts_s for f in read_frames(mpeg, [k / FPS for k in range(6)], accuracy="exact")}
    for k in range(6):
        assert times[k] == pytest.approx(k / FPS, abs=1e-6) == sampled[k]


def test_blur_is_elliptical_and_scaled_to_the_box():
    image = np.zeros((100, 100, 3), np.uint8)
    image[::2] = 255  # stripes: every blur shows
    before = image.copy()
    blur_boxes(image, [Box("face", 1.0, 20, 20, 80, 60)], blur_fraction=0.5)
    assert (image[0:19] == before[0:19]).all()             # outside the box: untouched
    assert (image[20, 20] == before[20, 20]).all()         # box corner: outside the inscribed ellipse
    assert 60 < image[40, 50, 0] < 200                    # centre: blurred stripes average out


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60]], float)
    assert nms(boxes, np.array([0.5, 0.9, 0.7]), 0.3) == [1, 2]


def test_odd_sizes_and_rotation_give_a_correct_output(tmp_path):
    odd = write_video(tmp_path / "odd.mp4", [render(i, False)[:719, :1279] for i in range(6)], width=1279,
                      height=719, pix_fmt="yuv444p")
    stats = anonymize_video(odd, tmp_path / "odd_out.mp4", tmp_path / "odd.parquet", "odd",
                            AnonymizeConfig(stride=3))
    out = decode_all(tmp_path / "odd_out.mp4")
    assert stats.frames == 6 and len(out) == 6 and out[0].shape == (719, 1279, 3)

    from conftest import make_indexed_video, set_display_rotation

    rotated = set_display_rotation(make_indexed_video(tmp_path / "rot.mp4", seconds=1, fps=10, gop=5))
    anonymize_video(rotated, tmp_path / "rot_out.mp4", tmp_path / "rot.parquet", "rot", AnonymizeConfig())
    with av.open(str(rotated)) as src, av.open(str(tmp_path / "rot_out.mp4")) as dst:
        s, d = src.streams.video[0], dst.streams.video[0]
        assert (d.width, d.height) == (s.height, s.width)  # the display rotation is applied to the pixels
        assert d.frames == s.frames or len(list(dst.decode(video=0))) == 10


@pytest.mark.parametrize("content, message", [(b"", "not a readable video"),
                                              (b"this is not a video" * 100, "not a readable video")],
                         ids=["empty", "text"])
def test_unreadable_input_is_a_clear_error_and_writes_nothing(tmp_path, content, message):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(content)
    with pytest.raises(MediaError, match=message) as err:
        anonymize_video(bad, tmp_path / "out.mp4", tmp_path / "det.parquet", "bad", AnonymizeConfig())
    assert str(bad) in str(err.value)
    assert not (tmp_path / "out.mp4").exists() and not list(tmp_path.glob(".*tmp*"))


def test_egoblur_runs_torchscript_detectors_as_egoblur_does(tmp_path):
    """EgoBlur's weights are not public; a TorchScript stand-in with the same interface checks the plumbing."""
    import torch

    class StandIn(torch.nn.Module):
        def forward(self, image: torch.Tensor):
            assert image.dtype == torch.uint8 and image.shape[0] == 3  # BGR CHW uint8, as EgoBlur feeds it
            boxes = torch.tensor([[10.0, 10.0, 50.0, 50.0], [12.0, 12.0, 52.0, 52.0], [100.0, 80.0, 140.0, 120.0]])
            scores = torch.tensor([0.95, 0.93, 0.5])
            return boxes, torch.zeros(3, dtype=torch.int64), scores, torch.tensor([image.shape[1], image.shape[2]])

    path = tmp_path / "face.jit"
    torch.jit.script(StandIn()).save(str(path))
    detector = DETECTORS.load("egoblur")({"egoblur_face_model": str(path)})
    boxes = detector.detect(np.zeros((200, 300, 3), np.uint8))
    # NMS (0.3) removes the overlapping second box, the 0.9 threshold the third.
    assert boxes == [Box("face", pytest.approx(0.95), 10.0, 10.0, 50.0, 50.0)]
    with pytest.raises(ValueError, match="egoblur_face_model"):
        DETECTORS.load("egoblur")({})


def test_cli_writes_video_detections_and_config(tmp_path, faces_run, senri_env):
    out = tmp_path / "cli.mp4"
    proc = subprocess.run([sys.executable, "-m", "senri", "anonymize", str(faces_run["src"]), "--out", str(out),
                           "--detections", str(tmp_path / "cli.parquet"), "--stride", "20"],
                          capture_output=True, text=True, env=senri_env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert len(decode_all(out)) == FRAMES
    assert pl.read_parquet(tmp_path / "cli.parquet")["source"].unique().sort().to_list() == ["detected", "propagated"]
    assert "stride: 20" in (tmp_path / "cli.config.yaml").read_text()


def test_streaming_stages_can_return_freed_heap_memory():
    from senri import memtrim

    assert memtrim.release() is True  # glibc (Debian): malloc_trim exists and runs
    memtrim.every(999)
    memtrim.every(1000)

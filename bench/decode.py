"""Frame sampling speed and memory, measured side by side in one run.

    python bench/decode.py [--minutes 20] [--repeats 1]

Generates (once, cached in results/bench/) two 1280×720 30 fps H.264 videos with B-frames, one with a 1 s
GOP and one with a 10 s GOP. A clean test pattern decodes ~4× faster per frame than camera footage (P- and
B-frames carry almost nothing), which would understate every saving; the videos get temporal sensor-like
noise so their bitrate and per-frame decode cost are camera-like (the cost is printed). Then it times, each
in a fresh process (for a clean peak RSS):
  full        decode every frame (PyAV, the reference every ratio is taken against)
  window      decode only the 60 s window's frames (seek to its keyframe, decode forward)
  opencv      naive OpenCV seeking: CAP_PROP_POS_FRAMES then read, per target
  exact / keyframe   senri.decode.read_frames (RGB at short side 448, as the frame store does); `auto`
              resolves to one of the two, and its row says which
for uniform-512 over the whole video, 0.25 fps over the whole video, and 4 fps in a 60 s window.
Prints seconds, frames/s, peak RSS and the ratio to full decode, then the issue's targets, met or not.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from senri import decode  # noqa: E402
from senri.demo import index_strip_source  # noqa: E402

WINDOW = (600.0, 660.0)
NOISE = 6  # strength of ffmpeg's temporal noise filter: camera-like bitrate without dominating the picture
PATTERNS = ("uniform512", "fps0.25", "window4fps")
SENRI_METHODS = ("exact", "keyframe")


def make_video(path: Path, minutes: float, gop_s: int) -> Path:
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    seconds = int(minutes * 60)
    graph = (f"testsrc2=s=1280x720:r=30:d={seconds},noise=alls={NOISE}:allf=t[bg];"
             f"{index_strip_source(30, seconds, 'strip')};[bg][strip]overlay=0:0:shortest=1[v]")
    tmp = path.with_suffix(".tmp.mp4")
    print(f"generating {path} ({minutes:g} min, GOP {gop_s} s) ...", flush=True)
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-filter_complex", graph, "-map", "[v]", "-c:v", "libx264",
         "-preset", "superfast", "-bf", "2", "-g", str(30 * gop_s), "-keyint_min", str(30 * gop_s),
         "-sc_threshold", "0", "-pix_fmt", "yuv420p", "-movflags", "+faststart", str(tmp)],
        check=True, stdin=subprocess.DEVNULL,
    )
    tmp.replace(path)
    return path


def targets_for(pattern: str, first: float, last: float) -> list[float]:
    if pattern == "uniform512":
        return decode.uniform(512, first, last)
    if pattern == "fps0.25":
        return decode.at_fps(0.25, first, last + 1e-6)
    return decode.at_fps(4, *WINDOW)


def worker(video: str, pattern: str, method: str) -> dict:
    """Runs in its own process; returns seconds, frames returned and peak RSS."""
    import av

    first, last = decode.probe_span(video)
    targets = targets_for(pattern, first, last)
    start = time.perf_counter()
    if method == "full":
        with av.open(video) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            count = sum(1 for _ in container.decode(stream))
    elif method == "window":
        with av.open(video) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            container.seek(int(WINDOW[0] / stream.time_base), stream=stream, backward=True)
            count = 0
            for frame in container.decode(stream):
                if frame.time >= WINDOW[1]:
                    break
                count += frame.time >= WINDOW[0]
    elif method == "opencv":
        import cv2

        capture = cv2.VideoCapture(video)
        fps = capture.get(cv2.CAP_PROP_FPS)
        count = 0
        for t in targets:
            capture.set(cv2.CAP_PROP_POS_FRAMES, round(t * fps))
            ok, _ = capture.read()
            count += ok
        capture.release()
    else:
        count = sum(f.error is None for f in decode.read_frames(video, targets, accuracy=method, short_side=448))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "frames": count, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def measure(video: Path, pattern: str, method: str, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, "--worker", str(video), pattern, method],
                             check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return {"seconds": statistics.median(r["seconds"] for r in runs), "frames": runs[0]["frames"],
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs)}


def main() -> None:
    import av

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=1, help="runs per cell (median time is shown)")
    parser.add_argument("--worker", nargs=3, metavar=("VIDEO", "PATTERN", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if args.minutes * 60 < WINDOW[1]:
        parser.error(f"--minutes must cover the {WINDOW[0]:g}–{WINDOW[1]:g} s window (≥ {WINDOW[1] / 60:g})")
    folder = ROOT / "results" / "bench"
    videos = {gop: make_video(folder / f"decode_{args.minutes:g}min_gop{gop}s_noise{NOISE}.mp4", args.minutes, gop)
              for gop in (1, 10)}
    rows, checks = [], []
    for gop, video in videos.items():
        full = measure(video, "uniform512", "full", args.repeats)
        window = measure(video, "window4fps", "window", args.repeats)
        size_mbit = video.stat().st_size * 8 / 1e6
        print(f"GOP {gop} s: {size_mbit / (args.minutes * 60):.1f} Mbit/s; full decode "
              f"{1000 * full['seconds'] / full['frames']:.2f} ms per frame", flush=True)
        rows.append((gop, "(all frames)", "full", full, 1.0))
        rows.append((gop, "window4fps", "window", window, window["seconds"] / full["seconds"]))
        with av.open(str(video)) as container:  # one packet index per video, for every pattern's auto choice
            index = decode.build_index(container, container.streams.video[0])
        first, last = index.seconds(index.pts[0]), index.seconds(index.pts[-1])
        for pattern in PATTERNS:
            measured = {}
            for method in ("opencv", *SENRI_METHODS):
                measured[method] = measure(video, pattern, method, args.repeats)
                rows.append((gop, pattern, method, measured[method], measured[method]["seconds"] / full["seconds"]))
            auto = decode.choose_accuracy("auto", index, targets_for(pattern, first, last))
            rows.append((gop, pattern, f"auto={auto}", measured[auto], measured[auto]["seconds"] / full["seconds"]))
            for method in (*SENRI_METHODS, "auto"):
                result = measured[auto if method == "auto" else method]
                ratio = result["seconds"] / full["seconds"]
                if gop == 1 and pattern == "uniform512":
                    # `auto` is judged by the mode its rule picks: on a 20-minute video 512 samples are
                    # 2.34 s apart, so a 1 s GOP is more than ¼ of the spacing and auto decodes exactly (over
                    # 2.5 h the spacing is 17.6 s and auto takes the keyframe path).
                    judged = auto if method == "auto" else method
                    limit = 0.05 if judged == "keyframe" else 0.25
                    name = f"{method} (the ¼ rule picks {auto})" if method == "auto" else method
                    checks.append((f"uniform-512 {name}, 1 s GOP ≤ {limit:.0%} of full decode", ratio <= limit,
                                   f"{ratio:.1%}"))
                if pattern == "window4fps" and method in SENRI_METHODS:
                    over = result["seconds"] / window["seconds"]
                    checks.append((f"4 fps in 60 s window, {method}, GOP {gop} s ≤ 1.5× window decode", over <= 1.5,
                                   f"{over:.2f}×"))
    print(f"\n{'GOP':>4} {'pattern':<13} {'method':<14} {'seconds':>8} {'frames':>7} {'frames/s':>9} "
          f"{'peak RSS MiB':>13} {'× full':>7}")
    for gop, pattern, method, result, ratio in rows:
        rate = result["frames"] / result["seconds"] if result["seconds"] else float("inf")
        print(f"{gop:>3}s {pattern:<13} {method:<14} {result['seconds']:>8.2f} {result['frames']:>7} {rate:>9.1f} "
              f"{result['peak_rss_mib']:>13.0f} {ratio:>7.3f}")
    peak = max(r[3]["peak_rss_mib"] for r in rows if r[2] in SENRI_METHODS)
    checks.append(("peak RSS ≤ 600 MiB in every senri pattern", peak <= 600, f"{peak:.0f} MiB"))
    print("\ntargets:")
    for name, ok, value in checks:
        print(f"  [{'met' if ok else 'MISSED'}] {name}: {value}")


if __name__ == "__main__":
    main()

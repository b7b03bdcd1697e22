"""Perception captioning throughput and memory: the track stage and the captions built from it.

    python bench/perception.py [--minutes 10] [--width 1280]

Renders (once, under results/bench/perception/) a demo-style walk of about ``--minutes`` at ``--width``×(9/16)
30 fps — signs, action captions, turns over a textured panorama — and prints, measured side by side in one
run, each configuration in its own process:
- the track stage (decode at 5 fps, corner tracking, OCR at 1 fps with the unchanged-view gate): video seconds
  processed per wall second, OCR reads, peak RSS; the same with the gate off (every OCR sample read) and with
  OCR at 0.5 fps, as ratios to the default;
- coarse-level perception captions from the stored tables (the memory stage's cost at the coarse preset's
  1 fps sampling) and fine-level captions that read their own frames at 2 fps.
At the default, a 2.5 h video's track takes 9000 / (video-s per wall-s) seconds on this CPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
OUT = REPO / "results" / "bench" / "perception"


def make_video(minutes: float, width: int) -> Path:
    from senri import demo

    places, turn_s = 12, 6  # the demo's name pools allow 12 places; their length sets the duration
    place_s = max(12, round((minutes * 60 - (places - 1) * turn_s) / places))
    cfg = demo.DemoConfig(n_videos=1, seed=11, places_per_video=places, place_s=place_s, turn_s=turn_s, width=width,
                          height=round(width * 9 / 16 / 2) * 2, fps=30, gop_s=1)
    path = OUT / f"walk_{minutes:g}min_{width}.mp4"
    if not path.exists():
        demo.render_video(demo.plan_walk(cfg, "demo_01"), path, threads=2)
    return path


def child(mode: str, video: str, settings: str) -> None:
    """One measurement in a fresh process: prints a JSON line with the timings and its own peak RSS."""
    import resource

    from senri.track import TrackConfig, compute_track

    config = TrackConfig.from_mapping(json.loads(settings))
    started = time.perf_counter()
    track, ocr, stats = compute_track(video, "walk", config)
    track_s = time.perf_counter() - started
    result = {"track_s": track_s, "video_s": float(track["t_s"].max()) if track.height else 0.0, **stats}
    if mode == "captions":
        from senri.captioners.base import Clip, VideoMedia
        from senri.captioners.perception import PerceptionCaptioner
        from senri.memory.hierarchy import split
        from senri.records import OcrRow, TrackRow, write_table

        write_table(track, OUT / "track.parquet", TrackRow)
        write_table(ocr, OUT / "ocr.parquet", OcrRow)
        media = VideoMedia("walk", Path(video), "fp", result["video_s"], OUT / "track.parquet", OUT / "ocr.parquet")
        captioner = PerceptionCaptioner({"track": json.loads(settings)}, media)
        for level, clip_s, fps in (("coarse", 150, 1.0), ("fine", 10, 2.0)):
            spans = split(0, result["video_s"], clip_s)
            if level == "fine":
                spans = spans[:6]  # a question's backtracking touches a few fine clips, not all
            started = time.perf_counter()
            captions = captioner.caption_many([Clip(s, e, fps, "describe", level) for s, e in spans])
            result[f"{level}_s"] = time.perf_counter() - started
            result[f"{level}_video_s"] = sum(e - s for s, e in spans)
            result[f"{level}_frames"] = sum(c.n_frames for c in captions)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def measure(mode: str, video: Path, settings: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(video), json.dumps(settings)],
                          capture_output=True, text=True, check=True,
                          env={"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    video = make_video(args.minutes, args.width)
    print(f"video: {video.name}")
    runs = [("default (5 fps motion, OCR 1 fps, gate on)", "captions", {}),
            ("OCR gate off (every OCR sample read)", "track", {"ocr_change_fraction": 0.0}),
            ("OCR at 0.5 fps", "track", {"ocr_fps": 0.5})]
    base = None
    print("| configuration | video-s per wall-s | × default | OCR reads | reused views | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for label, mode, settings in runs:
        result = measure(mode, video, settings)
        speed = result["video_s"] / result["track_s"]
        base = base or result
        ratio = speed / (base["video_s"] / base["track_s"])
        print(f"| {label} | {speed:.2f} | {ratio:.2f} | {result['ocr_reads']} | {result['ocr_reused']} | "
              f"{result['peak_rss_mib']:.0f} |")
        if mode == "captions":
            captions = result
    for level in ("coarse", "fine"):
        print(f"{level} captions: {captions[f'{level}_video_s']:.0f} video-s in {captions[f'{level}_s']:.2f} s "
              f"({captions[f'{level}_video_s'] / max(captions[f'{level}_s'], 1e-9):.0f} video-s per wall-s), "
              f"{captions[f'{level}_frames']} frames read")
    default_speed = base["video_s"] / base["track_s"]
    print(f"a 2.5 h video's track at the default: {9000 / default_speed / 60:.0f} min on this CPU")


if __name__ == "__main__":
    main()

"""Probe cost on a long video: bounded packet scan vs scanning every packet, cheap fingerprint vs full hash,
and the damage check (decodable length vs declared duration) on the intact file and on a copy cut at half.

    python bench/probe.py [--minutes 24]

Renders (once, cached under results/bench/) a demo walk of about the given length, 640×360 30 fps H.264 with
a 1 s GOP, then times each variant three times and prints medians and ratios measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from senri import demo  # noqa: E402
from senri.probe import check_decodable, file_sha256, fingerprint, probe  # noqa: E402


def median_time(func, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=24.0)
    args = parser.parse_args()
    place_s = max(12, round((args.minutes * 60 - 6 * 6) / 7))
    cfg = demo.DemoConfig(n_videos=1, seed=1, places_per_video=7, place_s=place_s, turn_s=6, width=640,
                          height=360, fps=30, gop_s=1)
    walk = demo.plan_walk(cfg, "demo_01")
    video = Path("results/bench") / f"long_{walk.duration_s}s.mp4"
    if not video.exists():
        print(f"rendering a {walk.duration_s / 60:.1f}-minute video to {video} (once) ...", flush=True)
        demo.render_video(walk, video, threads=2)
    size_mib = video.stat().st_size / 2**20
    print(f"video: {video} ({walk.duration_s / 60:.1f} min, {size_mib:.0f} MiB)")

    bounded = median_time(lambda: probe(video, "v", keyframe_scan_s=120))
    full = median_time(lambda: probe(video, "v", keyframe_scan_s=walk.duration_s + 60))
    cheap = median_time(lambda: fingerprint(video))
    whole = median_time(lambda: file_sha256(video))
    print(f"probe, 120 s packet scan : {bounded:8.3f} s")
    print(f"probe, full packet scan  : {full:8.3f} s   ratio full/bounded = {full / bounded:6.1f}x")
    print(f"fingerprint (2 MiB read) : {cheap:8.4f} s")
    print(f"sha256 of the whole file : {whole:8.4f} s   ratio whole/fingerprint = {whole / cheap:6.1f}x")
    cut = video.with_name(f"{video.stem}.cut{video.suffix}")
    if not cut.exists():
        with video.open("rb") as source:
            cut.write_bytes(source.read(video.stat().st_size // 2))
    intact = median_time(lambda: check_decodable(video))
    damaged = median_time(lambda: check_decodable(cut))
    verdict = check_decodable(cut)
    print(f"damage check, intact     : {intact:8.3f} s   (tail decode: {100 * intact / bounded:.0f}% of the probe)")
    print(f"damage check, cut at half: {damaged:8.3f} s   (found {verdict.decodable_s:.0f} of {verdict.container_s:.0f} s)")


if __name__ == "__main__":
    main()

"""``senri <stage>``: one thin subcommand per stage. Rules call these; people can too.

Every stage command takes its config slice as ``--config JSON`` (what the Snakemake rule passes) or, when
run by hand, composes the defaults plus ``--override`` Hydra overrides, and writes the resolved slice next
to its output (``x.parquet`` → ``x.config.yaml``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from senri import config as cfgmod

log = logging.getLogger("senri")


def _stage_config(args: argparse.Namespace, stage: str, **keys: str) -> dict[str, Any]:
    if args.config:
        return json.loads(args.config)
    return cfgmod.stage_slice(cfgmod.compose(args.override), stage, **keys)


def _with_preset(stage: dict[str, Any], preset: str | None) -> dict[str, Any]:
    """The stage config with the memory preset the benchmark gives this video (``--preset``, from the workflow:
    VideoLucy's appendix by the benchmark's split), so the memory job, the answer job and their sidecars agree."""
    if not preset or "memory" not in stage:
        return stage
    return {**stage, "memory": {**stage["memory"], "preset": preset}}


def _add_preset_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help="the memory preset the video's benchmark sets (replaces memory.preset)")


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line naming the argument (no usage dump), exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole number' if kind is int else 'a number'}") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value
    return parse


def _add_caption_inputs(p: argparse.ArgumentParser, note: str = "") -> None:
    """What the captioner reads (the memory stage, and memory methods that re-caption while answering)."""
    for flag, what in (("--video", "the (anonymized) video, for (re-)captioning"),
                       ("--track", "the video's track table (perception captioner)"),
                       ("--ocr", "the video's OCR table (perception captioner)"),
                       ("--detections", "the anonymization stage's detections"),
                       ("--caption-cache", "the shared caption cache folder")):
        p.add_argument(flag, help=note + what)


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="the stage's config slice as JSON (as the workflow passes it)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="Hydra override applied to the defaults when --config is not given (repeatable)")


def cmd_demo_data(args: argparse.Namespace) -> None:
    from senri import demo

    stage = _stage_config(args, "demo_data")
    if not stage.get("demo"):
        raise SystemExit("senri demo-data: the selected dataset has no 'demo' section (use dataset=demo)")
    demo_cfg = demo.DemoConfig.from_mapping(stage["demo"])
    out_dir = Path(args.out_dir)
    known = demo.video_ids(demo_cfg)
    wanted = args.video or ([] if args.skip_videos else known)
    for video_id in wanted:
        if video_id not in known:
            raise SystemExit(f"senri demo-data: unknown demo video {video_id!r}; this config makes {known}")
        path = demo.render_video(demo.plan_walk(demo_cfg, video_id), out_dir / "videos" / f"{video_id}.mp4",
                                 threads=args.threads)
        log.info("wrote %s", path)
    if not args.skip_questions:
        questions = demo.write_questions(demo_cfg, out_dir / "questions.jsonl", out_dir / "walks.json")
        cfgmod.write_sidecar(out_dir / "questions.jsonl", "demo_data", stage)
        log.info("wrote %d questions to %s", len(questions), out_dir / "questions.jsonl")


def cmd_needle_data(args: argparse.Namespace) -> None:
    from senri import needle

    stage = _stage_config(args, "needle_data")
    if not stage.get("needle"):
        raise SystemExit("senri needle-data: the selected dataset has no 'needle' section (use dataset=needle)")
    try:
        needle_cfg = needle.NeedleConfig.from_mapping(stage["needle"])
    except (KeyError, ValueError) as exc:
        raise SystemExit(f"senri needle-data: config.dataset.needle: {exc}") from exc
    out_dir = Path(args.out_dir)
    for video_id in args.video:
        log.info("wrote %s", needle.build(needle_cfg, out_dir, video_id, threads=args.threads))
    if args.merge:
        table = needle.merge(needle_cfg, out_dir)
        cfgmod.write_sidecar(out_dir / "questions.jsonl", "needle_data", stage)
        log.info("wrote %d needle questions on %d videos to %s", table.height, table["video_id"].n_unique(),
                 out_dir / "questions.jsonl")


def cmd_ingest(args: argparse.Namespace) -> None:
    from senri.coverage import summary_lines
    from senri.ingest import ingest_dataset, not_drawn_rows, report_path
    from senri.records import IngestQuirk, Question, write_table
    from senri.subset import Subset, apply_subset

    stage = _stage_config(args, "ingest")
    dataset = {**stage, "questions": args.questions or stage["questions"],
               "videos_dir": args.videos_dir or stage["videos_dir"]}
    table, report = ingest_dataset(dataset)
    whole = table
    table, drawn = apply_subset(table, Subset.from_config(stage.get("subset")))  # dataset.subset: recorded below
    if drawn is not None:
        report = not_drawn_rows(whole, table, report)
    write_table(table, args.out, Question)
    write_table(report, report_path(args.out), IngestQuirk)
    cfgmod.write_sidecar(args.out, "ingest", {**stage, "subset_qids": drawn} if drawn is not None else stage)
    log.info("wrote %d questions on %d videos to %s", table.height, table["video_id"].n_unique(), args.out)
    # The coverage line (senri.coverage): the same sentence the end of a Snakemake run and the report print.
    for line in summary_lines(table, report):
        log.info("ingest: %s", line)
    if report.height:
        import polars as pl

        log.info("ingest report (every flag, the left-out questions with their reason): %s", report_path(args.out))
        for note in report.filter(pl.col("flag") == "file_note").iter_rows(named=True):
            log.info("%s: %s", note["file"], note["detail"])


def cmd_probe(args: argparse.Namespace) -> None:
    from senri.probe import probe
    from senri.records import VideoInfo, to_frame, write_table

    stage = _stage_config(args, "probe")
    info = probe(args.video, args.video_id or Path(args.video).stem, stage["probe"]["keyframe_scan_s"])
    write_table(to_frame([info], VideoInfo), args.out, VideoInfo)
    cfgmod.write_sidecar(args.out, "probe", stage)
    log.info("%s: %.1f s (from the %s), %d frames at %.3f fps, %dx%d, GOP %s s, stream starts at %.3f s",
             info.video_id, info.duration_s, info.duration_source, info.n_frames, info.avg_fps, info.width,
             info.height, info.keyframe_interval_s, info.start_s)


def _frame_plan(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The plan and settings: the workflow's config slice (``--config`` + ``--plan``) or the flags."""
    if args.config:
        stage = json.loads(args.config)
        plan = dict(stage["plan"])
        return plan.pop("name"), {**stage, "plan": plan}
    chosen = [flag for flag in ("uniform", "fps", "timestamps") if getattr(args, flag) is not None]
    if len(chosen) != 1:
        raise SystemExit("senri frames: give exactly one of --uniform N, --fps RATE, --timestamps T [T ...]")
    plan = {"kind": chosen[0], "accuracy": args.accuracy, "start_s": args.start, "end_s": args.end}
    if args.uniform is not None:
        plan.update(n=args.uniform, placement=args.placement)
    elif args.fps is not None:
        plan.update(rate=args.fps)
    else:
        plan.update(times=args.timestamps)
    name = args.plan or (f"uniform_{args.uniform}" if args.uniform else f"fps_{args.fps:g}" if args.fps else "timestamps")
    return name, {"plan": plan, "short_side": args.short_side, "jpeg_quality": args.quality,
                  "keyframe_fraction": args.keyframe_fraction, "watchdog_s": args.watchdog,
                  "on_damaged_video": args.on_damaged_video}


def cmd_frames(args: argparse.Namespace) -> None:
    from senri import decode

    name, settings = _frame_plan(args)
    fields = {"kind", "n", "rate", "placement", "times", "start_s", "end_s", "accuracy"}
    plan_spec = {k: v for k, v in settings["plan"].items() if k in fields and v is not None}
    plan_spec["times"] = tuple(plan_spec.get("times", ()))
    plan = decode.FramePlan(**plan_spec)
    stats: dict[str, Any] = {}
    frames = decode.read_frames(
        args.video, plan.targets, accuracy=plan.accuracy, short_side=settings["short_side"],
        keyframe_fraction=settings["keyframe_fraction"], watchdog_s=settings["watchdog_s"], stats=stats,
        threads=args.threads, on_damaged=settings.get("on_damaged_video", "fail"),
    )
    counts = decode.write_frame_store(frames, args.out, args.video_id or Path(args.video).stem, name,
                                      jpeg_quality=settings["jpeg_quality"])
    cfgmod.write_sidecar(args.out, "frames", {**settings, "plan": {"name": name, **settings["plan"]}})
    log.info("%s: %d frames, %d failed targets (%s mode; decoded %d of %d frames, %d seeks, %d bad packets)",
             args.out, counts["frames"], counts["failed"], stats.get("mode"), stats.get("decoded", 0),
             stats.get("n_frames", 0), stats.get("seeks", 0), stats.get("bad_packets", 0))


def cmd_anonymize(args: argparse.Namespace) -> None:
    from senri.anonymize.stage import AnonymizeConfig, anonymize_video

    stage = _stage_config(args, "anonymize")
    settings = {**stage["anonymize"], "on_damaged_video": stage.get("on_damaged_video", "fail")}
    if args.detector:
        settings["detectors"] = args.detector
    if args.stride:
        settings["stride"] = args.stride
    if args.keep_audio:
        settings["keep_audio"] = True
    video_id = args.video_id or Path(args.video).stem
    anonymize_video(args.video, args.out, args.detections, video_id, AnonymizeConfig.from_mapping(settings))
    cfgmod.write_sidecar(args.out, "anonymize", {"anonymize": settings})


def cmd_carrier(args: argparse.Namespace) -> None:
    from senri.decode import write_carrier

    count = write_carrier(args.frame_store, args.out, fps=args.fps)
    log.info("wrote a %d-frame carrier at %g frame/s to %s", count, args.fps, args.out)


def cmd_videos_table(args: argparse.Namespace) -> None:
    import polars as pl

    from senri.records import VideoInfo, read_table, write_table

    table = pl.concat([read_table(p, VideoInfo) for p in args.inputs], how="vertical").sort("video_id")
    write_table(table, args.out, VideoInfo)
    log.info("wrote %d videos to %s", table.height, args.out)


def cmd_answer(args: argparse.Namespace) -> None:
    from senri.answer import answer_video
    from senri.records import Prediction, Question, VideoInfo, from_frame, read_table, write_table

    stage = _with_preset(_stage_config(args, "answer", method=args.method, model=args.model), args.preset)
    video = from_frame(read_table(args.video_info, VideoInfo), VideoInfo)
    if len(video) != 1:
        raise SystemExit(f"senri answer: {args.video_info} must hold exactly one video, found {len(video)}")
    memory = None
    if args.memory:
        from senri.answer import MemoryInputs

        if not (args.video and args.caption_cache):
            raise SystemExit("senri answer: --memory needs --video and --caption-cache too")
        memory = MemoryInputs(Path(args.memory), Path(args.video), _path(args.track), _path(args.ocr),
                              _path(args.detections), Path(args.caption_cache), _path(args.memory_store))
    predictions = answer_video(read_table(args.questions, Question), video[0], stage, frames=args.frames,
                               carrier=args.carrier, cache=args.cache, memory=memory, pixels=args.video,
                               server=args.server, caption_cache=None if memory else args.caption_cache)
    write_table(predictions, args.out, Prediction)
    cfgmod.write_sidecar(args.out, "answer", stage)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def cmd_track(args: argparse.Namespace) -> None:
    from senri.records import OcrRow, TrackRow, write_table
    from senri.track import TrackConfig, compute_track, plot_track, track_intervals

    stage = _stage_config(args, "track")
    config = TrackConfig.from_mapping(stage["track"])
    video_id = args.video_id or Path(args.video).stem
    track, ocr, stats = compute_track(args.video, video_id, config,
                                      on_damaged=stage.get("on_damaged_video", "fail"))
    write_table(ocr, args.ocr, OcrRow)
    plot_track(track, args.plot, video_id)
    write_table(track, args.out, TrackRow)
    cfgmod.write_sidecar(args.out, "track", stage)
    turns, still = track_intervals(track, config)
    log.info("%s: %d samples (%d failed), %d OCR reads (%d reused views), %d distinct texts; turns: %s; %d pauses",
             video_id, stats["samples"], stats["failed"], stats["ocr_reads"], stats["ocr_reused"],
             ocr["text"].n_unique() if ocr.height else 0, ", ".join(t.label for t in turns) or "none", len(still))


def cmd_memory_system(args: argparse.Namespace) -> None:
    """``build`` / ``import`` one video's store of a memory system, or ``export`` senri's captions in the
    system's own input layout (:mod:`senri.memory.jobs`)."""
    from senri.captioners.base import VideoMedia
    from senri.memory import jobs
    from senri.records import VideoInfo, from_frame, read_table

    stage = _stage_config(args, "memory_system", system=args.system) if args.system or args.config else None
    if stage is None:
        raise SystemExit("senri memory-system: give --system NAME (with --override ...) or --config")
    info = from_frame(read_table(args.video_info, VideoInfo), VideoInfo)
    if len(info) != 1:
        raise SystemExit(f"senri memory-system: {args.video_info} must hold exactly one video, found {len(info)}")
    out = Path(args.out)
    if args.action == "export":
        for path in jobs.export_inputs(stage, Path(args.captions), info[0], out):
            print(path)
        return
    media = None
    if args.video:
        media = VideoMedia(info[0].video_id, Path(args.video), info[0].fingerprint, info[0].duration_s,
                           _path(args.track), _path(args.ocr), _path(args.detections))
    request = jobs.build_request(stage, info[0], out, _path(args.captions), _path(args.caption_cache), media,
                                 _path(args.response_cache))
    import_dir = None
    if args.action == "import":
        import_dir = args.import_dir or stage["memory_system"].get("import_dir")
        if not import_dir:
            raise SystemExit("senri memory-system import: give --import-dir or set memory_system.<name>.import_dir")
    try:
        jobs.write_store(stage, request, _path(import_dir))
    except (ValueError, NotImplementedError) as exc:  # a bad release names its file and field
        raise SystemExit(f"senri memory-system {args.action}: error: {exc}") from exc


def _print_memory_plan(memory: dict, duration_s: float) -> None:
    """The dry run: which preset a video of this length gets and what each level would caption."""
    from senri.memory.hierarchy import memory_plan

    plan = memory_plan(memory, duration_s)
    how = "by the auto rule" if plan["auto"] else "named in config.memory.preset"
    print(f"duration {duration_s:g} s → preset {plan['preset']} ({how}); captioner {plan['captioner']}")
    for level, spec in plan["levels"].items():
        cap = f", {spec['dropped_per_clip']} dropped by max_frames" if spec["dropped_per_clip"] else ""
        print(f"  {level}: {spec['clips']} clip(s) of {spec['clip_s']:g} s at {spec['fps']:g} fps → "
              f"{spec['frames_per_clip']} frames per clip{cap}"
              f"{' (built by the memory stage)' if spec['precomputed'] else ' (captioned on demand)'}")


def cmd_memory(args: argparse.Namespace) -> None:
    from senri.captioners.base import VideoMedia
    from senri.memory.hierarchy import build_memory, open_service
    from senri.records import MemoryCost, MemoryRow, VideoInfo, from_frame, read_table, write_table

    stage = _with_preset(_stage_config(args, "memory"), args.preset)
    if args.plan_only:
        if args.duration is None and not args.video_info:
            raise SystemExit("senri memory --plan-only: give --duration SECONDS or --video-info")
        duration = args.duration if args.duration is not None else from_frame(
            read_table(args.video_info, VideoInfo), VideoInfo)[0].duration_s
        _print_memory_plan(stage["memory"], duration)
        return
    missing = [f"--{n.replace('_', '-')}" for n in ("video_info", "video", "caption_cache", "out", "cost")
               if not getattr(args, n)]
    if missing:
        raise SystemExit(f"senri memory: {', '.join(missing)} required (or --plan-only)")
    info = from_frame(read_table(args.video_info, VideoInfo), VideoInfo)[0]
    media = VideoMedia(info.video_id, Path(args.video), info.fingerprint, info.duration_s, _path(args.track),
                       _path(args.ocr), _path(args.detections))
    service = open_service(stage, media, args.caption_cache)
    try:
        rows, cost = build_memory(service, stage["memory"], info.duration_s)
    finally:
        service.close()
    write_table(cost, args.cost, MemoryCost)
    write_table(rows, args.out, MemoryRow)
    cfgmod.write_sidecar(args.out, "memory", stage)
    log.info("%s: %d caption(s); %d computed, %d reused from the caption cache, %d frame(s) read",
             info.video_id, rows.height, service.stats.computed, service.stats.reused, service.stats.frames)


def cmd_aggregate(args: argparse.Namespace) -> None:
    from senri.aggregate import aggregate
    from senri.records import Question, read_table

    stage = _stage_config(args, "aggregate")
    tables = aggregate(args.predictions, read_table(args.questions, Question), args.out,
                       decimals=stage["aggregate"]["decimals"])
    cfgmod.write_sidecar(Path(args.out), "aggregate", stage)
    log.info("wrote tables for %d run(s) to %s", tables["main"].height, args.out)


def cmd_analyze(args: argparse.Namespace) -> None:
    import polars as pl

    from senri.analysis.richness import run_richness
    from senri.records import Question, read_table

    stage = _stage_config(args, args.analysis)
    levels, curves = run_richness(stage, args.predictions, read_table(args.questions, Question), args.cache,
                                  args.out)
    cfgmod.write_sidecar(Path(args.out), args.analysis, stage)
    log.info("%s: %d level text(s) of %d question(s) scored; %d reply(ies) not scored; wrote %s", args.analysis,
             levels.height, levels["qid"].n_unique(), levels.filter(pl.col("relevance").is_null()).height, args.out)


def cmd_report(args: argparse.Namespace) -> None:
    import polars as pl

    from senri.records import Question, VideoInfo, read_table
    from senri.report import build_report

    stage = _stage_config(args, "report")
    needles = pl.read_parquet(args.needles) if args.needles else None
    videos = read_table(args.videos, VideoInfo) if args.videos else None
    richness = pl.read_parquet(args.richness) if args.richness else None
    from senri.ingest import report_path

    ingest_report = report_path(args.questions)  # beside the question table: the coverage block's source
    path = build_report(args.predictions, read_table(args.questions, Question), args.out, stage["report"],
                        seed=int(stage["seed"]), decimals=stage["aggregate"]["decimals"], needles=needles,
                        videos=videos, richness=richness,
                        ingest_report=pl.read_parquet(ingest_report) if ingest_report.is_file() else None)
    cfgmod.write_sidecar(Path(args.out) / "report", "report", stage)
    log.info("wrote %s", path)


def cmd_config(args: argparse.Namespace) -> None:
    cfg = cfgmod.compose(args.overrides)
    planned = cfgmod.runs(cfg)  # refuses a plan with a run that cannot work, before printing anything
    print(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), end="")
    print("# runs (method, model): " + ", ".join(f"{m}/{mo}" for m, mo in planned))
    from senri.memory.hierarchy import describe_preset_rule

    memory = cfg["memory"]
    from senri.benchmarks import benchmark_name, load_benchmark

    if memory["preset"] == "auto" and benchmark_name(cfg["dataset"]) != "senri":
        rule = " ".join((load_benchmark(cfg["dataset"]).preset.__doc__ or "").split())
        bins = cfg["dataset"].get("preset_bins")
        print(f"# memory preset by the benchmark ({benchmark_name(cfg['dataset'])}; recorded in each video's memory "
              f"cost table): {rule}" + (f"\n#   bins (preset: upper bound s): {bins}" if bins else ""))
    elif memory["preset"] == "auto":
        print("# memory preset rule (memory.preset=auto; the preset is recorded in each video's memory cost "
              "table):\n" + "\n".join(f"#   {line}" for line in describe_preset_rule(memory).splitlines()))
    else:
        print(f"# memory preset: {memory['preset']} (named; memory.preset=auto picks by duration)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="senri", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<stage>")

    def add(name: str, func: Callable[[argparse.Namespace], None], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = add("demo-data", cmd_demo_data, "generate the demo videos (ffmpeg) and their question file")
    _add_config_options(p)
    p.add_argument("--out-dir", default="results/demo", help="writes videos/<id>.mp4, questions.jsonl, walks.json")
    p.add_argument("--video", action="append", default=[], help="render only this demo video (repeatable)")
    p.add_argument("--skip-videos", action="store_true", help="write only the question file")
    p.add_argument("--skip-questions", action="store_true", help="write only videos")
    p.add_argument("--threads", type=int, default=1, help="encoder threads per video")

    p = add("needle-data", cmd_needle_data, "build needle-in-a-video-haystack videos and their questions")
    _add_config_options(p)
    p.add_argument("--out-dir", default="results/needle", help="writes videos/<id>.mp4, questions/<id>.jsonl")
    p.add_argument("--video", action="append", default=[], help="build this needle video (repeatable)")
    p.add_argument("--merge", action="store_true", help="gather every video's questions into questions.jsonl "
                   "and needles.parquet")
    p.add_argument("--threads", type=int, default=1, help="encoder threads per video")

    p = add("ingest", cmd_ingest, "validate question files into results/questions.parquet")
    _add_config_options(p)
    p.add_argument("--questions", nargs="+", help="question files (default: the dataset config's)")
    p.add_argument("--videos-dir", help="folder holding <video_id><ext> (default: the dataset config's)")
    p.add_argument("--out", default="results/questions.parquet")

    p = add("probe", cmd_probe, "ffprobe one video into a one-row video table")
    _add_config_options(p)
    p.add_argument("video")
    p.add_argument("--video-id", help="default: the file name without extension")
    p.add_argument("--out", required=True)

    p = add("frames", cmd_frames, "sample frames of one video into a frame store (Parquet of JPEGs)")
    _add_config_options(p)
    p.add_argument("video")
    p.add_argument("--out", required=True, help="frame store to write (.parquet)")
    p.add_argument("--video-id", help="default: the file name without extension")
    p.add_argument("--plan", help="plan name (with --config: which plan of the config slice)")
    p.add_argument("--uniform", type=_positive(int), metavar="N", help="N frames uniformly over [start, end]")
    p.add_argument("--placement", choices=["center", "linspace", "interior"], default="center")
    p.add_argument("--fps", type=_positive(float), metavar="RATE", help="RATE frames per second over [start, end)")
    p.add_argument("--timestamps", type=float, nargs="+", metavar="T", help="these times, in seconds")
    p.add_argument("--start", type=float, help="window start, seconds from the first frame (default: first frame)")
    p.add_argument("--end", type=float, help="window end in seconds (default: last frame)")
    p.add_argument("--accuracy", choices=["exact", "keyframe", "auto"], default="auto")
    p.add_argument("--short-side", type=int, default=448, help="resize so the shorter side is at most this")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality")
    p.add_argument("--keyframe-fraction", type=float, default=0.25)
    p.add_argument("--watchdog", type=float, default=3600, help="seconds before the video is given up")
    p.add_argument("--threads", type=int, default=2, help="decoder threads for keyframe plans")
    p.add_argument("--on-damaged-video", choices=["fail", "keep_decodable"], default="fail",
                   help="a truncated/corrupt video: fail (default) or sample its decodable part")

    p = add("carrier", cmd_carrier, "pack a frame store into a short video at 1 frame per second")
    p.add_argument("frame_store")
    p.add_argument("--out", required=True)
    p.add_argument("--fps", type=float, default=1.0)

    p = add("videos-table", cmd_videos_table, "gather per-video probe tables into results/videos.parquet")
    p.add_argument("inputs", nargs="+")
    p.add_argument("--out", default="results/videos.parquet")

    p = add("anonymize", cmd_anonymize, "blur faces (and plates) in every frame: anonymized video + detections")
    _add_config_options(p)
    p.add_argument("video")
    p.add_argument("--out", required=True, help="anonymized video (.mp4)")
    p.add_argument("--detections", required=True, help="detections table (.parquet)")
    p.add_argument("--video-id")
    p.add_argument("--detector", action="append", help="detector plugin (repeatable); default from config")
    p.add_argument("--stride", type=int, help="detect on every N-th frame; default from config")
    p.add_argument("--keep-audio", action="store_true")

    p = add("answer", cmd_answer, "answer one video's questions with one method and model")
    _add_config_options(p)
    p.add_argument("--questions", default="results/questions.parquet")
    p.add_argument("--video-info", required=True, help="the video's probe table")
    p.add_argument("--method", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--frames", help="frame store of the method's plan (methods that look at frames)")
    p.add_argument("--carrier", help="carrier video of that frame store (backends that take video)")
    p.add_argument("--cache", help="durable response cache (SQLite); a rerun repeats no finished call")
    p.add_argument("--memory", help="memory methods: the video's memory table")
    p.add_argument("--memory-store", help="memory methods over a memory system other than captions: its store "
                                          "folder (results/memory_system/<system>/<captioner>/<video>)")
    _add_caption_inputs(p, "memory methods: ")
    p.add_argument("--server", metavar="URL", help="a served batch's server of this model (http://127.0.0.1:PORT; "
                                                   "its key in $SENRI_SERVER_KEY): calls go there, same cache keys")
    _add_preset_option(p)
    p.add_argument("--out", required=True)

    p = add("memory-system", cmd_memory_system,
            "build or import one video's store of a memory system; export captions in the system's input layout")
    _add_config_options(p)
    p.add_argument("action", choices=["build", "import", "export"])
    p.add_argument("--system", help="the memory system (with --override; the workflow passes --config)")
    p.add_argument("--video-info", required=True, help="the video's probe table")
    p.add_argument("--captions", help="the caption stage's table of the video (the memory table)")
    _add_caption_inputs(p, "build: ")
    p.add_argument("--response-cache", help="build: the job's durable response cache of its builder models")
    p.add_argument("--import-dir", help="import: the release folder (default: the config's import_dir)")
    p.add_argument("--out", required=True, help="the store folder (build, import) or the export folder")

    p = add("track", cmd_track, "ego-motion track, on-screen text and path plot of one video")
    _add_config_options(p)
    p.add_argument("video")
    p.add_argument("--video-id")
    p.add_argument("--out", required=True, help="track table (.parquet)")
    p.add_argument("--ocr", required=True, help="OCR table (.parquet)")
    p.add_argument("--plot", required=True, help="dead-reckoned path (.png)")

    p = add("memory", cmd_memory, "caption memory of one video (the precomputed levels), via the caption cache")
    _add_config_options(p)
    p.add_argument("--video-info", help="the video's probe table")
    _add_caption_inputs(p)
    p.add_argument("--out", help="memory table (.parquet)")
    p.add_argument("--cost", help="cost table (.parquet): preset, captions computed vs reused, frames, tokens")
    p.add_argument("--plan-only", action="store_true",
                   help="dry run: print the preset and each level's clips and frames per clip, caption nothing")
    p.add_argument("--duration", type=float, metavar="SECONDS", help="with --plan-only: a video of this length")
    _add_preset_option(p)

    p = add("aggregate", cmd_aggregate, "accuracy tables (Parquet, CSV, Markdown) from prediction files")
    _add_config_options(p)
    p.add_argument("--predictions", nargs="+", required=True, help="prediction files or folders")
    p.add_argument("--questions", default="results/questions.parquet")
    p.add_argument("--out", default="results/tables")

    p = add("report", cmd_report, "paper-layout tables, figures, paired statistics and report.html")
    _add_config_options(p)
    p.add_argument("--predictions", nargs="+", required=True, help="prediction files (their .config.yaml beside)")
    p.add_argument("--questions", default="results/questions.parquet")
    p.add_argument("--out", default="results", help="writes OUT/report.html and OUT/report/")
    p.add_argument("--needles", help="the needle stage's needles.parquet (dataset=needle): the needle figure")
    p.add_argument("--richness", help="the richness analysis's curves.parquet: VideoLucy Fig. 5's curves")
    p.add_argument("--videos", help="the videos table (results/videos.parquet): the question browser's thumbnails "
                                    "come from its video files")

    p = add("analyze", cmd_analyze, "an analysis over finished runs (richness: VideoLucy Fig. 5, entropy and "
                                    "relevance per memory level)")
    p.add_argument("analysis", choices=["richness"])
    _add_config_options(p)
    p.add_argument("--predictions", nargs="+", required=True, help="the VideoLucy runs' prediction files")
    p.add_argument("--questions", default="results/questions.parquet")
    p.add_argument("--cache", help="the evaluator's response cache (SQLite)")
    p.add_argument("--out", default="results/analysis/richness", help="writes levels.parquet and curves.parquet")

    p = add("config", cmd_config, "print the composed, validated config and the runs it implies")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. method=[random] seed=3")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from senri.aggregate import AggregateError
    from senri.ingest import IngestError
    from senri.media import MediaError
    from senri.records import TableError
    from senri.registry import RegistryError

    from senri.backends.base import ENGINE_UNAVAILABLE, BackendError, EngineUnavailable
    from senri.secrets import scrub, scrub_logs

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "frames" and args.start is not None and args.end is not None and args.end < args.start:
        parser.error(f"argument --end: {args.end:g} is before --start {args.start:g}")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    scrub_logs()  # no API key or Authorization header reaches a log
    # Where the job ran, first line of every log: on a cluster, the SLURM job to look up.
    log.info("senri %s on %s (pid %d, SLURM_JOB_ID=%s)", args.command, platform.node(), os.getpid(),
             os.environ.get("SLURM_JOB_ID", "none"))
    try:
        args.func(args)
    except (cfgmod.ConfigError, RegistryError, BackendError) as exc:  # the config or a key in it: usage, exit 2
        print(f"senri {args.command}: error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except (IngestError, MediaError, TableError, AggregateError) as exc:
        print(f"senri {args.command}: error: {scrub(str(exc))}", file=sys.stderr)
        return 1
    except EngineUnavailable as exc:  # the model's server is gone: nothing written, the batch resumes it
        print(f"senri {args.command}: engine unavailable: {scrub(str(exc))}", file=sys.stderr)
        return ENGINE_UNAVAILABLE
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

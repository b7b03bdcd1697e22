# Stage 3: anonymization. One job per video: faces (and plates) blurred in every frame, streamed, before any
# later stage looks at pixels. When `anonymize.enabled`, probing and frame sampling read this video.


rule anonymize:
    input:
        video=original_video_file,
    output:
        video="results/anonymized/{video_id}.mp4",
        detections="results/anonymized/{video_id}.detections.parquet",
        config="results/anonymized/{video_id}.config.yaml",
    params:
        config=stage_config("anonymize"),
        code=stage_code("anonymize"),
    log:
        "results/logs/anonymize/{video_id}.log",
    benchmark:
        "results/benchmarks/anonymize/{video_id}.tsv"
    threads: 2
    resources:
        mem_mb=sized_mem_mb("anonymize", fallback=2000),
        runtime=sized_runtime("anonymize", fallback=600),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri anonymize {input.video:q} --video-id={wildcards.video_id} --config {params.config:q}"
        " --out {output.video} --detections {output.detections} > {log} 2>&1"
        " || (tail -n 3 {log} >&2; exit 1)"  # a damaged or unreadable video: its one-line reason on the console

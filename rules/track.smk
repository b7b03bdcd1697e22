# Stage 4a: the ego-motion track. One job per video: turns, pauses and heading from optical flow, the text
# on screen (OCR), place labels, and a plot of the dead-reckoned path. Read by the perception captioner.


rule track:
    input:
        video=video_file,
    output:
        table="results/track/{video_id}.parquet",
        ocr="results/track/{video_id}.ocr.parquet",
        plot="results/track/{video_id}.png",
        config="results/track/{video_id}.config.yaml",
    params:
        config=stage_config("track"),
        code=stage_code("track"),
    log:
        "results/logs/track/{video_id}.log",
    benchmark:
        "results/benchmarks/track/{video_id}.tsv"
    threads: 2
    resources:
        mem_mb=sized_mem_mb("track", fallback=2000),
        runtime=sized_runtime("track", fallback=240),
    conda:
        "../envs/cpu.yaml"
    shell:
        "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={threads} python -m senri track {input.video:q}"
        " --video-id={wildcards.video_id} --config {params.config:q} --out {output.table} --ocr {output.ocr}"
        " --plot {output.plot} > {log} 2>&1"
        " || (tail -n 3 {log} >&2; exit 1)"  # a damaged or unreadable video: its one-line reason on the console

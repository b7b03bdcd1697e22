# Stage 2: frame stores. One job per (plan, video): the plan's frames as JPEGs with their true timestamps.


rule frames:
    input:
        video=video_file,
    output:
        table="results/frames/{plan}/{video_id}.parquet",
        config="results/frames/{plan}/{video_id}.config.yaml",
    params:
        config=frames_config,
        code=stage_code("frames"),
    log:
        "results/logs/frames/{plan}/{video_id}.log",
    benchmark:
        "results/benchmarks/frames/{plan}/{video_id}.tsv"
    threads: 2
    resources:
        mem_mb=sized_mem_mb("frames", fallback=1500),
        runtime=sized_runtime("frames", fallback=120),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri frames {input.video:q} --video-id={wildcards.video_id} --config {params.config:q}"
        " --threads {threads} --out {output.table} > {log} 2>&1"
        " || (tail -n 3 {log} >&2; exit 1)"  # a damaged or unreadable video: its one-line reason on the console


rule carrier:
    input:
        "results/frames/{plan}/{video_id}.parquet",
    output:
        "results/frames/{plan}/{video_id}.carrier.mp4",
    params:
        code=stage_code("carrier"),
    log:
        "results/logs/carrier/{plan}/{video_id}.log",
    resources:
        mem_mb=1000,
        runtime=30,
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri carrier {input} --out {output} > {log} 2>&1"

# Stage 5: one job per method × model × video, each writing that video's prediction rows.


rule answer:
    input:
        questions="results/questions.parquet",
        video="results/probe/{video_id}.parquet",
    output:
        table="results/predictions/{method}/{model}/{video_id}.parquet",
        config="results/predictions/{method}/{model}/{video_id}.config.yaml",
    params:
        config=answer_config,
        code=answer_code,
    log:
        "results/logs/answer/{method}/{model}/{video_id}.log",
    benchmark:
        "results/benchmarks/answer/{method}/{model}/{video_id}.tsv"
    threads: 1
    resources:
        mem_mb=answer_mem_mb,
        runtime=240,
        gpu=answer_gpus,
    conda:
        "../envs/cpu.yaml"
    shell:
        "{SENRI_CLI} answer --config {params.config:q} --questions {input.questions}"
        " --video-info {input.video} --method {wildcards.method} --model {wildcards.model}"
        " --out {output.table} > {log} 2>&1"

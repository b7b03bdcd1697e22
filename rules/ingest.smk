# Stage 1: demo data (when dataset=demo), question ingest, and video probing.

from senri import coverage as senri_coverage  # noqa: E402

if IS_DEMO:

    rule demo_video:
        output:
            "results/demo/videos/{video_id}.mp4",
        params:
            config=stage_config("demo_data"),
            code=stage_code("demo_data"),
        log:
            "results/logs/demo_video/{video_id}.log",
        benchmark:
            "results/benchmarks/demo_video/{video_id}.tsv"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=30,
        conda:
            "../envs/cpu.yaml"
        shell:
            "python -m senri demo-data --config {params.config:q} --out-dir results/demo"
            " --video {wildcards.video_id} --skip-questions --threads {threads} > {log} 2>&1"

    rule demo_questions:
        output:
            questions="results/demo/questions.jsonl",
            walks="results/demo/walks.json",
            config="results/demo/questions.config.yaml",
        params:
            config=stage_config("demo_data"),
            code=stage_code("demo_data"),
        log:
            "results/logs/demo_questions.log",
        benchmark:
            "results/benchmarks/demo_questions.tsv"
        resources:
            mem_mb=500,
            runtime=5,
        conda:
            "../envs/cpu.yaml"
        shell:
            "python -m senri demo-data --config {params.config:q} --out-dir results/demo --skip-videos > {log} 2>&1"


rule ingest:
    input:
        questions=question_files,
        videos=demo_videos,
    output:
        table="results/questions.parquet",
        report="results/questions.report.parquet",
        config="results/questions.config.yaml",
    params:
        config=stage_config("ingest"),
        code=stage_code("ingest"),
    log:
        "results/logs/ingest.log",
    benchmark:
        "results/benchmarks/ingest.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/cpu.yaml"
    shell:
        # A failing ingest prints its problem list (file, row, field) on the console, not only in the log.
        "python -m senri ingest --config {params.config:q} --out {output.table} > {log} 2>&1"
        " || (tail -n 200 {log} >&2; exit 1)"


rule probe:
    input:
        video=video_file,
    output:
        table="results/probe/{video_id}.parquet",
        config="results/probe/{video_id}.config.yaml",
    params:
        config=stage_config("probe"),
        code=stage_code("probe"),
    log:
        "results/logs/probe/{video_id}.log",
    benchmark:
        "results/benchmarks/probe/{video_id}.tsv"
    resources:
        mem_mb=500,
        runtime=10,
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri probe {input.video:q} --video-id={wildcards.video_id} --config {params.config:q}"
        " --out {output.table} > {log} 2>&1"


rule videos_table:
    input:
        probe_tables,
    output:
        "results/videos.parquet",
    params:
        code=stage_code("videos_table"),
    log:
        "results/logs/videos_table.log",
    benchmark:
        "results/benchmarks/videos_table.tsv"
    resources:
        mem_mb=500,
        runtime=5,
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri videos-table {input} --out {output} > {log} 2>&1"


# The end of a successful run restates what the questions cover (senri.coverage, from ingest's two tables): a
# partial download ("N of M questions (V of W videos) — K questions on missing videos left out") is the last
# thing on the console, not only a line in the ingest log.
onsuccess:
    for _line in senri_coverage.summary_from_files("results/questions.parquet", "results/questions.report.parquet"):
        logger.info(f"senri questions: {_line}")

# dataset=needle: needle-in-a-video-haystack videos spliced by `senri needle-data` (src/senri/needle.py), one job
# per video, then one job gathering their questions into the dataset's question file.

if IS_NEEDLE:

    rule needle_video:
        input:
            user=needle_user_inputs,
        output:
            video="results/needle/videos/{video_id}.mp4",
            questions="results/needle/questions/{video_id}.jsonl",
        params:
            config=stage_config("needle_data"),
            code=stage_code("needle_data"),
        log:
            "results/logs/needle_video/{video_id}.log",
        benchmark:
            "results/benchmarks/needle_video/{video_id}.tsv"
        threads: 1
        resources:
            mem_mb=1500,
            runtime=60,
        conda:
            "../envs/cpu.yaml"
        shell:
            "python -m senri needle-data --config {params.config:q} --out-dir results/needle"
            " --video {wildcards.video_id} --threads {threads} > {log} 2>&1"

    rule needle_questions:
        input:
            expand("results/needle/questions/{video_id}.jsonl", video_id=VIDEO_IDS),
        output:
            questions="results/needle/questions.jsonl",
            table="results/needle/needles.parquet",
            config="results/needle/questions.config.yaml",
        params:
            config=stage_config("needle_data"),
            code=stage_code("needle_data"),
        log:
            "results/logs/needle_questions.log",
        resources:
            mem_mb=500,
            runtime=5,
        conda:
            "../envs/cpu.yaml"
        shell:
            "python -m senri needle-data --config {params.config:q} --out-dir results/needle --merge > {log} 2>&1"

# Stage 4b: hierarchical caption memory. One job per (captioner, video): the precomputed levels (coarse by
# default), question-independent, at the preset the video's length picks (recorded in the cost table;
# `senri memory --plan-only --duration S` shows it without captioning). Every caption goes through the shared caption cache (not an output:
# Snakemake keeps it when a job fails, and answer jobs of memory methods add their re-captions to it), so a
# rerun, another question, method or inference model never captions the same clip twice.


rule memory:
    input:
        unpack(memory_inputs),
    output:
        table="results/memory/{captioner}/{video_id}.parquet",
        cost="results/memory/{captioner}/{video_id}.cost.parquet",
        config="results/memory/{captioner}/{video_id}.config.yaml",
    params:
        config=stage_config("memory"),
        code=stage_code("memory"),
        options=memory_options,
        cache="results/cache/captions/{captioner}/{video_id}",
    log:
        "results/logs/memory/{captioner}/{video_id}.log",
    benchmark:
        "results/benchmarks/memory/{captioner}/{video_id}.tsv"
    threads: 2
    resources:
        mem_mb=memory_mem_mb,
        runtime=720,
        gpu=memory_gpus,
    conda:
        "../envs/cpu.yaml"
    shell:
        "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={threads} python -m senri memory --config {params.config:q}"
        " --video-info {input.info} --video {input.pixels:q} {params.options} --caption-cache {params.cache}"
        " --out {output.table} --cost {output.cost} > {log} 2>&1"

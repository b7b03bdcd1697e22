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
        config=memory_config,
        code=stage_code("memory"),
        options=memory_options,
        preset=memory_preset,
        cache="results/cache/captions/{captioner}/{video_id}",
    log:
        "results/logs/memory/{captioner}/{video_id}.log",
    benchmark:
        "results/benchmarks/memory/{captioner}/{video_id}.tsv"
    threads: 2
    resources:
        mem_mb=memory_mem_mb,
        runtime=memory_runtime,
        gpu=memory_gpus,
    conda:
        "../envs/cpu.yaml"
    shell:
        "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={threads} python -m senri memory --config {params.config:q}"
        " --video-info {input.info} --video {input.pixels:q} {params.options} {params.preset}"
        " --caption-cache {params.cache} --out {output.table} --cost {output.cost} > {log} 2>&1"


# Stage 4c: a persistent memory system's store (WorldMM, MAGIC-Video, ...; issue 25). One job per (system,
# captioner, video) calls the registered store class's `build` — captioning at the system's own base scale
# through the shared caption cache, its builder models through the job's own response cache — or, when the
# system's `import_dir` is set, its `import_release`. Answer jobs of memory methods over that system read the
# folder; the `captions` system needs no job (its store is the memory table above).
rule memory_system:
    input:
        unpack(memory_system_inputs),
    output:
        store=directory("results/memory_system/{system}/{captioner}/{video_id}"),
    params:
        config=memory_system_config,
        code=memory_system_code,
        action=memory_system_action,
        options=memory_options,
        cache="results/cache/captions/{captioner}/{video_id}",
        responses="results/cache/memory_system/{system}/{captioner}/{video_id}.sqlite",
    log:
        "results/logs/memory_system/{system}/{captioner}/{video_id}.log",
    benchmark:
        "results/benchmarks/memory_system/{system}/{captioner}/{video_id}.tsv"
    threads: 2
    resources:
        mem_mb=memory_mem_mb,
        runtime=720,
        gpu=memory_gpus,
    conda:
        "../envs/cpu.yaml"
    shell:
        "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={threads} python -m senri memory-system {params.action}"
        " --config {params.config:q} --video-info {input.info} --captions {input.captions}"
        " --video {input.pixels:q} {params.options} --caption-cache {params.cache}"
        " --response-cache {params.responses} --out {output.store} > {log} 2>&1"

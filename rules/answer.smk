# Stage 5: one job per method × model × video, each writing that video's prediction rows.
# Every model call is stored in the job's response cache the moment it completes; the cache is not an
# output, so Snakemake keeps it when a job fails or is killed and the rerun repeats no finished call.
# The paths are senri.workflow.AnswerJobFiles (ANSWER_FILES), the one definition the served batches share.


rule answer:
    input:
        unpack(answer_inputs),
    output:
        table=ANSWER_FILES.out,
        config=ANSWER_FILES.sidecar,
    params:
        config=answer_config,
        code=answer_code,
        media=answer_media_options,
        cache=ANSWER_FILES.cache,
    log:
        ANSWER_FILES.log,
    benchmark:
        ANSWER_FILES.benchmark
    wildcard_constraints:
        model=IN_PROCESS_MODEL,  # a served model's answers come from its batch (rules/serving.smk)
    threads: answer_threads
    resources:
        mem_mb=answer_mem_mb,
        runtime=240,
        gpu=answer_gpus,
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri answer --config {params.config:q} --questions {input.questions}"
        " --video-info {input.video} --method {wildcards.method} --model {wildcards.model}"
        " {params.media} --cache {params.cache} --out {output.table} > {log} 2>&1"

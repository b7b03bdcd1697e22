# Served answer batches (senri.serving, README "Running at scale"): per batch of a model in serving.models, one
# job that starts the model's server once and runs the batch's answers against it. Its outputs are exactly
# the in-process answer rule's prediction files and sidecars; its params hold a digest of every answer's config
# slice and code digest, so a changed answer reruns its batch (the unchanged answers replay from their caches). The
# server log, each answer's log and results/serving/<model>.jsonl (one line per server start) are not
# outputs: Snakemake keeps them when a batch fails.

# The batch job recomposes the run's config from its overrides. They travel in the environment, as PYTHONPATH
# does (common.smk): as a param they would rerun every batch when only a serving knob changed.
os.environ.update(SENRI_OVERRIDES=senri_config.canonical_json(senri_config.parse_overrides(config.get("overrides"))))

for _batch in SERVED_BATCHES:

    rule:
        name:
            _batch.rule_name
        input:
            sorted({path for answer in _batch.answers for path in answer.inputs.values()}),
        output:
            _batch.outputs,
        params:
            # One hash of every answer's config slice, code digest and files: it changes exactly when one of
            # the answers' in-process params would (the slices themselves, 140 × KB, would be stored by
            # Snakemake once per output file).
            digest=senri_serving.batch_digest(SENRI, _batch),
            batch=_batch.name,
        log:
            f"results/logs/serving/{_batch.name}.log",
        benchmark:
            f"results/benchmarks/serving/{_batch.name}.tsv"
        threads: senri_serving.batch_threads(SENRI, _batch)
        resources:
            mem_mb=senri_serving.batch_mem_mb(SENRI, _batch),
            runtime=SENRI["serving"]["runtime"],
            gpu=senri_workflow.answer_resources(SENRI, _batch.model)["gpu"],
        conda:
            "../envs/cpu.yaml"
        shell:
            "python -m senri.serving --batch {params.batch:q} --digest {params.digest} > {log} 2>&1"

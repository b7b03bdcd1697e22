# Stage 7: analyses over finished runs. richness (VideoLucy Fig. 5): for the VideoLucy runs' questions whose
# trace reached analysis.richness.level, each memory level's Shannon entropy and its relevance to the question
# scored by the evaluator model (through its response cache: a rerun repeats no call). Planned only when
# analysis.richness.evaluator names a model and a VideoLucy run is planned; the report then draws the curves.


rule richness:
    input:
        predictions=richness_predictions,
        questions="results/questions.parquet",
    output:
        levels="results/analysis/richness/levels.parquet",
        curves="results/analysis/richness/curves.parquet",
        config="results/analysis/richness/config.yaml",
    params:
        config=stage_config("richness"),
        code=stage_code("richness"),
        cache="results/cache/analysis/richness.sqlite",
    log:
        "results/logs/analysis/richness.log",
    benchmark:
        "results/benchmarks/analysis/richness.tsv"
    resources:
        mem_mb=2000,
        runtime=240,
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri analyze richness --config {params.config:q} --predictions {input.predictions:q}"
        " --questions {input.questions} --cache {params.cache} --out results/analysis/richness > {log} 2>&1"

# Stage 6: accuracy tables from every planned prediction file (never from stale files of older runs).
# Outputs marked report() appear in Snakemake's own report (`snakemake --report report.zip`), with the
# captions under workflow/report/.

report: "../workflow/report/workflow.rst"


rule aggregate:
    input:
        predictions=prediction_files,
        questions="results/questions.parquet",
    output:
        main="results/tables/main.parquet",
        main_md="results/tables/main.md",
        main_csv=report("results/tables/main.csv", caption="../workflow/report/main.rst", category="Tables"),
        per_video="results/tables/per_video.parquet",
        per_video_md="results/tables/per_video.md",
        per_video_csv=report("results/tables/per_video.csv", caption="../workflow/report/per_video.rst",
                             category="Tables"),
        positions="results/tables/answer_positions.parquet",
        positions_md="results/tables/answer_positions.md",
        positions_csv="results/tables/answer_positions.csv",
        config="results/tables/config.yaml",
    params:
        config=stage_config("aggregate"),
        code=stage_code("aggregate"),
    log:
        "results/logs/aggregate.log",
    benchmark:
        "results/benchmarks/aggregate.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri aggregate --config {params.config:q} --predictions {input.predictions:q}"
        " --questions {input.questions} --out results/tables > {log} 2>&1"


# The last rule of the DAG: reruns only when a prediction file, the report config or the report code changes.
rule report:
    input:
        predictions=prediction_files,
        sidecars=prediction_sidecars,
        questions="results/questions.parquet",
        ingest_report="results/questions.report.parquet",  # read beside the questions: the coverage block
        needles=["results/needle/needles.parquet"] if IS_NEEDLE else [],
        richness=richness_curves,
        videos="results/videos.parquet",
    output:
        html=report("results/report.html", caption="../workflow/report/report.rst", category="Report"),
        # The same page beside the question browser, so that copying results/report/ keeps every link.
        page="results/report/index.html",
        tables=report(directory("results/report/tables"), patterns=["{name}.csv"],
                      caption="../workflow/report/tables.rst", category="Tables"),
        # Named inside the tables folder so that a run without them fails (the run-health table, issue 24).
        run_health=multiext("results/report/tables/run_health", ".parquet", ".csv", ".md"),
        chance=multiext("results/report/tables/chance", ".parquet", ".csv", ".md"),
        stores=multiext("results/report/tables/stores", ".parquet", ".csv", ".md"),
        figures=report(directory("results/report/figures"), patterns=["{name}.png"],
                       caption="../workflow/report/figures.rst", category="Figures"),
        questions=report(directory("results/report/questions"), htmlindex="index.html",
                         caption="../workflow/report/questions.rst", category="Question browser"),
        config="results/report/config.yaml",
    params:
        config=stage_config("report"),
        code=stage_code("report"),
        needles=report_needle_args,
        richness=report_richness_args,
    log:
        "results/logs/report.log",
    benchmark:
        "results/benchmarks/report.tsv"
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/cpu.yaml"
    shell:
        "python -m senri report --config {params.config:q} --predictions {input.predictions:q}"
        " --questions {input.questions} {params.needles} {params.richness} --videos {input.videos} --out results"
        " > {log} 2>&1"

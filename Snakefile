# senri: long egocentric video question answering, as a Snakemake workflow.
# Stages live in rules/*.smk; helpers and the composed config in rules/common.smk.
# Run the demo: `snakemake -c2`. Override config: `snakemake -c2 --config overrides="method=[random] seed=3"`.

include: "rules/common.smk"
include: "rules/ingest.smk"
include: "rules/needle.smk"
include: "rules/anonymize.smk"
include: "rules/decode.smk"
include: "rules/track.smk"
include: "rules/memory.smk"
include: "rules/answer.smk"
include: "rules/serving.smk"
include: "rules/report.smk"
include: "rules/analysis.smk"


# Prediction files are targets themselves: a deleted one is recomputed (then the tables), not skipped as
# an intermediate whose downstream tables look up to date.
rule all:
    input:
        "results/videos.parquet",
        prediction_files,
        frame_stores,
        memory_files,
        richness_curves,
        "results/tables/main.md",
        "results/report.html",
    default_target: True

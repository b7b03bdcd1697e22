"""Analyses over finished runs (``senri analyze <name>``): each a pure module, its stage a rule of its own
(``rules/analysis.smk``), Parquet out under ``results/analysis/<name>/``."""

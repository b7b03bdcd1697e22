"""Benchmarks by name: each one module that reads its native files, says where its videos are, which memory
preset a video gets and how it is scored and tabulated (``dataset.benchmark``; ``senri`` by default).

Adding a benchmark is one module with a :class:`~senri.benchmarks.base.Benchmark` object, one line here and one
``config/dataset/<name>.yaml``. Stages below ingest read a question's ``benchmark`` column and ask this registry;
none of them names a benchmark.
"""

from __future__ import annotations

from typing import Any, Mapping

from senri.registry import Registry

BENCHMARKS = Registry("benchmark")
BENCHMARKS.register("senri", "senri.benchmarks.senri:SENRI")
BENCHMARKS.register("videomme", "senri.benchmarks.videomme:VIDEOMME")
BENCHMARKS.register("lvbench", "senri.benchmarks.lvbench:LVBENCH")
BENCHMARKS.register("mlvu", "senri.benchmarks.mlvu:MLVU")
BENCHMARKS.register("egomem", "senri.benchmarks.egomem:EGOMEM")


def benchmark_name(dataset: Mapping[str, Any]) -> str:
    """The benchmark a dataset config reads (``dataset.benchmark``; SENRI format when absent: demo, needle)."""
    return str(dataset.get("benchmark") or "senri")


def load_benchmark(dataset: Mapping[str, Any]):  # noqa: ANN201 (a Benchmark; imported lazily)
    return BENCHMARKS.load(benchmark_name(dataset))

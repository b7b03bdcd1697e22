"""ONNX Runtime sessions for the CPU stages (the anonymizer's face detector, the track's OCR): sized to the job's
cores and without spin-waiting.

ONNX Runtime's worker threads spin while they wait for the next operator's work by default. On a machine whose
cores are all busy (a cluster node shared by jobs, a laptop, two Snakemake jobs side by side) a spinning thread
holds a core that another thread needs: measured on 2 busy cores, CenterFace on 60 demo frames took 13.2 CPU s
with spinning and 6.8 without, RapidOCR on 10 frames 11.1 and 7.0; the outputs were identical (the same kernels
run, only the waiting differs). Its default thread count is every core of the machine, not the job's share
(``OMP_NUM_THREADS``, which the workflow sets to a rule's ``threads``, does not reach it): on a 64-core node a
2-thread track job would start 64 threads.
"""

from __future__ import annotations

import os
from typing import Any

#: ONNX Runtime's session setting for spin-waiting intra-op threads ("1", its default, or "0").
ALLOW_SPINNING = "session.intra_op.allow_spinning"


def job_threads() -> int:
    """The cores this job may use: ``OMP_NUM_THREADS`` where the workflow set it, else the CPU affinity."""
    declared = os.environ.get("OMP_NUM_THREADS", "").strip()
    if declared.isdigit() and int(declared) > 0:
        return int(declared)
    return len(os.sched_getaffinity(0))


def quiet_options(options: Any = None, threads: int | None = None) -> Any:  # noqa: ANN401 - SessionOptions
    """``options`` (a new ``SessionOptions`` if None) with ``threads`` intra-op threads (default
    :func:`job_threads`) that block instead of spinning while they wait."""
    import onnxruntime

    options = options if options is not None else onnxruntime.SessionOptions()
    options.intra_op_num_threads = int(threads or job_threads())
    options.add_session_config_entry(ALLOW_SPINNING, "0")
    return options


def spins(session: Any) -> bool:  # noqa: ANN401 - an onnxruntime.InferenceSession
    """Whether ``session``'s intra-op threads spin-wait (ONNX Runtime's default)."""
    options = session.get_session_options()
    try:
        return options.get_session_config_entry(ALLOW_SPINNING) != "0"
    except RuntimeError:  # the entry was never set: ONNX Runtime's default, spinning
        return True

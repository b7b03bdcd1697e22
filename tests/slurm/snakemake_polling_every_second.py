"""`python -m snakemake` for the test cluster, with the SLURM executor's status polls at most POLL_S apart.

snakemake-executor-plugin-slurm (2.8.0) waits `slurm-init-seconds-before-status-checks` after a check that saw a
job finish, and 10 s longer after each check that saw none, up to 180 s: on a real cluster, where jobs run for
hours, that spares the controller. The test cluster's jobs run for seconds, one after another along the DAG, so
each was noticed up to half its run time late (measured: a 40-s job seen 24 s after it ended, on a busy 2-core
machine), and the plugin has no setting for it. Everything else (submission, `squeue` states, failures, the job
logs) is the plugin's own; the shipped profile, and every run outside tests/test_slurm.py, keeps its back-off.
"""

from __future__ import annotations

import sys

from snakemake.cli import main
from snakemake_executor_plugin_slurm import Executor

POLL_S = 1  # the least `slurm-init-seconds-before-status-checks` takes (the test profile's value)


def _capped(executor: Executor, seconds: float) -> None:
    executor._next_seconds_between_status_checks = min(seconds, POLL_S)


Executor.next_seconds_between_status_checks = Executor.next_seconds_between_status_checks.setter(_capped)

if __name__ == "__main__":
    sys.exit(main())

"""Plan several configs of the workflow (``snakemake -n``) in one Python process, through Snakemake's API.

``python tests/dry_run.py WORKDIR '{"name": "overrides", ...}'`` plans each config in ``WORKDIR/<name>``, its
dry-run job list on stderr after a line ``=== <name>``; a config whose DAG does not build prints
``!!! <name> failed:`` and its traceback, and the exit status is 1. One process for all of them, because most of
a small dry run is start-up (importing Snakemake and senri): seven experiments planned one process each cost the
suite about twice as much (issue 53)."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    workdir, cases = Path(argv[0]), json.loads(argv[1])
    failed = 0
    for name, overrides in cases.items():
        print(f"=== {name}", file=sys.stderr, flush=True)
        (workdir / name).mkdir(parents=True, exist_ok=True)
        try:
            with SnakemakeApi(OutputSettings()) as api:
                workflow = api.workflow(resource_settings=ResourceSettings(cores=2),
                                        config_settings=ConfigSettings(config={"overrides": overrides}),
                                        snakefile=REPO / "Snakefile", workdir=workdir / name)
                workflow.dag().execute_workflow(executor="dryrun")
        except Exception:  # noqa: BLE001 - every config is planned; each failure is reported with its traceback
            failed += 1
            print(f"!!! {name} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

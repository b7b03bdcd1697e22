"""Plan several configs of the workflow (``snakemake -n``) in one Python process, through Snakemake's API.

``python tests/dry_run.py WORKDIR '{"name": "overrides", ...}' [--commands] [--shared]`` plans each config in
``WORKDIR/<name>`` (with ``--shared``, in ``WORKDIR`` itself: what each config would run again there), its dry-run
job list on stderr after a line ``=== <name>`` (with ``--commands``, each job's shell command too, as
``snakemake -n -p`` prints it); a config whose DAG does not build prints
``!!! <name> failed:`` and its traceback, and the exit status is 1. One process for all of them, because most of
a small dry run is start-up (importing Snakemake and senri): seven experiments planned one process each cost the
suite about twice as much (issue 53). Tests call :func:`plan`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def plan(workdir: Path, cases: dict[str, str], commands: bool = False, shared: bool = False) -> dict[str, str]:
    """Each config's dry-run output (or its failure, ``!!! <name> failed:`` and the traceback) by name, all planned
    in one subprocess (this script's folder, ``tests/``, first on its path: a test's own store module, e.g.
    ``fake_store``, imports); ``shared``: every config in ``workdir`` itself (a dry run writes nothing there)."""
    proc = subprocess.run([sys.executable, __file__, str(workdir), json.dumps(cases), *(["--commands"] * commands),
                           *(["--shared"] * shared)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    parts = re.split(r"^=== (\S+)$", proc.stderr, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


def main(argv: list[str]) -> int:
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    workdir, cases = Path(argv[0]), json.loads(argv[1])
    failed = 0
    for name, overrides in cases.items():
        print(f"=== {name}", file=sys.stderr, flush=True)
        where = workdir if "--shared" in argv[2:] else workdir / name
        where.mkdir(parents=True, exist_ok=True)
        try:
            with SnakemakeApi(OutputSettings(printshellcmds="--commands" in argv[2:])) as api:
                workflow = api.workflow(resource_settings=ResourceSettings(cores=2),
                                        config_settings=ConfigSettings(config={"overrides": overrides}),
                                        snakefile=REPO / "Snakefile", workdir=where)
                workflow.dag().execute_workflow(executor="dryrun")
        except Exception:  # noqa: BLE001 - every config is planned; each failure is reported with its traceback
            failed += 1
            print(f"!!! {name} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

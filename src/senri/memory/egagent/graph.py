"""EG-Agent's entity-graph table (E-F4, E-C8) and its SQL search (E-R4).

One row per (relationship × interval): ``day``, ``start_t`` / ``end_t`` (T8 ints), the interval's transcript,
the source and target entity (id and type: Person / Location / Object) and the relation (TALKS_TO /
INTERACTS_WITH / MENTIONS / USES), with the release's indexes. The agent's SQL writer (E6) returns a ladder of
queries from strict to relaxed; they run in order, a failing one is skipped, the search stops at the first
result with more than 3 rows and otherwise keeps the last successful result (possibly empty); no row cap and
no time filter are applied (E-R4).

The queries are a model's text run against the store, so they run on a read-only connection under an
authorizer that allows reading only: one statement, SELECT (and the functions and reads it needs) — a
statement that writes, attaches, changes a pragma or loads an extension is refused, never run.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from senri.memory.egagent.common import tf_value

NODE_TYPES = ("Person", "Location", "Object")
RELATION_TYPES = ("TALKS_TO", "INTERACTS_WITH", "MENTIONS", "USES")
TABLE = "entity_graph_table"
COLUMNS = ("id", "day", "start_t", "end_t", "transcript", "source_id", "source_type", "target_id", "target_type",
           "rel_type")
SCHEMA = f"""CREATE TABLE {TABLE} (
    id INTEGER PRIMARY KEY AUTOINCREMENT, day INTEGER, start_t INTEGER, end_t INTEGER, transcript TEXT,
    source_id TEXT, source_type TEXT, target_id TEXT, target_type TEXT, rel_type TEXT)"""
INDEXES = ("day", "start_t", "end_t", "day, start_t", "source_id", "target_id", "source_type", "target_type",
           "rel_type")
#: The ladder stops at the first result with more rows than this (E-R4).
ENOUGH_ROWS = 3


@dataclass(frozen=True)
class Relationship:
    """One row of the table: an interval of one relationship."""

    day: int
    start_t: int
    end_t: int
    transcript: str
    source_id: str
    source_type: str
    target_id: str
    target_type: str
    rel_type: str


def write_graph(rows: Iterable[Relationship], path: Path) -> int:
    """Write the table (E-F4: schema and indexes) to a new SQLite file; return its row count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.unlink(missing_ok=True)
    with sqlite3.connect(partial) as db:
        db.execute(SCHEMA)
        for n, columns in enumerate(INDEXES):
            db.execute(f"CREATE INDEX idx_{n} ON {TABLE} ({columns})")
        db.executemany(f"INSERT INTO {TABLE} ({', '.join(COLUMNS[1:])}) VALUES ({', '.join('?' * 9)})",
                       [(r.day, r.start_t, r.end_t, r.transcript, r.source_id, r.source_type, r.target_id,
                         r.target_type, r.rel_type) for r in rows])
        count = db.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
    db.close()
    partial.replace(path)
    return int(count)


class RefusedQuery(ValueError):
    """A query the search will not run (it would write, attach, or is more than one statement)."""


_READ_ONLY = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}


def _authorize(action: int, *_: object) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ONLY else sqlite3.SQLITE_DENY


def open_read_only(path: Path) -> sqlite3.Connection:
    """The table's file opened read-only, with the reading-only authorizer set."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no entity-graph table")
    db = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.set_authorizer(_authorize)
    return db


def execute(db: sqlite3.Connection, query: str) -> list[sqlite3.Row]:
    """One model-written query's rows as SQLite returned them (by position and by name); RefusedQuery for one
    that is not a single read, sqlite3's error for one that does not run."""
    text = str(query).strip().rstrip(";").strip()
    if not text:  # sqlite3 runs an empty statement and returns no row (the release's rung then keeps nothing)
        return []
    try:
        cursor = db.execute(text)
    except (sqlite3.Warning, sqlite3.ProgrammingError) as exc:  # more than one statement (3.11: Warning)
        raise RefusedQuery(f"not one SQL statement ({exc}): {query!r}") from None
    except sqlite3.DatabaseError as exc:
        if "not authorized" in str(exc) or "readonly" in str(exc):
            raise RefusedQuery(f"refused (reads only): {query!r}") from None
        raise
    return cursor.fetchall()


def run_query(db: sqlite3.Connection, query: str) -> list[dict]:
    """One model-written query's rows as dicts (see :func:`execute`)."""
    return [dict(row) for row in execute(db, query)]


def read_rows(path: Path, query: str, what: str) -> list[dict]:
    """One query's rows from a table file opened read-only and closed again; a table that does not read is a
    ValueError naming the file and ``what`` (the table)."""
    db = open_read_only(path)
    try:
        return run_query(db, query)
    except sqlite3.Error as exc:
        raise ValueError(f"{path}: table {what!r} unreadable ({exc})") from None
    finally:
        db.close()


@dataclass(frozen=True)
class LadderResult:
    """What an E-R4 search kept: the rows, which rung gave them (0-based; None: none ran), how many rungs ran,
    and the errors of those that failed or were refused."""

    rows: list[sqlite3.Row]
    rung: int | None
    tried: int
    errors: tuple[str, ...]


def run_ladder(db: sqlite3.Connection, queries: Sequence[str], enough: int = ENOUGH_ROWS) -> LadderResult:
    """E-R4: the queries in order, errors skipped; the first result with more than ``enough`` rows, else the
    last successful one (possibly empty). No row cap."""
    kept: list[sqlite3.Row] = []
    rung: int | None = None
    errors: list[str] = []
    tried = 0
    for n, query in enumerate(queries):
        tried += 1
        try:
            rows = execute(db, query)
        except (RefusedQuery, sqlite3.Error) as exc:
            errors.append(f"{n}: {type(exc).__name__}: {exc}")
            continue
        kept, rung = rows, n
        if len(rows) > enough:
            break
    return LadderResult(kept, rung, tried, tuple(errors))


#: How the kept rows are read for the agent: ``positional`` as the release does (``row[1]`` … ``row[9]``: a rung
#: that selected fewer columns fails the question, one that reordered them renders other columns in their
#: places), ``by_name`` by column name (a missing column renders "?", senri's option).
ROW_READINGS = ("positional", "by_name")


class UnrenderableRows(IndexError):
    """A kept row with fewer than the table's ten columns, read by position: the release's IndexError, which
    loses the question."""


def render_rows(rows: Sequence[Sequence[Any] | Mapping[str, Any]], reading: str = "positional") -> str:
    """The rows as the agent reads them (E-R4): "src (type) REL tgt (type) on day D between time … and … . "
    each, the transcript column never shown; "NONE" for no row. Times render as the release's ``tf`` renders
    what it is given (:func:`~senri.memory.egagent.common.tf_value`: a NULL end "No:ne:,")."""
    if reading not in ROW_READINGS:
        raise ValueError(f"row reading {reading!r}: one of {', '.join(ROW_READINGS)}")
    if not rows:
        return "NONE"
    parts = []
    for row in rows:
        if reading == "positional":
            values = list(row.values()) if isinstance(row, Mapping) else list(row)
            if len(values) < len(COLUMNS):
                raise UnrenderableRows(f"a kept row has {len(values)} columns, the rendering reads {len(COLUMNS)}")
            named = dict(zip(COLUMNS, values))
        else:
            named = dict(row) if isinstance(row, Mapping) else {k: row[k] for k in row.keys()}
        when = (f" on day {named['day']} between time {tf_value(named['start_t'])} and {tf_value(named['end_t'])}"
                if all(k in named for k in ("day", "start_t", "end_t")) else "")
        parts.append(f"{named.get('source_id', '?')} ({named.get('source_type', '?')}) {named.get('rel_type', '?')} "
                     f"{named.get('target_id', '?')} ({named.get('target_type', '?')}){when}. ")
    return "".join(parts)

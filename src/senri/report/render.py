"""One self-contained HTML page: every table and figure embedded (PNG as data URLs), no external files."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Sequence

import polars as pl

STYLE = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:12px}
th,td{border:1px solid #ccc;padding:3px 5px;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
tr.group td{background:#fafafa;font-weight:600;text-align:left}
.note{color:#555;font-size:13px} img{max-width:100%} code{background:#f5f5f5;padding:0 3px}
"""


def breakable(text: str) -> str:
    """Escaped text that may wrap after ``/`` and ``_``: run names (``memory_search/qwen25vl7b_vllm``) are
    single words to the browser, and a table's narrowest width is its widest unbreakable cell, so without
    these break points the paired tables grow past the page (issue 28). A browser breaks there only when the
    column must shrink."""
    return html.escape(text).replace("/", "/<wbr>").replace("_", "_<wbr>")


def table_html(df: pl.DataFrame, headers: dict[str, str] | None = None, group_by: str | None = None,
               decimals: int = 1) -> str:
    """An HTML table; with ``group_by``, a full-width header row opens each group (Table 2's approaches)."""
    headers = headers or {}
    columns = [c for c in df.columns if c != group_by]

    def cell(value: object) -> str:
        if value is None:
            return "–"
        if isinstance(value, float):
            return f"{value:.{decimals}f}"
        return breakable(str(value))

    out = ["<table><tr>" + "".join(f"<th>{breakable(headers.get(c, c))}</th>" for c in columns) + "</tr>"]
    current = object()
    for row in df.iter_rows(named=True):
        if group_by is not None and row[group_by] != current:
            current = row[group_by]
            out.append(f'<tr class="group"><td colspan="{len(columns)}">{breakable(str(current))}</td></tr>')
        out.append("<tr>" + "".join(f"<td>{cell(row[c])}</td>" for c in columns) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def figure_html(png: Path | None, caption: str, missing: str) -> str:
    if png is None:
        return f'<p class="note">{html.escape(caption)}: {html.escape(missing)}</p>'
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def page(title: str, sections: Sequence[tuple[str, str]], footer: str) -> str:
    body = "\n".join(f"<h2>{html.escape(heading)}</h2>\n{content}" for heading, content in sections)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n"
            f'<p class="note">{footer}</p></body></html>\n')

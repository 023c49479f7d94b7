"""LaTeX tables (booktabs) of the analysis and the claims report, ready to ``\\input`` in a paper.

Only the ``tabular`` environment is written (no ``table`` float, no caption):
a paper places and captions it, and the file needs nothing but
``\\usepackage{booktabs}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}  # fmt: skip


def escape(text: Any) -> str:
    """``text`` with LaTeX's special characters escaped (method names carry ``_``, cells carry ``%``)."""
    return "".join(_ESCAPES.get(ch, ch) for ch in str(text))


def cell_text(value: Any, fmt: str = "{:.1f}") -> str:
    """A table entry: numbers through ``fmt``, NaN/None as ``--``, anything else escaped."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.format(value)
    return escape(value)


def booktabs(header: Sequence[Any], rows: Sequence[Sequence[Any]], align: str | None = None,
             fmt: str = "{:.1f}", raw_columns: Sequence[int] = ()) -> str:  # fmt: skip
    """A booktabs ``tabular``: ``\\toprule`` header ``\\midrule`` rows ``\\bottomrule``.

    ``align`` defaults to ``l`` for the first column and ``r`` for the rest;
    entries of ``raw_columns`` are written as given (already LaTeX, e.g. a
    bold maximum).
    """
    ncol = len(header)
    align = align or ("l" + "r" * (ncol - 1))
    if len(align) != ncol:
        raise ValueError(f"align {align!r} has {len(align)} columns, the header {ncol}")
    lines = [f"\\begin{{tabular}}{{{align}}}", "\\toprule", " & ".join(escape(h) for h in header) + r" \\", "\\midrule"]
    for r in rows:
        if len(r) != ncol:
            raise ValueError(f"row {list(r)!r} has {len(r)} entries, the header {ncol}")
        lines.append(" & ".join(str(v) if i in raw_columns else cell_text(v, fmt) for i, v in enumerate(r)) + r" \\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def main_table_tex(main_table) -> str:
    """The main table (methods x cells, on-time success in %), the best method of each cell in bold."""
    cols = list(main_table.columns)
    best = {c: main_table[c].max() for c in cols}
    rows = []
    for method, r in main_table.iterrows():
        out = [escape(method)]
        for c in cols:
            v = r[c]
            text = cell_text(float(v)) if v == v else "--"
            out.append(f"\\textbf{{{text}}}" if v == v and v == best[c] else text)
        rows.append(out)
    return booktabs(["method", *cols], rows, raw_columns=range(len(cols) + 1))

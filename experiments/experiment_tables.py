"""Markdown cells and tables for the experiments' reports: numbers, milliseconds, ratios."""

from __future__ import annotations

import math
from typing import Any


def fnum(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, int) or float(x).is_integer() and abs(x) >= 1000:
        return f"{int(x):,}"
    return f"{x:,.{digits}f}"


def ms(us: Any, digits: int = 2) -> str:
    return "–" if us is None else fnum(float(us) / 1000, digits)


def ratio(a: Any, b: Any) -> float | None:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    return a / b if b else None


def fratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"


def table(columns: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        out.append("| " + " | ".join(fnum(c) if not isinstance(c, str) else c for c in row) + " |")
    return "\n".join(out)

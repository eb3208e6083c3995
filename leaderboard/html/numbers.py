"""Numbers on the page: one format per column, so decimals line up, and the raw value each numeric
cell sorts by."""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd


def missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def sort_key(x: Any) -> str:
    """The ``data-sort`` value of a numeric cell: the number as Python prints it, "" if missing."""
    return "" if missing(x) else repr(float(x))


def number_format(values: Iterable[Any], widths: Iterable[Any] = ()) -> Callable[[float], str]:
    """One format for every number of a column, so decimals line up: three significant digits
    of the median magnitude and two of the narrowest interval (``widths``), at most 6 decimals;
    scientific with 2 decimals when the largest magnitude is below 1e-3 or from 1e6 on."""
    mags = [abs(float(v)) for v in values if not missing(v) and float(v) != 0]
    if not mags:
        return lambda x: f"{x:.2f}"
    top = max(mags)
    if top < 1e-3 or top >= 1e6:
        return lambda x: f"{x:.2e}"
    places = 2 - math.floor(math.log10(statistics.median(mags)))
    spans = [float(w) for w in widths if not missing(w) and float(w) > 0]
    if spans:
        places = max(places, 1 - math.floor(math.log10(min(spans))))
    places = min(max(places, 0), 6)
    return lambda x: f"{x:.{places}f}"


def decimals(text: str) -> set[int]:
    """The decimal places of every number in ``text`` (digits after the point, before any
    exponent)."""
    return {len(m) for m in re.findall(r"\d\.(\d+)", text)}


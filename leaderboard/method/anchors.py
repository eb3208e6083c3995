"""Normalization on fixed anchors: clip((x - floor) / (ceiling - floor), 0, 1), on log(x) where a
metric declares a log scale. A record's own ``extra["anchors"]`` override the declared ones; where
neither gives a floor, the metric's informative rule may (chance level)."""
from __future__ import annotations

import fnmatch
import math

from ..loading.records import Record

def normalized(x: float, floor: float | None, ceiling: float | None, log_scale: bool,
               clip: bool = True) -> float:
    """(x - floor) / (ceiling - floor), on log(x) when ``log_scale``: 0 = the trivial predictor or
    chance, 1 = perfect; clipped to [0, 1] unless ``clip`` is false (below 0: worse than the
    floor). NaN without both anchors (or a non-positive value on a log scale)."""
    if floor is None or ceiling is None or math.isnan(x):
        return math.nan
    if log_scale:
        if min(x, floor, ceiling) <= 0:
            return math.nan
        x, floor, ceiling = math.log(x), math.log(floor), math.log(ceiling)
    if floor == ceiling:
        return math.nan
    z = (x - floor) / (ceiling - floor)
    return min(1.0, max(0.0, z)) if clip else z

def has_anchors(spec: dict, records: list[Record], metric: str) -> bool:
    """Whether ``metric`` can be normalized: a declared ceiling, and a floor declared or given by
    a record's own anchors."""
    return (spec["ceiling"] is not None
            and (spec["floor"] is not None
                 or any("floor" in r.anchors.get(metric, {}) for r in records)))

def record_normalized(value: float, spec: dict, record: Record, metric: str,
                      default_floor: float | None) -> float:
    """``value`` of ``record`` on its anchors, unclipped (below 0: worse than the floor);
    ``default_floor`` stands in where neither the declaration nor the record gives a floor."""
    anchor = {**spec, **record.anchors.get(metric, {})}
    if anchor["floor"] is None:
        anchor["floor"] = default_floor
    return normalized(value, anchor["floor"], anchor["ceiling"], spec["log_scale"], clip=False)

# (metric pattern, low, high): the values a metric can take, by what it counts (fnmatch on the
# metric name, first match wins); a declared ceiling (a perfect score) bounds its side as well.
RANGES: tuple[tuple[str, float | None, float | None], ...] = (
    ("zorro*", 0.0, 100.0),
    ("*accuracy*", 0.0, 1.0),
    ("*_acc", 0.0, 1.0),
    ("*_acc_norm", 0.0, 1.0),
    ("*error*", 0.0, 1.0),
    ("*weight*", 0.0, 1.0),
    ("*perplexity*", 1.0, None),
    ("*entropy*", 0.0, None),
    ("*mse*", 0.0, None),
    ("*bits_per_byte*", 0.0, None),
    ("*loss*", 0.0, None),
)


def bounds(metric: str, direction: str, ceiling: float | None) -> tuple[float, float]:
    """The interval [low, high] a value of ``metric`` can lie in (infinite where unbounded): its
    range by name, narrowed on the better side by a declared ceiling."""
    low, high = next(((lo, hi) for pattern, lo, hi in RANGES
                      if fnmatch.fnmatchcase(metric, pattern)), (None, None))
    low = -math.inf if low is None else low
    high = math.inf if high is None else high
    if ceiling is not None and math.isfinite(ceiling):
        if direction == "higher":
            high = min(high, ceiling)
        else:
            low = max(low, ceiling)
    return low, high

"""The colours every view shares: the tiers, one hue from dark (tier 1) to light, so that tiers
read in order on the page and in the plots alike."""
from __future__ import annotations

# Tier 1, 2, ...: a sequential green scale (ColorBrewer "Greens", dark to light); tiers past the
# last share its colour.
TIER_COLOURS = ("#00441b", "#1b7837", "#41ab5d", "#74c476", "#a1d99b", "#c7e9c0")
NO_TIER = "#bdbdbd"
# How much of a tier's colour a shaded page cell mixes into white.
PAGE_SHADE = (40, 34, 30, 28, 26, 24)


def tier_step(tier) -> int | None:
    """The palette step of a tier: the tier, the last step for every tier past it; None without
    a tier."""
    if tier is None or tier != tier or tier < 1:
        return None
    return min(int(tier), len(TIER_COLOURS))


def tier_class(tier) -> str | None:
    """The page's class of a cell shaded by its tier, ``tier-<step>``; None without a tier."""
    step = tier_step(tier)
    return None if step is None else f"tier-{step}"


def tier_colour(tier) -> str:
    """The colour of a tier (1 = best); grey without one."""
    step = tier_step(tier)
    return NO_TIER if step is None else TIER_COLOURS[step - 1]


def tier_css() -> str:
    """The page's tier shading: a cell of class ``tier-<step>`` gets its tier's colour mixed
    into white."""
    return "".join(f"td.tier-{n} {{ background: color-mix(in srgb, {colour} {share}%, #fff); }}\n"
                   for n, (colour, share) in enumerate(zip(TIER_COLOURS, PAGE_SHADE), start=1))

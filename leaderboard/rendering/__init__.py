"""Rendering a Board: the markdown README and LEADERBOARD.md, the PNG plots and the page, with one
module, :mod:`.text`, for how a value is written in all of them. Computes no statistic."""

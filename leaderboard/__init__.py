"""The leaderboard: records in, releases out. Never imports torch, scorers or tasks.

- ``records``:   load and validate every result record under a results directory.
- ``stats``:     t intervals and paired tests over seeds, Holm and BH, power, tiers, rank intervals.
- ``aggregate``: ``aggregate(loaded) -> Board``, the tidy frames every view is rendered from, by
  ``selection`` (which records count), ``rows`` (the rows of each task), ``table_stats`` (one
  metric's statistics), ``verdicts`` (the words against the baseline), ``anchors`` and
  ``overall`` (the overall score), ``grids`` and ``claims``; ``board`` declares the Board.
- ``markdown``, ``plots``: the release README / LEADERBOARD.md and the PNG plots.
- ``html``:      the release's ``index.html``, one module per tab.
- ``release``:   ``publish(results_dir, release)`` writes a release; ``load_release`` reads one.
- ``history``:   compare two releases; regressions beyond seed noise.
"""

"""The leaderboard: records in, releases out. Never imports torch, scorers, tasks or suite.

Four subpackages, one per kind of work, each importing only those listed after it (an
import-linter contract, tests/test_layering.py): a change to how a number is shown stays in
``rendering``, a change to how it is computed in ``method``, and neither touches how records are
read or releases written.

``publishing``  writes, reads, checks and compares releases (files on disk, over the other three)
  - ``release``:        ``publish(results_dir, release)`` writes a release; ``load_release``,
                        ``list_releases`` and ``read_results_text`` read one; ``rebuild``.
  - ``site``:           a release's ``index.html`` and ``scorers.json``, and its siblings' pages.
  - ``reproduction``:   does a republish of its records reproduce a committed release
                        (``publish --check``), and if not, what differs.
  - ``changes_since``:  which verdicts, tiers and claims changed since an earlier release.
  - ``regressions``:    which rows moved beyond seed noise since earlier nightlies.
``rendering``   shows a Board: text, tables, plots and the page, computing nothing new
  - ``text``:           how one value is written (numbers, p-values, intervals, marks), for the
                        markdown and the page alike.
  - ``notes``:          the lines under a table (why no verdict, what the overall rests on).
  - ``columns``:        every column's header, meaning and format; which rows a track shows.
  - ``markdown``:       the release README and LEADERBOARD.md; ``track_section``: a track's
                        matrix of scorers × headline metrics and per-metric tables;
                        ``markdown_layout``: tables no wider than a person reads, notes, prose.
  - ``summary``:        the release's answer in sentences and one compact table per profile.
  - ``plots``:          the PNG plots of a Board and of cost records; ``palette``: the tier
                        colours the plots and the page share.
  - ``tuning_section``, ``curves_section``: the README's tuning and learning-curve sections and
                        their plots; ``convergence_section``: level, speed and reliability of
                        the tasks trained to convergence, and the neighbouring-rate words.
  - ``html``:           the page, one module per tab (its own package map).
``method``      computes the Board from records (docs/statistics.md)
  - ``aggregate``:      ``aggregate(loaded) -> Board``, calling the modules below in turn.
  - ``board``:          the Board and its frames.
  - ``rows``:           the rows of each task; ``table_stats``: one metric's statistics, tiers
                        and ranks; ``stats``: the statistical tests and intervals.
  - ``resolution``:     each metric's practical size; ``informative``: whether a metric can tell
                        scorers apart; ``verdicts``: the words against the baseline.
  - ``anchors``, ``improvement``, ``overall``: the normalized score, the probability of
                        improvement and the overall.
  - ``grids``:          grids averaged over seeds; ``claims``: the paper's claims
                        (``claims.toml``), judged.
  - ``pairwise``:       two scorers compared directly (``scorebench compare``).
  - ``tuning``, ``curves``: what the tuning sweep found and chose, and the learning curves.
  - ``convergence``:    level, speed and reliability of the tasks trained to convergence;
                        ``neighbours``: whether a verdict holds at the rates next to the chosen.
``loading``     the record and which records count (``schema`` and ``choice``: the standard
                library only)
  - ``schema``:         the record: schema, statuses, tracks, canonical JSON, cell ids, the Cell.
  - ``records``:        load and validate every record under a results directory.
  - ``selection``:      superseded and duplicate records, profile labels.
  - ``choice``:         the tuning protocol's choice rule, shared with the sweep that runs it.

Data beside the code: ``records/`` (the committed records) and ``releases/`` (the committed
releases).
"""

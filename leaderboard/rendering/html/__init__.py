"""The leaderboard as a static web page: ``<release>/index.html`` beside each release.

The page is rendered from the release's ``results.json.gz`` (the canonical Board the README is
rendered from): the overall table, one tab per track (one table per profile with scorers as rows
and headline metrics as columns, secondary metrics and the per-metric statistics one click away),
the claims when results.json has them, failed cells, the plots grouped by track, the scorers'
metadata and a selector for the other releases. Every table has a legend and every header a
``title``; columns sort on click (numbers by their raw value, kept in ``data-sort``) and a box
filters scorers.

Which results.json fields the page reads, and how each is labelled, explained and formatted, is
declared once in :mod:`leaderboard.rendering.columns` (``FIELDS``: row and overall fields, and
``CLAIM_FIELDS``); a numeric field of a row that neither names is still shown, under its own name,
in the per-metric tables.
Numbers have a fixed number of decimals per column (:mod:`leaderboard.rendering.text`), so they
line up.

The page is self-contained: the template, stylesheet and script in ``static/`` beside this module
are inlined, plots are relative links to ``plots/*.png``, and nothing is fetched from the network.
Every string that comes from records or scorer metadata is HTML-escaped: ``markup.tag`` escapes
any child or attribute that is not ``markup.Markup``. The output depends only on the files of the
releases, so publishing twice writes the same bytes.

One module per part: :mod:`.page` puts the header and the tabs in the template; one module per
tab (:mod:`.overall`, :mod:`.tracks`, :mod:`.claims`, :mod:`.failures`, :mod:`.plots`,
:mod:`.scorers`, :mod:`.releases`) draws it from :class:`.context.PageData`, with the tables of
:mod:`.tables`, the numbers of :mod:`leaderboard.rendering.text` and the safe markup of
:mod:`.markup`. :mod:`leaderboard.publishing.site` writes the files.
"""

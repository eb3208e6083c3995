"""The Scorers tab: the metadata of every scorer of the release, as registered when it was
published."""
from __future__ import annotations

from .context import PageData
from .markup import Markup, code_text, concat, tag
from .tables import Column, legend, table, text_cell

SCORER_FIELDS = ("family", "kind", "normalization", "paper", "version", "aliases", "description")


def scorers_tab(page: PageData) -> Markup:
    """The Scorers tab: each scorer's registered metadata."""
    labels = sorted(page.scorer_name)
    titles = {"family": "Family of scoring functions.",
              "kind": "logits: maps scores to weights; module: its own attention layer.",
              "normalization": "What the weights of a row sum to (normalized: 1).",
              "paper": "Where the scorer is from.",
              "version": "Scorer version; records of an older version are superseded.",
              "aliases": "Other names the scorer is registered under.",
              "description": "The formula, from the scorer's docstring."}
    parts = [tag("h2", "Scorers"), legend(list(titles.items()),
                                          "Metadata as registered when the release was "
                                          "published (scorebench ls scorers).")]

    def text(label, key):
        info = page.scorer_info(label)
        if info is None:
            return "not registered at publish time" if key == "description" else ""
        value = info.get(key)
        if isinstance(value, (list, tuple)):
            return ", ".join(str(v) for v in value)
        return "" if value is None else str(value)

    def cell(key):
        if key == "description":
            return lambda r: tag("td", code_text(text(r["scorer"], key)), class_="desc")
        return text_cell(lambda r: text(r["scorer"], key))

    columns = [Column("scorer", text_cell(lambda r: r["scorer"], "scorer"),
                      title="Scorer name as in the tables.", css="scorer")] + [
        Column(key, cell(key), key == "version", titles[key]) for key in SCORER_FIELDS]
    parts.append(table(columns, [{"scorer": s} for s in labels], None,
                       lambda r: {"data_scorer": r["scorer"]})
                 if labels else tag("p", "No scorers in this release.", class_="empty"))
    return tag("section", concat(parts), id="scorers", class_="tab")

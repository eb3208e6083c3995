"use strict";
// Tabs (one section shown at a time, kept in the URL hash), sortable tables, the scorer filter
// and the release selector. Without JavaScript every section is shown and nothing else changes.
(() => {
  document.body.classList.add("js");

  const sections = Array.from(document.querySelectorAll("section.tab"));
  const tabLinks = Array.from(document.querySelectorAll("#tabs a"));
  const showTab = (id) => {
    if (!sections.some((s) => s.id === id)) id = sections[0].id;
    sections.forEach((s) => s.classList.toggle("active", s.id === id));
    tabLinks.forEach((a) => a.classList.toggle("active", a.getAttribute("href") === "#" + id));
  };
  window.addEventListener("hashchange", () => showTab(location.hash.slice(1)));
  showTab(location.hash.slice(1));

  // A cell sorts by its data-sort attribute when it has one (the raw number behind "mean [CI]"),
  // else by its text. Empty numeric keys (n/a, all failed) go last in either direction.
  const sortKey = (cell, numeric) => {
    const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    if (raw === "") return null;
    const x = Number(raw);
    return Number.isFinite(x) ? x : null;
  };
  const sortTable = (table, column, th) => {
    const direction = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    table.querySelectorAll("th").forEach((h) => h.setAttribute("aria-sort", "none"));
    th.setAttribute("aria-sort", direction);
    const numeric = th.dataset.type === "num";
    const sign = direction === "ascending" ? 1 : -1;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows, (row, index) => ({
      row, index, key: sortKey(row.cells[column], numeric),
    }));
    rows.sort((a, b) => {
      if (a.key === null || b.key === null) {
        if (a.key === b.key) return a.index - b.index;
        return a.key === null ? 1 : -1;
      }
      if (a.key < b.key) return -sign;
      if (a.key > b.key) return sign;
      return a.index - b.index;
    });
    rows.forEach(({ row }) => body.appendChild(row));
  };
  document.querySelectorAll("table.sortable").forEach((table) => {
    table.querySelectorAll("thead th").forEach((th, column) => {
      th.setAttribute("aria-sort", "none");
      th.querySelector("button").addEventListener("click", () => sortTable(table, column, th));
    });
  });

  const filter = document.getElementById("scorer-filter");
  const count = document.getElementById("filter-count");
  const scorerRows = Array.from(document.querySelectorAll("tr[data-scorer]"));
  const allScorers = new Set(scorerRows.map((row) => row.dataset.scorer));
  const applyFilter = () => {
    const query = filter.value.trim().toLowerCase();
    const shown = new Set();
    scorerRows.forEach((row) => {
      const keep = query === "" || row.dataset.scorer.toLowerCase().includes(query);
      row.hidden = !keep;
      if (keep) shown.add(row.dataset.scorer);
    });
    count.textContent = query === "" ? `${allScorers.size} scorers`
      : `${shown.size} of ${allScorers.size} scorers match`;
  };
  filter.addEventListener("input", applyFilter);
  applyFilter();

  const releases = document.getElementById("release-select");
  releases.addEventListener("change", () => { location.href = releases.value; });
})();

"use strict";
// Tabs (the shown section is the URL hash), sortable tables, the scorer filter (kept in the
// query, ?filter=), the release selector (keeps tab and filter; right after Back), links to the
// per-metric details, and plots opened full size. Without JavaScript every section is shown.
(() => {
  document.body.classList.add("js");

  const sections = Array.from(document.querySelectorAll("section.tab"));
  const tabLinks = Array.from(document.querySelectorAll("#tabs a"));
  // The hash names a section, or an element inside one (a per-metric <details>), opened.
  const showTarget = (hash) => {
    const target = hash ? document.getElementById(hash) : null;
    const section = target ? target.closest("section.tab") : null;
    const id = section ? section.id : sections[0].id;
    sections.forEach((s) => s.classList.toggle("active", s.id === id));
    tabLinks.forEach((a) => a.classList.toggle("active", a.getAttribute("href") === "#" + id));
    if (target && target.tagName === "DETAILS") {
      target.open = true;
      target.scrollIntoView({ block: "start" });
    }
  };
  window.addEventListener("hashchange", () => showTarget(location.hash.slice(1)));
  showTarget(location.hash.slice(1));

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
      th.setAttribute("aria-sort", th.dataset.defaultSort || "none");
      th.querySelector("button").addEventListener("click", () => sortTable(table, column, th));
    });
  });

  // On a phone the legends start folded, so that the tables are in view.
  if (window.matchMedia("(max-width: 600px)").matches) {
    document.querySelectorAll("details.legend").forEach((d) => { d.open = false; });
  }

  const filter = document.getElementById("scorer-filter");
  const count = document.getElementById("filter-count");
  const scorerRows = Array.from(document.querySelectorAll("tr[data-scorer]"));
  const allScorers = new Set(scorerRows.map((row) => row.dataset.scorer).filter((s) => s));
  const applyFilter = () => {
    const query = filter.value.trim().toLowerCase();
    const shown = new Set();
    scorerRows.forEach((row) => {
      const keep = query === "" || row.dataset.scorer.toLowerCase().includes(query);
      row.hidden = !keep;
      if (keep && row.dataset.scorer) shown.add(row.dataset.scorer);
    });
    count.textContent = query === "" ? `${allScorers.size} scorers`
      : `${shown.size} of ${allScorers.size} scorers match`;
  };
  const readFilter = () => {
    filter.value = new URLSearchParams(location.search).get("filter") || "";
    applyFilter();
  };
  filter.addEventListener("input", () => {
    applyFilter();
    const params = new URLSearchParams(location.search);
    if (filter.value) params.set("filter", filter.value); else params.delete("filter");
    const query = params.toString();
    history.replaceState(history.state, "",
      location.pathname + (query ? "?" + query : "") + location.hash);
  });
  readFilter();

  const releases = document.getElementById("release-select");
  const current = Array.from(releases.options).find((o) => o.defaultSelected);
  releases.addEventListener("change", () => {
    const query = filter.value ? "?filter=" + encodeURIComponent(filter.value) : "";
    location.href = releases.value + (releases.value.endsWith(".html") ? query + location.hash : "");
  });
  // Back/forward may restore this page from the cache with the choice made before leaving.
  window.addEventListener("pageshow", () => {
    if (current) releases.value = current.value;
    readFilter();
    showTarget(location.hash.slice(1));
  });

  // Per-metric "details" links: open the target even when the hash already names it.
  document.querySelectorAll("a.more").forEach((a) => {
    a.addEventListener("click", () => showTarget(a.getAttribute("href").slice(1)));
  });

  // A plot opens full size over the page; a click or Escape closes it.
  const viewer = document.createElement("div");
  viewer.id = "viewer";
  viewer.hidden = true;
  const big = document.createElement("img");
  const label = document.createElement("p");
  viewer.append(big, label);
  document.body.appendChild(viewer);
  const close = () => { viewer.hidden = true; big.removeAttribute("src"); };
  viewer.addEventListener("click", close);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") close(); });
  document.querySelectorAll("a.zoom").forEach((a) => {
    a.addEventListener("click", (e) => {
      e.preventDefault();
      big.src = a.getAttribute("href");
      big.alt = a.querySelector("img").alt;
      label.textContent = big.alt;
      viewer.hidden = false;
    });
  });
})();

// Top frames: the width metric summed per frame name, self (exclusive) and total
// (inclusive, a recursive name counted at its outermost frame only), over the whole profile
// (pruned frames too). Sortable; a row finds its frames in the flame graph.
"use strict";

P.table = {
  ROWS: 100,
  sortKey: "self",
  desc: true,

  init() {
    this.el = P.$("top-table");
    this.el.querySelector("thead").addEventListener("click", (ev) => {
      const th = ev.target.closest("th");
      if (!th) return;
      const key = th.dataset.key;
      if (key === this.sortKey) this.desc = !this.desc;
      else {
        this.sortKey = key;
        this.desc = key !== "name";
      }
      this.render();
    });
    this.el.querySelector("tbody").addEventListener("click", (ev) => {
      const tr = ev.target.closest("tr");
      if (tr) this.select(tr.dataset.name);
    });
    P.on((what, i) => {
      if (what === "view") this.compute();
      if (what === "view" || what === "focus") this.mark(i);
    });
    this.compute();
  },

  // Rows as html_tree.top_frames computed them over the whole tree, pruned frames too.
  compute() {
    const tb = P.tree().v.table;
    this.entries = tb.name.map((s, k) => ({
      s,
      frames: tb.frames[k],
      self: tb.self[k] || 0,
      total: tb.total[k] || 0,
      baseTotal: tb.base ? tb.base[k] || 0 : 0,
      widest: tb.node[k],
    }));
    this.render();
  },

  columns() {
    const t = P.tree();
    const cols = [
      ["name", "frame"],
      ["frames", "frames"],
      ["self", "self"],
      ["selfPct", "self %"],
      ["total", "total"],
      ["totalPct", "total %"],
    ];
    if (t.before) cols.push(["baseTotal", "base total"], ["delta", "Δ total"]);
    return cols;
  },

  value(e, key) {
    const W0 = P.tree().W[0] || 1; // ROOT's inclusive value is the whole profile's
    if (key === "name") return P.S[e.s];
    if (key === "selfPct") return e.self / W0;
    if (key === "totalPct") return e.total / W0;
    if (key === "delta") return e.total - e.baseTotal;
    return e[key];
  },

  render() {
    const t = P.tree();
    const cols = this.columns();
    const head = cols
      .map(([k, l]) => `<th data-key="${k}"${k === this.sortKey ? ` aria-sort="${this.desc ? "descending" : "ascending"}"` : ""}>${l}</th>`)
      .join("");
    this.el.querySelector("thead").innerHTML = `<tr>${head}</tr>`;
    const key = this.sortKey, sign = this.desc ? -1 : 1;
    const sorted = this.entries.slice().sort((a, b) => {
      const x = this.value(a, key), y = this.value(b, key);
      if (x < y) return -sign;
      if (x > y) return sign;
      return a.s - b.s;
    });
    const m = t.widthMetric;
    const rows = sorted.slice(0, this.ROWS).map((e) => {
      const cells = cols.map(([k]) => {
        const v = this.value(e, k);
        if (k === "name") return `<td class="name" title="${P.esc(v)}">${P.esc(v)}</td>`;
        if (k === "selfPct" || k === "totalPct") return `<td>${(v * 100).toFixed(2)}%</td>`;
        if (k === "frames") return `<td>${v.toLocaleString("en-US")}</td>`;
        return `<td>${P.fmtMetric(m, v)}</td>`;
      });
      return `<tr data-name="${P.esc(P.S[e.s])}" data-node="${e.widest}">${cells.join("")}</tr>`;
    });
    this.el.querySelector("tbody").innerHTML = rows.join("");
    P.$("table-metric").textContent = m;
    const tb = t.v.table;
    P.$("table-count").textContent = tb.names > this.entries.length
      ? ` The ${this.entries.length.toLocaleString("en-US")} largest of ${tb.names.toLocaleString("en-US")} names by self or total are listed.` : "";
    this.mark(P.flame.zoom);
  },

  // A row clicked: its frames highlighted in the flame graph (an exact-name search), the
  // graph zoomed to the widest of them when there is just one.
  select(name) {
    const t = P.tree();
    const esc = name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    const box = P.$("search");
    box.value = `/^${esc}$/`;
    const e = this.entries.find((x) => P.S[x.s] === name);
    if (e && e.frames === 1 && e.widest >= 0) P.flame.zoom = e.widest;
    else P.flame.zoom = 0;
    P.flame.search(box.value);
    P.emit("focus", P.flame.zoom);
    P.$("flame-section").scrollIntoView({ block: "start" });
    this.mark(P.flame.zoom, t);
  },

  mark(i) {
    const t = P.tree();
    if (i === undefined || i === null || i < 0 || i >= t.n) return;
    const name = t.label(i);
    for (const tr of this.el.querySelectorAll("tbody tr")) tr.classList.toggle("current", i > 0 && tr.dataset.name === name);
  },
};

// Several files (ranks): the per-file values of the width metric for the frame hovered or
// zoomed (one <g class="rbar"> per file), and the frames whose files differ most.
"use strict";

P.ranks = {
  init() {
    P.on((what, i) => {
      if (what === "view") this.render();
      if (what === "focus" || what === "hover") this.bars(i);
    });
    this.render();
  },

  render() {
    const t = P.tree();
    const rk = t.v.ranks;
    P.$("ranks-section").hidden = !rk;
    if (!rk) return;
    P.$("ranks-metric").textContent = rk.metric;
    this.bars(P.flame.zoom);
    // Imbalance = max / mean over files, for frames of at least 1% of the total.
    const n = rk.values.length, W0 = t.W[0] || 1;
    const rows = [];
    for (let i = 1; i < t.n; i++) {
      if (t.W[i] < 0.01 * W0) continue;
      let sum = 0, max = -Infinity, arg = 0;
      for (let r = 0; r < n; r++) {
        const x = rk.values[r][i] || 0;
        sum += x;
        if (x > max) [max, arg] = [x, r];
      }
      const mean = sum / n;
      if (mean > 0) rows.push([i, max / mean, arg, max - mean]);
    }
    rows.sort((a, b) => b[1] - a[1] || b[3] - a[3]);
    const table = P.$("imbalance-table");
    table.querySelector("thead").innerHTML = "<tr><th>frame</th><th>imbalance</th><th>slowest file</th><th>max − mean</th><th>share</th></tr>";
    table.querySelector("tbody").innerHTML = rows
      .slice(0, 20)
      .map(([i, imb, arg, excess]) =>
        `<tr data-node="${i}"><td class="name" title="${P.esc(t.path(i).map((k) => t.label(k)).join(" / "))}">${P.esc(t.label(i))}</td>` +
        `<td>${imb.toFixed(3)}</td><td>${P.esc(this.short(rk.labels[arg]))}</td><td>${P.fmtMetric(rk.metric, excess)}</td><td>${P.pct(t.W[i], W0)}</td></tr>`)
      .join("");
    table.querySelector("tbody").onclick = (ev) => {
      const tr = ev.target.closest("tr");
      if (tr) P.flame.zoomTo(+tr.dataset.node);
    };
  },

  short(path) {
    return String(path).split("/").pop();
  },

  bars(i) {
    const t = P.tree();
    const rk = t.v.ranks;
    if (!rk || i === undefined || i < 0 || i >= t.n) return;
    const vals = rk.values.map((col) => col[i] || 0);
    const max = Math.max(...vals, 0) || 1;
    const mean = vals.reduce((a, b) => a + b, 0) / vals.length;
    const BAR = vals.length > 32 ? 8 : 18, LABEL = 200, PLOT = 420;
    const svg = [`<svg class="bar-chart" xmlns="${P.svgNS}" width="${LABEL + PLOT + 160}" height="${vals.length * BAR + 34}">`];
    svg.push(`<text x="4" y="14" font-weight="600">${P.esc(t.label(i).slice(0, 90))}: imbalance ${mean ? (Math.max(...vals) / mean).toFixed(3) : "-"}</text>`);
    vals.forEach((v, r) => {
      const y = 22 + r * BAR;
      const w = (v / max) * PLOT;
      svg.push(`<g class="rbar" data-rank="${r}" data-value="${v}">` +
        (BAR > 10 ? `<text x="4" y="${y + 12}">${P.esc(this.short(rk.labels[r]))}</text>` : "") +
        `<rect x="${LABEL}" y="${y}" width="${w.toFixed(2)}" height="${BAR - 3}" fill="${v >= mean ? "#d0582a" : "#5b8fd0"}"><title>${P.esc(rk.labels[r])}</title></rect>` +
        `<text x="${LABEL + w + 6}" y="${y + BAR - 5}">${P.fmtMetric(rk.metric, v)}</text></g>`);
    });
    const mx = LABEL + (mean / max) * PLOT;
    svg.push(`<line x1="${mx}" x2="${mx}" y1="20" y2="${22 + vals.length * BAR}" stroke="#222" stroke-dasharray="3,3"/>`);
    svg.push("</svg>");
    P.$("rank-bars").innerHTML = svg.join("");
  },
};

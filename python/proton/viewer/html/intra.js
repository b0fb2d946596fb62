// Inside kernels. From a tree (instrumentation backend): each scope's cycles per warp as
// a bar chart per kernel. From a trace: a warp Gantt chart per kernel launch, one row per
// warp (sorted by SM and CTA), folding to one row per CTA or per SM that shows the share
// of its warps in each scope over time. The chart is a canvas drawing only the rows in
// view; the row labels are DOM elements (<div class="grow">), one per row.
"use strict";

P.intra = {
  init() {
    P.on((what) => what === "view" && this.renderBars());
    this.renderBars();
    if (P.data.gantt && P.data.gantt.launches.length) P.gantt.init(P.data.gantt);
    P.$("intra-section").hidden = !(P.tree().v.intra || (P.data.gantt && P.data.gantt.launches.length));
  },

  renderBars() {
    const el = P.$("intra-bars");
    const intra = P.tree().v.intra;
    if (!intra) {
      el.innerHTML = "";
      return;
    }
    const perWarp = /normalized/.test(intra.metric);
    const parts = [`<h3>Cycles per scope (${P.esc(intra.metric)}${perWarp ? ": cycles per warp, summed over launches" : ""})</h3>`];
    if (intra.note) parts.push(`<p class="hint">${P.esc(intra.note)}</p>`);
    const BAR = 18, LABEL = 260, PLOT = 440;
    for (const k of intra.kernels) {
      const rows = [{ name: k.name, level: -1, cycles: k.cycles, count: null, node: k.node }, ...k.scopes];
      const max = Math.max(1, ...rows.map((r) => r.cycles || 0));
      const colors = P.scopeColors([...new Set(k.scopes.map((r) => r.name))]);
      const h = rows.length * BAR + 8;
      const svg = [`<svg class="bar-chart" xmlns="${P.svgNS}" width="${LABEL + PLOT + 170}" height="${h}">`];
      rows.forEach((r, j) => {
        const y = j * BAR + 4;
        const w = ((r.cycles || 0) / max) * PLOT;
        const label = r.name.length > 34 ? r.name.slice(0, 33) + "…" : r.name;
        const fill = r.level < 0 ? "#c3cad6" : colors.get(r.name);
        svg.push(`<g class="ibar" data-i="${r.node}"><text x="${6 + Math.max(0, r.level) * 12}" y="${y + 12}"${r.level < 0 ? ' font-weight="600"' : ""}>${P.esc(label)}</text>` +
          `<rect x="${LABEL}" y="${y}" width="${w.toFixed(2)}" height="${BAR - 4}" fill="${fill}"><title>${P.esc(r.name)}</title></rect>` +
          `<text x="${LABEL + w + 6}" y="${y + 12}">${P.fmt(r.cycles)}${r.count ? ` (×${r.count.toLocaleString("en-US")})` : ""}</text></g>`);
      });
      svg.push("</svg>");
      parts.push(svg.join(""));
    }
    el.innerHTML = parts.join("");
    el.onclick = (ev) => {
      const g = ev.target.closest("g.ibar");
      if (g && +g.dataset.i >= 0) {
        P.flame.zoomTo(+g.dataset.i);
        P.$("flame-section").scrollIntoView({ block: "start" });
      }
    };
  },
};

P.gantt = {
  LABEL: 170,
  mode: "warp",

  init(g) {
    this.g = g;
    P.$("gantt-panel").hidden = false;
    const sel = P.$("gantt-launch");
    const per = {};
    for (const l of g.launches) per[l.kernel] = (per[l.kernel] || 0) + 1;
    sel.innerHTML = g.launches
      .map((l, k) => {
        const warps = l.warp.length;
        const label = `${l.kernel}${per[l.kernel] > 1 ? " #" + (l.launch + 1) : ""}: ${warps.toLocaleString("en-US")} warps, ${P.fmtNs(l.span)}`;
        return `<option value="${k}">${P.esc(label.length > 110 ? label.slice(0, 109) + "…" : label)}</option>`;
      })
      .join("");
    sel.addEventListener("change", () => this.select(+sel.value));
    P.$("gantt-mode").addEventListener("change", (ev) => {
      this.mode = ev.target.value;
      this.layoutRows();
    });
    P.$("gantt-reset").addEventListener("click", () => {
      this.t0 = 0;
      this.t1 = this.l.span;
      this.draw();
    });
    this.box = P.$("gantt");
    this.canvas = P.$("gantt-canvas");
    this.box.addEventListener("scroll", () => this.draw());
    this.canvas.addEventListener("mousemove", (ev) => this.hover(ev));
    this.canvas.addEventListener("mouseleave", () => P.tip.hide());
    this.canvas.addEventListener("mousedown", (ev) => (this.dragFrom = ev.offsetX));
    this.canvas.addEventListener("mouseup", (ev) => {
      const a = this.dragFrom, b = ev.offsetX;
      this.dragFrom = null;
      if (a === null || a === undefined || Math.abs(a - b) < 4) return;
      const [lo, hi] = [Math.min(a, b), Math.max(a, b)];
      const t0 = this.tAt(lo), t1 = this.tAt(hi);
      this.t0 = t0;
      this.t1 = t1;
      this.draw();
    });
    window.addEventListener("resize", () => this.draw());
    this.select(0);
  },

  select(k) {
    const l = (this.l = this.g.launches[k]);
    this.t0 = 0;
    this.t1 = Math.max(1, l.span);
    // Scopes of this launch, their colours and the legend.
    const scopes = [...new Set(l.scope)];
    this.colors = P.scopeColors(scopes, scopes.find((s) => P.S[s] === l.kernel));
    P.$("gantt-legend").innerHTML = scopes.map((s) => `<span><i style="background:${this.colors.get(s)}"></i>${P.esc(P.S[s])}</span>`).join("");
    this.occ = new Map();
    this.layoutRows();
  },

  // Rows of the current mode: [label, first warp row, end warp row) groups of warps.
  layoutRows() {
    const l = this.l;
    const n = l.warp.length;
    const groups = [];
    for (let r = 0; r < n; r++) {
      const key = this.mode === "warp" ? r : this.mode === "cta" ? l.sm[r] + "/" + l.cta[r] : l.sm[r];
      const last = groups[groups.length - 1];
      if (last && last.key === key) last.end = r + 1;
      else groups.push({ key, start: r, end: r + 1 });
    }
    this.groups = groups;
    this.rowH = this.mode === "warp" ? (groups.length > 600 ? 6 : 12) : groups.length > 600 ? 10 : 18;
    const labels = groups.map((gr, j) => {
      const r = gr.start;
      let text, first = false;
      if (this.mode === "warp") {
        first = r === 0 || l.cta[r] !== l.cta[r - 1] || l.sm[r] !== l.sm[r - 1];
        text = this.rowH >= 10 || first ? `SM${l.sm[r]} CTA${l.cta[r]} warp ${l.warp[r]}` : "";
      } else if (this.mode === "cta") {
        text = `SM${l.sm[r]} CTA${l.cta[r]} (${gr.end - gr.start} warps)`;
      } else {
        const ctas = new Set();
        for (let x = gr.start; x < gr.end; x++) ctas.add(l.cta[x]);
        text = `SM${l.sm[r]} (${ctas.size} CTA${ctas.size > 1 ? "s" : ""}, ${gr.end - gr.start} warps)`;
      }
      // Rows too thin for a line of text show one label per CTA, over the rows below it.
      const h = this.rowH >= 10 ? this.rowH : text ? 10 : this.rowH;
      return `<div class="grow${first ? " first" : ""}" data-row="${j}" style="top:${j * this.rowH}px;height:${h}px;line-height:${h}px">${P.esc(text)}</div>`;
    });
    P.$("gantt-labels").innerHTML = labels.join("");
    P.$("gantt-spacer").style.height = groups.length * this.rowH + "px";
    P.$("gantt-info").textContent =
      `${groups.length.toLocaleString("en-US")} rows` + (this.mode !== "warp" ? ` (${l.warp.length.toLocaleString("en-US")} warps)` : "");
    this.occ = new Map();
    this.draw();
  },

  plotWidth() {
    return Math.max(200, this.box.clientWidth - this.LABEL - 18);
  },
  tAt(x) {
    return this.t0 + (x / this.plotWidth()) * (this.t1 - this.t0);
  },

  draw() {
    const l = this.l;
    if (!l) return;
    const W = this.plotWidth(), H = Math.min(560, this.groups.length * this.rowH);
    this.box.style.height = H + 2 + "px";
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    c.width = W * dpr;
    c.height = Math.max(1, H) * dpr;
    c.style.width = W + "px";
    c.style.height = H + "px";
    c.style.top = this.box.scrollTop + "px";
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fafbfc";
    ctx.fillRect(0, 0, W, H);
    const first = Math.floor(this.box.scrollTop / this.rowH);
    const last = Math.min(this.groups.length, first + Math.ceil(H / this.rowH) + 1);
    const scale = W / (this.t1 - this.t0);
    for (let j = first; j < last; j++) {
      const y = j * this.rowH - this.box.scrollTop;
      const gr = this.groups[j];
      if (this.mode === "warp") this.drawWarp(ctx, gr.start, y, scale, W);
      else this.drawShare(ctx, j, gr, y, W);
      if (this.mode === "warp" && gr.start > 0 && l.cta[gr.start] !== l.cta[gr.start - 1]) {
        ctx.fillStyle = "#c5cad4";
        ctx.fillRect(0, y, W, 1);
      }
    }
    this.drawAxis(W);
  },

  drawWarp(ctx, r, y, scale, W) {
    const l = this.l, h = this.rowH - (this.rowH > 8 ? 2 : 1);
    for (let s = l.offsets[r]; s < l.offsets[r + 1]; s++) {
      const a = (l.start[s] - this.t0) * scale, w = Math.max(1, l.dur[s] * scale);
      if (a > W || a + w < 0) continue;
      const inset = Math.min(l.depth[s] * 2, h / 2 - 1);
      ctx.fillStyle = this.colors.get(l.scope[s]);
      ctx.fillRect(a, y + inset, w, Math.max(1, h - 2 * inset));
    }
  },

  // Per pixel column: the share of the group's warp-time in each innermost scope.
  share(j, gr, W) {
    const key = j + ":" + this.t0 + ":" + this.t1 + ":" + W;
    let occ = this.occ.get(key);
    if (occ) return occ;
    const l = this.l, scopes = [...this.colors.keys()];
    const index = new Map(scopes.map((s, k) => [s, k]));
    occ = new Float32Array(scopes.length * W);
    const bucket = (this.t1 - this.t0) / W;
    const add = (k, a, b, sign) => {
      a = Math.max(a, this.t0);
      b = Math.min(b, this.t1);
      for (let x = Math.floor((a - this.t0) / bucket); x < W && x * bucket + this.t0 < b; x++) {
        const lo = Math.max(a, this.t0 + x * bucket), hi = Math.min(b, this.t0 + (x + 1) * bucket);
        if (hi > lo) occ[k * W + x] += (sign * (hi - lo)) / bucket;
      }
    };
    for (let r = gr.start; r < gr.end; r++) {
      const open = [];
      for (let s = l.offsets[r]; s < l.offsets[r + 1]; s++) {
        while (open.length && l.depth[open[open.length - 1]] >= l.depth[s]) open.pop();
        const a = l.start[s], b = a + l.dur[s];
        add(index.get(l.scope[s]), a, b, 1);
        if (open.length) add(index.get(l.scope[open[open.length - 1]]), a, b, -1); // inner wins
        open.push(s);
      }
    }
    // A share of the most warps the group ran at once (an SM runs its CTAs in waves).
    const warps = this.concurrency(gr);
    for (let k = 0; k < occ.length; k++) occ[k] /= warps;
    this.occ.set(key, occ);
    return occ;
  },

  // The most warps of the group with a slice open at one time.
  concurrency(gr) {
    const l = this.l, edges = [];
    for (let r = gr.start; r < gr.end; r++) {
      let a = Infinity, b = -Infinity;
      for (let s = l.offsets[r]; s < l.offsets[r + 1]; s++) {
        a = Math.min(a, l.start[s]);
        b = Math.max(b, l.start[s] + l.dur[s]);
      }
      if (a < b) edges.push([a, 1], [b, -1]);
    }
    edges.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let open = 0, most = 1;
    for (const [, d] of edges) most = Math.max(most, (open += d));
    return most;
  },

  drawShare(ctx, j, gr, y, W) {
    const occ = this.share(j, gr, W);
    const scopes = [...this.colors.keys()];
    const h = this.rowH - 2;
    for (let x = 0; x < W; x++) {
      let top = y + 1 + h;
      for (let k = 0; k < scopes.length; k++) {
        const f = occ[k * W + x];
        if (f <= 0.001) continue;
        const bh = Math.min(1, f) * h;
        ctx.fillStyle = this.colors.get(scopes[k]);
        ctx.fillRect(x, top - bh, 1, bh);
        top -= bh;
      }
    }
  },

  drawAxis(W) {
    const c = P.$("gantt-axis").firstElementChild;
    const dpr = window.devicePixelRatio || 1;
    c.width = W * dpr;
    c.height = 22 * dpr;
    c.style.width = W + "px";
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, 22);
    ctx.fillStyle = "#555";
    ctx.font = "10px sans-serif";
    const span = this.t1 - this.t0;
    const step = 10 ** Math.floor(Math.log10(span / 6));
    const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 8) || step * 10;
    for (let t = Math.ceil(this.t0 / nice) * nice; t <= this.t1; t += nice) {
      const x = ((t - this.t0) / span) * W;
      ctx.fillRect(x, 14, 1, 8);
      ctx.fillText(P.fmtNs(t), Math.min(x + 2, W - 50), 11);
    }
  },

  hover(ev) {
    const l = this.l;
    const j = Math.floor((ev.offsetY + this.box.scrollTop) / this.rowH);
    const gr = this.groups[j];
    if (!gr) return P.tip.hide();
    const t = this.tAt(ev.offsetX);
    const head = `SM${l.sm[gr.start]} CTA${l.cta[gr.start]}` + (this.mode === "warp" ? ` warp ${l.warp[gr.start]}` : "");
    if (this.mode === "warp") {
      const rows = [];
      for (let s = l.offsets[gr.start]; s < l.offsets[gr.start + 1]; s++) {
        if (l.start[s] <= t && t <= l.start[s] + l.dur[s])
          rows.push([P.S[l.scope[s]], P.fmtNs(l.dur[s]), `${P.fmt(l.cycles[s])} cycles, from ${P.fmtNs(l.start[s])}`]);
      }
      P.tip.show(`<div class="tname">${P.esc(head)} at ${P.fmtNs(t)}</div>` + (rows.length ? P.rows(rows) : "idle"), ev);
      return;
    }
    const occ = this.share(j, gr, this.plotWidth());
    const x = Math.min(this.plotWidth() - 1, Math.max(0, ev.offsetX | 0));
    const scopes = [...this.colors.keys()];
    const rows = scopes
      .map((s, k) => [P.S[s], (occ[k * this.plotWidth() + x] * 100).toFixed(1) + "% of the warps it runs at once"])
      .filter((r) => parseFloat(r[1]) > 0);
    P.tip.show(`<div class="tname">${P.esc(this.mode === "sm" ? "SM" + l.sm[gr.start] : head)} at ${P.fmtNs(t)}</div>` + (rows.length ? P.rows(rows) : "idle"), ev);
  },
};

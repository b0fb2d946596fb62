// Flame graph (icicle): ROOT on top, children below their parent, widths in proportion to
// the width metric. Drawn as SVG, one <g class="f" data-i=node> per frame wider than
// MIN_PX; the zoomed frame spans the whole width and its ancestors are drawn above it.
"use strict";

P.flame = {
  ROW: 18,
  MIN_PX: 0.35,
  zoom: 0,
  matched: null,
  colorMode: "name",
  width: 0,
  drawn: [],

  init() {
    this.el = P.$("flame");
    this.el.addEventListener("mousemove", (ev) => this.hover(ev));
    this.el.addEventListener("mouseleave", () => P.tip.hide());
    this.el.addEventListener("click", (ev) => {
      const g = ev.target.closest("g.f");
      if (g) this.zoomTo(+g.dataset.i);
    });
    P.$("reset-zoom").addEventListener("click", () => this.zoomTo(0));
    let timer = 0;
    P.$("search").addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.search(P.$("search").value), 120);
    });
    const modes = [["name", "by name"]];
    const t = P.tree();
    if (t.v.diff) modes.unshift(["diff", "by change from base (red: more, blue: less)"]);
    if (t.v.ranks) modes.push(["imbalance", "by rank imbalance"]);
    if (t.v.columns.length > 1) modes.push(["column", "by " + t.v.columns[1].title]);
    const sel = P.$("color-mode");
    sel.innerHTML = modes.map(([k, l]) => `<option value="${k}">${P.esc(l)}</option>`).join("");
    this.colorMode = modes[0][0];
    sel.addEventListener("change", () => {
      this.colorMode = sel.value;
      this.render();
    });
    window.addEventListener("resize", () => this.render());
    P.$("width-metric").textContent = t.widthMetric || "(no metric)";
  },

  // Colour of node i under the current mode.
  color(t, i) {
    if (this.colorMode === "diff" && t.before) {
      // Relative change of the frame itself: +-50% and beyond are the full colours.
      const a = t.W[i], b = t.before[i], m = Math.max(a, b);
      return P.divergent(m ? ((a - b) / m) * 2 : 0);
    }
    if (this.colorMode === "imbalance" && t.v.ranks) {
      const col = t.v.columns[t.v.columns.length - 1].values;
      const x = col[i];
      return x === null ? "#eee" : P.divergent(Math.min(1, (x - 1) / 1));
    }
    if (this.colorMode === "column" && t.v.columns[1]) {
      const col = t.v.columns[1].values;
      const x = col[i];
      return x === null ? "#eee" : P.divergent(this.colScale ? x / this.colScale : 0);
    }
    return P.nameColor(t.label(i), t.kind[i]);
  },

  // [[node, x, width, row]] of the frames to draw for the zoomed node.
  layout(t, width) {
    const out = [];
    const z = this.zoom;
    const anc = t.path(z);
    for (let k = 0; k < anc.length - 1; k++) out.push([anc[k], 0, width, k, true]);
    if (!(t.W[z] > 0)) {
      out.push([z, 0, width, anc.length - 1, false]);
      return out;
    }
    const stack = [[z, 0, width, anc.length - 1]];
    const W = t.W;
    while (stack.length) {
      const [i, x, w, row] = stack.pop();
      out.push([i, x, w, row, false]);
      const kids = t.kids(i);
      if (!kids.length) continue;
      let sum = 0;
      for (const c of kids) sum += W[c];
      const scale = w / Math.max(W[i], sum);
      let cx = x;
      for (const c of kids) {
        const cw = W[c] * scale;
        if (cw < this.MIN_PX) break; // widest first: the rest are narrower
        stack.push([c, cx, cw, row + 1]);
        cx += cw;
      }
    }
    return out;
  },

  render() {
    const t = P.tree();
    const width = Math.max(320, this.el.clientWidth || 1200);
    this.width = width;
    if (this.colorMode === "column" && t.v.columns[1]) {
      let m = 0;
      for (const x of t.v.columns[1].values) if (x !== null) m = Math.max(m, Math.abs(x));
      this.colScale = m;
    }
    const frames = this.layout(t, width);
    this.drawn = frames;
    const R = this.ROW;
    let rows = 0;
    const parts = [];
    for (const [i, x, w, row, anc] of frames) {
      rows = Math.max(rows, row + 1);
      const name = t.label(i);
      const cls = "f" + (anc ? " anc" : "") + (this.matched && this.matched[i] ? " match" : "");
      let text = "";
      const chars = Math.floor((w - 6) / 6.7);
      if (chars >= 3) {
        const shown = name.length > chars ? name.slice(0, chars - 1) + "…" : name;
        text = `<text x="${(x + 3).toFixed(2)}" y="${row * R + 12.5}">${P.esc(shown)}</text>`;
      }
      parts.push(
        `<g class="${cls}" data-i="${i}" data-name="${P.esc(name)}"><rect x="${x}" y="${row * R}" ` +
          `width="${w}" height="${R - 1}" fill="${this.color(t, i)}"></rect>${text}</g>`,
      );
    }
    this.el.innerHTML =
      `<svg xmlns="${P.svgNS}" width="${width}" height="${rows * R}" ` +
      `viewBox="0 0 ${width} ${rows * R}">${parts.join("")}</svg>`;
    this.breadcrumb(t);
  },

  breadcrumb(t) {
    const el = P.$("breadcrumb");
    el.innerHTML = t
      .path(this.zoom)
      .map((i) => `<a data-i="${i}" title="${P.esc(t.label(i))}">${P.esc(this.short(t.label(i)))}</a>`)
      .join('<span class="sep">›</span>');
    el.onclick = (ev) => {
      const a = ev.target.closest("a");
      if (a) this.zoomTo(+a.dataset.i);
    };
  },

  short(name) {
    return name.length > 48 ? name.slice(0, 46) + "…" : name;
  },

  zoomTo(i) {
    this.zoom = i;
    this.render();
    P.emit("focus", i);
  },

  // Text matches as a case-insensitive substring; /text/ is a regular expression.
  search(q) {
    const t = P.tree();
    const info = P.$("search-info");
    if (!q) {
      this.matched = null;
      info.textContent = "";
      this.render();
      return;
    }
    let test;
    const re = /^\/(.+)\/([a-z]*)$/.exec(q);
    try {
      if (re) {
        const r = new RegExp(re[1], re[2]);
        test = (s) => r.test(s);
      } else {
        const lower = q.toLowerCase();
        test = (s) => s.toLowerCase().includes(lower);
      }
    } catch (e) {
      info.textContent = "invalid regular expression";
      return;
    }
    const byString = new Map();
    const m = new Uint8Array(t.n);
    let count = 0;
    for (let i = 0; i < t.n; i++) {
      const s = t.name[i];
      let hit = byString.get(s);
      if (hit === undefined) byString.set(s, (hit = test(P.S[s])));
      if (hit) {
        m[i] = 1;
        count++;
      }
    }
    this.matched = m;
    const share = this.matchedShare(t, 0);
    const inZoom = this.matchedShare(t, this.zoom);
    let text = `${count.toLocaleString("en-US")} frames match: ${P.pct(share, t.W[0])} of the total`;
    if (!count && t.pruned.size) text += " (frames may be pruned from the graph: see the notes above)";
    if (this.zoom) text += `, ${P.pct(inZoom, t.W[this.zoom])} of the zoomed frame`;
    info.textContent = text;
    info.dataset.share = t.W[0] ? share / t.W[0] : 0;
    this.render();
  },

  // Width of the matched frames under (and including) node z, each counted once: a match
  // inside another match adds nothing.
  matchedShare(t, z) {
    for (let a = t.parent[z]; a >= 0; a = t.parent[a]) if (this.matched[a]) return t.W[z];
    let sum = 0;
    for (let i = z; i < t.end[z]; ) {
      if (this.matched[i]) {
        sum += t.W[i];
        i = t.end[i];
      } else i++;
    }
    return sum;
  },

  hover(ev) {
    const g = ev.target.closest("g.f");
    if (!g) {
      P.tip.hide();
      return;
    }
    const i = +g.dataset.i;
    P.tip.show(this.describe(P.tree(), i), ev);
    P.emit("hover", i);
  },

  // Every metric of node i: the width metric, the -m columns, each raw metric inclusive and
  // own, the derived ones, per-rank values, the difference to the base.
  describe(t, i) {
    const v = t.v;
    const W = t.W;
    const p = t.parent[i];
    const out = [`<div class="tname">${P.esc(t.label(i))}</div>`];
    const rows = [
      [t.widthMetric + " (width)", P.fmtMetric(t.widthMetric, W[i]),
        `${P.pct(W[i], W[0])} of total` + (p >= 0 ? `, ${P.pct(W[i], W[p])} of parent` : "")],
      ["self", P.fmtMetric(t.widthMetric, t.self(i)), P.pct(t.self(i), W[0])],
    ];
    for (const c of v.columns) rows.push([c.title, P.fmtColumn(c.values[i], c.float)]);
    for (const r of t.raw) {
      if (r.hidden) continue;
      if (r.exclusive) rows.push([r.name, P.fmtMetric(r.name, r.values[i]), "own"]);
      else rows.push([r.name, P.fmtMetric(r.name, r.values[i]), "self " + P.fmtMetric(r.name, t.own(r, i))]);
      if (r.before) {
        const b = r.before[i] === null ? 0 : r.before[i];
        const a = Number.isNaN(r.values[i]) ? 0 : r.values[i];
        rows.push(["  base", P.fmtMetric(r.name, b), "Δ " + P.fmtMetric(r.name, a - b) + (b ? ` (${((a / b - 1) * 100).toFixed(1)}%)` : "")]);
      }
    }
    // As the text view prints them: a rate or average is a float, a time scaled up an int.
    for (const rc of v.derived) rows.push([rc.title, P.fmtColumn(t.derived(rc, i), rc.op !== "scaled" || rc.exponent < 0)]);
    if (v.ranks) {
      const vals = v.ranks.values.map((col) => col[i] || 0);
      const mean = vals.reduce((a, b) => a + b, 0) / vals.length;
      const max = Math.max(...vals);
      rows.push(["ranks", vals.slice(0, 8).map((x) => P.fmtMetric(v.ranks.metric, x)).join(", ") + (vals.length > 8 ? ", …" : ""),
        mean ? `imbalance ${(max / mean).toFixed(3)}` : ""]);
    }
    const pruned = t.pruned.get(i);
    if (pruned) rows.push(["pruned", `${pruned.toLocaleString("en-US")} frames below`, "counted in self"]);
    out.push(P.rows(rows));
    return out.join("");
  },
};

// Proton HTML report: shared model and helpers. Written for Proton (no third-party code);
// the files of this folder are concatenated in html_report.JS_FILES order into one script.
"use strict";

const P = {};
P.data = JSON.parse(document.getElementById("proton-data").textContent);
P.S = P.data.strings;

// ------------------------------------------------------------------ formatting
P.esc = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// As the text view prints a value: integers whole, else 3 decimals or scientific notation.
P.fmt = (v) => {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a === 0 || (a >= 1e-3 && a < 1e9)) return v.toFixed(3);
  return v.toExponential(3);
};

P.fmtNs = (ns) => {
  if (ns === null || ns === undefined) return "-";
  const a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(3) + " µs";
  return (Number.isInteger(ns) ? ns : ns.toFixed(1)) + " ns";
};

// A -m column's value exactly as the text view prints it (render.format_value).
P.fmtColumn = (v, isFloat) => {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  if (!isFloat) return String(v);
  const a = Math.abs(v);
  if (a === 0 || (a >= 1e-3 && a < 1e9)) return v.toFixed(3);
  return v.toExponential(3).replace(/e([+-])(\d)$/, "e$10$2");
};

P.pct = (part, whole) => (whole ? ((part / whole) * 100).toFixed(2) + "%" : "-");

// A raw metric's value with its unit where the name says it (`time (ns)`).
P.fmtMetric = (name, v) => {
  if (v === null || v === undefined) return "-";
  if (/\(ns\)$/.test(name)) return P.fmtNs(v);
  return P.fmt(v);
};

P.si = (v, unit) => {
  if (!v) return "0 " + unit;
  const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""]];
  for (const [f, p] of prefixes) if (Math.abs(v) >= f) return (v / f).toPrecision(3) + " " + p + unit;
  return v.toPrecision(3) + " " + unit;
};

// ------------------------------------------------------------------ colours
P.hash = (s) => {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
};
// Kinds (html_tree.py): 0 scope, 1 kernel, 2 Python frame, 3 folded library frames.
P.kindHue = [[18, 40], [190, 40], [42, 22], [95, 35]];
P.nameColor = (name, kind) => {
  const h = P.hash(name);
  const [base, span] = P.kindHue[kind] || P.kindHue[0];
  const hue = base + (h % span);
  const light = 55 + ((h >>> 8) % 15);
  return `hsl(${hue},${kind === 3 ? 35 : 75}%,${light}%)`;
};
// Distinct colours for scopes inside a kernel, in order of first appearance.
P.palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#edc948", "#76b7b2",
  "#ff9da7", "#9c755f", "#2f4b7c", "#a0cbe8", "#8cd17d", "#d37295", "#86bcb6"];
P.scopeColors = (names, outer) => {
  const out = new Map();
  let k = 0;
  for (const s of names) out.set(s, s === outer ? "#9aa8bf" : P.palette[k++ % P.palette.length]);
  return out;
};
// -1..1 -> blue .. white .. red (differential flame graph, imbalance).
P.divergent = (t) => {
  const x = Math.max(-1, Math.min(1, t || 0));
  const l = 96 - Math.abs(x) * 46;
  return x >= 0 ? `hsl(0,80%,${l}%)` : `hsl(220,80%,${l}%)`;
};

// ------------------------------------------------------------------ DOM helpers
P.$ = (id) => document.getElementById(id);
P.svgNS = "http://www.w3.org/2000/svg";
P.tip = {
  el: null,
  show(html, ev) {
    const t = this.el || (this.el = P.$("tooltip"));
    t.innerHTML = html;
    t.style.display = "block";
    const w = t.offsetWidth, h = t.offsetHeight;
    let x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - w - 14);
    if (y + h > window.innerHeight - 4) y = Math.max(4, ev.clientY - h - 14);
    t.style.left = x + "px";
    t.style.top = y + "px";
  },
  hide() {
    if (this.el) this.el.style.display = "none";
  },
};
P.rows = (pairs) =>
  "<table>" + pairs.map(([k, v, sub]) =>
    `<tr><th>${P.esc(k)}</th><td>${v}</td>${sub !== undefined ? `<td class="sub">${sub}</td>` : ""}</tr>`).join("") + "</table>";

// ------------------------------------------------------------------ the tree of one view
// Nodes are in pre-order: node 0 is ROOT, node i's subtree is [i, end[i]).
P.Tree = class {
  constructor(v) {
    this.v = v;
    const n = (this.n = v.depth.length);
    const depth = (this.depth = Int32Array.from(v.depth));
    const parent = (this.parent = new Int32Array(n).fill(-1));
    const end = (this.end = new Int32Array(n));
    const stack = [];
    for (let i = 0; i < n; i++) {
      const d = depth[i];
      stack.length = d;
      if (d > 0) parent[i] = stack[d - 1];
      stack.push(i);
      end[i] = i + 1;
    }
    for (let i = n - 1; i > 0; i--) if (end[i] > end[parent[i]]) end[parent[i]] = end[i];
    this.name = Int32Array.from(v.name);
    this.kind = Uint8Array.from(v.kind);
    this.raw = v.raw.map((r) => ({ ...r, values: Float64Array.from(r.values, (x) => (x === null ? NaN : x)) }));
    this.rawByName = {};
    for (const r of this.raw) this.rawByName[r.name] = r;
    const w = v.width.raw !== undefined ? v.raw[v.width.raw].values : v.width.values;
    this.W = Float64Array.from(w, (x) => (x === null || !(x > 0) ? 0 : x));
    this.widthMetric = v.width.metric;
    this.pruned = new Map();
    for (let k = 0; k < v.pruned.length; k += 2) this.pruned.set(v.pruned[k], v.pruned[k + 1]);
    this._kids = new Map();
    if (v.diff) this.before = Float64Array.from(v.diff.before, (x) => (x === null ? 0 : x));
  }
  label(i) {
    return P.S[this.name[i]];
  }
  // Children, widest first (cached).
  kids(i) {
    let k = this._kids.get(i);
    if (k) return k;
    k = [];
    for (let c = i + 1; c < this.end[i]; c = this.end[c]) k.push(c);
    const W = this.W;
    k.sort((a, b) => W[b] - W[a] || a - b);
    this._kids.set(i, k);
    return k;
  }
  self(i) {
    let s = this.W[i];
    for (let c = i + 1; c < this.end[i]; c = this.end[c]) s -= this.W[c];
    return Math.max(0, s);
  }
  path(i) {
    const out = [];
    for (; i >= 0; i = this.parent[i]) out.push(i);
    return out.reverse();
  }
  // A raw metric's own value at i: inclusive minus the kept children's (pruned frames
  // count as own); exclusive metrics are stored as own values.
  own(r, i, values) {
    values = values || r.values;
    if (r.exclusive) return values[i];
    let s = values[i];
    for (let c = i + 1; c < this.end[i]; c = this.end[c]) s -= values[c] || 0;
    return s;
  }
  // derive.evaluate's recipes, at one node, on the raw inclusive values.
  derived(rc, i) {
    const val = (name) => (this.rawByName[name] ? this.rawByName[name].values[i] : NaN);
    const scaled = (v, e) => (e >= 0 ? v * 10 ** e : v / 10 ** -e);
    if (rc.op === "scaled") return scaled(val(rc.source), rc.exponent);
    if (rc.op === "average" || rc.op === "timed_average") {
      const den = rc.op === "timed_average" && this.rawByName.launches ? val("launches") : val(rc.other);
      return den ? scaled(val(rc.source), rc.exponent) / den : null;
    }
    if (rc.op === "rate") {
      const seconds = scaled(val(rc.other), rc.exponent);
      return seconds ? val(rc.source) / seconds / rc.divisor : null;
    }
    return val(rc.source);
  }
};

P.views = P.data.views.map((v) => new P.Tree(v));
P.view = 0;
P.tree = () => P.views[P.view];
P.listeners = [];
// Something other panels follow: "view" (tree switched), "focus" (node hovered or zoomed).
P.on = (f) => P.listeners.push(f);
P.emit = (what, arg) => P.listeners.forEach((f) => f(what, arg));

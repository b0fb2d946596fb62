// Roofline: log-log chart of each kernel's arithmetic intensity (FLOP/byte) against its
// achieved FLOP/s, under the device's memory roof (bandwidth x intensity) and compute roofs
// (one per FLOP width). One <circle class="pt" data-i=node> per kernel.
"use strict";

P.roofline = {
  W: 760,
  H: 440,
  M: { l: 70, r: 150, t: 16, b: 46 },
  widthColor: { 0: "#555", 8: "#d0582a", 16: "#2a7fd0", 32: "#3a9a3a", 64: "#8a4bc8" },

  init() {
    this.el = P.$("roofline");
    P.on((what) => what === "view" && this.render());
    this.render();
  },

  render() {
    const rl = P.tree().v.roofline;
    P.$("roofline-section").hidden = !rl;
    if (!rl) return;
    const { W, H, M } = this;
    const n = rl.ai.length;
    const widths = [...new Set(rl.width)].sort((a, b) => a - b);
    let xs = rl.ai.filter((x) => x > 0), ys = rl.perf.filter((y) => y > 0);
    const roofs = [];
    for (const d of rl.devices) {
      for (const r of d.roofs) if (widths.includes(r.width) || (widths.includes(0) && r.width === 16)) roofs.push([d, r]);
      if (d.bandwidth) for (const [, r] of roofs) xs.push(r.peak / d.bandwidth);
    }
    for (const [, r] of roofs) ys.push(r.peak);
    const lo = (a) => 10 ** Math.floor(Math.log10(Math.min(...a)) - 0.3);
    const hi = (a) => 10 ** Math.ceil(Math.log10(Math.max(...a)) + 0.3);
    const x0 = lo(xs), x1 = hi(xs), y0 = lo(ys), y1 = hi(ys);
    const px = (x) => M.l + ((Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * (W - M.l - M.r);
    const py = (y) => H - M.b - ((Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0))) * (H - M.t - M.b);
    const parts = [];
    // Grid and axes, a line per decade.
    parts.push('<g class="grid">');
    for (let e = Math.log10(x0); e <= Math.log10(x1) + 1e-9; e++) parts.push(`<line x1="${px(10 ** e)}" x2="${px(10 ** e)}" y1="${M.t}" y2="${H - M.b}"/>`);
    for (let e = Math.log10(y0); e <= Math.log10(y1) + 1e-9; e++) parts.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${py(10 ** e)}" y2="${py(10 ** e)}"/>`);
    parts.push("</g>");
    parts.push(`<g class="axis"><path d="M${M.l},${M.t}V${H - M.b}H${W - M.r}" fill="none"/></g>`);
    for (let e = Math.log10(x0); e <= Math.log10(x1) + 1e-9; e++)
      parts.push(`<text x="${px(10 ** e)}" y="${H - M.b + 15}" text-anchor="middle">${P.si(10 ** e, "").trim()}</text>`);
    for (let e = Math.log10(y0); e <= Math.log10(y1) + 1e-9; e++)
      parts.push(`<text x="${M.l - 6}" y="${py(10 ** e) + 4}" text-anchor="end">${P.si(10 ** e, "")}</text>`);
    parts.push(`<text x="${(M.l + W - M.r) / 2}" y="${H - 8}" text-anchor="middle">arithmetic intensity (FLOP / byte)</text>`);
    parts.push(`<text transform="translate(14,${(M.t + H - M.b) / 2}) rotate(-90)" text-anchor="middle">FLOP/s</text>`);
    // Roofs: the memory slope up to the ridge, then each width's compute peak.
    for (const d of rl.devices) {
      if (!d.bandwidth) continue;
      const top = roofs.filter(([dd]) => dd === d).reduce((m, [, r]) => Math.max(m, r.peak), 0) || y1;
      const ridge = top / d.bandwidth;
      parts.push(`<path class="roof" stroke="#444" d="M${px(x0)},${py(Math.max(y0, d.bandwidth * x0))}L${px(Math.min(x1, ridge))},${py(Math.min(top, d.bandwidth * x1))}"/>`);
      // The bandwidth, written along the slope a decade left of the ridge.
      const lx = Math.max(x0, ridge / 30), angle = -Math.atan2(py(d.bandwidth * lx) - py(d.bandwidth * lx * 10), px(lx * 10) - px(lx)) * 180 / Math.PI;
      parts.push(`<text transform="translate(${px(lx)},${py(d.bandwidth * lx) - 6}) rotate(${angle.toFixed(1)})">${P.esc(P.si(d.bandwidth, "B/s"))}</text>`);
    }
    for (const [d, r] of roofs) {
      const start = d.bandwidth ? Math.max(x0, r.peak / d.bandwidth) : x0;
      parts.push(`<path class="roof" stroke="${this.widthColor[r.width] || "#444"}" d="M${px(start)},${py(r.peak)}H${px(x1)}"/>`);
      parts.push(`<text x="${W - M.r + 4}" y="${py(r.peak) + 4}">fp${r.width} ${P.esc(P.si(r.peak, "FLOP/s"))}</text>`);
    }
    // Kernels, the largest drawn first so that small ones stay on top.
    const total = rl.total_time || rl.time.reduce((a, b) => a + b, 0);
    const order = [...Array(n).keys()].sort((a, b) => rl.time[b] - rl.time[a]);
    for (const k of order) {
      if (!(rl.ai[k] > 0 && rl.perf[k] > 0)) continue;
      const r = 3 + 16 * Math.sqrt(total ? rl.time[k] / total : 0);
      parts.push(`<circle class="pt" data-k="${k}" data-i="${rl.node[k]}" cx="${px(rl.ai[k])}" cy="${py(rl.perf[k])}" r="${r.toFixed(2)}" fill="${this.widthColor[rl.width[k]] || "#555"}"/>`);
    }
    this.el.innerHTML = `<svg xmlns="${P.svgNS}" width="${W}" height="${H}">${parts.join("")}</svg>`;
    const svg = this.el.firstChild;
    svg.addEventListener("mousemove", (ev) => {
      const c = ev.target.closest("circle.pt");
      if (c) P.tip.show(this.describe(rl, +c.dataset.k), ev);
      else P.tip.hide();
    });
    svg.addEventListener("mouseleave", () => P.tip.hide());
    svg.addEventListener("click", (ev) => {
      const c = ev.target.closest("circle.pt");
      if (!c) return;
      P.flame.zoomTo(+c.dataset.i);
      P.$("flame-section").scrollIntoView({ block: "start" });
    });
    const notes = rl.devices.filter((d) => d.note).map((d) => d.note);
    if (rl.note) notes.push(rl.note);
    P.$("roofline-notes").textContent = notes.join(" ");
  },

  describe(rl, k) {
    const d = rl.devices[rl.device[k]];
    const roof = d.roofs.find((r) => r.width === (rl.width[k] || 16));
    let bound = null;
    if (roof && d.bandwidth) bound = Math.min(roof.peak, d.bandwidth * rl.ai[k]);
    return `<div class="tname">${P.esc(rl.name[k])}</div>` +
      P.rows([
        ["time", P.fmtNs(rl.time[k] * 1e9), P.pct(rl.time[k], rl.total_time) + " of kernel time"],
        ["intensity", rl.ai[k].toPrecision(4) + " FLOP/B"],
        ["achieved", P.si(rl.perf[k], "FLOP/s")],
        ["bandwidth", P.si(rl.perf[k] / rl.ai[k], "B/s")],
        ["of roof", bound ? ((rl.perf[k] / bound) * 100).toFixed(1) + "%" : "-", bound ? P.si(bound, "FLOP/s") + " attainable" : ""],
        ["device", P.esc(d.label || d.type + " " + d.id)],
      ]);
  },
};

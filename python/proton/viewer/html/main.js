// Page setup: header, notes (pruning is always stated), the folded/every-frame toggle, and
// the panels. window.protonReport.ready is the time (ms since navigation) the page was
// drawn, for tests and the benchmark.
"use strict";

P.header = () => {
  const m = P.data.meta;
  P.$("title").textContent = m.title;
  const bits = [];
  bits.push(`${m.base ? "files" : m.sources.length > 1 ? "files" : "file"}: ${m.sources.map(P.esc).join(", ")}`);
  if (m.base) bits.push(`base: ${P.esc(m.base)}`);
  if (m.merge) bits.push(`merged by ${P.esc(m.merge)}`);
  bits.push(`metrics: ${P.esc(m.metrics.join(", ") || "-")}`);
  if (m.profile_command) bits.push(`profiled: <code>${P.esc(m.profile_command)}</code>`);
  bits.push(`Proton ${P.esc(m.version)}, ${P.esc(m.created)}`);
  P.$("meta").innerHTML = bits.join(" · ");
  const notes = [];
  const t = P.tree();
  for (const v of P.data.views) for (const n of v.notes) notes.push((P.data.views.length > 1 ? v.label + ": " : "") + n);
  if (P.data.gantt) notes.push(...P.data.gantt.notes);
  const stats = Object.entries(m.stats || {});
  if (stats.length) notes.push("Profile stats (something was dropped or unmatched): " + stats.map(([k, v]) => `${k} ${v}`).join(", "));
  P.$("notes").innerHTML = notes.map((n) => `<li>${P.esc(n)}</li>`).join("");
  const nav = [["flame-section", "Flame graph"], ["table-section", "Top frames"]];
  if (P.data.views.some((v) => v.ranks)) nav.push(["ranks-section", "Ranks"]);
  if (P.data.views.some((v) => v.roofline)) nav.push(["roofline-section", "Roofline"]);
  if (P.data.views.some((v) => v.intra) || P.data.gantt) nav.push(["intra-section", "Inside kernels"]);
  P.$("nav").innerHTML = nav.map(([id, l]) => `<a href="#${id}">${l}</a>`).join("");
  return t;
};

P.start = () => {
  P.header();
  if (P.views.length > 1) {
    const toggle = P.$("frames-toggle");
    toggle.hidden = false;
    toggle.lastChild.textContent = " " + P.data.views[0].label;
    P.$("frames-fold").addEventListener("change", (ev) => {
      P.view = ev.target.checked ? 0 : 1;
      P.flame.zoom = 0;
      P.flame.matched = null;
      P.emit("view");
      const q = P.$("search").value;
      if (q) P.flame.search(q);
      else P.flame.render();
    });
  }
  P.flame.init();
  P.flame.render();
  P.table.init();
  P.ranks.init();
  P.roofline.init();
  P.intra.init();
  window.protonReport = { ready: performance.now(), P };
};

P.start();

"""proton-viewer --html: reports of the stored profiles (tests/golden/html_*, written by
tests/golden/html_goldens.py) opened in headless Chromium and driven over the DevTools
protocol (proton.viewer.html_browser): what the page shows is asserted from its DOM.

The five stored profiles: html_cpu.hatchet (a CPU-only run: scopes and their CPU times),
html_triton.hatchet (triton.profiler's shape), html_kernels.hatchet (python context, kernels
with flops and bytes, an instrumented kernel's cycles), html_intra.chrome_trace (warp
slices) and html_ranks.rank0/1.hatchet (also compared with --diff-profile).

Chromium is Debian's `chromium` package (.ci/run installs it). Without it the browser tests
skip, except under CI=true, where they fail.
"""

import json
import os
import re
from pathlib import Path

import pytest
from proton.viewer import frames as frame_modes
from proton.viewer import html_trace
from proton.viewer.html_browser import Browser, distinct_colors, find_chromium
from proton.viewer.html_report import build_data, write_html
from proton.viewer.main import prepare, run
from proton.viewer.model import Profile

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CPU = str(GOLDEN / "html_cpu.hatchet")
TRITON = str(GOLDEN / "html_triton.hatchet")
KERNELS = str(GOLDEN / "html_kernels.hatchet")
TRACE = str(GOLDEN / "html_intra.chrome_trace")
TRACE_V1 = str(GOLDEN / "html_intra_v1.chrome_trace")
RANK0 = str(GOLDEN / "html_ranks.rank0.hatchet")
RANK1 = str(GOLDEN / "html_ranks.rank1.hatchet")
SITE = "/opt/venv/lib/python3.11/site-packages/"

REPORTS = {
    "cpu": [CPU],
    "triton": [TRITON],
    "kernels": ["-m", "time/us,tflop16/s", KERNELS],
    "intra": [TRACE],
    "ranks": [RANK0, RANK1],
    "diff": ["--diff-profile", RANK0, RANK1],
}


@pytest.fixture(scope="module")
def browser():
    binary = find_chromium()
    if binary is None:
        message = "headless Chromium is needed (apt-get install chromium, or set PROTON_CHROMIUM)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must run these tests")
        pytest.skip(message)
    with Browser(binary) as b:
        yield b


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Each stored profile's report, written by proton-viewer --html (in this process)."""
    out = tmp_path_factory.mktemp("html_reports")
    paths = {}
    for name, argv in REPORTS.items():
        path = out / f"{name}.html"
        assert run(["--html", str(path), *argv]) == 0
        paths[name] = path
    return paths


@pytest.fixture
def open_report(browser, reports):
    pages = []

    def opener(name, **kwargs):
        page = browser.open(reports[name].as_uri(), **kwargs)
        pages.append(page)
        return page

    yield opener
    for page in pages:
        assert page.console_errors() == []
        page.close()


def drawn(page):
    """path -> (x, width, row, is an ancestor of the zoomed frame, is a search match) of
    every frame of the flame graph, and the graph's width."""
    rows = page.evaluate(
        """[...document.querySelectorAll('#flame g.f')].map((g) => {
          const r = g.querySelector('rect'), t = protonReport.P.tree();
          return [t.path(+g.dataset.i).map((k) => t.label(k)).join(' > '), g.dataset.name,
                  +r.getAttribute('x'), +r.getAttribute('width'), +r.getAttribute('y') / 18,
                  g.classList.contains('anc'), g.classList.contains('match')]; })"""
    )
    width = page.evaluate("+document.querySelector('#flame svg').getAttribute('width')")
    out = {}
    for path, name, x, w, row, anc, match in rows:
        assert path.split(" > ")[-1] == name
        out[path] = (x, w, row, anc, match)
    return out, width


def inclusive_by_path(profile, metric):
    values = profile.inclusive(metric)
    paths = {" > ".join(profile.path(i)): values[i] for i in range(len(profile))}
    assert len(paths) == len(profile)  # no two siblings of one name
    return paths


def nested_by_path(profile, metric):
    """Widths of a metric readers do not sum (cpu_time): a node's own value, else the sum of
    its children's."""
    own = profile.exclusive(metric)
    width = list(own)
    for i in range(len(profile) - 1, 0, -1):
        if not own[i]:
            width[i] = sum(width[c] for c in profile.children(i))
    width[0] = width[0] or sum(width[c] for c in profile.children(0))
    return {" > ".join(profile.path(i)): width[i] for i in range(len(profile))}


def assert_widths(page, expected, zoom="ROOT"):
    """The frames drawn are those of `expected` (path -> value) with a width, each as wide
    as its value's share of the zoomed frame's."""
    frames, width = drawn(page)
    total = expected[zoom]
    shown = {p for p, v in expected.items() if v / total * width >= 0.35}
    shown |= {p for p in expected if zoom.startswith(p)}  # ancestors span the whole width
    assert set(frames) == shown
    for path, (_, w, _, anc, _) in frames.items():
        want = width if anc or path == zoom else expected[path] / total * width
        assert w == pytest.approx(want, rel=1e-9, abs=1e-9), path


def tooltip(page, selector, index=0):
    page.hover(selector, index)
    return page.evaluate("document.getElementById('tooltip').innerText")


# ---------------------------------------------------------------------- flame graph
def test_kernel_tree_frames_have_the_widths_of_their_time(open_report):
    page = open_report("kernels")
    folded = frame_modes.fold(prepare(KERNELS))
    expected = inclusive_by_path(folded, "time (ns)")
    assert "ROOT > train.py:40@main > train.py:22@step > torch/nn/modules/module.py:1779@" in (
        "".join(expected)
    )
    assert_widths(page, expected)
    frames, width = drawn(page)
    gemm = [p for p in frames if p.endswith("sm90_xmma_gemm_bf16")][0]
    assert frames[gemm][1] == pytest.approx(4_000_000 / 8_300_000 * width)
    assert frames[gemm][2] == 4  # ROOT, main, step, folded torch frames, the kernel


def test_search_highlights_the_matching_frames_and_gives_their_share(open_report):
    page = open_report("kernels")
    page.type("#search", "GEMM")
    page.wait_for("document.querySelectorAll('#flame g.f.match').length === 2")
    frames, _ = drawn(page)
    matched = sorted(p.split(" > ")[-1] for p, f in frames.items() if f[4])
    assert matched == ["sm90_gemm_fp8", "sm90_xmma_gemm_bf16"]
    info = page.evaluate("document.getElementById('search-info').textContent")
    assert info.startswith("2 frames match: 60.24% of the total")  # (4 + 1) / 8.3 ms
    share = page.evaluate("+document.getElementById('search-info').dataset.share")
    assert share == pytest.approx(5 / 8.3)
    # A match inside a match counts once; a regular expression works too.
    page.type("#search", "/^(train|sm90)/")  # main, step, save and the two kernels
    page.wait_for("document.getElementById('search-info').textContent.startsWith('5 frames')")
    assert page.evaluate("+document.getElementById('search-info').dataset.share") == 1


def test_click_zooms_into_a_frame_and_the_breadcrumb_zooms_back_out(open_report):
    page = open_report("kernels")
    page.click('#flame g.f[data-name="model.py:31@attention"]')
    page.wait_for("protonReport.P.flame.zoom > 0")
    crumbs = page.evaluate("[...document.querySelectorAll('#breadcrumb a')].map(a => a.title)")
    assert crumbs == [
        "ROOT",
        "train.py:40@main",
        "train.py:22@step",
        "torch/nn/modules/module.py:1779@_wrapped_call_impl (+1)",
        "model.py:31@attention",
    ]
    expected = inclusive_by_path(frame_modes.fold(prepare(KERNELS)), "time (ns)")
    zoom = " > ".join(crumbs)
    # Only the zoomed frame's ancestors and subtree are drawn, the subtree to its scale.
    assert_widths(
        page, {p: v for p, v in expected.items() if p.startswith(zoom) or zoom.startswith(p)}, zoom
    )
    frames, width = drawn(page)
    assert frames[zoom + " > softmax_kernel"][1] == pytest.approx(0.6 * width)
    assert all(frames[p][3] for p in frames if zoom.startswith(p) and p != zoom)
    page.click("#breadcrumb a", 1)  # train.py:40@main
    page.wait_for("document.querySelectorAll('#breadcrumb a').length === 2")
    page.click("#breadcrumb a", 0)  # ROOT
    page.wait_for("protonReport.P.flame.zoom === 0")
    assert_widths(page, expected)


def test_hover_shows_every_metric_inclusive_own_and_derived(open_report):
    page = open_report("kernels")
    text = tooltip(page, '#flame g.f[data-name="sm90_xmma_gemm_bf16"]')
    lines = {line.split("\t")[0]: line.split("\t")[1:] for line in text.splitlines()}
    assert lines["time (ns) (width)"][0] == "4.000 ms"
    assert lines["time/us"] == ["4000.000"]
    assert lines["tflop16/s"] == ["800.000"]  # 3.2e12 FLOP in 4 ms
    assert lines["flops16"][0] == "3,200,000,000,000"
    assert lines["bytes"][0] == "2,000,000,000"
    assert lines["count"][0] == "8"
    assert lines["avg_time/us"] == ["500.000"]
    assert lines["gbyte/s"] == ["500.000"]
    text = tooltip(page, '#flame g.f[data-name="train.py:22@step"]')
    lines = {line.split("\t")[0]: line.split("\t")[1:] for line in text.splitlines()}
    assert lines["time (ns)"] == ["8.000 ms", "self 0 ns"]
    assert lines["flops16"][0] == "4,400,000,000,000"  # inclusive: both fp16 kernels


def test_library_frames_fold_and_the_toggle_shows_every_frame(open_report):
    page = open_report("kernels")
    names = lambda: {p.split(" > ")[-1] for p in drawn(page)[0]}  # noqa: E731
    assert any(n.endswith("module.py:1779@_wrapped_call_impl (+2)") for n in names())
    page.click("#frames-fold")
    page.wait_for("protonReport.P.view === 1")
    full = names()
    assert any(SITE + "torch/nn/modules/linear.py:125@forward" in n for n in full)
    expected = inclusive_by_path(prepare(KERNELS), "time (ns)")
    assert_widths(page, expected)
    page.click("#frames-fold")
    page.wait_for("protonReport.P.view === 0")


# ---------------------------------------------------------------------- table
def test_top_frames_table_sorts_and_finds_frames_in_the_flame_graph(open_report):
    page = open_report("kernels")
    first_column = "[...document.querySelectorAll('#top-table tbody tr')].map(r => r.dataset.name)"
    rows = page.evaluate(first_column)
    assert rows[:3] == ["sm90_xmma_gemm_bf16", "matmul_kernel", "sm90_gemm_fp8"]  # by self
    page.click('#top-table th[data-key="total"]')
    assert page.evaluate(first_column)[:2] == ["train.py:40@main", "train.py:22@step"]
    assert page.evaluate("document.querySelector('#top-table th[aria-sort]').dataset.key") == (
        "total"
    )
    page.click('#top-table th[data-key="total"]')  # again: ascending
    order = page.evaluate(
        "[...document.querySelectorAll('#top-table tbody tr td:nth-child(5)')].map(td => td.textContent)"
    )
    assert order[0] == "0 ns" and order[-1] == "8.300 ms"
    page.click('#top-table tbody tr[data-name="softmax_kernel"]')
    page.wait_for("document.querySelectorAll('#flame g.f.match').length === 1")
    assert page.evaluate("document.getElementById('search').value") == "/^softmax_kernel$/"
    frames, width = drawn(page)
    zoomed = [p for p, f in frames.items() if not f[3] and f[1] == width]
    assert [p.split(" > ")[-1] for p in zoomed] == ["softmax_kernel"]


# ---------------------------------------------------------------------- roofline
def test_roofline_has_one_point_per_kernel_with_flops_and_bytes(open_report):
    page = open_report("kernels")
    points = page.evaluate(
        """[...document.querySelectorAll('#roofline circle.pt')].map(c =>
          [protonReport.P.tree().label(+c.dataset.i), +c.getAttribute('r')])"""
    )
    radius = dict(points)
    assert len(points) == len(radius) == 5  # copy_kernel has no flops
    assert set(radius) == {
        "sm90_xmma_gemm_bf16",
        "sm90_gemm_fp8",
        "softmax_kernel",
        "layer_norm_kernel",
        "matmul_kernel",
    }
    assert radius["sm90_xmma_gemm_bf16"] > radius["matmul_kernel"] > radius["layer_norm_kernel"]
    roofs = page.evaluate(
        "[...document.querySelectorAll('#roofline text')].map(t => t.textContent)"
    )
    assert "3.35 TB/s" in roofs  # 2 x 5120 bits x 2.619 GHz from the device table
    assert any(t.startswith("fp16 988 TFLOP/s") for t in roofs)
    text = tooltip(page, "#roofline circle.pt", 0)
    assert "of roof" in text and "FLOP/B" in text


def test_roofline_without_a_compute_peak_keeps_the_memory_roof(tmp_path):
    # Turing (arch 75) is not in device_peaks.json: the bandwidth comes from the profile's
    # bus width and memory clock (2 x 256 bits x 5.001 GHz), and the note says what is missing.
    tree, devices = json.loads((GOLDEN / "viewer_arch75.hatchet").read_text())
    tree["children"][0]["metrics"]["bytes"] = 4000
    arch75 = tmp_path / "arch75.hatchet"
    arch75.write_text(json.dumps([tree, devices]))
    roof = build_data([prepare(str(arch75))])["views"][0]["roofline"]
    device = roof["devices"][0]
    assert device["roofs"] == [] and device["bandwidth"] == pytest.approx(2 * 256 / 8 * 5001000e3)
    assert "no peak FLOP/s for CUDA architecture '75'" in device["note"]
    assert roof["ai"] == [0.25] and roof["perf"] == [1e9]  # 1000 FLOP / 4000 B in 1 us


def test_triton_file_report(open_report):
    page = open_report("triton")
    profile = prepare(TRITON)
    assert profile.metadata == {}  # written as triton.profiler writes: no Proton metadata
    assert_widths(page, inclusive_by_path(profile, "time (ns)"))
    points = page.evaluate("document.querySelectorAll('#roofline circle.pt').length")
    assert points == 3
    assert page.evaluate("document.getElementById('intra-section').hidden")


def test_cpu_scopes_report(open_report):
    page = open_report("cpu")
    profile = prepare(CPU)
    assert "time (ns)" not in profile.metric_names
    assert page.evaluate("document.getElementById('width-metric').textContent") == "cpu_time (ns)"
    assert "cpu_time (ns)" in profile.exclusive_metrics  # each scope's own measurement
    assert_widths(page, nested_by_path(profile, "cpu_time (ns)"))
    assert page.evaluate("document.getElementById('roofline-section').hidden")
    text = tooltip(page, '#flame g.f[data-name="step"]')
    assert "tokens\t8,192" in text and "cpu_time/s\t0.097" in text


# ---------------------------------------------------------------------- inside kernels
def test_cycles_per_scope_bar_chart_from_an_instrumented_tree(open_report):
    page = open_report("kernels")
    bars = page.evaluate(
        """[...document.querySelectorAll('#intra-bars g.ibar')].map(g =>
          [g.querySelector('text').textContent, +g.querySelector('rect').getAttribute('width')])"""
    )
    assert [b[0] for b in bars] == ["matmul_kernel", "load", "mma", "epilogue"]
    widths = dict(bars)
    assert widths["mma"] / widths["matmul_kernel"] == pytest.approx(60_000 / 123_750, rel=1e-4)
    assert widths["load"] / widths["mma"] == pytest.approx(50 / 60, rel=1e-4)


def gantt_rows(page):
    return page.evaluate("document.querySelectorAll('#gantt-labels .grow').length")


def test_warp_gantt_has_one_row_per_warp_and_folds_to_ctas_and_sms(open_report):
    page = open_report("intra")
    launches = page.evaluate(
        "[...document.querySelectorAll('#gantt-launch option')].map(o => o.text)"
    )
    assert [t.split(":")[0] for t in launches] == [
        "matmul_kernel",
        "vadd_kernel #1",
        "vadd_kernel #2",
    ]
    assert gantt_rows(page) == 6 * 4  # 6 CTAs x 4 warps
    labels = page.evaluate(
        "[...document.querySelectorAll('#gantt-labels .grow')].map(d => d.textContent)"
    )
    assert labels[:5] == [
        "SM0 CTA0 warp 0",
        "SM0 CTA0 warp 1",
        "SM0 CTA0 warp 2",
        "SM0 CTA0 warp 3",
        "SM0 CTA3 warp 0",
    ]
    legend = page.evaluate("document.getElementById('gantt-legend').textContent")
    for scope in ("matmul_kernel", "load", "mma", "epilogue"):
        assert scope in legend
    page.click('#gantt-mode input[value="cta"]')
    page.wait_for("document.querySelectorAll('#gantt-labels .grow').length === 6")
    page.click('#gantt-mode input[value="sm"]')
    page.wait_for("document.querySelectorAll('#gantt-labels .grow').length === 3")
    assert page.evaluate("document.querySelector('#gantt-labels .grow').textContent") == (
        "SM0 (2 CTAs, 8 warps)"
    )
    # SM0 runs its CTAs one after the other: shares are of the 4 warps it runs at once, so
    # while a CTA computes, its scopes fill the row (up to 1).
    assert page.evaluate("protonReport.P.gantt.concurrency(protonReport.P.gantt.groups[0])") == 4
    fullest = page.evaluate(
        """(() => { const g = protonReport.P.gantt, W = g.plotWidth();
          const occ = g.share(0, g.groups[0], W); let most = 0;
          for (let x = 0; x < W; x++) { let s = 0;
            for (let k = 0; k < occ.length / W; k++) s += occ[k * W + x]; most = Math.max(most, s); }
          return most; })()"""
    )
    assert fullest == pytest.approx(1, abs=1e-3)
    # Dragging across the chart zooms into that time range; the button zooms back out.
    span = page.evaluate("protonReport.P.gantt.l.span")
    x, y = page.box("#gantt-canvas")
    width = page.evaluate("protonReport.P.gantt.plotWidth()")
    left = page.evaluate("document.getElementById('gantt-canvas').getBoundingClientRect().left")
    page.mouse("mousePressed", left + width * 0.25, y)
    page.mouse("mouseMoved", left + width * 0.5, y)
    page.mouse("mouseReleased", left + width * 0.5, y)
    t0, t1 = page.evaluate("[protonReport.P.gantt.t0, protonReport.P.gantt.t1]")
    assert t0 == pytest.approx(span * 0.25, rel=0.02) and t1 == pytest.approx(span * 0.5, rel=0.02)
    page.click("#gantt-reset")
    assert page.evaluate("[protonReport.P.gantt.t0, protonReport.P.gantt.t1]") == [0, span]
    page.evaluate(
        "(() => { const s = document.getElementById('gantt-launch'); s.value = '1';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    page.click('#gantt-mode input[value="warp"]')
    page.wait_for("document.querySelectorAll('#gantt-labels .grow').length === 8")
    # The chart itself is painted: many colours in the canvas.
    shot = page.screenshot()
    assert distinct_colors(shot) > 50


def test_trace_report_has_a_flame_graph_of_its_kernel_slices(open_report):
    page = open_report("intra")
    frames, width = drawn(page)
    assert frames["ROOT > step > vadd_kernel"][1] == pytest.approx(
        7_000 / 41_200 * width
    )  # 2 x 3.5 us
    assert frames["ROOT > step > matmul_kernel"][1] == pytest.approx(34_200 / 41_200 * width)


def test_both_trace_layouts_give_the_same_warps():
    new = html_trace.warp_slices(html_trace.read_events(TRACE))
    old = html_trace.warp_slices(html_trace.read_events(TRACE_V1))

    def key(s):
        return (s.kernel, s.sm, s.cta, s.warp, s.name, s.start, s.end, s.cycles)

    assert sorted(map(key, old)) == sorted(key(s) for s in new if s.kernel == "matmul_kernel")
    assert len(old) == 6 * 4 * (1 + 6) + 6  # kernel-wide + 3 x (load, mma) per warp, epilogues


# ---------------------------------------------------------------------- several files
def test_rank_files_show_the_per_rank_imbalance(open_report):
    page = open_report("ranks")
    ranks = "[...document.querySelectorAll('#rank-bars g.rbar')].map(g => +g.dataset.value)"
    assert page.evaluate(ranks) == [16_800_000, 18_900_000]  # ROOT in each file
    page.hover('#flame g.f[data-name="allreduce"]')
    assert page.evaluate(ranks) == [1_000_000, 3_000_000]
    first = page.evaluate(
        "[...document.querySelector('#imbalance-table tbody tr').cells].map(c => c.textContent)"
    )
    assert first[:3] == ["allreduce", "1.500", "html_ranks.rank1.hatchet"]
    merged = inclusive_by_path(prepare(RANK0), "time (ns)")
    for path, value in inclusive_by_path(prepare(RANK1), "time (ns)").items():
        merged[path] = merged.get(path, 0) + value
    assert_widths(page, merged)


def test_diff_report_colours_frames_by_their_change(open_report):
    page = open_report("diff")
    assert page.evaluate("document.getElementById('color-mode').value") == "diff"
    fills = page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('#flame g.f')].map(g =>
          [g.dataset.name, g.querySelector('rect').getAttribute('fill')]))"""
    )
    hue = lambda name: int(re.match(r"hsl\((\d+),", fills[name]).group(1))  # noqa: E731
    assert hue("allreduce") == 0 and hue("adam") == 220  # 1 -> 3 ms, 0.8 -> 0.7 ms
    assert fills["gemm_bwd"] == "hsl(0,80%,96%)"  # unchanged: white
    assert_widths(page, inclusive_by_path(prepare(RANK1), "time (ns)"))
    text = tooltip(page, '#flame g.f[data-name="allreduce"]')
    assert "Δ 2.000 ms (200.0%)" in text
    header = page.evaluate(
        "[...document.querySelectorAll('#top-table th')].map(t => t.textContent)"
    )
    assert header[-2:] == ["base total", "Δ total"]


# ---------------------------------------------------------------------- the page itself
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_report_makes_no_network_request_and_is_not_blank(open_report, reports, name):
    page = open_report(name)
    assert page.requests == [reports[name].as_uri()]  # the page itself, nothing else
    shot = page.screenshot(full_page=True)
    assert distinct_colors(shot) > 200
    out = os.environ.get("PROTON_HTML_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.png").write_bytes(shot)


def test_request_recording_sees_a_request_when_there_is_one(browser, tmp_path):
    page_path = tmp_path / "fetches.html"
    page_path.write_text(
        '<html><body><img src="http://127.0.0.1:9/x.png"><script>window.protonReport = 1;'
        "</script></body></html>"
    )
    page = browser.open(page_path.as_uri())
    try:
        page.wait_for("true")
        assert "http://127.0.0.1:9/x.png" in page.requests
    finally:
        page.close()


def test_pruned_frames_are_stated_and_still_counted(browser, tmp_path):
    # ROOT > 30 scopes > 10 kernels each (331 nodes), with a budget of 50 frames.
    names, parents, rows = ["ROOT"], [-1], [{}]
    for s in range(30):
        names.append(f"scope{s}")
        parents.append(0)
        rows.append({})
        scope = len(names) - 1
        for k in range(10):
            names.append(f"kernel{s}_{k}")
            parents.append(scope)
            rows.append({"time (ns)": 1000 * (s + 1) + k, "count": 1})
    profile = Profile(names, parents, rows, source="synthetic")
    path = tmp_path / "pruned.html"
    write_html(path, [profile], max_frames=50)
    data = build_data([profile], max_frames=50)
    view = data["views"][0]
    kept = len(view["depth"])
    # The widest 50 frames are kept: ROOT, 28 scopes of 30 us or more, and the 21 kernels of
    # 28.009 us or more (scope0 and scope1, 10 and 20 us, are narrower than those).
    assert view["size"] == 331 and kept == 1 + 28 + 21
    stated = f"{331 - kept} of 331 frames pruned"
    assert stated in view["notes"][0]
    page = browser.open(path.as_uri())
    try:
        notes = page.evaluate("document.getElementById('notes').textContent")
        assert stated in notes
        assert page.evaluate("document.querySelectorAll('#flame g.f').length") <= 50
        # The root still spans every kernel's time; the table counts pruned frames too.
        total = sum(r.get("time (ns)", 0) for r in rows)
        assert page.evaluate("protonReport.P.tree().W[0]") == total
        assert page.evaluate("document.querySelector('#top-table tbody tr').dataset.name") == (
            "kernel29_9"
        )
        text = tooltip(page, '#flame g.f[data-name="scope26"]')
        assert "10 frames below" in text
        assert "scope0" not in page.evaluate("document.getElementById('flame').textContent")
    finally:
        page.close()


def test_data_is_a_string_table_and_arrays(reports):
    text = reports["kernels"].read_text()
    block = re.search(
        r'<script type="application/json" id="proton-data">(.*?)</script>', text, re.S
    )
    data = json.loads(block.group(1))
    view = data["views"][0]
    n = len(view["depth"])
    assert all(isinstance(x, int) for x in view["name"]) and len(view["name"]) == n
    assert all(len(r["values"]) == n for r in view["raw"])
    assert len(set(data["strings"])) == len(data["strings"])
    assert '"frame"' not in block.group(1)
    # Nothing to load: no external script, style, image or font.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|@import|url\(""", text)


def test_frames_all_writes_one_view_without_the_toggle():
    data = build_data([prepare(KERNELS)], frames="all")
    assert [v["label"] for v in data["views"]] == ["every frame"]
    data = build_data([prepare(KERNELS)])
    assert [v["label"] for v in data["views"]] == ["library frames folded", "every frame"]
    assert len(build_data([prepare(RANK0)])["views"]) == 1  # nothing to fold: one view


def test_options_of_the_text_view_apply(tmp_path, browser):
    path = tmp_path / "options.html"
    assert run(["--html", str(path), "-d", "3", "-e", ".*save", KERNELS]) == 0
    page = browser.open(path.as_uri())
    try:
        rows = page.evaluate(
            "[...document.querySelectorAll('#flame g.f')].map(g => g.dataset.name)"
        )
        assert rows == ["ROOT", "train.py:40@main", "train.py:22@step"]
        notes = page.evaluate("document.getElementById('notes').textContent")
        assert "hidden by -d 3" in notes
    finally:
        page.close()


def test_bad_input_is_one_line_and_status_1(tmp_path, capsys):
    from proton.viewer.main import main

    bad = tmp_path / "bad.chrome_trace"
    bad.write_text("{")
    with pytest.raises(SystemExit) as e:
        main(["--html", str(tmp_path / "r.html"), str(bad)])
    assert e.value.code == 1
    assert capsys.readouterr().err.startswith(f"[PROTON] {bad} is not a chrome trace")

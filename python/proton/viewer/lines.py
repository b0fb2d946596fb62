"""`proton-viewer --lines KERNEL_REGEX`: where a kernel's instruction samples (PC sampling)
fall, one row per source line.

    text = lines.render_lines(profiles, "matmul", ["num_samples"], name_format="full")

PC sampling files samples under each kernel frame as children named `file:line@function`
with `num_samples`, `num_stalled_samples` and `stalled_<reason>`; samples without line
information stay on the kernel frame itself. For the kernel frames whose name matches the
regex (matched at the start of the name, as -i), the rows are those children summed by
name across every matching frame (contexts, launches, files), plus `(no line info)` for
the kernel frames' own samples; sorted by num_samples, largest first, with each row's
share of the matched kernels' samples. `-m` metrics are derived on that table, so
`<metric>/%` is a share of the matched kernels' total.
"""

import re

from .derive import derive, match_raw
from .errors import ViewerError
from .model import Profile, _compile
from .render import format_name, format_value

SAMPLES = "num_samples"
NO_LINE = "(no line info)"
_LINE_FRAME = re.compile(r".+:\d+@.*", re.DOTALL)


def _is_sample_metric(name: str) -> bool:
    return name in (SAMPLES, "num_stalled_samples") or name.startswith("stalled_")


def line_profile(profiles, pattern: str):
    """(a Profile ROOT -> one child per line, how many kernel frames matched): the matched
    kernels' line children summed by name; ROOT's inclusive values are the kernels' totals."""
    match = _compile(pattern, "--lines").match
    rows, frames = {}, 0
    metrics = []
    for profile in profiles:
        if match_raw(profile, SAMPLES) is None:
            continue
        summed = [m for m in profile.metric_names if m not in profile.exclusive_metrics]
        metrics += [m for m in summed if m not in metrics]
        inclusive = {m: profile.inclusive(m) for m in summed}
        for k, name in enumerate(profile.names):
            if not match(name):
                continue
            lines = [c for c in profile.children(k) if _LINE_FRAME.fullmatch(profile.names[c])]
            if not lines and not profile.rows[k].get(SAMPLES):
                continue
            frames += 1
            own = {m: profile.rows[k].get(m) for m in summed if _is_sample_metric(m)}
            _add(rows.setdefault(NO_LINE, {}), own)
            for c in lines:
                _add(rows.setdefault(profile.names[c], {}), {m: inclusive[m][c] for m in summed})
    if not frames:
        return None, 0
    if not any(rows[NO_LINE].values()):
        del rows[NO_LINE]
    names = ["ROOT", *rows]
    root = dict.fromkeys(metrics, 0)
    table = Profile(names, [-1] + [0] * len(rows), [root, *rows.values()], source="--lines")
    return table, frames


def _add(into: dict, values: dict) -> None:
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value


def render_lines(profiles, pattern: str, specs, name_format="full") -> str:
    """The per-line table as text (ending in a newline); a ViewerError when no kernel frame
    matching `pattern` has samples."""
    table, frames = line_profile(profiles, pattern)
    if table is None:
        sources = ", ".join(p.source for p in profiles)
        if not any(match_raw(p, SAMPLES) for p in profiles):
            raise ViewerError(
                f"--lines needs instruction samples ({SAMPLES}); {sources} has none "
                "(profile with mode='pcsampling')"
            )
        raise ViewerError(f"--lines {pattern!r} matches no kernel frame with samples in {sources}")
    specs = list(specs) if specs else [SAMPLES]
    columns = [derive(table, spec) for spec in specs]
    samples = table.inclusive(match_raw(table, SAMPLES))
    total = samples[0]
    share = [v * 100 / total if total else None for v in samples]
    rows = sorted(range(1, len(table)), key=lambda i: -samples[i])
    titles = [c.title for c in columns] + ["samples %"]
    cells = [[format_value(c.values[i]) for i in rows] for c in columns]
    cells.append([format_value(share[i]) for i in rows])
    widths = [max([len(t)] + [len(s) for s in col]) for t, col in zip(titles, cells)]
    kernels = "kernel frame" if frames == 1 else "kernel frames"
    out = [
        f"Lines of {frames} {kernels} matching {pattern!r}: {format_value(total)} samples",
        "  ".join(t.rjust(w) for t, w in zip(titles, widths)) + "  line",
    ]
    for r, i in enumerate(rows):
        name = table.names[i]
        name = name if name == NO_LINE else format_name(name, name_format)
        out.append("  ".join(col[r].rjust(w) for col, w in zip(cells, widths)) + "  " + name)
    return "\n".join(out) + "\n"

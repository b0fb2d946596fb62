"""Counts of a Triton compat run (run.sh) per test file, from pytest's JUnit XML files, or, for a
pytest run that died before writing one (a crash, a timeout), from the `-v` lines of its log.

    python3 summarize.py OUT_DIR GROUP...      GROUP: name:exit_code:seconds:file1.py,file2.py

Reads OUT_DIR/junit_<name>.xml and OUT_DIR/pytest_<name>.log for each group; writes
OUT_DIR/summary.txt, OUT_DIR/summary.json and one OUT_DIR/files/<test file>.log per test file
(each test's outcome, and the failure text for those that did not pass)."""

import json
import os
import re
import sys
import xml.etree.ElementTree as ET

OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
BAD = ("failed", "error", "xpassed")
VERBOSE_LINE = re.compile(r"^(\S+?\.py)::(\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
VERBOSE_OUTCOME = {
    "PASSED": "passed",
    "FAILED": "failed",
    "ERROR": "error",
    "SKIPPED": "skipped",
    "XFAIL": "xfailed",
    "XPASS": "xpassed",
}


def _file_of(case):
    """The test file of a <testcase> (junit_family=xunit1 names it; a collection error names
    the module in classname or name)."""
    path = case.get("file")
    if path:
        return path
    for value in (case.get("classname") or "", case.get("name") or ""):
        if value:
            return value.split(".")[0].replace("/", os.sep) + ".py"
    return "?"


def _nodeid(case, path):
    parts = (case.get("classname") or "").split(".")
    module = os.path.splitext(os.path.basename(path))[0]
    classes = parts[parts.index(module) + 1 :] if module in parts else []
    name = case.get("name") or ""
    if not name or (not classes and name == module):
        return path  # a collection error: the file itself
    return "::".join([path, *classes, name])


def cases_from_junit(xml_path):
    """[(file, nodeid, outcome, seconds, text)] of a JUnit XML file."""
    cases = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        path = _file_of(case)
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            outcome, node = "failed", failure
        elif error is not None:
            outcome, node = "error", error
        elif skipped is not None:
            xfail = (skipped.get("type") or "") == "pytest.xfail"
            outcome, node = ("xfailed" if xfail else "skipped"), skipped
        else:
            # JUnit XML reports a non-strict XPASS as a pass (a strict one is a failure).
            outcome, node = "passed", None
        text = ""
        if node is not None:
            text = "\n".join(part for part in (node.get("message") or "", node.text or "") if part)
        seconds = float(case.get("time") or 0.0)
        cases.append((path, _nodeid(case, path), outcome, seconds, text))
    return cases


def cases_from_log(log_path):
    """The same from `pytest -v` progress lines (no failure text: it is in the log)."""
    cases = {}
    try:
        with open(log_path, errors="replace") as log:
            for line in log:
                match = VERBOSE_LINE.match(line.strip())
                if match:
                    path, rest, word = match.groups()
                    # -v names files relative to the current directory (OUT_DIR/work), the
                    # JUnit XML relative to the tests directory, where these files lie.
                    nodeid = f"{os.path.basename(path)}::{rest}"
                    # A test that failed in teardown after passing shows twice: keep the worst.
                    outcome = VERBOSE_OUTCOME[word]
                    if cases.get(nodeid) in BAD and outcome not in BAD:
                        continue
                    cases[nodeid] = outcome
    except OSError:
        return []
    return [(nodeid.split("::")[0], nodeid, outcome, 0.0, "") for nodeid, outcome in cases.items()]


def summarize(out_dir, groups):
    per_file = {}
    runs = []
    for name, exit_code, seconds, files in groups:
        for path in files:
            per_file.setdefault(path, [])
        xml_path = os.path.join(out_dir, f"junit_{name}.xml")
        log_path = os.path.join(out_dir, f"pytest_{name}.log")
        source = "junit"
        try:
            cases = cases_from_junit(xml_path)
        except (OSError, ET.ParseError):
            cases, source = cases_from_log(log_path), "log (no JUnit XML: pytest did not finish)"
        runs.append({"group": name, "exit": exit_code, "seconds": seconds, "source": source})
        for path, nodeid, outcome, secs, text in cases:
            per_file.setdefault(path, []).append((nodeid, outcome, secs, text))

    files_dir = os.path.join(out_dir, "files")
    os.makedirs(files_dir, exist_ok=True)
    table = {}
    failing = []
    for path in sorted(per_file):
        counts = dict.fromkeys(OUTCOMES, 0)
        lines = []
        for nodeid, outcome, secs, text in per_file[path]:
            counts[outcome] += 1
            lines.append(f"{outcome.upper():8} {nodeid} ({secs:.2f} s)")
            if outcome in BAD:
                failing.append(nodeid)
                if text:
                    lines.extend("    " + line for line in text.rstrip().splitlines())
        table[path] = counts
        if not lines:
            lines.append("no test ran (not collected, or pytest stopped before it)")
        log_name = os.path.basename(path).replace(".py", "") + ".log"
        with open(os.path.join(files_dir, log_name), "w") as log:
            tally = ", ".join(f"{counts[k]} {k}" for k in OUTCOMES if counts[k])
            log.write(f"{path}: {tally or 'no test ran'}\n")
            log.write("\n".join(lines) + "\n")

    total = {key: sum(counts[key] for counts in table.values()) for key in OUTCOMES}
    width = max([len(path) for path in table] + [5])
    header = f"{'file':<{width}} " + " ".join(f"{key:>8}" for key in OUTCOMES)
    text = []
    for run in runs:
        text.append(
            f"pytest {run['group']}: exit {run['exit']} after {run['seconds']} s,"
            f" counts from {run['source']}"
        )
    text.append("")
    text.append(header)
    for path, counts in table.items():
        text.append(f"{path:<{width}} " + " ".join(f"{counts[key]:>8}" for key in OUTCOMES))
    text.append(f"{'TOTAL':<{width}} " + " ".join(f"{total[key]:>8}" for key in OUTCOMES))
    text.append("")
    text.append(f"failing tests ({len(failing)}):")
    text.extend(f"  {nodeid}" for nodeid in failing)
    with open(os.path.join(out_dir, "summary.txt"), "w") as out:
        out.write("\n".join(text) + "\n")
    with open(os.path.join(out_dir, "summary.json"), "w") as out:
        json.dump({"runs": runs, "files": table, "total": total, "failing": failing}, out, indent=1)
    return "\n".join(text)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    groups = []
    for spec in argv[1:]:
        name, exit_code, seconds, files = spec.split(":", 3)
        groups.append((name, int(exit_code), int(seconds), [f for f in files.split(",") if f]))
    print(summarize(argv[0], groups))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

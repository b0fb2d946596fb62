"""The code blocks of README.md and docs/*.md, run or checked, so that a stale example fails.

Every fenced block whose language is python, bash, sh, cpp or cuda carries one marker after
the language in its info string (```python run); GitHub shows the language only. Markers:

  run            run on a CPU, in a temporary directory shared by the blocks of one file, in
                 document order (a block may read what an earlier one wrote): python as a
                 script of this interpreter, bash with `bash -e`; with PROTON_FORCE_NO_GPU=1,
                 so that a GPU machine gives the same output.
  run-installed  as run, with the leading `python3 -m pip install . &&` left out: the test
                 runs against the Proton already installed.
  file=NAME      (python) written to NAME in that directory for the blocks after it; not run.
  output         (a text block) what the block before it prints, stdout and stderr together:
                 compared line by line, trailing spaces dropped; `...` inside a line matches
                 any text, a line that is only `...` any number of lines.
  gpu            needs an NVIDIA GPU: skipped with that reason, after the checks below.
  nvcc           needs nvcc and an NVIDIA GPU: skipped.
  setup          installs software or builds Proton: skipped (it would replace what is tested;
                 scripts/test.sh does the install).
  suite          `bash scripts/test.sh`, which runs this test: skipped.
  fragment       part of a program (the user's own objects, `...` bodies): checked, not run.
  example=PATH   lines taken from PATH: each line of the block but `...` must appear in that
                 file, in order.

Whatever its marker, a python block must compile and every name it reaches under `proton`
(`proton.mode.PCSampling`, `pl.scope`, `viewer.load`) must exist, with the keyword arguments
it passes; `proton.start` calls with literal options must name valid ones. In bash blocks,
`proton` and `proton-viewer` command lines must parse. Blocks in other languages (text trees,
trace pictures) are not checked. Beyond blocks: every repository path a doc names
(examples/..., bench/..., tests/..., csrc/...) must exist, every `test_...` name a doc cites
must be a test, every relative link must resolve (anchors included), and README.md stays
within 250 lines.
"""

import ast
import importlib
import inspect
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import proton
import pytest
from proton import _C, cli, native
from proton_test_utils import PYTHON_DIR

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKED_LANGUAGES = {"python", "bash", "sh", "cpp", "cuda"}
MARKERS = {"run", "run-installed", "gpu", "nvcc", "setup", "suite", "fragment"}
RUNNABLE = {"run", "run-installed", "file"}
SKIP_REASONS = {  # checked first, then skipped with the reason; fragments and examples pass
    "gpu": "needs an NVIDIA GPU",
    "nvcc": "needs nvcc and an NVIDIA GPU",
    "setup": "installs software or builds Proton (scripts/test.sh does the install)",
    "suite": "runs the whole suite, this test included",
}
PIP_INSTALL = re.compile(r"^\s*python3 -m pip install [^&]*&&\s*")


@dataclass
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    language: str
    marker: str  # run, gpu, ..., "file", "example", "output" or "" (an unchecked picture)
    argument: str  # NAME of file=NAME, PATH of example=PATH
    text: str
    output: "Block" = None  # the output block that follows a run block
    problems: list = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}:{self.marker}"

    def __repr__(self) -> str:
        return self.id


class BlockFailed(Exception):
    """A block failed; `ran` when it ran to the end and only its output differs, so that the
    blocks after it still have what it wrote."""

    def __init__(self, message, ran=False):
        super().__init__(message)
        self.ran = ran


def parse_blocks(doc: Path) -> list:
    """The fenced blocks of a Markdown file, output blocks attached to the block before."""
    blocks = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(.*)$", lines[i])
        if not fence:
            i += 1
            continue
        words = fence.group(2).split()
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        language = words[0] if words else ""
        marker, argument, problems = "", "", []
        for word in words[1:]:
            key, _, value = word.partition("=")
            if key in ("file", "example") and value:
                marker, argument = key, value
            elif word in MARKERS or word == "output":
                marker = word
            else:
                problems.append(f"unknown marker {word!r}")
        if len(words) > 2:
            problems.append(f"one marker per block, got {words[1:]}")
        block = Block(doc, start + 1, language, marker, argument, "\n".join(body) + "\n")
        block.problems = problems
        if marker == "output":
            before = blocks[-1] if blocks else None
            if before is None or before.marker not in ("run", "run-installed"):
                block.problems.append("an output block must follow a run block")
            elif before.output is not None:
                block.problems.append("a run block has one output block")
            else:
                before.output = block
        blocks.append(block)
    return blocks


BLOCKS = [block for doc in DOCS for block in parse_blocks(doc)]
CHECKED = [b for b in BLOCKS if b.language in CHECKED_LANGUAGES]


# ---- every block says what it is ------------------------------------------------------------


def test_every_code_block_is_marked_run_or_checked():
    problems = []
    for block in BLOCKS:
        problems += [f"{block.id}: {p}" for p in block.problems]
        if block.language in CHECKED_LANGUAGES and block.marker in ("", "output"):
            problems.append(
                f"{block.id}: a {block.language} block needs a marker "
                f"({', '.join(sorted(MARKERS))}, file=NAME or example=PATH)"
            )
        if block.marker == "file" and block.language != "python":
            problems.append(f"{block.id}: file=NAME is for python blocks")
        if block.marker in RUNNABLE and block.language not in ("python", "bash", "sh"):
            problems.append(f"{block.id}: only python and bash blocks run")
    assert not problems, "\n".join(problems)


def test_readme_stays_a_five_minute_read():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move the detail into docs/"


# ---- static checks of python blocks ---------------------------------------------------------


def _aliases(tree) -> dict:
    """Local names bound to proton modules or objects by the block's imports."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "proton":
                    continue
                if a.asname:  # import proton.language as pl
                    aliases[a.asname] = a.name
                else:  # import proton, import proton.language: both bind `proton`
                    aliases["proton"] = "proton"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "proton":
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases or {"proton": "proton"}  # a fragment without imports uses `proton`


def _resolve(dotted: str):
    """The object a dotted proton name stands for; AttributeError if it does not exist."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))  # a submodule not imported
    return obj


def _dotted(node, aliases):
    """`pl.scope` -> 'proton.language.scope' for an attribute chain on an alias, else None."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(names)])
    return None


def python_problems(source: str) -> list:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"does not compile: {e}"]
    aliases = _aliases(tree)
    problems = []
    for node in ast.walk(tree):
        dotted = _dotted(node, aliases) if isinstance(node, ast.Attribute) else None
        if dotted:
            try:
                _resolve(dotted)
            except AttributeError as e:
                problems.append(f"{dotted} does not exist ({e})")
            except ModuleNotFoundError as e:  # a dependency missing here (triton) is not stale
                if (e.name or "").startswith("proton"):
                    problems.append(f"{dotted} does not exist ({e})")
        if not isinstance(node, ast.Call):
            continue
        dotted = _dotted(node.func, aliases) if isinstance(node.func, ast.Attribute) else None
        if isinstance(node.func, ast.Name) and node.func.id in aliases:
            dotted = aliases[node.func.id]
        if not dotted:
            continue
        try:
            target = _resolve(dotted)
            signature = inspect.signature(target)
        except (AttributeError, ModuleNotFoundError, TypeError, ValueError):
            continue
        params = signature.parameters.values()
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            accepted = {p.name for p in params}
            for kw in node.keywords:
                if kw.arg is not None and kw.arg not in accepted:
                    problems.append(f"{dotted}() takes no keyword {kw.arg!r}")
        if target is proton.start:
            problems += _start_option_problems(node)
    return problems


def _start_option_problems(call) -> list:
    """proton.start(...) with literal options: the core must accept them."""
    options = {"name": "doc", "context": "", "data": "", "backend": "", "mode": ""}
    for kw in call.keywords:
        if kw.arg in options:
            if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)):
                return []  # not a literal (a mode object): checked by running, not here
            options[kw.arg] = kw.value.value
    try:
        _C.check_session_options(
            options["name"],
            options["context"] or "shadow",
            options["data"] or "tree",
            options["backend"],
            options["mode"],
        )
    except (ValueError, TypeError, RuntimeError) as e:
        return [f"proton.start options {options} are refused: {e}"]
    return []


# ---- static checks of bash blocks -----------------------------------------------------------

VIEWER_HELP = None


def _viewer_help() -> str:
    global VIEWER_HELP
    if VIEWER_HELP is None:
        VIEWER_HELP = run_command(["proton-viewer", "--help"], ROOT).stdout
    return VIEWER_HELP


def _command_lines(text: str):
    """Each shell command of a block as its words (comments dropped, `&&` and `|` split)."""
    for raw in text.splitlines():
        try:
            words = shlex.split(raw, comments=True)
        except ValueError:
            continue
        command = []
        for word in [*words, "&&"]:
            if word in ("&&", "||", "|", ";"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def bash_problems(text: str) -> list:
    problems = []
    for words in _command_lines(text):
        if words[0] == "proton":
            args = words[1:]
            if len(args) == 1 and (args[0] in native.INFO_OPTIONS or args[0] in ("-h", "--help")):
                continue
            try:
                options, _ = cli.parse_args(args)
            except cli.UsageError as e:
                problems.append(f"`{shlex.join(words)}`: {e}")
                continue
            try:
                _C.check_session_options(
                    options.get("name") or "proton",
                    options.get("context") or "shadow",
                    options.get("data") or "tree",
                    options.get("backend") or "",
                    options.get("mode") or "",
                )
            except (ValueError, TypeError, RuntimeError) as e:
                problems.append(f"`{shlex.join(words)}`: {e}")
        elif words[0] == "proton-viewer":
            for word in words[1:]:
                option = word.split("=", 1)[0]
                if option.startswith("-") and not re.search(
                    rf"(^|[\s,\[]){re.escape(option)}([\s,\]=]|$)", _viewer_help(), re.MULTILINE
                ):
                    problems.append(f"`{shlex.join(words)}`: proton-viewer has no {option}")
    return problems


def _example_problems(block: Block) -> list:
    path = ROOT / block.argument
    if not path.is_file():
        return [f"{block.argument} does not exist"]
    remaining = iter(line.rstrip() for line in path.read_text().splitlines())
    for line in block.text.splitlines():
        if line.strip() in ("", "..."):
            continue
        if not any(candidate == line.rstrip() for candidate in remaining):
            return [f"{line.strip()!r} is not in {block.argument} (after the lines before it)"]
    return []


@pytest.mark.parametrize(
    "block", [b for b in CHECKED if b.marker not in RUNNABLE], ids=lambda b: b.id
)
def test_block_that_is_not_run_is_checked(block):
    problems = list(block.problems)
    if block.marker == "example":
        problems += _example_problems(block)
    if block.language == "python":
        problems += python_problems(block.text)
    elif block.language in ("bash", "sh") and block.marker in ("gpu", "fragment"):
        problems += bash_problems(block.text)
    assert not problems, f"{block.id}:\n" + "\n".join(problems)
    if block.marker in SKIP_REASONS:
        pytest.skip(SKIP_REASONS[block.marker])


# ---- running the runnable blocks ------------------------------------------------------------


def run_command(argv, cwd, timeout=120):
    return subprocess.run(
        argv,
        cwd=str(cwd),
        env=_environment(),
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )


_BIN = {}


def _environment() -> dict:
    """`python3` is this interpreter; `proton` and `proton-viewer` are the installed scripts."""
    if "dir" not in _BIN:
        _BIN["dir"] = tempfile.mkdtemp(prefix="proton_docs_bin_")
        os.symlink(sys.executable, os.path.join(_BIN["dir"], "python3"))
    env = dict(os.environ)
    for key in ("PROTON_DISABLE", "PROTON_VIEWER_PYTHON", "RANK", "WORLD_SIZE", "COLUMNS"):
        env.pop(key, None)
    scripts = [_BIN["dir"], sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    env["PATH"] = os.pathsep.join([*scripts, env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, env.get("PYTHONPATH", "")])
    env.update(PROTON_FORCE_NO_GPU="1", PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    env.update(NO_COLOR="1", LC_ALL="C.UTF-8", PYTHONDONTWRITEBYTECODE="1")
    return env


def output_matches(expected: str, actual: str) -> bool:
    """Line by line; `...` in a line is any text, a line of only `...` any number of lines."""
    want = [line.rstrip() for line in expected.rstrip("\n").splitlines()]
    have = [line.rstrip() for line in actual.rstrip("\n").splitlines()]

    def line_matches(pattern, line):
        parts = [re.escape(p) for p in pattern.split("...")]
        return re.fullmatch(".*".join(parts), line) is not None

    def match(i, j):
        if i == len(want):
            return j == len(have)
        if want[i].strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and line_matches(want[i], have[j]) and match(i + 1, j + 1)

    return match(0, 0)


def _run_block(block: Block, workdir: Path):
    if block.marker == "file":
        (workdir / block.argument).write_text(block.text)
        return None
    source = block.text
    if block.marker == "run-installed":
        source = PIP_INSTALL.sub("", source, count=1)
    if block.language == "python":
        script = workdir / f"block_{block.line}.py"
        script.write_text(source)
        argv = [sys.executable, script.name]
    else:
        argv = ["bash", "-e", "-c", source]
    if not (workdir / "examples").exists():  # `python3 examples/scopes.py` as from the root
        (workdir / "examples").symlink_to(ROOT / "examples")
    try:
        result = run_command(argv, workdir)
    except subprocess.TimeoutExpired as e:
        raise BlockFailed(f"{block.id} did not end in {e.timeout} s:\n{source}") from None
    if result.returncode != 0:
        raise BlockFailed(
            f"{block.id} exited with {result.returncode}:\n{source}--- output:\n{result.stdout}"
        )
    if block.output is not None and not output_matches(block.output.text, result.stdout):
        raise BlockFailed(
            f"{block.id}: the output differs from the doc's\n--- the doc says:\n"
            f"{block.output.text}--- the block printed:\n{result.stdout}",
            ran=True,
        )
    return result


_WORKDIRS = {}  # doc -> the directory its blocks run in
_RESULTS = {}  # block id -> None (ran as the doc says) or the BlockFailed it raised


@pytest.fixture(scope="session")
def docs_workdir(tmp_path_factory):
    def workdir(doc):
        if doc not in _WORKDIRS:
            _WORKDIRS[doc] = tmp_path_factory.mktemp(doc.stem.replace(".", "_"))
        return _WORKDIRS[doc]

    return workdir


RUNNABLE_BLOCKS = [b for b in CHECKED if b.marker in RUNNABLE]


@pytest.mark.parametrize("block", RUNNABLE_BLOCKS, ids=lambda b: b.id)
def test_block_runs_and_prints_what_the_doc_says(block, docs_workdir):
    """The blocks of one doc run once each, in document order, in one directory: a block runs
    the ones before it first when they have not run (under -k, say). A block that failed to
    run stops those after it; one whose output differs does not."""
    assert not block.problems, f"{block.id}: {block.problems}"
    if block.language == "python":
        problems = python_problems(block.text)
        assert not problems, f"{block.id}:\n" + "\n".join(problems)
    elif block.language in ("bash", "sh"):
        problems = bash_problems(block.text)
        assert not problems, f"{block.id}:\n" + "\n".join(problems)
    same_doc = [b for b in RUNNABLE_BLOCKS if b.doc == block.doc]
    for current in same_doc[: same_doc.index(block) + 1]:
        if current.id not in _RESULTS:
            try:
                _run_block(current, docs_workdir(block.doc))
                _RESULTS[current.id] = None
            except BlockFailed as e:
                _RESULTS[current.id] = e
        failure = _RESULTS[current.id]
        if current is block and failure is not None:
            pytest.fail(str(failure), pytrace=False)
        if failure is not None and not failure.ran:
            pytest.fail(f"{block.id}: the earlier block {current.id} failed:\n{failure}", False)


# ---- paths, tests and links the docs name ---------------------------------------------------

REPO_PATH = re.compile(
    r"(?<![\w/.\-])((?:examples|bench|scripts|tests|csrc|python|fuzz|cmake|docs)/[\w./\-]*)"
)


def test_every_repository_path_a_doc_names_exists():
    missing = []
    for doc in [*DOCS, ROOT / "CHANGELOG.md"]:
        for number, line in enumerate(doc.read_text().splitlines(), start=1):
            for path in REPO_PATH.findall(line):
                path = path.rstrip(".")
                if not (ROOT / path).exists():
                    missing.append(f"{doc.relative_to(ROOT)}:{number}: {path}")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_every_test_a_doc_cites_exists():
    defined = set()
    for path in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "csrc").rglob("*_test.cc")]:
        defined.update(re.findall(r"def (test_\w+)|TEST(?:_F)?\(\w+, (\w+)\)", path.read_text()))
    names = {n for pair in defined for n in pair if n}
    cited = []
    for doc in DOCS:
        for name in re.findall(r"`(test_\w+)`", doc.read_text()):
            if name not in names:
                cited.append(f"{doc.relative_to(ROOT)}: {name}")
    assert not cited, "tests cited by the docs that do not exist:\n" + "\n".join(cited)


def github_anchor(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: Path) -> set:
    seen, result = {}, set()
    in_fence = False
    for line in doc.read_text().splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if in_fence:
            continue
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            anchor = github_anchor(heading.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


def test_every_relative_link_resolves():
    broken = []
    for doc in [*DOCS, ROOT / "CHANGELOG.md"]:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.DOTALL)
        text = re.sub(r"`[^`\n]*`", "", text)  # code spans: compiled[grid](...) is no link
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (doc.parent / path).resolve() if path else doc
            if not resolved.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "links that do not resolve:\n" + "\n".join(broken)


# ---- the checker itself ---------------------------------------------------------------------


def test_output_matching_takes_wildcards_and_nothing_else():
    assert output_matches("a\n...\nd\n", "a\nb\nc\nd\n")
    assert output_matches("x = ...!\n", "x = 42!\n")
    assert not output_matches("x = 1\n", "x = 2\n")
    assert not output_matches("a\n", "a\nb\n")


def test_a_stale_python_name_or_option_is_caught():
    assert python_problems("import proton\nproton.no_such_call()\n")
    assert python_problems("import proton\nproton.start('x', contxt='python')\n")
    assert python_problems("import proton\nproton.start('x', context='pythn')\n")
    assert python_problems("import proton.language as pl\npl.enter_scop('a')\n")
    assert not python_problems("import proton\nproton.start('x', context='python')\n")
    assert bash_problems("proton --no-such-option app.py\n")
    assert bash_problems("proton -c pythn app.py\n")
    assert not bash_problems("proton -c python app.py\n")

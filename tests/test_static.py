"""Static checks that guard what breaks notebooks silently: names, papermill parameters, stripped
outputs, hanging calls, exact and consistent pins, API drift against the pinned versions, lint."""

import ast
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import helpers

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# vllm pins torch exactly (requirements-gpu.txt explains why it is 2.8.0 there); the CPU stack keeps
# the CPU build of torch 2.13.0. Every other package must have one version across all files.
ALLOWED_TO_DIFFER = {"torch"}
REQUIREMENT_FILES = [ROOT / "requirements.txt", ROOT / "requirements.lock", ROOT / "requirements-cuda.lock",
                     ROOT / "requirements-nodeps.txt", ROOT / "requirements-colab.txt",
                     ROOT / "requirements-gpu.txt", ROOT / "binder" / "requirements.txt", ROOT / "requirements-v1.txt",
                     ROOT / "workshop" / "requirements-hub.txt"]
# Notebook 04's own environment is verifiers 0.4, which needs an openai below 3; all else as the course's.
ALLOWED_TO_DIFFER_IN = {"requirements-v1.txt": {"verifiers", "openai"}}
NOTEBOOKS_IN_THEIR_OWN_ENVIRONMENT = {"04_verifiers_v1.ipynb"}  # no Colab cell: Colab has one Python


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def code(path: Path) -> str:
    """The notebook's Python: every code cell, a `%%writefile` cell's body included (the file it writes is Python)."""
    sources = ("".join(c["source"]) for c in cells(path) if c["cell_type"] == "code")
    return "\n".join(s.split("\n", 1)[1] if s.startswith("%%writefile") else s for s in sources)


def parse_notebook(path: Path) -> ast.Module:
    """Like ast.parse, with IPython's top-level `await` allowed."""
    return compile(code(path), path.name, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_there_are_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == ["00", "01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_hygiene(path):
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), "name is not NN_snake_case.ipynb"
    all_cells = cells(path)
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in all_cells), \
        "no cell tagged 'parameters' (papermill)"
    for c in all_cells:
        if c["cell_type"] == "code":
            assert not c.get("outputs") and c.get("execution_count") is None, "outputs not stripped"
    source = code(path)
    for line in source.splitlines():
        assert not (line.lstrip().startswith("!") and line.rstrip().endswith("&")), \
            f"background shell job (papermill refuses it; use subprocess.Popen): {line}"
    for forbidden in ("input(", "getpass", "/work/", "/tmp/"):
        assert forbidden not in source, f"notebook contains {forbidden!r}"
    assert all_cells[0]["cell_type"] == "markdown" and "What you will learn" in "".join(all_cells[0]["source"])


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip().removesuffix("\\").strip()  # a pin followed by its --hash lines
        if not line or line.startswith("-"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]+\])?==([^\s;]+)(\s*;.*)?", line)
        assert match, f"{path.name}: '{line}' is not pinned exactly with =="
        found[match.group(1).lower().replace("_", "-")] = match.group(3)
    return found


def test_pins_exact_and_consistent():
    seen: dict[str, tuple[str, str]] = {}
    for path in REQUIREMENT_FILES:
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
        for name, version in pins(path).items():
            if name in seen and name not in ALLOWED_TO_DIFFER | ALLOWED_TO_DIFFER_IN.get(path.name, set()):
                assert seen[name][1] == version, \
                    f"{name}: {version} in {path.relative_to(ROOT)} but {seen[name][1]} in {seen[name][0]}"
            if name not in ALLOWED_TO_DIFFER_IN.get(path.name, set()):
                seen[name] = (str(path.relative_to(ROOT)), version)
    # binder installs the course's lock (tests/test_lock.py checks it against requirements.txt), with torch's
    # CPU build from PyTorch's CPU index, as scripts/setup_env.sh does with TORCH_INDEX_URL.
    binder = [line for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert binder == ["--extra-index-url https://download.pytorch.org/whl/cpu", "-r ../requirements.lock"]
    assert (ROOT / "binder" / "../requirements.lock").is_file()


def _attribute_chain(node: ast.AST) -> list[str] | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(names)]
    return None


MODULES = {"vf": "verifiers", "verifiers": "verifiers", "weave": "weave", "helpers": "helpers"}


def _imported_names(tree: ast.AST) -> dict[str, str]:
    """`from helpers import grpo` / `from helpers.tracing.views import calls_table`: name -> dotted path."""
    return {alias.asname or alias.name: f"{node.module}.{alias.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in MODULES.values()
            for alias in node.names}


def _resolve(chain: list[str], modules: dict[str, str] = MODULES):
    import importlib

    path = modules[chain[0]]
    try:
        obj = importlib.import_module(path)
    except ModuleNotFoundError:  # a function or class, not a module
        parent, _, attribute = path.rpartition(".")
        obj = getattr(importlib.import_module(parent), attribute)
    for name in chain[1:]:
        obj = getattr(obj, name)
    return obj


def _accepts(func, keyword: str) -> bool:
    target = func.__init__ if inspect.isclass(func) else func
    params = inspect.signature(target).parameters
    return keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_api_drift(path):
    """Every vf.*, weave.* and helpers.* name a notebook uses (also through `from helpers.x import y`)
    exists, and takes the keywords passed. A notebook that runs in another environment (its kernel is not
    this venv's python3, e.g. notebook 04's verifiers 0.4) is checked by its own tests there."""
    import verifiers as vf

    if json.loads(path.read_text())["metadata"].get("kernelspec", {}).get("name", "python3") != "python3":
        pytest.skip(f"{path.name} runs in its own environment")

    tree = parse_notebook(path)
    modules = {**MODULES, **_imported_names(tree)}
    for node in ast.walk(tree):
        chain = _attribute_chain(node) if isinstance(node, ast.Attribute) else None
        if chain and chain[0] in modules:
            assert _resolve(chain, modules) is not None, f"{'.'.join(chain)} does not exist"
        if isinstance(node, ast.Call):
            func_chain = _attribute_chain(node.func)
            if func_chain == ["helpers", "in_worker_thread"] and node.args:  # in_worker_thread(env.evaluate, ...)
                func_chain = _attribute_chain(node.args[0]) or func_chain
                target = getattr(vf.Environment, func_chain[-1])
            elif func_chain and func_chain[0] in modules:
                target = _resolve(func_chain, modules)
            elif func_chain and func_chain[-1] in ("evaluate", "generate"):  # env.evaluate(...)
                target = getattr(vf.Environment, func_chain[-1])
            else:
                continue
            for keyword in node.keywords:
                if keyword.arg:
                    assert _accepts(target, keyword.arg), \
                        f"{'.'.join(func_chain)}() has no keyword {keyword.arg!r} in the pinned version"
        if isinstance(node, ast.ImportFrom) and node.module == "gsm8k_course":
            import gsm8k_course
            for alias in node.names:
                assert hasattr(gsm8k_course, alias.name), f"gsm8k_course has no {alias.name}"


def test_helpers_exports_exist():
    for name in dir(helpers):
        assert hasattr(helpers, name), name


def test_importing_a_corner_of_helpers_does_not_import_the_notebook_stack():
    """The GPU trainer imports helpers.tracing.session on a machine with no matplotlib or IPython (issue 23), and
    a verifiers 0.4 environment imports the trace store, where verifiers' v0 API does not exist."""
    code = ("import sys, helpers.tracing.session, helpers.tracing.store; "
            "print(sorted(m for m in ('matplotlib', 'IPython', 'gsm8k_course', 'helpers.eval_views') if m in "
            "sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_ruff_clean():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "helpers", "tests", "notebooks",
                             "environments", "scripts", "benchmarks", "training", "workshop"],
                            cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- Google Colab


def colab_cell(path: Path) -> str:
    return "".join(next(c for c in cells(path) if c["cell_type"] == "code")["source"])


COLAB_NOTEBOOKS = [p for p in NOTEBOOKS if p.name not in NOTEBOOKS_IN_THEIR_OWN_ENVIRONMENT]


def test_every_notebook_starts_with_the_same_colab_cell_and_badge():
    first = colab_cell(NOTEBOOKS[0])
    assert '"google.colab" in sys.modules' in first
    for path in COLAB_NOTEBOOKS:
        assert colab_cell(path) == first, f"{path.name}: its first code cell is not the Colab install cell"
        header = "".join(cells(path)[0]["source"])
        assert "colab.research.google.com/github/" in header and f"notebooks/{path.name})" in header
    readme = (ROOT / "README.md").read_text()
    assert "colab-badge.svg" in readme


def test_the_colab_cell_does_nothing_elsewhere(monkeypatch):
    import os

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"ran {a} outside Colab"))
    monkeypatch.setattr(os, "chdir", lambda *a: pytest.fail("changed folder outside Colab"))
    path_before = list(sys.path)
    exec(compile(colab_cell(NOTEBOOKS[0]), "colab-cell", "exec"), {})  # noqa: S102 - the notebook's own cell
    assert sys.path == path_before


def _run_colab_cell(monkeypatch, source: str):
    import os
    import types

    ran, moved = [], []
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", lambda args, **k: ran.append(args))
    monkeypatch.setattr(os, "chdir", moved.append)
    monkeypatch.setattr(os.path, "isdir", lambda path: False)  # a fresh Colab runtime
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(source, "colab-cell", "exec"), {})  # noqa: S102 - the notebook's own cell
    return ran, moved


def test_on_colab_the_placeholder_says_what_to_set_instead_of_cloning(monkeypatch):
    from helpers.paths import COURSE_REPO

    if COURSE_REPO != "OWNER/REPO":
        pytest.skip("the course names its repository")
    with pytest.raises(SystemExit, match="set_course_repo.py"):
        _run_colab_cell(monkeypatch, colab_cell(NOTEBOOKS[0]))


def test_on_colab_the_cell_clones_installs_and_makes_the_course_importable(monkeypatch, tmp_path):
    """With the repository named (by scripts/set_course_repo.py, run here on a copy of the files it edits)."""
    import shutil

    copy = tmp_path / "course"
    for part in ("README.md", "helpers/paths.py", "scripts/set_course_repo.py",
                 *[f"notebooks/{p.name}" for p in COLAB_NOTEBOOKS]):
        (copy / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, copy / part)
    subprocess.run([sys.executable, str(copy / "scripts" / "set_course_repo.py"), "my-org/my-course"], cwd=copy,
                   check=True, capture_output=True)
    for path in (copy / "notebooks").glob("*.ipynb"):
        text = path.read_text()
        for copy_of_it in ('\\"OWNER/REPO\\"', "github/OWNER/REPO", "github.com/OWNER/REPO"):
            assert copy_of_it not in text, (path.name, copy_of_it)
    assert "OWNER/REPO" not in (copy / "README.md").read_text().split("<sub>")[0]
    assert 'COURSE_REPO = "my-org/my-course"' in (copy / "helpers" / "paths.py").read_text()
    ran, moved = _run_colab_cell(monkeypatch, colab_cell(copy / "notebooks" / NOTEBOOKS[0].name))
    assert ran[0] == ["git", "clone", "--depth", "1", "https://github.com/my-org/my-course",
                      "/content/verifiers-course"]
    assert ran[1] == ["bash", "/content/verifiers-course/scripts/setup_colab.sh"]
    assert moved == ["/content/verifiers-course/notebooks"] and sys.path[0] == "/content/verifiers-course"
    script = (ROOT / "scripts" / "setup_colab.sh").read_text()
    assert "requirements-colab.txt" in script and "torch" not in pins(ROOT / "requirements-colab.txt")


def test_every_copy_of_the_repository_path_agrees():
    from helpers.paths import COURSE_REPO

    readme = (ROOT / "README.md").read_text()
    assert f"gh/{COURSE_REPO}/" in readme and f"github/{COURSE_REPO}/" in readme
    for path in COLAB_NOTEBOOKS:
        assert f'COURSE_REPO = "{COURSE_REPO}"' in colab_cell(path), path.name
        assert f"colab.research.google.com/github/{COURSE_REPO}/blob/main/notebooks/{path.name}" in \
            "".join(cells(path)[0]["source"]), path.name


def test_colab_pins_are_the_cpu_stacks_own():
    cpu, colab = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-colab.txt")
    assert {name: cpu.get(name) for name in colab} == colab, \
        "requirements-colab.txt must pin what requirements.txt pins"


def test_notebooks_load_no_image_from_the_web():
    """An image URL in a notebook is fetched by the learner's browser as soon as it opens the notebook."""
    for path in NOTEBOOKS:
        for cell in cells(path):
            source = "".join(cell["source"])
            assert not re.search(r"!\[[^\]]*\]\(https?://", source), f"{path.name}: a web image in a cell"
            assert not re.search(r"<img[^>]+src=[\"']https?://", source), f"{path.name}: a web image in a cell"


def test_notebook_02_stays_a_short_core():
    """Issue 40: notebook 02 is the run a learner makes and what it shows, under 30,000 characters of cell source;
    the design history lives in the appendix (notebook 05)."""
    cells = json.loads((ROOT / "notebooks" / "02_traced_grpo_training.ipynb").read_text())["cells"]
    characters = sum(len("".join(cell["source"])) for cell in cells)
    assert characters < 30_000, f"notebook 02 has {characters:,} characters of cell source: move detail to notebook 05"


# ---------------------------------------------------------------- the README, the guide and the pages under docs/

DOCUMENTS = [ROOT / "README.md", ROOT / "INSTRUCTOR_GUIDE.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_and_the_guide_stay_short():
    """Issue 45: the README is what the course is, its two commands, the notebooks and where to go next; the guide is
    what an instructor reads before the day. The provenance, the room, offline installs and sizing live under docs/."""
    for name, limit in (("README.md", 10_000), ("INSTRUCTOR_GUIDE.md", 25_000)):
        size = len((ROOT / name).read_text(encoding="utf-8"))
        assert size <= limit, \
            f"{name} is {size:,} characters, over {limit:,}: move a section to a page under docs/ and link it"


def outside_code_blocks(markdown: str) -> list[str]:
    lines, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped, spaces as hyphens,
    a repeated heading numbered (-1, -2, ...)."""
    anchors: set[str] = set()
    for line in outside_code_blocks(markdown):
        if found := re.match(r"#{1,6}\s+(.+?)\s*#*\s*$", line):
            slug = re.sub(r"[^\w\- ]", "", found[1].strip().lower()).replace(" ", "-")
            anchor, n = slug, 0
            while anchor in anchors:
                n += 1
                anchor = f"{slug}-{n}"
            anchors.add(anchor)
    return anchors


def test_heading_anchors_are_githubs():
    assert heading_anchors("# A room of 20–40 learners: one model server, one hub\n## Notebook 02's `x`\n## Notebook "
                           "02's `x`") \
        == {"a-room-of-2040-learners-one-model-server-one-hub", "notebook-02s-x", "notebook-02s-x-1"}
    assert heading_anchors("```\n# not a heading\n```\n") == set()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_something_that_exists(document):
    """A link in the README, the guide or a page under docs/ names a file or folder of the course; a '#anchor' into a
    markdown file names one of its headings (sections move between these files: a link left behind fails here)."""
    broken = []
    for line in outside_code_blocks(document.read_text(encoding="utf-8")):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            path, _, anchor = target.partition("#")
            where = (document.parent / path).resolve() if path else document
            if not where.exists():
                broken.append(f"{target}: no such file")
            elif anchor and where.suffix == ".md" and anchor not in heading_anchors(where.read_text(encoding="utf-8")):
                broken.append(f"{target}: {where.relative_to(ROOT)} has no heading #{anchor}")
    assert not broken, f"{document.relative_to(ROOT)}: " + "; ".join(broken)

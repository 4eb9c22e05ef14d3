"""Notebook 01 in a real browser: JupyterLab on 127.0.0.1, headless Debian Chromium driven by
Playwright, Run All Cells with the CI parameters, then check what a learner sees: the charts,
the clickable trace-tree widget, and no "Error displaying widget" or Traceback.

Also: a multi-turn rollout's exported trace (notebook 03's feedback environment) opened in the same
Chromium reads as a conversation (model turns, environment replies, raw JSON folded).

Needs /usr/bin/chromium (`bash scripts/install_browser.sh`); skipped without it.
Artifacts: runs/browser/01_traced_gsm8k_eval.png (whole notebook), 01_trace_tree.png and
03_multiturn_trace.png.
"""

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "01_traced_gsm8k_eval.ipynb"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "runs" / "browser"
CI_PARAMETERS = {"num_examples": 4, "rollouts_per_example": 2, "max_tokens": 96}
RUN_TIMEOUT_S = 15 * 60  # the real local model on 2 busy cores
STALL_S = 120  # kernel idle this long with cells still queued: Run All has stalled
TRACE_TREE = ".jp-OutputArea-output .widget-accordion"
CHART = '.jp-OutputArea-output img[src^="data:image/png"]'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason=f"{CHROMIUM} not found; run `bash scripts/install_browser.sh` (as root)"),
]

# Browser flags: no sandbox (root in a container), and nothing that phones home.
CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]

# Reads the open notebook's model (window.jupyterapp, exposed by --LabApp.expose_app_in_browser).
PROGRESS_JS = """(treeSelector) => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model || !panel.sessionContext) return null;
  const session = panel.sessionContext.session;
  const cells = panel.content.model.cells;
  let code = 0, executed = 0, waiting = null;
  const errors = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    code++;
    if (cell.executionCount) executed++;
    else if (waiting === null) waiting = cell.sharedModel.getSource().split('\\n')[0];
    for (let j = 0; j < cell.outputs.length; j++) {
      const out = cell.outputs.get(j);
      if (out.type === 'error') errors.push(JSON.stringify(out.toJSON()).slice(0, 4000));
    }
  }
  return {kernel: session && session.kernel ? session.kernel.status : 'none', code, executed,
          errors, waiting, tree: document.querySelector(treeSelector) !== null};
}"""


def ci_notebook(folder: Path) -> Path:
    """A copy of notebook 01 whose parameters cell holds the CI values (the committed file is untouched)."""
    notebook = json.loads(NOTEBOOK.read_text())
    cell = next(c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", []))
    source = "".join(cell["source"])
    for name, value in CI_PARAMETERS.items():
        source, found = re.subn(rf"^{name}\s*=[^#\n]*", f"{name} = {value!r}  ", source, flags=re.MULTILINE)
        assert found == 1, f"no `{name} = ...` line in notebook 01's parameters cell"
    cell["source"] = source
    path = folder / NOTEBOOK.name
    path.write_text(json.dumps(notebook, indent=1))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 only, never a proxy


def api(base: str, token: str, path: str, method: str = "GET"):
    request = urllib.request.Request(f"{base}{path}", method=method,
                                     headers={"Authorization": f"token {token}"})
    with LOCAL.open(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def wait_for_server(process: subprocess.Popen, base: str, token: str, log: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"jupyter lab exited with code {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            api(base, token, "/api/status")
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"jupyter lab did not answer within 180 s:\n{log.read_text()[-3000:]}")


def stop_server(process: subprocess.Popen, base: str, token: str) -> None:
    """Shut the kernels down cleanly (their llama.cpp servers stop with them), then the server;
    whatever it started and is still alive afterwards is killed by pid."""
    import psutil

    try:
        started = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    try:
        for kernel in api(base, token, "/api/kernels"):
            api(base, token, f"/api/kernels/{kernel['id']}", method="DELETE")
    except OSError as error:
        print(f"browser test: could not shut the kernels down through the API ({error})")
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    _, alive = psutil.wait_procs(started, timeout=10)
    for leftover in alive:
        print(f"browser test: killing leftover process {leftover.pid}")
        leftover.kill()


@pytest.fixture
def jupyter_lab(tmp_path, gsm8k_dir):
    """JupyterLab serving a folder that holds the CI copy of notebook 01; yields (url, token, t0)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    ci_notebook(folder)
    token, port = secrets.token_hex(16), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "GSM8K_DIR": str(gsm8k_dir),  # kernels inherit the server's environment
        "COURSE_RUNS_DIR": str(tmp_path / "runs"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # A fresh Jupyter: no user settings, workspaces or kernels from the developer's home.
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter" / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter" / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter" / "runtime"),
    }
    # Never fetch Jupyter news (and don't show the toast that asks about it).
    settings = tmp_path / "jupyter" / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    log = tmp_path / "jupyter-lab.log"
    command = [
        str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", "--allow-root", f"--ServerApp.root_dir={folder}",
        f"--LabApp.workspaces_dir={tmp_path / 'jupyter' / 'workspaces'}",
        f"--LabApp.user_settings_dir={tmp_path / 'jupyter' / 'settings'}",
        "--LabApp.expose_app_in_browser=True",
        # No calls out: no news feed, no update check, no PyPI extension manager.
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    started = time.monotonic()  # the clock for "jupyter lab start -> first trace tree"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    try:
        wait_for_server(process, base, token, log)
        print(f"\nbrowser test: jupyter lab answered after {time.monotonic() - started:.1f} s")
        yield f"{base}/lab/tree/{NOTEBOOK.name}?token={token}", started
    finally:
        stop_server(process, base, token)
        print(f"browser test: everything stopped {time.monotonic() - started:.1f} s after jupyter lab started")


def test_notebook_01_renders_in_jupyterlab(jupyter_lab, tmp_path):
    from playwright.sync_api import sync_playwright

    url, lab_started = jupyter_lab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "01_traced_gsm8k_eval.png"
    outside = []  # any request that is not to our JupyterLab is recorded and refused

    def refuse(route):
        outside.append(route.request.url)
        route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000},
        )
        page = browser.pages[0] if browser.pages else browser.new_page()
        try:
            browser.route(lambda u: not u.startswith(("http://127.0.0.1:", "ws://127.0.0.1:",
                                                      "data:", "blob:")), refuse)
            page.goto(url, timeout=180_000)

            # Ready when the notebook is open and its kernel is idle.
            page.wait_for_function(f"(tree) => {{ const p = ({PROGRESS_JS})(tree); return p && p.kernel === 'idle'; }}",
                                   arg=TRACE_TREE, timeout=300_000, polling=500)
            print(f"browser test: notebook open, kernel idle after {time.monotonic() - lab_started:.1f} s")

            # Run All Cells the way a learner would: the Run menu.
            page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()

            first_tree_s = None
            deadline = time.monotonic() + RUN_TIMEOUT_S
            last_executed, last_change = -1, time.monotonic()
            while True:
                progress = page.evaluate(PROGRESS_JS, TRACE_TREE)
                if progress["executed"] != last_executed or progress["kernel"] != "idle":
                    last_executed, last_change = progress["executed"], time.monotonic()
                if progress["tree"] and first_tree_s is None:
                    first_tree_s = time.monotonic() - lab_started
                    print(f"browser test: first trace tree rendered {first_tree_s:.1f} s after jupyter lab started")
                assert not progress["errors"], "a cell raised:\n" + "\n".join(progress["errors"])
                if progress["executed"] == progress["code"] and progress["kernel"] == "idle":
                    break
                # Seen with ipykernel 7: a cell that nests the kernel's event loop (verifiers'
                # evaluate uses nest_asyncio) drops the cells queued behind it, silently.
                assert time.monotonic() - last_change < STALL_S, (
                    f"Run All stalled: kernel idle for {STALL_S} s with {progress['code'] - progress['executed']} "
                    f"code cells never run, from `{progress['waiting']}` on ({progress})")
                assert time.monotonic() < deadline, f"notebook still running after {RUN_TIMEOUT_S} s: {progress}"
                time.sleep(1)
            print(f"browser test: all {progress['code']} code cells ran; "
                  f"{time.monotonic() - lab_started:.1f} s after jupyter lab started")
            page.wait_for_timeout(1000)  # let the last outputs paint

            outputs = page.locator(".jp-OutputArea-output")
            text = "\n".join(outputs.all_text_contents())
            stderr = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
            for line in stderr.all_text_contents():
                print(f"browser test: stderr shown in the notebook: {line.strip()[:300]}")
            assert "Error displaying widget" not in text
            assert "Traceback" not in text
            assert page.locator(CHART).count() >= 2, "the reward charts did not render as PNG images"
            # GSM8K questions hold dollar amounts; tables must show them as text, not typeset math.
            assert "$" in "".join(page.locator(".jp-OutputArea-output table").all_text_contents())
            assert page.locator(".jp-OutputArea-output table mjx-container").count() == 0, (
                "MathJax typeset a '$...$' span in a table: pandas' display.html.use_mathjax should be off")

            # The trace tree: rendered, titled by calls, and it opens when clicked.
            tree = page.locator(TRACE_TREE).first
            tree.scroll_into_view_if_needed()
            assert "rollout" in tree.text_content()
            closed = tree.locator(".jupyter-widget-Collapse:not(.jupyter-widget-Collapse-open) "
                                  "> .jupyter-widget-Collapse-header").first
            title = closed.text_content()
            closed.click()
            opened = tree.locator(".jupyter-widget-Collapse-open > .jupyter-widget-Collapse-header",
                                  has_text=title)
            opened.first.wait_for(timeout=10_000)
            # The click went to the kernel as a widget message; it must survive it.
            page.wait_for_timeout(5000)
            assert page.locator(".jp-Dialog").count() == 0, page.locator(".jp-Dialog").first.inner_text()
            assert page.evaluate(PROGRESS_JS, TRACE_TREE)["kernel"] == "idle"
            tree.evaluate("node => node.scrollIntoView({block: 'start'})")
            page.screenshot(path=ARTIFACTS / "01_trace_tree.png")
            assert outside == [], f"the page tried to reach outside 127.0.0.1: {outside}"
        finally:
            full_page_screenshot(page, screenshot)
            browser.close()
    print(f"browser test: screenshots in {screenshot.parent}")


def full_page_screenshot(page, path: Path) -> None:
    from playwright.sync_api import Error as PlaywrightError

    """JupyterLab scrolls inside the notebook panel, so grow the window to the notebook's
    height (capped) to get every cell into one picture."""
    measure = """() => { const s = document.querySelector('.jp-WindowedPanel-outer');
                         if (!s) return 0; s.scrollTop = 0; return s.scrollHeight; }"""
    try:
        # Offscreen cells are laid out with estimated heights; grow until the height settles.
        height = 0
        for _ in range(6):
            new_height = min(page.evaluate(measure) + 200, 30000)
            if new_height <= height:
                break
            height = new_height
            page.set_viewport_size({"width": 1400, "height": max(1000, height)})
            page.wait_for_timeout(1500)
        page.screenshot(path=path, full_page=True)
    except PlaywrightError as error:  # a screenshot must never hide the test's real failure
        print(f"browser test: no screenshot ({error})")


# A traced multi-turn rollout (notebook 03's feedback environment, with its env_response traced as in
# the notebook), exported as HTML. 24 tokens at temperature 0: the first answer has no '####' number,
# so the environment replies and the model takes a second turn.
MULTITURN_WRITER = """
import os, sys
import openai, weave
from gsm8k_feedback import SYSTEM_PROMPT, FeedbackEnv, FinalAnswerParser, load_gsm8k, make_rubric
from helpers.tracing.views import calls_table, export_trace_html
from helpers.tracing.session import init_tracing


class TracedFeedbackEnv(FeedbackEnv):
    @weave.op
    async def env_response(self, messages, state, **kwargs):
        return await super().env_response(messages, state, **kwargs)


init_tracing("browser-multiturn", quiet=True)
parser = FinalAnswerParser()
env = TracedFeedbackEnv(max_turns=2, eval_dataset=load_gsm8k("test", 1, 0), system_prompt=SYSTEM_PROMPT,
                        parser=parser, rubric=make_rubric(parser))
client = openai.OpenAI(base_url=sys.argv[1], api_key=os.environ["COURSE_TEST_KEY"])
env.evaluate(client, sys.argv[2], sampling_args={"max_tokens": 24, "temperature": 0}, num_examples=1)
rollout = calls_table(op="MultiTurnEnv.rollout").iloc[-1]
print("PAGE=" + str(export_trace_html(rollout["call_id"], sys.argv[3])))
"""


def test_multiturn_trace_reads_as_a_conversation(local_server, tmp_path):
    from playwright.sync_api import sync_playwright

    page_path = tmp_path / "multiturn.html"
    env = {**os.environ, "COURSE_RUNS_DIR": str(tmp_path / "runs"), "PYTHONPATH": str(ROOT),
           "COURSE_TEST_KEY": local_server.api_key}
    written = subprocess.run([sys.executable, "-c", MULTITURN_WRITER, local_server.base_url, local_server.alias,
                              str(page_path)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
                             stdin=subprocess.DEVNULL, check=False)
    assert written.returncode == 0 and page_path.is_file(), written.stderr[-3000:]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    outside = []

    def refuse(route):
        outside.append(route.request.url)
        route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            page.route(lambda u: not u.startswith(("file://", "data:")), refuse)
            page.goto(page_path.as_uri())
            rollout = page.locator("details.node").first  # the rollout, open
            messages = rollout.locator(":scope > .tvc .msg")
            roles = [m.get_attribute("class").split()[-1] for m in messages.all()]
            assert roles.count("assistant") == 2 and "environment" in roles, roles
            assert roles.index("user") < roles.index("assistant") < roles.index("environment"), roles
            assert rollout.locator(":scope > .tvc .badges .reward").first.inner_text().startswith("reward")
            text = page.locator("body").inner_text()  # what is rendered: folded raw JSON is not
            assert "assistant · turn 2" in text.lower() and "Not yet" in text
            for internal in ("_bases", "_class_name", "\"_type\""):
                assert internal not in text, f"{internal} shown outside the raw JSON"
            # the model calls and the environment's reply are the rollout's children, titled by what they said
            titles = rollout.locator(":scope > details.node > summary").all_inner_texts()
            assert sum("get_model_response" in t for t in titles) == 2 and any("env_response" in t for t in titles)
            page.screenshot(path=ARTIFACTS / "03_multiturn_trace.png", full_page=True)
            raw = rollout.locator(":scope > .tvc > details > summary", has_text="raw JSON").first
            raw.click()
            assert "\"inputs\"" in rollout.locator(":scope > .tvc > details > pre.raw").first.inner_text()
        finally:
            browser.close()
    assert outside == [], f"the page tried to reach outside: {outside}"

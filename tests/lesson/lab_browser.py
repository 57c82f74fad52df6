"""JupyterLab under headless Chromium: a notebook as a learner sees it, for the browser test.

``jupyterlab(root, tmp)`` serves ``root`` on a free loopback port with its settings, runtime
and workspaces in ``tmp``; ``chromium(tmp)`` drives Debian's chromium through chromedriver.
Both end what they started in ``finally``, whatever happened, kernels included.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shop_fixtures import free_port

from lucyshop.lab.services.processes import processes_mentioning

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
# Chromium as root, without a GPU, a network beyond loopback, or a profile of its own.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
)
TOKEN = "ch13-browser-test"
START_SECONDS = 300.0  # far past a start beside 8 CPU burners: a backstop, not a measure
STOP_SECONDS = 20.0
POLL = 0.2  # seconds between looks at the server and the page


def missing() -> str | None:
    """Why the browser test cannot run here, or None when it can."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        return "no chromium/chromedriver (apt-get install -y chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def _settings(tmp: Path) -> Path:
    """Every cell rendered at once (JupyterLab 4 renders only what is in view by default)."""
    folder = tmp / "settings" / "@jupyterlab" / "notebook-extension"
    folder.mkdir(parents=True)
    tracker = {"windowingMode": "none"}
    (folder / "tracker.jupyterlab-settings").write_text(json.dumps(tracker))
    return tmp / "settings"


@contextmanager
def jupyterlab(root: Path, tmp: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """A JupyterLab server on ``root`` (its kernels get ``env`` too); yields its URL. The app
    is exposed to the page as ``window.jupyterapp``, so a test can run its commands."""
    port = free_port()
    env = (
        os.environ
        | (env or {})
        | {
            "JUPYTERLAB_SETTINGS_DIR": str(_settings(tmp)),
            "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
            "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        }
    )
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log_path = tmp / "jupyterlab.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_up(url, server, log_path)
        yield url
    finally:
        _stop(server, marker=str(tmp))


def _wait_until_up(url: str, server: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2):
                return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"JupyterLab did not start within {START_SECONDS:g}s:\n"
                    + log_path.read_text()[-2000:]
                ) from None
            time.sleep(POLL)


def _stop(server: subprocess.Popen, marker: str) -> None:
    """SIGTERM (the server shuts its kernels down), then SIGKILL whatever is left: the server's
    group and any kernel that names this run's runtime folder."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=STOP_SECONDS)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    for line in processes_mentioning(marker):
        try:
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


@contextmanager
def chromium(tmp: Path) -> Iterator[object]:
    """A selenium driver of headless chromium with a fresh profile in ``tmp``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (*CHROMIUM_ARGS, f"--user-data-dir={tmp / 'chromium-profile'}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# What the notebook in view shows (other tabs stay in the page, hidden): diagrams drawn as
# SVG, and images that decoded.
SEEN = """
const page = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
if (!page) { return {title: '', cells: 0, diagrams: 0, svg: 0, images: 0}; }
const diagrams = Array.from(page.querySelectorAll('.jp-RenderedMermaid'));
const svg = diagrams.filter(d =>
  d.querySelector('svg') || Array.from(d.querySelectorAll('img')).some(
    i => i.src.startsWith('data:image/svg+xml') && i.complete && i.naturalWidth > 0));
const images = Array.from(page.querySelectorAll('.jp-RenderedImage img'))
  .filter(i => i.complete && i.naturalWidth > 0);
const tab = document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current');
return {title: tab ? tab.textContent.trim() : '',
        cells: page.querySelectorAll('.jp-Notebook .jp-Cell').length,
        diagrams: diagrams.length, svg: svg.length, images: images.length};
"""


def seen(driver: object, url: str, notebook: str, want: dict, timeout: float) -> dict:
    """Open ``notebook`` and wait until the page shows ``want`` (or the deadline); the counts."""
    driver.get(f"{url}/lab/tree/{notebook}?token={TOKEN}")
    deadline = time.monotonic() + timeout
    while True:
        counts = driver.execute_script(SEEN)
        if counts.pop("title", "") != notebook:  # still the previous notebook's page
            counts = {"cells": 0, "diagrams": 0, "svg": 0, "images": 0}
        done = counts["cells"] >= want["cells"] and counts["svg"] >= want["svg"]
        if (done and counts["images"] >= want["images"]) or time.monotonic() > deadline:
            return counts
        time.sleep(POLL)


# The notebook in view. A headless page need not hold focus, and then JupyterLab's shell has no
# current widget although the notebook is open in its main area (beside the notebooks opened
# before it, which the workspace keeps): take the one the page's address names.
PANEL = """
const inView = app => app && (app.shell.currentWidget || Array.from(app.shell.widgets('main'))
  .find(widget => widget.sessionContext && widget.context
        && decodeURIComponent(window.location.pathname).endsWith('/' + widget.context.path))
  || null);
"""

# JupyterLab's own Run All on the notebook in view, from cleared outputs: the kernel is
# waited for, then every output and execution count is cleared, then the cells are run.
RUN_ALL = (
    PANEL
    + """
const done = arguments[arguments.length - 1];
const app = window.jupyterapp;
const panel = inView(app);
if (!panel || !panel.sessionContext) { done('no notebook in view'); return; }
panel.sessionContext.ready
  .then(() => app.commands.execute('notebook:clear-all-cell-outputs'))
  .then(() => { app.commands.execute('notebook:run-all-cells'); done('started'); })
  .catch(error => done('error: ' + error));
"""
)

# What the run left: code cells not executed, error outputs (name: value), the kernel's status.
RAN = (
    PANEL
    + """
const panel = inView(window.jupyterapp);
const cells = panel.content.model.cells;
let unexecuted = 0; const errors = [];
for (let i = 0; i < cells.length; i++) {
  const cell = cells.get(i);
  if (cell.type !== 'code') { continue; }
  if (cell.executionCount === null) { unexecuted += 1; }
  for (let j = 0; j < cell.outputs.length; j++) {
    const output = cell.outputs.get(j).toJSON();
    if (output.output_type === 'error') { errors.push(output.ename + ': ' + output.evalue); }
  }
}
const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
return {unexecuted: unexecuted, errors: errors, status: kernel ? kernel.status : 'none'};
"""
)

SAVE = """
const done = arguments[arguments.length - 1];
window.jupyterapp.commands.execute('docmanager:save').then(() => done('saved'), e => done('' + e));
"""


def run_all(driver: object, timeout: float, settle: float = 15.0) -> dict:
    """Run All on the notebook in view; wait until every code cell has run, or the kernel has
    sat idle for ``settle`` seconds with cells left (Run All stopped), or the deadline. What
    the run left (``RAN``), and then the page's counts (``SEEN``); the copy is saved, so that
    leaving the page asks nothing."""
    driver.set_script_timeout(60)
    started = driver.execute_async_script(RUN_ALL)
    if started != "started":
        raise RuntimeError(f"Run All did not start: {started}")
    deadline = time.monotonic() + timeout
    idle_since = None
    while True:
        time.sleep(POLL * 5)
        ran = driver.execute_script(RAN)
        if ran["unexecuted"] == 0 and ran["status"] == "idle":
            break
        idle = ran["status"] == "idle"
        idle_since = (idle_since or time.monotonic()) if idle else None
        if (idle_since and time.monotonic() - idle_since > settle) or time.monotonic() > deadline:
            break
    time.sleep(POLL * 10)  # the last outputs render
    counts = driver.execute_script(SEEN)
    driver.execute_async_script(SAVE)
    return {**ran, **{k: counts[k] for k in ("cells", "diagrams", "svg", "images")}}


# Whether the notebook in view has unsaved changes once its kernel is up (JupyterLab rewrites
# the kernelspec's display name, and folded cells' metadata, when they differ from its own).
DIRTY = (
    PANEL
    + """
const done = arguments[arguments.length - 1];
const panel = inView(window.jupyterapp);
panel.sessionContext.ready
  .then(() => new Promise(wait => setTimeout(wait, 2000)))
  .then(() => done(panel.context.model.dirty), e => done('error: ' + e));
"""
)


def dirty(driver: object) -> object:
    """True when the notebook in view opened "dirty" (an asterisk on its tab, a save prompt)."""
    driver.set_script_timeout(120)
    return driver.execute_async_script(DIRTY)

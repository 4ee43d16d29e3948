"""Editing a chapter as a notebook (``make lab`` / ``make notebook``): a Jupyter server opens each
``book/NN_subject.md`` through jupytext and saves it back unchanged.

A real Jupyter server (the one JupyterLab and Notebook run on, with the jupytext extension the
installation enables) is started on a copy of the repository's chapters -- once at the
repository's root, as ``make lab`` starts it, and once in ``book/``, as a reader who types
``jupyter lab`` there does -- and every chapter is read (GET) and written back unedited (PUT)
through its contents API, exactly as the editor's "save" does -- after setting the notebook's
``kernelspec`` (and ``language_info``) as JupyterLab and Notebook do once its kernel has started
(they write the running kernel's name, display name and language).  The saved file must equal
the source byte for byte."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
from tools import book

TOKEN = "rnnbook-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(port, method, path, body=None, api="contents"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/{api}/{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """The chapters and every jupytext configuration file of the repository, copied where they
    stand (a save cannot touch the real sources)."""
    import jupyter_server  # noqa: F401  (the test extra installs it; make lab runs on it)
    copy = tmp_path_factory.mktemp("repository")
    (copy / "book").mkdir()
    for src in book.chapters():
        shutil.copy(src, copy / "book" / src.name)
    for config in [*ROOT.glob("jupytext.toml"), *ROOT.glob("book/jupytext.toml"), *ROOT.glob(".jupytext*"),
                   *ROOT.glob("book/.jupytext*")]:
        shutil.copy(config, copy / config.relative_to(ROOT))
    return copy


@pytest.fixture(scope="module", params=["repository root", "book/"])
def server(request, repository):
    root = repository if request.param == "repository root" else repository / "book"
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyter_server", f"--ServerApp.root_dir={root}", f"--ServerApp.port={port}",
           "--ServerApp.ip=127.0.0.1", "--ServerApp.open_browser=False", f"--IdentityProvider.token={TOKEN}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")               # what make lab passes when it runs as root
    log = open(repository / f"server-{port}.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    t0 = time.time()
    while True:
        try:
            _request(port, "GET", "")
            break
        except (urllib.error.URLError, ConnectionError, OSError):
            if proc.poll() is not None or time.time() - t0 > 120:
                proc.kill()
                pytest.fail(f"the Jupyter server did not start:\n{(repository / f'server-{port}.log').read_text()[-3000:]}")
            time.sleep(0.5)
    prefix = "book/" if root == repository else ""
    yield port, prefix, repository / "book"
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.mark.parametrize("src", book.chapters(), ids=lambda p: p.stem)
def test_saving_an_unedited_chapter_changes_nothing(server, src):
    port, prefix, folder = server
    path = prefix + src.name
    model = _request(port, "GET", f"{path}?type=notebook&content=1")
    assert model["type"] == "notebook" and model["content"]["cells"], f"{path} did not open as a notebook"
    # what the editor writes into the notebook when the kernel named by its kernelspec starts
    name = model["content"]["metadata"]["kernelspec"]["name"]
    spec = _request(port, "GET", "", api="kernelspecs")["kernelspecs"][name]["spec"]
    model["content"]["metadata"]["kernelspec"] = {"name": name, "display_name": spec["display_name"],
                                                  "language": spec["language"]}
    model["content"]["metadata"]["language_info"] = {"name": "python", "version": sys.version.split()[0],
                                                     "mimetype": "text/x-python", "file_extension": ".py"}
    _request(port, "PUT", path, {"type": "notebook", "format": "json", "content": model["content"]})
    saved = (folder / src.name).read_bytes()
    original = src.read_bytes()
    if saved != original:
        import difflib

        diff = "".join(difflib.unified_diff(original.decode().splitlines(True), saved.decode().splitlines(True),
                                            "source", "saved", n=0))
        shutil.copy(src, folder / src.name)      # the next server sees the source again
        pytest.fail(f"saving {src.name} unedited through the server changed it:\n{diff[:3000]}")

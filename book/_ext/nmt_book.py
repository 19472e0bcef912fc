"""The book's own Sphinx extension (``_config.yml``: ``sphinx.local_extensions``): two repairs to
Jupyter Book 1.x's defaults, nothing that changes what a page says.

* **The kernel.** The build executes the chapters in a ``python3`` kernel of the interpreter that
  runs the build (the project's environment), started quietly: ipykernel logs a notice about TCP
  at every start, which reads like a warning of the build. The kernel spec lives in a temporary
  directory put first on ``JUPYTER_PATH`` (as ``tools/notebooks.py`` does for papermill).
* **Scripts added twice.** sphinx-thebe adds its configuration script (``const THEBE_JS_URL =
  ...``) to the page a second time, and the second copy throws "Identifier 'THEBE_JS_URL' has
  already been declared" in the browser: every script is kept once.
* **The translator's model.** The alignments chapter writes the model that its translator loads
  (``nmt-translator-*.mjs``, :mod:`nmt_experiments.pages.translator`) into the repository's ``book/_static``;
  a build of a copy of the book (``tests/test_book.py``) gets it in its ``_static`` too.
* **The labs' student notebooks.** Each lab's page links its student notebook with ``{download}``
  (``../_build/labs/<lab>.ipynb``), which must exist before the pages are read: the build writes
  them there first, from the same sources (:mod:`nmt_experiments.pages.labs.student`, as
  ``tools/labs.py`` does), and Sphinx copies them into the HTML's ``_downloads``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path


def _quiet_kernel() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="nmt-book-kernel-"))
    atexit.register(shutil.rmtree, tmp, True)
    spec = tmp / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [
        sys.executable,
        "-m",
        "ipykernel_launcher",
        "-f",
        "{connection_file}",
        "--IPKernelApp.log_level=CRITICAL",
    ]
    kernel = {"argv": argv, "display_name": "Python 3 (nmt_lib)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(tmp), os.environ.get("JUPYTER_PATH")])
    )


def _scripts_once(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    # Sphinx's _JavaScript (or a file name); an inline script's file is None or "" (the twins)
    for js in scripts:
        attributes = sorted(getattr(js, "attributes", {}).items())
        key = (str(getattr(js, "filename", js) or ""), repr(attributes))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    scripts[:] = kept


def _translator_models(app, exception) -> None:
    if exception or app.builder.format != "html":
        return
    from nmt_lib.config import home

    out = Path(app.outdir) / "_static"
    for f in (home() / "book" / "_static").glob("nmt-translator-*.mjs"):
        if not (out / f.name).exists():
            shutil.copy2(f, out / f.name)


def _student_notebooks(app) -> None:
    from nmt_experiments.pages.labs.student import write_all

    book = Path(app.srcdir)
    write_all(book / "_build" / "labs", book.resolve().parent)


def setup(app):
    _quiet_kernel()
    app.connect("builder-inited", _student_notebooks)
    app.connect("html-page-context", _scripts_once)
    app.connect("build-finished", _translator_models)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

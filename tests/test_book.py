"""The book end to end, as a reader gets it.

(a) every notebook through papermill in replicate (train) mode on the smoke profile, into a temporary
results directory; (b) the strict book build (``-W -n --keep-going``) from those executed notebooks;
(c) the built pages in a real headless browser (Debian's chromium), with the network cut: pages load,
MathJax (served from the build) typesets every formula, every image loads, internal links resolve;
screenshots of three pages. All of it happens in a temporary copy of the tree (:func:`tree`): the
user's ``book/_nb`` and ``book/_build`` are left alone.

Slow (minutes): deselect during development with ``-m "not book"``; it runs by default.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from nmt_lib import replicate
from nmt_lib.checkpoint import default_checkpoint_dir
from nmt_lib.paper import MODELS
from nmt_lib.results import run_dir
from tools import notebooks as runner

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"
CHROMIUM = "/usr/bin/chromium"
PNG = b"\x89PNG\r\n\x1a\n"
TIMES: dict[str, float] = {}


def toc_pages() -> list[str]:
    """Every page of the book, as paths relative to the HTML root (``_nb/04_alignment.html``)."""
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [c["file"] for p in toc["parts"] for c in p["chapters"]]
    return [f"{f}.html" for f in files]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A temporary stand-in for the repository: ``book/`` copied (without its build and executed
    notebooks), every other top-level entry linked, so that the book's relative includes resolve."""
    tmp = tmp_path_factory.mktemp("tree")
    for entry in ROOT.iterdir():
        if entry.name not in ("book", ".git"):
            (tmp / entry.name).symlink_to(entry)
    shutil.copytree(
        BOOK, tmp / "book", symlinks=True, ignore=shutil.ignore_patterns("_build", "_nb")
    )
    return tmp


@pytest.fixture(scope="module")
def results(tree, tmp_path_factory):
    """(a) ``python tools/notebooks.py --profile smoke --train --jobs 2`` (two models at a time,
    one process each) into a temporary results dir, the executed notebooks into the stand-in
    tree's ``book/_nb``."""
    out = tmp_path_factory.mktemp("results") / "smoke"
    t0 = time.time()
    cmd = [
        sys.executable,
        str(ROOT / "tools" / "notebooks.py"),
        "--profile",
        "smoke",
        "--train",
        "--jobs",
        "2",
    ]
    r = subprocess.run(
        [*cmd, "--results-dir", str(out), "--out-dir", str(tree / "book" / "_nb")],
        cwd=ROOT, capture_output=True, text=True, timeout=480,
    )  # fmt: skip
    TIMES["notebooks smoke --train"] = time.time() - t0
    assert r.returncode == 0, f"notebooks failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    done = re.findall(r"^\[notebooks\] \d+/\d+ \S+ ok in", r.stdout, re.MULTILINE)
    assert len(done) == len(runner.notebooks()), r.stdout
    yield out
    for name, run in replicate.load("smoke").runs.items():  # its checkpoints, outside the results
        shutil.rmtree(ROOT / default_checkpoint_dir(run, run_dir(out, name)), True)


@pytest.fixture(scope="module")
def html(results, tree) -> Path:
    """(b) The strict build of every page, from the notebooks just executed, in the stand-in tree."""
    t0 = time.time()
    cmd = [str(JUPYTER_BOOK), "build", "-W", "-n", "--keep-going", "--all", "book"]
    r = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=420)
    TIMES["jupyter-book build"] = time.time() - t0
    log = r.stdout + r.stderr
    assert r.returncode == 0 and "WARNING" not in log, log[-6000:]
    return tree / "book" / "_build" / "html"


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium, installed with apt-get if missing and we are root; else skip."""
    if not Path(CHROMIUM).exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], capture_output=True, timeout=300, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "chromium"], capture_output=True, timeout=600, env=env
        )
    if not Path(CHROMIUM).exists():
        pytest.skip(
            "the browser checks did not run: Debian's chromium is missing and could not be "
            "installed (`apt-get install -y chromium` needs root and the Debian archive)"
        )
    return CHROMIUM


def browse(exe: str, tmp: Path, *args: str, timeout: int = 180) -> str:
    """Run headless chromium with a fresh profile and no network; returns stdout."""
    profile = tmp / f"profile-{time.monotonic_ns()}"
    cmd = [
        exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", *args,
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


# ------------------------------------------------------------------------------------ (a) results
def test_replicate_mode_writes_the_results_layout(results):
    manifest = json.loads((results / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["profile"] == "smoke" and manifest["runs"] == list(MODELS)
    for key in ("git", "configs", "data_sha256", "hardware", "versions", "wall_seconds"):
        assert manifest[key], key
    assert set(manifest["sacrebleu_signatures"]) == {"tok", "detok"}
    assert set(manifest["hardware"]["precision_per_run"].values()) == {"fp32"}  # smoke's
    for name in MODELS:
        run = run_dir(results, name)
        assert json.loads((run / "bleu.json").read_text(encoding="utf-8"))["precision"] == "fp32"
        for f in ("config.json", "train_log.jsonl", "train_summary.json", "bleu.json",
                  "hyp.test.tok.txt", "hyp.test.detok.txt", "bleu_by_length.json", "nll.json",
                  "attention.json"):  # fmt: skip
            assert (run / f).is_file(), run / f
    for f in ("table1.csv", "table1.md", "table2.csv", "table2.md", "long_sentences.md",
              "data_summary.json"):  # fmt: skip
        assert (results / f).stat().st_size > 0, f
    for f in ("fig2_bleu_by_length.png", "fig3_alignments.png"):
        assert (results / f).read_bytes()[:8] == PNG, f
    assert not list(results.rglob("*.pt")), "checkpoints must not land in the results"
    att = json.loads((run_dir(results, "RNNsearch-50") / "attention.json").read_text())
    assert att[0]["found"] is False and att[0]["alpha"]  # Figure 3 (a), translated from its words
    assert len(att) > 7  # (a)-(d), three by Figure 3's rule, and the alignment explorer's


# -------------------------------------------------------------------------------------- (b) build
def test_every_page_is_built(html):
    for page in toc_pages():
        assert (html / page).is_file(), page
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax is not in the build"
    for page in toc_pages():
        text = (html / page).read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]+src=\"https?://", text), f"{page} loads a remote script"


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key) and (tag != "link" or a.get("rel") != "preconnect"):
                self.refs.append(a[key])


def _parse(path: Path) -> _Refs:
    p = _Refs()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def test_internal_links_resolve(html):
    pages = [p for p in html.rglob("*.html") if "_static" not in p.relative_to(html).parts]
    parsed = {p: _parse(p) for p in pages}  # _static/ holds the theme's templates, not pages
    bad = []
    for page, p in parsed.items():
        for ref in p.refs:
            u = urlsplit(ref)
            if u.scheme or ref.startswith(("//", "#", "mailto:")) or not u.path:
                continue
            target = (page.parent / unquote(u.path)).resolve()
            if not target.exists():
                bad.append(f"{page.relative_to(html)} -> {ref}")
            elif u.fragment and target.suffix == ".html" and target in parsed:
                if u.fragment not in parsed[target].ids:
                    bad.append(f"{page.relative_to(html)} -> {ref} (no such anchor)")
    assert not bad, "\n".join(bad[:30])


# ------------------------------------------------------------------------------------ (c) browser
CHECK = """<!DOCTYPE html><html><body><pre id="out">pending</pre><script>
const pages = PAGES, results = {};
let k = 0;
function inspect(d) {
  const body = d.body.cloneNode(true);
  body.querySelectorAll("pre, code, script, style, mjx-container, .highlight")
      .forEach(e => e.remove());
  const text = body.textContent;
  return {
    title: d.title,
    images: [...d.images].map(i => [i.getAttribute("src"), i.complete ? i.naturalWidth : 0]),
    mathjax: d.querySelectorAll("mjx-container").length,
    raw: ["$$", "\\\\(", "\\\\["].filter(s => text.includes(s)),
  };
}
function next() {
  if (k >= pages.length) {
    document.getElementById("out").textContent = "RESULTS" + JSON.stringify(results);
    return;
  }
  const f = document.createElement("iframe");
  f.onload = () => setTimeout(() => {
    try { results[pages[k]] = inspect(f.contentDocument); }
    catch (e) { results[pages[k]] = {error: String(e)}; }
    f.remove(); k++; next();
  }, 5000);
  f.src = pages[k];
  document.body.appendChild(f);
}
next();
</script></body></html>
"""


def test_pages_render_in_a_browser(html, chromium, tmp_path):
    """Each page in an iframe of a check page: loaded, math typeset by the local MathJax (no
    ``$$``, ``\\(`` or ``\\[`` left outside code), every image decoded (naturalWidth > 0)."""
    pages = toc_pages()
    check = html / "_check_pages.html"
    check.write_text(CHECK.replace("PAGES", json.dumps(pages)), encoding="utf-8")
    t0 = time.time()
    try:
        out = browse(chromium, tmp_path, "--allow-file-access-from-files",
                     "--virtual-time-budget=300000", "--dump-dom", check.as_uri())  # fmt: skip
    finally:
        check.unlink()
    TIMES["browser checks"] = time.time() - t0
    found = re.search(r"RESULTS(\{.*\})</pre>", out)
    assert found, f"the check page did not finish:\n{out[-2000:]}"
    res = json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    problems = []
    for page in pages:
        r = res.get(page, {"error": "not inspected"})
        if "error" in r:
            problems.append(f"{page}: {r['error']}")
            continue
        if not r["title"]:
            problems.append(f"{page}: did not load (no title)")
        has_math = 'class="math' in (html / page).read_text(encoding="utf-8")
        if has_math and r["mathjax"] == 0:
            problems.append(f"{page}: math on the page but MathJax typeset nothing")
        if r["raw"]:
            problems.append(f"{page}: unrendered math delimiters {r['raw']}")
        problems += [f"{page}: image {src} did not load" for src, w in r["images"] if not w]
    assert not problems, "\n".join(problems)
    n_images = sum(len(res[p]["images"]) for p in pages)
    assert n_images >= 8, f"only {n_images} images in the whole book"


def test_alignment_explorer_runs_offline(html, chromium, tmp_path):
    """The alignments chapter's explorer: its script runs in the built page with no network, fills
    the sentence list and shows the first generated word's weights over the source words."""
    dom = browse(chromium, tmp_path, "--virtual-time-budget=20000", "--dump-dom",
                 (html / "_nb/09_alignments.html").as_uri())  # fmt: skip
    box = dom[dom.index('class="nmt-explorer"') :]
    assert box.count("<option") >= 4, "no sentence in the explorer's list"
    src = re.search(r'class="nmt-row nmt-src">(.*?)</div>', box, re.S).group(1)
    weights = [float(w) for w in re.findall(r"<small>([0-9.]+)</small>", src)]
    assert weights and sum(weights) == pytest.approx(1.0, abs=0.05)  # alpha_1j sums to one
    assert "of its attention on" in box and 'class="nmt-w nmt-on"' in box


@pytest.mark.parametrize("page", ["intro.html", "_nb/04_alignment.html", "_nb/08_experiments.html"])
def test_screenshot(html, chromium, tmp_path, page):
    shots = html.parent / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / (Path(page).stem + ".png")
    shot.unlink(missing_ok=True)
    browse(chromium, tmp_path, "--hide-scrollbars", "--window-size=1280,2400",
           "--virtual-time-budget=20000", f"--screenshot={shot}", (html / page).as_uri())  # fmt: skip
    data = shot.read_bytes()
    assert data[:8] == PNG and len(data) > 50_000, f"{shot}: not a real screenshot"


def test_report_timings():
    """Last: print how long the stages took (``pytest -s`` or ``-rA`` shows it)."""
    print({k: round(v, 1) for k, v in TIMES.items()})

"""The book end to end, as a reader gets it.

(a) every notebook through papermill in replicate (train) mode on the smoke profile, into a temporary
results directory: the layout of the results, no machine-local path in them, and the committed
``results/smoke`` still what the code writes; (b) the strict book build (``jupyter-book build -W -n
--keep-going book``), which executes the chapters on the committed results, as ``tasks.py main`` and
a reader's ``jupyter-book build book`` do; (c) the built pages in a real headless browser (Debian's
chromium) at a 1280 px window, with the network cut: pages load without a script error, MathJax
(served from the build) typesets every formula, every image loads and is shown at a size whose text
can be read, every figure of a page's source is shown, no word (a raw ``<unk>``) is read as an HTML
tag, no figure is shown twice, no table needs sideways scrolling, internal links resolve,
the alignment explorer runs; screenshots of three pages. All of it happens in a temporary copy of
the tree (:func:`tree`): the user's ``book/_build`` is left alone.

Slow (minutes): deselect during development with ``-m "not book"``; it runs by default.
"""

import json
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

from nmt_experiments.core import plots
from nmt_experiments.core.results import run_dir
from nmt_experiments.replicate import replication as replicate
from nmt_lib.checkpoint import default_checkpoint_dir
from nmt_lib.paper import MODELS
from tools import notebooks as runner

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
JUPYTER_BOOK = Path(sys.executable).parent / "jupyter-book"
PNG = b"\x89PNG\r\n\x1a\n"
TIMES: dict[str, float] = {}
COMMITTED_SMOKE = ROOT / "results" / "smoke"
#: The window the pages are checked at, and the smallest text a figure may show, in CSS pixels.
WINDOW = (1280, 900)
MIN_TEXT_PX = 9.0


def toc_pages() -> list[str]:
    """Every page of the book, as paths relative to the HTML root (``chapters/04_alignment.html``)."""
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
def results(tmp_path_factory):
    """(a) ``python tools/notebooks.py --profile smoke --train --jobs 2`` (two models at a time,
    one process each) into a temporary results dir, the executed notebooks into another."""
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
        [*cmd, "--out", str(out), "--out-dir", str(out.parent / "executed")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    TIMES["notebooks smoke --train"] = time.time() - t0
    try:
        assert r.returncode == 0, f"notebooks failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
        done = re.findall(r"^\[notebooks\] \d+/\d+ \S+ ok in", r.stdout, re.MULTILINE)
        assert len(done) == len(runner.notebooks()), r.stdout
        yield out
    finally:  # its checkpoints, outside the results, also when it failed
        for name, run in replicate.load("smoke").runs.items():
            shutil.rmtree(default_checkpoint_dir(run, run_dir(out, name)), True)


@pytest.fixture(scope="module")
def html(tree) -> Path:
    """(b) The strict build of every page in the stand-in tree, as a reader runs it: Jupyter Book
    executes the chapters (notebooks/, through the link book/chapters) on the committed results."""
    t0 = time.time()
    cmd = [str(JUPYTER_BOOK), "build", "-W", "-n", "--keep-going", "book"]
    r = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, timeout=900)
    TIMES["jupyter-book build"] = time.time() - t0
    log = r.stdout + r.stderr
    assert r.returncode == 0 and "WARNING" not in log, log[-6000:]
    return tree / "book" / "_build" / "html"


def browse(exe: str, tmp: Path, *args: str, timeout: int = 180, console: bool = False):
    """Run headless chromium with a fresh profile and no network; returns stdout, or with
    ``console`` (stdout, the pages' console messages: chromium's log lines ``CONSOLE``)."""
    profile = tmp / f"profile-{time.monotonic_ns()}"
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        *args,
    ]
    if console:
        cmd[1:1] = ["--enable-logging=stderr", "--v=0"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    if console:
        return r.stdout, [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
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
        for f in (
            "config.json",
            "train_log.jsonl",
            "train_summary.json",
            "bleu.json",
            "hyp.test.tok.txt",
            "hyp.test.detok.txt",
            "bleu_by_length.json",
            "nll.json",
            "attention.json",
        ):
            assert (run / f).is_file(), run / f
    for f in (
        "table1.csv",
        "table1.md",
        "table2.csv",
        "table2.md",
        "long_sentences.md",
        "data_summary.json",
    ):
        assert (results / f).stat().st_size > 0, f
    for f in ("fig2_bleu_by_length.png", "fig3_alignments.png"):
        assert (results / f).read_bytes()[:8] == PNG, f
    assert not list(results.rglob("*.pt")), "checkpoints must not land in the results"
    att = json.loads((run_dir(results, "RNNsearch-50") / "attention.json").read_text())
    assert att[0]["found"] is False and att[0]["alpha"]  # Figure 3 (a), translated from its words
    assert len(att) > 7  # (a)-(d), three by Figure 3's rule, and the alignment explorer's


#: Results files that are not text: figures and published weights.
BINARY = (".png", ".safetensors")


def _local_paths(results: Path) -> dict[str, list[str]]:
    """Each file of ``results`` that names this clone, the results directory or a home."""
    local = {str(ROOT), str(results), str(results.parent), str(Path.home()), "/tmp/"}
    found = {}
    for f in sorted(p for p in results.rglob("*") if p.is_file() and p.suffix not in BINARY):
        text = f.read_text(encoding="utf-8")
        if hits := sorted(s for s in local if s in text):
            found[str(f.relative_to(results))] = hits
    return found


def test_the_results_name_the_data_relative_to_the_repository(results):
    """The smoke profile's toy corpus is named as in the committed configs, not by where this
    clone lives (tools/notebooks.py)."""
    manifest = json.loads((results / "manifest.json").read_text(encoding="utf-8"))
    for name in MODELS:
        config = json.loads((run_dir(results, name) / "config.json").read_text(encoding="utf-8"))
        for cfg in (config, manifest["configs"][name]):
            assert cfg["data"]["data_dir"] == ".cache/toy-wmt14", name


def test_results_name_no_machine_local_path(results):
    """Results are committed: no file names this clone, the results directory or a home."""
    found = _local_paths(results)
    assert not found, found


def _shape(obj, path=""):
    """The key paths of a JSON value: dict keys, recursively, lists as ``[]`` (their dicts'
    keys merged), run names (a profile's runs) as ``<run>``."""
    if isinstance(obj, dict):
        out = set()
        for k, v in obj.items():
            key = "<run>" if k in MODELS or k.replace("star", "*") in MODELS else k
            out |= {f"{path}/{key}"} | _shape(v, f"{path}/{key}")
        return out
    if isinstance(obj, list):
        return set().union(*(_shape(v, f"{path}[]") for v in obj)) if obj else set()
    return set()


def _layout(d: Path) -> dict[str, set]:
    """Each file of a results dir (relative path) -> the key paths of its JSON (or JSON lines)."""
    out = {}
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        name = str(f.relative_to(d))
        if f.suffix == ".json":
            out[name] = _shape(json.loads(f.read_text(encoding="utf-8")))
        elif f.suffix == ".jsonl":
            lines = f.read_text(encoding="utf-8").splitlines()
            out[name] = set().union(*(_shape(json.loads(x)) for x in lines if x.strip()))
        else:
            out[name] = set()
    return out


#: Keys that a results file holds only on some machines or runs (a GPU, runs made later; a run's
#: CPU flags are in the made.json of runs made since they were recorded, and readers fall back
#: to the manifest's: results.machines_text).
OPTIONAL = ("/git_runs", "/hardware/gpu", "/hardware/cuda", "/cpu_flags_simd")


def test_committed_smoke_results_are_what_the_code_writes(results):
    """``results/smoke`` is regenerated whenever the code writes other files or keys (regenerate:
    ``python tools/notebooks.py --profile smoke --train``, after removing its checkpoints from
    ``.cache/ckpt`` and its runs, ``results/smoke/runs``, which a run recorded whole is not trained
    again for): the same files, and in each JSON file the same keys, as a run of now."""
    fresh, committed = _layout(results), _layout(COMMITTED_SMOKE)
    assert sorted(fresh) == sorted(committed), "files differ: regenerate results/smoke"
    stale = {}
    for name, keys in fresh.items():
        diff = {k for k in keys ^ committed[name] if not k.startswith(OPTIONAL)}
        if diff:
            stale[name] = sorted(diff)[:8]
    assert not stale, f"results/smoke is stale (keys of today's run vs committed): {stale}"


# -------------------------------------------------------------------------------------- (b) build
def test_every_page_is_built(html):
    for page in toc_pages():
        assert (html / page).is_file(), page
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax is not in the build"
    for page in toc_pages():
        text = (html / page).read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]+src=\"https?://", text), f"{page} loads a remote script"
        # book/_ext/reading_time.py: under the title, from the page's words
        line = r'</h1>\s*<p class="reading-time"><em>About \d+ minutes? to read \([\d,]+ words at'
        assert re.search(line, text), f"{page}: no reading time under its title"


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
    // elements no HTML has, such as a raw <unk> read as a tag (and its text lost)
    unknown: [...d.querySelectorAll("article *")]
        .filter(e => e instanceof d.defaultView.HTMLUnknownElement && !e.tagName.includes("-"))
        .map(e => [e.tagName.toLowerCase(), (e.closest("th, td, p, li") || e).textContent.trim()
        .slice(0, 60)]),
    raw: ["$$", "\\\\(", "\\\\["].filter(s => text.includes(s)),
    // figures: [src, natural width, shown width, inside a <figure> with a caption]
    figures: [...d.querySelectorAll("article img")].map(i => [i.getAttribute("src"),
        i.naturalWidth, i.getBoundingClientRect().width,
        !!(i.closest("figure") && i.closest("figure").querySelector("figcaption"))]),
    // tables: [first header cell, width of the table, width it is shown in]
    tables: [...d.querySelectorAll("article table")].map(t => [
        (t.querySelector("th, td") || {textContent: ""}).textContent.trim().slice(0, 40),
        t.scrollWidth, (t.parentElement.closest("div, section, article") || t).clientWidth]),
  };
}
function next() {
  if (k >= pages.length) {
    document.getElementById("out").textContent = "RESULTS" + JSON.stringify(results);
    return;
  }
  const f = document.createElement("iframe");
  f.style.width = "WIDTHpx"; f.style.height = "HEIGHTpx"; f.style.border = "0";
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


@pytest.fixture(scope="module")
def inspected(html, chromium, tmp_path_factory):
    """Each page in a 1280 x 900 iframe of a check page, inspected by :data:`CHECK`; returns
    (the findings per page, the console messages)."""
    pages = toc_pages()
    check = html / "_check_pages.html"
    page = CHECK.replace("PAGES", json.dumps(pages))
    page = page.replace("WIDTH", str(WINDOW[0])).replace("HEIGHT", str(WINDOW[1]))
    check.write_text(page, encoding="utf-8")
    t0 = time.time()
    try:
        out, console = browse(
            chromium,
            tmp_path_factory.mktemp("chromium"),
            "--allow-file-access-from-files",
            "--virtual-time-budget=300000",
            f"--window-size={WINDOW[0] + 40},{WINDOW[1]}",
            "--dump-dom",
            check.as_uri(),
            console=True,
        )
    finally:
        check.unlink()
    TIMES["browser checks"] = time.time() - t0
    found = re.search(r"RESULTS(\{.*\})</pre>", out)
    assert found, f"the check page did not finish:\n{out[-2000:]}"
    res = json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    return res, console


def page_problems(page: str, r: dict, has_math: bool, figures: int) -> list[str]:
    """What is wrong with one inspected page (:data:`CHECK`'s findings ``r``): not loaded, math
    left untypeset, an image that did not load, a word read as an unknown HTML tag (a raw
    ``<unk>`` in a table header), fewer figures shown than its source's ``figures``."""
    if "error" in r:
        return [f"{page}: {r['error']}"]
    problems = [] if r["title"] else [f"{page}: did not load (no title)"]
    if has_math and r["mathjax"] == 0:
        problems.append(f"{page}: math on the page but MathJax typeset nothing")
    if r["raw"]:
        problems.append(f"{page}: unrendered math delimiters {r['raw']}")
    problems += [f"{page}: image {src} did not load" for src, w in r["images"] if not w]
    problems += [
        f"{page}: <{tag}> read as a tag, not shown as text: '{text}'"
        for tag, text in r.get("unknown", [])
    ]
    shown = sum(1 for _, natural, _, captioned in r.get("figures", []) if natural and captioned)
    if shown < figures:
        problems.append(f"{page}: {figures} figures in its source, {shown} shown")
    return problems


def source_figures(page: str) -> int:
    """The figures a page's source asks for (``{glue:figure}`` and ``{figure}`` directives)."""
    stem = page.removesuffix(".html")
    src = ROOT / "notebooks" / f"{Path(stem).name}.py" if stem.startswith("chapters/") else None
    text = (src if src else BOOK / f"{stem}.md").read_text(encoding="utf-8")
    return len(re.findall(r"```\{(?:glue:)?figure\}", text))


def test_pages_render_in_a_browser(html, inspected):
    """Each page: loaded, math typeset by the local MathJax (no ``$$``, ``\\(`` or ``\\[`` left
    outside code), every image decoded (naturalWidth > 0), every figure of its source shown, no
    word read as an HTML tag, no script error in the console."""
    pages = toc_pages()
    res, console = inspected
    problems = []
    for page in pages:
        has_math = 'class="math' in (html / page).read_text(encoding="utf-8")
        r = res.get(page, {"error": "not inspected"})
        problems += page_problems(page, r, has_math, source_figures(page))
    problems += [f"console: {line[-300:]}" for line in console if "Uncaught" in line]
    assert not problems, "\n".join(problems)
    n_images = sum(len(res[p]["images"]) for p in pages)
    assert n_images >= 8, f"only {n_images} images in the whole book"


BAD_PAGE = """<!DOCTYPE html><html><head><title>bad</title></head><body><article>
<table><tr><th>model</th><th>All, <unk> replaced</th></tr><tr><td>A</td><td>1.0</td></tr></table>
<figure><img src="figure-that-is-not-there.png"><figcaption>a figure</figcaption></figure>
</article></body></html>"""


def test_the_browser_checks_find_a_raw_tag_and_a_missing_figure(chromium, tmp_path):
    """The checks above can fail: a page with a raw <unk> in a table header and a figure whose
    image is missing, inspected by the same script, has both found."""
    (tmp_path / "bad.html").write_text(BAD_PAGE, encoding="utf-8")
    check = tmp_path / "check.html"
    page = CHECK.replace("PAGES", json.dumps(["bad.html"]))
    check.write_text(page.replace("WIDTH", "1280").replace("HEIGHT", "900"), encoding="utf-8")
    out = browse(
        chromium,
        tmp_path,
        "--allow-file-access-from-files",
        "--virtual-time-budget=20000",
        "--dump-dom",
        check.as_uri(),
    )
    found = re.search(r"RESULTS(\{.*\})</pre>", out)
    res = json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    problems = page_problems("bad.html", res["bad.html"], has_math=False, figures=1)
    assert any("<unk> read as a tag" in p for p in problems), problems
    assert any("did not load" in p for p in problems), problems
    assert any("1 figures in its source, 0 shown" in p for p in problems), problems


def test_no_table_needs_sideways_scrolling(inspected):
    """At 1280 px every table fits the width it is shown in (no horizontal scroll bar)."""
    res, _ = inspected
    wide = [
        f"{page}: table '{head}' is {width} px in {shown} px"
        for page, r in res.items()
        for head, width, shown in r.get("tables", [])
        if width > shown + 1
    ]
    assert not wide, "\n".join(wide)
    assert sum(len(r.get("tables", [])) for r in res.values()) >= 10


def test_figures_are_shown_once_and_readable(inspected):
    """Every figure appears once per page, in a <figure> with a caption, and is shown at a scale
    at which its smallest text (``nmt_experiments.core.plots.MIN_FONT_PT`` at the notebooks' 100 dpi, which
    ``tests/test_plots.py`` checks) is at least MIN_TEXT_PX tall."""
    res, _ = inspected
    problems = []
    for page, r in res.items():
        srcs = [src for src, *_ in r.get("figures", [])]
        problems += [
            f"{page}: {s} shown {srcs.count(s)} times" for s in set(srcs) if srcs.count(s) > 1
        ]
        for src, natural, shown, captioned in r.get("figures", []):
            if not natural:
                continue  # reported by test_pages_render_in_a_browser
            text_px = plots.MIN_FONT_PT / 72 * 100 * min(1.0, shown / natural)
            if text_px < MIN_TEXT_PX:
                problems.append(
                    f"{page}: {src} ({natural} px) shown at {shown:.0f} px: its "
                    f"smallest text {text_px:.1f} px"
                )
            if "jupyter_execute" in src or "_images" in src:
                if not captioned:
                    problems.append(f"{page}: {src} is shown without a caption")
    assert not problems, "\n".join(problems)
    assert sum(len(r.get("figures", [])) for r in res.values()) >= 10, "figures not found"


def test_alignment_explorer_runs_offline(html, chromium, tmp_path):
    """The alignments chapter's explorer: its script runs in the built page with no network, fills
    the sentence list and shows the first generated word's weights over the source words."""
    dom = browse(
        chromium,
        tmp_path,
        "--virtual-time-budget=20000",
        "--dump-dom",
        (html / "chapters/09_alignments.html").as_uri(),
    )
    box = dom[dom.index('class="nmt-explorer"') :]
    assert box.count("<option") >= 4, "no sentence in the explorer's list"
    src = re.search(r'class="nmt-row nmt-src">(.*?)</div>', box, re.S).group(1)
    weights = [float(w) for w in re.findall(r"<small>([0-9.]+)</small>", src)]
    assert weights and sum(weights) == pytest.approx(1.0, abs=0.05)  # alpha_1j sums to one
    assert "of its attention on" in box and 'class="nmt-w nmt-on"' in box
    escaped = sorted(set(re.findall(r"&amp;(?:apos|quot|amp|lt|gt|#\d+);", box)))
    assert not escaped, f"Moses escapes shown as text in the explorer: {escaped}"


@pytest.mark.parametrize(
    "page", ["intro.html", "chapters/05_decoder.html", "chapters/08_experiments.html"]
)
def test_screenshot(html, chromium, tmp_path, page):
    shots = html.parent / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / (Path(page).stem + ".png")
    shot.unlink(missing_ok=True)
    browse(
        chromium,
        tmp_path,
        "--hide-scrollbars",
        "--window-size=1280,2400",
        "--virtual-time-budget=20000",
        f"--screenshot={shot}",
        (html / page).as_uri(),
    )
    data = shot.read_bytes()
    assert data[:8] == PNG and len(data) > 50_000, f"{shot}: not a real screenshot"


def test_report_timings():
    """Last: print how long the stages took (``pytest -s`` or ``-rA`` shows it)."""
    print({k: round(v, 1) for k, v in TIMES.items()})

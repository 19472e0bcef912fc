"""The book's translator (``book/_static/translator.js``, :mod:`nmt_experiments.pages.translator`): a second
implementation of the model, tested as one, in headless Chromium with the network cut.

(a) On a published toy model, the page's translations are Python's beam search
(:func:`nmt_lib.decoding.decode`, the model's search settings) token for token, their costs and
attention weights agree within a tolerance, and with ``<unk>`` replacement they are
:func:`nmt_lib.likelihood.replace_corpus`'s. (b) The page's tokenizer is sacremoses' (its embedded tables,
tricky sentences, the toy corpus, every newstest2014 source when the WMT'14 files are here), and its
French detokenizer is sacremoses' on French references. (c) The same translations on the ``lite``
profile's published RNNsearch-50*, once it is committed. (d) The fragment translates on a click,
loading its code and the model only then.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nmt_experiments.core.results import published_dir
from nmt_experiments.pages import translator
from nmt_lib import publish
from nmt_lib.checkpoint import CheckpointError
from nmt_lib.config import DataConfig
from nmt_lib.data import fixtures
from nmt_lib.data.readers import read_lines, read_sgml
from nmt_lib.data.text import tokenize
from nmt_lib.data.vocab import UNK
from nmt_lib.decoding import decode
from nmt_lib.evaluate import evaluate_run
from nmt_lib.likelihood import replace_corpus
from nmt_lib.loading import SUMS, load_published
from nmt_lib.train import train_run
from nmt_lib.translate import Output, translate_lines
from tests.test_book import browse

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "book" / "_static" / "translator.js"
NEWSTEST = "test-full/newstest2014-fren-{}.sgm"
#: Costs: float64 in the page, float32 in PyTorch (measured: ~2e-6 on the toy model).
COST_RTOL = 1e-4
ALPHA_ATOL = 1e-4
#: Sentences whose words the toy shortlist lacks: the toy model writes <unk> for some of them.
RARE = [
    "The purple zebra juggles behind the ancient lantern.",
    "A tiny walrus whistles.",
    "the golden comet sees a violin.",
    "This ancient tulip whistles with the purple walrus.",
]
TRICKY = [
    "Don't stop: it's 5,300.50 dollars (U.S.) & <more> ... \"quoted\" 'single' [brackets] | pipe",
    'Mr. Smith went to Washington D.C. on Jan. 5, 2014... He said: "No. 5 is 3.14!"',
    "http://www.example.com/a-b/c_d.html?x=1&y=2 and foo@bar.com #tag @user",
    "The well-known fact -- a \u201cquote\u201d \u2014 rock'n'roll, '90s, 1990's, cats' toys.",
    "O'Neil's dogs' bones, \u2018curly\u2019 quotes",
    "e.g. this, i.e. that; No. 7 vs No 7; Art. 12 pp. 3-4; pp. 5.",
    "Ellipsis.... and .. two dots. A.B.C. U.S.A. Prof. X.",
    "  tabs\tand\u00a0non-breaking\u2009spaces\u3000ideographic  ",
    "£100, €20, $5.99, 50%, 3/4, a/b, x+y=z, 1 < 2 > 0, `backtick` {braces}",
    "He said 'hello'.' She said \"bye.\"'",
    "Look!? Really?! (Yes.) [No.]",
    "Ça coûte 10 € à l'école — n'est-ce pas?",
    "'Tis the season; y'all can't won't shan't, gonna wanna cannot.",
    ".",
    "...",
    "",
    "a.b.c",
    "A. Lincoln and J. F. Kennedy",
    "3.5 million, 1,000,000, 1.000.000",
    "x\u0085y\u001cz\u200bw",
    "emoji \U0001f600 and \U0001d400 math",
    "café naïve Zürich Ærø",
    "100 km/h. 5 p.m. 6 a.m.",
    "St. Louis, Mt. Everest, Sgt. Pepper; Smith, Jr. and Co. Inc.",
]


HARNESS = """<!doctype html><meta charset="utf-8"><title>translator</title>
SCRIPTS
<script type="application/json" id="job">JOB</script>
<pre id="out"></pre>
<script>
var job = JSON.parse(document.getElementById("job").textContent), out = {};
try {
  var T = NMTTranslator;
  out.tables = T.tables;
  out.tokens = job.tokenize.map(function (s) { return T.tokenize(s); });
  out.detok = job.detokenize.map(function (t) { return T.detokenize(t); });
  if (job.translate.length) {
    var model = T.load(window.NMT_TRANSLATOR), t0 = performance.now();
    out.translations = job.translate.map(function (s) {
      var r = T.translate(model, s);
      return r.hyp && {tokens: r.hyp.tokens, cost: r.hyp.cost, finished: r.hyp.finished,
        replaced: r.replaced, alpha: r.hyp.alpha.map(function (a) { return Array.from(a); })};
    });
    out.ms = performance.now() - t0;
  }
} catch (e) { out.error = String(e && e.stack || e); }
document.getElementById("out").textContent = JSON.stringify(out);
</script>
"""


def run_page(exe: str, tmp: Path, scripts, to_tokenize=(), to_detokenize=(), to_translate=()):
    """What ``translator.js`` (and the ``scripts`` before it: a bundle) make of the sentences
    ``to_tokenize``, the token lists ``to_detokenize`` and the sentences ``to_translate``, in a
    page: ``{"tables", "tokens", "detok", "translations", "ms"}``."""
    job = {
        "tokenize": list(to_tokenize),
        "detokenize": list(to_detokenize),
        "translate": list(to_translate),
    }
    tags = "".join(f'<script src="{Path(s).as_uri()}"></script>' for s in [SCRIPT, *scripts])
    page = tmp / f"harness-{time.monotonic_ns()}.html"
    job = json.dumps(job).replace("</", "<\\/")  # safe inside <script>
    page.write_text(HARNESS.replace("SCRIPTS", tags).replace("JOB", job), encoding="utf-8")
    dom = browse(exe, tmp, "--dump-dom", page.as_uri())
    m = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert m and m.group(1), f"the page wrote nothing: {dom[-2000:]}"
    out = json.loads(html.unescape(m.group(1)))
    assert "error" not in out, out["error"]
    return out


def wmt14() -> Path | None:
    """The WMT'14 files with newstest2014, if they are where ``nmt_lib`` looks for them
    (``NMT_DATA``, else the repository's ``data/wmt14``: ``DataConfig.resolved_data_dir``)."""
    d = DataConfig().resolved_data_dir()
    return d if (d / NEWSTEST.format("src.en")).is_file() else None


def newstest(lang: str) -> list[str]:
    side = "src.en" if lang == "en" else "ref.fr"
    return [s.text for s in read_sgml(wmt14() / NEWSTEST.format(side))]


def python_translations(published: Path, sentences):
    """Python's translations of ``sentences`` with the published model: its search (attention
    weights returned) and, per hypothesis, its tokens with each ``<unk>`` replaced."""
    pub = load_published(published)
    model, cfg, src, trg = pub.model, pub.cfg, pub.src_vocab, pub.trg_vocab
    toks = [tokenize(s, "en") for s in sentences]
    xs = [src.encode(t, eos=True) for t in toks]
    hyps = decode(model, xs, cfg.search, return_alpha=True)
    return hyps, replace_corpus(model, xs, hyps, toks, trg)


def close(page_alpha: list, alpha, atol: float, msg: str = "") -> None:
    """The page's attention weights (nested lists) are ``alpha`` (a tensor) within ``atol``."""
    torch.testing.assert_close(
        torch.tensor(page_alpha), alpha.float(), rtol=0, atol=atol, msg=lambda m: f"{msg}: {m}"
    )


def assert_same_translations(hyps, replaced, page: list, sentences) -> float:
    """The page's translations are Python's; returns the largest relative cost difference."""
    worst = 0.0
    for s, h, r, p in zip(sentences, hyps, replaced, page, strict=True):
        assert p["tokens"] == h.tokens, f"{s!r}: the page's words are not Python's"
        assert p["finished"] == h.finished, s
        assert p["cost"] == pytest.approx(h.cost, rel=COST_RTOL), s
        close(p["alpha"], h.alpha, atol=ALPHA_ATOL, msg=s)
        assert p["replaced"] == r, f"{s!r}: the page's <unk> replacement is not Python's"
        worst = max(worst, abs(p["cost"] - h.cost) / h.cost)
    return worst


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The smoke profile's RNNsearch-50* on a toy corpus, published: ``(root, published dir,
    bundle)``. 200 updates with Adam (lr 1e-2), not the profile's Adadelta: enough for
    translations that follow their source, and for an <unk> now and then (~10 s)."""
    root = tmp_path_factory.mktemp("toy")
    cfg, prep = fixtures.toy_run(
        root, run="RNNsearch-50*", dev_bleu_sentences=0, eval_every=200, optimizer="adam", lr=1e-2
    )
    cfg = replace(cfg, train=replace(cfg.train, max_updates=200))
    run_out = root / "results" / "runs" / "RNNsearch-50star"
    ckpt = Path(train_run(cfg, run_out, prep, progress=False)["checkpoint_dir"])
    evaluate_run(cfg, run_out, prep, checkpoint=ckpt, nll_sentences=10, figure_sources=())
    out = publish.export(ckpt, root / "results" / "published" / "RNNsearch-50star", cfg, run_out)
    bundle = root / "toy.mjs"
    translator.write_bundle(out, bundle)
    return root, out, bundle


@pytest.fixture(scope="module")
def toy_sentences(toy) -> list[str]:
    """The toy test set's sources, and sentences of rare words (some translated with <unk>)."""
    root = toy[0]
    return [s.text for s in read_sgml(root / "wmt" / NEWSTEST.format("src.en"))] + RARE


@pytest.fixture(scope="module")
def page(toy, toy_sentences, chromium, tmp_path_factory):
    """One page run on the toy model: tables, tokenization, detokenization, translations."""
    root, _, bundle = toy
    corpus = list(read_lines(root / "wmt/train/toy.en")) + toy_sentences
    refs = [s.text for s in read_sgml(root / "wmt" / NEWSTEST.format("ref.fr"))]
    fr = [tokenize(s, "fr") for s in refs] + [
        ["l&apos;", "homme", "«", "dit", "»", ":", "&quot;", "oui", "&quot;", "?", "$", "5", "%"]
    ]
    extra_en = newstest("en") if wmt14() else []
    extra_fr = [tokenize(s, "fr") for s in newstest("fr")] if wmt14() else []
    sentences = TRICKY + corpus + extra_en
    out = run_page(
        chromium, tmp_path_factory.mktemp("page"), [bundle], sentences, fr + extra_fr, toy_sentences
    )
    n = len(TRICKY + corpus)
    return {
        "toy_tokens": (sentences[:n], out["tokens"][:n]),
        "newstest_tokens": (extra_en, out["tokens"][n:]),
        "toy_detok": (fr, out["detok"][: len(fr)]),
        "newstest_detok": (extra_fr, out["detok"][len(fr) :]),
        "tables": out["tables"],
        "translations": out["translations"],
    }


# ------------------------------------------------------------------------ (a) the toy model
def test_the_pages_translations_are_pythons_beam_search(toy, toy_sentences, page):
    hyps, replaced = python_translations(toy[1], toy_sentences)
    assert len(toy_sentences) >= 20
    assert any(UNK in h.tokens for h in hyps), "no <unk> to replace: pick rarer words"
    worst = assert_same_translations(hyps, replaced, page["translations"], toy_sentences)
    print(f"\n{len(hyps)} toy translations the same; largest relative cost difference {worst:.1e}")


def test_a_bundle_is_written_only_from_intact_files(toy, tmp_path):
    shutil.copytree(toy[1], tmp_path / "m")
    with open(tmp_path / "m" / "config.json", "a", encoding="utf-8") as f:
        f.write(" ")
    with pytest.raises(CheckpointError, match="config.json"):
        translator.write_bundle(tmp_path / "m", tmp_path / "b.mjs")
    assert not (tmp_path / "b.mjs").exists()


# -------------------------------------------------------------- (b) tokenizer and detokenizer
def test_the_pages_tokenizer_tables_are_sacremoses(page):
    assert page["tables"] == translator.tokenizer_tables()


def test_the_pages_tokenizer_is_sacremoses(page):
    sentences, tokens = page["toy_tokens"]
    for s, t in zip(sentences, tokens, strict=True):
        assert t == tokenize(s, "en"), repr(s)
    print(f"\ntokenizer: {len(sentences)} tricky and toy sentences the same")


def test_the_pages_tokenizer_is_sacremoses_on_newstest2014(page):
    sentences, tokens = page["newstest_tokens"]
    if not sentences:
        pytest.skip("the WMT'14 files are not here (NMT_DATA, data/wmt14)")
    diff = [s for s, t in zip(sentences, tokens, strict=True) if t != tokenize(s, "en")]
    print(f"\ntokenizer: {len(diff)} of {len(sentences)} newstest2014 sources differ")
    assert not diff, diff[:5]  # none differs: the page tokenizes the test set as Python does


def test_the_pages_detokenizer_is_sacremoses_on_french(page):
    from nmt_lib.data.text import detokenize

    for key in ("toy_detok", "newstest_detok"):
        tokens, text = page[key]
        diff = [t for t, d in zip(tokens, text, strict=True) if d != detokenize(t, "fr")]
        print(f"\ndetokenizer ({key}): {len(diff)} of {len(tokens)} differ")
        assert not diff, diff[:5]


# ---------------------------------------------------------------- (c) the lite profile's model
def test_the_lite_models_translations_are_pythons(chromium, tmp_path):
    published = published_dir("lite", "RNNsearch-50*")
    if not (published / SUMS).is_file():
        pytest.skip(f"{published} is not committed yet")
    if wmt14() is None:
        pytest.skip("the WMT'14 files are not here (NMT_DATA, data/wmt14)")
    # 20 test sentences of 5-10 words: in the page, a beam of 10 over a 10,000-word shortlist
    # translates a 20-word sentence in 0.4-0.7 s on a quiet 2-core AMD EPYC (measured)
    sentences = [s for s in newstest("en") if 5 <= len(tokenize(s, "en")) <= 10][:20]
    bundle = tmp_path / "lite.mjs"
    translator.write_bundle(published, bundle)
    out = run_page(chromium, tmp_path, [bundle], to_translate=sentences)
    hyps, replaced = python_translations(published, sentences)
    worst = assert_same_translations(hyps, replaced, out["translations"], sentences)
    print(
        f"\nlite: {len(sentences)} translations the same in {out['ms'] / 1000:.1f} s; largest "
        f"relative cost difference {worst:.1e}"
    )


# ------------------------------------------------------------------------------ (d) the page
DRIVER = """<script>
(function () {
  var root = document.getElementById("nmt-translator"), box = root.querySelector("textarea"),
      check = root.querySelector("input[type=checkbox]"), tries = 0, out = {};
  function text(sel) { return root.querySelector(sel).textContent; }
  out.loaded_before = !!window.NMTTranslator || !!window.NMT_TRANSLATOR;
  box.value = SENTENCE;
  root.querySelector("button").click();
  (function wait() {
    if (!/^(Translated|Could not)/.test(text(".nmt-status")) && ++tries < 3000) {
      return setTimeout(wait, 10);
    }
    out.status = text(".nmt-status");
    out.replaced = text(".nmt-out");
    out.rows = Array.prototype.map.call(root.querySelectorAll(".nmt-heat tbody tr"), function (tr) {
      return Array.prototype.map.call(tr.querySelectorAll("td"), function (td) {
        return +td.dataset.weight;
      });
    });
    check.checked = false;
    check.dispatchEvent(new Event("change"));
    out.plain = text(".nmt-out");
    document.getElementById("out").textContent = JSON.stringify(out);
  })();
})();
</script>"""


def test_the_fragment_translates_on_a_click_and_loads_the_model_only_then(toy, chromium, tmp_path):
    published = toy[1]
    static = tmp_path / "static"
    static.mkdir()
    shutil.copy(SCRIPT, static / "translator.js")
    sha = translator.write_bundle(published, static / "toy.mjs")["sha256"]
    frag = translator.translator_html(
        "toy.mjs", sha, 1, "the toy model", static=static.as_uri() + "/"
    )
    sentence = RARE[0]
    page = tmp_path / "page.html"
    driver = DRIVER.replace("SENTENCE", json.dumps(sentence))
    html_page = f'<!doctype html><meta charset="utf-8">{frag}<pre id="out"></pre>{driver}'
    page.write_text(html_page, encoding="utf-8")
    dom = browse(chromium, tmp_path, "--virtual-time-budget=60000", "--dump-dom", page.as_uri())
    out = json.loads(html.unescape(re.search(r'<pre id="out">(.*?)</pre>', dom, re.S).group(1)))
    assert not out["loaded_before"], "the code or the model was loaded before the click"
    assert out["status"].startswith("Translated"), out["status"]
    pub = load_published(published)
    want = [
        translate_lines(pub, [sentence], output=Output(replace_unk=r))[0] for r in (True, False)
    ]
    assert "<unk>" in want[1] and "<unk>" not in want[0]
    assert [out["replaced"], out["plain"]] == want
    # the heat map: a row per generated word (and <end>), a column per source word (and <end>)
    hyp = python_translations(published, [sentence])[0][0]
    assert [len(r) for r in out["rows"]] == [len(tokenize(sentence, "en")) + 1] * len(hyp.tokens)
    close(out["rows"], hyp.alpha, atol=2e-3)  # shown to 3 decimals

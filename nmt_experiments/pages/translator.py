"""The book's translator: a published RNNsearch (:mod:`nmt_lib.publish`) run in a reader's browser.

``book/_static/translator.js`` is a second implementation, in plain JavaScript, of what
``python -m nmt_lib translate --replace-unk`` does: sacremoses' English tokenization, the shortlist,
the encoder, GroundHog's beam search over the decoder's steps (:func:`nmt_lib.search.beam_search`),
the ``<unk>`` replacement of :mod:`nmt_lib.unk`, and a French detokenization for display;
``tests/test_translator.py`` holds it to the Python one. This module gives it its inputs:

* :func:`write_bundle`: the published model as one script that sets ``window.NMT_TRANSLATOR``
  (config, vocabularies, float16 weights in base64). A script, because a page opened from disk
  (``file://``) may load scripts but not ``fetch`` files. Its name ends in ``.mjs``, not ``.js``:
  Jupyter Book adds every ``*.js`` of ``book/_static`` to every page, and this one should reach
  a reader only when they ask for a translation;
* :func:`translator_html`: the HTML fragment (a text box, a button, the ``<unk>`` toggle, the
  translation and its alignment as a heat map) that loads the bundle on its first click, and
  ``translator.js`` too where the page lacks it (Jupyter Book puts it on every page of the book);
* :func:`tokenizer_tables`: the character classes and non-breaking prefixes of sacremoses'
  English tokenizer, which ``translator.js`` embeds (the test checks that they are these).
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path

from nmt_lib.data.vocab import Vocab
from nmt_lib.io import atomic_write, read_json, sha256_file
from nmt_lib.loading import PUBLISHED_FILES as FILES
from nmt_lib.loading import verify_published as verify

#: The global that the bundle sets.
GLOBAL = "NMT_TRANSLATOR"


def _tensors(path: Path) -> dict[str, dict]:
    """The float16 tensors of a safetensors file as ``{name: {"shape", "data"}}``, ``data`` the
    base64 of their little-endian bytes."""
    import torch
    from safetensors.torch import load_file

    out = {}
    for name, t in load_file(str(path)).items():
        if t.dtype != torch.float16:
            raise ValueError(f"{path}: {name} is {t.dtype}, not the float16 of a published model")
        data = t.numpy().astype("<f2").tobytes()
        out[name] = {"shape": list(t.shape), "data": base64.b64encode(data).decode("ascii")}
    return out


def write_bundle(published: str | os.PathLike, path: str | os.PathLike) -> dict:
    """Write the published model ``published`` (its files checked first: :func:`~nmt_lib.publish.
    verify`) as the script ``path``, which sets ``window.NMT_TRANSLATOR = {config, sha256,
    src_vocab, trg_vocab, tensors}``: the run's config, the sha256 of its weights, the
    vocabularies' words in row order, and each weight ``{shape, data}``. Returns ``{"bytes",
    "sha256"}``. Only RNNsearch: the translator shows the alignment, and replaces ``<unk>``
    through it."""
    published = Path(published)
    verify(published)
    config = read_json(published / FILES[1])
    if config["model"]["arch"] != "RNNsearch":
        raise ValueError(
            f"{published}: the translator runs RNNsearch, not {config['model']['arch']}"
        )
    bundle = {
        "config": config,
        "sha256": sha256_file(published / FILES[0]),
        "src_vocab": Vocab.load(published / FILES[2]).itos,
        "trg_vocab": Vocab.load(published / FILES[3]).itos,
        "tensors": _tensors(published / FILES[0]),
    }
    text = f"window.{GLOBAL} = {json.dumps(bundle, separators=(',', ':'))};\n"  # ASCII only
    with atomic_write(path) as f:
        f.write(text)
    return {"bytes": len(text), "sha256": bundle["sha256"]}


_STYLE = """
.nmt-translator { font-family: sans-serif; margin: 1em 0; }
.nmt-translator textarea { width: 100%; box-sizing: border-box; font: inherit; }
.nmt-translator .nmt-bar { display: flex; flex-wrap: wrap; gap: 1em; align-items: center;
  margin: 0.4em 0; }
.nmt-translator .nmt-label { font-size: 0.8em; color: #555; }
.nmt-translator .nmt-out { font-size: 1.1em; margin: 0.5em 0; min-height: 1.4em; }
.nmt-translator .nmt-heat { overflow-x: auto; }
.nmt-translator .nmt-heat table { border-collapse: collapse; font-size: 0.85em; }
.nmt-translator .nmt-heat th { font-weight: normal; padding: 2px 5px; white-space: nowrap; }
.nmt-translator .nmt-heat thead th { writing-mode: vertical-rl; transform: rotate(180deg);
  text-align: left; }
.nmt-translator .nmt-heat tbody th { text-align: right; }
.nmt-translator .nmt-heat td { width: 1.6em; height: 1.6em; border: 1px solid #ddd; }
.nmt-translator .nmt-heat .nmt-on { outline: 2px solid #d33; }
.nmt-translator .nmt-heat .nmt-replaced { font-style: italic; }
"""

_SCRIPT = """
(function () {
  var root = document.getElementById(ROOT_ID), go = root.querySelector("button"),
      status = root.querySelector(".nmt-status"), model = null, last = null;
  // the book's _static folder: Sphinx names the page's root on <html data-content_root>
  var base = root.dataset.static ||
      (document.documentElement.dataset.content_root || "") + "_static/";
  function script(name, done) {  // a script tag, not fetch(): a book opened from disk can't fetch
    var s = document.createElement("script");
    s.src = base + name;
    s.onload = done;
    s.onerror = function () {
      status.textContent = "Could not load " + s.src + ": build the book again " +
        "(jupyter-book build book) to write it.";
      go.disabled = false;
    };
    document.head.appendChild(s);
  }
  function ready(done) {
    if (model) return done();
    status.textContent = "Loading the model (" + root.dataset.size + ") \\u2026";
    var code = window.NMTTranslator ? function (f) { f(); } : function (f) {
      script("translator.js", f);
    };
    code(function () {
      script(root.dataset.bundle, function () {
        try {
          model = NMTTranslator.load(window.NMT_TRANSLATOR, root.dataset.sha256);
        } catch (e) {
          status.textContent = e.message;
          go.disabled = false;
          return;
        }
        done();
      });
    });
  }
  go.addEventListener("click", function () {
    go.disabled = true;
    ready(function () {
      status.textContent = "Translating \\u2026";
      setTimeout(function () {  // let the status show before the search holds the page
        var t0 = performance.now();
        try {
          last = NMTTranslator.translate(model, root.querySelector("textarea").value);
          NMTTranslator.render(root, last);
          status.textContent = last.src.length ? "Translated in " +
            Math.round(performance.now() - t0) + " ms, in this page." : "";
        } catch (e) {
          status.textContent = "The translation failed: " + e.message;
        }
        go.disabled = false;
      }, 20);
    });
  });
  root.querySelector("input[type=checkbox]").addEventListener("change", function () {
    if (last) NMTTranslator.render(root, last);
  });
})();
"""


def translator_html(
    bundle: str,
    sha256: str,
    size_bytes: int,
    title: str,
    element_id: str = "nmt-translator",
    static: str | None = None,
) -> str:
    """The translator as an HTML fragment: ``bundle``, the file name of :func:`write_bundle`'s
    script (``sha256``: of its weights; a bundle of other weights is refused; ``size_bytes``: its
    size, said while it loads), in the folder ``static`` (a URL ending in ``/``; None: the
    book's ``_static/``, which also holds ``translator.js``). ``title``: the model's name, shown."""
    script = _SCRIPT.replace("ROOT_ID", json.dumps(element_id))
    attrs = {"bundle": bundle, "sha256": sha256, "size": f"{size_bytes / 1e6:.1f} MB"}
    if static is not None:
        attrs["static"] = static
    data = "".join(f' data-{k}="{html.escape(v)}"' for k, v in attrs.items())
    return (
        f'<div class="nmt-translator" id="{html.escape(element_id)}"{data}>'
        f"<style>{_STYLE}</style>"
        f'<label class="nmt-label">An English sentence, for {html.escape(title)}:'
        '<textarea rows="2" lang="en">The agreement on the European Economic Area was signed '
        "in August 1992.</textarea></label>"
        '<div class="nmt-bar"><button type="button">Translate</button>'
        '<label><input type="checkbox" checked> replace each &lt;unk&gt; by the source word it '
        "attends to most</label></div>"
        '<div class="nmt-status nmt-label" aria-live="polite"></div>'
        '<div class="nmt-out" lang="fr"></div>'
        '<div class="nmt-heat"></div>'
        '<div class="nmt-note nmt-label" aria-live="polite"></div>'
        f"<script>{script}</script>"
        "</div>"
    )


def book_translator(
    published: str | os.PathLike, static_dir: str | os.PathLike, name: str, title: str
) -> str:
    """What the book's page shows: the bundle of ``published`` written as
    ``static_dir/<name>.mjs`` (the book's ``_static``, which the build copies) and the fragment
    that loads it."""
    bundle = f"{name}.mjs"
    info = write_bundle(published, Path(static_dir) / bundle)
    return translator_html(bundle, info["sha256"], info["bytes"], title)


def _ranges(chars) -> str:
    """Code points as hex ranges, ``"30-39 61"``: the form ``translator.js`` embeds."""
    out: list[list[int]] = []
    for c in sorted(set(map(ord, chars))):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return " ".join(f"{a:x}" if a == b else f"{a:x}-{b:x}" for a, b in out)


def tokenizer_tables() -> dict[str, str]:
    """What ``translator.js`` embeds of sacremoses' English tokenizer, from the installed one:
    its character classes as hex ranges (``space``: Python's ``str.isspace``, which its ``\\s``,
    ``split()`` and ``strip()`` use), its non-breaking prefixes and those that break only before
    a number, space-separated. ``translator.js``'s ``tables()`` returns this dict."""
    from sacremoses import MosesTokenizer

    tok = MosesTokenizer(lang="en")
    for name in ("IsAlnum", "IsAlpha", "IsN", "IsLower"):  # sacremoses reads them inside [...]
        if set(getattr(tok, name)) & set("\\]^-["):
            raise ValueError(
                f"sacremoses' {name} holds a character that [...] does not read as itself"
            )
    numeric = set(tok.NUMERIC_ONLY_PREFIXES)
    return {
        "space": _ranges(chr(c) for c in range(0x110000) if chr(c).isspace()),
        "alnum": _ranges(tok.IsAlnum),
        "alpha": _ranges(tok.IsAlpha),
        "n": _ranges(tok.IsN),
        "lower": _ranges(tok.IsLower),
        "prefixes": " ".join(
            p for p in tok.NONBREAKING_PREFIXES if not tok.has_numeric_only(p) and p not in numeric
        ),
        "numeric_only": " ".join(tok.NUMERIC_ONLY_PREFIXES),
    }

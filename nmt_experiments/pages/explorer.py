"""The alignment explorer of the book's alignments chapter: one self-contained HTML fragment (plain
JavaScript, the attention weights inlined as JSON; no server, no network, no library) in which a
reader picks a translated sentence and points at (hovers or taps) a generated word to see its
weights ``alpha_ij`` over the source words, as shades and as numbers.

:func:`explorer_html` is all there is; the notebook displays its result as HTML output, which the
built book keeps as it is. The words come as the data hold them, Moses tokens with their escapes
(``&apos;``, ``&quot;``): the explorer shows each token unescaped and each sentence's name
detokenized, as a reader writes it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence

from nmt_lib.data.text import detokenize

_STYLE = """
.nmt-explorer { font-family: sans-serif; margin: 1em 0; }
.nmt-explorer select { max-width: 100%; font-size: 0.95em; }
.nmt-explorer .nmt-row { display: flex; flex-wrap: wrap; gap: 4px; margin: 0.6em 0; }
.nmt-explorer .nmt-w { padding: 2px 5px; border: 1px solid #bbb; border-radius: 3px;
  font-size: 0.95em; line-height: 1.6; text-align: center; }
.nmt-explorer .nmt-trg .nmt-w { cursor: pointer; background: #f4f4f4; }
.nmt-explorer .nmt-trg .nmt-w.nmt-on { background: #222; color: #fff; }
.nmt-explorer .nmt-w small { display: block; font-size: 0.7em; }
.nmt-explorer .nmt-label { font-size: 0.8em; color: #555; }
"""

_SCRIPT = """
(function () {
  var root = document.getElementById(ROOT_ID);
  var data = JSON.parse(root.querySelector("script[type='application/json']").textContent);
  var pick = root.querySelector("select"), srcRow = root.querySelector(".nmt-src"),
      trgRow = root.querySelector(".nmt-trg"), note = root.querySelector(".nmt-note");
  function word(text) {
    var el = document.createElement("span");
    el.className = "nmt-w";
    el.textContent = text;
    return el;
  }
  function show(s, i) {
    var a = data[s].alpha[i];
    Array.prototype.forEach.call(trgRow.children, function (el, k) {
      el.classList.toggle("nmt-on", k === i);
    });
    Array.prototype.forEach.call(srcRow.children, function (el, j) {
      var w = a[j], light = Math.round(255 * (1 - w));
      el.style.background = "rgb(" + light + "," + light + "," + light + ")";
      el.style.color = w > 0.5 ? "#fff" : "#000";
      el.lastChild.textContent = w.toFixed(2);
    });
    var best = a.indexOf(Math.max.apply(null, a));
    note.textContent = "\\u201c" + data[s].trg[i] + "\\u201d puts " + Math.round(100 * a[best]) +
      " % of its attention on \\u201c" + data[s].src[best] + "\\u201d.";
  }
  function load(s) {
    srcRow.textContent = "";
    trgRow.textContent = "";
    data[s].src.forEach(function (t) {
      var el = word(t);
      el.appendChild(document.createElement("small"));
      srcRow.appendChild(el);
    });
    data[s].trg.forEach(function (t, i) {
      var el = word(t);
      el.tabIndex = 0;
      el.addEventListener("mouseenter", function () { show(s, i); });
      el.addEventListener("click", function () { show(s, i); });
      el.addEventListener("focus", function () { show(s, i); });
      trgRow.appendChild(el);
    });
    show(s, 0);
  }
  data.forEach(function (d, s) {
    var o = document.createElement("option");
    o.value = s;
    o.textContent = d.title;
    pick.appendChild(o);
  });
  pick.addEventListener("change", function () { load(+pick.value); });
  load(0);
})();
"""


def explorer_html(
    panels: Sequence[Mapping], element_id: str = "nmt-explorer", src_lang: str = "en"
) -> str:
    """The explorer for ``panels`` (each with ``title``, ``src``, ``trg`` and ``alpha [len(trg),
    len(src)]``, as :func:`nmt_experiments.core.figures.attention_panel` makes them), as an HTML fragment.
    ``title`` may hold source tokens (in ``src_lang``): it is shown detokenized."""
    if not panels:
        raise ValueError("the alignment explorer needs at least one sentence")
    for p in panels:
        shape = (len(p["alpha"]), {len(row) for row in p["alpha"]})
        if shape != (len(p["trg"]), {len(p["src"])}):
            raise ValueError(f"{p.get('title')!r}: alpha is not [len(trg), len(src)]")
    data = [
        {
            "title": detokenize(p["title"].split(), src_lang),
            "src": [html.unescape(t) for t in p["src"]],
            "trg": [html.unescape(t) for t in p["trg"]],
            "alpha": [[round(float(w), 3) for w in row] for row in p["alpha"]],
        }
        for p in panels
    ]
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")  # safe inside <script>
    script = _SCRIPT.replace("ROOT_ID", json.dumps(element_id))
    return (
        f'<div class="nmt-explorer" id="{html.escape(element_id)}">'
        f"<style>{_STYLE}</style>"
        '<label>Sentence: <select aria-label="sentence"></select></label>'
        '<div class="nmt-label">source words (shade and number: the attention of the word '
        "pointed at below)</div>"
        '<div class="nmt-row nmt-src"></div>'
        '<div class="nmt-label">generated words (hover, tap or tab to one)</div>'
        '<div class="nmt-row nmt-trg"></div>'
        '<div class="nmt-note" aria-live="polite"></div>'
        f'<script type="application/json">{payload}</script>'
        f"<script>{script}</script>"
        "</div>"
    )

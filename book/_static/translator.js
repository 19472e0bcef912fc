/* The translator of the book's alignments chapter: a published RNNsearch run in the reader's
 * browser, with no server, no network and no library.
 *
 * A second implementation of what `python -m nmt_lib translate --replace-unk` does, which
 * tests/test_translator.py holds to the Python one: sacremoses' English tokenization
 * (nmt_lib.data.text: escaping on, aggressive dash splits off), the shortlist, the encoder and the
 * decoder's steps (nmt_lib.paper.encoder, nmt_lib.paper.decoder, nmt_lib.paper.attention, nmt_lib.paper.gru), GroundHog's
 * beam search (nmt_lib.search.beam_search, its rules one for one), the <unk> replacement of
 * nmt_lib.unk, and sacremoses' French detokenization, for display.
 *
 * nmt_experiments/pages/translator.py writes the model as a script that sets window.NMT_TRANSLATOR (float16
 * weights in base64) and the HTML fragment that loads it on its first click. Jupyter Book puts
 * this file on every page of the book: loading it only defines window.NMTTranslator. Numbers are float64 here, float32 in PyTorch: the costs agree to about 1e-6, and the
 * words are the same but where two candidates are that close.
 */
(function () {
  "use strict";

  var PAD = 0, UNK = 1, EOS = 2;

  // ------------------------------------------------------------------------------ tokenizer
  // sacremoses' MosesTokenizer(lang="en").tokenize(text, escape=True,
  // aggressive_dash_splits=False), rule for rule. Its character classes are Perl's Unicode
  // properties of its time, not the browser's: they are embedded (tables(), at the end), and
  // "space" is Python's \s, which is not JavaScript's.
  var T = tables();

  function cls(ranges) {  // "30-39 61" -> "\u{30}-\u{39}\u{61}", the body of a [...] (flag u)
    return ranges.split(" ").map(function (r) {
      return r.split("-").map(function (h) { return "\\u{" + h + "}"; }).join("-");
    }).join("");
  }
  var SP = cls(T.space), ALNUM = cls(T.alnum), ALPHA = cls(T.alpha), NUM = cls(T.n);
  function rx(source) { return new RegExp(source, "gu"); }
  var SPACES = rx("[" + SP + "]+"),
      EDGES = rx("^[" + SP + "]+|[" + SP + "]+$"),
      SPLIT = new RegExp("[" + SP + "]+", "u"),
      PAD_NOT_ALNUM = rx("([^" + ALNUM + SP + "\\.'`,\\-])"),
      COMMA = [[rx("([^" + NUM + "]),"), "$1 , "], [rx(",([^" + NUM + "])"), " , $1"],
               [rx("([" + NUM + "]),$"), "$1 , "]],
      APOSTROPHE = [
        [rx("([^" + ALPHA + "])'([^" + ALPHA + "])"), "$1 ' $2"],
        [rx("([^" + ALPHA + NUM + "])'([" + ALPHA + "])"), "$1 ' $2"],
        [rx("([" + ALPHA + "])'([^" + ALPHA + "])"), "$1 ' $2"],
        [rx("([" + ALPHA + "])'([" + ALPHA + "])"), "$1 '$2"],
        [rx("([" + NUM + "])'(s)"), "$1 '$2"]],
      ESCAPES = [[/&/g, "&amp;"], [/\|/g, "&#124;"], [/</g, "&lt;"], [/>/g, "&gt;"],
                 [/'/g, "&apos;"], [/"/g, "&quot;"], [/\[/g, "&#91;"], [/\]/g, "&#93;"]],
      PERIOD_TOKEN = new RegExp("^([^" + SP + "]+)\\.$", "u"),
      ANY_ALPHA = new RegExp("[" + ALPHA + "]", "u"),
      LOWER_FIRST = new RegExp("^[" + cls(T.lower) + "]", "u"),
      PREFIXES = new Set(T.prefixes.split(" ")),
      NUMERIC_ONLY = new Set(T.numeric_only.split(" "));

  function strip(text) { return text.replace(EDGES, ""); }  // Python's str.strip()
  function split(text) {  // Python's str.split()
    text = strip(text);
    return text ? text.split(SPLIT) : [];
  }
  function sub(text, rules) {
    rules.forEach(function (r) { text = text.replace(r[0], r[1]); });
    return text;
  }

  // A word ending in "." keeps it if it is a known abbreviation ("Mr."), holds another dot and a
  // letter ("U.S."), comes before a lower-case word, or is "No."-like before a number.
  function nonbreaking(text) {
    var tokens = split(text);
    tokens.forEach(function (token, i) {
      var m = PERIOD_TOKEN.exec(token);
      if (!m) return;
      var prefix = m[1], next = tokens[i + 1];
      if ((prefix.indexOf(".") >= 0 && ANY_ALPHA.test(prefix)) ||
          (PREFIXES.has(prefix) && !NUMERIC_ONLY.has(prefix)) ||
          (next && LOWER_FIRST.test(next))) return;
      if (NUMERIC_ONLY.has(prefix) && next && /^[0-9]+/.test(next)) return;
      tokens[i] = prefix + " .";
    });
    return tokens.join(" ");
  }

  function tokenize(text) {
    text = text.replace(SPACES, " ").replace(/[\u0000-\u001f]/g, "");
    text = strip(text).replace(PAD_NOT_ALNUM, " $1 ");
    // a run of k dots -> " DOT...DOTMULTI" (k times DOT), restored after the other rules
    text = text.replace(/\.{2,}/g, function (run, at, whole) {
      return " " + "DOT".repeat(run.length) + "MULTI" + (at + run.length < whole.length ? " " : "");
    });
    text = nonbreaking(sub(sub(text, COMMA), APOSTROPHE));
    text = strip(text.replace(SPACES, " ")).replace(/\.' ?$/, " . ' ");
    text = text.replace(/(?:DOT)+MULTI/g, function (m) { return ".".repeat((m.length - 5) / 3); });
    return split(sub(text, ESCAPES));
  }

  // --------------------------------------------------------------------------- detokenizer
  // sacremoses' MosesDetokenizer(lang="fr").detokenize(tokens, unescape=True), for display:
  // every rule that French text meets (not the CJK, Czech, Finnish or English ones).
  var UNESCAPES = [[/&bar;/g, "|"], [/&#124;/g, "|"], [/&lt;/g, "<"], [/&gt;/g, ">"],
                   [/&bra;/g, "["], [/&ket;/g, "]"], [/&quot;/g, '"'], [/&apos;/g, "'"],
                   [/&#91;/g, "["], [/&#93;/g, "]"], [/&amp;/g, "&"]],
      CURRENCY = /^[\p{Sc}([{¿¡]+$/u,
      PUNCT = /^[,.?!:;\\%}\])]+$/,
      FRENCH_SPACED = /^[?!:;\\%]$/,  // French puts a space before these
      CONTRACTION = new RegExp("[" + ALPHA + "]'$", "u"),
      STARTS_ALPHA = new RegExp("^[" + ALPHA + "]", "u"),
      OPEN_QUOTE = /^['"„“`]+$/;

  function unescape(text) { return sub(text, UNESCAPES); }

  function detokenize(tokens) {
    var words = split(unescape((" " + tokens.join(" ") + " ").replace(/ @-@ /g, "-")));
    var out = "", space = " ", quotes = {};
    words.forEach(function (w, i) {
      if (CURRENCY.test(w)) {  // attached to what follows
        out += space + w;
        space = "";
      } else if (PUNCT.test(w)) {  // attached to what precedes
        out += (FRENCH_SPACED.test(w) ? " " : "") + w;
        space = " ";
      } else if (i < words.length - 1 && CONTRACTION.test(w) && STARTS_ALPHA.test(words[i + 1])) {
        out += space + w;  // "l'" + "homme"
        space = "";
      } else if (OPEN_QUOTE.test(w)) {  // opening quotes attach right, closing ones left
        var q = /^[„“”]+$/.test(w) ? '"' : w, n = quotes[q] || 0;
        out += n % 2 === 0 ? space + w : w;
        space = n % 2 === 0 ? "" : " ";
        quotes[q] = n + 1;
      } else {
        out += space + w;
        space = " ";
      }
    });
    return strip(out.replace(/ {2,}/g, " "));
  }

  // ------------------------------------------------------------------------------- weights
  var HALF = null;  // every float16 bit pattern's value, made when a model is first loaded
  function halfTable() {
    HALF = new Float32Array(65536);
    for (var h = 0; h < 65536; h++) {
      var e = (h >> 10) & 31, f = h & 1023, v = e === 0 ? f * Math.pow(2, -24)
        : e === 31 ? (f ? NaN : Infinity) : (1 + f / 1024) * Math.pow(2, e - 15);
      HALF[h] = h & 0x8000 ? -v : v;
    }
    return HALF;
  }

  function tensor(t) {  // {shape, data: base64 of little-endian float16} -> {shape, data}
    var bin = atob(t.data), data = new Float32Array(bin.length >> 1), half = HALF || halfTable();
    for (var i = 0; i < data.length; i++) {
      data[i] = half[bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8)];
    }
    return {shape: t.shape, data: data};
  }

  // ------------------------------------------------------------------------------- the model
  // nmt_lib.paper.model.RNNsearch's functions on one sentence; vectors are Float64Arrays, weights
  // [rows, cols] row-major as PyTorch stores them.

  function linear(W, x, b) {  // F.linear: W x (+ b)
    var rows = W.shape[0], cols = W.shape[1], w = W.data, y = new Float64Array(rows);
    for (var i = 0; i < rows; i++) {
      var s = 0, o = i * cols;
      for (var j = 0; j < cols; j++) s += w[o + j] * x[j];
      y[i] = b ? s + b.data[i] : s;
    }
    return y;
  }
  function sigmoid(x) { return 1 / (1 + Math.exp(-x)); }

  // One reset-before GRU step (nmt_lib.paper.gru.gru_step, App. A.1.1): `a` holds the input
  // pre-activations [W x + b, W_z x (+ b_z), W_r x (+ b_r)], context terms included.
  function gruStep(g, a, h) {
    var n = h.length, Ur = linear(g.U_r, h), Uz = linear(g.U_z, h), rh = new Float64Array(n),
        z = new Float64Array(n), out = new Float64Array(n);
    for (var i = 0; i < n; i++) {
      rh[i] = sigmoid(a[2][i] + Ur[i]) * h[i];  // r ∘ h: the reset comes BEFORE U
      z[i] = sigmoid(a[1][i] + Uz[i]);
    }
    var U_rh = linear(g.U, rh);
    for (i = 0; i < n; i++) out[i] = (1 - z[i]) * h[i] + z[i] * Math.tanh(a[0][i] + U_rh[i]);
    return out;
  }
  function gruInput(g, x) {  // GRU.project: [W x + b; W_z x + b_z; W_r x + b_r]
    return [linear(g.W, x, g.b), linear(g.W_z, x, g.b_z), linear(g.W_r, x, g.b_r)];
  }
  function embed(E, b, i) {  // ē(i) = E[i] + b_E
    var m = E.shape[1], e = new Float64Array(m);
    for (var j = 0; j < m; j++) e[j] = E.data[i * m + j] + (b ? b.data[j] : 0);
    return e;
  }

  function Model(bundle) {
    var P = {}, cfg = bundle.config.model;
    Object.keys(bundle.tensors).forEach(function (k) { P[k] = tensor(bundle.tensors[k]); });
    function gru(prefix) {
      var g = {};
      ["W", "W_z", "W_r", "U", "U_z", "U_r", "b", "b_z", "b_r"].forEach(function (k) {
        g[k] = P[prefix + k] || null;
      });
      return g;
    }
    this.config = bundle.config;
    this.sha256 = bundle.sha256;
    this.src = new Map(bundle.src_vocab.map(function (w, i) { return [w, i]; }));
    this.trg = bundle.trg_vocab;
    this.n = cfg.n;
    this.fwd = gru("encoder.forward_gru.");
    this.bwd = gru("encoder.backward_gru.");
    this.dec = gru("decoder.gru.");
    this.P = P;
  }

  // The annotations h_j = [h→_j; h←_j] and U_a h_j of the source ids x (EOS included), and
  // s_0 = tanh(W_s h←_1 + b_s) (nmt_lib.paper.encoder, RNNsearch.encode and init_state).
  Model.prototype.encode = function (x) {
    var P = this.P, n = this.n, T = x.length, h = [], fwd = new Float64Array(n),
        bwd = new Float64Array(n);
    var e = x.map(function (i) { return embed(P["encoder.E_bar"], P["encoder.b_E"], i); });
    for (var j = 0; j < T; j++) {
      fwd = gruStep(this.fwd, gruInput(this.fwd, e[j]), fwd);
      h.push(new Float64Array(2 * n));
      h[j].set(fwd);
    }
    for (j = T - 1; j >= 0; j--) {
      bwd = gruStep(this.bwd, gruInput(this.bwd, e[j]), bwd);
      h[j].set(bwd, n);
    }
    return {
      h: h,
      Uh: h.map(function (hj) { return linear(P["decoder.attention.U_a"], hj); }),
      s0: linear(P["decoder.W_s"], h[0].subarray(n), P["decoder.b_s"]).map(Math.tanh)
    };
  };

  // One step's readout for each state of `rows` ({s, y}: s_{i-1} and y_{i-1}, or -1 at the
  // first step): the attention α_i and c_i from s_{i-1}, the deep output with its maxout, and
  // log p(y_i | ...) over the target shortlist (RNNsearch.readout_step; nmt_lib.paper.decoder).
  Model.prototype.readout = function (enc, rows) {
    var P = this.P, Tx = enc.h.length, ctx = enc.h[0].length, v_a = P["decoder.attention.v_a"];
    var out = rows.map(function (row) {
      var Ws = linear(P["decoder.attention.W_a"], row.s), energy = new Float64Array(Tx);
      for (var j = 0; j < Tx; j++) {  // e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)
        var s = 0, Uh = enc.Uh[j];
        for (var k = 0; k < Ws.length; k++) s += v_a.data[k] * Math.tanh(Ws[k] + Uh[k]);
        energy[j] = s;
      }
      var alpha = softmax(energy), c = new Float64Array(ctx);
      for (j = 0; j < Tx; j++) for (k = 0; k < ctx; k++) c[k] += alpha[j] * enc.h[j][k];
      var t = linear(P["decoder.U_o"], row.s, P["decoder.b_o"]), Cc = linear(P["decoder.C_o"], c);
      var Ve = row.y < 0 ? null  // no previous word at the first step: the term is 0
        : linear(P["decoder.V_o"], embed(P["decoder.E"], P["decoder.b_E"], row.y));
      var l = t.length / 2, tmax = new Float64Array(l);
      for (k = 0; k < t.length; k++) t[k] += Cc[k] + (Ve ? Ve[k] : 0);
      for (k = 0; k < l; k++) tmax[k] = Math.max(t[2 * k], t[2 * k + 1]);  // maxout over pairs
      return {alpha: alpha, c: c, t: P["decoder.W1"] ? linear(P["decoder.W1"], tmax) : tmax};
    });
    // W_o t_i + b_y (W_o = W2 W1 with a rank), every row at once: the largest matrix is read
    // once per step, not once per hypothesis
    var W = P["decoder.W2"] || P["decoder.W_o"], K = W.shape[0], r = W.shape[1], w = W.data,
        b = P["decoder.b_y"].data;
    var logits = out.map(function () { return new Float64Array(K); });
    for (var i = 0; i < K; i++) {
      for (var q = 0; q < out.length; q++) {
        var s = b[i], t = out[q].t;
        for (var k = 0; k < r; k++) s += w[i * r + k] * t[k];
        logits[q][i] = s;
      }
    }
    out.forEach(function (o, q) { o.logp = logSoftmax(logits[q]); });
    return out;
  };

  // s_i from s_{i-1}, the word y_i just chosen and the same c_i (Decoder.step_state).
  Model.prototype.next = function (s, y, c) {
    var P = this.P, a = gruInput(this.dec, embed(P["decoder.E"], P["decoder.b_E"], y));
    [P["decoder.C"], P["decoder.C_z"], P["decoder.C_r"]].forEach(function (C, g) {
      var Cc = linear(C, c);
      for (var i = 0; i < Cc.length; i++) a[g][i] += Cc[i];
    });
    return gruStep(this.dec, a, s);
  };

  function softmax(x) {
    var m = Math.max.apply(null, x), y = new Float64Array(x.length), sum = 0;
    for (var i = 0; i < x.length; i++) sum += (y[i] = Math.exp(x[i] - m));
    for (i = 0; i < x.length; i++) y[i] /= sum;
    return y;
  }
  function logSoftmax(x) {
    var m = -Infinity, sum = 0, y = new Float64Array(x.length);
    for (var i = 0; i < x.length; i++) m = Math.max(m, x[i]);
    for (i = 0; i < x.length; i++) sum += Math.exp(x[i] - m);
    var lse = m + Math.log(sum);
    for (i = 0; i < x.length; i++) y[i] = x[i] - lse;
    return y;
  }

  // ---------------------------------------------------------------------------- beam search
  // nmt_lib.search.beam_search for one sentence, its rules one for one. Costs are accumulated
  // in float32 (Math.fround), as PyTorch accumulates them; ties go to the lower index.
  var f32 = Math.fround;

  // The k best words of a row of log-probabilities, best first, <pad>, <unk> (ignoreUnk) and,
  // while noEos, EOS excluded (nmt_lib.paper.steps.best_words).
  function bestWords(logp, k, noEos, ignoreUnk) {
    var top = [];  // [logp, word], sorted, at most k
    for (var w = 0; w < logp.length; w++) {
      var lp = (w === PAD || (w === UNK && ignoreUnk) || (w === EOS && noEos)) ? -Infinity
        : f32(logp[w]);
      if (top.length === k && !(lp > top[k - 1][0])) continue;
      var at = top.length;
      while (at > 0 && lp > top[at - 1][0]) at--;
      top.splice(at, 0, [lp, w]);
      if (top.length > k) top.pop();
    }
    return top;
  }

  function beamSearch(model, x, opt) {
    var beam = opt.beam, K = model.trg.length, enc = model.encode(x);
    var minLen = Math.floor(x.length * opt.min_len_ratio),
        maxLen = Math.max(1, Math.floor(x.length * opt.max_len_ratio));
    var live = [{s: enc.s0, y: -1, cost: 0, tokens: [], alpha: []}], nFin = 0, best = null;
    function record(h, word, cost, score, alpha, finished) {
      best = {tokens: h.tokens.concat([word]), cost: cost, score: score, finished: finished,
              alpha: h.alpha.concat([alpha])};
    }
    for (var k = 0; k < maxLen; k++) {
      var out = model.readout(enc, live), cand = [], kb = Math.min(beam, K);
      live.forEach(function (h, p) {
        bestWords(out[p].logp, kb, k < minLen, opt.ignore_unk).forEach(function (c) {
          cand.push({cost: f32(h.cost - c[0]), parent: p, word: c[1]});
        });
      });
      cand.sort(function (a, b) { return a.cost - b.cost; });  // stable: ties by index
      var kept = cand.slice(0, beam).filter(function (c, slot) {
        return slot < beam - nFin && isFinite(c.cost);  // a finished hypothesis takes a slot
      });
      var ended = kept.filter(function (c) { return c.word === EOS; }),
          next = kept.filter(function (c) { return c.word !== EOS; });
      var score = function (c) { return opt.normalize ? f32(c.cost / (k + 1)) : c.cost; };
      if (ended.length && (!best || score(ended[0]) < best.score)) {  // ended[0]: the lowest cost
        var c0 = ended[0];
        record(live[c0.parent], EOS, c0.cost, score(c0), out[c0.parent].alpha, true);
      }
      nFin += ended.length;
      var done = nFin >= beam || !next.length || k + 1 >= maxLen;
      if (done && !best && next.length) {  // nothing finished: the best live hypothesis
        var c1 = next[0];
        record(live[c1.parent], c1.word, c1.cost, score(c1), out[c1.parent].alpha, false);
      }
      if (done) break;
      live = next.map(function (c) {  // s_i from the parent's s_{i-1}, y_i and the same c_i
        var h = live[c.parent], o = out[c.parent];
        return {s: model.next(h.s, c.word, o.c), y: c.word, cost: c.cost,
                tokens: h.tokens.concat([c.word]), alpha: h.alpha.concat([o.alpha])};
      });
    }
    return best;
  }

  // ------------------------------------------------------------------------ the translation
  function load(bundle, sha256) {
    if (!bundle) throw new Error("The model's file did not define window.NMT_TRANSLATOR.");
    if (sha256 && bundle.sha256 !== sha256) {
      throw new Error("The model's file holds other weights than this page was made with: " +
                      "build the book again (jupyter-book build book).");
    }
    return new Model(bundle);
  }

  // A raw English sentence -> {src: Moses tokens, x: ids (EOS included), hyp: the best
  // hypothesis (tokens with EOS, cost, score, finished, alpha [len(tokens)][len(x)]), words:
  // the French tokens without EOS, replaced: the same with each <unk> replaced by the source
  // token it attends to most (nmt_lib.unk.replace)}. `opt`: the search, by default the model's.
  function translate(model, sentence, opt) {
    var src = tokenize(sentence), search = Object.assign({}, model.config.search, opt || {});
    if (!src.length) return {src: src, x: [], hyp: null, words: [], replaced: []};
    var x = src.map(function (w) { return model.src.has(w) ? model.src.get(w) : UNK; });
    x.push(EOS);
    var hyp = beamSearch(model, x, search), words = [];
    for (var i = 0; i < hyp.tokens.length && hyp.tokens[i] !== EOS; i++) {
      if (hyp.tokens[i] !== PAD) words.push(model.trg[hyp.tokens[i]]);
    }
    var replaced = words.map(function (w, i) {
      if (w !== "<unk>") return w;
      var a = hyp.alpha[i], j = a.indexOf(Math.max.apply(null, a));  // the first maximum
      return j < src.length ? src[j] : w;  // on the source's end of sentence: stays <unk>
    });
    return {src: src, x: x, hyp: hyp, words: words, replaced: replaced};
  }

  // ----------------------------------------------------------------------------- the page
  // The result in the fragment of nmt_experiments.pages.translator.translator_html: the French sentence
  // (with or without the replacement, as its checkbox says) and the alignment as a heat map,
  // one row per generated word (EOS: <end>), one column per source word, 0 white and 1 black.
  function render(root, result) {
    var unk = root.querySelector("input[type=checkbox]").checked,
        words = unk ? result.replaced : result.words, heat = root.querySelector(".nmt-heat"),
        note = root.querySelector(".nmt-note");
    root.querySelector(".nmt-out").textContent = detokenize(words);
    heat.textContent = "";
    note.textContent = "";
    if (!result.hyp) return;
    var label = function (t) { return t === "</s>" ? "<end>" : unescape(t); };
    var src = result.src.concat(["</s>"]).map(label),
        trg = words.concat(result.hyp.finished ? ["</s>"] : []).map(label);
    var table = document.createElement("table"), head = table.createTHead().insertRow();
    head.appendChild(document.createElement("th"));
    src.forEach(function (w) {
      var th = document.createElement("th");
      th.textContent = w;
      head.appendChild(th);
    });
    var body = table.createTBody();
    trg.forEach(function (w, i) {
      var tr = body.insertRow(), th = document.createElement("th"), a = result.hyp.alpha[i];
      th.textContent = w;
      if (unk && result.words[i] === "<unk>" && result.replaced[i] !== "<unk>") {
        th.className = "nmt-replaced";
        th.title = "<unk>, replaced by the source word it attends to most";
      }
      tr.appendChild(th);
      a.forEach(function (weight, j) {
        var td = tr.insertCell(), light = Math.round(255 * (1 - weight));
        td.style.background = "rgb(" + light + "," + light + "," + light + ")";
        td.title = w + " \u2190 " + src[j] + ": " + weight.toFixed(3);
        td.dataset.weight = weight.toFixed(3);
        td.addEventListener("mouseenter", function () {
          Array.prototype.forEach.call(table.querySelectorAll(".nmt-on"), function (el) {
            el.classList.remove("nmt-on");
          });
          td.classList.add("nmt-on");
          note.textContent = "\u201c" + w + "\u201d puts " + (100 * weight).toFixed(1) +
            " % of its attention on \u201c" + src[j] + "\u201d.";
        });
      });
    });
    heat.appendChild(table);
  }

  window.NMTTranslator = {
    tokenize: tokenize, detokenize: detokenize, tables: T, load: load, translate: translate,
    beamSearch: beamSearch, render: render
  };

  // sacremoses' English tables, from nmt_experiments.pages.translator.tokenizer_tables() (the test compares):
  // character classes as hex code point ranges; non-breaking prefixes, and those that do not
  // break only before a number.
  function tables() {
    return {
      space:
        "9-d 1c-20 85 a0 1680 2000-200a 2028-2029 202f 205f 3000",
      alnum:
        "30-39 41-5a 61-7a aa b5 ba c0-d6 d8-f6 f8-2c1 2c6-2d1 2e0-2e4 2ec 2ee 345 370-374 " +
        "376-377 37a-37d 37f 386 388-38a 38c 38e-3a1 3a3-3f5 3f7-481 48a-52f 531-556 559 " +
        "561-587 5b0-5bd 5bf 5c1-5c2 5c4-5c5 5c7 5d0-5ea 5f0-5f2 610-61a 620-657 659-669 " +
        "66e-6d3 6d5-6dc 6e1-6e8 6ed-6fc 6ff 710-73f 74d-7b1 7c0-7ea 7f4-7f5 7fa 800-817 " +
        "81a-82c 840-858 8a0-8b2 8e4-8e9 8f0-950 955-963 966-96f 971-983 985-98c 98f-990 " +
        "993-9a8 9aa-9b0 9b2 9b6-9b9 9bc-9c4 9c7-9c8 9cb-9ce 9d7 9dc-9dd 9df-9e3 9e6-9f1 " +
        "a01-a03 a05-a0a a0f-a10 a13-a28 a2a-a30 a32-a33 a35-a36 a38-a39 a3c a3e-a42 a47-a48 " +
        "a4b-a4d a51 a59-a5c a5e a66-a75 a81-a83 a85-a8d a8f-a91 a93-aa8 aaa-ab0 ab2-ab3 " +
        "ab5-ab9 abc-ac5 ac7-ac9 acb-acd ad0 ae0-ae3 ae6-aef afd-aff b01-b03 b05-b0c b0f-b10 " +
        "b13-b28 b2a-b30 b32-b33 b35-b39 b3c-b44 b47-b48 b4b-b4d b56-b57 b5c-b5d b5f-b63 " +
        "b66-b6f b71 b82-b83 b85-b8a b8e-b90 b92-b95 b99-b9a b9c b9e-b9f ba3-ba4 ba8-baa " +
        "bae-bb9 bbe-bc2 bc6-bc8 bca-bcd bd0 bd7 be6-bef c00-c03 c05-c0c c0e-c10 c12-c28 " +
        "c2a-c39 c3d-c44 c46-c48 c4a-c4d c55-c56 c58-c59 c60-c63 c66-c6f c81-c83 c85-c8c " +
        "c8e-c90 c92-ca8 caa-cb3 cb5-cb9 cbc-cc4 cc6-cc8 cca-ccd cd5-cd6 cde ce0-ce3 ce6-cef " +
        "cf1-cf2 d01-d03 d05-d0c d0e-d10 d12-d44 d46-d48 d4a-d4e d57 d60-d63 d66-d6f d7a-d7f " +
        "d82-d83 d85-d96 d9a-db1 db3-dbb dbd dc0-dc6 dca dcf-dd4 dd6 dd8-ddf de6-def df2-df3 " +
        "e01-e3a e40-e46 e4d e50-e59 e81-e82 e84 e87-e88 e8a e8d e94-e97 e99-e9f ea1-ea3 ea5 " +
        "ea7 eaa-eab ead-ebd ec0-ec4 ec6 ecd ed0-ed9 edc-edf f00 f20-f29 f40-f47 f49-f6c " +
        "f71-f81 f88-f97 f99-fbc 1000-1036 1038-1039 103b-1049 1050-1062 1065-1068 106e-1086 " +
        "108e 1090-1099 109c-109d 10a0-10c5 10c7 10cd 10d0-10fa 10fc-1248 124a-124d 1250-1256 " +
        "1258 125a-125d 1260-1288 128a-128d 1290-12b0 12b2-12b5 12b8-12be 12c0 12c2-12c5 " +
        "12c8-12d6 12d8-1310 1312-1315 1318-135a 135f 1380-138f 13a0-13f4 1401-166c 166f-167f " +
        "1681-169a 16a0-16ea 16ee-16f8 1700-170c 170e-1714 1720-1733 1740-1753 1760-176c " +
        "176e-1770 1772-1773 1780-17b3 17b6-17c8 17d7 17dc 17e0-17e9 1810-1819 1820-1877 " +
        "1880-18aa 18b0-18f5 1900-191e 1920-192b 1930-1938 1946-196d 1970-1974 1980-19ab " +
        "19b0-19c9 19d0-19d9 1a00-1a1b 1a20-1a5e 1a61-1a74 1a80-1a89 1a90-1a99 1aa7 1b00-1b33 " +
        "1b35-1b43 1b45-1b4b 1b50-1b59 1b80-1ba9 1bab-1be5 1be7-1bf1 1c00-1c35 1c37 1c40-1c49 " +
        "1c4d-1c7d 1ce9-1cec 1cee-1cf3 1cf5-1cf6 1d00-1dbf 1de7-1df4 1e00-1f15 1f18-1f1d " +
        "1f20-1f45 1f48-1f4d 1f50-1f57 1f59 1f5b 1f5d 1f5f-1f7d 1f80-1fb4 1fb6-1fbc 1fbe " +
        "1fc2-1fc4 1fc6-1fcc 1fd0-1fd3 1fd6-1fdb 1fe0-1fec 1ff2-1ff4 1ff6-1ffc 2071 207f " +
        "2090-209c 2102 2107 210a-2113 2115 2119-211d 2124 2126 2128 212a-212d 212f-2139 " +
        "213c-213f 2145-2149 214e 2160-2188 24b6-24e9 25cc 2c00-2c2e 2c30-2c5e 2c60-2ce4 " +
        "2ceb-2cee 2cf2-2cf3 2d00-2d25 2d27 2d2d 2d30-2d67 2d6f 2d80-2d96 2da0-2da6 2da8-2dae " +
        "2db0-2db6 2db8-2dbe 2dc0-2dc6 2dc8-2dce 2dd0-2dd6 2dd8-2dde 2de0-2dff 2e2f 3006 " +
        "3031-3035 303c 3041-3096 309d-309f 30a1-30fa 30fc-30ff 3105-312d 3131-318e 31a0-31ba " +
        "31f0-31ff a000-a48c a4d0-a4fd a500-a60c a610-a62b a640-a66e a674-a67b a67f-a69d " +
        "a69f-a6ef a717-a71f a722-a788 a78b-a78e a790-a7ad a7b0-a7b1 a7f7-a801 a803-a805 " +
        "a807-a80a a80c-a827 a840-a873 a880-a8c4 a8d0-a8d9 a8f2-a8f7 a8fb a900-a92a a930-a953 " +
        "a960-a97c a980-a9b2 a9b4-a9bf a9cf-a9d9 a9e0-a9e4 a9e6-a9fe aa00-aa36 aa40-aa4d " +
        "aa50-aa59 aa60-aa76 aa7a aa7e-aabe aac0 aac2 aadb-aadd aae0-aaef aaf2-aaf6 ab01-ab06 " +
        "ab09-ab0e ab11-ab16 ab20-ab26 ab28-ab2e ab30-ab5a ab5c-ab5f ab64-ab65 abc0-abea " +
        "abf0-abf9 d7b0-d7c6 d7cb-d7fb fb00-fb06 fb13-fb17 fb1d-fb28 fb2a-fb36 fb38-fb3c fb3e " +
        "fb40-fb41 fb43-fb44 fb46-fbb1 fbd3-fd3d fd50-fd8f fd92-fdc7 fdf0-fdfb fe70-fe74 " +
        "fe76-fefc ff10-ff19 ff21-ff3a ff41-ff5a ff66-ffbe ffc2-ffc7 ffca-ffcf ffd2-ffd7 " +
        "ffda-ffdc 10a3f 11046 110b9-110ba 11133 11173 111c0 111ca 11235-11236 112e9-112ea " +
        "1133c 1134d 11442 11446 114c2-114c3 115bf-115c0 1163f 116b6-116b7 11839-1183a 119e0 " +
        "11a34 11c3f 11d42 11d45 11d97 1e94a",
      alpha:
        "41-5a 61-7a aa b5 ba c0-d6 d8-f6 f8-2c1 2c6-2d1 2e0-2e4 2ec 2ee 345 370-374 376-377 " +
        "37a-37d 37f 386 388-38a 38c 38e-3a1 3a3-3f5 3f7-481 48a-52f 531-556 559 561-587 " +
        "5b0-5bd 5bf 5c1-5c2 5c4-5c5 5c7 5d0-5ea 5f0-5f2 610-61a 620-657 659-65f 66e-6d3 " +
        "6d5-6dc 6e1-6e8 6ed-6ef 6fa-6fc 6ff 710-73f 74d-7b1 7ca-7ea 7f4-7f5 7fa 800-817 " +
        "81a-82c 840-858 8a0-8b2 8e4-8e9 8f0-950 955-963 971-983 985-98c 98f-990 993-9a8 " +
        "9aa-9b0 9b2 9b6-9b9 9bc-9c4 9c7-9c8 9cb-9ce 9d7 9dc-9dd 9df-9e3 9f0-9f1 a01-a03 " +
        "a05-a0a a0f-a10 a13-a28 a2a-a30 a32-a33 a35-a36 a38-a39 a3c a3e-a42 a47-a48 a4b-a4d " +
        "a51 a59-a5c a5e a70-a75 a81-a83 a85-a8d a8f-a91 a93-aa8 aaa-ab0 ab2-ab3 ab5-ab9 " +
        "abc-ac5 ac7-ac9 acb-acd ad0 ae0-ae3 afd-aff b01-b03 b05-b0c b0f-b10 b13-b28 b2a-b30 " +
        "b32-b33 b35-b39 b3c-b44 b47-b48 b4b-b4d b56-b57 b5c-b5d b5f-b63 b71 b82-b83 b85-b8a " +
        "b8e-b90 b92-b95 b99-b9a b9c b9e-b9f ba3-ba4 ba8-baa bae-bb9 bbe-bc2 bc6-bc8 bca-bcd " +
        "bd0 bd7 c00-c03 c05-c0c c0e-c10 c12-c28 c2a-c39 c3d-c44 c46-c48 c4a-c4d c55-c56 " +
        "c58-c59 c60-c63 c81-c83 c85-c8c c8e-c90 c92-ca8 caa-cb3 cb5-cb9 cbc-cc4 cc6-cc8 " +
        "cca-ccd cd5-cd6 cde ce0-ce3 cf1-cf2 d01-d03 d05-d0c d0e-d10 d12-d44 d46-d48 d4a-d4e " +
        "d57 d60-d63 d7a-d7f d82-d83 d85-d96 d9a-db1 db3-dbb dbd dc0-dc6 dca dcf-dd4 dd6 " +
        "dd8-ddf df2-df3 e01-e3a e40-e46 e4d e81-e82 e84 e87-e88 e8a e8d e94-e97 e99-e9f " +
        "ea1-ea3 ea5 ea7 eaa-eab ead-ebd ec0-ec4 ec6 ecd edc-edf f00 f40-f47 f49-f6c f71-f81 " +
        "f88-f97 f99-fbc 1000-1036 1038-1039 103b-103f 1050-1062 1065-1068 106e-1086 108e " +
        "109c-109d 10a0-10c5 10c7 10cd 10d0-10fa 10fc-1248 124a-124d 1250-1256 1258 125a-125d " +
        "1260-1288 128a-128d 1290-12b0 12b2-12b5 12b8-12be 12c0 12c2-12c5 12c8-12d6 12d8-1310 " +
        "1312-1315 1318-135a 135f 1380-138f 13a0-13f4 1401-166c 166f-167f 1681-169a 16a0-16ea " +
        "16ee-16f8 1700-170c 170e-1714 1720-1733 1740-1753 1760-176c 176e-1770 1772-1773 " +
        "1780-17b3 17b6-17c8 17d7 17dc 1820-1877 1880-18aa 18b0-18f5 1900-191e 1920-192b " +
        "1930-1938 1950-196d 1970-1974 1980-19ab 19b0-19c9 1a00-1a1b 1a20-1a5e 1a61-1a74 1aa7 " +
        "1b00-1b33 1b35-1b43 1b45-1b4b 1b80-1ba9 1bab-1baf 1bba-1be5 1be7-1bf1 1c00-1c35 1c37 " +
        "1c4d-1c4f 1c5a-1c7d 1ce9-1cec 1cee-1cf3 1cf5-1cf6 1d00-1dbf 1de7-1df4 1e00-1f15 " +
        "1f18-1f1d 1f20-1f45 1f48-1f4d 1f50-1f57 1f59 1f5b 1f5d 1f5f-1f7d 1f80-1fb4 1fb6-1fbc " +
        "1fbe 1fc2-1fc4 1fc6-1fcc 1fd0-1fd3 1fd6-1fdb 1fe0-1fec 1ff2-1ff4 1ff6-1ffc 2071 207f " +
        "2090-209c 2102 2107 210a-2113 2115 2119-211d 2124 2126 2128 212a-212d 212f-2139 " +
        "213c-213f 2145-2149 214e 2160-2188 24b6-24e9 25cc 2c00-2c2e 2c30-2c5e 2c60-2ce4 " +
        "2ceb-2cee 2cf2-2cf3 2d00-2d25 2d27 2d2d 2d30-2d67 2d6f 2d80-2d96 2da0-2da6 2da8-2dae " +
        "2db0-2db6 2db8-2dbe 2dc0-2dc6 2dc8-2dce 2dd0-2dd6 2dd8-2dde 2de0-2dff 2e2f 3006 " +
        "3031-3035 303c 3041-3096 309d-309f 30a1-30fa 30fc-30ff 3105-312d 3131-318e 31a0-31ba " +
        "31f0-31ff a000-a48c a4d0-a4fd a500-a60c a610-a61f a62a-a62b a640-a66e a674-a67b " +
        "a67f-a69d a69f-a6ef a717-a71f a722-a788 a78b-a78e a790-a7ad a7b0-a7b1 a7f7-a801 " +
        "a803-a805 a807-a80a a80c-a827 a840-a873 a880-a8c4 a8f2-a8f7 a8fb a90a-a92a a930-a953 " +
        "a960-a97c a980-a9b2 a9b4-a9bf a9cf a9e0-a9e4 a9e6-a9ef a9fa-a9fe aa00-aa36 aa40-aa4d " +
        "aa60-aa76 aa7a aa7e-aabe aac0 aac2 aadb-aadd aae0-aaef aaf2-aaf6 ab01-ab06 ab09-ab0e " +
        "ab11-ab16 ab20-ab26 ab28-ab2e ab30-ab5a ab5c-ab5f ab64-ab65 abc0-abea d7b0-d7c6 " +
        "d7cb-d7fb fb00-fb06 fb13-fb17 fb1d-fb28 fb2a-fb36 fb38-fb3c fb3e fb40-fb41 fb43-fb44 " +
        "fb46-fbb1 fbd3-fd3d fd50-fd8f fd92-fdc7 fdf0-fdfb fe70-fe74 fe76-fefc ff21-ff3a " +
        "ff41-ff5a ff66-ffbe ffc2-ffc7 ffca-ffcf ffd2-ffd7 ffda-ffdc 10a3f 11046 110b9-110ba " +
        "11133 11173 111c0 111ca 11235-11236 112e9-112ea 1133c 1134d 11442 11446 114c2-114c3 " +
        "115bf-115c0 1163f 116b6-116b7 11839-1183a 119e0 11a34 11c3f 11d42 11d45 11d97 1e94a",
      n:
        "a 30-39 b2-b3 b9 bc-be 660-669 6f0-6f9 7c0-7c9 966-96f 9e6-9ef 9f4-9f9 a66-a6f ae6-aef " +
        "b66-b6f b72-b77 be6-bf2 c66-c6f c78-c7e ce6-cef d66-d75 de6-def e50-e59 ed0-ed9 " +
        "f20-f33 1040-1049 1090-1099 1369-137c 16ee-16f0 17e0-17e9 17f0-17f9 1810-1819 " +
        "1946-194f 19d0-19da 1a80-1a89 1a90-1a99 1b50-1b59 1bb0-1bb9 1c40-1c49 1c50-1c59 2070 " +
        "2074-2079 2080-2089 2150-2182 2185-2189 2460-249b 24ea-24ff 2776-2793 2cfd 3192-3195 " +
        "3220-3229 3248-324f 3251-325f 3280-3289 32b1-32bf a620-a629 a6e6-a6ef a830-a835 " +
        "a8d0-a8d9 a900-a909 a9d0-a9d9 a9f0-a9f9 aa50-aa59 abf0-abf9 ff10-ff19",
      lower:
        "61-7a aa b5 ba df-f6 f8-ff 101 103 105 107 109 10b 10d 10f 111 113 115 117 119 11b 11d " +
        "11f 121 123 125 127 129 12b 12d 12f 131 133 135 137-138 13a 13c 13e 140 142 144 146 " +
        "148-149 14b 14d 14f 151 153 155 157 159 15b 15d 15f 161 163 165 167 169 16b 16d 16f " +
        "171 173 175 177 17a 17c 17e-180 183 185 188 18c-18d 192 195 199-19b 19e 1a1 1a3 1a5 " +
        "1a8 1aa-1ab 1ad 1b0 1b4 1b6 1b9-1ba 1bd-1bf 1c6 1c9 1cc 1ce 1d0 1d2 1d4 1d6 1d8 1da " +
        "1dc-1dd 1df 1e1 1e3 1e5 1e7 1e9 1eb 1ed 1ef-1f0 1f3 1f5 1f9 1fb 1fd 1ff 201 203 205 " +
        "207 209 20b 20d 20f 211 213 215 217 219 21b 21d 21f 221 223 225 227 229 22b 22d 22f " +
        "231 233-239 23c 23f-240 242 247 249 24b 24d 24f-293 295-2b8 2c0-2c1 2e0-2e4 345 371 " +
        "373 377 37a-37d 390 3ac-3ce 3d0-3d1 3d5-3d7 3d9 3db 3dd 3df 3e1 3e3 3e5 3e7 3e9 3eb " +
        "3ed 3ef-3f3 3f5 3f8 3fb-3fc 430-45f 461 463 465 467 469 46b 46d 46f 471 473 475 477 " +
        "479 47b 47d 47f 481 48b 48d 48f 491 493 495 497 499 49b 49d 49f 4a1 4a3 4a5 4a7 4a9 " +
        "4ab 4ad 4af 4b1 4b3 4b5 4b7 4b9 4bb 4bd 4bf 4c2 4c4 4c6 4c8 4ca 4cc 4ce-4cf 4d1 4d3 " +
        "4d5 4d7 4d9 4db 4dd 4df 4e1 4e3 4e5 4e7 4e9 4eb 4ed 4ef 4f1 4f3 4f5 4f7 4f9 4fb 4fd " +
        "4ff 501 503 505 507 509 50b 50d 50f 511 513 515 517 519 51b 51d 51f 521 523 525 527 " +
        "529 52b 52d 52f 561-587 13f8-13fd 1c80-1c88 1d00-1dbf 1e01 1e03 1e05 1e07 1e09 1e0b " +
        "1e0d 1e0f 1e11 1e13 1e15 1e17 1e19 1e1b 1e1d 1e1f 1e21 1e23 1e25 1e27 1e29 1e2b 1e2d " +
        "1e2f 1e31 1e33 1e35 1e37 1e39 1e3b 1e3d 1e3f 1e41 1e43 1e45 1e47 1e49 1e4b 1e4d 1e4f " +
        "1e51 1e53 1e55 1e57 1e59 1e5b 1e5d 1e5f 1e61 1e63 1e65 1e67 1e69 1e6b 1e6d 1e6f 1e71 " +
        "1e73 1e75 1e77 1e79 1e7b 1e7d 1e7f 1e81 1e83 1e85 1e87 1e89 1e8b 1e8d 1e8f 1e91 1e93 " +
        "1e95-1e9d 1e9f 1ea1 1ea3 1ea5 1ea7 1ea9 1eab 1ead 1eaf 1eb1 1eb3 1eb5 1eb7 1eb9 1ebb " +
        "1ebd 1ebf 1ec1 1ec3 1ec5 1ec7 1ec9 1ecb 1ecd 1ecf 1ed1 1ed3 1ed5 1ed7 1ed9 1edb 1edd " +
        "1edf 1ee1 1ee3 1ee5 1ee7 1ee9 1eeb 1eed 1eef 1ef1 1ef3 1ef5 1ef7 1ef9 1efb 1efd " +
        "1eff-1f07 1f10-1f15 1f20-1f27 1f30-1f37 1f40-1f45 1f50-1f57 1f60-1f67 1f70-1f7d " +
        "1f80-1f87 1f90-1f97 1fa0-1fa7 1fb0-1fb4 1fb6-1fb7 1fbe 1fc2-1fc4 1fc6-1fc7 1fd0-1fd3 " +
        "1fd6-1fd7 1fe0-1fe7 1ff2-1ff4 1ff6-1ff7 2071 207f 2090-209c 210a 210e-210f 2113 212f " +
        "2134 2139 213c-213d 2146-2149 214e 2170-217f 2184 24d0-24e9 25cc 2c30-2c5e 2c61 " +
        "2c65-2c66 2c68 2c6a 2c6c 2c71 2c73-2c74 2c76-2c7d 2c81 2c83 2c85 2c87 2c89 2c8b 2c8d " +
        "2c8f 2c91 2c93 2c95 2c97 2c99 2c9b 2c9d 2c9f 2ca1 2ca3 2ca5 2ca7 2ca9 2cab 2cad 2caf " +
        "2cb1 2cb3 2cb5 2cb7 2cb9 2cbb 2cbd 2cbf 2cc1 2cc3 2cc5 2cc7 2cc9 2ccb 2ccd 2ccf 2cd1 " +
        "2cd3 2cd5 2cd7 2cd9 2cdb 2cdd 2cdf 2ce1 2ce3-2ce4 2cec 2cee 2cf3 2d00-2d25 2d27 2d2d " +
        "a641 a643 a645 a647 a649 a64b a64d a64f a651 a653 a655 a657 a659 a65b a65d a65f a661 " +
        "a663 a665 a667 a669 a66b a66d a681 a683 a685 a687 a689 a68b a68d a68f a691 a693 a695 " +
        "a697 a699 a69b-a69d a723 a725 a727 a729 a72b a72d a72f-a731 a733 a735 a737 a739 a73b " +
        "a73d a73f a741 a743 a745 a747 a749 a74b a74d a74f a751 a753 a755 a757 a759 a75b a75d " +
        "a75f a761 a763 a765 a767 a769 a76b a76d a76f-a778 a77a a77c a77f a781 a783 a785 a787 " +
        "a78c a78e a791 a793-a795 a797 a799 a79b a79d a79f a7a1 a7a3 a7a5 a7a7 a7a9 a7b5 a7b7 " +
        "a7f8-a7fa ab30-ab5a ab5c-ab65 ab70-abbf fb00-fb06 fb13-fb17 ff41-ff5a 10428-1044f " +
        "104d8-104fb 10cc0-10cf2 118c0-118df 1d41a-1d433 1d44e-1d454 1d456-1d467 1d482-1d49b " +
        "1d4b6-1d4b9 1d4bb 1d4bd-1d4c3 1d4c5-1d4cf 1d4ea-1d503 1d51e-1d537 1d552-1d56b " +
        "1d586-1d59f 1d5ba-1d5d3 1d5ee-1d607 1d622-1d63b 1d656-1d66f 1d68a-1d6a5 1d6c2-1d6da " +
        "1d6dc-1d6e1 1d6fc-1d714 1d716-1d71b 1d736-1d74e 1d750-1d755 1d770-1d788 1d78a-1d78f " +
        "1d7aa-1d7c2 1d7c4-1d7c9 1d7cb 1e922-1e943",
      prefixes:
        "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z Adj Adm Adv Asst Bart Bldg Brig " +
        "Bros Capt Cmdr Col Comdr Con Corp Cpl DR Dr Drs Ens Gen Gov Hon Hr Hosp Insp Lt MM MR " +
        "MRS MS Maj Messrs Mlle Mme Mr Mrs Ms Msgr Op Ord Pfc Ph Prof Pvt Rep Reps Res Rev Rt " +
        "Sen Sens Sfc Sgt Sr St Supt Surg v vs i.e rev e.g Rs Nos Nr Jan Feb Mar Apr Jun Jul " +
        "Aug Sep Oct Nov Dec",
      numeric_only:
        "No Art pp"
    };
  }
})();

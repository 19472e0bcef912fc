"""A trained model published with the results: what a reader translates with, without training and
without the WMT'14 files.

A profile names the runs it publishes (``publish = ["RNNsearch-50*"]``); replicating it writes, after
each such run's evaluation, ``results/<profile>/published/<run>/``:

* ``model.safetensors``: the weights in float16, under the paper modules' names (safetensors: tensors
  and a header, nothing that runs code when it is read);
* ``config.json``: the run's settings (model, data, training, search);
* ``src.vocab.txt``, ``trg.vocab.txt``: the shortlists (``word<TAB>count``, in row order);
* ``MODEL_CARD.md``: what the model is, how it was trained, its test BLEU (the run's ``bleu.json``:
  Table 1's row), how its 16-bit weights translate against the checkpoint, and the sha256 of
  every file;
* ``SHA256SUMS``: the sha256 of the four files above; :func:`nmt_lib.loading.load_published` refuses a file that differs,
  from it or from the sums that the profile's results record outside this folder (``published``
  in ``results/<profile>/manifest.json``, where the replication writes them).

That loader (the read side, :mod:`nmt_lib.loading`) builds the model in float32 from these files, refusing weights that are not the
model's names, shapes and float16 or not finite. An export replaces the published model in one
step (:func:`nmt_lib.staging.swap_in`: after a kill it holds the old model or the new one) and
clears the staging directories (``published/.publish.*``) that a killed one left; one export of a
profile runs at a time (a lock, ``published/.publish.lock``). ``translate`` uses them when the run has no
checkpoint of its own here (``python -m nmt_lib translate --profile lite --run 'RNNsearch-50*'``), and
the book's translator runs them in the page (``book/_static/translator.js``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from .checkpoint import CheckpointError
from .config import RunConfig, to_dict
from .decoding import decode
from .io import locked, read_json, sha256_file, write_json
from .loading import (
    PUBLISHED_FILES,
    SUMS,
    Loaded,
    load_published,
    load_trained,
    recorded_sums,
    verify_published,
)
from .scoring import score
from .staging import stale, swap_in

CARD = "MODEL_CARD.md"
#: Test sentences decoded with the checkpoint and with the 16-bit weights at export (the card says
#: how many translations are the same).
AGREEMENT_SENTENCES = 200
FP16_MAX = 65504.0


def half_weights(model) -> dict[str, torch.Tensor]:
    """The model's weights in float16, contiguous; a weight beyond float16's range raises."""
    out = {}
    for name, w in model.state_dict().items():
        if w.is_floating_point() and float(w.abs().max()) > FP16_MAX:
            raise ValueError(f"{name}: a weight beyond float16's range ({FP16_MAX})")
        out[name] = (w.to(torch.float16) if w.is_floating_point() else w).contiguous()
    return out


def export(ckpt, out: str | os.PathLike, run: RunConfig, run_results: Path, test=None) -> Path:
    """Write the published files of the checkpoint ``ckpt`` (file or directory) into ``out``,
    replacing what was there only once all of them are written. ``run_results``: the run's
    results directory (its ``bleu.json`` and ``train_summary.json`` go into the card); ``test``:
    the prepared test set, for the card's comparison of 16-bit and checkpoint translations."""
    loaded = load_trained(ckpt, "cpu", vocabs=True)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with locked(out.parent / ".publish.lock", f"{out.parent} (a publication)"):
        for d in stale(out, ".publish."):  # the staging of an export that was killed
            shutil.rmtree(d, ignore_errors=True)
        _export_into(out, loaded, run, run_results, test)
    return out


def _export_into(out: Path, loaded: Loaded, run, run_results, test) -> None:
    """:func:`export`'s files, staged in ``published/.publish.*`` and renamed ``out``."""
    model = loaded.model
    stage = Path(tempfile.mkdtemp(prefix=".publish.", dir=out.parent))
    try:
        save_file(
            half_weights(model), str(stage / PUBLISHED_FILES[0]), metadata={"dtype": "float16"}
        )
        write_json(stage / PUBLISHED_FILES[1], to_dict(loaded.cfg))
        loaded.src_vocab.save(stage / PUBLISHED_FILES[2])
        loaded.trg_vocab.save(stage / PUBLISHED_FILES[3])
        sums = {f: sha256_file(stage / f) for f in PUBLISHED_FILES}
        (stage / SUMS).write_text("".join(f"{h}  {f}\n" for f, h in sums.items()), encoding="utf-8")
        agreement = fp16_agreement(model, stage, test, run) if test is not None else None
        if agreement is not None:
            write_json(stage / "agreement.json", agreement)
        (stage / CARD).write_text(card(run, run_results, sums, agreement), encoding="utf-8")
        for f in stage.iterdir():  # readable by all, as git checks them out
            f.chmod(0o644)
        stage.chmod(0o755)
        swap_in(stage, out)  # the old model or the new one there, whenever a kill comes
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def current(path: str | os.PathLike, run: RunConfig, run_results: Path) -> bool:
    """Whether ``path`` holds the published weights of the run whose results are ``run_results``
    (and config ``run``): its files are whole (:func:`~nmt_lib.loading.verify_published`) and its card is the one those
    results make (the card names the run's updates, hours and test BLEU)."""
    path = Path(path)
    try:
        verify_published(path)
    except CheckpointError:
        return False
    sums = recorded_sums(path)
    agreement = read_json(path / "agreement.json") if (path / "agreement.json").is_file() else None
    return (path / CARD).is_file() and (path / CARD).read_text(encoding="utf-8") == card(
        run, run_results, sums, agreement
    )


def fp16_agreement(model, published: Path, test, run: RunConfig) -> dict:
    """The first :data:`AGREEMENT_SENTENCES` test sentences decoded (the run's search) with the
    checkpoint's float32 weights and with the published float16 ones: how many translations are
    the same, token for token."""
    half = load_published(published)
    n = min(AGREEMENT_SENTENCES, len(test))
    xs = test.x[:n]
    a = decode(model, xs, run.search)
    b = decode(half.model, xs, run.search)
    same = sum(h.tokens == g.tokens for h, g in zip(a, b, strict=True))
    out = {"sentences": n, "same": same}
    if same < 0.99 * n:  # then the card gives the 16-bit weights' own BLEU
        hyps = decode(half.model, test.x, run.search)
        hyp_tok = [half.trg_vocab.decode(h.tokens) for h in hyps]
        out["bleu_tok"] = score(hyp_tok, test, range(len(test)), run.data.trg_lang)["tok"]["score"]
    return out


def card(run: RunConfig, run_results: Path, sums: dict, agreement: dict | None) -> str:
    """The model card: the run's data, recipe, training, test BLEU and files."""
    bleu = read_json(run_results / "bleu.json")
    summary = read_json(run_results / "train_summary.json")
    d, m, t, s = run.data, run.model, run.train, run.search
    b = bleu["all"]["tok"]["score"]
    replaced = bleu.get("unk_replaced", {}).get("tok", {}).get("score")
    lines = [
        f"# {run.name}: published weights",
        "",
        f"The model of the run `{run.name}` of this profile (Bahdanau et al. 2014, {m.arch}), "
        "English to French, its weights in float16. A reduced replication: see the profile's "
        "description and the book's deviations page.",
        "",
        "| | |",
        "| --- | --- |",
        f"| architecture | {m.arch}: m = {m.m}, n = {m.n}, n' = {m.n_align}, l = {m.l}; "
        f"shortlists of {m.src_vocab:,} / {m.trg_vocab:,} rows |",
        f"| data | {', '.join(d.train)}; "
        + (f"the first {d.max_train_pairs:,} pairs" if d.max_train_pairs else "every pair")
        + f", sentences of up to {d.max_len} words; Moses tokenization (sacremoses) |",
        f"| recipe | {t.optimizer}, lr {t.lr:g}, minibatches of {d.batch_size} sentences, "
        f"loss `{t.loss}` |",
        f"| training | {summary['updates']:,} updates ({summary['epochs']:.2f} epochs, "
        f"{summary['hours']:.2f} h, {summary['precision']}), stopped by {summary['stopped_by']}"
        + (
            f"; the checkpoint of the best dev NLL (update {summary['best_update']:,})"
            if t.patience
            else ""
        )
        + " |",
        f"| search | beam {s.beam}, {'cost / length' if s.normalize else 'cost'}, at most "
        f"{s.max_len_ratio:g} × the source length |",
        f"| test BLEU (newstest2014, tokenized, all sentences) | {b:.2f} (Table 1's row)"
        + (
            f"; {replaced:.2f} with each `<unk>` replaced by its aligned source word"
            if replaced is not None
            else ""
        )
        + " |",
    ]
    if agreement is not None:
        own = agreement.get("bleu_tok")
        lines.append(
            f"| float16 weights | {agreement['same']} of the first {agreement['sentences']} test "
            "sentences translate exactly as with the checkpoint's float32 weights"
            + (f"; test BLEU with the float16 weights: {own:.2f}" if own is not None else "")
            + " |"
        )
    lines += [
        "| license | MIT (as the code); the training text is WMT'14's, under its own terms |",
        "",
        "Load it with `nmt_lib.loading.load_published(dir)`, or translate with `python -m nmt_lib translate "
        f"--profile PROFILE --run '{run.name}'`. Files (sha256, as in `{SUMS}`):",
        "",
        *(f"- `{f}`: `{h}`" for f, h in sums.items()),
        "",
    ]
    return "\n".join(lines)

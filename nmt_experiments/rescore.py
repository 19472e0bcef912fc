"""Every committed BLEU scored again from its committed hypotheses against the test set's
references, read as the evaluation read them (:func:`nmt_lib.data.prepare`, cached).

For each run directory of ``results/<profile>/runs/`` (and each of its ``views/<test set>/``):
``bleu.json``'s tokenized and detokenized BLEU of the whole test set, of each of its parts (Multi30k's
two Flickr sets), of the No-UNK sentences and with ``<unk>`` replaced, from ``hyp.test.tok.txt``,
``hyp.test.detok.txt``, ``hyp.test.no_unk.tok.txt`` and ``hyp.test.unk_replaced.tok.txt``; and
``bleu_by_length.json``'s per-sentence statistics (Figure 2), from the same files; a hypothesis
file that has not one line per sentence is refused, named. A check passes
when the score is the recorded one to the last digit of the float.

``python -m nmt_experiments.rescore [PROFILE ...]`` (default: every results directory with runs)
prints one line per run and exits 1 if any score differs, 2 if some run's data is not here (each
run needs its test set: ``NMT_DATA``, or its pack).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt_lib import bleu
from nmt_lib.config import home, run_from_dict, to_dict
from nmt_lib.data import prepare
from nmt_lib.data.corpus import DataError
from nmt_lib.io import read_json
from nmt_lib.scoring import score


def _lines(path: Path, n: int) -> list[str]:
    """The ``n`` lines of a hypothesis file; a file of another length is refused, named."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != n:
        raise ValueError(f"{path}: {len(lines)} lines, but its test set has {n} sentences")
    return lines


def checks(d: Path, test, lang: str) -> list[tuple[str, bool]]:
    """``(what, re-scores exactly)`` for every BLEU that the evaluation files of ``d`` (a run
    directory, or one of its views) record, against ``test`` (the :class:`~nmt_lib.data.EvalSet`
    they were decoded from)."""
    saved, out = read_json(d / "bleu.json"), []

    def rescored(what: str, recorded: dict, hyp_file: str, idx) -> list[list[str]]:
        hyps = [h.split() for h in _lines(d / hyp_file, len(idx))]
        made = score(hyps, test, idx, lang)
        out.extend(
            (f"{what} {k}", recorded[k]["score"] == made[k]["score"]) for k in ("tok", "detok")
        )
        return hyps

    everything = range(len(test))
    tok = rescored("all", saved["all"], "hyp.test.tok.txt", everything)
    detok = _lines(d / "hyp.test.detok.txt", len(test))
    made = bleu.bleu_detok(detok, test.ref_raw).score
    out.append(("all detok (hyp.test.detok.txt)", saved["all"]["detok"]["score"] == made))
    for part, recorded in saved.get("parts", {}).items():
        idx = [i for i in everything if test.ids[i][0] == part]
        made = score([tok[i] for i in idx], test, idx, lang)
        out.extend(
            (f"{part} {k}", recorded[k]["score"] == made[k]["score"]) for k in ("tok", "detok")
        )
    if saved.get("no_unk", {}).get("n"):
        sub = [i for i in everything if test.no_unk[i]]
        rescored("no_unk", saved["no_unk"], "hyp.test.no_unk.tok.txt", sub)
    if "unk_replaced" in saved:
        rescored("unk_replaced", saved["unk_replaced"], "hyp.test.unk_replaced.tok.txt", everything)
    if (d / "bleu_by_length.json").is_file():
        st = read_json(d / "bleu_by_length.json")
        refs = [" ".join(r) for r in test.ref_tok]
        made = bleu.sentence_stats([" ".join(h) for h in tok], refs, tokenized=True).tolist()
        out.append(("by length stats_tok", made == st["stats_tok"]))
        made = bleu.sentence_stats(detok, test.ref_raw, tokenized=False).tolist()
        out.append(("by length stats_detok", made == st["stats_detok"]))
    return out


def rescore_profile(out: Path) -> list[dict]:
    """``[{"run", "view", "checks", "differ"}]`` for every evaluated run of the results directory
    ``out``; ``differ``: the checks whose re-scored BLEU is not the recorded one; ``missing``, for
    a run whose data is not here, why (and no checks)."""
    rows, prepared = [], {}
    for d in sorted(p.parent for p in (out / "runs").glob("*/bleu.json")):
        if not (d / "hyp.test.tok.txt").is_file():
            continue
        run = run_from_dict(read_json(d / "config.json"))
        key = repr(to_dict(run.data))
        if key not in prepared:
            try:
                prepared[key] = prepare(run.data, progress=False)
            except DataError as e:  # its data is not on this machine (a pack, another corpus)
                prepared[key] = str(e).splitlines()[0]
        prep = prepared[key]
        if isinstance(prep, str):
            rows.append({"run": d.name, "view": None, "checks": 0, "differ": [], "missing": prep})
            continue
        lang = run.data.trg_lang
        views = [(None, d, prep.test)] + [
            (v.name, v, prep.views[v.name]) for v in sorted((d / "views").glob("*/")) if v.is_dir()
        ]
        for view, where, test in views:
            made = checks(where, test, lang)
            differ = [what for what, same in made if not same]
            rows.append({"run": d.name, "view": view, "checks": len(made), "differ": differ})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="*", help="results directories (default: all with runs)")
    args = ap.parse_args(argv)
    results = home() / "results"
    found = [*results.glob("*/runs"), *results.glob("*/*/runs")]
    names = args.profiles or sorted(str(p.parent.relative_to(results)) for p in found)
    bad = missing = 0
    for name in names:
        for r in rescore_profile(results / name):
            where = f"{name}/{r['run']}" + (f" view {r['view']}" if r["view"] else "")
            if "missing" in r:
                state = f"not re-scored, its data is not here: {r['missing']}"
            elif r["differ"]:
                state = f"{r['checks']} scores, differs: " + ", ".join(r["differ"])
            else:
                state = f"{r['checks']} scores, re-scores exactly"
            print(f"{where}: {state}", flush=True)
            bad += bool(r["differ"])
            missing += "missing" in r
    return 1 if bad else 2 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every committed BLEU scored again from its committed hypotheses against the test set's
references, read as the evaluation read them (:func:`nmt_lib.data.prepare`, cached).

For each run directory of ``results/<profile>/runs/`` (and each of its ``views/<test set>/``):
``bleu.json``'s tokenized and detokenized BLEU of the whole test set, of each of its parts (Multi30k's
two Flickr sets), of the No-UNK sentences and with ``<unk>`` replaced, from ``hyp.test.tok.txt``,
``hyp.test.detok.txt``, ``hyp.test.no_unk.tok.txt`` and ``hyp.test.unk_replaced.tok.txt``; and
``bleu_by_length.json``'s per-sentence statistics (Figure 2), from the same files; a hypothesis
file that has not one line per sentence is refused, named. A check passes
when the score is the recorded one to the last digit of the float.

``python -m nmt_experiments.core.rescore [PROFILE ...]`` (default: every results directory with runs)
prints one line per run (and view) with what it re-scored, and exits 0 only when at least one
score was re-scored and every one is the recorded one; 1 if a score differs or a file of the
results is missing or damaged (named, with its line where there is one); 2 if there was nothing
to re-score: no such results directory, no evaluated run in it, or some run's data not here
(each run needs its test set: ``NMT_DATA``, or its pack).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nmt_lib import bleu
from nmt_lib.config import ConfigError, home, run_from_dict, to_dict
from nmt_lib.data import prepare
from nmt_lib.data.corpus import DataError
from nmt_lib.scoring import score


class Damaged(ValueError):
    """A results file that is missing or cannot be read as what it should be; the message names
    it (and the line)."""


def _text(path: Path) -> str:
    """The text of ``path``; missing, or a byte that is not UTF-8, is :class:`Damaged`."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise Damaged(f"{path}: missing") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise Damaged(f"{path}: line {line}: not UTF-8 (byte 0x{raw[e.start]:02x})") from None


def read_json(path: Path) -> dict:
    """The JSON object in ``path``; a truncated or otherwise broken one is :class:`Damaged`."""
    try:
        value = json.loads(_text(path))
    except json.JSONDecodeError as e:
        raise Damaged(f"{path}: line {e.lineno}: not JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise Damaged(f"{path}: not a JSON object")
    return value


def _lines(path: Path, n: int) -> list[str]:
    """The ``n`` lines of a hypothesis file; a file of another length is refused, named."""
    lines = _text(path).splitlines()
    if len(lines) != n:
        raise Damaged(f"{path}: {len(lines)} lines, but its test set has {n} sentences")
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
    """``[{"run", "view", "checked", "differ"}]`` for every run directory of the results directory
    ``out`` (a run not evaluated: none checked, ``"not_evaluated"``); ``checked``: what was
    re-scored, ``differ``: those whose re-scored BLEU is not the recorded one; ``missing``, for a
    run whose data is not here, why; ``damaged``: the file of the results that is missing or
    cannot be read, named (with its line)."""
    rows, prepared = [], {}
    for d in sorted(p for p in (out / "runs").glob("*/") if p.is_dir()):
        row = {"run": d.name, "view": None, "checked": [], "differ": []}
        if not any((d / f).is_file() for f in ("bleu.json", "hyp.test.tok.txt")):
            rows.append({**row, "not_evaluated": True})
            continue
        try:
            run = run_from_dict(read_json(d / "config.json"))
        except (Damaged, ConfigError, TypeError, KeyError) as e:
            rows.append({**row, "damaged": str(e).splitlines()[0]})
            continue
        key = repr(to_dict(run.data))
        if key not in prepared:
            try:
                prepared[key] = prepare(run.data, progress=False)
            except DataError as e:  # its data is not on this machine (a pack, another corpus)
                prepared[key] = str(e).splitlines()[0]
        prep = prepared[key]
        if isinstance(prep, str):
            rows.append({**row, "missing": prep})
            continue
        views = [(None, d)] + [(v.name, v) for v in sorted((d / "views").glob("*/")) if v.is_dir()]
        for view, where in views:
            row = {"run": d.name, "view": view, "checked": [], "differ": []}
            try:
                test = prep.test if view is None else prep.views.get(view)
                if test is None:
                    raise Damaged(
                        f"{where}: a view its data.views does not list ({', '.join(prep.views)})"
                    )
                made = checks(where, test, run.data.trg_lang)
            except (Damaged, KeyError, TypeError) as e:
                why = str(e) if isinstance(e, Damaged) else f"{where / 'bleu.json'}: no {e}"
                rows.append({**row, "damaged": why})
                continue
            row["checked"] = [what for what, _ in made]
            row["differ"] = [what for what, same in made if not same]
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="*", help="results directories (default: all with runs)")
    args = ap.parse_args(argv)
    results = home() / "results"
    found = [*results.glob("*/runs"), *results.glob("*/*/runs")]
    names = args.profiles or sorted(str(p.parent.relative_to(results)) for p in found)
    if not names:
        print(f"{results}: no results directory with runs", file=sys.stderr)
        return 2
    bad = empty = 0
    scored = 0
    for name in names:
        rows = rescore_profile(results / name) if (results / name / "runs").is_dir() else []
        if not rows:
            print(f"{results / name}: no results directory with runs here", file=sys.stderr)
            empty += 1
        for r in rows:
            where = f"{name}/{r['run']}" + (f" view {r['view']}" if r["view"] else "")
            if "missing" in r:
                state = f"not re-scored, its data is not here: {r['missing']}"
            elif "damaged" in r:
                state = f"not re-scored: {r['damaged']}"
            elif r.get("not_evaluated"):
                state = "not evaluated (no bleu.json nor hypotheses), nothing to re-score"
            elif r["differ"]:
                state = f"{len(r['checked'])} scores, differs: " + ", ".join(r["differ"])
            else:
                state = f"{len(r['checked'])} scores re-score exactly: " + ", ".join(r["checked"])
            print(f"{where}: {state}", flush=True)
            bad += bool(r["differ"]) or "damaged" in r
            empty += "missing" in r
            scored += len(r["checked"])
    return 1 if bad else 2 if empty or not scored else 0


if __name__ == "__main__":
    sys.exit(main())

"""The reader's model: the evaluated RNNsearch run that Figure 3, the explorer and the translator
show, chosen by one rule, the lowest NLL on the whole dev set among the runs of lite and lite-long
(:func:`reader_candidates`), and the sentence that names it and its weights (:func:`reader_text`)."""

from __future__ import annotations

from pathlib import Path

from nmt_lib.io import read_json

from . import rerun


def reader_candidates(out: Path, lite: Path) -> list[dict]:
    """Every evaluated RNNsearch run of lite (``lite``) and of lite-long (``out``), best first by its NLL on the
    whole dev set (``nll.json``: the weights it was evaluated with): ``study``, ``run``,
    ``dev_nll``, ``sentences``, test ``bleu`` and whether its weights are ``published``."""
    found = []
    for where in (lite, out):
        for d in sorted(where.glob("runs/*/nll.json")):
            d, config = d.parent, read_json(d.parent / "config.json")
            if config["model"]["arch"] != "RNNsearch":
                continue
            nll = read_json(d / "nll.json")["dev"]
            found.append(
                {
                    "study": where.name,
                    "run": config["name"],
                    "dev_nll": nll["mean"],
                    "sentences": nll.get("n"),
                    "bleu": read_json(d / "bleu.json")["all"]["tok"]["score"],
                    "published": (where / "published" / d.name).is_dir(),
                    "hours": read_json(d / "train_summary.json").get("hours"),
                }
            )
    return sorted(found, key=lambda r: r["dev_nll"])


def reader_text(out: Path, lite: Path, shown: int = 3) -> str:
    """The reader's model by the book's rule: the evaluated RNNsearch run with the lowest NLL on
    the whole dev set (:func:`reader_candidates`), the first ``shown`` of the ranking with their
    test BLEU (which does not choose), and which weights the translator runs; empty before any."""
    ranked = reader_candidates(out, lite)
    if not ranked:
        return ""
    name = lambda r: f"{r['study']}'s {r['run']}"  # noqa: E731
    top = ", ".join(f"{name(r)} {r['dev_nll']:.2f}" for r in ranked[:shown])
    bleus = ", ".join(f"{r['bleu']:.2f}" for r in ranked[:shown])
    n = f"{ranked[0]['sentences']:,} sentences" if ranked[0]["sentences"] else "every sentence"
    best = ranked[0]
    text = (
        f"The reader's model is the evaluated RNNsearch run with the lowest NLL on the whole dev "
        f"set ({n}; test BLEU does not choose): {top} (on newstest2014, {bleus} BLEU). "
    )
    if best["published"]:
        return text + f"{name(best)} is the published model that the translator runs."
    shipped = next((r for r in ranked if r["published"]), None)
    return text + (
        f"{name(best)}'s weights are not published: its checkpoint stayed on the machine that "
        f"trained it, and publishing it means training it again{_again(best, out, lite)}"
        + (
            f"; until then the translator runs {name(shipped)}, the first of the ranking whose "
            "weights are published."
            if shipped
            else "."
        )
    )


def _again(run: dict, out: Path, lite: Path) -> str:
    """What training ``run`` (a :func:`reader_candidates` row) again costs: its recorded hours of
    one core, and on the slower core of lite's rerun check (:func:`rerun.pace_ratio`)."""
    if not run["hours"]:
        return ""
    p = rerun.pace_ratio(lite)
    slower = f", {run['hours'] * p['ratio']:.1f} on one {p['precision']} core" if p else ""
    return f" ({run['hours']:.1f} hours of the core it was trained on{slower})"

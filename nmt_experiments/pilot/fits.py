"""The pilot's fits, on its arms' curves and lite's: a line in log updates (:func:`fit_log`), where
it reaches a value (:func:`reach`), the second half of a curve (:func:`second_half`), a curve read
between its points (:func:`interpolate`) and short-sentence BLEU against dev NLL
(:func:`bleu_vs_nll`). :mod:`nmt_experiments.pilot.extrapolation` extrapolates with them."""

from __future__ import annotations

import math

import numpy as np

from ..core.claims import FLOOR


def fit_log(updates, values) -> dict:
    """Least-squares fit of ``value = a + b ln(updates)``; ``per_doubling = b ln 2`` and the root
    mean square residual ``rmse``, in the units of ``values``; to 10 decimals, where machines'
    linear algebra agrees."""
    x, y = np.log(np.asarray(updates, dtype=float)), np.asarray(values, dtype=float)
    b, a = np.polyfit(x, y, 1)
    rmse = float(np.sqrt(np.mean((a + b * x - y) ** 2)))
    return {
        "a": round(float(a), 10),
        "b": round(float(b), 10),
        "per_doubling": round(float(b * math.log(2)), 10),
        "rmse": round(rmse, 10),
        "points": len(x),
        "from_update": int(round(math.exp(x.min()))),
        "to_update": int(round(math.exp(x.max()))),
    }


def reach(fit: dict, target: float) -> float | None:
    """The updates at which a :func:`fit_log` line reaches ``target`` (None if it never moves toward
    it: a flat line, or one that moves away)."""
    last = fit["a"] + fit["b"] * math.log(fit["to_update"])
    if fit["b"] == 0 or (target - last) * fit["b"] < 0:
        return None
    u = math.exp((target - fit["a"]) / fit["b"])
    return u if math.isfinite(u) else None


def second_half(rows: list[dict], key: str = "update") -> list[dict]:
    """The rows of a curve from half its last update on: where the curves are about straight in log
    updates (the first updates, before the model learns anything, are not)."""
    last = max(r[key] for r in rows)
    return [r for r in rows if r[key] >= last / 2]


def bleu_vs_nll(points: list[tuple[float, float]]) -> dict | None:
    """Least-squares line of ln(short-sentence BLEU) against dev NLL through ``(nll, bleu)`` points
    (those of BLEU > 0): BLEU, a geometric mean of n-gram precisions, falls about exponentially as
    the NLL per sentence rises; ``floor_nll``, the dev NLL at which the line reaches the floor (None:
    fewer than 2 points, or a line that does not fall); ``rmse`` in ln BLEU; to 10 decimals, as
    :func:`fit_log`."""
    points = [(x, y) for x, y in points if y > 0]
    if len(points) < 2:
        return None
    x, y = np.array([p[0] for p in points]), np.log([p[1] for p in points])
    slope, icpt = np.polyfit(x, y, 1)
    rmse = float(np.sqrt(np.mean((icpt + slope * x - y) ** 2)))
    floor_nll = round(float((math.log(FLOOR) - icpt) / slope), 10) if slope < 0 else None
    return {
        "slope": round(float(slope), 10),
        "intercept": round(float(icpt), 10),
        "points": len(points),
        "rmse": round(rmse, 10),
        "floor_nll": floor_nll,
    }


def interpolate(rows: list[dict], update: float, key: str) -> float | None:
    """``key`` of a curve at ``update``, linear in log updates between its points (None outside)."""
    for a, b in zip(rows, rows[1:], strict=False):
        if a["update"] <= update <= b["update"]:
            w = math.log(update / a["update"]) / math.log(b["update"] / a["update"])
            return a[key] + w * (b[key] - a[key])
    return None

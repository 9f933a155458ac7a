"""Held-out scores of the baselines and the comparison that every report of a fit makes with them."""
import math
import time
import warnings

import torch

from .exact_gp import ExactGP
from .linear import LinearRegression

__all__ = ["BaselineWarning", "baseline_scores", "compare_with_baselines"]

#: The baselines :func:`baseline_scores` fits.
BASELINES = ("exact_gp", "linear", "mean")


class BaselineWarning(UserWarning):
    """A fitted model predicts held-out cases worse than a baseline a user already has (an exact GP, linear
    regression or the training mean)."""


def _scores(mean, var, y):
    y = y.reshape(-1)
    rmse = float((mean - y).pow(2).mean().sqrt())
    nlpd = float((0.5 * (math.log(2 * math.pi) + var.log() + (y - mean).pow(2) / var)).mean())
    return {"rmse": rmse, "nlpd": nlpd}


def baseline_scores(X_train, y_train, X_test, y_test, methods=BASELINES, seed=0):
    """Fit the baselines on ``(X_train, y_train)`` and score them on ``(X_test, y_test)``.

    :param X_train: ``[n, D]`` inputs (for a DAG-DGP node: its roots, or its observed parents for one-step
        prediction). :param y_train: ``[n]`` targets (rows with a NaN target or input are dropped).
    :param X_test: ``[m, D]``. :param y_test: ``[m]`` (NaN targets are not scored).
    :param methods: any of ``"exact_gp"`` (:class:`ExactGP`, ARD RBF, learned noise), ``"linear"``
        (:class:`LinearRegression`) and ``"mean"`` (the training mean with the training variance).
    :returns: ``{method: {"rmse", "nlpd", "seconds"}}`` (NLPD of a new observation, in the targets' units;
        ``"seconds"`` of CPU time).
    """
    X_train = torch.as_tensor(X_train, dtype=torch.float64)
    X_test = torch.as_tensor(X_test, dtype=torch.float64)
    y_train = torch.as_tensor(y_train, dtype=torch.float64).reshape(-1)
    y_test = torch.as_tensor(y_test, dtype=torch.float64).reshape(-1)
    if X_train.dim() == 1:
        X_train, X_test = X_train.unsqueeze(-1), X_test.unsqueeze(-1)
    keep = torch.isfinite(y_train) & torch.isfinite(X_train).all(-1)
    X_train, y_train = X_train[keep], y_train[keep]
    scored = torch.isfinite(y_test) & torch.isfinite(X_test).all(-1)
    X_test, y_test = X_test[scored], y_test[scored]
    out = {}
    for method in methods:
        start = time.process_time()
        if method == "mean":
            mean = torch.full_like(y_test, float(y_train.mean()))
            var = torch.full_like(y_test, float(y_train.var()))
        elif method == "exact_gp":
            mean, var = ExactGP(seed=seed).fit(X_train, y_train).predict(X_test, include_noise=True)
        elif method == "linear":
            mean, var = LinearRegression().fit(X_train, y_train).predict(X_test, include_noise=True)
        else:
            raise ValueError(f"baseline_scores: unknown method {method!r}; choose from {BASELINES}")
        out[method] = dict(_scores(mean, var, y_test), seconds=time.process_time() - start)
    return out


def compare_with_baselines(name, rmse, baselines, tolerance=1.05, warn=True):
    """Compare a model's held-out RMSE with the baselines' and warn (:class:`BaselineWarning`) when a baseline
    is better by more than the ``tolerance`` factor.

    :param str name: what was predicted (e.g. ``"node 'y'"``), for the message.
    :param float rmse: the model's held-out RMSE. :param dict baselines: :func:`baseline_scores`' result.
    :returns: ``{"rmse", "best_baseline", "best_baseline_rmse", "ratio", "better_than_baselines"}``.
    """
    best = min(baselines, key=lambda k: baselines[k]["rmse"])
    best_rmse = baselines[best]["rmse"]
    ratio = rmse / best_rmse if best_rmse > 0 else math.inf
    better = ratio <= tolerance
    if warn and not better:
        scores = ", ".join(f"{k} {v['rmse']:.4g}" for k, v in baselines.items())
        warnings.warn(f"{name}: held-out RMSE {rmse:.4g} is {ratio:.3g} times that of the best baseline ({best}; "
                      f"{scores}); the DAG-DGP does not earn its keep here: consider the baseline, more inducing "
                      "points, a fixed small noise for a deterministic simulator, or one-step prediction from "
                      "measured parents", BaselineWarning, stacklevel=2)
    return {"rmse": float(rmse), "best_baseline": best, "best_baseline_rmse": best_rmse, "ratio": ratio,
            "better_than_baselines": better}

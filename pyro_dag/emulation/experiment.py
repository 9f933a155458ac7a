"""The multi-fidelity protocols of Perlino et al. 2026 (arXiv:2607.09645, Sec. 7, Tables 2 and 4) on the standard
test problems, for ``pyro-dag fit multifidelity``.

* ``"published"``: the published-split analogue (for the graphical problem 200 / 200 / 25 training runs and 75
  high-fidelity test points; the chains use the sizes of :data:`CHAIN_SIZES`);
* ``"hf-scarce"``: 5-fold cross-validation over the high-fidelity runs (the low fidelities keep all theirs), fold
  metrics averaged;
* ``"pooled"``: the pooled joint protocol (Tables 5-6: 200 / 200 / 100 runs, 10 folds over the runs of every
  fidelity, :func:`pooled_folds`), scored on the held-out runs of all fidelities together with the weighted energy
  score (:func:`weighted_energy_score`) and on the high fidelity's held-out runs with RMSE and CRPS.
"""
import math
import time
import warnings

import numpy as np
import torch

from ..datasets.multifidelity import FUNCTIONS, chain_problem, graphical_problem
from ..metrics import crps_gaussian
from ..outputs import OutputSet
from ..plot import save_observed_vs_predicted
from .emulator import MultiFidelityEmulator
from ..utils import renamed_argument

__all__ = ["CHAIN_SIZES", "PROBLEMS", "PROTOCOLS", "make_problem", "run_protocol", "pooled_folds",
           "weighted_energy_score", "joint_draws", "POOLED_SIZES"]

#: Training runs per fidelity (lowest first) of the chains.
CHAIN_SIZES = {"forrester": [50, 14], "borehole": [200, 25], "currin": [200, 25], "park": [200, 25],
               "branin": [200, 100, 25], "hartmann3": [200, 100, 25]}
PROBLEMS = sorted(FUNCTIONS) + ["graphical"]
PROTOCOLS = ("published", "hf-scarce", "pooled")
#: Runs per fidelity of the graphical problem in the pooled protocol (Perlino et al. 2026, Tables 5-6).
POOLED_SIZES = (200, 100)


def pooled_folds(train, num_folds=10, seed=0):
    """Folds of the pooled joint protocol (Perlino et al. 2026, arXiv:2607.09645, Sec. 7, Tables 5-6): the runs of
    every fidelity are split into ``num_folds`` parts, each fidelity separately (so every fold holds out about
    ``n_f / num_folds`` runs of each fidelity ``f``); fold ``k`` trains on the other parts.

    :param dict train: ``{fidelity: (X [n_f, d], y [n_f, 1])}``. :param int seed: the permutation's seed.
    :returns: a list of ``num_folds`` pairs ``(train_k, held_k)`` of dicts like ``train``.
    """
    if num_folds < 2:
        raise ValueError(f"pooled_folds: num_folds must be at least 2, got {num_folds}")
    rng = np.random.default_rng(seed)
    parts = {}
    for f, (X, y) in train.items():
        if len(y) < num_folds:
            raise ValueError(f"pooled_folds: fidelity {f!r} has {len(y)} runs, fewer than num_folds={num_folds}")
        parts[f] = np.array_split(rng.permutation(len(y)), num_folds)
    folds = []
    for k in range(num_folds):
        tr, held = {}, {}
        for f, (X, y) in train.items():
            out = np.sort(parts[f][k])
            keep = np.setdiff1d(np.arange(len(y)), out)
            tr[f], held[f] = (X[keep], y[keep]), (X[out], y[out])
        folds.append((tr, held))
    return folds


def weighted_energy_score(samples, held, train):
    """Weighted energy score of a joint predictive of the held-out runs of every fidelity (Perlino et al. 2026,
    App. G.5): ``ES_W = E||X - y||_W - ½ E||X - X'||_W`` over the concatenated held-out vector, with
    ``||z||²_W = Σ_f ||z_f||² / (n_f σ²_f)``, ``n_f`` the fidelity's held-out runs and ``σ_f`` the standard deviation
    of its training runs in the fold.

    :param dict samples: ``{fidelity: [S, n_f]}`` joint draws (the same draw index across fidelities is one joint
        draw). :param dict held: ``{fidelity: (X, y [n_f, 1])}``. :param dict train: the fold's training runs.
    :returns: a float (lower is better).
    """
    from ..metrics import energy_score

    names = list(held)
    S = {f: np.asarray(samples[f], dtype=np.float64) for f in names}
    num = {f: S[f].shape[0] for f in names}
    if len(set(num.values())) != 1:
        raise ValueError(f"weighted_energy_score: every fidelity needs the same number of joint draws, got {num}")
    for f in names:
        if S[f].shape[1] != len(held[f][1]):
            raise ValueError(f"weighted_energy_score: fidelity {f!r} has draws for {S[f].shape[1]} runs but "
                             f"{len(held[f][1])} held-out runs")
    w = np.concatenate([np.full(len(held[f][1]), 1.0 / (len(held[f][1]) * float(np.var(train[f][1]))))
                        for f in names])
    draws = torch.as_tensor(np.concatenate([S[f] for f in names], 1))
    y = torch.as_tensor(np.concatenate([np.asarray(held[f][1], dtype=np.float64).reshape(-1) for f in names]))
    return float(energy_score(draws, y, torch.as_tensor(w)))


def joint_draws(em, held, num_samples=500, seed=0):
    """Joint predictive of an emulator at the held-out runs of every fidelity: one
    :meth:`~pyro_dag.emulation.MultiFidelityEmulator.predict` call at all their inputs, so that draw ``s`` of every
    fidelity comes from the same ``q(U)`` draw.

    :returns: ``(draws, moments)``: ``{fidelity: [S, n_f]}`` draws of new runs (observation noise included) and
        ``{fidelity: (mean [n_f], variance [n_f])}``.
    """
    names = list(held)
    X = np.concatenate([held[f][0] for f in names])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = em.predict(X, names, num_samples=num_samples, seed=seed)
    gen = np.random.default_rng(seed)
    draws, moments, start = {}, {}, 0
    for f in names:
        rows = slice(start, start + len(held[f][1]))
        start = rows.stop
        s = pred[f].samples[:, rows]
        noise = float(em.model.likelihoods[f].variance.detach().reshape(-1)[0]) * em.y_scale[f] ** 2
        draws[f] = s + math.sqrt(noise) * gen.standard_normal(s.shape)
        moments[f] = (pred[f].mean[rows], pred[f].variance[rows])
    return draws, moments


def make_problem(name, seed=0):
    """The problem ``name`` (a test function's chain or ``"graphical"``) with its published-split sizes."""
    if name == "graphical":
        return graphical_problem(200, 25, 75, seed=seed)
    if name not in CHAIN_SIZES:
        raise ValueError(f"unknown multi-fidelity problem {name!r}; choose from {PROBLEMS}")
    return chain_problem(name, CHAIN_SIZES[name], num_test=75, seed=seed)


def _scores(mean, var, y, y_train):
    rmse = float(np.sqrt(np.mean((mean - y) ** 2)))
    base = float(np.sqrt(np.mean((y - np.mean(y_train)) ** 2)))
    crps = float(crps_gaussian(torch.as_tensor(mean), torch.as_tensor(np.sqrt(var)), torch.as_tensor(y)))
    return {"rmse": rmse, "nrmse": 1 - rmse / base, "crps": crps}


def _fit(problem, train, precision, steps, pretrain_steps, seed, progress):
    em = MultiFidelityEmulator(train, problem.parents, precision=precision, seed=seed, bounds=problem.bounds)
    t = time.perf_counter()
    em.fit(num_steps=steps, pretrain_steps=pretrain_steps, progress=progress)
    return em, time.perf_counter() - t


def run_protocol(problem, protocol="published", precision="chordal", steps=1000, pretrain_steps=500, seed=0,
                 out=None, progress=False, folds=None, structure=None):
    """Run ``protocol`` on ``problem`` with a :class:`~pyro_dag.emulation.MultiFidelityEmulator`; write
    ``multifidelity_{problem}_{protocol}.json`` and a figure to ``out`` (if given).

    :param folds: ``"pooled"`` only: the folds (of 10) to run (default: all 10). The pooled protocol is defined
        for the graphical problem (200 / 200 / 100 runs); on a chain it pools the chain's runs of
        :data:`CHAIN_SIZES` in the same way.
    :returns: ``{"metrics": {...}, "paths": [...]}``; metrics are the high fidelity's RMSE, N-RMSE, CRPS (Gaussian,
        from the predictive mean and variance) and seconds per fit, and for ``"pooled"`` the weighted energy score
        ``energy_score`` of all fidelities' held-out runs; averages over folds where there are folds.
    """
    precision = renamed_argument("run_protocol", "structure", "precision", structure, precision, "chordal")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol == "pooled" and problem == "graphical":
        p = graphical_problem(POOLED_SIZES[0], POOLED_SIZES[1], 75, seed=seed)
    else:
        p = make_problem(problem, seed)
    target = p.target
    fold_ids = folds
    folds = []
    if protocol == "pooled":
        splits = pooled_folds(p.train, 10, seed=seed)
        fold_ids = list(range(10)) if fold_ids is None else list(fold_ids)
        for k in fold_ids:
            train, held = splits[k]
            em, sec = _fit(p, train, precision, steps, pretrain_steps, seed + k, progress)
            draws, moments = joint_draws(em, held, num_samples=500, seed=seed + k)
            mean, var = moments[target]
            folds.append(dict(_scores(mean, var, held[target][1][:, 0], train[target][1]), seconds=sec,
                              energy_score=weighted_energy_score(draws, held, train)))
        metrics = {k: float(np.mean([f[k] for f in folds])) for k in folds[0]}
    elif protocol == "published":
        em, sec = _fit(p, p.train, precision, steps, pretrain_steps, seed, progress)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = em.predict(p.test[0], [target])[target]
        metrics = dict(_scores(pred.mean, pred.variance, p.test[1][:, 0], p.train[target][1]), seconds=sec)
    else:                                         # hf-scarce
        XH, yH = p.train[target]
        rng = np.random.default_rng(100 + seed)
        for k, test in enumerate(np.array_split(rng.permutation(len(yH)), 5)):
            keep = np.setdiff1d(np.arange(len(yH)), test)
            train = dict(p.train)
            train[target] = (XH[keep], yH[keep])
            em, sec = _fit(p, train, precision, steps, pretrain_steps, seed + k, progress)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = em.predict(XH[test], [target])[target]
            folds.append(dict(_scores(pred.mean, pred.variance, yH[test][:, 0], yH[keep]), seconds=sec))
        metrics = {k: float(np.mean([f[k] for f in folds])) for k in folds[0]}
    result = {"problem": problem, "protocol": protocol, "structure": precision, "steps": steps,
              "pretrain_steps": pretrain_steps, "seed": seed, "metrics": metrics, "folds": folds}
    paths = []
    if out is not None:
        if p.parents[target] and len(p.parents[target]) > 1:
            res = em.shapley(p.test[0], num_samples=128)
            result["shapley_mean_share"] = res.mean_share.mean(0).tolist()
            result["shapley_variance_share"] = res.variance_share.mean(0).tolist()
            result["shapley_players"] = res.players
        stem = f"multifidelity_{problem}_{protocol}"
        files = OutputSet(out, [f"{stem}.json", f"{stem}.png"])        # each file atomically
        paths.append(files.json(f"{stem}.json", result, indent=2))
        paths.append(files.call([f"{stem}.png"], lambda: _figure(em, p, files.path(f"{stem}.png"), problem,
                                                                 protocol)))
    return {"metrics": metrics, "result": result, "paths": paths}


def _figure(em, p, path, problem, protocol):
    X, y = p.test
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = em.predict(X, [p.target])[p.target]
    return save_observed_vs_predicted(y[:, 0], pred.mean, pred.std, p.target, f"{problem}, {protocol}", path)

"""``MultiFidelityEmulator.fit(method="auto")``, the default: every fidelity fitted exactly, the fusion kernel and the
noise of each refined fidelity chosen from the data (:mod:`~pyro_dag.emulation.selection`), and a DAG-DGP built
from the chosen pieces. A mixin of :class:`~pyro_dag.emulation.MultiFidelityEmulator`, kept apart so that each
module holds one fitting method.
"""
import math
import uuid
import warnings

import numpy as np
import torch

from ..dgp import DAGDGP
from ..gp.likelihoods import Gaussian
from ..utils import freeze


__all__ = ["AutoFitMixin", "AUTO_MAX_EXACT", "LOO_SCALE_FLOOR", "LOO_MIN_RUNS", "CV_MIN_RUNS", "CV_FOLDS",
           "CV_MAX_RUNS", "CV_SELECT_MAX_RUNS", "AUTO_JITTER", "CALIBRATION_LEVEL"]

#: ``fit(method="auto")`` fits a fidelity exactly on at most this many of its runs (a random subset above it).
AUTO_MAX_EXACT = 1000

#: The smallest amplitude factor of a deterministic fidelity's variances (its sd shrinks at most ~3x): the left-out
#: runs of a dense design are closer to the others than test points in its gaps and at its edges, so an unbounded
#: factor made intervals too narrow (a random 1-D pair, 71 / 11 runs: closed-form leave-one-out factor 0.001, PICP95
#: 0.71).
LOO_SCALE_FLOOR = 0.1
#: A fidelity with fewer runs, or a noisy one, has its variances only widened by the cross-validation factor, never
#: shrunk: a factor below 1 from a handful of runs is noise (the 11 high-fidelity runs of that pair: closed-form
#: factor 0.22, PICP95 0.71 against 1.00 without), and a noisy fidelity's noise is already its own estimate.
LOO_MIN_RUNS = 30
#: A fidelity with fewer runs keeps its maximum-likelihood amplitude (five folds of fewer runs hold one or two each).
CV_MIN_RUNS = 10
#: Folds of the refitted cross-validation that sets the amplitude
#: (:func:`~pyro_dag.emulation.selection.cv_variance_scale`).
CV_FOLDS = 5
#: Above this many runs the amplitude factor is the closed-form leave-one-out one (no refits): the refits doubled
#: the fit's CPU time at 1000 runs (13 -> 27 s, a 3-D pair 1000 / 40), and so many runs pin the hyperparameters.
CV_MAX_RUNS = 500
#: A refined fidelity with at most this many runs chooses its kernel by the mean squared error of that refitted
#: cross-validation, not by evidence: with a few runs the evidence prefers the richest kernel (MultiFidelity), which
#: predicted worse (tuning set, named problems and random draws 100-111, outside the lock: Currin 25 runs, test RMSE
#: 0.0294 -> 0.0269; Hartmann-3 0.0282 -> 0.0227; draw 106 0.367 -> 0.142; draw 109 1.09 -> 0.91; draw 107 0.334
#: -> 0.349; no other change). Above it the evidence decides (each candidate's refits would cost more, and the
#: evidence of many runs overfits less).
CV_SELECT_MAX_RUNS = 60

#: The amplitude factor of a fidelity makes its central intervals of this level cover that share of the held-out
#: runs of the cross-validation (:func:`~pyro_dag.emulation.selection.coverage_scale`, a conformal quantile), not
#: the held-out runs' mean ``r² / σ²`` (``None``): the errors of a few runs' fit are heavy-tailed (tuning set, named
#: problems seed 0 and draws 100-111: test ``r² / σ²`` with a median of 0.4-0.7 and a mean of 2-3.5 on the rows
#: whose 95 % intervals covered 80-86 %), so the mean, dominated by the few large held-out residuals that a handful
#: of runs holds or misses, is set by the wrong part of the distribution.
CALIBRATION_LEVEL = 0.95

#: Relative jitter of ``K(Z, Z)`` in the model of ``fit(method="auto")`` (the DAG-DGP's ladder grows it x10 where
#: the factorisation fails): the default 1e-8 of the diagonal is a latent nugget that grows with the amplitude, and
#: a fit whose trend carries a large variance then predicts with a variance 50x its error (3-level Branin).
AUTO_JITTER = 1e-12



class AutoFitMixin:
    """The methods of :class:`~pyro_dag.emulation.MultiFidelityEmulator` behind ``fit(method="auto")``."""

    def _auto_rows(self, f, fitted, max_exact, deterministic=None):
        """Inputs ``Z [n_f, d + k]`` (unit-box ``x``, then the parents' standardised values) and standardised runs
        ``y [n_f]`` of fidelity ``f``, with a parent's value at a run where it was not run imputed by its exact
        posterior mean (as emukit's NARGP trains on the lower level's predictions), and a noisy parent's values (not
        in ``deterministic``) replaced by its posterior mean everywhere: the fidelity refines the parent's signal,
        not its noise (measured on Currin with 5 % noise, 200 / 25 runs: RMSE 0.052 on the noisy runs);
        ``(Z, y, rows, n_imputed)``."""
        mf, data = self.mf, self.model_data()
        x = torch.as_tensor(self._scale_x(mf.X), dtype=torch.float64)
        rows = np.nonzero(mf.observed(f))[0]
        if len(rows) > max_exact:
            rows = np.sort(np.random.default_rng(self.seed).choice(rows, max_exact, replace=False))
        cols, imputed = [x[rows]], 0
        for p in mf.parents[f]:
            v = data[p][rows, 0].clone()
            miss = ~torch.isfinite(v)
            if miss.any():   # fitted=None (a skeleton for load): a placeholder the saved state overwrites
                v[miss] = 0.0 if fitted is None else self._exact_mean(p, x[rows][miss], fitted)
                imputed = max(imputed, int(miss.sum()))
            if fitted is not None and deterministic is not None and not deterministic.get(p, True):
                v = self._exact_mean(p, x[rows], fitted)
            cols.append(v[:, None])
        return torch.cat(cols, 1), data[f][rows, 0], rows, imputed

    @torch.no_grad()
    def _exact_mean(self, f, xq, fitted):
        """Exact-GP posterior mean of fidelity ``f`` (standardised) at unit-box inputs ``xq`` ``[m, d]``, its
        parents' values there their posterior means (recursively)."""
        from .selection import _cholesky, isolated

        kernel, noise, Z, y, order = fitted[f]
        cols = {self.mf.input: xq, **{p: self._exact_mean(p, xq, fitted)[:, None] for p in self.mf.parents[f]}}
        Zq = torch.cat([cols[p] for p in order], 1)
        # each fidelity's kernel in a scope of its own: two fusion kernels share their short parameter names
        # ("rho.variance"), so in one scope the second would read the first's hyperparameters (a 3-level chain:
        # f3's mean off by 0.09 standardised units, Hartmann-3)
        with isolated():
            L = _cholesky(kernel, Z, noise)
            alpha = torch.cholesky_solve(y[:, None], L)
            return (kernel(Zq, Z) @ alpha)[:, 0]

    def _auto_columns(self, f, Z):
        """Fidelity ``f``'s parent specs, their order (the DAG's, the kernel's columns), ``{parent: columns}`` and
        ``Z`` in that order, from ``Z = [x, parents in self.mf.parents[f] order]``."""
        from ..graph.dag import parents as dag_parents
        from ..kernels import ParentSpec

        mf = self.mf
        specs = [ParentSpec(p, mf.dim if p == mf.input else 1, p == mf.input) for p in dag_parents(mf.graph, f)]
        order = [p.name for p in specs]
        cols = {mf.input: Z[:, :mf.dim]}
        for j, p in enumerate(mf.parents[f]):
            cols[p] = Z[:, mf.dim + j:mf.dim + j + 1]
        return specs, order, cols, torch.cat([cols[p] for p in order], 1)

    def _auto_skeleton(self, saved):
        """The model of a saved ``fit(method="auto")`` with placeholder values (:meth:`load` overwrites them)."""
        from .selection import ModelSelection

        sel = ModelSelection(chosen=dict(saved["chosen"]), deterministic=dict(saved["deterministic"]))
        rows_of = {}
        for f in self.mf.fidelities:
            Z, y, rows, _ = self._auto_rows(f, None, AUTO_MAX_EXACT)
            _, _, cols, Zo = self._auto_columns(f, Z)
            rows_of[f] = (Zo, y, rows, cols)
        self.model = self._auto_model(sel, None, rows_of)
        self.selection = sel
        return self.model

    def _fit_auto(self, num_threads, max_exact=None):
        """``fit(method="auto")``: exact fits of every fidelity with the fusion kernel and noise chosen from the data
        (:mod:`pyro_dag.emulation.selection`), then the DAG-DGP built from them (see :meth:`fit`)."""
        import pyro

        from ..infer.training.collapsed import write_posterior
        from ..threads import limit_threads
        from .selection import (KERNEL_CANDIDATES, ModelSelection, cv_residuals, cv_variance_scale, fit_exact_gp,
                                loo_variance_scale, random_starts, scale_kernel)

        mf = self.mf
        max_exact = AUTO_MAX_EXACT if max_exact is None else int(max_exact)
        names = KERNEL_CANDIDATES if self.kernel_choice is None else (self.kernel_name,)
        if self.learn_noise_choice is None:
            decision = None
        else:
            decision = (self.noise, not self.learn_noise)
        tag = f"MultiFidelityEmulator_{uuid.uuid4().hex[:12]}"
        self.guide, self._unfinished = None, True
        sel = ModelSelection()
        fitted, rows_of = {}, {}
        with limit_threads(num_threads):
            pyro.set_rng_seed(self.seed)
            for k, f in enumerate(mf.fidelities):
                Z, y, rows, imputed = self._auto_rows(f, fitted, max_exact, sel.deterministic)
                if imputed:
                    sel.imputed[f] = imputed
                specs, order, cols, Zo = self._auto_columns(f, Z)
                rows_of[f] = (Zo, y, rows, cols)

                def make(start, f=f, name=None, specs=specs):
                    return self._make_kernel(f, name, start).double().bind_parents(specs, f)

                # a fidelity refining nothing, or one that sees no input (a linked simulator fed by others only): an
                # ARD RBF on its parents; else the fusion kernels
                fused = f in self.refined and mf.input in order
                cands = list(names) if fused else ["rbf"]
                fits, noise_decision = [], decision
                for j, name in enumerate(cands):
                    fit, noise_decision = fit_exact_gp(lambda start, name=name: make(start, name=name), Zo, y,
                                                       fidelity=f, name=name, noise=noise_decision,
                                                       num_random_starts=random_starts(len(y)),
                                                       starts=("data", "unit", "input") if fused else
                                                       ("data", "unit") if len(y) <= 100 else ("data",),
                                                       seed=self.seed + 101 * k + j)
                    fits.append(fit)
                sel.candidates += fits
                best = max(fits, key=lambda c: c.evidence)
                if len(fits) > 1 and len(y) <= CV_SELECT_MAX_RUNS:
                    # a few runs: the candidate that predicts held-out runs best with its hyperparameters refitted
                    # without them; the evidence of the richest kernel, fitted with every run, overfits them
                    for c_ in fits:
                        if math.isfinite(c_.evidence):
                            r_, _ = cv_residuals(c_.kernel_module, Zo, y, c_.noise, folds=CV_FOLDS, seed=self.seed + k)
                            c_.cv_mse = float(r_.pow(2).mean()) if r_.numel() == len(y) else math.inf
                    scored = [c_ for c_ in fits if math.isfinite(c_.cv_mse)]
                    if scored:
                        best = min(scored, key=lambda c_: c_.cv_mse)
                        sel.criterion[f] = "cv"
                if not math.isfinite(best.evidence):
                    raise RuntimeError(f"MultiFidelityEmulator.fit(method='auto'): no candidate of fidelity {f!r} "
                                       "could be fitted (every exact fit failed its Cholesky factorisation); "
                                       "try method='svi'")
                sel.criterion.setdefault(f, "evidence")
                sel.chosen[f] = best.kernel
                sel.deterministic[f] = bool(best.noise_fixed)
                c = 1.0
                if self.calibrate and len(y) >= CV_MIN_RUNS:
                    # the amplitude by cross-validation with refitted hyperparameters (cv_variance_scale): the mean
                    # stays, the variances grow (or, for a deterministic fidelity with many runs, shrink) so that
                    # the 95 % intervals cover 95 % of the held-out runs (CALIBRATION_LEVEL). The closed-form leave-one-out
                    # factor keeps the hyperparameters fitted with the left-out run and so missed the error of a
                    # few runs' hyperparameters (Currin 200 / 25: factor 0.61 there, 6.8 refitted; PICP95 0.70 ->
                    # 0.92; Hartmann-3 0.71 -> 0.87; 5 of 12 tuning draws 0.45-0.69 -> 0.80-0.97)
                    if len(y) <= CV_MAX_RUNS:
                        cv = cv_variance_scale(best.kernel_module, Zo, y, best.noise, folds=CV_FOLDS,
                                               seed=self.seed + k, level=CALIBRATION_LEVEL)
                    else:   # many runs: the hyperparameters hardly move without a fold; the closed form is cheap
                        cv = loo_variance_scale(best.kernel_module, Zo, y, best.noise, level=CALIBRATION_LEVEL)
                    floor = LOO_SCALE_FLOOR if best.noise_fixed and len(y) >= LOO_MIN_RUNS else 1.0
                    c = min(max(cv, floor), 1e3) if math.isfinite(cv) else 1.0
                if c != 1.0:
                    scale_kernel(best.kernel_module, best.kernel, c)
                    best.noise, best.variance_scale = best.noise * c, c
                fitted[f] = (best.kernel_module, best.noise, Zo, y, order)
            if sel.imputed:
                warnings.warn("MultiFidelityEmulator.fit: the designs are not nested: "
                              + "; ".join(f"fidelity {f!r} was run at {n} points where a fidelity it refines was not"
                                          for f, n in sel.imputed.items())
                              + ". The exact fits use the lower fidelities' posterior means there (as emukit's "
                              "NARGP does), so their uncertainty at those points is not carried into the fit; "
                              "run the lower fidelities at every design point of the higher ones (nested designs) "
                              "where you can", stacklevel=3)
            self.model = self._auto_model(sel, fitted, rows_of)
            inputs, data = self.model_inputs(), self.model_data()
            guide = self._guide(self.precision, f"{tag}_auto")
            guide(inputs, data)
            for f in mf.fidelities:
                Zo, y, rows, cols = rows_of[f]
                write_posterior(guide, self.model, f, cols, y)
            if self.precision != "mean_field":
                guide.family.zero_offdiagonal()
        self.selection = sel
        self.history["auto"] = sel.as_dict()
        self.guide, self._unfinished = guide, False
        return self

    def _auto_model(self, sel, fitted, rows_of):
        """The DAG-DGP of the chosen fits: each fidelity's kernel and noise as fitted, its inducing inputs its runs'
        inputs (so that its ``q(V)`` is the exact posterior), fixed noise held."""
        import pyro

        from ..infer.training.groups import _sync_with_param_store

        mf = self.mf
        # fresh kernels of the chosen kinds (a PyroModule that ran on its own cannot join the model), then the fits
        kernels = {f: self._make_kernel(f, sel.chosen[f], "unit") for f in mf.fidelities}
        inducing = {f: rows_of[f][0].detach().clone() for f in mf.fidelities}
        lik = {f: Gaussian(1e-3 if fitted is None else float(fitted[f][1])) for f in mf.fidelities}
        # a fitted kernel's parameters must not be replaced by stale entries of Pyro's parameter store (an earlier
        # emulator with the same fidelity names): drop those names first
        store = pyro.get_param_store()
        model = DAGDGP(mf.graph, kernels=kernels, num_inducing={f: int(z.shape[0]) for f, z in inducing.items()},
                       likelihoods=lik, inducing_inputs=inducing, learn_inducing=False, seed=self.seed,
                       jitter=AUTO_JITTER).double()
        for f in mf.fidelities:
            if sel.deterministic.get(f):
                freeze(model.likelihoods[f], {"variance"})
        model.setup(self.model_inputs(), self.model_data())
        for module in (model.kernels, model.likelihoods):
            for m in module.modules():
                if m.__dict__.get("_pyro_context") is None or not m._pyro_context.used:
                    continue
                for name in list(m.__dict__.get("_pyro_params", {})):
                    full = m._pyro_get_fullname(name)
                    if full in store:
                        del store[full]
        with torch.no_grad():
            for f in mf.fidelities if fitted is not None else ():
                model.kernels[f].load_state_dict(fitted[f][0].state_dict())
        _sync_with_param_store(model.kernels)
        _sync_with_param_store(model.likelihoods)
        self.num_inducing = {f: int(z.shape[0]) for f, z in inducing.items()}
        return model

"""Multi-fidelity emulation with a DAG-DGP: the workflow of Perlino et al. 2026 (arXiv:2607.09645, Sec. 7 and App.
G.5) from per-fidelity arrays to predictions at every fidelity.

:class:`MultiFidelityEmulator` builds the graph and the NaN-padded data
(:func:`~pyro_dag.emulation.multifidelity_data`),
scales the inputs to the unit box and standardises each fidelity's outputs, initialises the kernels from the data,
and fits in the paper's order: node-wise pretraining of the fidelities whose parents are observed (each one a
sparse GP on its own data), the ``predmean`` or ``free`` initialisation of the inducing inputs of the refined
fidelities (Cutajar et al. 2019, Sec. 4.4), then joint training with :func:`pyro_dag.infer.train` under DAG-VI
(mean field) or DAG-SVI (chordal, warm-started from a mean-field fit).
"""
import math
import uuid
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ..dgp import DAGDGP, DAGInputError
from ..errors import NotFittedError
from ..gp.likelihoods import Gaussian
from ..kernels import AR1, NARGP, RBF, Concat, Linear, MultiFidelity
from ..scaling import column_moments
from ..utils import freeze, renamed_argument
from .pretraining import _collapsed_bound, _transfer, initial_lengthscale, pretrain_collapsed  # noqa: F401
from .auto_fit import AUTO_JITTER, AUTO_MAX_EXACT, LOO_MIN_RUNS, LOO_SCALE_FLOOR, AutoFitMixin  # noqa: F401
from .arguments import check_exact_fit_arguments, check_fit_arguments, design_box
from .data import multifidelity_data
from .persistence import load_emulator, save_emulator

__all__ = ["MultiFidelityEmulator", "FidelityPrediction", "initial_lengthscale", "INDUCING_INITS", "FIT_METHODS"]

#: The methods of :meth:`MultiFidelityEmulator.fit`.
FIT_METHODS = ("auto", "exact", "svi")

#: Initialisations of the inducing inputs of a refined fidelity (Perlino et al. 2026, App. G.5).
INDUCING_INITS = ("predmean", "free")


@dataclass
class FidelityPrediction:
    """Prediction of one fidelity at new inputs, in the fidelity's own units.

    :ivar mean: ``[n]`` predictive mean. :ivar variance: ``[n]`` predictive variance of a new run (noise included).
    :ivar samples: ``[S, n]`` draws of the latent output (the predictive is their mixture with the noise).
    """

    mean: np.ndarray
    variance: np.ndarray
    samples: np.ndarray

    @property
    def std(self):
        return np.sqrt(self.variance)


class MultiFidelityEmulator(AutoFitMixin):
    """A multi-fidelity emulator: a DAG-DGP whose root is the shared design input and whose nodes are the
    fidelities (Perlino et al. 2026, arXiv:2607.09645, Sec. 7, Sec. 8.1; the MF-DGP of Cutajar et al. 2019 is the
    chain case).

    :param dict fidelities: ``{name: (X [n_f, d], y [n_f])}`` or a list of pairs (a chain, lowest first); see
        :func:`~pyro_dag.emulation.multifidelity_data`. :param dict parents: ``{name: [lower fidelities]}``.
    :param str kernel: fusion kernel at refined fidelities: ``None`` (default: :meth:`fit` chooses among
        ``"multifidelity"``, ``"ar1"`` and ``"nargp"`` by evidence; the other methods use ``"multifidelity"``),
        ``"multifidelity"`` (Cutajar form of :class:`~pyro_dag.kernels.MultiFidelity`), ``"ar1"``
        (:class:`~pyro_dag.kernels.AR1`) or ``"nargp"`` (:class:`~pyro_dag.kernels.NARGP`).
    :param str precision: ``"chordal"`` (DAG-SVI, default) or ``"mean_field"`` (DAG-VI) (``structure=`` is its old
        name).
    :param int num_inducing: inducing points of a fidelity refining nothing (at most its number of runs; the paper
        uses all 200); a refined fidelity gets one per training run (as the paper), at most ``max_inducing_refined``.
    :param str inducing_init: ``"predmean"`` (default; the refined fidelity's inducing inputs are its training
        inputs augmented with the pretrained lower fidelities' predictive means there, held fixed) or ``"free"``
        (the same inputs with the lower-fidelity coordinates drawn from ``N(0, 1)``, the standardised scale, and
        learned).
    :param float noise: noise variance in standardised units: with ``learn_noise=False`` the fixed value (default
        1e-6), else the initial one of ``fit(method="svi" / "exact")`` (default 1e-3).
    :param bool learn_noise: ``None`` (default): ``fit()`` applies the noise rule (a nugget where a fidelity is
        deterministic, the noise learned elsewhere; :mod:`pyro_dag.emulation.selection`) and the other methods learn
        it; ``True`` learns every fidelity's noise; ``False`` holds it at ``noise``.
    :param bool calibrate: ``fit()`` takes each fidelity's amplitude from 5-fold cross-validation with refitted
        hyperparameters (default; with 10-500 runs, the closed-form leave-one-out factor above): the factor whose
        95 % intervals cover 95 % of the held-out runs, a conformal quantile
        (:func:`~pyro_dag.emulation.selection.coverage_scale`); the variances only grow, except those of a
        deterministic fidelity with at least 30 runs, which shrink at most 10x. So its 95 % intervals are neither
        several times too narrow (a few runs' hyperparameters) nor too wide (a smooth simulator's dense design).
    :param int seed: seed of the inducing-input initialisation and of the training draws.
    :param connect_input: as in :func:`~pyro_dag.emulation.multifidelity_data`.
    :param str input_name: the root's name (default ``"x"``).
    :param bounds: ``[d, 2]`` the input box (lower, upper) of the simulators (default: the box of the designs);
        inputs are scaled to the unit box with it, and :meth:`predict` warns outside it.

    Example::

        em = MultiFidelityEmulator({"low": (X_low, y_low), "high": (X_high, y_high)}, parents={"high": ["low"]})
        em.fit()                           # exact fits, kernel and noise chosen; em.selection says what and why
        pred = em.predict(X_test)          # {"low": FidelityPrediction, "high": FidelityPrediction}
        pred["high"].mean, pred["high"].std
    """

    def __init__(self, fidelities, parents=None, *, kernel=None, precision="chordal", num_inducing=100,
                 max_inducing_refined=200, inducing_init="predmean", noise=None, learn_noise=None, seed=0,
                 connect_input=None, input_name="x", bounds=None, structure=None, calibrate=True):
        precision = renamed_argument("MultiFidelityEmulator", "structure", "precision", structure, precision,
                                     "chordal")
        if kernel not in (None, "multifidelity", "nargp", "ar1"):
            raise ValueError(f"kernel must be None (chosen by fit), 'multifidelity', 'nargp' or 'ar1', got {kernel!r}")
        if precision not in ("chordal", "mean_field"):
            raise ValueError(f"precision must be 'chordal' (DAG-SVI) or 'mean_field' (DAG-VI), got {precision!r}")
        if inducing_init not in INDUCING_INITS:
            raise ValueError(f"inducing_init must be one of {INDUCING_INITS}, got {inducing_init!r}")
        self.mf = multifidelity_data(fidelities, parents, input_name=input_name, connect_input=connect_input)
        # kernel=None: fit(method="auto") compares the candidates; the other methods use the MultiFidelity kernel
        self.kernel_choice = kernel
        self.kernel_name, self.precision, self.inducing_init = kernel or "multifidelity", precision, inducing_init
        if noise is not None and not noise > 0:
            raise ValueError(f"noise must be a positive variance (standardised units), got {noise!r}")
        # learn_noise=None: fit(method="auto") applies the noise rule; the other methods learn it from `noise`
        self.learn_noise_choice = learn_noise
        default_noise = 1e-6 if learn_noise is False else 1e-3
        self.noise = float(default_noise if noise is None else noise)
        self.learn_noise = True if learn_noise is None else bool(learn_noise)
        self.seed = int(seed)
        self.calibrate = bool(calibrate)
        self.selection = None
        mf = self.mf
        lo, hi = design_box(bounds, mf.X)
        self.lower = lo
        span = hi - lo
        self.span = np.where(span > 0, span, 1.0)
        if not np.isfinite(span).all():
            raise DAGInputError(f"the design box spans {span.tolist()}, which overflows float64: rescale the inputs")
        # refuses outputs whose standard deviation overflows (standardised, every value would be 0)
        moments = {f: column_moments(mf.y[f], f"fidelity {f!r}: y", error=DAGInputError) for f in mf.fidelities}
        self.y_loc = {f: m for f, (m, _) in moments.items()}
        self.y_scale = {f: s or 1.0 for f, (_, s) in moments.items()}
        self.refined = [f for f in mf.fidelities if mf.parents[f]]
        self.num_inducing = {}
        for f in mf.fidelities:
            n_f = int(mf.observed(f).sum())
            self.num_inducing[f] = min(n_f, max_inducing_refined) if f in self.refined else min(n_f, num_inducing)
        self.model = self.guide = None
        self.history = {}
        self._unfinished = False    # a fit started and did not finish (interrupted, or stopped by an error)

    # ------------------------------------------------------------------ data in model units
    def _scale_x(self, X):
        return (np.asarray(X, dtype=np.float64) - self.lower) / self.span

    def model_inputs(self, X=None):
        """``{input: [n, d] tensor}`` in the unit box (default: the training cases)."""
        X = self.mf.X if X is None else X
        return {self.mf.input: torch.as_tensor(self._scale_x(X), dtype=torch.float64)}

    def model_data(self):
        """``{fidelity: [n, 1] tensor}`` standardised, NaN where the fidelity was not run."""
        return {f: torch.as_tensor((self.mf.y[f] - self.y_loc[f]) / self.y_scale[f], dtype=torch.float64)
                for f in self.mf.fidelities}

    # ------------------------------------------------------------------ kernels from the data
    def _coupling(self, f):
        """Least-squares coefficients ``ρ`` of the standardised ``f`` on its standardised parents (with an intercept
        and a linear trend in ``x``) at the cases where all were run (nested designs), and the variance of the residual
        ``f - ρᵀ parents``; ``(ρ [k], s²)`` (``ρ = 1``, ``s² = 0.1`` without enough shared cases)."""
        mf, data = self.mf, self.model_data()
        rows = mf.observed(f).copy()
        for p in mf.parents[f]:
            rows &= mf.observed(p)
        y = data[f].numpy()[rows, 0]
        k = len(mf.parents[f])
        if rows.sum() < k + mf.dim + 3:
            return np.ones(k), 0.1
        P = np.stack([data[p].numpy()[rows, 0] for p in mf.parents[f]], 1)
        Z = np.concatenate([P, self._scale_x(mf.X[rows]), np.ones((int(rows.sum()), 1))], 1)
        coef, *_ = np.linalg.lstsq(Z, y, rcond=None)
        resid = y - P @ coef[:k]
        return coef[:k], float(max(resid.var(), 1e-2))

    def _kernels(self):
        return {f: self._make_kernel(f, self.kernel_name if f in self.refined else "rbf", "data")
                for f in self.mf.fidelities}

    def _make_kernel(self, f, name, start="data"):
        """The (unbound) kernel ``name`` (``"rbf"`` for a fidelity refining nothing, ``"multifidelity"`` or
        ``"nargp"``) of fidelity ``f``: with ``start="data"`` initialised from the data (length-scales by
        :func:`initial_lengthscale`, the coupling by least squares, :meth:`_coupling`), with ``"unit"`` at unit
        variances and length-scales (the discrepancy's variance 0.1), with ``"input"`` with the discrepancy ``k_δ(x)``
        holding the variance and the lower fidelities' terms small (the start of a fidelity they explain little of)."""
        if start == "unit" or (start == "input" and name == "rbf"):
            if name == "rbf":
                return Concat(RBF(ard=True))
            return {"multifidelity": MultiFidelity, "nargp": NARGP, "ar1": AR1}[name]()
        if start == "input":    # the lower fidelities explain little: the discrepancy k_δ(x) carries the variance
            small = dict(variance=0.01)
            delta = RBF(ard=True, variance=1.0, lengthscale=0.5)
            if name == "ar1":
                return AR1(linear=Linear(**small), delta=delta)
            if name == "multifidelity":
                return MultiFidelity(rho=RBF(ard=True, variance=1.0, lengthscale=2.0), linear=Linear(**small),
                                     se=RBF(ard=True, variance=0.01, lengthscale=3.0), delta=delta)
            return NARGP(rho=RBF(ard=True, variance=0.1, lengthscale=2.0), f=RBF(ard=True, variance=1.0, lengthscale=30.0),
                         delta=delta)
        mf, data = self.mf, self.model_data()
        x = self._scale_x(mf.X)
        d = mf.dim
        obs = mf.observed(f)
        y = data[f].numpy()[obs, 0]
        if name == "rbf":
            return Concat(RBF(ard=True, variance=1.0, lengthscale=initial_lengthscale(x[obs], y)))
        rho, resid = self._coupling(f)
        rows = obs.copy()
        for p in mf.parents[f]:
            rows &= mf.observed(p)
        if rows.sum() >= len(mf.parents[f]) + d + 3:
            Z = np.stack([data[p].numpy()[rows, 0] for p in mf.parents[f]], 1)
            r = data[f].numpy()[rows, 0] - Z @ rho
            ls_delta = initial_lengthscale(x[rows], r)
        else:
            ls_delta = initial_lengthscale(x[obs], y)
        long = 2.0 * math.sqrt(d)
        if name == "ar1":
            return AR1(linear=Linear(variance=float(max(np.mean(rho ** 2), 1e-2))),
                       delta=RBF(ard=True, variance=float(resid), lengthscale=ls_delta))
        if name == "multifidelity":
            return MultiFidelity(rho=RBF(ard=True, variance=1.0, lengthscale=long),
                                 linear=Linear(variance=float(max(np.mean(rho ** 2), 1e-2))),
                                 se=RBF(ard=True, variance=float(resid), lengthscale=1.0),
                                 delta=RBF(ard=True, variance=float(resid), lengthscale=ls_delta))
        return NARGP(rho=RBF(ard=True, variance=1.0, lengthscale=long),
                     f=RBF(ard=True, variance=1.0, lengthscale=2.0),
                     delta=RBF(ard=True, variance=float(resid), lengthscale=ls_delta))

    # ------------------------------------------------------------------ building
    def build(self):
        """Build the :class:`~pyro_dag.DAGDGP` (float64) with data-driven kernels; returns it (also ``.model``)."""
        mf = self.mf
        data = self.model_data()
        x = self._scale_x(mf.X)
        rng = np.random.default_rng(self.seed)
        inducing = {}
        for f in self.refined:
            obs = np.nonzero(mf.observed(f))[0]
            if len(obs) > self.num_inducing[f]:
                obs = np.sort(rng.choice(obs, self.num_inducing[f], replace=False))
            z = [np.nan_to_num(data[p].numpy()[obs], nan=0.0) for p in mf.parents[f]]
            inducing[f] = torch.as_tensor(np.concatenate([x[obs]] + z, 1), dtype=torch.float64)
        self._refined_rows = {f: None for f in self.refined}
        learn = set(self.refined) if self.inducing_init == "free" else False
        self.model = DAGDGP(mf.graph, kernels=self._kernels(), num_inducing=self.num_inducing,
                            likelihoods={f: Gaussian(self.noise) for f in mf.fidelities}, inducing_inputs=inducing,
                            learn_inducing=learn, seed=self.seed).double()
        if not self.learn_noise:                 # a buffer, not a parameter: no optimiser sees it
            for f in mf.fidelities:
                freeze(self.model.likelihoods[f], {"variance"})
        self.model.setup(self.model_inputs(), data)
        return self.model

    def _pretrainable(self, f):
        """Whether refined fidelity ``f`` is pretrained on its own: at least half of its runs (and at least 3) were
        also run at every fidelity it refines (always so for nested designs)."""
        mf = self.mf
        shared = mf.observed(f).copy()
        for p in mf.parents[f]:
            shared &= mf.observed(p)
        return int(shared.sum()) >= max(3, (int(mf.observed(f).sum()) + 1) // 2)

    def _set_refined_inducing(self, guide, fidelities):
        """``predmean`` / ``free`` initialisation of the lower-fidelity coordinates of the refined fidelities'
        inducing inputs (their input coordinates are training inputs of the fidelity, set at :meth:`build`)."""
        mf, model = self.mf, self.model
        d = mf.dim
        gen = torch.Generator().manual_seed(self.seed + 1)
        for f in fidelities:
            Z = model.inducing_inputs(f).detach().clone()
            if self.inducing_init == "predmean":
                pred = model.predict(guide, {mf.input: Z[:, :d]}, nodes=mf.parents[f], num_samples=64)
                Z[:, d:] = torch.cat([pred[p].mean for p in mf.parents[f]], -1)
            else:
                Z[:, d:] = torch.randn(Z.shape[0], Z.shape[1] - d, generator=gen, dtype=Z.dtype)
            with torch.no_grad():
                target = getattr(model.inducing, f"{f}_unconstrained", None)
                if target is None:
                    target = getattr(model.inducing, f)
                target.copy_(Z)

    def _guide(self, precision, name):
        from ..infer.autoguide import AutoStructuredGuide
        from ..infer.training import initial_scales

        scales = initial_scales(self.model, self.model_inputs(), self.model_data())
        return AutoStructuredGuide(self.model, precision=precision, init_scale=scales, name=name)

    # ------------------------------------------------------------------ fitting
    def fit(self, num_steps=None, pretrain_steps=None, warm_start=None, lr=None, pretrain_lr=None, num_particles=None,
            likelihood_lr_multiplier=None, progress=False, num_threads=1, pretrain_optimizer=None, method=None):
        """Fit the emulator.

        ``method`` (default ``"auto"``, or ``"svi"`` when a step option is given):

        * ``"auto"``: every fidelity is fitted exactly (an exact GP on the input and its parents' runs; Le Gratiet &
          Garnier 2014, Perdikaris et al. 2017) and the model is chosen from the data
          (:mod:`pyro_dag.emulation.selection`): at each refined fidelity the fusion kernels ``"multifidelity"``,
          ``"ar1"`` and ``"nargp"`` (unless ``kernel=`` names one) are fitted from several starts and the one with the
          largest evidence is kept; the noise rule fixes a nugget where the fidelity is deterministic (a learned
          noise at most 1e-4 of its variance) and learns it otherwise (unless ``learn_noise=`` says). The choice and
          every candidate's evidence and leave-one-out score are in :attr:`selection` (``print(em.selection.table())``)
          and in :meth:`baseline_report`. Designs that are not nested are handled as emukit's NARGP does (a parent's
          value where it was not run is its posterior mean) with a warning. Prediction propagates the lower
          fidelities' uncertainty through the DAG (:meth:`predict`).
        * ``"exact"``: the fixed kernel and noise of the constructor, fitted on the collapsed bound (below).
        * ``"svi"``: the paper's stochastic fit (Perlino et al. 2026, App. G.5, in a shorter budget; below).

        ``method="exact"`` instead fits every fidelity exactly, by L-BFGS on its collapsed bound
        (:func:`pyro_dag.infer.training.fit_collapsed`; Titsias 2009), which needs nested designs (each refined
        fidelity run only where its parents were: then no data term depends on a latent value and the exact fits are
        the joint optimum, as the recursive co-kriging of Le Gratiet & Garnier 2014 and NARGP of Perdikaris et al.
        2017 exploit); the step options then do not apply. Measured in ``benchmarks/zoo.py`` (seed 0, defaults
        otherwise): Park 200 / 25 runs RMSE 0.0011 in 1 CPU s against 0.0015 in 17 s with ``"svi"`` (emukit NARGP
        0.0055); noisy Currin 0.057 against 0.045 (emukit AR1 0.047); 3-level Branin 0.082 against 0.073 (NARGP
        0.0057). Prediction is the same either way (through the DAG, lower fidelities' uncertainty included).

        1. node-wise pretraining (``pretrain_steps``) of the fidelities that refine nothing;
        2. the ``predmean`` / ``free`` initialisation of the refined fidelities' inducing inputs, then node-wise
           pretraining of the refined fidelities on their runs where the lower fidelities were also run (nested
           designs, or designs where at least half of the fidelity's runs are shared with all its parents, as the
           folds of the pooled protocol leave them; skipped otherwise);
        3. joint training with :func:`pyro_dag.infer.train` (``recipe="adam"``, full batch, the likelihood's learning
           rate × ``likelihood_lr_multiplier``): DAG-VI for ``num_steps``; DAG-SVI for ``warm_start`` mean-field
           steps (default ``num_steps // 6``, as the paper's 2000 of 12 000) and then ``num_steps - warm_start``
           structured steps.

        The joint learning rate defaults to 1e-3, not the paper's 1e-2: the pretrained fits of deterministic
        simulators have tiny noise, and Adam's first steps of size ``lr`` in every whitened coordinate then throw
        the loss far off (measured on Forrester 50 / 14: high-fidelity RMSE 0.0014 at 1e-3, 0.0024 at 3e-3 after
        600 steps, and worse than pretraining alone at 1e-2).

        Like any Pyro model, the emulator's model keeps its parameters in Pyro's global parameter store under the
        fidelities' names: call ``pyro.clear_param_store()`` before building a second emulator with the same
        fidelity names in one process.

        :param str pretrain_optimizer: ``"adam"`` (default; ``pretrain_steps`` steps at ``pretrain_lr``) or
            ``"lbfgs"`` (at most ``pretrain_steps`` L-BFGS iterations; see :func:`pretrain_collapsed`).
        :returns: ``self`` (the losses are in ``.history``).
        """
        import pyro

        from ..infer.training import train
        from ..threads import limit_threads

        steps = {"num_steps": num_steps, "pretrain_steps": pretrain_steps, "warm_start": warm_start, "lr": lr,
                 "pretrain_lr": pretrain_lr, "num_particles": num_particles,
                 "likelihood_lr_multiplier": likelihood_lr_multiplier, "pretrain_optimizer": pretrain_optimizer}
        given = [k for k, v in steps.items() if v is not None]
        if method is None:
            method = "svi" if given else "auto"
        if method not in FIT_METHODS:
            raise ValueError(f"MultiFidelityEmulator.fit: method must be one of {FIT_METHODS}, got {method!r}")
        if method != "svi" and given:
            raise ValueError(f"MultiFidelityEmulator.fit: {given} apply to method='svi' only, not method={method!r} "
                             "(which takes no steps); drop them or pass method='svi'")
        if method == "auto":
            return self._fit_auto(num_threads)
        if method == "exact":
            check_exact_fit_arguments(type(self).fit, num_steps=num_steps, pretrain_steps=pretrain_steps,
                                      warm_start=warm_start, lr=lr, pretrain_lr=pretrain_lr,
                                      num_particles=num_particles, likelihood_lr_multiplier=likelihood_lr_multiplier,
                                      pretrain_optimizer=pretrain_optimizer)
            return self._fit_exact(num_threads)
        num_steps = 1000 if num_steps is None else num_steps
        pretrain_steps = 500 if pretrain_steps is None else pretrain_steps
        lr = 0.001 if lr is None else lr
        pretrain_lr = 0.03 if pretrain_lr is None else pretrain_lr
        num_particles = 4 if num_particles is None else num_particles
        likelihood_lr_multiplier = 0.1 if likelihood_lr_multiplier is None else likelihood_lr_multiplier
        pretrain_optimizer = "adam" if pretrain_optimizer is None else pretrain_optimizer

        warm = check_fit_arguments(num_steps=num_steps, pretrain_steps=pretrain_steps, warm_start=warm_start,
                                   num_particles=num_particles, chordal=self.precision == "chordal", lr=lr,
                                   pretrain_lr=pretrain_lr, likelihood_lr_multiplier=likelihood_lr_multiplier)
        if self.model is None:
            self.build()
        inputs, data = self.model_inputs(), self.model_data()
        # the model's parameters change from here on: an earlier guide no longer matches them until this fit ends
        self.guide, self._unfinished = None, True
        tag = f"MultiFidelityEmulator_{uuid.uuid4().hex[:12]}"   # fresh names: a recycled id() would reuse
        # a dead emulator's guide parameters from Pyro's global parameter store
        with limit_threads(num_threads):
            pyro.set_rng_seed(self.seed)
            mf_guide = self._guide("mean_field", f"{tag}_mf")
            base = [f for f in self.mf.fidelities if f not in self.refined]
            hist = self.history
            mf_guide(inputs, data)
            hist["pretrain_low"] = pretrain_collapsed(self.model, mf_guide, inputs, data, base, pretrain_steps,
                                                      lr=pretrain_lr, optimizer=pretrain_optimizer)
            for f in self.refined:                       # topological order: its parents are pretrained
                self._set_refined_inducing(mf_guide, [f])
                if self._pretrainable(f):
                    hist[f"pretrain_{f}"] = pretrain_collapsed(self.model, mf_guide, inputs, data, [f],
                                                               pretrain_steps, lr=pretrain_lr,
                                                               optimizer=pretrain_optimizer)[f]
            common = dict(recipe="adam", lr=lr, num_particles=num_particles,
                          likelihood_lr_multiplier=likelihood_lr_multiplier, progress=progress,
                          num_threads=num_threads)
            if self.precision == "mean_field":
                hist["train"] = train(self.model, mf_guide, inputs, data, num_steps=num_steps, **common).losses
                self.guide = mf_guide
            else:
                if warm:
                    hist["warm_start"] = train(self.model, mf_guide, inputs, data, num_steps=warm, **common).losses
                guide = self._guide("chordal", f"{tag}_svi")
                guide(inputs, data)
                _transfer(mf_guide, guide)
                hist["train"] = train(self.model, guide, inputs, data, num_steps=num_steps - warm, **common).losses
                self.guide = guide
        self._unfinished = False
        return self

    # ------------------------------------------------------------------ fit(method="auto")
    def _fit_exact(self, num_threads):
        """``fit(method="exact")``: every fidelity on its collapsed bound (see :meth:`fit`)."""
        import pyro

        from ..dgp.observed_inputs import collapsible_nodes
        from ..infer.training import fit_collapsed
        from ..threads import limit_threads

        if self.model is None:
            self.build()
        inputs, data = self.model_inputs(), self.model_data()
        X, _, obs = self.model.checked_arguments(inputs, data)
        missing = [f for f in self.mf.fidelities if f not in collapsible_nodes(self.model, X, obs)]
        if missing:
            raise ValueError(f"MultiFidelityEmulator.fit(method='exact'): fidelity {missing[0]!r} was run where a "
                             "fidelity it refines was not (the designs are not nested), so its inputs are latent "
                             "there; use method='svi'")
        tag = f"MultiFidelityEmulator_{uuid.uuid4().hex[:12]}"
        self.guide, self._unfinished = None, True
        with limit_threads(num_threads):
            pyro.set_rng_seed(self.seed)
            guide = self._guide(self.precision, f"{tag}_exact")
            guide(inputs, data)
            fit = fit_collapsed(self.model, guide, inputs, data)
        self.history["exact"] = fit.losses
        self.guide, self._unfinished = guide, False
        return self

    # ------------------------------------------------------------------ saving and loading
    def save(self, path):
        """Save the fitted emulator (its DAG-DGP and guide, scalings and :attr:`history`) to ``path``, in the format of
        :func:`pyro_dag.persist.save`; returns ``path``."""
        return save_emulator(path, self)

    def load(self, path):
        """Restore a fit saved by :meth:`save` into this emulator, unfitted and built from the same runs and arguments:
        its predictions then equal the saved one's (:func:`pyro_dag.persist.load`); returns ``self``."""
        return load_emulator(path, self)

    # ------------------------------------------------------------------ prediction
    def _check_box(self, X):
        x = self._scale_x(X)
        tol = 1e-9
        out = (x < -tol) | (x > 1 + tol)
        if out.any():
            cols = sorted(set(np.nonzero(out)[1].tolist()))
            warnings.warn(f"{int(out.any(1).sum())} of {len(x)} test inputs lie outside the design box in input "
                          f"columns {cols} (box {self.lower.tolist()} to {(self.lower + self.span).tolist()}): the "
                          "emulator extrapolates there", stacklevel=3)

    def predict(self, X, fidelities=None, num_samples=200, seed=0):
        """Predict every fidelity (or ``fidelities``) at new inputs ``X`` ``[n, d]``, in each fidelity's own units.

        Warns when a test input lies outside the box of the training designs.

        :returns: ``{fidelity: FidelityPrediction}``.
        """
        if self.guide is None:
            raise NotFittedError("predict: the last fit of the emulator did not finish (interrupted, or stopped by an "
                                 "error), so it has no fitted guide: call em.fit(...) again" if self._unfinished else
                                 "predict: fit the emulator first (em.fit(...))")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1 and self.mf.dim == 1:
            X = X[:, None]
        if X.ndim != 2 or X.shape[1] != self.mf.dim:
            raise ValueError(f"predict: X must be [n, {self.mf.dim}] (the designs' input dimension), got {X.shape}")
        self._check_box(X)
        fidelities = list(self.mf.fidelities) if fidelities is None else list(fidelities)
        for f in fidelities:
            if f not in self.mf.fidelities:
                raise ValueError(f"predict: unknown fidelity {f!r}; the fidelities are {self.mf.fidelities}")
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            pred = self.model.predict(self.guide, self.model_inputs(X), nodes=fidelities, num_samples=num_samples)
        out = {}
        for f in fidelities:
            m, s = self.y_loc[f], self.y_scale[f]
            p = pred[f]
            var = p.y_variance if p.y_variance is not None else p.variance
            out[f] = FidelityPrediction((p.mean[:, 0] * s + m).numpy(), (var[:, 0] * s ** 2).numpy(),
                                        (p.samples[..., 0] * s + m).numpy())
        return out

    def baseline_report(self, X_test, y_test, fidelity=None, num_samples=200, seed=0, tolerance=1.0, warn=True):
        """Score the emulator against the baselines a user already has, on held-out runs of one fidelity: an exact
        GP (:class:`~pyro_dag.baselines.ExactGP`, ARD RBF, type-II maximum likelihood) and linear regression
        (:class:`~pyro_dag.baselines.LinearRegression`), both fitted to that fidelity's own training runs alone
        (its inputs ``X``, none of the lower fidelities), and the training mean; the emulator is the multi-fidelity
        DAG-DGP of Perlino et al. 2026 (arXiv:2607.09645, Sec. 7). Warns
        (:class:`~pyro_dag.baselines.BaselineWarning`) when the emulator's RMSE is not below the best baseline's
        (times ``tolerance``): the lower fidelities then do not pay for themselves.

        :param X_test: ``[m, d]`` held-out inputs. :param y_test: ``[m]`` (or ``[m, 1]``) their runs of
            ``fidelity``, in its own units. :param str fidelity: default the highest (the last) fidelity.
        :param int num_samples: the emulator's predictive draws. :param int seed: of the prediction and the
            exact GP's restarts. :param float tolerance: the factor of :func:`~pyro_dag.baselines.compare_with_baselines`
            (default 1.0: warn unless the emulator is better). :param bool warn: emit the warning.
        :returns: ``{"fidelity", "n_train", "n_test", "emulator": {"rmse", "nlpd"}, "baselines": {"exact_gp",
            "linear", "mean": {"rmse", "nlpd", "seconds"}}, "comparison": {...}}`` in the fidelity's units (NLPD
            of a new run, noise included).
        """
        from ..baselines import baseline_scores, compare_with_baselines

        fidelity = self.mf.fidelities[-1] if fidelity is None else fidelity
        if fidelity not in self.mf.fidelities:
            raise ValueError(f"baseline_report: unknown fidelity {fidelity!r}; the fidelities are "
                             f"{self.mf.fidelities}")
        X_test = np.asarray(X_test, dtype=np.float64)
        if X_test.ndim == 1 and self.mf.dim == 1:
            X_test = X_test[:, None]
        y_test = np.asarray(y_test, dtype=np.float64).reshape(-1)
        if X_test.ndim != 2 or X_test.shape[1] != self.mf.dim or len(y_test) != X_test.shape[0]:
            raise ValueError(f"baseline_report: X_test must be [m, {self.mf.dim}] and y_test [m], got {X_test.shape} "
                             f"and {y_test.shape}")
        pred = self.predict(X_test, [fidelity], num_samples=num_samples, seed=seed)[fidelity]
        obs = self.mf.observed(fidelity)
        X_tr, y_tr = self.mf.X[obs], np.asarray(self.mf.y[fidelity], dtype=np.float64).reshape(-1)[obs]
        base = baseline_scores(X_tr, y_tr, X_test, y_test, seed=seed)
        ok = np.isfinite(y_test)
        err = pred.mean[ok] - y_test[ok]
        var = np.maximum(pred.variance[ok], 1e-300)
        em = {"rmse": float(np.sqrt(np.mean(err ** 2))),
              "nlpd": float(np.mean(0.5 * (np.log(2 * np.pi * var) + err ** 2 / var)))}
        cmp = compare_with_baselines(f"MultiFidelityEmulator, fidelity {fidelity!r}", em["rmse"], base,
                                     tolerance=tolerance, warn=warn)
        return {"fidelity": fidelity, "n_train": int(obs.sum()), "n_test": int(ok.sum()), "emulator": em,
                "baselines": base, "comparison": cmp,
                "baseline_inputs": f"the training runs of {fidelity!r} alone (its inputs, no lower fidelity)",
                "selection": None if self.selection is None else self.selection.as_dict()}

    def shapley(self, X, fidelity=None, **kwargs):
        """Shapley attribution of ``fidelity`` (default: the highest) at ``X`` to the fidelities it refines
        (:func:`pyro_dag.emulation.shapley`, in standardised units; shares are unit-free)."""
        from .attribution import shapley

        fidelity = self.mf.fidelities[-1] if fidelity is None else fidelity
        return shapley(self.model, self.guide, fidelity, self.model_inputs(X), **kwargs)

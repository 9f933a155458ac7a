"""Model choice for a refined fidelity: exact GP fits of candidate fusion kernels on the fidelity's runs, compared by
their evidence (log marginal likelihood) or, where the fidelity has few runs, by refitted cross-validation, with the
leave-one-out score beside them.

Where a fidelity was run only where the fidelities it refines were run (nested designs), the multi-fidelity model's
likelihood factorises over the fidelities, and each fidelity is an exact GP regression of its runs on the input and
its parents' observed values (the recursive co-kriging of Le Gratiet & Garnier 2014, "Recursive co-kriging model for
design of computer experiments with multiple levels of fidelity", IJUQ 4(5); NARGP of Perdikaris, Raissi, Damianou,
Lawrence & Karniadakis 2017, "Nonlinear information fusion algorithms for data-efficient multi-fidelity modelling",
Proc. R. Soc. A 473). The candidates at a refined fidelity are the fusion kernels of
:mod:`pyro_dag.kernels.multifidelity`: ``"multifidelity"`` (Cutajar et al. 2019's ``k_ρ(x)·[k_lin(z) + k_se(z)] +
k_δ(x)``), ``"ar1"`` (the linear autoregressive model of Kennedy & O'Hagan 2000, its ``k_se → 0`` limit, with fewer
hyperparameters) and ``"nargp"`` (``k_ρ(x)·k_f(z) + k_δ(x)``, the nonlinear map of Perdikaris et al. 2017). Each is fitted by L-BFGS
from several starts (the data-driven one of the emulator, unit hyperparameters, and random ones, as GPy's
``optimize_restarts``); the best start by evidence is the candidate's fit, and the candidate with the largest
evidence is chosen (all share the fidelity's runs, so their evidences compare), except at a fidelity with few runs
(``CV_SELECT_MAX_RUNS`` of :mod:`~pyro_dag.emulation.auto_fit`), where the candidate with the smallest 5-fold
cross-validation error, its hyperparameters refitted without each fold (:func:`cv_residuals`), is chosen: there the
evidence of the richest kernel overfits the runs (Currin, Hartmann-3: 25 runs).

The noise rule (Andrianakis & Challenor 2012, "The effect of the nugget on Gaussian process emulators of computer
models", CSDA 56(12); :mod:`pyro_dag.gp.noise`): the first candidate is fitted with the noise learned from every
start; a best fit whose noise is at most :data:`~pyro_dag.gp.noise.DETERMINISTIC_FRACTION` of the runs' variance
marks the fidelity deterministic, and every fit of it then holds the noise at the nugget :data:`NUGGET` of that
variance (emukit's examples fix 1e-6 the same way); otherwise the noise is learned. The chosen fit then takes its
amplitude from cross-validation with refitted hyperparameters (:func:`cv_variance_scale`; Sundararajan & Keerthi
2001, Bachoc 2013): the maximum-likelihood amplitude of a few runs' fit made the intervals several times too narrow
(Currin, Hartmann-3: 95 % intervals covering 70 % of test points), and that of a smooth simulator's dense design
several times too wide.
"""
import math
import time
from dataclasses import dataclass, field

import pyro
import torch

from ..gp.noise import DETERMINISTIC_FRACTION
from ..kernels.base import detached_copy
from ..infer.training.collapsed import lbfgs

__all__ = ["CandidateFit", "ModelSelection", "exact_evidence", "loo_log_density", "loo_variance_scale",
           "cv_variance_scale", "coverage_scale", "cv_residuals", "scale_kernel", "fit_exact_gp", "KERNEL_CANDIDATES", "AMPLITUDES"]

#: The hyperparameters that scale each candidate kernel as a whole (``k → c k`` when each is multiplied by ``c``).
AMPLITUDES = {"rbf": ("base.variance",), "ar1": ("linear.variance", "delta.variance"),
              "multifidelity": ("rho.variance", "delta.variance"), "nargp": ("rho.variance", "delta.variance")}

#: The fusion kernels compared at a refined fidelity.
KERNEL_CANDIDATES = ("multifidelity", "ar1", "nargp")

def random_starts(n):
    """Random starts per candidate for a fidelity with ``n`` runs, beside the data-driven and unit ones: the
    evidence of a fusion kernel fitted to a few runs has many local maxima (measured on the 3-level Branin, 25
    runs: 12 starts reached log evidences from -9 to 20), and small fits are cheap."""
    return 4 if n <= 60 else 1 if n <= 150 else 0


#: The nugget of a deterministic fidelity, as a fraction of its runs' variance: 1e-8, not the 1e-6 of emukit's
#: examples or of :data:`~pyro_dag.gp.noise.NUGGET_FRACTION`. A nugget is a fictitious noise: the fit smooths at its
#: scale and its posterior variance cannot fall below it, so with 1e-6 the predictive sd of a smooth simulator is
#: set by the nugget rather than by the design (measured on three linked simulators, 200 runs: s3 RMSE 0.0009 and
#: sd 3x that with 1e-6; 0.0002-0.0005 with 1e-8; Park 200 / 25 RMSE 0.0012 against 0.0007). The exact fits are in
#: float64 with a relative jitter of 1e-10.
NUGGET = 1e-8

#: L-BFGS stops when the log evidence changes by less (a model choice needs no more digits).
TOLERANCE = 1e-6

#: L-BFGS iterations per start.
MAX_ITER = 200

#: Jitter added to ``K`` in the exact fits (float64, standardised runs).
JITTER = 1e-10


def isolated():
    """A fresh, temporary Pyro parameter store (restored on exit): a kernel called on its own registers its
    hyperparameters in the store under its own short names (``"rho.variance"``), which two candidates would share.
    Collect a kernel's tensors after its first call inside the scope: that call may replace them."""
    return pyro.get_param_store().scope()


def _cholesky(kernel, Z, noise):
    K = kernel(Z)
    n = K.shape[-1]
    # absolute (the runs are standardised): a jitter relative to K's diagonal would grow with a large amplitude and
    # penalise exactly the fits whose trend carries a large variance (3-level Branin, NARGP: log evidence 20.5 with
    # it, against emukit's 23.0)
    big = float(K.diagonal().max().detach()) if n else 1.0
    C = K + (noise + JITTER + 1e-14 * n * big) * torch.eye(n, dtype=K.dtype, device=K.device)
    return torch.linalg.cholesky(C)


def exact_evidence(kernel, Z, y, noise):
    """Log marginal likelihood ``log N(y | 0, K(Z, Z) + τ² I)`` of a zero-mean exact GP (Rasmussen & Williams 2006,
    Eq. (2.30)), differentiable in the kernel's hyperparameters and ``noise``.

    :param kernel: a bound :class:`~pyro_dag.kernels.Kernel`. :param torch.Tensor Z: ``[n, D]`` inputs.
    :param torch.Tensor y: ``[n]``. :param noise: ``τ²`` (tensor or float). :returns: a scalar tensor.
    """
    L = _cholesky(kernel, Z, noise)
    alpha = torch.linalg.solve_triangular(L, y[:, None], upper=False)[:, 0]
    n = y.shape[0]
    return -0.5 * (alpha @ alpha) - L.diagonal().log().sum() - 0.5 * n * math.log(2 * math.pi)


@torch.no_grad()
def loo_log_density(kernel, Z, y, noise):
    """Mean leave-one-out log predictive density of the exact GP, in closed form (Rasmussen & Williams 2006,
    Eqs. (5.10)-(5.12)): ``μ_{-i} = y_i - [C⁻¹y]_i / [C⁻¹]_ii``, ``σ²_{-i} = 1 / [C⁻¹]_ii``, ``C = K + τ² I``.

    :returns: a float (larger is better).
    """
    with isolated():
        L = _cholesky(kernel, Z, noise)
    Cinv = torch.cholesky_inverse(L)
    d = Cinv.diagonal().clamp_min(1e-300)
    resid = (Cinv @ y) / d
    var = 1.0 / d
    return float((-0.5 * torch.log(2 * math.pi * var) - 0.5 * resid ** 2 / var).mean())


@torch.no_grad()
def loo_variance_scale(kernel, Z, y, noise, *, level=None):
    """The leave-one-out estimate of the kernel's amplitude, as a factor ``c`` of the fitted one:
    ``c = mean_i (y_i - μ_{-i})² / σ²_{-i}`` (Sundararajan & Keerthi 2001; Bachoc 2013, "Cross validation and maximum
    likelihood estimations of hyper-parameters of Gaussian processes with model misspecification", CSDA 66). Scaling
    the kernel and the noise by ``c`` leaves the posterior mean as it is and scales every posterior variance by
    ``c``, so that the leave-one-out residuals have unit variance; the maximum-likelihood amplitude of a
    deterministic simulator's fit is several times too large where the function is smoother than the kernel's
    draws (measured: 95 % intervals covering 100 % of test points). With ``level`` (e.g. 0.95) the factor is
    instead :func:`coverage_scale` of the leave-one-out residuals: the central ``level`` intervals cover that share
    of the left-out runs."""
    with isolated():
        L = _cholesky(kernel, Z, noise)
    Cinv = torch.cholesky_inverse(L)
    d = Cinv.diagonal().clamp_min(1e-300)
    resid = (Cinv @ y) / d
    if level is not None:
        return coverage_scale(resid, 1.0 / d, level)
    return float((resid ** 2 * d).mean())


def coverage_scale(resid, var, level=0.95):
    """The variance factor ``c`` that makes the central ``level`` Gaussian intervals ``μ ± z √(c σ²)`` cover the
    held-out runs as a conformal interval would: ``c = (q / z)²`` with ``z`` the standard normal ``(1 + level) / 2``
    quantile and ``q`` the ``⌈level (m + 1)⌉``-th smallest of the ``m`` studentised residuals ``|r_i| / σ_i`` (the
    largest where that exceeds ``m``): the locally weighted split-conformal quantile of Lei, G'Sell, Rinaldo,
    Tibshirani & Wasserman 2018 ("Distribution-free predictive inference for regression", JASA 113, Sec. 5.2) on
    cross-validation residuals (the CV+ of Barber, Candès, Ramdas & Tibshirani 2021, "Predictive inference with the
    jackknife+", Ann. Statist. 49). Unlike the mean of ``r² / σ²`` (the amplitude's estimate), which a few large
    residuals in a few runs' regions dominate or a handful of runs miss, it targets the coverage itself.

    :param torch.Tensor resid: ``[m]`` held-out residuals. :param torch.Tensor var: ``[m]`` their predictive
        variances. :param float level: in ``(0, 1)``. :returns: a float (``nan`` for ``m = 0``).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"coverage_scale: level must be in (0, 1), got {level}")
    m = resid.numel()
    if m == 0:
        return math.nan
    scores = (resid.abs() / var.clamp_min(1e-300).sqrt()).sort().values
    k = min(math.ceil(level * (m + 1)), m)
    z = math.sqrt(2.0) * float(torch.erfinv(torch.tensor(level, dtype=torch.float64)))
    return (float(scores[k - 1]) / z) ** 2


def cv_variance_scale(kernel, Z, y, noise, *, folds=5, seed=0, max_iter=100, level=None):
    """The amplitude factor ``c`` of :func:`loo_variance_scale` from ``folds``-fold cross-validation with the
    hyperparameters refitted on each fold's training runs (L-BFGS on the evidence, started at the fitted ones, the
    noise held): ``c = mean_i (y_i - μ_i)² / σ²_i`` over the held-out runs. Unlike the closed-form leave-one-out,
    which keeps the hyperparameters fitted with the left-out run, it sees how far the fit moves without a run, the
    part of the error that a few runs leave in the hyperparameters (Currin 200 / 25, the chosen fit: closed-form
    factor 0.61, refitted 6.8; with the fitted amplitude 95 % intervals covered 70 % of test points, 92 % with 6.8).
    With ``folds = n`` and ``max_iter = 0`` (no refit) it is :func:`loo_variance_scale`. With ``level`` the factor is
    :func:`coverage_scale` of the held-out residuals (the central ``level`` intervals cover that share of them)
    instead of their mean ``r² / σ²``.

    :param kernel: the fitted bound kernel (not modified). :param torch.Tensor Z: ``[n, D]``. :param y: ``[n]``.
    :param float noise: the noise variance (held). :param int folds: folds (runs dealt round-robin after a
        permutation drawn from ``seed``). :param int max_iter: L-BFGS iterations of each refit (0: none).
    :param float level: ``None`` (the mean) or the coverage of :func:`coverage_scale`.
    :returns: a float (``nan`` when no fold could be scored).
    """
    resid, var = cv_residuals(kernel, Z, y, noise, folds=folds, seed=seed, max_iter=max_iter)
    if level is not None:
        return coverage_scale(resid, var, level)
    return float((resid.pow(2) / var).mean()) if resid.numel() else math.nan


def cv_residuals(kernel, Z, y, noise, *, folds=5, seed=0, max_iter=100):
    """The held-out residuals ``y_i - μ_i`` and predictive variances ``σ²_i`` of :func:`cv_variance_scale`'s
    refitted cross-validation (the runs of folds whose factorisation failed are left out); ``([m], [m])``."""
    n = y.shape[0]
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    resid, variances = [], []
    for k in range(min(folds, n)):
        held = order[k::folds]
        keep = torch.ones(n, dtype=torch.bool)
        keep[held] = False
        Zk, yk = Z[keep], y[keep]
        refit = detached_copy(kernel)
        with isolated():
            with torch.no_grad():
                refit(Zk[:1])
            params = [p for p in refit.parameters() if p.requires_grad]
            if max_iter > 0:
                lbfgs(params, lambda: -exact_evidence(refit, Zk, yk, noise), max_iter, tolerance_change=TOLERANCE)
            with torch.no_grad():
                try:
                    L = _cholesky(refit, Zk, noise)
                except torch.linalg.LinAlgError:
                    continue
                Ks = refit(Z[held], Zk)
                mean = (Ks @ torch.cholesky_solve(yk[:, None], L))[:, 0]
                v = torch.linalg.solve_triangular(L, Ks.transpose(0, 1), upper=False)
                var = (refit(Z[held], diag=True) - v.pow(2).sum(0)).clamp_min(0) + noise
        resid.append(y[held] - mean)
        variances.append(var)
    if not resid:
        return y.new_zeros(0), y.new_zeros(0)
    return torch.cat(resid), torch.cat(variances)


@torch.no_grad()
def scale_kernel(kernel, name, c):
    """Multiply the kernel ``name`` (a key of :data:`AMPLITUDES`) by ``c`` in place (its amplitude hyperparameters)."""
    from torch.distributions import transform_to

    for path in AMPLITUDES[name]:
        *mods, leaf = path.split(".")
        m = kernel
        for part in mods:
            m = getattr(m, part)
        constraint = m._pyro_params[leaf][0]
        raw = getattr(m, leaf + "_unconstrained")
        value = transform_to(constraint)(raw)
        raw.copy_(transform_to(constraint).inv(value * c))


@dataclass
class CandidateFit:
    """One candidate's fit at one fidelity.

    :ivar str fidelity: the fidelity. :ivar str kernel: ``"rbf"`` (a fidelity refining nothing), ``"multifidelity"``
        or ``"nargp"``. :ivar float evidence: log marginal likelihood at the best start (standardised runs).
    :ivar float loo: mean leave-one-out log predictive density. :ivar float noise: noise variance (standardised).
    :ivar bool noise_fixed: held at the nugget. :ivar list start_evidence: the evidence reached from each start.
    :ivar float seconds: CPU seconds of the fits. :ivar kernel_module: the fitted kernel (bound).
    :ivar float variance_scale: the cross-validation factor applied to the chosen fit's variances
        (:func:`cv_variance_scale`; 1 where none was applied).
    :ivar float cv_mse: mean squared error of the refitted 5-fold cross-validation (:func:`cv_residuals`), the
        criterion at a fidelity with few runs (``nan`` where not computed).
    """

    fidelity: str
    kernel: str
    evidence: float
    loo: float
    noise: float
    noise_fixed: bool
    start_evidence: list = field(default_factory=list)
    seconds: float = 0.0
    kernel_module: object = field(default=None, repr=False)
    variance_scale: float = 1.0
    cv_mse: float = math.nan

    def as_dict(self):
        return {"fidelity": self.fidelity, "kernel": self.kernel, "evidence": self.evidence, "loo": self.loo,
                "noise": self.noise, "noise_fixed": self.noise_fixed, "start_evidence": list(self.start_evidence),
                "seconds": self.seconds, "variance_scale": self.variance_scale, "cv_mse": self.cv_mse}


@dataclass
class ModelSelection:
    """What ``MultiFidelityEmulator.fit(method="auto")`` chose, and every candidate's scores.

    :ivar dict chosen: ``{fidelity: kernel name}``. :ivar list candidates: :class:`CandidateFit` of every candidate
        at every fidelity. :ivar dict deterministic: ``{fidelity: bool}`` (the noise rule's decision).
    :ivar dict imputed: ``{fidelity: number of its runs where a fidelity it refines was not run}`` (those parents'
        values are the parents' posterior means there). :ivar dict criterion: ``{fidelity: "evidence" or "cv"}``, how
        the kernel was chosen (``"cv"``: the smallest refitted cross-validation error, at a fidelity with few runs).
    """

    chosen: dict = field(default_factory=dict)
    candidates: list = field(default_factory=list)
    deterministic: dict = field(default_factory=dict)
    imputed: dict = field(default_factory=dict)
    criterion: dict = field(default_factory=dict)

    def as_dict(self):
        return {"criterion": dict(self.criterion), "chosen": dict(self.chosen),
                "deterministic": dict(self.deterministic), "imputed": dict(self.imputed),
                "candidates": [c.as_dict() for c in self.candidates]}

    def table(self):
        """A plain-text table of the candidates (one line each; ``*`` marks the choice, made by the criterion
        column's score)."""
        lines = [f"{'fidelity':>10} {'kernel':>14} {'evidence':>11} {'LOO lpd':>9} {'CV MSE':>9} {'noise':>9}  fixed"
                 "  criterion"]
        for c in self.candidates:
            mark = "*" if self.chosen.get(c.fidelity) == c.kernel else " "
            lines.append(f"{c.fidelity:>10} {c.kernel:>13}{mark} {c.evidence:11.2f} {c.loo:9.3f} {c.cv_mse:9.2e} "
                         f"{c.noise:9.2e}  {str(c.noise_fixed):5}  {self.criterion.get(c.fidelity, 'evidence')}")
        return "\n".join(lines)


def _randomise(kernel, gen):
    with torch.no_grad():
        for p in kernel.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype))


def fit_exact_gp(make_kernel, Z, y, *, fidelity, name, noise=None, num_random_starts=1, seed=0,
                 nugget_fraction=NUGGET, starts=("data", "unit", "input"), max_iter=MAX_ITER, loo_nugget=False):
    """Fit one candidate exactly from several starts and keep the best by evidence.

    :param make_kernel: ``make_kernel(start) -> bound kernel`` for ``start`` in ``("data", "unit", "input")``; the random
        starts randomise the ``"unit"`` kernel's unconstrained hyperparameters (standard normal, as GPy's restarts).
    :param torch.Tensor Z: ``[n, D]`` float64 inputs. :param torch.Tensor y: ``[n]`` standardised runs.
    :param noise: ``None``: the noise rule (learned from the first start, then fixed at the nugget if at most
        :data:`DETERMINISTIC_FRACTION` of ``Var(y)``); a ``(variance, fixed)`` pair: that decision.
    :param bool loo_nugget: with the noise rule, also refit a learned-noise fidelity with the nugget and keep it if
        its leave-one-out density is higher (off by default: on 25 noisy runs of Currin it chose the nugget and
        gave 95 % intervals covering 73 %; on the 3-level Branin it changed nothing).
    :returns: ``(CandidateFit, (variance, fixed))`` with the decision used.
    """
    c0 = time.process_time()
    var_y = float(y.var()) if y.numel() > 1 else 1.0
    var_y = var_y if var_y > 0 else 1.0
    nugget = nugget_fraction * var_y
    gen = torch.Generator().manual_seed(int(seed))
    starts = list(starts) + ["random"] * int(num_random_starts)

    def run(kernel, value, fixed, learn):
        """L-BFGS from the kernel's current state; the noise held at ``value`` (fixed) or learned from it (its part
        above the nugget, in log space); returns ``(evidence, noise)``."""
        log_noise = torch.tensor(math.log(max(value - nugget, 1e-3 * nugget)), dtype=Z.dtype,
                                 requires_grad=learn and not fixed)
        tau2 = (lambda: torch.as_tensor(value, dtype=Z.dtype)) if fixed else (lambda: log_noise.exp() + nugget)
        with isolated():
            with torch.no_grad():
                kernel(Z[:1])     # registers the hyperparameters: the tensors to optimise are those after it
            params = [p for p in kernel.parameters() if p.requires_grad]
            params += [log_noise] if log_noise.requires_grad else []
            lbfgs(params, lambda: -exact_evidence(kernel, Z, y, tau2()), max_iter, tolerance_change=TOLERANCE)
            with torch.no_grad():
                try:
                    ev = float(exact_evidence(kernel, Z, y, tau2()))
                except torch.linalg.LinAlgError:
                    ev = -math.inf
        return (ev if math.isfinite(ev) else -math.inf), float(tau2().detach())

    learn = noise is None or not noise[1]
    value, fixed = (10 * nugget, False) if noise is None else noise
    best, start_evidence = None, []
    for start in starts:
        kernel = make_kernel("unit" if start == "random" else start)
        v0 = 1e-2 * var_y if (noise is None and start == "data") else value
        if start == "random":
            _randomise(kernel, gen)
            if noise is None:   # the noise's start too: the evidence may peak at a nugget and at a noise
                v0 = var_y * 10 ** float(-6 + 5 * torch.rand((), generator=gen, dtype=torch.float64))
        ev, tau2 = run(kernel, v0, fixed, learn)
        start_evidence.append(ev)
        if best is None or ev > best[0]:
            best = [ev, kernel, tau2]
    if noise is None:   # the noise rule, on the best start: a learned noise at the nugget's scale is a nugget
        fixed = best[2] <= DETERMINISTIC_FRACTION * var_y
        if fixed:
            best[0], best[2] = run(best[1], nugget, True, False)
        elif loo_nugget:
            # a small learned noise may be a smooth kernel's misfit of a deterministic simulator: keep the nugget
            # fit (interpolation) where it predicts the left-out runs better
            alt = detached_copy(best[1])
            ev_alt, _ = run(alt, nugget, True, False)
            if math.isfinite(ev_alt) and loo_log_density(alt, Z, y, nugget) > loo_log_density(best[1], Z, y, best[2]):
                best, fixed = [ev_alt, alt, nugget], True
        decision = (nugget, True) if fixed else (best[2], False)
    else:
        decision = noise
    ev, kernel, tau2_value = best
    loo = loo_log_density(kernel, Z, y, tau2_value) if math.isfinite(ev) else -math.inf
    fit = CandidateFit(fidelity=fidelity, kernel=name, evidence=ev, loo=loo, noise=tau2_value,
                       noise_fixed=bool(decision[1]), start_evidence=start_evidence,
                       seconds=time.process_time() - c0, kernel_module=kernel)
    return fit, decision

"""Deep GP regression that contains the exact GP, starts at it, and keeps depth only when the evidence says so.

``DeepRegression().fit(X, y)`` (``method="linear"``, the default) fits the deep GP ``x → h → y`` with the input
connection ``x → y`` and a **linear hidden layer** ``h = xA`` (the mean function Salimbeni & Deisenroth 2017 give
hidden layers, with the warp off) exactly, by type-II maximum likelihood, started from the exact GP and along its
posterior mean's active subspace (:class:`~pyro_dag.infer.linear_hidden.LinearHiddenGP`); it is kept only if its log
marginal likelihood beats the exact GP's by more than Schwarz's penalty for its extra hyperparameters
(``LinearHiddenGP.bic_gain > 0``). On the non-stationary tuning draws of
:func:`~pyro_dag.datasets.random_regression.random_regression` (seeds 0-9) it was 0.40-0.67× the exact GP's RMSE on
creases and steps in 2-3 D and was not kept on 1-D draws or on the smooth ones, where it overfits (1.06-1.21× when
forced).

``method="svi"`` fits the DAG deep GP ``x → h → y`` **with an input connection** ``x → y`` by SVI: ``y``'s
kernel is :class:`~pyro_dag.kernels.InputConnected`, ``k_int((h, x), (h', x')) + k_x(x, x')`` (Perlino et al.
2026, arXiv:2607.09645, Remark 2; the input connection of Duvenaud, Rippel, Adams & Ghahramani 2014, "Avoiding
pathologies in very deep networks", and the reason Salimbeni & Deisenroth 2017, "Doubly stochastic variational
inference for deep Gaussian processes", give hidden layers an identity mean). With ``k_int``'s variance at zero the
model *is* an exact GP of ``y`` on ``x``: the deep model nests the shallow one.

Why: on the plain chain ``x → h → y`` (``DAGDGP`` defaults, ``train``) the whole function must pass through a 1-D
``h`` whose GP has 64 inducing points and whose start (:func:`~pyro_dag.infer.training.start_hidden_nodes`) fits
pseudo-values with a noise of 1 % of their variance: right after that start the held-out RMSE on smooth 5-D and 6-D
draws (:mod:`pyro_dag.datasets.random_regression`, seeds 2 and 3) was 0.29 and 0.16 against the exact GP's 0.030
and 0.0008; after 3000 SVI steps it was 1.01-1.09× the exact GP on two noisy draws and 8.7× on the noise-free one.

The SVI fit, on inputs scaled to the unit cube and standardised outputs:

1. **Shallow**: :class:`~pyro_dag.baselines.ExactGP` (ARD RBF, type-II ML); its log marginal likelihood is the
   deep model's evidence lower bound at the nested point (``k_int = 0``, ``q(V_h)`` the prior, the inducing inputs
   of ``y`` at the training inputs, where Titsias' 2009 bound is exact).
2. **Deep**: the same model trained from the shallow fit by the recommended recipe
   (:func:`~pyro_dag.infer.train`), with ``INTERACTION_START`` of the signal variance moved to ``k_int`` and
   without ``train``'s hidden-node start (``start_hidden=False``: it re-fitted ``q(V_h)`` to pseudo-values and moved
   ``y``'s inducing inputs, which cost the crease below 59 nats of KL and 39 of expected log-likelihood that the
   steps did not win back); its ELBO is estimated with
   ``elbo_particles`` particles and its Monte Carlo standard error.
3. **Choice**: the deep fit is kept only if its ELBO beats the shallow one by more than twice that standard error;
   otherwise the model is written back to the nested point and predicts exactly as the exact GP does.

:attr:`DeepRegression.choice` says which was kept; :attr:`DeepRegression.evidence` the log marginal likelihoods
and the penalty (``method="linear"``), :attr:`DeepRegression.elbo` both bounds (``"svi"``).

Why the SVI fit is not the default: on the random draws its ELBO ended below the exact GP's evidence on all 48 runs
measured, so depth was never kept: on a 2-D crease (non-stationary tuning seed 4) at 25 against 115 nats after 500
steps (``train``'s start of ``h`` from the pilot and the steps lose what the nested start had), on a 2-D step (seed
1) at −0.02 nats from it (the interaction kernel stays switched off: its variance starts at ``1e-10`` of the signal,
where the gradient in its log is nil; it now starts at ``INTERACTION_START``). The bound's slack (the KL of ``q(V_h)``) must be paid before any gain shows,
where the linear layer's exact evidence has none.
"""
import math

import networkx as nx
import pyro
import torch

from ..baselines import ExactGP
from ..dgp import DAGDGP
from ..errors import NotFittedError
from ..gp.likelihoods import Gaussian
from ..kernels import RBF, InputConnected
from .autoguide import AutoStructuredGuide
from .autoguide.families import MeanFieldFamily
from .elbo import DAGELBO
from .linear_hidden import LinearHiddenGP
from .training import train
from .training.collapsed import write_posterior
from .training.validation import structured_part

__all__ = ["DeepRegression"]

#: How the deep model is fitted: ``"linear"`` (a linear hidden layer, fitted exactly and chosen by Schwarz's
#: criterion: the default), ``"svi"`` (the DAG-DGP's sparse variational fit, chosen by ELBO) or ``"lamp"`` (latent
#: MAP, Chang & Sung 2026, chosen by LaMP's own held-out validation score).
METHODS = ("linear", "svi", "lamp")

#: The interaction kernel's variance at the nested point (a fraction of the signal variance: zero in effect).
NESTED_VARIANCE = 1e-10
#: The share of the signal variance the interaction kernel starts the SVI steps with.
INTERACTION_START = 0.3


class DeepRegression:
    """Deep GP regression ``x → h → y`` with ``x → y`` (module docstring), nesting the exact GP.

    :param str method: ``"linear"`` (default), ``"svi"`` or ``"lamp"`` (module docstring).
    :param int hidden_dims: the width of ``h`` (default 1; ``"inputs"``: as wide as ``x``, LaMP's default).
    :param int num_steps: SVI steps of the deep fit (default 500; 0 skips it: the exact GP); ``method="svi"`` only
        (``num_steps``, ``max_inducing`` and ``elbo_particles`` with another method are refused, as is ``lamp_options``
        without ``method="lamp"``: they would be ignored).
    :param int max_inducing: inducing points per node, at most (default 256; ``min(n, max_inducing)`` are used, so
        the nested point is the exact GP when ``n <= max_inducing``).
    :param int elbo_particles: particles of the deep ELBO's estimate (default 256, in batches of 32).
    :param int restarts: L-BFGS starts of the exact GP (default 3).
    :param int seed: the random stream of the fit.

    Example::

        reg = DeepRegression(seed=0).fit(X, y)      # X [n, D], y [n]
        mean, var = reg.predict(X_test)             # [m], [m] (latent; include_noise=True for a new observation)
        reg.choice, reg.evidence                    # "deep" or "shallow", {"shallow": ..., "deep": ..., ...}
    """

    def __init__(self, *, method="linear", hidden_dims=None, num_steps=None, max_inducing=None, elbo_particles=None,
                 restarts=3, seed=0, lamp_options=None):
        if method not in METHODS:
            raise ValueError(f"DeepRegression: method must be one of {METHODS}, got {method!r}")
        # an option of another method would be ignored without a word: refuse it
        svi_only = [k for k, v in (("num_steps", num_steps), ("max_inducing", max_inducing),
                                   ("elbo_particles", elbo_particles)) if v is not None]
        if method != "svi" and svi_only:
            raise ValueError(f"DeepRegression: {svi_only[0]} applies to method='svi' only, not method={method!r}; "
                             "drop it (or pass method='svi')")
        if method != "lamp" and lamp_options is not None:
            raise ValueError(f"DeepRegression: lamp_options applies to method='lamp' only, not method={method!r}; "
                             "drop it (or pass method='lamp')")
        if lamp_options is not None and not isinstance(lamp_options, dict):
            raise ValueError(f"DeepRegression: lamp_options must be a dict of LatentMAP.fit options, got "
                             f"{lamp_options!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"DeepRegression: seed must be an int, got {seed!r}")
        num_steps = 500 if num_steps is None else num_steps
        max_inducing = 256 if max_inducing is None else max_inducing
        elbo_particles = 256 if elbo_particles is None else elbo_particles
        self.method, self.lamp_options = method, dict(lamp_options or {})
        hidden_dims = ("inputs" if method == "lamp" else 1) if hidden_dims is None else hidden_dims
        self._hidden_inputs = hidden_dims == "inputs"
        hidden_dims = 1 if self._hidden_inputs else hidden_dims
        for name, value, low in (("hidden_dims", hidden_dims, 1), ("num_steps", num_steps, 0),
                                 ("max_inducing", max_inducing, 1), ("elbo_particles", elbo_particles, 1),
                                 ("restarts", restarts, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"DeepRegression: {name} must be an int >= {low}, got {value!r}")
        self.hidden_dims, self.num_steps, self.max_inducing = hidden_dims, num_steps, max_inducing
        self.elbo_particles, self.restarts, self.seed = elbo_particles, restarts, int(seed)
        self.choice, self.elbo, self.elbo_se, self.train_result, self.validation = None, {}, None, None, {}
        self.evidence = {}

    # ------------------------------------------------------------------------------------------- scaling
    def _scale_x(self, X):
        return (X - self._lo) / self._span

    def _prepare(self, X, y):
        X = torch.as_tensor(X, dtype=torch.float64)
        y = torch.as_tensor(y, dtype=torch.float64)
        X = X.unsqueeze(-1) if X.dim() == 1 else X
        y = y.reshape(-1) if y.dim() == 2 and y.shape[-1] == 1 else y
        if X.dim() != 2 or y.dim() != 1 or X.shape[0] != y.shape[0]:
            raise ValueError(f"DeepRegression.fit: X must be [n, D] and y [n] (or [n, 1]) with the same n; got X "
                             f"{tuple(X.shape)} and y {tuple(y.shape)}")
        bad = ~(torch.isfinite(X).all(-1) & torch.isfinite(y))
        if bool(bad.any()):
            raise ValueError(f"DeepRegression.fit: {int(bad.sum())} rows hold NaN or inf (first at row "
                             f"{int(bad.nonzero()[0, 0])}); drop or impute them first")
        if X.shape[0] < 5:
            raise ValueError(f"DeepRegression.fit: needs at least 5 cases, got {X.shape[0]}")
        self._lo = X.min(0).values
        span = X.max(0).values - self._lo
        self._span = torch.where(span > 0, span, torch.ones_like(span))
        self._y_loc, sd = y.mean(), y.std()
        self._y_scale = sd if float(sd) > 0 else torch.ones_like(sd)
        return self._scale_x(X), (y - self._y_loc) / self._y_scale

    # ------------------------------------------------------------------------------------------- fitting
    def fit(self, X, y):
        """Fit to ``X [n, D]``, ``y [n]`` (module docstring). :returns: ``self``."""
        Xs, ys = self._prepare(X, y)
        # the scaling is the new data's from here on: until this fit ends, an earlier fit's choice must not predict
        self.choice = None
        n, D = Xs.shape
        self.exact = ExactGP(restarts=self.restarts, seed=self.seed).fit(Xs, ys)
        self.elbo = {"shallow": float(self.exact.log_marginal_likelihood)}
        self._inputs, self._data = {"x": Xs}, {"y": ys.unsqueeze(-1)}
        pyro.set_rng_seed(self.seed)
        self.width = D if self._hidden_inputs else self.hidden_dims
        if self.method == "lamp":
            return self._fit_lamp(Xs, ys)
        if self.method == "linear":
            return self._fit_linear(Xs, ys)
        M = min(n, self.max_inducing)
        graph = nx.DiGraph([("x", "h"), ("h", "y"), ("x", "y")])
        kernel = InputConnected(interaction=RBF(ard=True), root=RBF(ard=True))
        self.model = DAGDGP(graph, kernels={"y": kernel}, likelihoods={"y": Gaussian(variance=0.01)},
                            output_dims={"h": self.width}, num_inducing=M, seed=self.seed,
                            name=f"deep_regression_{id(self)}").double()
        self.guide = AutoStructuredGuide(self.model)
        self.model.setup(self._inputs, self._data)
        self.guide(self._inputs, self._data)
        self._write_nested()
        self.choice = "shallow"
        if self.num_steps:
            self._switch_on_interaction()
            self.train_result = train(self.model, self.guide, self._inputs, self._data, num_steps=self.num_steps,
                                      start_hidden=False, progress=False)
            self.elbo["deep"], self.elbo_se = self._estimate_elbo()
            if self.elbo["deep"] > self.elbo["shallow"] + 2 * self.elbo_se:
                self.choice = "deep"
            else:
                self._write_nested()
        return self

    def _fit_linear(self, Xs, ys):
        """The linear hidden layer (:class:`~pyro_dag.infer.linear_hidden.LinearHiddenGP`), kept when its log
        marginal likelihood beats the exact GP's by more than Schwarz's penalty."""
        self.linear = LinearHiddenGP(width=self.width).fit(Xs, ys, self.exact)
        self.evidence = {"shallow": self.elbo["shallow"], "deep": self.linear.log_marginal_likelihood,
                         "penalty": self.linear.log_marginal_likelihood - self.elbo["shallow"]
                         - self.linear.bic_gain, "bic_gain": self.linear.bic_gain}
        self.choice = "deep" if self.linear.bic_gain > 0 else "shallow"
        return self

    def _fit_lamp(self, Xs, ys):
        """LaMP's chain ``x → w → y`` (``w`` as wide as ``x`` by default, started at the scaled inputs, the paper's
        ``D = d`` two-layer DGP), kept only if its validation RMSE (on the cases LaMP holds out) beats the exact GP
        fitted on LaMP's training cases alone."""
        from .lamp import LatentMAP

        width = self.width
        graph = nx.DiGraph([("x", "w"), ("w", "y")])
        self.model = DAGDGP(graph, output_dims={"w": width}, seed=self.seed).double()
        self.lamp = LatentMAP(self.model)
        self.train_result = self.lamp.fit(self._inputs, self._data, seed=self.seed, **self.lamp_options)
        self.choice = "shallow"
        score = self.train_result.best_validation
        if score is None:
            return self
        rows = self.lamp.train_rows
        held = torch.ones(Xs.shape[0], dtype=torch.bool)
        held[rows] = False
        pilot = ExactGP(restarts=self.restarts, seed=self.seed).fit(Xs[rows], ys[rows])
        shallow = float((pilot.predict(Xs[held])[0] - ys[held]).pow(2).mean().sqrt())
        self.validation = {"shallow": shallow, "deep": float(score)}
        if float(score) < shallow:
            self.choice = "deep"
        return self

    def _switch_on_interaction(self):
        """Move :data:`INTERACTION_START` of the exact GP's signal variance from ``k_x`` to ``k_int`` before the
        steps: at the nested point (``k_int``'s variance ``1e-10`` of the signal) the ELBO's gradient in its log
        variance is nil, and on a 2-D crease and a 2-D step (non-stationary tuning seeds 4 and 1) it was still
        ``1e-9`` after 500 steps, so ``h`` never entered ``y``'s kernel."""
        kernel, signal = self.model.kernels["y"], self.exact.signal_variance
        with torch.no_grad():
            kernel.root.variance = torch.tensor((1 - INTERACTION_START) * signal, dtype=torch.float64)
            kernel.interaction.variance = torch.tensor(INTERACTION_START * signal, dtype=torch.float64)

    def _write_nested(self):
        """Write the exact GP into the deep model: ``k_x`` and the noise from the exact GP, ``k_int`` at zero,
        ``y``'s inducing inputs at the training inputs (when ``n`` allows), its optimal ``q(V_y)`` and ``q(V_h)`` the
        prior; the deep model's ELBO there is the exact GP's log marginal likelihood."""
        gp, model = self.exact, self.model
        kernel = model.kernels["y"]
        with torch.no_grad():
            kernel.root.lengthscale = gp.lengthscales.detach().clone()
            kernel.root.variance = torch.tensor(gp.signal_variance, dtype=torch.float64)
            kernel.interaction.variance = torch.tensor(NESTED_VARIANCE * gp.signal_variance, dtype=torch.float64)
            model.likelihoods["y"].variance = torch.tensor(gp.noise_variance, dtype=torch.float64)
        Xs, ys = self._inputs["x"], self._data["y"][:, 0]
        hidden = torch.zeros(Xs.shape[0], self.width, dtype=torch.float64)
        parents = {"x": Xs, "h": hidden}
        Z = dict(model.inducing.named_parameters()).get("y_unconstrained")
        if Z is not None and Z.shape[-2] == Xs.shape[0]:
            with torch.no_grad():
                Z.copy_(torch.cat([parents[p] for p in model.parents["y"]], -1).to(Z))
        target = structured_part(self.guide)
        family = target.family
        size = getattr(family.locs, "h").shape[-1]   # q(V_h) = the prior N(0, I): no KL at the nested point
        eye = torch.eye(size, dtype=torch.float64)
        family.set_node("h", torch.zeros(size, dtype=torch.float64), eye)
        write_posterior(target, model, "y", parents, ys)
        if not isinstance(family, MeanFieldFamily):
            family.zero_offdiagonal()

    @torch.no_grad()
    def _estimate_elbo(self):
        """The deep model's ELBO (standardised units) and its Monte Carlo standard error."""
        batch = min(32, self.elbo_particles)
        runs = max(2, math.ceil(self.elbo_particles / batch))
        elbo = DAGELBO(num_particles=batch)
        values = torch.tensor([-elbo.loss(self.model, self.guide, self._inputs, self._data) for _ in range(runs)],
                              dtype=torch.float64)
        # the ELBO is in the standardised units of y: the exact GP's log marginal likelihood is converted to match
        return float(values.mean()), float(values.std() / math.sqrt(runs))

    # ------------------------------------------------------------------------------------------- prediction
    def predict(self, X, include_noise=False, num_samples=200):
        """Predictive mean and variance at ``X [m, D]``: of the latent function, or of a new observation with
        ``include_noise``. :returns: ``(mean [m], var [m])`` in ``y``'s units (float64)."""
        if self.choice is None:
            raise NotFittedError("DeepRegression.predict: not fitted (or the last fit did not finish: interrupted, or "
                                 "stopped by an error); call fit(X, y) first")
        X = torch.as_tensor(X, dtype=torch.float64)
        X = X.unsqueeze(-1) if X.dim() == 1 else X
        D = self._lo.shape[0]
        if X.dim() != 2 or X.shape[1] != D:   # [m, 1] against a 2-D fit would broadcast without a word
            raise ValueError(f"DeepRegression.predict: X must be [m, {D}] (the columns of the X given to fit), got "
                             f"shape {tuple(X.shape)}")
        bad = ~torch.isfinite(X).all(-1)
        if bool(bad.any()):
            raise ValueError(f"DeepRegression.predict: {int(bad.sum())} rows of X hold NaN or inf (first at row "
                             f"{int(bad.nonzero()[0, 0])}); drop or impute them first")
        Xs = self._scale_x(X)
        if self.choice == "shallow":
            mean, var = self.exact.predict(Xs, include_noise=include_noise)
        elif self.method == "linear":
            mean, var = self.linear.predict(Xs, include_noise=include_noise)
        elif self.method == "lamp":
            pred = self.lamp.predict({"x": Xs})["y"]
            mean, var = pred.mean[:, 0].double(), pred.variance[:, 0].double()
            if include_noise:
                var = pred.y_variance[:, 0].double()
        else:
            pred = self.model.predict(self.guide, {"x": Xs}, nodes=["y"], num_samples=num_samples)["y"]
            mean, var = pred.mean[:, 0].double(), pred.variance[:, 0].double()
            if include_noise:
                var = var + self.model.likelihoods["y"].variance.detach().double()
        return self._y_loc + self._y_scale * mean, self._y_scale ** 2 * var

    @property
    def noise_variance(self):
        """The fitted noise variance in ``y``'s units."""
        if self.choice == "shallow":
            return float(self.exact.noise_variance) * float(self._y_scale) ** 2
        if self.method == "linear":
            return self.linear.noise_variance * float(self._y_scale) ** 2
        if self.method == "lamp":
            pred = self.lamp.predict({"x": self._inputs["x"][:1]})["y"]
            return float(pred.y_variance[0, 0] - pred.variance[0, 0]) * float(self._y_scale) ** 2
        return float(self.model.likelihoods["y"].variance.detach()) * float(self._y_scale) ** 2

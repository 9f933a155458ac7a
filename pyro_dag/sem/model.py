"""LatentSEM: a Gaussian-process structural equation model with latent variables (GPSEM-LV) as a Pyro model.

Silva & Gramacy (2010), "Gaussian Process Structural Equation Models with Latent Variables", UAI,
arXiv:1002.4802: a DAG over latent variables ``X`` whose structural equations are sparse GPs, and observed
indicators that are linear-Gaussian children of the latents (the measurement model).
"""
import math

import networkx as nx
import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro.infer.autoguide.initialization import init_to_median
from pyro.nn import PyroModule, PyroSample

from ..gp.conditional import cholesky_with_jitter, whitened_conditional
from ..kernels import RBF
from ..kernels.fusion import Concat
from .data import IndicatorScaler, check_subsample, indicator_array
from .identifiability import SEMSpecError, check_sem_declaration
from .pseudo_inputs import SpaceFillingPrior, gaussian_pseudo_input_prior
from ..utils import renamed_argument

__all__ = ["LatentSEM", "SEMPriors"]

EQUATIONS = ("gp", "linear", "quadratic")
EXOGENOUS = ("gaussian", "mixture")


class SEMPriors:
    """Hyper-priors of :class:`LatentSEM`, on the scale of standardised indicators.

    Silva & Gramacy (2010, Sec. 2-3) give the families (normal coefficients, inverse-gamma variances, normal
    mixture means, inverse-gamma mixture variances, Dirichlet weights) but not their values; these defaults are
    ours, chosen for unit-scale data.

    :param float coef_scale: s.d. of free loadings, intercepts and linear / quadratic structural coefficients.
    :param tuple noise: ``(a, b)`` of the inverse-gamma prior of indicator error variances ``υ_ε``.
    :param tuple zeta: ``(a, b)`` of the inverse-gamma prior of structural noise variances ``υ_ζ``.
    :param tuple exogenous: ``(a, b)`` of the inverse-gamma prior of exogenous (component) variances.
    :param float mean_scale: s.d. of exogenous (component) means.
    :param float dirichlet: concentration ``α`` of the mixture weights.
    :param tuple gp_variance: ``(loc, scale)`` of the log-normal prior of the GP amplitude ``σ²``.
    :param tuple gp_lengthscale: ``(loc, scale)`` of the log-normal prior of each GP length-scale.
    :param float pseudo_input_scale: s.d. of the Gaussian pseudo-input prior.
    """

    def __init__(self, coef_scale=2.0, noise=(2.0, 0.2), zeta=(2.0, 0.2), exogenous=(2.0, 1.0), mean_scale=1.0,
                 dirichlet=1.0, gp_variance=(0.0, 1.0), gp_lengthscale=(0.0, 1.0), pseudo_input_scale=1.0):
        self.coef_scale, self.noise, self.zeta, self.exogenous = coef_scale, noise, zeta, exogenous
        self.mean_scale, self.dirichlet = mean_scale, dirichlet
        self.gp_variance, self.gp_lengthscale, self.pseudo_input_scale = gp_variance, gp_lengthscale, \
            pseudo_input_scale


def _per_latent(value, latents, allowed, what):
    if isinstance(value, dict):
        unknown = set(value) - set(latents)
        if unknown:
            raise SEMSpecError(f"{what} names {sorted(unknown)}, which are not latents (latents: {latents})")
        out = {x: value.get(x) for x in latents}
    else:
        out = {x: value for x in latents}
    for x, v in out.items():
        if v is not None and v not in allowed:
            raise SEMSpecError(f"{what}[{x!r}] must be one of {allowed}, got {v!r}")
    return out


def quadratic_features(x):
    """``[..., D] -> [..., D + D(D+1)/2]``: the parents, their squares and pairwise products (the quadratic SEM of
    Silva & Gramacy 2010, Sec. 5, after Bollen & Paxton 1998)."""
    D = x.shape[-1]
    i, j = torch.triu_indices(D, D)
    return torch.cat([x, x[..., i] * x[..., j]], -1)


class LatentSEM(PyroModule):
    r"""GPSEM-LV: a latent-variable structural equation model with GP structural equations (Silva & Gramacy 2010,
    "Gaussian Process Structural Equation Models with Latent Variables", UAI, arXiv:1002.4802, Secs. 2-3).

    * Structural equations, for a latent ``X_i`` with latent parents ``P_i``: ``X_i = f_i(X_{P_i}) + ζ_i``,
      ``ζ_i ~ N(0, υ_{ζ_i})`` (Eq. (1)). ``f_i`` is a sparse GP in the pseudo-inputs form of Eq. (3): ``M``
      pseudo-inputs ``x̄_i`` (random, with the paper's empirical Gaussian or space-filling prior, see
      :mod:`pyro_dag.sem.pseudo_inputs`) and pseudo-functions ``f̄_i = L_i u_i``, ``u_i ~ N(0, I)``,
      ``K(x̄_i, x̄_i) = L_i L_iᵀ`` (whitened, as in :class:`~pyro_dag.DAGDGP`); given them the cases are independent,
      ``f_i^{(d)} ~ N(k_dᵀ K⁻¹ f̄_i, k_dd - k_dᵀ K⁻¹ k_d)``, and ``f_i^{(d)}`` is integrated out:
      ``X_i^{(d)} ~ N(a_dᵀ u_i, r_d + υ_{ζ_i})`` (:func:`pyro_dag.gp.whitened_conditional`). With
      ``equations="linear"`` / ``"quadratic"`` ``f_i`` is linear / quadratic (the paper's baseline SEMs).
    * Exogenous latents (no latent parent): Gaussian ``N(μ_i, v_i)``, or a mixture of ``K`` Gaussians
      (:class:`~pyro.distributions.MixtureSameFamily`, Dirichlet weights; Sec. 2).
    * Measurement model: ``Y_j = λ_{j0} + Λ_jᵀ X_{P_j} + ε_j``, ``ε_j ~ N(0, υ_{ε_j})`` (Student-t for the indicators
      in ``non_gaussian``); per latent one anchor indicator with loading 1 and intercept 0 (constants, not sample
      sites; Sec. 2.1). The declaration is checked at build time (:mod:`pyro_dag.sem.identifiability`).

    The data are a DataFrame of indicator columns (NaN = missing, its factor dropped), centred and by default
    standardised with the statistics of the first data set seen (:meth:`setup`); latent values are on the
    standardised scale of their anchors inside the model, and :meth:`to_anchor_units` maps them back.

    Sample sites (globals outside any plate, per-case latents in the ``"data"`` plate, which supports
    ``subsample_size``):

    * ``"{X}.loc"``, ``"{X}.var"`` (Gaussian exogenous); ``"{X}.weights"`` ``[K]``, ``"{X}.locs"`` ``[K]``,
      ``"{X}.vars"`` ``[K]`` (mixture exogenous);
    * ``"kernels.{X}.variance"``, ``"kernels.{X}.lengthscale"`` ``[|P_i|]`` (default RBF kernel, log-normal
      priors), ``"{X}.xbar"`` ``[M, |P_i|]``, ``"{X}.u"`` ``[M]``, ``"{X}.zeta_var"`` (GP equations);
      ``"{X}.coef"``, ``"{X}.bias"``, ``"{X}.zeta_var"`` (linear / quadratic equations);
    * ``"indicators.intercept"`` ``[#free intercepts]``, ``"indicators.loading"`` ``[#free loadings]``,
      ``"indicators.noise"`` ``[J]`` (error variances ``υ_ε``);
    * ``"{X}.x"`` ``[B]`` per latent, ``"indicators.y"`` ``[B, J_gauss]`` and ``"indicators.y_t"``
      ``[B, J_t]`` (observed).

    It works with ``SVI`` (e.g. :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`, which puts its chordal
    Gaussian over the globals and the per-case latents) and with ``MCMC(NUTS(model))``. Start both from
    :meth:`init_loc_fn` (latents at their anchors' values, pseudo-inputs spread over the prior).

    :param networkx.DiGraph graph: DAG over the latents (``structure=``, its old name, still works with a
        ``FutureWarning``).
    :param dict indicators: ``{latent: [indicator columns]}``.
    :param dict anchors: ``{latent: indicator}``; default the first indicator of each latent.
    :param equations: ``"gp"`` (default), ``"linear"`` or ``"quadratic"``, or ``{latent: ...}``.
    :param exogenous: ``"gaussian"`` (default) or ``"mixture"``, or ``{latent: ...}``.
    :param int num_components: ``K`` of the mixtures (default 3).
    :param int num_inducing: ``M`` pseudo-inputs per GP (default 50, as in the paper's experiments).
    :param dict kernels: ``{latent: kernel}`` from :mod:`pyro_dag.kernels` acting on the concatenated parents
        (default an ARD :class:`~pyro_dag.kernels.RBF` with log-normal priors on its hyperparameters).
    :param str pseudo_input_prior: ``"gaussian"`` (default) or ``"space_filling"`` (:mod:`.pseudo_inputs`).
    :param non_gaussian: indicators with Student-t errors (``student_df`` degrees of freedom).
    :param str measurement: ``"sparse"`` or ``"dense"`` (every indicator on every latent; unidentified).
    :param bool check_identifiability: see :func:`~pyro_dag.sem.check_sem_declaration`; ``False`` is the opt-out.
    :param bool standardize: divide indicators by their standard deviations (always centred).
    :param SEMPriors priors: hyper-priors. :param float jitter: relative jitter of ``K(x̄, x̄)``.

    Example::

        g = nx.DiGraph([("Size", "Weight")])
        model = LatentSEM(g, indicators={"Size": ["length", "diameter", "height"],
                                          "Weight": ["whole", "shucked", "viscera", "shell"]},
                          anchors={"Size": "length", "Weight": "whole"}, num_inducing=20)
        guide = AutoStructuredGuide(model, init_loc_fn=model.init_loc_fn)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
        svi.step(df)                                     # df: DataFrame with the seven columns
    """

    @property
    def structure(self):
        """The old name of :attr:`graph`, the latent DAG."""
        return self.graph

    def __init__(self, graph=None, indicators=None, anchors=None, *, equations="gp", exogenous="gaussian",
                 num_components=3, num_inducing=50, kernels=None, pseudo_input_prior="gaussian", non_gaussian=(),
                 measurement="sparse", check_identifiability=True, standardize=True, student_df=4.0, priors=None,
                 jitter=1e-6, dtype=torch.float64, structure=None):
        super().__init__()
        graph = renamed_argument("LatentSEM", "structure", "graph", structure, graph, None)
        if graph is None or indicators is None:
            raise TypeError("LatentSEM needs the latent DAG and the indicators: LatentSEM(graph, indicators, ...)")
        self.spec = check_sem_declaration(graph, indicators, anchors, non_gaussian, measurement,
                                          check_identifiability)
        spec = self.spec
        self.latents, self.parents, self.indicators = spec.latents, spec.parents, spec.indicators
        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(self.latents)
        self.graph.add_edges_from((p, x) for x in self.latents for p in self.parents[x])
        self.exogenous = [x for x in self.latents if not self.parents[x]]
        self.endogenous = [x for x in self.latents if self.parents[x]]
        eq = _per_latent(equations, self.endogenous, EQUATIONS, "equations")
        self.equations = {x: eq[x] or "gp" for x in self.endogenous}
        ex = _per_latent(exogenous, self.exogenous, EXOGENOUS, "exogenous")
        self.exogenous_kind = {x: ex[x] or "gaussian" for x in self.exogenous}
        if int(num_components) < 1:
            raise SEMSpecError(f"num_components must be a positive integer, got {num_components!r}")
        self.num_components = int(num_components)
        if isinstance(num_inducing, bool) or int(num_inducing) < 1:
            raise SEMSpecError(f"num_inducing must be a positive integer (M pseudo-inputs per GP), got "
                               f"{num_inducing!r}")
        self.num_inducing = int(num_inducing)
        if pseudo_input_prior not in ("gaussian", "space_filling"):
            raise SEMSpecError(f"pseudo_input_prior must be 'gaussian' or 'space_filling', got {pseudo_input_prior!r}")
        self.pseudo_input_prior = pseudo_input_prior
        self.student_df = float(student_df)
        self.standardize = bool(standardize)
        self.priors = priors or SEMPriors()
        self.jitter = float(jitter)
        self.dtype = dtype
        kernels = dict(kernels or {})
        unknown = set(kernels) - {x for x in self.endogenous if self.equations[x] == "gp"}
        if unknown:
            raise SEMSpecError(f"kernels names {sorted(unknown)}, which are not latents with GP equations "
                               f"({[x for x in self.endogenous if self.equations[x] == 'gp']})")
        p = self.priors
        mods = {}
        for x in self.endogenous:
            if self.equations[x] != "gp":
                continue
            D = len(self.parents[x])
            if x in kernels:
                k = kernels[x]
            else:
                k = RBF(ard=True)
                k.variance = PyroSample(dist.LogNormal(torch.tensor(p.gp_variance[0], dtype=dtype),
                                                       torch.tensor(p.gp_variance[1], dtype=dtype)))
                k.lengthscale = PyroSample(dist.LogNormal(torch.full((D,), p.gp_lengthscale[0], dtype=dtype),
                                                          torch.tensor(p.gp_lengthscale[1], dtype=dtype)).to_event(1))
            mods[x] = k.bind(D) if hasattr(k, "bind") else k
        self.kernels = PyroModule[torch.nn.ModuleDict](mods)
        # measurement layout
        V, J = len(self.latents), len(self.indicators)
        col = {x: i for i, x in enumerate(self.latents)}
        anchor_of = {a: x for x, a in spec.anchors.items()}
        fixed_load = torch.zeros(J, V, dtype=dtype)
        free_rows, free_cols = [], []
        for j, y in enumerate(self.indicators):
            for x in spec.indicator_parents[y]:
                if anchor_of.get(y) == x:
                    fixed_load[j, col[x]] = 1.0
                else:
                    free_rows.append(j)
                    free_cols.append(col[x])
        self._fixed_load = fixed_load
        self._free_rows = torch.tensor(free_rows, dtype=torch.long)
        self._free_cols = torch.tensor(free_cols, dtype=torch.long)
        self._free_intercepts = torch.tensor([j for j, y in enumerate(self.indicators) if y not in anchor_of],
                                             dtype=torch.long)
        self._gauss_cols = [j for j, y in enumerate(self.indicators) if y not in spec.non_gaussian]
        self._t_cols = [j for j, y in enumerate(self.indicators) if y in spec.non_gaussian]
        self.scaler = None
        self._train = None

    # ------------------------------------------------------------------------------------------------ data
    def setup(self, data):
        """Fit the indicator centring / scaling on ``data`` (done by the first call; later data reuse it)."""
        arr = indicator_array(data, self.indicators)
        self.scaler = IndicatorScaler.fit(arr, self.standardize, self.indicators)
        z = (arr - self.scaler.mean) / self.scaler.scale
        self.bound = 3.0 * float(np.nanmax(np.nanstd(z, axis=0)))  # L of the space-filling prior
        return self

    def prepare(self, data):
        """``(y [n, J], mask [n, J])`` on the model's scale (fits :meth:`setup` at the first call)."""
        if self.scaler is None:
            self.setup(data)
        arr = indicator_array(data, self.indicators)
        return self.scaler.transform(arr, self.dtype)

    def to_anchor_units(self, latent, values):
        """Map latent values from the model's (standardised) scale to the units of the latent's anchor
        indicator: ``X = mean_a + s_a X_std`` (so ``Y_a = X + ε``). Latents without an anchor are returned as is."""
        a = self.spec.anchors.get(latent)
        if a is None or self.scaler is None:
            return values
        j = self.indicators.index(a)
        return self.scaler.mean[j] + self.scaler.scale[j] * values

    # ------------------------------------------------------------------------------------------------ pieces
    def _t(self, value):
        return torch.as_tensor(value, dtype=self.dtype)

    @staticmethod
    def _global(name, fn):
        """``pyro.sample`` of a global site; leading size-1 dimensions that ``Predictive`` adds for the ``"data"``
        plate are dropped, so the value has the site's own shape."""
        v = pyro.sample(name, fn)
        own = len(fn.batch_shape) + len(fn.event_shape)
        while v.dim() > own and v.shape[0] == 1:
            v = v[0]
        return v

    def sample_globals(self):
        """Sample every global site; returns ``{name: value}`` plus ``{X: (kind, ...)}`` structural pieces."""
        p = self.priors
        g = {}
        K = self.num_components
        for x in self.latents:
            if x in self.exogenous_kind:
                if self.exogenous_kind[x] == "gaussian":
                    g[x] = ("gaussian", self._global(f"{x}.loc", dist.Normal(self._t(0.0), self._t(p.mean_scale))),
                            self._global(f"{x}.var", dist.InverseGamma(self._t(p.exogenous[0]),
                                                                      self._t(p.exogenous[1]))))
                else:
                    w = self._global(f"{x}.weights", dist.Dirichlet(torch.full((K,), p.dirichlet, dtype=self.dtype)))
                    locs = self._global(f"{x}.locs", dist.Normal(torch.zeros(K, dtype=self.dtype),
                                                                self._t(p.mean_scale)).to_event(1))
                    conc = torch.full((K,), p.exogenous[0], dtype=self.dtype)
                    var = self._global(f"{x}.vars", dist.InverseGamma(conc, self._t(p.exogenous[1])).to_event(1))
                    g[x] = ("mixture", w, locs, var)
                continue
            kind = self.equations[x]
            D = len(self.parents[x])
            if kind == "gp":
                M = self.num_inducing
                if self.pseudo_input_prior == "space_filling":
                    prior = SpaceFillingPrior(M, D, self.bound, dtype=self.dtype)
                else:
                    prior = gaussian_pseudo_input_prior(M, D, p.pseudo_input_scale, dtype=self.dtype)
                Z = self._global(f"{x}.xbar", prior)
                u = self._global(f"{x}.u", dist.Normal(torch.zeros(M, dtype=self.dtype), 1.0).to_event(1))
                kernel = self.kernels[x]
                L = cholesky_with_jitter(kernel(Z), node=x, jitter=self.jitter)
                zeta = self._global(f"{x}.zeta_var", dist.InverseGamma(self._t(p.zeta[0]), self._t(p.zeta[1])))
                g[x] = ("gp", kernel, Z, L, u, zeta)
            else:
                P = D if kind == "linear" else D + D * (D + 1) // 2
                coef = self._global(f"{x}.coef", dist.Normal(torch.zeros(P, dtype=self.dtype),
                                                            self._t(p.coef_scale)).to_event(1))
                bias = self._global(f"{x}.bias", dist.Normal(self._t(0.0), self._t(p.coef_scale)))
                zeta = self._global(f"{x}.zeta_var", dist.InverseGamma(self._t(p.zeta[0]), self._t(p.zeta[1])))
                g[x] = (kind, coef, bias, zeta)
        J = len(self.indicators)
        nfi, nfl = len(self._free_intercepts), len(self._free_rows)
        icpt = self._global("indicators.intercept", dist.Normal(torch.zeros(nfi, dtype=self.dtype),
                                                               self._t(p.coef_scale)).to_event(1)) if nfi else None
        load = self._global("indicators.loading", dist.Normal(torch.zeros(nfl, dtype=self.dtype),
                                                             self._t(p.coef_scale)).to_event(1)) if nfl else None
        noise = self._global("indicators.noise", dist.InverseGamma(torch.full((J,), p.noise[0], dtype=self.dtype),
                                                                  self._t(p.noise[1])).to_event(1))
        g["indicators"] = (icpt, load, noise)
        return g

    def latent_distribution(self, x, g, values):
        """The distribution of latent ``x`` given its parents' values ``{parent: [..., B]}`` (batch shape
        ``[..., B]``), or the exogenous marginal with batch shape ``[B]`` expanded by :meth:`forward`."""
        piece = g[x]
        kind = piece[0]
        if kind == "gaussian":
            return dist.Normal(piece[1], piece[2].sqrt())
        if kind == "mixture":
            _, w, locs, var = piece
            return dist.MixtureSameFamily(dist.Categorical(probs=w), dist.Normal(locs, var.sqrt()))
        pa = torch.stack([values[q] for q in self.parents[x]], -1)  # [..., B, D]
        if kind == "gp":
            _, kernel, Z, L, u, zeta = piece
            a, r = whitened_conditional(kernel, Z, L, pa)
            loc = (a * u.unsqueeze(-2)).sum(-1)
            return dist.Normal(loc, (r + zeta).sqrt())
        _, coef, bias, zeta = piece
        feats = pa if kind == "linear" else quadratic_features(pa)
        return dist.Normal(bias + (feats * coef).sum(-1), zeta.sqrt().expand(feats.shape[:-1]))

    def measurement_params(self, g):
        """``(intercepts [J], loadings [J, V], noise variances [J])`` from the sampled measurement globals."""
        icpt, load, noise = g["indicators"]
        J = len(self.indicators)
        intercepts = torch.zeros(J, dtype=self.dtype)
        if icpt is not None:
            intercepts = intercepts.index_put((self._free_intercepts,), icpt)
        loadings = self._fixed_load
        if load is not None:
            loadings = loadings.index_put((self._free_rows, self._free_cols), load)
        return intercepts, loadings, noise

    def measurement_log_prob(self, g, xs, y, mask):
        """``log p(y | x)`` summed over observed indicators: ``xs`` ``[..., B, V]``, ``y`` / ``mask`` ``[B, J]`` ->
        ``[..., B]``."""
        intercepts, loadings, noise = self.measurement_params(g)
        mu = intercepts + xs @ loadings.transpose(-1, -2)
        sd = noise.sqrt()
        lp = dist.Normal(mu, sd).log_prob(y)
        if self._t_cols:
            lt = dist.StudentT(self.student_df, mu, sd).log_prob(y)
            tmask = torch.zeros(len(self.indicators), dtype=torch.bool)
            tmask[self._t_cols] = True
            lp = torch.where(tmask, lt, lp)
        return (lp * mask).sum(-1)

    # ------------------------------------------------------------------------------------------------ model
    def forward(self, data=None, *, num_cases=None, subsample_size=None, subsample=None):
        """Run the model.

        :param data: DataFrame with the indicator columns (NaN = missing); ``None`` generates ``num_cases``
            new cases (after :meth:`setup`).
        :param int subsample_size: minibatch size of the ``"data"`` plate (the likelihood and the per-case
            latents' log-densities are scaled by ``n / B``).
        :param torch.Tensor subsample: explicit minibatch indices.
        :returns: ``{latent: [B] values}`` (model scale) for the (sub)sampled cases.
        """
        if data is not None:
            y, mask = self.prepare(data)
            n = y.shape[0]
        else:
            if self.scaler is None or num_cases is None:
                raise SEMSpecError("LatentSEM() without data needs setup(data) first and num_cases=n")
            y = mask = None
            n = int(num_cases)
        check_subsample(subsample_size, subsample, n)
        g = self.sample_globals()
        with pyro.plate("data", n, subsample_size=subsample_size, subsample=subsample, dim=-1) as idx:
            self._current_idx = idx
            values = {}
            for x in self.latents:
                d = self.latent_distribution(x, g, values)
                if x in self.exogenous_kind:
                    d = d.expand(idx.shape)
                values[x] = pyro.sample(f"{x}.x", d)
            xs = torch.stack([values[x] for x in self.latents], -1)
            intercepts, loadings, noise = self.measurement_params(g)
            mu = intercepts + xs @ loadings.transpose(-1, -2)
            sd = noise.sqrt()
            for cols, site, make in [(self._gauss_cols, "indicators.y", lambda m, s: dist.Normal(m, s)),
                                     (self._t_cols, "indicators.y_t",
                                      lambda m, s: dist.StudentT(self.student_df, m, s))]:
                if not cols:
                    continue
                d = make(mu[..., cols], sd[cols])
                if y is None:
                    pyro.sample(site, d.to_event(1))
                else:
                    pyro.sample(site, d.mask(mask[idx][:, cols]).to_event(1), obs=y[idx][:, cols])
        return values

    def create_plates(self, data=None, *, num_cases=None, subsample_size=None, subsample=None):
        """The model's ``"data"`` plate for the same arguments as :meth:`forward`: pass it to autoguides
        (``create_plates=model.create_plates``) so that the guide's local parameters follow the model's subsample."""
        n = len(data) if data is not None else int(num_cases)
        check_subsample(subsample_size, subsample, n)
        return pyro.plate("data", n, subsample_size=subsample_size, subsample=subsample, dim=-1)

    # ------------------------------------------------------------------------------------------------ init
    def init_loc_fn(self, site):
        """Initial values for SVI guides (``init_loc_fn=``) and NUTS (``init_strategy=``): per-case latents at
        their anchors' (standardised) values, pseudo-inputs at spread prior quantiles, whitened pseudo-functions
        at 0, the rest at the prior median (:func:`~pyro.infer.autoguide.initialization.init_to_median`)."""
        name = site["name"]
        if name.endswith(".x") and name[:-2] in self.latents and self._train is not None:
            x = name[:-2]
            a = self.spec.anchors.get(x)
            y, mask = self._train
            idx = getattr(self, "_current_idx", None)
            if a is not None:
                v = self._init_latent_values(x, y, mask)
                return (v if idx is None else v[idx]).to(self.dtype).clone()
        if name.endswith(".xbar"):
            M, D = site["fn"].event_shape
            q = torch.quasirandom.SobolEngine(D, scramble=True, seed=0).draw(M, dtype=self.dtype)
            q = q.clamp(0.01, 0.99)
            if self.pseudo_input_prior == "space_filling":
                return (2 * q - 1) * 0.9 * self.bound
            return torch.distributions.Normal(0.0, self.priors.pseudo_input_scale).icdf(q) * 1.0
        if name.endswith(".u"):
            return torch.zeros(site["fn"].event_shape, dtype=self.dtype)
        return init_to_median(site, num_samples=31)

    def initial_latent_values(self):
        """``{latent: [n] tensor}``: the starting values :meth:`init_loc_fn` gives the per-case latents, for every
        case of the training data (set by the first call with data); latents without an anchor are left out."""
        if self._train is None:
            raise SEMSpecError("LatentSEM.initial_latent_values() needs the training data: call the model on it first")
        y, mask = self._train
        return {x: self._init_latent_values(x, y, mask).to(self.dtype) for x in self.latents
                if self.spec.anchors.get(x) is not None}

    def _init_latent_values(self, x, y, mask):
        """``[n]`` starting values of latent ``x``: the average of its unique indicators (standardised, signed by their
        correlation with the anchor; missing entries skipped), rescaled to the anchor's standard deviation."""
        a = self.indicators.index(self.spec.anchors[x])
        cols = [j for j, yy in enumerate(self.indicators) if self.spec.indicator_parents[yy] == [x]] or [a]
        m = mask[:, cols].to(y.dtype)
        z = y[:, cols]
        za = y[:, a]
        ma = mask[:, a].to(y.dtype)
        signs = torch.stack([torch.sign(((z[:, k] * za) * (m[:, k] * ma)).sum()) for k in range(len(cols))])
        signs = torch.where(signs == 0, torch.ones_like(signs), signs)
        avg = (z * signs * m).sum(-1) / m.sum(-1).clamp_min(1.0)
        sd_avg = avg.std().clamp_min(1e-6)
        return avg * (za[ma > 0].std() / sd_avg)

    def __call__(self, *args, **kwargs):
        data = args[0] if args else kwargs.get("data")
        if data is not None and self._train is None:
            self._train = self.prepare(data)
        return super().__call__(*args, **kwargs)

"""The recommended SVI guide of a :class:`~pyro_dag.sem.LatentSEM`: structured over the globals, local per case.

:class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` on the whole model would treat each per-case latent site
``"{X}.x"`` (all ``n`` cases of one latent) as one block with a dense ``n × n`` factor, which is slow and, in our
runs on the quadratic problem, unstable; the cases are conditionally independent given the globals (the
pseudo-inputs form, Silva & Gramacy 2010, arXiv:1002.4802, Sec. 3), so :func:`sem_guide` combines

* an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (chordal Gaussian) over the global sites, and
* a local guide over the per-case latents: by default :class:`AutoCaseGaussian`, a full ``V × V`` Gaussian per
  case (the latents of one case are strongly dependent a posteriori, e.g. ``X2 ≈ f(X1)``); ``local="mean_field"``
  gives an :class:`~pyro.infer.autoguide.AutoNormal` instead. Both hold local parameters at full size that follow
  the ``"data"`` plate's subsample (minibatching; the guides build the model's plate with
  :meth:`LatentSEM.create_plates`, so ``Predictive`` without a subsample sees every case),

in one :class:`~pyro.infer.autoguide.AutoGuideList`, all initialised by :meth:`LatentSEM.init_loc_fn`. By default
the pseudo-inputs ``"{X}.xbar"`` get a point estimate (:class:`~pyro.infer.autoguide.AutoDelta`: MAP under their
prior), as inducing inputs are variational parameters in sparse variational GPs (Titsias 2009); the paper's MCMC
samples them, and ``pseudo_inputs="random"`` keeps them in the Gaussian global guide.

Why the local family matters: with a factorised ``q(x1) q(x2)`` per case, the ELBO's expected structural term
``E_q[(x2 - f(x1))²] / (2 υ_ζ)`` contains ``Var_q f(x1) ≈ f'(x1)² Var_q(x1)``, which the fit absorbs by inflating
the structural noise ``υ_ζ`` and flattening the dependence of the latents on each other; a per-case joint Gaussian
lets ``x2`` move with ``x1`` inside ``q`` (a local linearisation of ``f``). The same holds for the globals: a
Gaussian ``q`` over ``M`` pseudo-inputs (a posterior that is symmetric under their permutations and flat where no
data are) adds the spread of ``f`` over ``q(x̄)`` to that expectation. On the paper's quadratic problem (N = 150,
M = 50, seed 0, 1500 steps) the correlation of the posterior-mean ``X2`` with the squared posterior-mean ``X1``
was 0.896 with mean-field locals and Gaussian pseudo-inputs, 0.899 with joint locals and 0.916 with joint locals
and point pseudo-inputs (exact posterior at the true parameters: 0.972).
"""
import torch
import pyro
import pyro.distributions as dist
from pyro import poutine
from pyro.distributions.util import eye_like
from pyro.infer.autoguide import AutoDelta, AutoGuide, AutoGuideList, AutoNormal
from pyro.infer.autoguide.initialization import InitMessenger
from pyro.nn import PyroParam
from pyro.distributions import constraints

from ..infer.autoguide import AutoStructuredGuide
from ..utils import renamed_argument

__all__ = ["AutoCaseGaussian", "sem_guide"]


def _periodic_repeat(tensor, size):
    """Repeat ``tensor [B, ...]`` along dim 0 periodically to ``[size, ...]`` (a subsampled prototype trace)."""
    reps = -(-size // tensor.shape[0])
    return tensor.repeat((reps,) + (1,) * (tensor.dim() - 1))[:size].contiguous()


class AutoCaseGaussian(AutoGuide):
    r"""Local guide over the per-case latents of a :class:`~pyro_dag.sem.LatentSEM`: for each case ``d`` an
    independent full-covariance Gaussian over its ``V`` latent values, ``q(x^{(d)}) = N(m_d, L_d L_dᵀ)``.

    It is written as a linear-Gaussian chain in the model's latent order, ``x_v = m_{dv} + Σ_{u<v} B_{d,vu}
    (x_u - m_{du}) + s_{dv} ε_v`` (``ε_v ~ N(0, 1)``), which is every ``V``-variate Gaussian, so each ``"{X}.x"``
    site is sampled with its own ``Normal`` and the log-density is exact. Parameters (full size ``n``; the
    ``"data"`` plate's subsample selects rows): ``loc [n, V]``, ``scale [n, V]`` (positive) and ``coupling
    [n, V, V]`` (strictly lower triangle used). Initialised at ``init_loc_fn`` with ``init_scale`` and no coupling.
    The cases are conditionally independent given the globals in the pseudo-inputs model (Silva & Gramacy 2010,
    arXiv:1002.4802, Sec. 3), so a block-diagonal local guide loses nothing across cases.

    :param callable model: the model, blocked to expose only the ``"{X}.x"`` sites (as :func:`sem_guide` does).
    :param list latents: latent names in the model's order (``LatentSEM.latents``).
    :param callable init_loc_fn: per-site initial values (used for the prototype trace).
    :param callable init_values: optional, ``() -> {latent: [n] tensor}``, initial values for *all* ``n`` cases
        (e.g. :meth:`LatentSEM.initial_latent_values`); without it the prototype's values are used, repeated
        periodically when the prototype trace was subsampled (as :class:`~pyro.infer.autoguide.AutoNormal` does).
    :param float init_scale: initial s.d. of each latent.
    :param callable create_plates: optional, as for other autoguides (:meth:`LatentSEM.create_plates`).
    """

    def __init__(self, model, *, latents, init_loc_fn, init_values=None, init_scale=0.1, create_plates=None):
        if not init_scale > 0:
            raise ValueError(f"AutoCaseGaussian needs init_scale > 0, got {init_scale!r}")
        self.latents = list(latents)
        self._init_scale = float(init_scale)
        self._init_values = init_values
        super().__init__(InitMessenger(init_loc_fn)(model), create_plates=create_plates)

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        names = [f"{x}.x" for x in self.latents]
        sites = {n: s for n, s in self.prototype_trace.iter_stochastic_nodes()}
        missing = [n for n in names if n not in sites]
        extra = [n for n in sites if n not in names]
        if missing or extra:
            raise ValueError(f"AutoCaseGaussian expects exactly the per-case latent sites {names}; the model "
                             f"exposes {sorted(sites)} (block the model with poutine.block(expose=...))")
        frames = [f for f in sites[names[0]]["cond_indep_stack"] if f.vectorized]
        if len(frames) != 1 or sites[names[0]]["value"].dim() != 1:
            raise ValueError("AutoCaseGaussian expects each per-case latent site in one plate, with shape [B]")
        self._plate_name = frames[0].name
        n = frames[0].full_size or frames[0].size
        full = self._init_values() if self._init_values is not None else {}
        loc = torch.stack([full[x].detach().to(sites[s]["value"].dtype) if x in full
                           else _periodic_repeat(sites[s]["value"].detach(), n)
                           for x, s in zip(self.latents, names)], -1)  # [n, V]
        if loc.shape[0] != n:
            raise ValueError(f"AutoCaseGaussian: init_values gave {loc.shape[0]} cases, the plate has {n}")
        V = len(names)
        self.loc = PyroParam(loc, constraints.real, event_dim=1)
        self.scale = PyroParam(torch.full_like(loc, self._init_scale), constraints.softplus_positive, event_dim=1)
        self.coupling = PyroParam(loc.new_zeros(n, V, V), constraints.real, event_dim=2)

    def forward(self, *args, **kwargs):
        """Sample every ``"{X}.x"`` site for the (sub)sampled cases; returns ``{site: [B] values}``."""
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        plates = self._create_plates(*args, **kwargs)
        result = {}
        with plates[self._plate_name]:
            loc, scale = self.loc, self.scale  # [B, V] (PyroModule subsamples them inside the plate)
            B = self.coupling.tril(-1)  # [B, V, V]
            dev = []
            for v, x in enumerate(self.latents):
                mean = loc[..., v]
                if v:
                    mean = mean + (B[..., v, :v] * torch.stack(dev, -1)).sum(-1)
                value = pyro.sample(f"{x}.x", dist.Normal(mean, scale[..., v]))
                dev.append(value - loc[..., v])
                result[f"{x}.x"] = value
        return result

    @torch.no_grad()
    def median(self, *args, **kwargs):
        """``{site: [n]}`` posterior medians (the means ``m``) of the per-case latents, all cases."""
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        loc = self.loc
        return {f"{x}.x": loc[..., v].detach() for v, x in enumerate(self.latents)}

    @torch.no_grad()
    def covariance(self):
        """``[n, V, V]`` per-case posterior covariance ``Cov_q(x^{(d)})`` (all cases): with ``A = I - B``,
        ``x - m = A⁻¹ diag(s) ε``."""
        B = self.coupling.detach().tril(-1)
        A = eye_like(B, B.shape[-1]) - B
        Ainv = torch.linalg.solve_triangular(A, eye_like(B, B.shape[-1]).expand_as(A), upper=False)
        L = Ainv * self.scale.detach().unsqueeze(-2)
        return L @ L.transpose(-1, -2)


def sem_guide(model, precision="chordal", local_init_scale=0.1, init_scale=None, local="joint",
              pseudo_inputs="point", *, structure=None):
    """An ``AutoGuideList``: ``AutoStructuredGuide`` over the globals, ``AutoDelta`` over the pseudo-inputs and a
    local guide over the per-case latents (module docstring).

    :param LatentSEM model: the model. :param str precision: of the global guide (``"chordal"``, ``"mean_field"``
        or ``"full"``; ``structure=`` is its old name). :param float local_init_scale: initial posterior s.d. of each per-case latent.
    :param init_scale: of the global guide (default 0.1).
    :param str local: ``"joint"`` (default; :class:`AutoCaseGaussian`, one ``V × V`` Gaussian per case) or
        ``"mean_field"`` (:class:`~pyro.infer.autoguide.AutoNormal`, independent per latent and case; biased
        towards a large structural noise, see the module docstring).
    :param str pseudo_inputs: ``"point"`` (default; ``AutoDelta`` over every ``"{X}.xbar"``) or ``"random"``
        (Gaussian, in the ``AutoStructuredGuide``).
    :returns: :class:`~pyro.infer.autoguide.AutoGuideList`.

    Example::

        guide = sem_guide(model)
        svi = SVI(model, guide, pyro.optim.ClippedAdam({"lr": 0.02}), Trace_ELBO())
        svi.step(df, subsample_size=64)
    """
    precision = renamed_argument("sem_guide", "structure", "precision", structure, precision, "chordal")
    if local not in ("joint", "mean_field"):
        raise ValueError(f"sem_guide(local=...) must be 'joint' or 'mean_field', got {local!r}")
    if pseudo_inputs not in ("point", "random"):
        raise ValueError(f"sem_guide(pseudo_inputs=...) must be 'point' or 'random', got {pseudo_inputs!r}")
    names = [f"{x}.x" for x in model.latents]
    xbar = [f"{x}.xbar" for x in model.endogenous if model.equations[x] == "gp"] if pseudo_inputs == "point" else []
    guide = AutoGuideList(model, create_plates=model.create_plates)
    guide.append(AutoStructuredGuide(poutine.block(model, hide=names + xbar), precision=precision,
                                     init_loc_fn=model.init_loc_fn, init_scale=init_scale))
    if xbar:
        guide.append(AutoDelta(poutine.block(model, expose=xbar), init_loc_fn=model.init_loc_fn))
    local_model = poutine.block(model, expose=names)
    if local == "joint":
        guide.append(AutoCaseGaussian(local_model, latents=model.latents, init_loc_fn=model.init_loc_fn,
                                      init_values=model.initial_latent_values, init_scale=local_init_scale))
    else:
        guide.append(AutoNormal(local_model, init_loc_fn=model.init_loc_fn, init_scale=local_init_scale))
    return guide

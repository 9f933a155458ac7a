"""Per-node likelihoods ``p_w(Y_w | F_w)`` (Perlino et al. 2026, arXiv:2607.09645, Eqs. (4) and (79)).

Each likelihood provides

* :meth:`Likelihood.dist` -- the elementwise observation distribution given node values ``F`` of shape
  ``[..., B, d]`` (used by the generative model, ``Trace_ELBO``, ``Predictive`` and MCMC);
* :meth:`Likelihood.expected_log_prob` -- ``E_{f ~ N(μ, σ²)}[log p(y | f)]`` elementwise, the
  Rao-Blackwellised term of :class:`~pyro_dag.infer.DAGELBO` (Perlino et al. 2026, Eqs. (94)-(95)): closed
  form for :class:`Gaussian` and :class:`Poisson`, Gauss-Hermite quadrature otherwise;
* :meth:`Likelihood.predictive_moments` -- the mean and variance of a new observation ``y`` when
  ``f ~ N(μ, σ²)`` (for :class:`Bernoulli` the mean is the probability of ``y = 1``; for :class:`StudentT` the
  location, defined when ``ν > 1``).
"""
import math

import numpy as np
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule, PyroParam
from torch.distributions import constraints

from ..utils import batched_hyperparameter

__all__ = ["Likelihood", "Gaussian", "Bernoulli", "Poisson", "StudentT", "get_likelihood"]

#: ``log √(2π)`` as torch's ``Normal.log_prob`` computes it.
_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


class Likelihood(PyroModule):
    """Base class of node likelihoods. Subclasses implement :meth:`dist` and may override
    :meth:`expected_log_prob` with a closed form.

    :param int num_quadrature: Gauss-Hermite points for the default :meth:`expected_log_prob`.

    :cvar support: the observations' support, a :mod:`torch.distributions.constraints` constraint (``None``: not
        declared); :class:`~pyro_dag.DAGDGP` refuses data outside it before any step, naming the node and the fix
        (``support_text`` says what the support is, ``support_fix`` what to do with data outside it).
    """

    support = None
    support_text = ""
    support_fix = "fix the data"

    def __init__(self, num_quadrature=20):
        super().__init__()
        x, w = np.polynomial.hermite.hermgauss(num_quadrature)
        # Buffers follow .to()/.double(); no numpy in forward. Kept in float64 whatever the default dtype (forward
        # casts them to its inputs): a float64 model built under a float32 default keeps exact nodes and weights.
        self.register_buffer("_gh_x", torch.tensor(x, dtype=torch.float64), persistent=False)
        self.register_buffer("_gh_w", torch.tensor(w / np.sqrt(np.pi), dtype=torch.float64), persistent=False)

    def dist(self, f):
        """Observation distribution with batch shape ``f.shape`` (elementwise)."""
        raise NotImplementedError

    def hyper(self, name):
        """The hyperparameter ``name`` (e.g. ``"variance"``), shaped to broadcast against node values
        ``[*batch, B, d]``: returned as is when unbatched (a ``PyroParam``, scalar or ``[d]``); a ``PyroSample`` drawn
        under a vectorised plate, one draw per particle, comes back as ``[*batch, 1, 1]`` or ``[*batch, 1, d]``
        (see :func:`pyro_dag.utils.batched_hyperparameter`).
        """
        return batched_hyperparameter(self, name, 2)

    def expected_log_prob(self, y, loc, var):
        """``E_{f ~ N(loc, var)}[log p(y | f)]`` elementwise; shapes broadcast to ``[..., B, d]``."""
        x = self._gh_x.to(loc)
        w = self._gh_w.to(loc)
        f = loc.unsqueeze(-1) + (2 * var).clamp_min(0).sqrt().unsqueeze(-1) * x
        return (self.dist(f).log_prob(y.unsqueeze(-1)) * w).sum(-1)

    def predictive_moments(self, loc, var):
        """Mean and variance of ``y`` when ``f ~ N(loc, var)``, or ``None`` if there is no closed form."""
        return None


class Gaussian(Likelihood):
    """Gaussian likelihood ``y ~ N(f, τ²)`` with learnable noise variance ``τ²``.

    :param float variance: initial ``τ²`` (scalar or ``[d]`` for one variance per output).
    """

    support = constraints.real
    support_text = "finite real numbers"

    def __init__(self, variance=0.1):
        super().__init__(num_quadrature=1)
        self.variance = PyroParam(torch.as_tensor(variance, dtype=torch.get_default_dtype()).clone(),
                                  constraints.positive)

    def dist(self, f):
        return dist.Normal(f, self.hyper("variance").sqrt())

    def expected_log_prob(self, y, loc, var):
        # E log N(y; f, τ²) = log N(y; μ, τ²) - σ²/(2τ²). log N is torch's Normal.log_prob written out, operation
        # for operation (the same numbers), without building the distribution: its argument checks and broadcasting
        # are a tenth of the ops of a collider step's likelihood (a non-finite τ² gives a non-finite loss, which the
        # estimators report naming the node)
        tau2 = self.hyper("variance")
        scale = tau2.sqrt()
        log_normal = -((y - loc) ** 2) / (2 * scale**2) - scale.log() - _LOG_SQRT_2PI
        return log_normal - var / (2 * tau2)

    def predictive_moments(self, loc, var):
        return loc, var + self.hyper("variance")


class Bernoulli(Likelihood):
    """Bernoulli likelihood with a logit link, ``y ~ Bernoulli(sigmoid(f))``.

    Its predictive mean is the probability ``P(y = 1) = E_{f ~ N(μ, σ²)}[sigmoid(f)]``, by Gauss-Hermite quadrature.
    """

    support = constraints.boolean
    support_text = "0 or 1"
    support_fix = "pass 0/1 outcomes (e.g. (y > threshold).double())"

    def dist(self, f):
        return dist.Bernoulli(logits=f)

    def predictive_moments(self, loc, var):
        """``(P(y = 1), P(y = 1) (1 - P(y = 1)))`` when ``f ~ N(loc, var)``: ``P(y = 1) = E[sigmoid(f)]`` by
        Gauss-Hermite quadrature (``num_quadrature`` points)."""
        x = self._gh_x.to(loc)
        w = self._gh_w.to(loc)
        f = loc.unsqueeze(-1) + (2 * var).clamp_min(0).sqrt().unsqueeze(-1) * x
        prob = (torch.sigmoid(f) * w).sum(-1).clamp(0.0, 1.0)
        return prob, prob * (1 - prob)


class Poisson(Likelihood):
    """Poisson likelihood with a log link, ``y ~ Poisson(exp(f))``.

    The expected log-likelihood is exact: ``y μ - exp(μ + σ²/2) - log y!``.
    """

    support = constraints.nonnegative_integer
    support_text = "counts: integers 0, 1, 2, ..."
    support_fix = "pass non-negative integer counts"

    def dist(self, f):
        return dist.Poisson(f.exp())

    def expected_log_prob(self, y, loc, var):
        return y * loc - torch.exp(loc + var / 2) - torch.lgamma(y + 1)

    def predictive_moments(self, loc, var):
        mean = torch.exp(loc + var / 2)
        return mean, mean + (torch.exp(var) - 1) * mean.pow(2)


class StudentT(Likelihood):
    """Student-t likelihood ``y ~ StudentT(ν, f, s)`` with learnable scale ``s`` (and fixed ``ν``).

    :param float df: degrees of freedom ``ν``. :param float scale: initial scale ``s``.
    """

    support = constraints.real
    support_text = "finite real numbers"

    def __init__(self, df=4.0, scale=0.1, num_quadrature=20):
        super().__init__(num_quadrature)
        self.register_buffer("df", torch.as_tensor(df, dtype=torch.get_default_dtype()))
        self.scale = PyroParam(torch.as_tensor(scale, dtype=torch.get_default_dtype()).clone(), constraints.positive)

    def dist(self, f):
        return dist.StudentT(self.df.to(f), f, self.hyper("scale"))

    def predictive_moments(self, loc, var):
        """``(μ, σ² + s² ν / (ν - 2))`` when ``f ~ N(μ, σ²)`` and ``ν > 2``; for ``1 < ν ≤ 2`` the mean ``μ`` and an
        infinite variance; ``None`` for ``ν ≤ 1``, where ``y`` has no mean."""
        df = self.df.to(loc)
        if not bool((df > 1).all()):
            return None
        noise = self.hyper("scale").pow(2) * df / (df - 2).clamp_min(torch.finfo(loc.dtype).tiny)
        y_var = torch.where(df > 2, var + noise, torch.full_like(var, float("inf")))
        return loc, y_var


_LIKELIHOODS = {"gaussian": Gaussian, "bernoulli": Bernoulli, "poisson": Poisson, "studentt": StudentT,
                "student_t": StudentT}


def get_likelihood(spec, node="?"):
    """A :class:`Likelihood` from an instance or a name (``"gaussian"``, ``"bernoulli"``, ``"poisson"``,
    ``"studentt"``)."""
    if isinstance(spec, Likelihood):
        return spec
    if isinstance(spec, str) and spec.lower() in _LIKELIHOODS:
        return _LIKELIHOODS[spec.lower()]()
    raise ValueError(f"unknown likelihood {spec!r} for node {node!r}; use one of {sorted(_LIKELIHOODS)} or a "
                     "pyro_dag.gp.Likelihood instance")

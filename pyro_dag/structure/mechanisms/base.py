"""The :class:`Mechanism` interface: a structural-equation likelihood ``p(X | A, theta) p(theta)`` and its guide.

A mechanism is the one interface the structure-learning code talks to, so another mechanism (for example a GP
per node) plugs in by subclassing :class:`Mechanism`:

* :meth:`Mechanism.model` ``(X, A)`` -- declares the parameter sites (their priors) and the observation
  (an ``obs=`` site inside a ``"{name}.data"`` plate at ``dim=-1``, or a ``pyro.factor``);
* :meth:`Mechanism.guide` ``(A)`` -- declares the guide sites of the parameters, conditioned on ``A``;
* :meth:`Mechanism.log_likelihood` ``(X, A, params)`` -- the log-likelihood without Pyro side effects.

Shapes: ``A`` is ``batch + [p, p]`` (``A[i, j] = 1``: ``i -> j``) and the parameters carry the same batch dims.
``X`` rows broadcast against the **last** batch dim, which is the data plate's dim (``-1``), so under a particle
plate at ``dim=-2`` a ``[K, 1, p, p]`` adjacency and ``[B, p]`` rows give ``[K, B]`` per-row log-likelihoods.
Reference: Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to Bayesian Causal Discovery*,
arXiv:2608.04930, §3.2.2 and §3.7.
"""
import numbers

import pyro
import torch
from pyro.nn import PyroModule

__all__ = ["Mechanism"]


def _check_int(v, name, minimum=1):
    if not isinstance(v, numbers.Integral) or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {v!r}")


def _check_pos(v, name):
    if not isinstance(v, numbers.Real) or not v > 0:
        raise ValueError(f"{name} must be a positive number; got {v!r}")


class Mechanism(PyroModule):
    """Base class of structural-equation mechanisms ``p(X | A, theta) p(theta)`` and ``q(theta | A)`` (SVI-DAG §3.2).

    Subclasses implement :meth:`log_likelihood` and, when they have parameters, :meth:`sample_params` (model
    side) and :meth:`guide` (guide side). :meth:`model` (also ``__call__``) samples the parameters and scores the
    data: by default with an ``obs`` site ``"{name}.x"`` built from :meth:`observation_dist` when the subclass
    provides one, else with ``pyro.factor("{name}.loglik", ...)``.

    :param int num_nodes: ``p``.
    :param str name: prefix of every site name.
    :param int subsample_size: rows per step for the data plate (``None``: all rows); the log-likelihood is
        scaled by ``N / B`` by Pyro.
    """

    def __init__(self, num_nodes, name="sem", subsample_size=None):
        super().__init__(name=name)
        _check_int(num_nodes, "num_nodes", 2)
        if subsample_size is not None:
            _check_int(subsample_size, "subsample_size")
        self.num_nodes = num_nodes
        self.site_prefix = name
        self.subsample_size = subsample_size

    # -- interface ---------------------------------------------------------------------------------------
    @property
    def supports_subsampling(self):
        """Whether rows are conditionally independent given ``(A, theta)`` (then the data plate may subsample)."""
        return True

    @property
    def latent_sites(self):
        """Names of the latent (parameter) sample sites this mechanism declares in the model."""
        return []

    def sample_params(self, X):
        """Model side: sample the parameters from their prior (dtype/device of ``X``); returns a dict."""
        return {}

    def guide(self, A):
        """Guide side: sample the parameters from ``q(theta | A)``; returns a dict (possibly empty)."""
        return {}

    def log_likelihood(self, X, A, params):
        """``log p(X | A, theta)``: ``[batch..., N]`` per row, or ``[batch...]`` if rows are not separable."""
        raise NotImplementedError

    def observation_dist(self, X, A, params):
        """Optional: the distribution of the rows, ``batch + [N]`` with event ``[p]``; ``None`` to use a factor."""
        return None

    # -- model -------------------------------------------------------------------------------------------
    def check_data(self, X, A=None):
        """Validate ``X`` ``[N, p]`` (finite floats) and ``A`` ``[..., p, p]``; raise a clear error otherwise."""
        if not torch.is_tensor(X) or X.dim() != 2 or not X.is_floating_point():
            raise ValueError(
                f"{type(self).__name__}: X must be a float tensor [N, p]; got "
                f"{tuple(X.shape) if torch.is_tensor(X) else type(X).__name__}"
            )
        if X.shape[-1] != self.num_nodes:
            raise ValueError(f"{type(self).__name__} was built for {self.num_nodes} nodes but X has {X.shape[-1]} columns")
        if not torch.isfinite(X).all():
            raise ValueError(f"{type(self).__name__}: X contains NaN or inf; impute or drop those rows first")
        if A is not None and A.shape[-2:] != (self.num_nodes, self.num_nodes):
            raise ValueError(f"A must be [..., {self.num_nodes}, {self.num_nodes}]; got {tuple(A.shape)}")

    def model(self, X, A):
        """Sample the parameters, then score ``X`` given ``A`` (inside a ``"{name}.data"`` plate at ``dim=-1``)."""
        self.check_data(X, A)
        params = self.sample_params(X)
        N = X.shape[0]
        if not self.supports_subsampling:
            pyro.factor(f"{self.site_prefix}.loglik", self.log_likelihood(X, A, params))
            return params
        with pyro.plate(f"{self.site_prefix}.data", N, subsample_size=self.subsample_size, dim=-1,
                        device=X.device) as idx:
            Xb = X if self.subsample_size is None or self.subsample_size >= N else X.index_select(0, idx)
            d = self.observation_dist(Xb, A, params)
            if d is None:
                pyro.factor(f"{self.site_prefix}.loglik", self.log_likelihood(Xb, A, params))
            else:
                pyro.sample(f"{self.site_prefix}.x", d, obs=Xb)
        return params

    def forward(self, X, A):
        return self.model(X, A)


def _rows_last(out):
    """``[*batch, N, p]`` -> ``[*batch[:-1], N, p]``: put the rows on the data plate's batch dim (``-1``)."""
    if out.dim() > 2:
        if out.shape[-3] != 1:
            raise ValueError(
                "the last batch dim of A / the parameters is the data plate's dim and must have size 1; got shape "
                f"{tuple(out.shape[:-2])}"
            )
        out = out.squeeze(-3)
    return out


def _noise_args(noise, noise_prior):
    if noise is not None:
        _check_pos(noise, "noise")
    if not (isinstance(noise_prior, (tuple, list)) and len(noise_prior) == 2 and noise_prior[1] > 0):
        raise ValueError(f"noise_prior must be (loc, scale) of log sigma with scale > 0; got {noise_prior!r}")

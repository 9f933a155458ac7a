"""Distributions for Bayesian DAG structure learning with node potentials (digest-001 §2-§3).

Conventions (all of :mod:`pyro_dag.structure`):

* **Adjacency** ``A[..., i, j] = 1`` means the edge ``i -> j`` (row = parent, column = child). SVI-DAG's paper
  uses the transpose (digest-001 §1, §11.9); everything here is already converted.
* **Potentials** ``r`` ``[..., p]``: a higher potential means further upstream. The edge ``i -> j`` is allowed
  iff ``r_i > r_j`` (digest-001 §2.3, Thm B.3), so every graph built from a potential vector is acyclic.
* **Edge logits** ``gamma``: one logit per ordered pair ``i != j``. As a Pyro sample site they are stored as a
  flat vector ``[..., p (p - 1)]`` in row-major off-diagonal order (digest-001 §1); :func:`fill_offdiag` and
  :func:`offdiag` convert between that vector and a ``[..., p, p]`` matrix with a zero diagonal.

Contents:

* :class:`LogisticBeta` -- the Beta prior on edge probabilities pushed to logits (digest-001 §2.2, U-9), with
  :func:`edge_belief_prior` (prior beliefs -> Beta parameters, U-5) and :func:`sparsity_prior`.
* :func:`hard_order_mask`, :func:`soft_order_mask`, :func:`log_sinkhorn` -- the hard order mask ``M(r)`` and its
  log-space Sinkhorn relaxation ``M_tau(r)`` with RMS-normalised potentials (digest-001 §3.2, §11.1-2).
* :class:`OrderedDAG` -- the exact distribution ``A = B * M(r)``, ``B_ij ~ Bernoulli(sigmoid(gamma_ij))``
  (digest-001 §2.3); every sample is a DAG.
* :class:`RelaxedOrderedDAG` -- Gumbel-sigmoid edges with the Sinkhorn order relaxation and the straight-through
  combination ``A_ST = A~ + sg(A - A~)`` (digest-001 §3.1-3.3, Eq. 1-2).
* :data:`dag` -- a constraint: binary and acyclic ``[..., p, p]`` matrices; :func:`is_acyclic`.
"""
import math
import numbers

import torch
import torch.nn.functional as F
from pyro.distributions import constraints
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape
from torch.distributions.utils import broadcast_all

__all__ = [
    "LogisticBeta",
    "OrderedDAG",
    "RelaxedOrderedDAG",
    "dag",
    "edge_belief_prior",
    "fill_offdiag",
    "hard_order_mask",
    "is_acyclic",
    "log_sinkhorn",
    "offdiag",
    "soft_order_mask",
    "soft_order_mask_jacobian",
    "sparsity_prior",
]


# ----------------------------------------------------------------------------------------------------------
# off-diagonal vectorisation
# ----------------------------------------------------------------------------------------------------------
def _offdiag_index(p, device):
    eye = torch.eye(p, dtype=torch.bool, device=device)
    return (~eye).reshape(-1).nonzero().squeeze(-1)


def offdiag(matrix):
    """Flatten the off-diagonal entries of ``[..., p, p]`` matrices row-major into ``[..., p (p - 1)]``.

    This is the layout of the edge-logit site (digest-001 §1): entry ``k`` is the ordered pair ``(i, j)``,
    ``i != j``, in row-major order. Inverse of :func:`fill_offdiag`.

    :param torch.Tensor matrix: ``[..., p, p]``.
    :returns: ``[..., p (p - 1)]``.
    """
    if not torch.is_tensor(matrix) or matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError(
            f"offdiag expects a tensor of square matrices [..., p, p]; got shape "
            f"{tuple(matrix.shape) if torch.is_tensor(matrix) else type(matrix).__name__}"
        )
    p = matrix.shape[-1]
    flat = matrix.reshape(matrix.shape[:-2] + (p * p,))
    return flat.index_select(-1, _offdiag_index(p, matrix.device))


def fill_offdiag(vector, num_nodes=None, diagonal=0.0):
    """Scatter a row-major off-diagonal vector ``[..., p (p - 1)]`` into ``[..., p, p]`` matrices.

    Inverse of :func:`offdiag` (digest-001 §1); the diagonal is set to ``diagonal``.

    :param torch.Tensor vector: ``[..., p (p - 1)]``.
    :param int num_nodes: ``p``; inferred from the length when omitted.
    :param float diagonal: value written on the diagonal.
    :returns: ``[..., p, p]``.
    """
    d = vector.shape[-1]
    if num_nodes is None:
        num_nodes = int(round((1 + math.sqrt(1 + 4 * d)) / 2))
    p = num_nodes
    if p * (p - 1) != d:
        raise ValueError(
            f"an off-diagonal vector of {p} nodes has length p (p - 1) = {p * (p - 1)}; got length {d}. "
            "Pass the flat edge-logit vector of the right graph size."
        )
    out = vector.new_full(vector.shape[:-1] + (p * p,), diagonal)
    out = out.index_copy(-1, _offdiag_index(p, vector.device), vector)
    return out.reshape(vector.shape[:-1] + (p, p))


# ----------------------------------------------------------------------------------------------------------
# edge-logit prior
# ----------------------------------------------------------------------------------------------------------
class LogisticBeta(TorchDistribution):
    r"""Logistic-Beta distribution: ``gamma = logit(pi)`` with ``pi ~ Beta(alpha, beta)`` (digest-001 §2.2, U-9).

    It is the prior of an edge logit under the Beta-Bernoulli edge prior of SVI-DAG: with a Beta on the edge
    probability, the induced density of the logit is

    .. math:: p(\gamma) = \sigma(\gamma)^\alpha \, (1 - \sigma(\gamma))^\beta / B(\alpha, \beta),

    a proper density whose mode is ``log(alpha / beta)`` (not ``logit`` of the Beta mode, digest-001 §11.8).
    ``rsample`` is reparameterised through Gamma variables, ``gamma = log G_a - log G_b`` with
    ``G_a ~ Gamma(alpha)``, ``G_b ~ Gamma(beta)``, which avoids rounding ``pi`` to 0 or 1.

    :param alpha: positive, any shape (batch shape = broadcast of ``alpha`` and ``beta``).
    :param beta: positive.

    Example::

        alpha, beta = edge_belief_prior(beliefs)                   # [p, p] each
        prior = LogisticBeta(offdiag(alpha), offdiag(beta)).to_event(1)
        gamma = pyro.sample("gamma", prior)                        # [p (p - 1)]
    """

    arg_constraints = {"alpha": constraints.positive, "beta": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, alpha, beta, validate_args=None):
        self.alpha, self.beta = broadcast_all(alpha, beta)
        super().__init__(self.alpha.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticBeta, _instance)
        batch_shape = torch.Size(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        new.beta = self.beta.expand(batch_shape)
        super(LogisticBeta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=torch.Size()):
        shape = self._extended_shape(sample_shape)
        tiny = torch.finfo(self.alpha.dtype).tiny
        ga = torch._standard_gamma(self.alpha.expand(shape)).clamp_min(tiny)
        gb = torch._standard_gamma(self.beta.expand(shape)).clamp_min(tiny)
        return ga.log() - gb.log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lbeta = torch.lgamma(self.alpha) + torch.lgamma(self.beta) - torch.lgamma(self.alpha + self.beta)
        return self.alpha * F.logsigmoid(value) + self.beta * F.logsigmoid(-value) - lbeta

    @property
    def mean(self):
        return torch.digamma(self.alpha) - torch.digamma(self.beta)

    @property
    def mode(self):
        return self.alpha.log() - self.beta.log()

    @property
    def variance(self):
        return torch.polygamma(1, self.alpha) + torch.polygamma(1, self.beta)


def _as_tensor(x, name, dtype=None, device=None):
    if torch.is_tensor(x):
        t = x
        if dtype is not None:
            t = t.to(dtype)
    else:
        try:
            t = torch.as_tensor(x, dtype=dtype if dtype is not None else torch.get_default_dtype())
        except Exception as e:  # pragma: no cover - message only
            raise TypeError(f"{name} must be a tensor, an array or a nested list of numbers; got {type(x)}") from e
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    if device is not None:
        t = t.to(device)
    return t


def edge_belief_prior(beliefs, strength=500.0, min_concentration=1.0, exponent=2.0):
    r"""Beta parameters from a matrix of prior edge beliefs, as SVI-DAG does (digest-001 §2.2, U-5).

    A belief ``p_ij`` in ``(0, 1)`` is the *mode* of the Beta prior on ``P(i -> j)``; ``0.5`` means no opinion.
    Confident beliefs get concentrated Betas:

    .. math:: \nu = \nu_{min} + \kappa |p - 0.5|^\eta, \quad \alpha = \nu p + 1, \quad \beta = \nu (1 - p) + 1

    with ``kappa = strength`` (paper: ``nu_min = 1, kappa = 500, eta = 2``; e.g. ``p = 0.99 -> nu = 121``).
    The marginal prior edge probability is ``alpha / (alpha + beta)``, not ``p`` (digest-001 §11.8).

    :param beliefs: ``[p, p]`` (or ``[..., p, p]``) with ``beliefs[i, j]`` the belief in ``i -> j``; the
        diagonal is ignored (any value).
    :param float strength: ``kappa``, how fast the concentration grows away from 0.5.
    :param float min_concentration: ``nu_min``, the concentration of a "no opinion" entry.
    :param float exponent: ``eta``.
    :returns: ``(alpha, beta)``, each shaped like ``beliefs``; diagonal entries are set to 1.
    """
    b = _as_tensor(beliefs, "beliefs")
    if b.dim() < 2 or b.shape[-1] != b.shape[-2]:
        raise ValueError(f"beliefs must be a square [p, p] matrix (beliefs[i, j] = belief in i -> j); got {tuple(b.shape)}")
    for name, v in (("strength", strength), ("min_concentration", min_concentration), ("exponent", exponent)):
        if not isinstance(v, numbers.Real) or v < 0:
            raise ValueError(f"{name} must be a non-negative number; got {v!r}")
    p = b.shape[-1]
    eye = torch.eye(p, dtype=torch.bool, device=b.device)
    off = b.masked_select(~eye.expand(b.shape))
    if torch.isnan(off).any() or (off <= 0).any() or (off >= 1).any():
        raise ValueError(
            "off-diagonal beliefs must lie strictly inside (0, 1) (0.5 = no opinion); clip certainties to e.g. "
            f"0.01 / 0.99. Got min {off.min().item():.4g}, max {off.max().item():.4g}."
        )
    b = torch.where(eye, torch.full_like(b, 0.5), b)
    nu = min_concentration + strength * (b - 0.5).abs().pow(exponent)
    alpha = nu * b + 1.0
    beta = nu * (1.0 - b) + 1.0
    one = torch.ones_like(alpha)
    return torch.where(eye, one, alpha), torch.where(eye, one, beta)


def sparsity_prior(num_nodes, edge_prob, concentration=20.0, dtype=None, device=None):
    r"""Uniform sparsity prior: every off-diagonal belief equals ``edge_prob`` with a fixed concentration.

    This is the graph-agnostic prior that SVI-DAG's benchmark code uses instead of "no opinion"
    (digest-001 §2.2 table, §6.3.1; ablation §10.4: the single most important component):
    ``alpha = nu p0 + 1, beta = nu (1 - p0) + 1`` with ``nu = concentration`` (paper code: 20).

    :param int num_nodes: ``p``.
    :param float edge_prob: ``p0`` in ``(0, 1)``, e.g. ``expected_parents / (p - 1)``.
    :param float concentration: ``nu``.
    :returns: ``(alpha, beta)``, each ``[p, p]`` with a diagonal of ones.
    """
    if not isinstance(num_nodes, numbers.Integral) or num_nodes < 2:
        raise ValueError(f"num_nodes must be an integer >= 2; got {num_nodes!r}")
    if not isinstance(edge_prob, numbers.Real) or not 0 < edge_prob < 1:
        raise ValueError(f"edge_prob must be a number in (0, 1); got {edge_prob!r}")
    if not isinstance(concentration, numbers.Real) or concentration < 0:
        raise ValueError(f"concentration must be a non-negative number; got {concentration!r}")
    dtype = dtype or torch.get_default_dtype()
    eye = torch.eye(num_nodes, dtype=torch.bool, device=device)
    alpha = torch.full((num_nodes, num_nodes), concentration * edge_prob + 1.0, dtype=dtype, device=device)
    beta = torch.full((num_nodes, num_nodes), concentration * (1.0 - edge_prob) + 1.0, dtype=dtype, device=device)
    return alpha.masked_fill(eye, 1.0), beta.masked_fill(eye, 1.0)


# ----------------------------------------------------------------------------------------------------------
# order masks
# ----------------------------------------------------------------------------------------------------------
def _check_potentials(r):
    if not torch.is_tensor(r) or r.dim() < 1 or not r.is_floating_point():
        raise ValueError("potentials must be a floating-point tensor [..., p]")
    if r.shape[-1] < 1:
        raise ValueError("potentials must have at least one node")


def hard_order_mask(potentials):
    r"""Hard order mask ``M[..., i, j] = 1{r_i > r_j}``: the edge ``i -> j`` is allowed (digest-001 §2.3, U-10).

    Equal to ``P(r) U P(r)^T`` with ``P(r)`` the permutation that sorts by descending potential and ``U`` the
    strictly upper-triangular matrix of ones (our orientation of the paper's ``P L P^T``). Ties allow neither
    direction, so the mask is the strict order of a preorder and any ``B * M`` is acyclic.

    :param torch.Tensor potentials: ``[..., p]``.
    :returns: ``[..., p, p]`` of zeros and ones, dtype of ``potentials``.
    """
    _check_potentials(potentials)
    return (potentials.unsqueeze(-1) > potentials.unsqueeze(-2)).to(potentials.dtype)


def log_sinkhorn(log_alpha, num_iters=100, eps_scaling=1.0, anneal_frac=0.6):
    r"""Log-space Sinkhorn normalisation of ``[..., n, n]`` log-potentials (digest-001 §3.2, Lemma B.4).

    Alternates ``num_iters`` row and column normalisations in log space (probability-space Sinkhorn underflows,
    digest-001 §11.1), written with dual vectors: ``log P = log_alpha + f 1^T + 1 g^T`` with
    ``f = -logsumexp(log_alpha + g, -1)``, ``g = -logsumexp(log_alpha + f, -2)``. The last step normalises columns,
    so columns of ``exp(result)`` sum to one exactly and rows approximately.

    ``eps_scaling > 1`` runs the same iterations with the entropic temperature annealed geometrically from
    ``eps_scaling`` to 1 over the first ``anneal_frac`` of the sweeps (epsilon-scaling, Schmitzer 2019). The fixed
    point is unchanged (the entropic assignment of Lemma B.4) but peaked problems (small ``tau``) converge in far
    fewer sweeps. ``eps_scaling=1`` is the plain algorithm of the paper.

    :param torch.Tensor log_alpha: ``[..., n, n]``.
    :param int num_iters: number of (row, column) sweeps ``K_S``.
    :param float eps_scaling: initial temperature multiplier (``>= 1``).
    :param float anneal_frac: fraction of the sweeps spent annealing.
    :returns: ``[..., n, n]`` log of an (approximately) doubly-stochastic matrix.
    """
    if log_alpha.dim() < 2 or log_alpha.shape[-1] != log_alpha.shape[-2]:
        raise ValueError(f"log_sinkhorn expects square matrices [..., n, n]; got {tuple(log_alpha.shape)}")
    if not isinstance(num_iters, numbers.Integral) or num_iters < 1:
        raise ValueError(f"num_iters must be a positive integer; got {num_iters!r}")
    if not eps_scaling >= 1:
        raise ValueError(f"eps_scaling must be >= 1; got {eps_scaling!r}")
    n_anneal = max(1, int(anneal_frac * num_iters)) if eps_scaling > 1 else 0
    g = torch.zeros_like(log_alpha[..., :1, :])
    f = None
    for k in range(num_iters):
        t = eps_scaling ** (1.0 - k / (n_anneal - 1)) if k < n_anneal and n_anneal > 1 else 1.0
        if t == 1.0:
            f = -torch.logsumexp(log_alpha + g, -1, keepdim=True)
            g = -torch.logsumexp(log_alpha + f, -2, keepdim=True)
        else:
            f = -t * torch.logsumexp((log_alpha + g) / t, -1, keepdim=True)
            g = -t * torch.logsumexp((log_alpha + f) / t, -2, keepdim=True)
    return log_alpha + f + g


def _rms_normalises(scale_normalize, p):
    # With p = 2 the centred, RMS-normalised potentials are +-1 whatever r is: the relaxation would be constant in r
    # and carry no gradient to the order (measured: |dM/dr| ~ 1e-5), so two-node problems skip the normalisation.
    return scale_normalize and p > 2


def _normalise_potentials(potentials, scale_normalize, eps=1e-6):
    rc = potentials - potentials.mean(-1, keepdim=True)
    if _rms_normalises(scale_normalize, potentials.shape[-1]):
        rc = rc * torch.rsqrt(rc.pow(2).mean(-1, keepdim=True) + eps)
    return rc


def soft_order_mask(potentials, temperature=0.1, num_iters=100, scale_normalize=True, return_perm=False,
                    eps_scaling=True, backward="jacobian"):
    r"""Sinkhorn relaxation ``M_tau(r)`` of the order mask (digest-001 §3.2, U-12; §11.1-2).

    ``S_0 = r o^T`` with ``o = (p, p - 1, ..., 1)``, ``P_tau = Sinkhorn(exp(S_0 / tau))`` (log space, ``num_iters``
    sweeps), and ``M_tau[i, j] = sum_{k < l} P_tau[i, k] P_tau[j, l]``, the relaxed probability that ``i`` comes
    before ``j``. The potentials are centred and, by default, scaled to unit RMS so that the effective
    temperature does not drift with the spread of ``r`` (digest-001 §11.2). ``M_tau -> hard_order_mask(r)`` as
    ``tau -> 0`` for distinct potentials. The result has a non-zero diagonal and is generally "cyclic"; multiply
    by ``1 - I`` before using it as an adjacency relaxation. After the Sinkhorn sweeps the rows of ``P_tau`` are
    normalised once more, so that every node has a distribution over positions and ``M_tau`` lies in ``[0, 1]``
    even before convergence.

    :param torch.Tensor potentials: ``[..., p]``.
    :param float temperature: ``tau > 0``.
    :param int num_iters: Sinkhorn sweeps ``K_S``.
    :param bool scale_normalize: RMS-normalise the centred potentials (not for ``p = 2``, where it would leave
        ``M_tau`` constant in ``r``).
    :param bool return_perm: also return the soft permutation ``P_tau`` ``[..., p, p]`` (rows = nodes,
        columns = positions, position 0 first).
    :param bool eps_scaling: anneal the Sinkhorn temperature from ``p / tau`` (see :func:`log_sinkhorn`); same limit,
        much faster convergence at small ``tau``.
    :param str backward: how gradients reach the potentials: ``"jacobian"`` (default; the exact Jacobian of the
        iterates from :func:`soft_order_mask_jacobian`, computed in the forward pass and shared with the SVGD kernel
        evaluated at the same potentials) or ``"autograd"`` (reverse mode through every Sinkhorn sweep). Both give
        the same gradient.
    :returns: ``[..., p, p]`` (and ``P_tau``).
    """
    _check_potentials(potentials)
    if not isinstance(temperature, numbers.Real) or temperature <= 0:
        raise ValueError(f"temperature must be a positive number; got {temperature!r}")
    if backward not in ("jacobian", "autograd"):
        raise ValueError(f"backward must be 'jacobian' or 'autograd'; got {backward!r}")
    if backward == "jacobian" and not return_perm and potentials.requires_grad and torch.is_grad_enabled():
        return _SoftOrderMaskFn.apply(potentials, float(temperature), int(num_iters), bool(scale_normalize),
                                      bool(eps_scaling))
    p = potentials.shape[-1]
    rc = _normalise_potentials(potentials, scale_normalize)
    o = torch.arange(p, 0, -1, dtype=potentials.dtype, device=potentials.device)
    eps = max(1.0, p / temperature) if eps_scaling else 1.0
    logP = log_sinkhorn(rc.unsqueeze(-1) * o / temperature, num_iters, eps_scaling=eps)
    # a final row normalisation: every node gets a distribution over positions, so M lies in [0, 1]
    logP = logP - torch.logsumexp(logP, -1, keepdim=True)
    P = logP.exp()
    # (P U)[i, l] = sum_{k < l} P[i, k]: an exclusive cumulative sum over positions.
    before = torch.cumsum(P, -1) - P
    M = before @ P.transpose(-1, -2)
    # M[i, j] = sum_l (sum_{k<l} P[i,k]) P[j,l] = P(pos(i) < pos(j)).
    return (M, P) if return_perm else M


def soft_order_mask_jacobian(potentials, temperature=0.1, num_iters=100, scale_normalize=True, eps_scaling=True):
    r""":func:`soft_order_mask` and its Jacobian with respect to the potentials, by hand-written forward mode.

    The Sinkhorn iterations are differentiated exactly (the iterates, not their limit): with row / column soft-max
    matrices ``S``, ``T`` of each sweep, ``df = -sum_k S_ik (dC_ik + dg_k)`` and ``dg = -sum_i T_ik (dC_ik + df_i)``,
    for all ``p`` tangent directions at once. This is the ``J_psi`` of the SVGD repulsion (digest-001 §4.5), several
    times cheaper than ``torch.func.jacfwd`` through ``logsumexp``.

    :param torch.Tensor potentials: ``[..., p]``.
    :returns: ``(M, J)`` with ``M`` ``[..., p, p]`` and ``J[..., i, j, d] = dM[i, j] / dr_d`` ``[..., p, p, p]``.
    """
    _check_potentials(potentials)
    r = potentials.detach()
    p = r.shape[-1]
    eye = torch.eye(p, dtype=r.dtype, device=r.device)
    centre = eye - 1.0 / p
    rc = r - r.mean(-1, keepdim=True)
    if _rms_normalises(scale_normalize, p):
        s = (rc.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()  # same eps as _normalise_potentials
        rn = rc / s
        # d rn / d r = (I / s - rc rc^T / (p s^3)) (I - 11^T / p)
        jn = (eye / s.unsqueeze(-1) - rc.unsqueeze(-1) * rc.unsqueeze(-2) / (p * s.unsqueeze(-1) ** 3)) @ centre
    else:
        rn = rc
        jn = centre.expand(r.shape[:-1] + (p, p))
    o = torch.arange(p, 0, -1, dtype=r.dtype, device=r.device)
    C = rn.unsqueeze(-1) * o / temperature  # [..., n, n]
    # tangents: dC[..., d, i, k] = jn[..., i, d] o_k / tau
    dC = jn.transpose(-1, -2).unsqueeze(-1) * o / temperature  # [..., d, n, n]
    eps = max(1.0, p / temperature) if eps_scaling else 1.0
    n_anneal = max(1, int(0.6 * num_iters)) if eps > 1 else 0
    g = torch.zeros_like(C[..., :1, :])
    dg = torch.zeros_like(dC[..., :1, :])
    for k in range(num_iters):
        t = eps ** (1.0 - k / (n_anneal - 1)) if k < n_anneal and n_anneal > 1 else 1.0
        A = (C + g) / t
        lse = torch.logsumexp(A, -1, keepdim=True)
        f = -t * lse
        S = torch.exp(A - lse).unsqueeze(-3)
        df = -(S * (dC + dg)).sum(-1, keepdim=True)
        B = (C + f) / t
        lse2 = torch.logsumexp(B, -2, keepdim=True)
        g = -t * lse2
        T = torch.exp(B - lse2).unsqueeze(-3)
        dg = -(T * (dC + df)).sum(-2, keepdim=True)
    logP = C + f + g
    lse = torch.logsumexp(logP, -1, keepdim=True)  # final row normalisation (as in soft_order_mask)
    P = torch.exp(logP - lse)
    dlogP = dC + df + dg
    dlogP = dlogP - (P.unsqueeze(-3) * dlogP).sum(-1, keepdim=True)
    dP = P.unsqueeze(-3) * dlogP  # [..., d, n, n]
    before = torch.cumsum(P, -1) - P
    dbefore = torch.cumsum(dP, -1) - dP
    M = before @ P.transpose(-1, -2)
    dM = dbefore @ P.transpose(-1, -2).unsqueeze(-3) + before.unsqueeze(-3) @ dP.transpose(-1, -2)
    return M, dM.movedim(-3, -1)


_JACOBIAN_MEMO = {}


def _cached_mask_and_jacobian(potentials, temperature, num_iters, scale_normalize, eps_scaling):
    """``soft_order_mask_jacobian`` with a one-entry memo keyed on the exact potential values and settings.

    One OrderSVGD step needs ``(M, J)`` at the same particles twice (the guide's straight-through relaxation and the
    kernel); the memo computes them once.
    """
    p = potentials.shape[-1]
    flat = potentials.detach().reshape(-1, p)
    flat = flat - flat.mean(-1, keepdim=True)  # M and dM/dr are shift invariant: key on centred potentials
    key = (float(temperature), int(num_iters), bool(scale_normalize), bool(eps_scaling), flat.dtype, flat.device,
           tuple(flat.shape))
    hit = _JACOBIAN_MEMO.get("key") == key and torch.equal(_JACOBIAN_MEMO["r"], flat)
    if not hit:
        M, J = soft_order_mask_jacobian(flat, temperature, num_iters, scale_normalize, eps_scaling)
        _JACOBIAN_MEMO.clear()
        _JACOBIAN_MEMO.update(key=key, r=flat.clone(), M=M, J=J)
    M, J = _JACOBIAN_MEMO["M"], _JACOBIAN_MEMO["J"]
    batch = potentials.shape[:-1]
    return M.reshape(batch + (p, p)), J.reshape(batch + (p, p, p))


class _SoftOrderMaskFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, potentials, temperature, num_iters, scale_normalize, eps_scaling):
        M, J = _cached_mask_and_jacobian(potentials, temperature, num_iters, scale_normalize, eps_scaling)
        ctx.save_for_backward(J)
        return M.clone()

    @staticmethod
    def backward(ctx, grad_M):
        (J,) = ctx.saved_tensors
        return (grad_M.unsqueeze(-1) * J).sum((-2, -3)), None, None, None, None


# ----------------------------------------------------------------------------------------------------------
# DAG constraint
# ----------------------------------------------------------------------------------------------------------
def is_acyclic(adjacency):
    """Whether binary adjacency matrices ``[..., p, p]`` (``A[i, j] = 1``: ``i -> j``) have no directed cycle.

    Transitive closure by repeated squaring (``ceil(log2 p) + 1`` boolean matrix products); a graph is acyclic
    iff no node reaches itself. Entries ``> 0.5`` count as edges.

    :returns: bool tensor ``[...]``.
    """
    if adjacency.dim() < 2 or adjacency.shape[-1] != adjacency.shape[-2]:
        raise ValueError(f"is_acyclic expects square matrices [..., p, p]; got {tuple(adjacency.shape)}")
    p = adjacency.shape[-1]
    R = (adjacency > 0.5).to(torch.float32 if not adjacency.is_floating_point() else adjacency.dtype)
    for _ in range(max(1, math.ceil(math.log2(max(p, 2)))) + 1):
        R = ((R + R @ R) > 0).to(R.dtype)
    return R.diagonal(dim1=-2, dim2=-1).sum(-1) == 0


class _DAG(constraints.Constraint):
    """Binary ``[..., p, p]`` matrices (``A[i, j] = 1``: ``i -> j``) without directed cycles."""

    event_dim = 2
    is_discrete = True

    def check(self, value):
        binary = ((value == 0) | (value == 1)).all(-1).all(-1)
        return binary & is_acyclic(value)

    def __repr__(self):
        return "dag"


dag = _DAG()


# ----------------------------------------------------------------------------------------------------------
# distributions over DAGs
# ----------------------------------------------------------------------------------------------------------
def _dag_batch(potentials, edge_logits):
    _check_potentials(potentials)
    if not torch.is_tensor(edge_logits) or edge_logits.dim() < 2:
        raise ValueError("edge_logits must be a tensor [..., p, p] (use fill_offdiag on a flat logit vector)")
    p = potentials.shape[-1]
    if edge_logits.shape[-2:] != (p, p):
        raise ValueError(
            f"edge_logits must be [..., {p}, {p}] to match {p} potentials; got {tuple(edge_logits.shape)}. "
            "A flat [..., p (p - 1)] logit vector is converted with fill_offdiag(gamma, p)."
        )
    return broadcast_shape(potentials.shape[:-1], edge_logits.shape[:-2]), p


def _ordered_dag_log_prob(potentials, edge_logits, value):
    p = value.shape[-1]
    eye = torch.eye(p, dtype=torch.bool, device=value.device)
    allowed = (potentials.unsqueeze(-1) > potentials.unsqueeze(-2)) & ~eye
    lp = value * F.logsigmoid(edge_logits) + (1 - value) * F.logsigmoid(-edge_logits)
    lp = torch.where(allowed, lp, torch.zeros_like(lp)).sum((-1, -2))
    violation = ((value > 0.5) & ~allowed).any(-1).any(-1)
    return torch.where(violation, torch.full_like(lp, -math.inf), lp)


class OrderedDAG(TorchDistribution):
    r"""Distribution over DAGs given node potentials and edge logits (digest-001 §2.3, U-10, Thm B.3).

    .. math:: A = B \odot M(r), \qquad B_{ij} \sim \mathrm{Bernoulli}(\sigma(\gamma_{ij})), \quad i \ne j,

    with ``M(r)`` the :func:`hard_order_mask` (``i -> j`` allowed iff ``r_i > r_j``). Every sample is acyclic and
    every DAG is reachable (completeness, Thm B.3). ``log_prob`` is exact:
    ``sum_{allowed (i, j)} log Bernoulli(A_ij | sigmoid(gamma_ij))``, and ``-inf`` for an edge the order forbids.

    As a model site it pairs with :class:`RelaxedOrderedDAG` in the guide: both have the same ``log_prob`` of the
    (hard) sampled value, so ``log p(A | r, gamma) - log q(A | r, gamma)`` cancels exactly (the guide "shares the
    Bernoulli conditional", digest-001 §4.2, A.3).

    :param torch.Tensor potentials: ``[..., p]`` node potentials (higher = upstream).
    :param torch.Tensor edge_logits: ``[..., p, p]``, ``edge_logits[i, j]`` the logit of ``i -> j``; diagonal ignored.

    Example::

        r = pyro.sample("r", dist.Normal(torch.zeros(p), 1.0).to_event(1))
        gamma = pyro.sample("gamma", LogisticBeta(a, b).to_event(1))         # [p (p - 1)]
        A = pyro.sample("A", OrderedDAG(r, fill_offdiag(gamma, p)))            # [p, p], a DAG
    """

    arg_constraints = {"potentials": constraints.real_vector, "edge_logits": constraints.independent(constraints.real, 2)}
    support = dag
    has_rsample = False

    def __init__(self, potentials, edge_logits, validate_args=None):
        batch_shape, p = _dag_batch(potentials, edge_logits)
        self.potentials = potentials.expand(batch_shape + (p,))
        self.edge_logits = edge_logits.expand(batch_shape + (p, p))
        super().__init__(batch_shape, torch.Size((p, p)), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OrderedDAG, _instance)
        batch_shape = torch.Size(batch_shape)
        p = self.event_shape[-1]
        new.potentials = self.potentials.expand(batch_shape + (p,))
        new.edge_logits = self.edge_logits.expand(batch_shape + (p, p))
        super(OrderedDAG, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mask(self):
        """``[..., p, p]`` hard order mask with a zero diagonal: which edges the potentials allow."""
        return hard_order_mask(self.potentials)

    @property
    def edge_probs(self):
        """``[..., p, p]`` exact ``P(i -> j | r, gamma) = sigmoid(gamma_ij) M_ij(r)``."""
        return torch.sigmoid(self.edge_logits) * self.mask

    @property
    def mean(self):
        return self.edge_probs

    def sample(self, sample_shape=torch.Size()):
        shape = self._extended_shape(sample_shape)
        with torch.no_grad():
            probs = self.edge_probs.expand(shape)
            return torch.bernoulli(probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return _ordered_dag_log_prob(self.potentials, self.edge_logits, value)


class RelaxedOrderedDAG(TorchDistribution):
    r"""Relaxed / straight-through version of :class:`OrderedDAG` (digest-001 §3.1-3.3, Eq. 1-2).

    With logistic noise ``L_ij`` (shared by the hard and soft edges),

    .. math::
        B_{ij} = 1\{\gamma_{ij} + L_{ij} > 0\}, \quad \tilde B_{ij} = \sigma((\gamma_{ij} + L_{ij}) / T),

        A = B \odot M(r), \quad \tilde A = \tilde B \odot M_\tau(r) \odot (1 - I), \quad
        A_{ST} = A + (\tilde A - \mathrm{sg}(\tilde A)).

    ``rsample`` returns ``A_ST`` when ``straight_through`` (forward value: the hard DAG ``A``, exactly; backward:
    the gradient of the soft ``A~`` through the Gumbel-sigmoid edges and the Sinkhorn order relaxation, a biased
    surrogate gradient), otherwise the soft ``A~`` (generally cyclic). :meth:`rsample_with_parts` returns
    ``(A, A~)``.

    ``log_prob`` is the exact :class:`OrderedDAG` log-probability of the hard value (like Pyro's
    ``RelaxedBernoulliStraightThrough`` the density is that of the discrete variable), so a guide site of this
    type cancels an :class:`OrderedDAG` model site exactly. It is undefined for soft values.

    :param torch.Tensor potentials: ``[..., p]``.
    :param torch.Tensor edge_logits: ``[..., p, p]``.
    :param float temperature: Concrete temperature ``T`` of the edges (paper 0.3).
    :param float order_temperature: Sinkhorn temperature ``tau`` (paper: 0.1 final).
    :param int sinkhorn_iters: ``K_S`` (paper 100).
    :param bool scale_normalize: RMS-normalise potentials inside the Sinkhorn relaxation (digest-001 §11.2).
    :param bool straight_through: return ``A_ST`` (default) or the soft ``A~``.
    :param str edge_relaxation: ``"concrete"`` (the paper's Gumbel-sigmoid ``B~``, Eq. 1) or ``"mean"``
        (``B~ = sigmoid(gamma)``, the original straight-through estimator of Bengio et al. 2013: the backward pass
        uses the edge probability instead of a noisy Concrete sample; lower variance, same forward value).
    """

    arg_constraints = {"potentials": constraints.real_vector, "edge_logits": constraints.independent(constraints.real, 2)}
    has_rsample = True

    def __init__(
        self,
        potentials,
        edge_logits,
        temperature=0.3,
        order_temperature=0.1,
        sinkhorn_iters=100,
        scale_normalize=True,
        straight_through=True,
        edge_relaxation="concrete",
        validate_args=None,
    ):
        batch_shape, p = _dag_batch(potentials, edge_logits)
        if edge_relaxation not in ("concrete", "mean"):
            raise ValueError(f"edge_relaxation must be 'concrete' or 'mean'; got {edge_relaxation!r}")
        for name, v in (("temperature", temperature), ("order_temperature", order_temperature)):
            if not isinstance(v, numbers.Real) or v <= 0:
                raise ValueError(f"{name} must be a positive number; got {v!r}")
        if not isinstance(sinkhorn_iters, numbers.Integral) or sinkhorn_iters < 1:
            raise ValueError(f"sinkhorn_iters must be a positive integer; got {sinkhorn_iters!r}")
        self.potentials = potentials.expand(batch_shape + (p,))
        self.edge_logits = edge_logits.expand(batch_shape + (p, p))
        self.temperature = float(temperature)
        self.order_temperature = float(order_temperature)
        self.sinkhorn_iters = int(sinkhorn_iters)
        self.scale_normalize = bool(scale_normalize)
        self.straight_through = bool(straight_through)
        self.edge_relaxation = edge_relaxation
        super().__init__(batch_shape, torch.Size((p, p)), validate_args=validate_args)

    def _kwargs(self):
        return dict(
            temperature=self.temperature,
            order_temperature=self.order_temperature,
            sinkhorn_iters=self.sinkhorn_iters,
            scale_normalize=self.scale_normalize,
            straight_through=self.straight_through,
            edge_relaxation=self.edge_relaxation,
        )

    def expand(self, batch_shape, _instance=None):
        batch_shape = torch.Size(batch_shape)
        p = self.event_shape[-1]
        new = RelaxedOrderedDAG(
            self.potentials.expand(batch_shape + (p,)),
            self.edge_logits.expand(batch_shape + (p, p)),
            validate_args=False,
            **self._kwargs(),
        )
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=2)
    def support(self):
        return dag if self.straight_through else constraints.independent(constraints.unit_interval, 2)

    def soft_mask(self):
        """``[..., p, p]`` relaxed order mask ``M_tau(r) * (1 - I)``."""
        p = self.event_shape[-1]
        M = soft_order_mask(self.potentials, self.order_temperature, self.sinkhorn_iters, self.scale_normalize)
        return M * (1 - torch.eye(p, dtype=M.dtype, device=M.device))

    def rsample_with_parts(self, sample_shape=torch.Size()):
        """Return ``(A, A_soft)``: the hard DAG and the relaxed adjacency built from the same noise."""
        shape = self._extended_shape(sample_shape)
        gamma = self.edge_logits.expand(shape)
        eps = torch.finfo(gamma.dtype).eps
        u = torch.rand(shape, dtype=gamma.dtype, device=gamma.device).clamp(eps, 1 - eps)
        z = gamma + (u.log() - torch.log1p(-u))
        hard = (z > 0).to(gamma.dtype) * hard_order_mask(self.potentials)
        if self.edge_relaxation == "concrete":
            soft = torch.sigmoid(z / self.temperature) * self.soft_mask()
        else:
            soft = torch.sigmoid(gamma) * self.soft_mask()
        return hard, soft

    def rsample(self, sample_shape=torch.Size()):
        hard, soft = self.rsample_with_parts(sample_shape)
        if not self.straight_through:
            return soft
        return hard + (soft - soft.detach())

    def log_prob(self, value):
        if not self.straight_through:
            raise NotImplementedError(
                "RelaxedOrderedDAG(straight_through=False) has no tractable density (the Sinkhorn order relaxation "
                "has none); use straight_through=True for a guide site, whose log_prob is that of the hard DAG."
            )
        if self._validate_args:
            self._validate_sample(value)
        return _ordered_dag_log_prob(self.potentials, self.edge_logits, value)

    @property
    def edge_probs(self):
        """``[..., p, p]`` exact ``P(i -> j | r, gamma)`` of the hard DAG."""
        return torch.sigmoid(self.edge_logits) * hard_order_mask(self.potentials)


def _bernoulli_kl_on_allowed(q_potentials, q_logits, p_logits):
    p = q_logits.shape[-1]
    allowed = hard_order_mask(q_potentials) * (1 - torch.eye(p, dtype=q_logits.dtype, device=q_logits.device))
    q1 = torch.sigmoid(q_logits)
    kl = q1 * (F.logsigmoid(q_logits) - F.logsigmoid(p_logits)) + (1 - q1) * (
        F.logsigmoid(-q_logits) - F.logsigmoid(-p_logits)
    )
    return (kl * allowed).sum((-1, -2))


@torch.distributions.kl.register_kl(RelaxedOrderedDAG, OrderedDAG)
def _kl_relaxed_ordered(q, p):
    """``KL(q(A | r, gamma_q) || p(A | r, gamma_p))`` for the same potentials: a sum of Bernoulli KLs over the edges
    the order allows (zero when the logits agree, as in SVI-DAG's guide)."""
    return _bernoulli_kl_on_allowed(q.potentials, q.edge_logits, p.edge_logits)


@torch.distributions.kl.register_kl(OrderedDAG, OrderedDAG)
def _kl_ordered_ordered(q, p):
    return _bernoulli_kl_on_allowed(q.potentials, q.edge_logits, p.edge_logits)

"""One-call Bayesian structure learning: :func:`fit` -> :class:`StructurePosterior` (digest-001 §5).

:func:`fit` assembles the standard SVI-DAG model from the primitives of this package (see :func:`structure_model`),
the :class:`~pyro_dag.structure.guides.AutoEdgeFlowGuide` and :class:`~pyro_dag.infer.svgd.OrderSVGD`, trains them
and returns the posterior. Everything it builds is an ordinary Pyro object, returned on the posterior.
"""
import math
import numbers

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.infer import TraceMeanField_ELBO

from pyro_dag.infer.svgd import OrderMaskKernel, OrderSVGD

from .distributions import (
    LogisticBeta,
    OrderedDAG,
    RelaxedOrderedDAG,
    edge_belief_prior,
    fill_offdiag,
    offdiag,
    sparsity_prior,
)
from .guides import AutoEdgeFlowGuide
from .models import BGeSEM, LinearGaussianSEM, Mechanism, MLPSEM

__all__ = ["StructureModel", "StructurePosterior", "fit", "structure_model"]


class StructureModel:
    r"""The SVI-DAG generative model as a Pyro model callable ``model(X)`` (digest-001 §2, A.2).

    .. math::
        r \sim N(0, \sigma_r^2 I), \quad \gamma_{ij} \sim \mathrm{LogisticBeta}(\alpha_{ij}, \beta_{ij}), \quad
        A \sim \mathrm{OrderedDAG}(r, \gamma), \quad X \sim p(X \mid A, \theta)\, p(\theta)

    Sites: ``"r"`` ``[p]``, ``"gamma"`` ``[p (p - 1)]`` (flat off-diagonal), ``"A"`` ``[p, p]`` and the mechanism's.

    :param Mechanism mechanism: the SEM likelihood.
    :param alpha, beta: ``[p, p]`` Beta parameters of the edge prior (:func:`edge_belief_prior`,
        :func:`sparsity_prior`).
    :param float potential_scale: ``sigma_r`` (paper: 1).
    :param float likelihood_scale: multiplies the mechanism's log-densities (1: the posterior; ``fit`` ramps it
        up from ``1 / N`` during a warm-up).

    Attribute ``soft_mix`` (default 0, the model proper): during ``fit``'s soft warm-up the mechanism sees
    ``A + soft_mix * (sigmoid(gamma) * M_tau(r) - A)`` (Sinkhorn temperature ``order_temperature``, ``sinkhorn_iters``
    sweeps) while the ``"A"`` site keeps the hard DAG (digest-001 §11.5).
    """

    def __init__(self, mechanism, alpha, beta, potential_scale=1.0, likelihood_scale=1.0):
        if not isinstance(mechanism, Mechanism):
            raise TypeError(f"mechanism must be a pyro_dag.structure.Mechanism; got {type(mechanism).__name__}")
        p = mechanism.num_nodes
        if tuple(alpha.shape) != (p, p) or tuple(beta.shape) != (p, p):
            raise ValueError(f"alpha and beta must be [{p}, {p}]; got {tuple(alpha.shape)} and {tuple(beta.shape)}")
        self.mechanism = mechanism
        self.num_nodes = p
        self.alpha_offdiag = offdiag(alpha)
        self.beta_offdiag = offdiag(beta)
        self.potential_scale = float(potential_scale)
        self.likelihood_scale = likelihood_scale
        # soft_mix in [0, 1]: weight of the relaxed adjacency in what the mechanism sees (fit's warm-up; 0: the
        # hard DAG, the model proper); order_temperature / sinkhorn_iters: its Sinkhorn relaxation
        self.soft_mix = 0.0
        self.order_temperature = 1.0
        self.sinkhorn_iters = 30

    def edge_prior(self, like):
        """The ``LogisticBeta(...).to_event(1)`` prior of the flat edge logits (dtype/device of ``like``)."""
        return LogisticBeta(self.alpha_offdiag.to(like), self.beta_offdiag.to(like)).to_event(1)

    def __call__(self, X):
        p = self.num_nodes
        r = pyro.sample("r", dist.Normal(X.new_zeros(p), self.potential_scale).to_event(1))
        gamma = pyro.sample("gamma", self.edge_prior(X))
        edge_logits = fill_offdiag(gamma, p)
        A = pyro.sample("A", OrderedDAG(r, edge_logits))
        A_mech = A
        if self.soft_mix > 0:
            # warm-up for mechanisms with parameters (digest-001 §11.5): the mechanism sees a blend of the hard
            # DAG and its relaxation sigmoid(gamma) * M_tau(r), so node networks learn to use inputs before the
            # edge decisions harden (with a hard DAG only, an untrained network makes every edge look harmful).
            relaxed = RelaxedOrderedDAG(
                r, edge_logits, order_temperature=self.order_temperature, sinkhorn_iters=self.sinkhorn_iters
            )
            soft = torch.sigmoid(edge_logits) * relaxed.soft_mask()
            A_mech = A + self.soft_mix * (soft - A)
        if self.likelihood_scale == 1.0:
            self.mechanism(X, A_mech)
        else:  # tempered mechanism (fit's warm-up): likelihood and parameter prior; the guide scales q(theta) too
            with poutine.scale(scale=self.likelihood_scale):
                self.mechanism(X, A_mech)
        return A


def structure_model(mechanism, alpha, beta, potential_scale=1.0):
    """Build a :class:`StructureModel` (see there); a function for symmetry with Pyro's model factories."""
    return StructureModel(mechanism, alpha, beta, potential_scale)


def _to_tensor(data, dtype, device):
    names = None
    if hasattr(data, "columns") and hasattr(data, "to_numpy"):  # pandas DataFrame
        names = [str(c) for c in data.columns]
        data = data.to_numpy(dtype=float)
    if torch.is_tensor(data):
        X = data.detach().to(dtype=dtype, device=device)
    else:
        try:
            X = torch.as_tensor(np.array(data, dtype=float), dtype=dtype, device=device)
        except (TypeError, ValueError) as e:
            raise TypeError(f"data must be a [N, p] tensor, array or DataFrame of numbers; got {type(data).__name__}") from e
    if X.dim() != 2:
        raise ValueError(f"data must be 2-D [N, p] (rows = samples, columns = variables); got shape {tuple(X.shape)}")
    N, p = X.shape
    if p < 2:
        raise ValueError(f"structure learning needs at least 2 variables (columns); got {p}")
    if N < 2:
        raise ValueError(f"need at least 2 rows of data; got {N}")
    if not torch.isfinite(X).all():
        bad = (~torch.isfinite(X)).any(0).nonzero().flatten().tolist()
        raise ValueError(f"data contain NaN or inf in columns {bad}; impute or drop those rows first")
    return X, names


def _prior(p, edge_beliefs, expected_parents, prior_concentration, belief_strength, dtype, device):
    edge_prob = None
    if expected_parents is not None:
        if not isinstance(expected_parents, numbers.Real) or expected_parents <= 0:
            raise ValueError(f"expected_parents must be a positive number or None; got {expected_parents!r}")
        edge_prob = min(0.5, expected_parents / (p - 1))
    if edge_beliefs is None:
        if edge_prob is None:
            beliefs = torch.full((p, p), 0.5, dtype=dtype, device=device)
            return edge_belief_prior(beliefs, strength=belief_strength)
        if edge_prob == 0.5:
            return edge_belief_prior(torch.full((p, p), 0.5, dtype=dtype, device=device), strength=belief_strength)
        return sparsity_prior(p, edge_prob, prior_concentration, dtype=dtype, device=device)
    beliefs = torch.as_tensor(np.asarray(edge_beliefs, dtype=float) if not torch.is_tensor(edge_beliefs) else edge_beliefs)
    beliefs = beliefs.to(dtype=dtype, device=device)
    if tuple(beliefs.shape) != (p, p):
        raise ValueError(f"edge_beliefs must be [p, p] = [{p}, {p}] (beliefs[i, j] = belief in i -> j); got {tuple(beliefs.shape)}")
    alpha, beta = edge_belief_prior(beliefs, strength=belief_strength)
    if edge_prob is not None and edge_prob != 0.5:
        # "no opinion" entries get the graph-agnostic sparsity prior (digest-001 §2.2)
        sa, sb = sparsity_prior(p, edge_prob, prior_concentration, dtype=dtype, device=device)
        none = (beliefs == 0.5) & ~torch.eye(p, dtype=torch.bool, device=device)
        alpha = torch.where(none, sa, alpha)
        beta = torch.where(none, sb, beta)
    return alpha, beta


class StructurePosterior:
    """Result of :func:`fit`: a posterior over DAGs with the fitted Pyro objects (digest-001 §5.3).

    Attributes: ``model`` (:class:`StructureModel`), ``guide`` (:class:`AutoEdgeFlowGuide`), ``svgd``
    (:class:`OrderSVGD`), ``mechanism``, ``data`` (the standardised ``[N, p]`` tensor used for fitting),
    ``node_names``, ``losses`` (one float per step), ``param_state`` (the Pyro param-store scope holding the fitted
    parameters), ``settings``, ``wall_time`` (seconds), ``order_scorer`` (an
    :class:`~pyro_dag.structure.exact.OrderScorer` with ``order_score="exact"``) and ``visited`` (``[M, p]``
    potentials of the distinct orders visited late in the run, ``order_history``; else ``None``).

    Posterior draws follow the paper: pick a particle ``r_k`` (uniformly, or by its order's ELBO weight, see
    :meth:`particle_weights`; attribute ``weighting``; with ``weighting="order"`` any visited order, see
    :meth:`support`), ``gamma ~ q_phi(gamma | r_k)``,
    ``B_ij ~ q(B_ij | gamma, r_k) = Bernoulli(sigmoid(gamma_ij + delta_ij(r_k)))`` (``delta = 0`` in the paper's
    guide, see :class:`~pyro_dag.structure.guides.EdgeOffsetNet`), ``A = B * M(r_k)``; every sample is a DAG.
    """

    def __init__(self, model, guide, svgd, data, node_names, param_state, losses, settings, wall_time,
                 weighting="elbo", elbo_samples=20):
        self.weighting = weighting
        self.elbo_samples = elbo_samples
        self._elbos = None
        self.order_scorer = None  # an OrderScorer when fitted with order_score="exact" (weighting="order")
        # [M, p] potentials of the distinct orders the particles visited late in the run (fit's order_history), the
        # support of weighting="order"; None: the particles alone
        self.visited = None
        self._support_cache = {}
        self.model = model
        self.guide = guide
        self.svgd = svgd
        self.mechanism = model.mechanism
        self.data = data
        self.node_names = node_names
        self.param_state = param_state
        self.losses = losses
        self.settings = settings
        self.wall_time = wall_time

    @property
    def num_nodes(self):
        return self.model.num_nodes

    @property
    def particles(self):
        """``[K, p]`` potential particles (higher = upstream)."""
        with pyro.get_param_store().scope(self.param_state):
            return self.svgd.particles.clone()

    def _generator_scope(self, seed):
        return pyro.get_param_store().scope(self.param_state), (torch.random.fork_rng() if seed is not None else _Null())

    def particle_weights(self, weighting=None, num_samples=None):
        """``[K]`` weights of the particles (they sum to one).

        ``"uniform"``: the SVGD empirical measure (the paper). ``"elbo"``: the particles are grouped by their
        (hard) order and every distinct order ``o`` gets ``w_o ∝ exp(L_o)``, ``L_o`` the mean over its particles of
        the per-particle ELBO ``L(phi; r_k) <= log p(D | order)`` (Eq. 5, estimated with ``num_samples`` draws),
        shared equally by its particles: the "support-restricted posterior" over the visited orders
        (digest-004 §5.2). It corrects the equal weighting of particles stuck in worse orders. ``"order"``: the
        same grouping with ``L_o = log p(D, o)``, every DAG consistent with ``o`` summed out exactly
        (:attr:`order_scorer`, fitted with ``order_score="exact"``; no ELBO gap). The posterior's queries mix over
        :meth:`support`, which with ``"order"`` also holds the orders the particles visited (:attr:`visited`).
        """
        weighting = self.weighting if weighting is None else weighting
        if weighting not in ("uniform", "elbo", "order"):
            raise ValueError(f"weighting must be 'uniform', 'elbo' or 'order'; got {weighting!r}")
        r = self.particles
        K = r.shape[0]
        if weighting == "uniform":
            return torch.full((K,), 1.0 / K, dtype=r.dtype, device=r.device)
        if weighting == "order":
            if self.order_scorer is None:
                raise ValueError("weighting='order' needs a posterior fitted with order_score='exact'")
            L = self.order_scorer(r, scale=self.settings.get("likelihood_scale", 1.0)).to(r.device, r.dtype)
        else:
            num_samples = num_samples or self.elbo_samples
            if self._elbos is None or self._elbos[0] != num_samples:
                with pyro.get_param_store().scope(self.param_state), torch.random.fork_rng():
                    torch.manual_seed(self.settings.get("seed", 0) + 1)
                    self._elbos = (num_samples, self.svgd.particle_elbos(self.data, num_samples=num_samples))
            L = self._elbos[1].to(r.dtype)
        group, first = _distinct_orders(r)
        G = len(first)
        counts = torch.zeros(G, dtype=r.dtype, device=r.device).index_add_(0, group, torch.ones_like(L))
        Lg = torch.zeros(G, dtype=r.dtype, device=r.device).index_add_(0, group, L) / counts
        wg = torch.softmax(Lg, 0)
        return wg[group] / counts[group]

    def support(self, weighting=None):
        """The potentials the posterior mixes over and their weights: ``([M, p], [M])``.

        With ``weighting="order"`` and a recorded history (:attr:`visited`, fit's ``order_history``): every distinct
        order among the visited ones and the particles' current ones, weighted by its exact score
        ``softmax_o log p(D, o)`` (:attr:`order_scorer`), orders below ``e^{-30}`` of the best one dropped: the
        "support-restricted" posterior of the visited orders (digest-004 §5.2) with the orders of the whole
        Markov-chain history instead of the ``K`` final positions. Otherwise the particles and
        :meth:`particle_weights`.
        """
        weighting = self.weighting if weighting is None else weighting
        if weighting != "order" or self.visited is None:
            return self.particles, self.particle_weights(weighting)
        cached = self._support_cache.get("order")
        if cached is None or cached[0] is not self.visited:  # a user may replace or drop the recorded history
            if self.order_scorer is None:
                raise ValueError("weighting='order' needs a posterior fitted with order_score='exact'")
            r = torch.cat([self.visited.to(self.particles), self.particles], 0)
            _, first = _distinct_orders(r)
            r = r[first]
            scale = self.settings.get("likelihood_scale", 1.0)
            L = torch.cat([self.order_scorer(chunk, scale=scale) for chunk in r.split(2048)]).to(r.device, r.dtype)
            keep = L > L.max() - 30.0
            cached = self._support_cache["order"] = (self.visited, r[keep], torch.softmax(L[keep], 0))
        return cached[1], cached[2]

    def edge_probs(self, num_samples=1000, seed=None, weighting=None):
        """``[p, p]`` posterior edge probabilities ``P(i -> j)`` (Rao-Blackwellised over the Bernoulli edges).

        ``E[sigmoid(gamma_ij) M_ij(r)]`` over ``num_samples`` potentials drawn from :meth:`support` (the particles,
        or the visited orders) by systematic resampling of their weights (each potential ``num_samples * w``
        times, rounded), one flow draw each: the Monte Carlo budget is ``num_samples`` however many orders the
        support holds.
        """
        if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")
        r, w = self.support(weighting)
        store_scope, rng = self._generator_scope(seed)
        with store_scope, rng, torch.no_grad():
            if seed is not None:
                torch.manual_seed(seed)
            u = (torch.arange(num_samples, dtype=w.dtype, device=w.device) + torch.rand((), dtype=w.dtype,
                                                                                       device=w.device)) / num_samples
            idx = torch.searchsorted(w.cumsum(0), u).clamp(max=w.shape[0] - 1)
            return sum(self.guide.edge_probs(rc, 1).sum(0) for rc in r[idx].split(4096)) / num_samples

    def sample(self, num_samples=1000, seed=None, weighting=None):
        """``[num_samples, p, p]`` hard DAG samples (every one acyclic); potentials of :meth:`support` (particles or
        visited orders) drawn by their weights, one flow draw each."""
        if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")
        r, w = self.support(weighting)
        store_scope, rng = self._generator_scope(seed)
        with store_scope, rng, torch.no_grad():
            if seed is not None:
                torch.manual_seed(seed)
            idx = torch.multinomial(w, num_samples, replacement=True)
            return self.guide.sample_dags(r[idx], 1)[0]

    def order_probs(self):
        """``[p, p]`` fraction of particles with ``r_i > r_j`` (``i`` upstream of ``j``)."""
        r = self.particles
        return (r.unsqueeze(-1) > r.unsqueeze(-2)).to(r.dtype).mean(0)

    def to_networkx(self, threshold=0.5, num_samples=1000):
        """Posterior-mean graph: edges with ``P(i -> j) > threshold``, attribute ``prob`` (may contain cycles)."""
        import networkx as nx

        P = self.edge_probs(num_samples).cpu()
        names = self.node_names or [str(i) for i in range(self.num_nodes)]
        g = nx.DiGraph()
        g.add_nodes_from(names)
        for i in range(self.num_nodes):
            for j in range(self.num_nodes):
                if i != j and P[i, j] > threshold:
                    g.add_edge(names[i], names[j], prob=float(P[i, j]))
        return g


def _distinct_orders(r):
    """Group potentials ``[K, p]`` by their order: ``(group [K], first [G])``, ``group[k]`` the index of ``r[k]``'s
    order among the distinct ones (in order of appearance), ``first[g]`` the first row with order ``g``."""
    keys = {}
    first = []
    group = []
    for k, o in enumerate(torch.argsort(-r, -1).tolist()):
        g = keys.setdefault(tuple(o), len(keys))
        if g == len(first):
            first.append(k)
        group.append(g)
    return torch.tensor(group, device=r.device), torch.tensor(first, device=r.device)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


_LIKELIHOODS = ("linear", "bge", "linear-sites", "mlp")


def fit(
    data,
    likelihood="linear",
    edge_beliefs=None,
    *,
    num_particles=None,
    num_steps=None,
    seed=0,
    progress=True,
    expected_parents=1.5,
    prior_concentration=20.0,
    belief_strength=500.0,
    standardize=True,
    lr=1e-2,
    affine_lr=0.03,
    particle_lr=0.05,
    batch_size=128,
    order_temperature=(1.0, 0.1),
    sinkhorn_iters=30,
    edge_temperature=0.3,
    edge_relaxation="mean",
    edge_offset=None,
    offset_gradient_cap=1000.0,
    flow_hidden=(64, 64),
    flow_blocks=5,
    mlp_hidden=(32, 32),
    param_kl_weight=0.01,
    repulsion_cap=1.0,
    weighting=None,
    swap_every=None,
    warmup=0.3,
    soft_warmup=None,
    likelihood_scale=1.0,
    swap_until=None,
    swap_moves=None,
    order_score=None,
    max_parents=None,
    candidate_parents=None,
    order_history=None,
    node_names=None,
    dtype=torch.float32,
    device=None,
    callback=None,
):
    r"""Fit a posterior over DAGs to data with SVI-DAG (flow guide + SVGD over order potentials; digest-001 §5).

    :param data: ``[N, p]`` tensor, array or ``pandas.DataFrame`` (column names become node names).
    :param str likelihood: ``"linear"`` (linear-Gaussian SEM with the parameters integrated out exactly,
        :class:`LinearGaussianSEM` ``marginalize=True``), ``"bge"`` (linear-Gaussian with the score-equivalent BGe
        marginal likelihood, :class:`BGeSEM`), ``"linear-sites"`` (the same SEM with weight and noise
        sample sites and a hypernetwork guide) or ``"mlp"`` (:class:`MLPSEM`, one tanh MLP per node).
    :param edge_beliefs: optional ``[p, p]`` prior beliefs ``P(i -> j)`` in ``(0, 1)``; 0.5 = no opinion
        (:func:`edge_belief_prior`, strength ``belief_strength``). "No opinion" entries, and all entries when
        ``edge_beliefs`` is None, get the sparsity prior with ``p0 = expected_parents / (p - 1)`` and concentration
        ``prior_concentration`` (digest-001 §2.2; ``expected_parents=None`` disables it).
    :param int num_particles: SVGD particles ``K`` (paper: 20). Default (``None``): 40 for the collapsed
        likelihoods (``"linear"``, ``"bge"``), whose particles are cheap (measured on ER p = 10, 5 seeds: mean AUROC
        85.2 with 40 vs 79.4 with 20 at the same wall-clock), 20 otherwise.
    :param int num_steps: optimisation steps (default 1000 for linear, 2000 for mlp).
    :param int seed: seeds Pyro/torch.
    :param bool progress: show a tqdm progress bar.
    :param bool standardize: centre and scale each column (recommended; the SEMs assume centred data).
    :param float lr: Adam learning rate of the guide parameters (paper: 3e-3; 1e-2 converges faster here).
    :param float affine_lr: Adam learning rate of the flow's final per-edge affine map (:class:`OrderMaskAffine`).
    :param float particle_lr: Adam learning rate of the particles.
    :param int batch_size: rows per step for ``"mlp"`` / ``"linear-sites"`` (``None``: all rows).
    :param order_temperature: Sinkhorn ``tau``, a float or ``(start, end)`` annealed linearly over the run.
    :param int sinkhorn_iters: ``K_S``.
    :param float edge_temperature: Concrete temperature of the edges (paper: 0.3).
    :param str edge_relaxation: ``"mean"`` (straight-through through the edge probabilities, lower variance) or
        ``"concrete"`` (the paper's Gumbel-sigmoid); see :class:`RelaxedOrderedDAG`.
    :param bool edge_offset: guide edges ``q(B | gamma, r)`` with a learned offset or the paper's
        ``q(B | gamma) = p(B | gamma)`` (see :class:`~pyro_dag.structure.guides.EdgeOffsetNet`). Default (``None``):
        on for the collapsed likelihoods (``"linear"``, ``"bge"``), whose edge-flip gradients are exact; off for
        ``"mlp"`` and ``"linear-sites"``, where it made the Sachs posterior much denser (44 vs 24 edges per sample).
    :param float offset_gradient_cap: with ``edge_offset``: the offsets' gradients are divided by the Bernoulli
        Fisher information of their edge, by at most this factor (``1``: plain gradients); see
        :class:`~pyro_dag.structure.guides.AutoEdgeFlowGuide`. Without it an edge logit that saturates early stays
        saturated (ER p = 10, seed 3: a spurious edge at probability 1.0 where the exact posterior has 0.011).
    :param tuple flow_hidden: flow conditioner widths; ``flow_blocks``: coupling blocks.
    :param tuple mlp_hidden: node MLP widths (``"mlp"``).
    :param float param_kl_weight: weight of ``KL(q(theta | A) || p(theta))`` of the MLP parameters (``"mlp"``;
        :class:`MLPSEM` ``kl_weight``). 1 is the exact ELBO; SVI-DAG uses 0.01 on its ER benchmarks (digest-001
        §4.4, §11.4), and so does this default: with weight 1 the mean-field weight guide stays near the prior and
        the MLP does not learn (measured: on the nonlinear two-node data with the true DAG fixed, residual variance
        1.05 after 2000 steps vs 0.10 with 0.01), so no edge can pay for itself.
    :param float repulsion_cap: SVGD repulsion cap (``None``: off).
    :param int swap_every: every ``swap_every`` steps (during the first ``swap_until`` fraction of the run) each
        particle makes a Metropolis-Hastings order move (:meth:`OrderSVGD.swap_step`); ``0`` disables them.
        Default (``None``): every step for the whole run (``swap_every=1, swap_until=1.0``) with the collapsed
        likelihoods (``"linear"``, ``"bge"``), whose particle ELBOs are cheap and exact, every 5 steps over the first
        90 % otherwise. Measured on ER p = 10 linear data (5 seeds): AUROC 88.7 with every step vs 85.2 with every
        5th, at 1.45x the time; the posterior modes it escapes score worse than the true DAG (an order-search
        failure, not a model one).
    :param float swap_until: see ``swap_every``.
    :param str swap_moves: the order moves' proposal (:meth:`OrderSVGD.swap_step`): ``"adjacent"`` swaps two nodes
        next to each other in the particle's order; ``"mixed"`` makes half of the proposals swaps of two nodes at
        random positions (long jumps across the order). Default (``None``): ``"mixed"`` with the collapsed
        likelihoods, ``"adjacent"`` otherwise. Measured on ER linear data (5 seeds, ``benchmarks/structure_er.py``):
        AUROC 93.5 vs 88.7 at p = 10 and 96.3 vs 88.0 at p = 20 (seed 4: 99.4 vs 78.8, where adjacent swaps left the
        particles in orders that score below the true DAG), at about the same cost per step.
    :param float warmup: fraction of the run over which the likelihood is tempered, its scale rising
        geometrically from ``1 / N`` to 1 (edges then switch on in the order of their evidence instead of all at
        once; 0 disables it).
    :param float soft_warmup: fraction of the run over which the mechanism sees a blend of the hard DAG and its
        relaxation, the blend weight falling linearly from 1 to 0 (the soft-to-hard warm-up of SVI-DAG, digest-001
        §11.5). Default (``None``): 0.3 for ``"mlp"`` and ``"linear-sites"``, whose networks must learn to use their
        inputs before edges harden; 0 for the collapsed likelihoods.
    :param float likelihood_scale: power of the likelihood, ``p(D | A)^s`` (1: the posterior; ``s < 1``: a tempered
        "power posterior", a standard remedy when a misspecified model meets many rows, at the price of wider
        posteriors).
    :param str order_score: what the particles' order moves and order weights use to compare orders.
        ``"exact"`` (collapsed likelihoods only): ``log p(D, order)`` with every DAG consistent with the order
        summed out exactly (:class:`~pyro_dag.structure.exact.OrderScorer`, parent sets up to ``max_parents``;
        beyond the paper, order MCMC's score, Friedman & Koller 2003); ``"elbo"``: the flow's per-particle ELBO, a
        lower bound whose gap differs between orders (the paper). Default (``None``): ``"exact"`` for
        ``"linear"`` / ``"bge"`` with ``p ≤ 14`` (all ``2^{p-1}`` parent sets per node), else ``"elbo"``. Measured
        on Sachs (fold 0, BGe): with the ELBO the 40 particles' orders held 2e-5 of the exact posterior's order
        mass, while the flow's edge probabilities given those orders were within 0.01 of the exact conditionals:
        the order search, not the flow, was the weak part; 10 folds: AUROC 64.1 vs 55.5, ER p = 10 linear 99.4 vs
        93.5 (benchmarks/README.md). Above 14 nodes the score needs a parent-set cap, and a wrong cap misleads
        the moves and, above all, the weights: on ER p = 20 (true in-degrees up to 6) the particles' orders
        out-scored the true order under a 12-candidate score. Seed 0, linear: AUROC 80.4 with ``max_parents=4``,
        83.0 with ``candidate_parents=12`` (order weights), 95.5 with ``candidate_parents=12, weighting="uniform"``,
        91.3 with the ELBO. Five seeds of the last (``structure_er.py --pd-order-score exact --pd-candidates 12
        --pd-weighting uniform``): linear AUROC 98.4 vs 96.3, but E-SHD 14.2 vs 11.0 and E-F1 80.3 vs 83.9;
        nonlinear 93.4 vs 91.6, E-SHD 17.3 vs 14.9; 215 vs 280 s. A trade-off, so it stays opt-in above 14 nodes.
    :param int max_parents: parent-set cap of the exact order score (``None``: none for ``p ≤ 14``, 4 above unless
        ``candidate_parents`` is given; ``Σ_{k ≤ K} C(p-1, k)`` local scores per node are computed once). Set it at
        least to the largest in-degree you expect.
    :param int candidate_parents: restrict each node's parent sets in the exact order score to its
        ``candidate_parents`` best single parents (:class:`~pyro_dag.structure.exact.OrderScorer` ``candidates``;
        ``2^c`` local scores per node); ``None``: all nodes.
    :param str weighting: how the posterior weighs the particles: ``"order"`` (distinct orders weighted by their
        exact order score, needs ``order_score="exact"``), ``"elbo"`` (by their ELBO, see
        :meth:`StructurePosterior.particle_weights`) or ``"uniform"`` (the paper). Default (``None``): ``"order"``
        with the exact order score, else ``"elbo"`` for ``"linear"`` and ``"bge"`` (exact, full-data likelihoods),
        ``"uniform"`` otherwise (minibatch ELBO estimates are too noisy to weigh orders). All are available
        afterwards through the ``weighting`` argument of :meth:`StructurePosterior.edge_probs` and
        :meth:`StructurePosterior.sample`.
    :param float order_history: with ``weighting="order"``: the fraction of the run, at its end, over which every
        distinct order the particles visit is kept (:attr:`StructurePosterior.visited`); the posterior then mixes
        over all of them, each weighted by its exact score (:meth:`StructurePosterior.support`), instead of over
        the ``K`` final positions only. ``0`` keeps the particles only. Default (``None``): 0.5 with
        ``weighting="order"``. Measured on Sachs (fold 0, BGe): the 40 final orders held 1e-3 of the exact
        posterior's order mass and their weighted edge probabilities were 0.065 (mean abs) from the exact ones;
        the 7547 orders visited over the last half (every 5th step) held 0.07 and gave 0.033 (0.014 with exact
        conditionals; every step: about 19000 orders, 0.14 of the mass, Sachs folds 0-2 mean error 0.04): the
        posterior over orders is flat, so the chains' history, not their end points, is the sample.
    :param list node_names: names of the columns.
    :param dtype: float dtype (float32 or float64); ``device``: torch device (default: the data's, else CPU).
    :param callable callback: ``callback(step, posterior_svgd, loss)`` after every step.
    :returns: :class:`StructurePosterior`.

    Example::

        post = pyro_dag.structure.fit(X, likelihood="linear", num_steps=500)
        P = post.edge_probs()          # [p, p], P[i, j] = P(i -> j)
        dags = post.sample(1000)       # [1000, p, p], all acyclic
    """
    import time

    from tqdm.auto import tqdm

    if weighting not in (None, "uniform", "elbo", "order"):
        raise ValueError(f"weighting must be 'uniform', 'elbo', 'order' or None; got {weighting!r}")
    if order_score not in (None, "exact", "elbo"):
        raise ValueError(f"order_score must be 'exact', 'elbo' or None; got {order_score!r}")
    if likelihood not in _LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {_LIKELIHOODS}; got {likelihood!r}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64; got {dtype}")
    if device is None:
        device = data.device if torch.is_tensor(data) else torch.device("cpu")
    X, names = _to_tensor(data, dtype, device)
    N, p = X.shape
    if node_names is not None:
        if len(node_names) != p:
            raise ValueError(f"node_names has {len(node_names)} names but the data have {p} columns")
        names = [str(n) for n in node_names]
    if standardize:
        sd = X.std(0)
        if (sd == 0).any():
            raise ValueError(f"columns {(sd == 0).nonzero().flatten().tolist()} are constant; drop them before fitting")
        X = (X - X.mean(0)) / sd
    if num_steps is None:
        num_steps = 1000 if likelihood == "linear" else 2000
    collapsed = likelihood in ("linear", "bge")
    if num_particles is None:
        num_particles = 40 if collapsed else 20
    if swap_every is None:
        swap_every = 1 if collapsed else 5
    if swap_until is None:
        swap_until = 1.0 if collapsed else 0.9
    if swap_moves is None:
        swap_moves = "mixed" if collapsed else "adjacent"
    if swap_moves not in ("adjacent", "mixed"):
        raise ValueError(f"swap_moves must be 'adjacent' or 'mixed' (or None for the default); got {swap_moves!r}")
    if not isinstance(num_particles, numbers.Integral) or num_particles < 1:
        raise ValueError(f"num_particles must be a positive integer; got {num_particles!r}")
    if not isinstance(num_steps, numbers.Integral) or num_steps < 1:
        raise ValueError(f"num_steps must be a positive integer; got {num_steps!r}")
    if isinstance(order_temperature, numbers.Real):
        tau0 = tau1 = float(order_temperature)
    else:
        tau0, tau1 = (float(t) for t in order_temperature)
    if not (tau0 > 0 and tau1 > 0):
        raise ValueError(f"order_temperature must be positive; got {order_temperature!r}")
    if not (isinstance(likelihood_scale, numbers.Real) and likelihood_scale > 0):
        raise ValueError(f"likelihood_scale must be a positive number; got {likelihood_scale!r}")
    if edge_offset is None:
        edge_offset = likelihood in ("linear", "bge")
    if order_score is None:
        order_score = "exact" if (likelihood in ("linear", "bge") and p <= 14) else "elbo"
    if order_score == "exact" and likelihood not in ("linear", "bge"):
        raise ValueError(f"order_score='exact' needs a collapsed likelihood ('linear' or 'bge'); got {likelihood!r}")
    if candidate_parents is not None and not (isinstance(candidate_parents, numbers.Integral) and candidate_parents > 0):
        raise ValueError(f"candidate_parents must be a positive integer or None; got {candidate_parents!r}")
    if max_parents is None:
        max_parents = None if (p <= 14 or candidate_parents is not None) else 4
    elif not (isinstance(max_parents, numbers.Integral) and max_parents >= 0):
        raise ValueError(f"max_parents must be a non-negative integer or None; got {max_parents!r}")
    if weighting is None:
        weighting = "order" if order_score == "exact" else ("elbo" if likelihood in ("linear", "bge") else "uniform")
    if weighting == "order" and order_score != "exact":
        raise ValueError("weighting='order' needs order_score='exact'")
    if order_history is None:
        order_history = 0.5 if weighting == "order" else 0.0
    if not (isinstance(order_history, numbers.Real) and 0 <= order_history <= 1):
        raise ValueError(f"order_history must be a fraction in [0, 1]; got {order_history!r}")
    if order_history > 0 and weighting != "order":
        raise ValueError("order_history keeps visited orders for weighting='order' (exact order scores); "
                         f"got weighting={weighting!r}: set order_history=0 or weighting='order'")
    if soft_warmup is None:
        soft_warmup = 0.0 if likelihood in ("linear", "bge") else 0.3
    if not (isinstance(soft_warmup, numbers.Real) and 0 <= soft_warmup <= 1):
        raise ValueError(f"soft_warmup must be a fraction in [0, 1]; got {soft_warmup!r}")
    if batch_size is not None and batch_size >= N:
        batch_size = None

    alpha, beta = _prior(p, edge_beliefs, expected_parents, prior_concentration, belief_strength, dtype, device)
    pyro.set_rng_seed(seed)
    store = pyro.get_param_store()
    t0 = time.perf_counter()
    losses = []
    with store.scope() as state:
        if likelihood == "linear":
            mech = LinearGaussianSEM(p, marginalize=True)
        elif likelihood == "bge":
            mech = BGeSEM(p)
        elif likelihood == "linear-sites":
            mech = LinearGaussianSEM(p, marginalize=False, subsample_size=batch_size)
        else:
            mech = MLPSEM(p, hidden=mlp_hidden, subsample_size=batch_size, kl_weight=param_kl_weight)
        scorer = None
        if order_score == "exact":
            from .exact import OrderScorer

            X64 = X.detach().to(device="cpu", dtype=torch.float64)
            scorer = OrderScorer(mech, X64, alpha / (alpha + beta), max_parents=max_parents,
                                 candidates=candidate_parents)
        mech = mech.to(dtype=dtype, device=device)
        model = StructureModel(mech, alpha, beta)
        guide = AutoEdgeFlowGuide(
            model,
            mechanism=mech,
            hidden_dims=flow_hidden,
            num_blocks=flow_blocks,
            temperature=edge_temperature,
            edge_relaxation=edge_relaxation,
            edge_offset=edge_offset,
            offset_gradient_cap=offset_gradient_cap,
            order_temperature=tau0,
            sinkhorn_iters=sinkhorn_iters,
        )
        kernel = OrderMaskKernel(temperature=tau0, sinkhorn_iters=sinkhorn_iters)
        svgd_ref = {}

        def optim_args(name):
            if name == svgd_ref["svgd"].particle_name:
                return {"lr": particle_lr, "clip_norm": 10.0}
            if ".affine." in name:  # the per-edge location / scale of the flow: low-dimensional, well conditioned
                return {"lr": affine_lr, "clip_norm": 10.0}
            return {"lr": lr, "clip_norm": 10.0}

        optim = pyro.optim.ClippedAdam(optim_args)
        svgd = OrderSVGD(
            model,
            guide,
            optim,
            num_particles=num_particles,
            max_plate_nesting=1,
            kernel=kernel,
            loss=TraceMeanField_ELBO(),
            repulsion_cap=repulsion_cap,
        )
        svgd_ref["svgd"] = svgd
        visited_r = []  # [K, p] particles of each recorded step (order_history); deduplicated by order at the end
        bar = tqdm(range(num_steps), disable=not progress, desc="pyro_dag.fit", leave=False)
        for step in bar:
            frac = step / max(1, num_steps - 1)
            tau = tau0 + (tau1 - tau0) * frac
            guide.order_temperature = tau
            kernel.temperature = tau
            model.order_temperature, model.sinkhorn_iters = tau, sinkhorn_iters
            model.soft_mix = max(0.0, 1.0 - step / (soft_warmup * num_steps)) if soft_warmup > 0 else 0.0
            if warmup > 0:
                ramp = (1.0 / N) ** max(0.0, 1.0 - step / (warmup * num_steps))
                model.likelihood_scale = float(likelihood_scale * min(1.0, ramp))
            else:
                model.likelihood_scale = float(likelihood_scale)
            loss = svgd.step(X)
            losses.append(loss)
            if swap_every and step % swap_every == 0 and step < swap_until * num_steps:
                svgd.swap_step(X, moves=swap_moves, order_score=None if scorer is None else
                               (lambda r: scorer(r, scale=model.likelihood_scale)))
            if order_history > 0 and step >= (1.0 - order_history) * num_steps:
                visited_r.append(svgd.particles.detach().clone())
            if callback is not None:
                callback(step, svgd, loss)
            if progress and (step % 25 == 0 or step == num_steps - 1):
                bar.set_postfix(loss=f"{loss:.4g}", tau=f"{tau:.3g}")
        bar.close()
    wall = time.perf_counter() - t0
    settings = dict(
        likelihood=likelihood, num_particles=num_particles, num_steps=num_steps, seed=seed,
        expected_parents=expected_parents, prior_concentration=prior_concentration, lr=lr, affine_lr=affine_lr,
        particle_lr=particle_lr,
        batch_size=batch_size, order_temperature=(tau0, tau1), sinkhorn_iters=sinkhorn_iters,
        edge_temperature=edge_temperature, edge_relaxation=edge_relaxation, edge_offset=edge_offset,
        offset_gradient_cap=offset_gradient_cap, swap_every=swap_every,
        swap_until=swap_until, swap_moves=swap_moves, warmup=warmup, soft_warmup=soft_warmup, param_kl_weight=param_kl_weight,
        likelihood_scale=likelihood_scale, weighting=weighting, repulsion_cap=repulsion_cap, standardize=standardize,
        order_score=order_score, max_parents=max_parents, candidate_parents=candidate_parents,
        order_history=order_history,
    )
    post = StructurePosterior(model, guide, svgd, X, names, state, losses, settings, wall, weighting=weighting)
    post.order_scorer = scorer
    if visited_r:
        visited = torch.cat(visited_r, 0)
        post.visited = visited[_distinct_orders(visited)[1]]  # the first potentials seen with each order
    return post

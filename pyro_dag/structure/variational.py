"""The result of :func:`~pyro_dag.structure.fit`: a posterior over DAGs from SVGD particles and the edge flow."""
import numbers

import pyro
import torch

from .posterior import DAGPosterior

__all__ = ["StructurePosterior"]


class StructurePosterior(DAGPosterior):
    """Result of :func:`~pyro_dag.structure.fit`: a posterior over DAGs with the fitted Pyro objects (Zinage 2026,
    *SVI-DAG*, arXiv:2608.04930, §4.1). Queries: the :class:`~pyro_dag.structure.posterior.DAGPosterior` interface
    (:meth:`edge_probs`, :meth:`sample`, :meth:`to_networkx`), with a keyword ``weighting`` to override
    :attr:`weighting`.

    Attributes: ``config`` (the resolved :class:`~pyro_dag.structure.FitConfig`), ``model``
    (:class:`~pyro_dag.structure.StructureModel`), ``guide`` (:class:`~pyro_dag.structure.AutoEdgeFlowGuide`),
    ``svgd`` (:class:`~pyro_dag.structure.OrderSVGD`), ``mechanism``, ``data`` (the standardised ``[N, p]`` tensor
    used for fitting), ``node_names``, ``losses`` (one float per step), ``param_state`` (the Pyro param-store scope
    holding the fitted parameters), ``settings`` (a dict of the main config fields), ``wall_time`` (seconds),
    ``order_scorer`` (an :class:`~pyro_dag.structure.OrderScorer` with ``order_score="exact"``) and ``visited``
    (``[M, p]`` potentials of the distinct orders visited late in the run, ``order_history``; else ``None``).

    Posterior draws follow the paper: pick a particle ``r_k`` (uniformly, or by its order's ELBO weight, see
    :meth:`particle_weights`; attribute ``weighting``; with ``weighting="order"`` any visited order, see
    :meth:`support`), ``gamma ~ q_phi(gamma | r_k)``,
    ``B_ij ~ q(B_ij | gamma, r_k) = Bernoulli(sigmoid(gamma_ij + delta_ij(r_k)))`` (``delta = 0`` in the paper's
    guide, see :class:`~pyro_dag.structure.EdgeOffsetNet`), ``A = B * M(r_k)``; every sample is a DAG.
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
        self.config = None  # the resolved FitConfig (set by fit)

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
        (Wang, Wicker & Kwiatkowska 2022, *Tractable Uncertainty for Structure Learning*). It corrects the equal
        weighting of particles stuck in worse orders. ``"order"``: the
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
        "support-restricted" posterior of the visited orders (Wang, Wicker & Kwiatkowska 2022, *Tractable Uncertainty for Structure Learning*) with the orders of the whole
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

    def edge_probs(self, num_samples=1000, seed=None, weighting=None, *, given=None, return_stderr=False):
        """``[p, p]`` posterior edge probabilities ``P(i -> j)`` (Rao-Blackwellised over the Bernoulli edges).

        ``E[sigmoid(gamma_ij) M_ij(r)]`` over ``num_samples`` potentials drawn from :meth:`support` (the particles,
        or the visited orders) by systematic resampling of their weights (each potential ``num_samples * w``
        times, rounded), one flow draw each: the Monte Carlo budget is ``num_samples`` however many orders the
        support holds.

        With evidence ``given`` (``{(i, j): present}``, see :class:`~pyro_dag.structure.posterior.DAGPosterior`):
        the edge frequencies among the ``num_samples`` DAG samples that satisfy it (an error if none does), with
        standard errors ``sqrt(P (1 - P) / n_match)`` under ``return_stderr`` (the Rao-Blackwellised unconditional
        estimate reports the binomial ``sqrt(P (1 - P) / num_samples)``, an upper bound).
        """
        if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")
        ev = self.parse_evidence(given)
        if ev:
            self._weighting_override = weighting
            try:
                return self._sample_conditional_edge_probs(ev, num_samples, seed, return_stderr)
            finally:
                self._weighting_override = None
        P = self._rb_edge_probs(num_samples, seed, weighting)
        if return_stderr:
            return P, (P * (1 - P) / num_samples).sqrt()
        return P

    def _unconditional_samples(self, num_samples, seed):
        return self.sample(num_samples, seed, weighting=getattr(self, "_weighting_override", None))

    def _rb_edge_probs(self, num_samples, seed, weighting):
        r, w = self.support(weighting)
        store_scope, rng = self._generator_scope(seed)
        with store_scope, rng, torch.no_grad():
            if seed is not None:
                torch.manual_seed(seed)
            u = (torch.arange(num_samples, dtype=w.dtype, device=w.device) + torch.rand((), dtype=w.dtype,
                                                                                       device=w.device)) / num_samples
            idx = torch.searchsorted(w.cumsum(0), u).clamp(max=w.shape[0] - 1)
            return sum(self.guide.edge_probs(rc, 1).sum(0) for rc in r[idx].split(4096)) / num_samples

    def sample(self, num_samples=1000, seed=None, weighting=None, *, given=None, max_draws=None):
        """``[num_samples, p, p]`` hard DAG samples (every one acyclic); potentials of :meth:`support` (particles or
        visited orders) drawn by their weights, one flow draw each.

        With evidence ``given``: rejection sampling, batches of draws until ``num_samples`` satisfy it, at most
        ``max_draws`` draws (default ``100 * num_samples``; then an error saying how many were accepted).
        """
        if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")
        ev = self.parse_evidence(given, condition=True)
        if not ev:
            return self._sample(num_samples, seed, weighting)
        max_draws = 100 * num_samples if max_draws is None else int(max_draws)
        kept, drawn, batch = [], 0, max(num_samples, 1000)
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        while sum(len(k) for k in kept) < num_samples and drawn < max_draws:
            sub_seed = int(torch.randint(0, 2**62, (), generator=gen)) if gen is not None else None
            S = self._sample(batch, sub_seed, weighting)
            drawn += batch
            kept.append(S[ev.holds(S)])
        S = torch.cat(kept)
        if len(S) < num_samples:
            raise ValueError(f"only {len(S)} of {drawn} posterior samples satisfy the evidence {ev.edges} (estimated "
                             f"probability {len(S) / drawn:.2g}); raise max_draws or use an exact posterior")
        return S[:num_samples]

    def _sample(self, num_samples, seed, weighting):
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

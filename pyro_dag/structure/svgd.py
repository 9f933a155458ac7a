"""SVGD over node-order potentials with a kernel on relaxed order masks (Zinage 2026, *SVI-DAG*, arXiv:2608.04930, §3.6, Eq. 6).

Built next to :mod:`pyro.infer.svgd` and in its style: :class:`OrderSVGD` vectorises the model over a particle
plate, computes the gradient of an ordinary Pyro ELBO with one ``backward()``, replaces the gradient of the
particles by the SVGD direction and lets a :class:`~pyro.optim.PyroOptim` step *all* parameters -- the particles
and the guide's parameters (flow, hypernetworks), which are thereby trained jointly on
``J(phi) = (1 / K) sum_k L(phi; r_k)`` (SVI-DAG §3.6, Alg. 1).

Differences from :class:`pyro.infer.SVGD`, which cannot do this: the particles are only the *potential* site
``r``; every other latent variable keeps its own (conditional) guide, evaluated per particle; and the kernel lives
in the feature space ``psi(r) = vec(M_tau(r))`` of relaxed order masks, not on raw particles.
"""
import math
import numbers
import warnings

import pyro
import torch
from pyro import poutine
from pyro.distributions import Delta
from pyro.infer import Trace_ELBO
from pyro.infer.svgd import SteinKernel
from pyro.infer.util import zero_grads
from pyro.poutine.messenger import Messenger

from .sinkhorn import _cached_mask_and_jacobian, soft_order_mask

__all__ = ["OrderMaskKernel", "OrderSVGD"]


class OrderMaskKernel(SteinKernel):
    r"""RBF kernel on relaxed order masks, ``k(r, r') = exp(-||psi(r) - psi(r')||^2 / h)`` (SVI-DAG §3.6).

    ``psi(r) = vec(M_tau(r))`` is the Sinkhorn-relaxed "``i`` before ``j``" matrix
    (:func:`~pyro_dag.structure.soft_order_mask`, centred and RMS-normalised potentials), so two
    potential vectors are close iff they induce similar orders; the kernel ignores shifts (and, with scale
    normalisation, rescalings) of ``r``. Its pull-back to potential space is positive definite. Gradients with
    respect to the particles go through the Sinkhorn iterations with the Jacobian ``J_psi`` (forward mode).

    Bandwidth (paper code): the median heuristic ``h = max(median(d^2) / log(K + 1), 1e-6)`` over all ``K x K``
    squared feature distances *including the zero diagonal*, times ``bandwidth_factor``; or a fixed ``bandwidth``.

    :param float temperature: Sinkhorn temperature ``tau`` (an attribute; anneal it together with the guide's).
    :param int sinkhorn_iters: ``K_S``.
    :param bool scale_normalize: RMS-normalise the potentials.
    :param float bandwidth: fixed ``h``; ``None`` uses the median heuristic.
    :param float bandwidth_factor: multiplies the median-heuristic bandwidth.

    Also usable as a ``multivariate``-mode kernel of :class:`pyro.infer.SVGD` (:meth:`log_kernel_and_grad`).
    """

    def __init__(self, temperature=0.1, sinkhorn_iters=100, scale_normalize=True, bandwidth=None, bandwidth_factor=1.0):
        if not isinstance(temperature, numbers.Real) or temperature <= 0:
            raise ValueError(f"temperature must be a positive number; got {temperature!r}")
        if bandwidth is not None and not bandwidth > 0:
            raise ValueError(f"bandwidth must be positive or None (median heuristic); got {bandwidth!r}")
        if not bandwidth_factor > 0:
            raise ValueError(f"bandwidth_factor must be positive; got {bandwidth_factor!r}")
        self.temperature = float(temperature)
        self.sinkhorn_iters = int(sinkhorn_iters)
        self.scale_normalize = bool(scale_normalize)
        self.bandwidth = bandwidth
        self.bandwidth_factor = float(bandwidth_factor)

    def features(self, particles):
        """``psi(r)``: ``[K, p]`` potentials -> ``[K, p * p]`` flattened relaxed order masks (differentiable)."""
        M = soft_order_mask(particles, self.temperature, self.sinkhorn_iters, self.scale_normalize)
        return M.flatten(-2)

    def kernel(self, x, y, bandwidth):
        """Differentiable ``k(x_n, y_m)`` ``[N, M]`` for potentials ``x`` ``[N, p]``, ``y`` ``[M, p]`` and a bandwidth."""
        fx, fy = self.features(x), self.features(y)
        return torch.exp(-(fx.unsqueeze(1) - fy.unsqueeze(0)).pow(2).sum(-1) / bandwidth)

    def _bandwidth(self, sqdist):
        if self.bandwidth is not None:
            return sqdist.new_tensor(float(self.bandwidth))
        K = sqdist.shape[0]
        h = self.bandwidth_factor * sqdist.flatten().median() / math.log(K + 1)
        return h.clamp_min(1e-6)

    def _parts(self, particles):
        if particles.dim() != 2:
            raise ValueError(f"particles must be [K, p]; got {tuple(particles.shape)}")
        K, p = particles.shape
        M, J = _cached_mask_and_jacobian(particles.detach(), self.temperature, self.sinkhorn_iters,
                                         self.scale_normalize, True)
        feats = M.reshape(K, p * p)
        jac = J.reshape(K, p * p, p)  # [K, F, p]
        diff = feats.unsqueeze(1) - feats.unsqueeze(0)  # diff[n, m] = psi_n - psi_m
        sqdist = diff.pow(2).sum(-1)
        h = self._bandwidth(sqdist)
        # d/dx_m of -||psi_n - psi(x_m)||^2 / h = (2 / h) J_m^T (psi_n - psi_m)
        grad_log = torch.einsum("nmf,mfd->nmd", diff, jac) * (2.0 / h)
        self.last_bandwidth = h.detach()
        return sqdist, h, grad_log

    def kernel_and_grad(self, particles):
        """Kernel matrix and its gradients.

        :param torch.Tensor particles: ``[K, p]``.
        :returns: ``(kernel, grad)`` with ``kernel[n, m] = k(r_n, r_m)`` ``[K, K]`` and
            ``grad[n, m] = d k(r_n, r_m) / d r_m`` ``[K, K, p]``.
        """
        sqdist, h, grad_log = self._parts(particles)
        kernel = torch.exp(-sqdist / h)
        return kernel, kernel.unsqueeze(-1) * grad_log

    def log_kernel_and_grad(self, particles):
        """:class:`pyro.infer.svgd.SteinKernel` API (multivariate mode): ``log_kernel`` ``[K, K, p]`` summing to
        ``log k`` over the last dim, and ``d log k(r_n, r_m) / d r_m`` ``[K, K, p]``."""
        sqdist, h, grad_log = self._parts(particles)
        D = particles.shape[-1]
        log_kernel = (-sqdist / h / D).unsqueeze(-1).expand(-1, -1, D)
        return log_kernel, grad_log


class _SwapPotentials(Messenger):
    """Replaces the distribution of the potential site by a Delta at the particles (initialising them lazily)."""

    def __init__(self, svgd):
        super().__init__()
        self.svgd = svgd
        self.seen = False

    def _pyro_sample(self, msg):
        if msg["name"] != self.svgd.potential_site:
            return
        fn = msg["fn"]
        if len(fn.event_shape) != 1:
            raise ValueError(
                f"OrderSVGD: the guide's site '{msg['name']}' must be a vector [p] (event_dim 1); "
                f"got event shape {tuple(fn.event_shape)}"
            )
        particles = self.svgd._get_particles(fn)
        shape = (self.svgd.num_particles,) + (1,) * self.svgd.max_plate_nesting + tuple(fn.event_shape)
        msg["fn"] = Delta(particles.reshape(shape), event_dim=1)
        msg["value"] = None
        self.seen = True


class OrderSVGD:
    r"""Stein variational gradient descent over node-order potentials, jointly with a Pyro guide (SVI-DAG §3.6).

    ``K`` particles ``r_k`` replace ``q(r)``. Each step:

    1. run ``loss.differentiable_loss(model, guide)`` with the model and guide vectorised over a particle plate
       (``dim = -max_plate_nesting - 1``) and the guide's potential site replaced by ``Delta(r_k)``; the loss is
       ``-(1 / K) sum_k L_k`` with ``L_k`` the ELBO of particle ``k`` including ``log p(r_k)`` -- so one backward pass
       gives the (straight-through) scores ``g_k = grad_{r_k} [L(phi; r_k) + log p(r_k)]`` and the gradient of
       ``-J(phi)`` for all guide parameters;
    2. sanitise the scores (``nan_to_num``, per-particle norm clip ``particle_grad_clip``);
    3. SVGD direction (Eq. 6) with the :class:`OrderMaskKernel`:
       ``phi_k = (1 / K) sum_j [k(r_j, r_k) g_j + w_rep grad_{r_j} k(r_j, r_k)]``; the repulsion is capped at
       ``repulsion_cap * ||attraction_k||`` (the median bandwidth collapses when particles agree);
    4. set the particles' gradient to ``-phi`` and step every parameter with ``optim``; clamp the particles to
       ``[-clamp, clamp]``.

    A step whose loss or gradients are not finite is skipped (counted in :attr:`num_skipped`, with a warning).

    With ``repulsion_weight=0`` and one particle (or a kernel that is the identity matrix) this is plain gradient
    ascent on each particle's ELBO.

    The model and the guide must broadcast over the extra leading particle dimension (standard Pyro
    vectorisation). The guide must sample the potential site (any distribution with event shape ``[p]``; it is
    replaced, and its first draw of ``K`` values initialises the particles), e.g. :class:`AutoEdgeFlowGuide`.

    :param callable model: Pyro model.
    :param callable guide: Pyro guide (conditional on the potentials it samples).
    :param pyro.optim.PyroOptim optim: optimiser for the particles and all guide parameters (per-parameter
        options via a callable, e.g. a larger learning rate for :attr:`particle_name`).
    :param int num_particles: ``K`` (paper: 20).
    :param int max_plate_nesting: plates in the model (the particle plate goes to the left of them).
    :param str potential_site: name of the potential site.
    :param OrderMaskKernel kernel: defaults to ``OrderMaskKernel()``.
    :param loss: a Pyro ELBO with ``differentiable_loss`` (default :class:`~pyro.infer.Trace_ELBO`).
    :param float repulsion_weight: ``w_rep`` (paper: 1).
    :param float repulsion_cap: ``c`` (``None``: uncapped).
    :param float particle_grad_clip: per-particle norm bound of the scores and of ``phi`` (paper: 10; ``None``: off).
    :param float clamp: particles are clamped to ``[-clamp, clamp]`` (paper: 5; ``None``: off).

    Example::

        guide = AutoEdgeFlowGuide(model, mechanism=sem)
        optim = pyro.optim.ClippedAdam(lambda name: {"lr": 0.05 if name == "order_svgd.r" else 3e-3})
        svgd = OrderSVGD(model, guide, optim, num_particles=20, max_plate_nesting=1)
        for step in range(2000):
            svgd.step(X)
        svgd.particles                                    # [20, p]
    """

    def __init__(
        self,
        model,
        guide,
        optim,
        num_particles=20,
        max_plate_nesting=1,
        potential_site="r",
        kernel=None,
        loss=None,
        repulsion_weight=1.0,
        repulsion_cap=1.0,
        particle_grad_clip=10.0,
        clamp=5.0,
    ):
        if not callable(model) or not callable(guide):
            raise TypeError("OrderSVGD needs a callable model and a callable guide")
        if not isinstance(optim, pyro.optim.PyroOptim):
            raise TypeError(f"optim must be a pyro.optim.PyroOptim (e.g. pyro.optim.Adam); got {type(optim).__name__}")
        if not isinstance(num_particles, numbers.Integral) or num_particles < 1:
            raise ValueError(f"num_particles must be a positive integer; got {num_particles!r}")
        if not isinstance(max_plate_nesting, numbers.Integral) or max_plate_nesting < 0:
            raise ValueError(f"max_plate_nesting must be a non-negative integer; got {max_plate_nesting!r}")
        kernel = OrderMaskKernel() if kernel is None else kernel
        if not hasattr(kernel, "kernel_and_grad"):
            raise TypeError("kernel must provide kernel_and_grad(particles) -> (K [K, K], dK/dr_m [K, K, p]), "
                            "e.g. OrderMaskKernel")
        if not repulsion_weight >= 0:
            raise ValueError(f"repulsion_weight must be >= 0; got {repulsion_weight!r}")
        for name, v in (("repulsion_cap", repulsion_cap), ("particle_grad_clip", particle_grad_clip), ("clamp", clamp)):
            if v is not None and not v > 0:
                raise ValueError(f"{name} must be positive or None; got {v!r}")
        self.model = model
        self.guide = guide
        self.optim = optim
        self.num_particles = int(num_particles)
        self.max_plate_nesting = int(max_plate_nesting)
        self.potential_site = potential_site
        self.kernel = kernel
        self.loss = Trace_ELBO() if loss is None else loss
        self.repulsion_weight = float(repulsion_weight)
        self.repulsion_cap = repulsion_cap
        self.particle_grad_clip = particle_grad_clip
        self.clamp = clamp
        self.particle_name = f"order_svgd.{potential_site}"
        self.plate_name = "order_svgd_particles"
        self.last_stats = {}
        self.num_skipped = 0

    # -- particles ---------------------------------------------------------------------------------------
    def _get_particles(self, fn):
        store = pyro.get_param_store()
        if self.particle_name in store:
            particles = pyro.param(self.particle_name)
            if particles.shape != (self.num_particles,) + tuple(fn.event_shape):
                raise ValueError(
                    f"param store holds '{self.particle_name}' of shape {tuple(particles.shape)}, but this run has "
                    f"{self.num_particles} particles of {tuple(fn.event_shape)}; call pyro.clear_param_store()"
                )
            return particles
        with torch.no_grad():
            init = fn.sample((self.num_particles,))
            init = init.reshape((self.num_particles,) + tuple(fn.event_shape))
        return pyro.param(self.particle_name, init.detach().clone())

    @property
    def particles(self):
        """The current potential particles ``[K, p]`` (detached)."""
        return pyro.param(self.particle_name).detach()

    def _plate(self):
        return pyro.plate(self.plate_name, self.num_particles, dim=-self.max_plate_nesting - 1)

    def vectorized_model(self, *args, **kwargs):
        """The model inside the particle plate."""
        with self._plate():
            return self.model(*args, **kwargs)

    def vectorized_guide(self, *args, **kwargs):
        """The guide inside the particle plate with the potential site replaced by the particles."""
        swap = _SwapPotentials(self)
        with self._plate(), swap:
            out = self.guide(*args, **kwargs)
        if not swap.seen:
            raise ValueError(
                f"OrderSVGD: the guide never sampled the potential site '{self.potential_site}'. The guide must sample "
                "it (any [p] distribution; OrderSVGD swaps in the particles), e.g. AutoEdgeFlowGuide."
            )
        return out

    # -- SVGD --------------------------------------------------------------------------------------------
    @staticmethod
    def _clip_rows(x, bound):
        if bound is None:
            return x
        norm = x.norm(dim=-1, keepdim=True)
        return x * (bound / norm.clamp_min(bound))

    def svgd_direction(self, particles, scores):
        """The SVGD update direction ``phi`` ``[K, p]`` (Eq. 6) from particles and their scores ``[K, p]``.

        Returns ``(phi, attraction, repulsion)``.
        """
        K = particles.shape[0]
        kern, kgrad = self.kernel.kernel_and_grad(particles)
        attraction = kern @ scores / K  # kern symmetric: sum_j k(r_j, r_k) g_j
        repulsion = self.repulsion_weight * kgrad.sum(1) / K  # sum_j d k(r_k, r_j) / d r_j
        if self.repulsion_cap is not None and self.repulsion_weight > 0:
            cap = self.repulsion_cap * attraction.norm(dim=-1, keepdim=True)
            repulsion = repulsion * (cap / repulsion.norm(dim=-1, keepdim=True).clamp_min(1e-30)).clamp(max=1.0)
        phi = torch.nan_to_num(attraction + repulsion, nan=0.0, posinf=0.0, neginf=0.0)
        return self._clip_rows(phi, self.particle_grad_clip), attraction, repulsion

    def step(self, *args, **kwargs):
        """One joint step: particle SVGD update and an optimiser step of every guide parameter.

        :returns: the loss ``-(1/K) sum_k L_k`` (float).
        """
        K = self.num_particles
        with poutine.trace(param_only=True) as param_capture:
            loss = self.loss.differentiable_loss(self.vectorized_model, self.vectorized_guide, *args, **kwargs) / K
            loss.backward()
        params = set(site["value"].unconstrained() for site in param_capture.trace.nodes.values())
        finite = [torch.isfinite(loss)] + [torch.isfinite(p.grad).all() for p in params if p.grad is not None]
        if not bool(torch.stack(finite).all()):
            # a non-finite Monte Carlo draw (e.g. an overflow in one particle) must not poison the parameters
            zero_grads(params)
            self.num_skipped += 1
            if self.num_skipped in (1, 10, 100):
                warnings.warn(f"OrderSVGD: skipped {self.num_skipped} step(s) with a non-finite loss or gradient",
                              RuntimeWarning)
            self.last_stats = {"loss": float("nan")}
            return float("nan")
        particles = pyro.param(self.particle_name).unconstrained()
        if particles.grad is None:
            raise RuntimeError(
                f"OrderSVGD: the loss does not depend on the particles '{self.particle_name}'; is the potential site "
                "used by the model?"
            )
        with torch.no_grad():
            scores = torch.nan_to_num(-particles.grad * K, nan=0.0, posinf=0.0, neginf=0.0)
            scores = self._clip_rows(scores, self.particle_grad_clip)
            phi, att, rep = self.svgd_direction(particles.detach(), scores)
            particles.grad = -phi
            self.last_stats = {
                "loss": loss.item(),
                "score_norm": scores.norm(dim=-1).mean().item(),
                "attraction_norm": att.norm(dim=-1).mean().item(),
                "repulsion_norm": rep.norm(dim=-1).mean().item(),
            }
        self.optim(params)
        zero_grads(params)
        if self.clamp is not None:
            with torch.no_grad():
                particles.clamp_(-self.clamp, self.clamp)
        return self.last_stats["loss"]

    @torch.no_grad()
    def particle_elbos(self, *args, num_samples=10, include_potential_prior=False, **kwargs):
        """Per-particle ELBO estimates ``L(phi; r_k)`` ``[K]`` (SVI-DAG Eq. 5), averaged over ``num_samples`` draws.

        ``L(phi; r_k) <= log p(D | r_k)`` is the evidence lower bound given the order of particle ``k``; weights
        ``w_k ∝ exp(L_k)`` over distinct orders turn the particle set into a mixture over orders (the
        "support-restricted posterior" of Wang, Wicker & Kwiatkowska 2022). Every sample site's (scaled) log-density is summed
        over all dimensions but the particle dimension; ``log p(r_k)`` is left out unless
        ``include_potential_prior`` (orders have a uniform prior; the density of ``r`` inside an order does not
        matter).
        """
        from pyro.poutine.util import prune_subsample_sites

        dim = -self.max_plate_nesting - 1
        total = None
        for _ in range(num_samples):
            guide_trace = poutine.trace(self.vectorized_guide).get_trace(*args, **kwargs)
            model_trace = poutine.trace(poutine.replay(self.vectorized_model, trace=guide_trace)).get_trace(
                *args, **kwargs
            )
            elbo = 0.0
            for trace, sign in ((model_trace, 1.0), (guide_trace, -1.0)):
                trace = prune_subsample_sites(trace)
                trace.compute_log_prob()
                for name, site in trace.nodes.items():
                    if site["type"] != "sample" or (name == self.potential_site and not include_potential_prior):
                        continue
                    lp = site["log_prob"]  # scaled (subsampling) and masked by compute_log_prob
                    if lp.dim() < -dim:
                        lp = lp.reshape((1,) * (-dim - lp.dim()) + tuple(lp.shape))
                    lp = lp.movedim(lp.dim() + dim, 0)
                    lp = lp.reshape(lp.shape[0], -1).sum(-1)
                    elbo = elbo + sign * lp.expand(self.num_particles)
            total = elbo if total is None else total + elbo
        return total / num_samples

    @torch.no_grad()
    def swap_step(self, *args, num_samples=1, moves="adjacent", order_score=None, **kwargs):
        """Metropolis-Hastings order moves on the particles, targeting the same ``p(r) exp(L(phi; r))`` as SVGD.

        Each particle proposes to swap the potentials of two nodes that are adjacent in its order (a symmetric
        proposal that leaves ``p(r) = N(0, I)`` unchanged; with ``moves="mixed"`` half of the proposals swap
        two nodes at uniformly random positions instead, which is still symmetric) and accepts with probability
        ``min(1, exp(L(phi; r') - L(phi; r)))``, the ELBOs estimated with common random numbers
        (:meth:`particle_elbos`). Gradients through the relaxed order mask hardly move a particle across an order
        boundary; these discrete moves do. Returns the acceptance rate.

        ``order_score``: optional callable ``potentials [K, p] -> [K]`` used in place of the ELBO, e.g. an
        :class:`~pyro_dag.structure.OrderScorer` giving ``log p(D, order)`` with the edges summed out exactly
        (then the moves are order-MCMC moves on the particles, free of the flow's ELBO gap).
        """
        K = self.num_particles
        particles = pyro.param(self.particle_name).unconstrained()
        r = particles.detach().clone()
        p = r.shape[-1]
        order = torch.argsort(-r, -1)
        if moves not in ("adjacent", "mixed"):
            raise ValueError(f"moves must be 'adjacent' or 'mixed', got {moves!r}")
        pos = torch.randint(0, p - 1, (K,), device=r.device)
        pos2 = pos + 1
        if moves == "mixed":
            far = torch.rand(K, device=r.device) < 0.5
            a = torch.randint(0, p, (K,), device=r.device)
            b = (a + torch.randint(1, p, (K,), device=r.device)) % p    # uniform over the other positions
            pos, pos2 = torch.where(far, a, pos), torch.where(far, b, pos2)
        rows = torch.arange(K, device=r.device)
        i, j = order[rows, pos], order[rows, pos2]
        proposal = r.clone()
        proposal[rows, i], proposal[rows, j] = r[rows, j], r[rows, i]
        if order_score is not None:
            elbos = [torch.as_tensor(order_score(value)).to(r.device) for value in (r, proposal)]
        else:
            seed = int(torch.randint(0, 2**62, ()).item())
            elbos = []
            for value in (r, proposal):
                particles.data.copy_(value)
                with torch.random.fork_rng(devices=[r.device] if r.device.type == "cuda" else []):
                    torch.manual_seed(seed)
                    elbos.append(self.particle_elbos(*args, num_samples=num_samples, **kwargs))
        log_u = torch.rand(K, device=r.device, dtype=r.dtype).log()
        accept = log_u < (elbos[1] - elbos[0]).to(r.dtype)
        particles.data.copy_(torch.where(accept.unsqueeze(-1), proposal, r))
        rate = accept.to(r.dtype).mean().item()
        self.last_stats["swap_acceptance"] = rate
        return rate

    @torch.no_grad()
    def evaluate_loss(self, *args, **kwargs):
        """``-(1/K) sum_k L_k`` without taking a step (float)."""
        return self.loss.loss(self.vectorized_model, self.vectorized_guide, *args, **kwargs) / self.num_particles

"""The GP pieces of each node: inducing inputs, the Cholesky factor of ``K_w(Z_w, Z_w)`` and the whitened
conditional ``p(F_w | U_w, F_Pa(w))`` (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on
Directed Acyclic Graphs", arXiv:2607.09645, Eq. (5) and Eq. (80), App. E.3), with the factor cache of
:meth:`NodeConditionals.fixed_kernels`. A mixin of :class:`~pyro_dag.dgp.DAGDGP`.
"""
import contextlib

import torch

from ..gp.conditional import NonFiniteGramError, cholesky_with_jitter, whitened_conditional, whitened_predictive
from ..utils import broadcast_shapes, is_tracing
from .inputs import DAGInputError

__all__ = ["NodeConditionals"]


def _concat_values(values):
    """Concatenate ``[..., B, d_i]`` tensors along the last dim, broadcasting leading dims."""
    if len(values) == 1:
        return values[0]
    batch = broadcast_shapes(*[v.shape[:-1] for v in values])
    return torch.cat([v.expand(batch + v.shape[-1:]) for v in values], dim=-1)


class NodeConditionals:
    """Inducing inputs, Gram factors and whitened conditionals of a :class:`~pyro_dag.dgp.DAGDGP`'s nodes."""

    # ------------------------------------------------------------------ the GP pieces
    def inducing_inputs(self, w):
        """``Z_w`` ``[M_w, D_w]`` (after set-up)."""
        return self._inducing_Z(w)

    def _inducing_Z(self, w):
        return getattr(self.inducing, w)

    def _check_inducing_finite(self, w, Z, given=False):
        if is_tracing():
            return
        bad = ~torch.isfinite(Z).all(-1)
        if not bool(bad.any()):
            return
        row = int(bad.nonzero()[0])
        if given:
            raise DAGInputError(f"the inducing inputs of node {w!r} are NaN or inf (inducing_inputs[{w!r}], first at "
                                f"row {row}); they are often computed from data with missing values: drop the NaN "
                                "rows before choosing them")
        raise DAGInputError(f"the inducing inputs of node {w!r} are NaN or inf (first at row {row}); the likely "
                            f"cause is NaN in the inputs or parents of {w!r} ({self.parents[w]}) they were "
                            "initialised from, or a non-finite kernel at a latent parent: check them, or pass "
                            f"inducing_inputs={{{w!r}: ...}}")

    def _node_cholesky(self, w):
        kernel = self.kernels[w]
        Z = self._inducing_Z(w)
        # Upper-triangular whitening: see pyro_dag.gp.conditional for why.
        try:
            # per_matrix: with a batch of hyperparameter draws (vectorised particles), each K(Z, Z) gets the jitter
            # it gets alone
            return Z, cholesky_with_jitter(kernel(Z), node=w, jitter=self.jitter, upper=True, per_matrix=True)
        except NonFiniteGramError as e:
            bad = ~torch.isfinite(Z.detach()).all(-1)
            if bool(bad.any()):
                raise NonFiniteGramError(
                    f"the inducing inputs of node {w!r} are NaN or inf (first at row {int(bad.nonzero()[0])}), so "
                    f"its Gram matrix K(Z, Z) is too; they were finite at set-up, so a training step made them "
                    f"non-finite: the likely cause is NaN in the inputs or parents of {w!r} ({self.parents[w]}) or "
                    "a learning rate too large for the scale of the data") from e
            hyper = [n.removesuffix("_unconstrained") for n, p in kernel.named_parameters()
                     if not bool(torch.isfinite(p.detach()).all())]
            if hyper:
                raise NonFiniteGramError(
                    f"the kernel of node {w!r} has non-finite hyperparameters {hyper}, so its Gram matrix K(Z, Z) "
                    "is NaN or inf: training diverged; lower the learning rate or rescale the data") from e
            raise

    def node_conditional(self, w, parent_values, cache=None):
        """Whitened conditional of node ``w`` (Perlino et al. 2026, Eq. (80)).

        :param dict parent_values: ``{parent: [..., B, d_p]}``.
        :returns: ``(a [..., B, M_w], r [..., B])``.
        """
        Z, L = self._cached_cholesky(w, cache)
        x = _concat_values([parent_values[p] for p in self.parents[w]])
        fixed = self.__dict__.get("_fixed_conditionals")
        if fixed is None:
            return whitened_conditional(self.kernels[w], Z, L, x, upper=True)
        if x.requires_grad or not all(p in self.root_nodes for p in self.parents[w]):
            return whitened_conditional(self.kernels[w], Z, L, x, upper=True, inverse=self._fixed_inverse(w, L))
        # Inside fixed_kernels(), a node whose parents are roots sees the same design matrix at every full-batch
        # step: reuse (a, r) while it is the very same tensor, unmodified (identity and version counter; the
        # cache holds a reference, so the identity cannot be recycled).
        hit = fixed.get(w)
        if hit is not None and hit[0] is x and hit[1] == x._version:
            return hit[2]
        out = whitened_conditional(self.kernels[w], Z, L, x, upper=True)
        fixed[w] = (x, x._version, out)
        return out

    def _cached_cholesky(self, w, cache):
        if cache is not None and w in cache:
            return cache[w]
        Z, L = self._node_cholesky(w)
        if cache is not None:
            cache[w] = (Z, L)
        return Z, L

    def node_predictive(self, w, parent_values, m, S, cache=None):
        """Predictive mean and variance of a one-output node ``w`` under ``q(V_w) = N(m, S)`` (Perlino et al. 2026,
        Eq. (93)), the conditional and the moments in one op (:func:`~pyro_dag.gp.conditional.whitened_predictive`).

        :param dict parent_values: ``{parent: [..., B, d_p]}``. :param torch.Tensor m: ``[M_w]``.
        :param torch.Tensor S: ``[M_w, M_w]``.
        :returns: ``(loc [..., B], var [..., B])``, or ``None`` where :meth:`node_conditional` has its own path
            (inside :meth:`fixed_kernels`, which reuses conditionals, and for a batch of kernel hyperparameter draws).
        """
        if self.__dict__.get("_fixed_conditionals") is not None:
            return None
        Z, L = self._cached_cholesky(w, cache)
        if L.dim() != 2:
            return None
        x = _concat_values([parent_values[p] for p in self.parents[w]])
        return whitened_predictive(self.kernels[w], Z, L, x, m, S, upper=True)

    def _fixed_inverse(self, w, L):
        """``L_w⁻ᵀ`` of the factor cached by :meth:`fixed_kernels` (computed on first use, kept while the same
        factor comes back)."""
        inverses = self.__dict__["_fixed_inverses"]
        hit = inverses.get(w)
        if hit is None or hit[0] is not L:
            eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
            hit = inverses[w] = (L, torch.linalg.solve_triangular(L, eye, upper=True).transpose(-1, -2).contiguous())
        return hit[1]

    def cholesky_cache(self):
        """``{node: (Z_w, chol K_w(Z_w, Z_w))}`` for every GP node (inside :meth:`fixed_kernels`: the factors
        computed when the block was entered)."""
        fixed = self.__dict__.get("_fixed_cholesky")
        if fixed is not None:
            return dict(fixed)
        return {w: self._node_cholesky(w) for w in self.topo_nodes}

    @contextlib.contextmanager
    def fixed_kernels(self):
        """Factorise every ``K_w(Z_w, Z_w)`` once and reuse the factors for every ELBO evaluation in the block.

        For models whose kernel hyperparameters and inducing inputs are held fixed (e.g. frozen with
        :func:`pyro_dag.utils.freeze`, as in the latent-collider protocol, Perlino et al. 2026, App. G.3): each
        step then skips one ``[M_w, M_w]`` kernel evaluation and Cholesky factorisation per node, and nodes whose
        parents are all roots reuse their whitened conditional ``(a, r)`` while the same (unmodified) design
        matrix comes back, i.e. in full-batch training. The model must be set up (:meth:`setup`) first, and the kernels, inducing inputs, jitter, dtype and device must not change
        inside the block.

        :raises ValueError: naming the node, if a kernel has learnable or sampled hyperparameters or the
            inducing inputs are learnable (their factors would go stale): freeze them or drop the block.
        """
        if not self.is_setup:
            raise RuntimeError("fixed_kernels: set the model up first (model.setup(inputs, data))")
        for w in self.topo_nodes:
            kernel = self.kernels[w]
            if any(p.requires_grad for p in kernel.parameters()):
                raise ValueError(f"fixed_kernels: the kernel of node {w!r} has learnable hyperparameters; freeze "
                                 "them (pyro_dag.utils.freeze(model.kernels)) or train without fixed_kernels()")
            if any(getattr(m, "_pyro_samples", None) for m in kernel.modules()):
                raise ValueError(f"fixed_kernels: the kernel of node {w!r} has sampled (PyroSample) "
                                 "hyperparameters; train without fixed_kernels()")
            if self._inducing_Z(w).requires_grad:
                raise ValueError(f"fixed_kernels: the inducing inputs of node {w!r} are learnable; freeze them "
                                 "(pyro_dag.utils.freeze(model.inducing)) or train without fixed_kernels()")
        with torch.no_grad():
            cache = {w: tuple(t.detach() for t in self._node_cholesky(w)) for w in self.topo_nodes}
        self.__dict__["_fixed_cholesky"] = cache
        self.__dict__["_fixed_conditionals"] = {}
        self.__dict__["_fixed_inverses"] = {}
        try:
            yield self
        finally:
            self.__dict__.pop("_fixed_cholesky", None)
            self.__dict__.pop("_fixed_conditionals", None)
            self.__dict__.pop("_fixed_inverses", None)

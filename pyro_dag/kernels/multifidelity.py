"""Multi-fidelity fusion rules (Perlino et al. 2026, arXiv:2607.09645, Sec. 2 and Sec. 8.1).

``x`` denotes the root-parent coordinates (the exogenous input) and ``z`` the coordinates of the
non-root parents (lower-fidelity outputs).
"""
from .fusion import FusionKernel, _bind_any
from .stationary import RBF, Linear

__all__ = ["MultiFidelity", "NARGP", "AR1"]


class _RootLatentSplit(FusionKernel):
    def _check_split(self):
        if not self.root_parents or not self.latent_parents:
            raise ValueError(f"{type(self).__name__} at node {self.node!r} needs at least one root parent (the "
                             f"input x) and one non-root parent (a lower fidelity z); its parents are "
                             f"{[p.name for p in self.parents]}")

    def _xz(self, X):
        if X is None:
            return None, None
        return self.columns(X, self.root_parents), self.columns(X, self.latent_parents)

    def _bind_x(self, k):
        return _bind_any(k, [p for p in self.parents if p.is_root], self.node)

    def _bind_z(self, k):
        return _bind_any(k, [p for p in self.parents if not p.is_root], self.node)


class MultiFidelity(_RootLatentSplit):
    """Multi-fidelity kernel of Cutajar et al. (2019), as used by Perlino et al. 2026 (Sec. 7, App. G.5).

    * ``form="cutajar"`` (default): ``k_ρ(x, x')·[k_lin(z, z') + k_se(z, z')] + k_δ(x, x')``;
    * ``form="literal"``: ``k_ρ(x, x')·k_lin(z, z') + k_se(z, z') + k_δ(x, x')`` (the formula as printed in
      Perlino et al. 2026, Sec. 2). Both are PSD.

    The discrepancy ``k_δ`` depends on the roots only, so every node with this kernel is separating
    (Perlino et al. 2026, Sec. 4).

    :param Kernel rho: ``k_ρ`` (default ARD RBF). :param Kernel linear: ``k_lin`` (default Linear).
    :param Kernel se: ``k_se`` on ``z`` (default ARD RBF). :param Kernel delta: ``k_δ`` (default ARD RBF).
    """

    def __init__(self, rho=None, linear=None, se=None, delta=None, form="cutajar"):
        super().__init__()
        if form not in ("cutajar", "literal"):
            raise ValueError(f"form must be 'cutajar' or 'literal', got {form!r}")
        self.form = form
        self.rho = RBF(ard=True) if rho is None else rho
        self.linear = Linear() if linear is None else linear
        self.se = RBF(ard=True) if se is None else se
        self.delta = RBF(ard=True, variance=0.1) if delta is None else delta

    def _build(self):
        self._check_split()
        self._bind_x(self.rho)
        self._bind_x(self.delta)
        self._bind_z(self.linear)
        self._bind_z(self.se)

    def forward(self, X, Z=None, diag=False):
        x, z = self._xz(X)
        x2, z2 = self._xz(Z)
        k_rho = self.rho(x, x2, diag)
        k_lin = self.linear(z, z2, diag)
        k_se = self.se(z, z2, diag)
        if self.form == "cutajar":
            out = k_rho * (k_lin + k_se)
        else:
            out = k_rho * k_lin + k_se
        return out + self.delta(x, x2, diag)


class NARGP(_RootLatentSplit):
    """NARGP kernel ``k_ρ(x, x') k_f(z, z') + k_δ(x, x')`` with all factors RBF (Perdikaris et al. 2017).

    :param Kernel rho: ``k_ρ`` on roots. :param Kernel f: ``k_f`` on lower fidelities. :param Kernel delta: ``k_δ``.
    """

    def __init__(self, rho=None, f=None, delta=None):
        super().__init__()
        self.rho = RBF(ard=True) if rho is None else rho
        self.f = RBF(ard=True) if f is None else f
        self.delta = RBF(ard=True, variance=0.1) if delta is None else delta

    def _build(self):
        self._check_split()
        self._bind_x(self.rho)
        self._bind_x(self.delta)
        self._bind_z(self.f)

    def forward(self, X, Z=None, diag=False):
        x, z = self._xz(X)
        x2, z2 = self._xz(Z)
        return self.rho(x, x2, diag) * self.f(z, z2, diag) + self.delta(x, x2, diag)


class AR1(_RootLatentSplit):
    """Linear autoregressive kernel ``k_lin(z, z') + k_δ(x, x')`` (Kennedy & O'Hagan 2000, "Predicting the output
    from a complex computer code when fast approximations are available", Biometrika 87(1)): the fidelity is
    ``ρ z + δ(x)`` with a constant ``ρ`` (``ρ²`` the linear kernel's variance), as in the recursive co-kriging of Le
    Gratiet & Garnier (2014) on nested designs. The ``k_se → 0``, ``k_ρ → const`` limit of :class:`MultiFidelity`,
    with fewer hyperparameters to fit from a few high-fidelity runs.

    :param Kernel linear: ``k_lin`` on ``z`` (default Linear). :param Kernel delta: ``k_δ`` on ``x`` (default ARD
        RBF, variance 0.1).
    """

    def __init__(self, linear=None, delta=None):
        super().__init__()
        self.linear = Linear() if linear is None else linear
        self.delta = RBF(ard=True, variance=0.1) if delta is None else delta

    def _build(self):
        self._check_split()
        self._bind_x(self.delta)
        self._bind_z(self.linear)

    def forward(self, X, Z=None, diag=False):
        x, z = self._xz(X)
        x2, z2 = self._xz(Z)
        return self.linear(z, z2, diag) + self.delta(x, x2, diag)

"""The leave-one-out amplitude of a deterministic node's GP: a factor of its variances that makes the left-out
cases' standardised residuals have unit variance.

A node that the noise rule (:mod:`pyro_dag.gp.noise`) finds deterministic given observed parents (a computer
simulator) keeps a fixed nugget, and its kernel's amplitude is the type-II maximum-likelihood one. On such data that
amplitude is several times too large wherever the function is smoother than the kernel's draws, so the 95 %
intervals cover every test point (measured in ``benchmarks/zoo.py``: a predictive sd 1.4-6.8x the RMSE, PICP95
0.99-1.00). For a Gaussian likelihood, scaling the kernel and the noise by the same ``c`` leaves the posterior mean
as it is and multiplies every posterior variance by ``c``; the leave-one-out estimate of ``c`` (Sundararajan &
Keerthi 2001, "Predictive approaches for choosing hyperparameters in Gaussian processes", Neural Computation 13(5);
Bachoc 2013, "Cross validation and maximum likelihood estimations of hyper-parameters of Gaussian processes with
model misspecification", CSDA 66) is

    c = mean_i (y_i - μ_{-i})² / σ²_{-i} = mean_i [C⁻¹y]_i² / [C⁻¹]_ii,     C = A Aᵀ + τ² I,

with ``A [n, M]`` the node's whitened features at its inducing inputs (``A Aᵀ`` the covariance that the collapsed
bound of :mod:`pyro_dag.infer.training.collapsed` fits, plus the diagonal of conditional variances ``r_i`` that its
predictive variance holds; the exact GP's ``K`` when every case is an inducing input).

**Which variance is calibrated.** ``σ²_{-i}`` above is the variance of a new *observation*, nugget included. A
node whose samples feed children propagates its latent ``f`` (no nugget) to them, and on a noise-free simulator the
nugget (1e-6 of the variance, the noise rule's floor) is often larger than ``f``'s posterior variance between the
design points; matching the errors to ``σ²_{-i}`` then leaves ``f`` too narrow, and a chain of such nodes is
over-confident (measured on three linked simulators: PICP95 0.68-0.78). For such a node the factor compares the
left-out errors with the latent variance ``σ²_{-i} - τ²`` instead (``latent=True``); a leaf, whose samples are
only reported as new observations, keeps ``σ²_{-i}``.

``c`` is bounded to ``[AMPLITUDE_FACTOR_FLOOR, AMPLITUDE_FACTOR_CEILING]``, and with fewer than
``AMPLITUDE_MIN_CASES`` cases the estimate is noise and the maximum-likelihood amplitude is kept. The floor is a
guard against a zero, not a prior: scaling the kernel and the nugget together leaves the conditioning of ``C`` as
it is. (It was 0.1, on the worry that left-out cases of a dense design are closer to the others than test points
in its gaps. On the 95 noise-free draws among random regression draws 500-599, ``benchmarks/zoo.py --generated
smooth nonstationary``, none looked at while choosing: with that floor PICP95 was in [0.88, 0.99] on 67, above it
on 26 and below on 2, and the predictive sd over 2x the RMSE on 18; without it 86 / 7 / 2 and 0.)
"""
import torch

__all__ = ["loo_amplitude_factor", "bounded_amplitude_factor", "scale_amplitude", "AMPLITUDE_FACTOR_FLOOR",
           "AMPLITUDE_FACTOR_CEILING", "AMPLITUDE_MIN_CASES", "AMPLITUDE_MAX_CASES", "LATENT_VARIANCE_FLOOR"]

#: The smallest factor (a guard against zero; see the module docstring).
AMPLITUDE_FACTOR_FLOOR = 1e-6
#: With ``latent=True``, the smallest latent variance, as a multiple of ``τ²`` (a case duplicated in the design
#: has a latent variance of almost zero and an error of almost zero).
LATENT_VARIANCE_FLOOR = 1e-2
#: The largest factor.
AMPLITUDE_FACTOR_CEILING = 1e3
#: Fewer cases keep the maximum-likelihood amplitude.
AMPLITUDE_MIN_CASES = 30
#: The estimate uses a random subset of this many cases above it (an ``O(n³)`` factorisation).
AMPLITUDE_MAX_CASES = 2000


@torch.no_grad()
def loo_amplitude_factor(a, y, noise, *, residual=None, latent=False, max_cases=AMPLITUDE_MAX_CASES, seed=0):
    """The leave-one-out factor ``c`` of the module docstring (unbounded), in float64.

    :param torch.Tensor a: ``[n, M]`` features, ``C = A Aᵀ + τ² I`` (a kernel matrix ``K`` factorised as ``A Aᵀ``).
    :param torch.Tensor y: ``[n]`` observations, centred as the GP's mean function leaves them.
    :param float noise: ``τ²``.
    :param torch.Tensor residual: optional ``[n]`` conditional variances ``r_i`` of a sparse GP given its inducing
        outputs, added to ``C``'s diagonal (``K ≈ A Aᵀ + diag(r)``, as in its predictive variance; 0 when every case
        is an inducing input).
    :param bool latent: divide the squared errors by the latent variances ``σ²_{-i} - τ²`` (at least
        ``LATENT_VARIANCE_FLOOR · τ²``) instead of ``σ²_{-i}`` (module docstring).
    :param int max_cases: a random subset of that many cases above it. :param int seed: the subset's seed.
    :returns: ``c`` (a float), or ``None`` where ``C`` cannot be factorised.
    """
    a, y = a.detach().double(), y.detach().double().reshape(-1)
    n = y.numel()
    r = torch.zeros(n, dtype=a.dtype, device=a.device) if residual is None else residual.detach().double().reshape(-1)
    if n > max_cases:
        idx = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:max_cases].to(a.device)
        a, y, r, n = a[idx], y[idx], r[idx], max_cases
    C = a @ a.T + torch.diag(r.clamp_min(0) + float(noise))
    L, info = torch.linalg.cholesky_ex(C)
    if bool(info.any()):
        return None
    Cinv = torch.cholesky_inverse(L)
    d = Cinv.diagonal().clamp_min(1e-300)
    alpha = Cinv @ y
    err2 = (alpha / d).pow(2)   # the left-out residuals (y_i - μ_{-i}) = α_i / d_i, their variances σ²_{-i} = 1 / d_i
    var = 1 / d
    if latent:
        var = (var - float(noise)).clamp_min(LATENT_VARIANCE_FLOOR * float(noise))
    return float((err2 / var).mean())


def bounded_amplitude_factor(a, y, noise, **kw):
    """:func:`loo_amplitude_factor` bounded to ``[AMPLITUDE_FACTOR_FLOOR, AMPLITUDE_FACTOR_CEILING]``; ``None``
    with fewer than ``AMPLITUDE_MIN_CASES`` cases or a ``C`` that cannot be factorised (keep the amplitude)."""
    if y.numel() < AMPLITUDE_MIN_CASES:
        return None
    c = loo_amplitude_factor(a, y, noise, **kw)
    if c is None or not c == c:
        return None
    return min(max(c, AMPLITUDE_FACTOR_FLOOR), AMPLITUDE_FACTOR_CEILING)


def _amplitude_holder(kernel):
    """The module holding the kernel's amplitude ``variance`` (the kernel itself, or its ``base`` for the
    library's input wrappers), or ``None`` for a kernel whose amplitude is not one hyperparameter."""
    for module in (kernel, getattr(kernel, "base", None)):
        if module is None:
            continue
        if "variance" in module.__dict__.get("_pyro_params", {}) or "variance" in module._buffers:
            return module
    return None


@torch.no_grad()
def scale_amplitude(kernel, c):
    """Multiply the amplitude (``variance``) of ``kernel`` by ``c`` in place (a learnable one through its
    unconstrained value, so the tensor that Pyro's parameter store holds stays the same). Returns ``False`` (and
    changes nothing) for a kernel without one amplitude hyperparameter."""
    from torch.distributions import transform_to

    module = _amplitude_holder(kernel)
    if module is None:
        return False
    if "variance" in module._buffers:
        module._buffers["variance"].mul_(c)
        return True
    constraint = module._pyro_params["variance"][0]
    raw = getattr(module, "variance_unconstrained")
    value = transform_to(constraint)(raw)
    raw.copy_(transform_to(constraint).inv(value * c))
    return True

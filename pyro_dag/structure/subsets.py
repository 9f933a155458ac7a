"""Subsets of nodes as integer bitmasks, their transforms and the dynamic programme over them.

Bit ``i`` of a mask is set when node ``i`` is in the set. The exact posterior (Koivisto & Sood 2004; Koivisto 2006),
the candidate parent-set tables and the order circuit of Wang, Wicker & Kwiatkowska 2022 (*Tractable Uncertainty for
Structure Learning*, ICML) all build on the same pieces, which live here so that each of them imports them downward:

* bitmask helpers: :func:`mask_bits`, :func:`popcount`, :func:`bits_of`, :func:`submasks_up_to`,
  :func:`masks_up_to`;
* the zeta transform over subsets in log space, ``z[S] <- logsumexp_{G ⊆ S} z[G]`` (or the subset maximum):
  :func:`zeta_transform`; and :func:`logsumexp`;
* the dynamic programme over the ``2^n`` subsets of ``n`` items that sums (or maximises) a product of per-item
  weights over the orders of every subset, :func:`subset_dp`: ``F(∅) = 0``,
  ``F(T) = reduce_{a ∈ T} [F(T ∖ a) + w(a, T ∖ a, T)]``.
"""
import itertools

import numpy as np

__all__ = ["bits_of", "logsumexp", "mask_bits", "masks_up_to", "popcount", "subset_dp", "submasks_up_to",
           "zeta_transform"]


def mask_bits(masks, p):
    """``[n, p]`` bool: bit ``i`` of each of the ``n`` subset masks."""
    masks = np.asarray(masks, dtype=np.int64)
    return ((masks[:, None] >> np.arange(p)) & 1).astype(bool)


def popcount(x):
    """Number of elements of the set ``x`` (an int mask)."""
    return bin(int(x)).count("1")


def bits_of(mask, p):
    """The elements of ``mask`` among ``0..p-1``, ascending."""
    return [i for i in range(p) if (mask >> i) & 1]


def submasks_up_to(nodes, k):
    """Masks of the subsets of ``nodes`` with at most ``k`` elements (all ``2^len(nodes)``, in binary counting
    order over ``nodes``, when ``k ≥ len(nodes)``)."""
    nodes = [int(i) for i in nodes]
    if k >= len(nodes):
        subs = np.zeros(1, dtype=np.int64)
        for i in nodes:
            subs = np.concatenate([subs, subs | (1 << i)])
        return subs
    out = [0]
    for size in range(1, min(k, len(nodes)) + 1):
        out.extend(sum(1 << int(i) for i in c) for c in itertools.combinations(nodes, size))
    return np.array(out, dtype=np.int64)


def masks_up_to(p, k):
    """Subset masks of ``p`` bits with at most ``k`` bits set (all ``2^p`` when ``k ≥ p``)."""
    if k >= p:
        return np.arange(1 << p, dtype=np.int64)
    return submasks_up_to(range(p), k)


def zeta_transform(z, p, op=np.logaddexp):
    """In-place log-space subset sum: ``z[S] <- logsumexp_{G ⊆ S} z[G]`` along the last axis (``2^p``); with
    ``op=np.maximum`` the subset maximum."""
    idx = np.arange(1 << p)
    for i in range(p):
        with_i = idx[(idx >> i) & 1 == 1]
        z[..., with_i] = op(z[..., with_i], z[..., with_i ^ (1 << i)])
    return z


def logsumexp(a, axis=None):
    """``log Σ e^a`` over ``axis`` (all entries when ``None``, then a float); ``-inf`` for an all ``-inf`` slice."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else float(out.reshape(()))


def _logsumexp_rows(cand):
    return logsumexp(cand, axis=1)


def subset_dp(n, weight, reduce=_logsumexp_rows, *, return_argmax=False):
    """The dynamic programme over the ``2^n`` subsets of ``n`` items, level by level (subsets of one element, then
    two, ...): ``F(∅) = 0`` and ``F(T) = reduce_{a ∈ T} [F(T ∖ a) + w(a, T ∖ a, T)]``.

    With the default ``reduce`` (log-sum-exp) ``F(T)`` is the log of the sum over the orders of ``T`` of the
    product of the weights ``e^{w(a, pred, T)}`` of each item given the items before it: the forward sums
    ``L(S) = Σ_{k ∈ S} L(S ∖ k) β_k(S ∖ k)`` of the order dynamic programme (Koivisto & Sood 2004) with
    ``w(k, S ∖ k, S) = log β_k(S ∖ k)``, and its backward sums ``R(T) = Σ_{k ∈ T} β_k(V ∖ T) R(T ∖ k)`` with
    ``w(k, T ∖ k, T) = log β_k(V ∖ T)``. With ``reduce`` a row maximum it is the best order (max-product).

    :param int n: number of items (subsets are the masks ``0 .. 2^n - 1``).
    :param weight: ``w(a, rest, T) -> [m]`` log weights of item ``a`` for the subsets ``T`` ``[m]`` (int64 masks,
        every one holding ``a``) and ``rest = T ∖ {a}``.
    :param reduce: ``[m, n] -> [m]``, the reduction over the candidate last items of each subset (entries of items
        not in a subset are ``-inf``).
    :param bool return_argmax: also return ``[2^n]`` int64 ``argmax`` over the candidate last items of each subset
        (the back-pointers of a max-product programme).
    :returns: ``F`` ``[2^n]`` (and the back-pointers).
    """
    pop = mask_bits(np.arange(1 << n), n).sum(1)
    F = np.full(1 << n, -np.inf)
    F[0] = 0.0
    arg = np.zeros(1 << n, dtype=np.int64)
    for level in range(1, n + 1):
        T = np.nonzero(pop == level)[0]
        cand = np.full((len(T), n), -np.inf)
        for a in range(n):
            has = (T >> a) & 1 == 1
            Ta = T[has] ^ (1 << a)
            cand[has, a] = F[Ta] + weight(a, Ta, T[has])
        if return_argmax:
            arg[T] = cand.argmax(1)
        F[T] = reduce(cand)
    return (F, arg) if return_argmax else F

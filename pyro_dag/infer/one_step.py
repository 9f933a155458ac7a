"""One-step prediction of a :class:`~pyro_dag.DAGDGP`'s nodes from the *measured* values of their parents.

:meth:`DAGDGP.predict <pyro_dag.DAGDGP.predict>` propagates from the roots through the DAG: the prediction of a node
uses the inputs of a case and nothing else, so a column measured for the case at an intermediate node (a parent of
the node) is ignored. When such columns are measured at test time (tabular data, where every column is observed
for every row), the natural prediction of node ``w`` conditions on them:

``p(f_w | y_Pa(w)) ≈ ∫ p(f_w | U_w, F_Pa(w) = y_Pa(w)) q(U_w) dU_w``,

the sparse-GP conditional of the node (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on
Directed Acyclic Graphs", arXiv:2607.09645, Eq. (5) and the whitened form Eq. (80)) at the observed parent values,
integrated against the guide's *marginal* ``q(U_w)``. With the whitened conditional ``f_w | U_w ~ N(a U_w, r)``
(:meth:`~pyro_dag.DAGDGP.node_conditional`) and ``q(U_w) = N(m_w, S_w)`` this is Gaussian per case and output
``j``, ``E[f_w] = a m_{w,j}``, ``Var[f_w] = r + a S_{w,jj} aᵀ`` (Eq. (93) for a single node): no sampling through
the DAG, and the measured parents replace the model's uncertain propagated ones (the parents' observation noise is
not added: the measured value is plugged in as the parent's value).

The prediction is only as good as the node's GP at the measured parent values. A jointly trained DAG-DGP fits each
child's GP to the *latent* values of its parents, ``F_p = f_p(F_Pa(p))`` (the variational family
``q(U) p(F | U)`` of Eq. (5)), and treats the variation of a measured parent that its own parents do not explain as
observation noise; where that variation is large, the measured values fall where the child's GP was never fitted,
and one-step prediction can be worse than propagation. Compare both on held-out cases (``pyro-dag fit --csv
--predict one-step`` reports both, with baselines on the measured parents).
"""
import pyro
import torch
from pyro.infer.autoguide import AutoGuideList

from ..dgp.handoff import standard_normal, suspended
from ..dgp.inputs import DAGInputError, positive_int
from ..dgp.prediction import NodePrediction

__all__ = ["predict_one_step", "one_step_cases"]


def _structured_part(guide):
    parts = list(guide) if isinstance(guide, AutoGuideList) else [guide]
    return next((p for p in parts if hasattr(p, "inducing_posterior")), None)


def one_step_cases(model, w, X, obs, n):
    """Which cases of node ``w`` can be predicted one step: every parent is an observed root (``X``) or a node
    observed in that case (all its outputs; ``obs`` from :meth:`~pyro_dag.DAGDGP.checked_arguments`).

    :returns: bool ``[n]`` (all ``False`` when a parent is a latent input or a node without data).
    """
    ok = torch.ones(n, dtype=torch.bool, device=model.device)
    for p in model.parents[w]:
        if p in X:
            continue
        if p in model.latent_inputs or p not in obs:
            return torch.zeros_like(ok)
        ok &= obs[p][1].all(-1)
    return ok


@torch.no_grad()
def predict_one_step(model, guide, inputs, data=None, nodes=None, num_samples=200, mask=None, propagated=None,
                     **predict_kwargs):
    """Predict each GP node of ``model`` from the observed values of its parents in the given cases (module
    docstring), falling back to the propagated prediction where a parent is not observed.

    For each requested node ``w`` and case ``i``:

    * **one step** when every parent of ``w`` is an observed root (from ``inputs``) or a node observed in case
      ``i`` (from ``data``, all its outputs finite / unmasked): ``f_w ~ N(a m_w, r + a S_w aᵀ)`` at the observed
      parent values, with ``q(U_w) = N(m_w, S_w)`` the marginal of the guide's ``inducing_posterior()`` (an
      :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`, alone or in an ``AutoGuideList``); for any other
      guide, the mixture over ``num_samples`` draws of ``U_w`` from the guide;
    * **propagated** otherwise, i.e. when a parent is a latent input, a node without data, or missing in case
      ``i``: the case's prediction by :meth:`~pyro_dag.DAGDGP.predict` (from the roots through the DAG; latent
      inputs inferred from ``data`` as there).

    :param model: a trained :class:`~pyro_dag.DAGDGP`. :param guide: its trained guide.
    :param dict inputs: ``{root: [n, d_r]}`` (observed roots). :param dict data: ``{node: [n, d_w]}`` measured
        values of the cases (NaN = missing); a node's own value is not used for its own prediction.
    :param list nodes: nodes to return (default all GP nodes). :param int num_samples: ``S``, draws per case.
    :param dict mask: optional ``{node: bool [n, d_w]}`` for ``data`` (True = observed).
    :param dict propagated: optional ``{node: NodePrediction}`` of :meth:`~pyro_dag.DAGDGP.predict` for the same
        cases (with the latent inputs inferred as the caller wants), used for the fallback cases instead of a new
        ``predict`` call; its number of samples then sets ``S``.
    :param predict_kwargs: passed to :meth:`~pyro_dag.DAGDGP.predict` for the fallback (e.g. ``latent_steps``).
    :returns: ``{node: NodePrediction}`` as :meth:`~pyro_dag.DAGDGP.predict` (samples, ``loc``, ``var``
        ``[S, n, d_w]``; ``mean``, ``variance``, ``y_mean``, ``y_variance`` ``[n, d_w]``, the latter with the
        likelihood's noise, e.g. ``τ²`` for a Gaussian node). In one-step cases ``loc`` and ``var`` are the same
        Gaussian for every sample, so ``mean``/``variance`` are exact; the returned dict also carries, under
        ``result.one_step``, ``{node: bool [n]}`` saying which cases were predicted one step.
    """
    if not model.is_setup:
        raise RuntimeError("predict_one_step: the model is not set up yet: train it first")
    X, n, obs = model.checked_arguments(inputs, data, mask)
    nodes = list(model.gp_nodes) if nodes is None else list(nodes)
    for w in nodes:
        if w not in model.gp_nodes:
            raise DAGInputError(f"predict_one_step: cannot predict {w!r}: it is not a GP node of the graph "
                                f"(GP nodes: {model.gp_nodes})")
    cases = {w: one_step_cases(model, w, X, obs, n) for w in nodes}
    fallback = [w for w in nodes if not bool(cases[w].all())]
    if propagated is not None:
        missing = [w for w in fallback if w not in propagated]
        if missing:
            raise ValueError(f"predict_one_step: propagated lacks node(s) {missing}, which need the fallback")
        if propagated:
            num_samples = next(iter(propagated.values())).samples.shape[0]
    num_samples = positive_int(num_samples, "num_samples")
    if fallback and propagated is None:
        propagated = model.predict(guide, inputs, data if model.latent_inputs else None, nodes=fallback,
                                   num_samples=num_samples, mask=mask if model.latent_inputs else None,
                                   **predict_kwargs)
    structured = _structured_part(guide)
    kw = {"dtype": model.dtype, "device": model.device}
    with suspended():
        posterior = structured.inducing_posterior() if structured is not None else None
        us = None
        if posterior is None:  # any other guide: S draws of U from the guide
            traces = [pyro.poutine.trace(guide).get_trace(inputs) for _ in range(num_samples)]
            us = {w: torch.stack([t.nodes[f"{w}.u"]["value"].detach().reshape(model.output_dims[w], -1)
                                  for t in traces]) for w in nodes}
        cache = model.cholesky_cache()
        out = _OneStepResult()
        for w in nodes:
            d = model.output_dims[w]
            ok = cases[w]
            idx = ok.nonzero().squeeze(-1)
            if propagated is not None and w in propagated:
                prop = propagated[w]
                samples, loc, var = prop.samples.clone(), prop.loc.clone(), prop.var.clone()
            else:
                samples = torch.empty((num_samples, n, d), **kw)
                loc, var = torch.empty_like(samples), torch.empty_like(samples)
            if len(idx):
                parents = {p: (X[p] if p in X else obs[p][0])[idx] for p in model.parents[w]}
                a, r = model.node_conditional(w, parents, cache)                  # [B, M], [B]
                if posterior is not None:
                    m = posterior.mean_blocks()[w]                                 # [d, M]
                    S = posterior.covariance_block(w)                              # [d M, d M]
                    M = m.shape[-1]
                    mu = a @ m.T                                                   # [B, d]
                    v = torch.stack([(a @ S[j * M:(j + 1) * M, j * M:(j + 1) * M] * a).sum(-1) for j in range(d)],
                                    -1) + r.unsqueeze(-1)
                    loc_w, var_w = mu.expand(num_samples, -1, -1), v.clamp_min(0).expand(num_samples, -1, -1)
                else:
                    loc_w = torch.einsum("bm,sdm->sbd", a, us[w])                  # [S, B, d]
                    var_w = r.unsqueeze(-1).expand_as(loc_w)
                eps = standard_normal(loc_w.shape, loc_w)
                samples[:, idx] = loc_w + var_w.sqrt() * eps
                loc[:, idx], var[:, idx] = loc_w, var_w
            mean = loc.mean(0)
            variance = var.mean(0) + loc.var(0, unbiased=False)
            y_mean = y_var = None
            moments = model.likelihoods[w].predictive_moments(loc, var)
            if moments is not None:
                ym, yv = moments
                ym, yv = ym.expand_as(loc), yv.expand_as(loc)
                y_mean, y_var = ym.mean(0), yv.mean(0) + ym.var(0, unbiased=False)
            if propagated is not None and w in propagated and len(idx) < n:
                # the fallback cases keep the propagated prediction's own moments (exactly as predict returned them)
                back = ~ok
                prop = propagated[w]
                mean[back], variance[back] = prop.mean[back], prop.variance[back]
                if y_mean is not None and prop.y_mean is not None:
                    y_mean[back], y_var[back] = prop.y_mean[back], prop.y_variance[back]
            out[w] = NodePrediction(samples, mean, variance, loc, var, y_mean, y_var)
        out.one_step = cases
    return out


class _OneStepResult(dict):
    """``{node: NodePrediction}`` with ``.one_step`` ``{node: bool [n]}``: the cases predicted one step."""

    one_step = None

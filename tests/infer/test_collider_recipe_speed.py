"""The speed-ups of the collider recipe (issue 36, part 3) leave its results unchanged: each fast path against the
path it short-cuts, and a short fit of ``pyro-dag fit collider``'s recipe against numbers computed at the commit
before them (``benchmarks/collider_recipe_ab.py`` runs the whole recipe side by side)."""
import pyro
import pytest
import torch

from helpers import chain_problem, collider_problem, fixed, setup_guide
from pyro_dag import DAGInputError
from pyro_dag.gp import conditional
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import samplers
from pyro_dag.infer.marginal import _all_cases

#: ``fit_collider(steps=60, precision="chordal", antithetic=True, natural_gradient=0.01, natural_gradient_after=30,
#: num_eval_samples=20)`` at commit 68e81be (before the speed-ups), float64, one thread.
BASELINE_68E81BE = {
    "losses": [215038.49224795355, 157033.043078399, 161182.87789085822, 82195.40544219012],   # steps 1, 30, 31, 60
    "final_elbo": -132682.03787784607, "rmse_train": 0.5533337904493505, "rmse_test": 0.9340504031074038,
    "parent_var": 0.05916836402745344, "w3_mean": [0.6997349576920324, -0.8606296375391631, -0.7465317154285357]}


def test_short_collider_recipe_matches_the_baseline_commit():
    """Adam then natural-gradient steps: losses, final ELBO, metrics and predictions to rounding. The differences
    (rounding of the reordered arithmetic) grow through the first natural-gradient steps, far from the optimum, to
    about 1e-9 of the parents' variance at step 60; a 3000-step run ends within 1e-11 of the baseline's ELBO."""
    from pyro_dag.experiments.collider import fit_collider

    res = fit_collider(steps=60, precision="chordal", antithetic=True, natural_gradient=0.01,
                       natural_gradient_after=30, progress=False, num_eval_samples=20, num_threads=1)
    ref = BASELINE_68E81BE
    losses = [res["losses"][i] for i in (0, 29, 30, 59)]
    assert losses[0] == ref["losses"][0]      # the first loss is computed before any step: the same to the bit
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref["losses"]), rtol=1e-9, atol=0)
    m = res["metrics"]
    for key in ("final_elbo", "rmse_train", "rmse_test"):
        assert m[key] == pytest.approx(ref[key], rel=1e-9), key
    assert m["parent_var"] == pytest.approx(ref["parent_var"], rel=1e-7)
    w3 = res["prediction"]["w3"].mean[[0, 50, 100], 0]
    torch.testing.assert_close(w3, torch.tensor(ref["w3_mean"], dtype=w3.dtype), rtol=1e-8, atol=0)


@pytest.mark.parametrize("problem", [collider_problem, chain_problem])
def test_dense_state_entrywise_path_matches_the_matrix_path(problem, monkeypatch):
    """DenseAncestralState with one-output nodes (entry-by-entry forward substitution) against its matrix form
    (batched triangular solves): the same ELBO and gradients, to 1e-10."""
    pyro.clear_param_store()
    model, inputs, data = problem()
    guide = setup_guide(model, inputs, data, structure="chordal", backend="dense")
    params = [p for p in guide.parameters()] + [p for p in model.parameters() if p.requires_grad]
    out = {}
    for form in ("entrywise", "matrix"):
        if form == "matrix":
            init = samplers.DenseAncestralState.__init__

            def matrix_init(self, posterior):
                init(self, posterior)
                self._scalar = False

            monkeypatch.setattr(samplers.DenseAncestralState, "__init__", matrix_init)
        pyro.set_rng_seed(3)
        loss = DAGELBO(num_particles=4, antithetic=True).differentiable_loss(model, guide, inputs, data)
        out[form] = (loss, torch.autograd.grad(loss, params, allow_unused=True))
    (loss, grads), (ref_loss, ref_grads) = out["entrywise"], out["matrix"]
    torch.testing.assert_close(loss, ref_loss, rtol=1e-10, atol=0)
    for g, r in zip(grads, ref_grads):
        if r is not None:
            torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


def test_full_batch_reuses_the_root_parent_conditionals(monkeypatch):
    """Under DAGELBO with the whole batch, inside fixed_kernels() the nodes whose parents are roots compute their
    whitened conditional once (Pyro's full-batch plate indices are arange(n): the design matrices are used as they
    are, the cache's key); a minibatch still indexes the cases."""
    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data, structure="chordal")
    fixed(model)
    calls = []
    inner = conditional.whitened_conditional

    def counting(kernel, Z, L, X, *args, **kwargs):
        calls.append(X.shape)
        return inner(kernel, Z, L, X, *args, **kwargs)

    from pyro_dag.dgp import conditionals as dgp_conditionals
    monkeypatch.setattr(dgp_conditionals, "whitened_conditional", counting)
    elbo = DAGELBO(num_particles=2)
    with model.fixed_kernels():
        elbo.loss(model, guide, inputs, data)
        first = len(calls)
        elbo.loss(model, guide, inputs, data)
        assert first == 3 and len(calls) == first + 1   # only w3 (whose parents are drawn) again
        elbo.loss(model, guide, inputs, data, subsample_size=5)
    assert calls[-1][-2] == 5
    n = next(iter(inputs.values())).shape[0]
    assert _all_cases(torch.arange(n), n)
    assert not _all_cases(torch.arange(n).flip(0), n) and not _all_cases(torch.arange(n - 1), n)


def test_argument_checks_are_made_once_per_tensor_version():
    """checked_arguments validates the values once per (tensor, version): an in-place change is checked again, and
    the conversions are redone every call, so a change torch does not count (through .data) still reaches the
    model."""
    model, inputs, data = collider_problem()
    model.setup(inputs, data)
    X, n, obs = model.checked_arguments(inputs, data)
    assert model.__dict__["_checked_key"] is not None
    X2, _, obs2 = model.checked_arguments(inputs, data)
    assert X2["x1"] is inputs["x1"] and torch.equal(obs2["w3"][0], obs["w3"][0])
    y = data["w3"]
    y.data[0, 0] = 7.0                                    # not counted by the version counter
    assert model.checked_arguments(inputs, data)[2]["w3"][0][0, 0] == 7.0
    y[1, 0] = float("inf")                                 # counted: checked again
    with pytest.raises(DAGInputError, match=r"data\['w3'\] contains inf"):
        model.checked_arguments(inputs, data)
    y[1, 0] = 0.0
    inputs["x1"][0, 0] = float("nan")
    with pytest.raises(DAGInputError, match=r"inputs\['x1'\] contains NaN"):
        model.checked_arguments(inputs, data)


def test_tril_inverse_gradient_matches_the_triangular_solve():
    from pyro_dag.ops.triangular import tril_inverse

    g = torch.Generator().manual_seed(0)
    A = torch.randn(9, 9, dtype=torch.float64, generator=g)
    L = torch.linalg.cholesky(A @ A.T + 9 * torch.eye(9, dtype=torch.float64)).requires_grad_()
    G = torch.randn(9, 9, dtype=torch.float64, generator=g)
    inv = tril_inverse(L)
    ref = torch.linalg.solve_triangular(L, torch.eye(9, dtype=torch.float64), upper=False)
    assert torch.equal(inv, ref)
    (grad,) = torch.autograd.grad((inv * G).sum(), L)
    (ref_grad,) = torch.autograd.grad((ref * G).sum(), L)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-12, atol=1e-14)


def test_structured_family_writes_and_reads_the_factor_as_block_by_block():
    """StructuredFamily.set_precision_tril (one multi-tensor copy) writes what _assign block by block wrote, bit for
    bit, and dense_tril (columns scaled at once) reads back the factor that factor_blocks() assembles."""
    from pyro_dag.infer.autoguide.families import _assign

    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data, structure="chordal", backend="dense")
    family = guide.family
    with torch.no_grad():
        assert torch.equal(family.dense_tril(), family.dense_tril(family.factor_blocks()))
        m_values, L_values = family.factor_values()        # what the natural-gradient steps read, bit for bit
        assert torch.equal(m_values, family.loc()) and torch.equal(L_values, family.dense_tril())
        L = family.dense_tril()
        m = family.loc() + 0.25
        L = L + 0.1 * torch.randn(L.shape, dtype=L.dtype, generator=torch.Generator().manual_seed(1)).tril()
        family.set_precision_tril(m, L)
        ours = [p.detach().clone() for p in family.parameters()]
        for b in family.blocks:                                  # the block-by-block writes it replaced
            _assign(family.locs, b.node, m[b.slice])
            diag = L[b.slice, b.slice]
            s = diag.diagonal().reciprocal()
            _assign(family.scales, b.node, s)
            _assign(family.unit_trils, b.node, diag * s)
        for k, (v, w) in enumerate(family.edges):
            s_w = L[family.block_of[w].slice, family.block_of[w].slice].diagonal().reciprocal()
            _assign(family.offdiag, f"e{k}", L[family.block_of[v].slice, family.block_of[w].slice] * s_w)
        for a, b in zip(ours, family.parameters()):
            assert torch.equal(a, b)


@pytest.mark.parametrize("variance_shape", [(), (1,), (3, 1, 1)])
def test_gaussian_expected_log_prob_is_torchs_normal_written_out(variance_shape):
    """Gaussian.expected_log_prob computes torch's Normal.log_prob operation for operation (bit for bit) without
    building the distribution."""
    import pyro.distributions as dist

    from pyro_dag.gp.likelihoods import Gaussian

    g = torch.Generator().manual_seed(0)
    lik = Gaussian(variance=torch.rand(variance_shape, dtype=torch.float64, generator=g) + 0.01).double()
    y = torch.randn(5, 1, dtype=torch.float64, generator=g)
    loc = torch.randn(3, 5, 1, dtype=torch.float64, generator=g)
    var = torch.rand(3, 5, 1, dtype=torch.float64, generator=g)
    tau2 = lik.hyper("variance")
    ref = dist.Normal(loc, tau2.sqrt()).log_prob(y) - var / (2 * tau2)
    assert torch.equal(lik.expected_log_prob(y, loc, var), ref)

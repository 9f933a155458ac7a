"""The pooled joint protocol's pieces (Perlino et al. 2026, Tables 5-6): the folds over every fidelity's runs, the
weighted energy score against its definition computed by hand, the joint draws of an emulator; and the L-BFGS
node-wise pretraining against the exact GP marginal likelihood it maximises."""
import math

import numpy as np
import pyro
import pytest
import torch

from pyro_dag.datasets.multifidelity import chain_problem, graphical_problem
from pyro_dag.emulation import MultiFidelityEmulator
from pyro_dag.emulation.emulator import _collapsed_bound, pretrain_collapsed
from pyro_dag.emulation.experiment import joint_draws, pooled_folds, weighted_energy_score


def test_pooled_folds_partition_every_fidelity():
    p = graphical_problem(40, 20, 5, seed=0)
    folds = pooled_folds(p.train, num_folds=10, seed=3)
    assert len(folds) == 10
    for f, (X, y) in p.train.items():
        held = np.concatenate([h[f][1][:, 0] for _, h in folds])
        # each run is held out exactly once, and fold k's training runs are the others
        np.testing.assert_array_equal(np.sort(held), np.sort(y[:, 0]))
        for tr, h in folds:
            assert len(tr[f][1]) + len(h[f][1]) == len(y)
            assert len(h[f][1]) == len(y) // 10
            assert not set(map(tuple, tr[f][0])) & set(map(tuple, h[f][0]))
    with pytest.raises(ValueError, match="fidelity 'H' has 20 runs, fewer than num_folds=30"):
        pooled_folds(p.train, num_folds=30)


def _es_by_hand(samples, held, train):
    """``E||X - y||_W - ½ E||X - X'||_W`` with the weights of the definition, by explicit loops."""
    names = list(held)
    S = next(iter(samples.values())).shape[0]

    def norm(parts):
        return math.sqrt(sum(float(np.sum(parts[f] ** 2)) / (len(held[f][1]) * float(np.var(train[f][1])))
                             for f in names))

    y = {f: held[f][1][:, 0] for f in names}
    d1 = np.mean([norm({f: samples[f][s] - y[f] for f in names}) for s in range(S)])
    d2 = np.mean([norm({f: samples[f][s] - samples[f][t] for f in names}) for s in range(S) for t in range(S)])
    return d1 - 0.5 * d2


def test_weighted_energy_score_matches_definition():
    rng = np.random.default_rng(0)
    train = {"L1": (None, rng.normal(0, 2.0, (30, 1))), "H": (None, rng.normal(0, 0.5, (12, 1)))}
    held = {"L1": (None, rng.normal(size=(4, 1))), "H": (None, rng.normal(size=(2, 1)))}
    samples = {"L1": rng.normal(size=(25, 4)), "H": rng.normal(size=(25, 2))}
    np.testing.assert_allclose(weighted_energy_score(samples, held, train), _es_by_hand(samples, held, train),
                               rtol=1e-10)
    # a fidelity's weight is 1 / (n_f σ²_f): scaling its values and its training spread together leaves ES unchanged
    scaled = ({"L1": samples["L1"] * 7, "H": samples["H"]}, {"L1": (None, held["L1"][1] * 7), "H": held["H"]},
              {"L1": (None, train["L1"][1] * 7), "H": train["H"]})
    np.testing.assert_allclose(weighted_energy_score(*scaled), weighted_energy_score(samples, held, train),
                               rtol=1e-10)
    # a point mass at the truth scores 0; a wrong point mass scores its weighted distance
    exact = {f: np.repeat(held[f][1][:, 0][None], 3, 0) for f in held}
    assert abs(weighted_energy_score(exact, held, train)) < 1e-12
    with pytest.raises(ValueError, match="same number of joint draws"):
        weighted_energy_score({"L1": samples["L1"], "H": samples["H"][:5]}, held, train)
    with pytest.raises(ValueError, match="fidelity 'H' has draws for 3 runs but 2 held-out runs"):
        weighted_energy_score({"L1": samples["L1"], "H": rng.normal(size=(25, 3))}, held, train)


def test_joint_draws_are_one_predict_call():
    pyro.clear_param_store()
    p = graphical_problem(30, 10, 5, seed=0)
    tr, held = pooled_folds(p.train, num_folds=5, seed=0)[0]
    em = MultiFidelityEmulator(tr, p.parents, precision="mean_field", num_inducing=10, bounds=p.bounds)
    em.fit(num_steps=2, pretrain_steps=5)
    draws, moments = joint_draws(em, held, num_samples=50, seed=1)
    X = np.concatenate([held[f][0] for f in held])
    pred = em.predict(X, list(held), num_samples=50, seed=1)
    start = 0
    for f in held:
        n = len(held[f][1])
        assert draws[f].shape == (50, n)
        np.testing.assert_allclose(moments[f][0], pred[f].mean[start:start + n])
        # the draws are the predict call's draws plus the (tiny) observation noise
        noise = float(em.model.likelihoods[f].variance.detach().reshape(-1)[0]) * em.y_scale[f] ** 2
        assert np.abs(draws[f] - pred[f].samples[:, start:start + n]).max() < 6 * math.sqrt(noise) + 1e-12
        start += n


def _exact_gp_log_marginal(model, w, parent_values, y):
    """``log N(y | 0, K + τ² I)``: with the inducing inputs at the training inputs the collapsed bound equals it."""
    K = model.kernels[w](torch.cat([parent_values[p] for p in model.parents[w]], -1))
    tau2 = model.likelihoods[w].variance.reshape(-1)[0]
    return torch.distributions.MultivariateNormal(torch.zeros(len(y), dtype=y.dtype),
                                                  K + tau2 * torch.eye(len(y), dtype=y.dtype)).log_prob(y)


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs"])
def test_pretraining_raises_the_collapsed_bound(optimizer):
    pyro.clear_param_store()
    p = chain_problem("currin", [40, 12], num_test=5, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, precision="mean_field", num_inducing=40, seed=0)
    em.build()
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    inputs, data = em.model_inputs(), em.model_data()
    guide = AutoStructuredGuide(em.model, precision="mean_field")
    guide(inputs, data)
    losses = pretrain_collapsed(em.model, guide, inputs, data, ["f1"], 60, optimizer=optimizer)["f1"]
    assert losses[-1] < losses[0] - 1.0
    # inducing inputs at every training input: the bound is the exact GP log marginal likelihood (below it by the
    # trace term of the inducing Gram's jitter only)
    X, _, obs = em.model.checked_arguments(inputs, data)
    with torch.no_grad():
        bound = _collapsed_bound(em.model, "f1", {"x": X["x"]}, obs["f1"][0][:, 0])[0]
        exact = _exact_gp_log_marginal(em.model, "f1", {"x": X["x"]}, obs["f1"][0][:, 0])
    assert float(bound) <= float(exact) + 1e-8
    assert float(exact) - float(bound) < 1e-3 * abs(float(exact))


def test_lbfgs_pretraining_reaches_a_higher_bound_than_adam_in_the_same_steps():
    """On the refined fidelity of a small Currin chain (its collapsed bound is the exact GP marginal likelihood),
    60 L-BFGS iterations end higher than 60 Adam steps from the same start."""
    finals = {}
    for optimizer in ("adam", "lbfgs"):
        pyro.clear_param_store()
        p = chain_problem("currin", [40, 12], num_test=5, seed=0)
        em = MultiFidelityEmulator(p.train, p.parents, precision="mean_field", num_inducing=40, seed=0)
        em.fit(num_steps=1, pretrain_steps=60, pretrain_optimizer=optimizer)
        finals[optimizer] = min(em.history["pretrain_f2"])
    assert finals["lbfgs"] < finals["adam"]
    with pytest.raises(ValueError, match="optimizer must be 'adam' or 'lbfgs'"):
        pretrain_collapsed(None, None, None, None, [], 1, optimizer="sgd")


def test_run_protocol_pooled_one_fold(tmp_path):
    from pyro_dag.emulation.experiment import run_protocol

    pyro.clear_param_store()
    out = run_protocol("forrester", "pooled", precision="mean_field", steps=2, pretrain_steps=10, folds=[0],
                       out=str(tmp_path))
    m = out["metrics"]
    assert set(m) == {"rmse", "nrmse", "crps", "seconds", "energy_score"}
    assert len(out["result"]["folds"]) == 1 and np.isfinite(m["energy_score"]) and m["energy_score"] > 0
    assert (tmp_path / "multifidelity_forrester_pooled.json").exists()

"""pyro_dag.experiments.sachs: the Sachs regression protocol (Perlino et al. 2026, arXiv:2607.09645, Sec. 6)."""
import math

import numpy as np
import pytest
import torch

from pyro_dag.datasets.sachs import SACHS_NODES, sachs
from pyro_dag.experiments.sachs import (GP_NODES, UNSEEN_NODES, average_metrics, fit_sachs, node_metrics, sachs_dag,
                                        sachs_model, sachs_split)
from pyro_dag.metrics.regression import crps_gaussian


def test_interpolation_split_is_a_seeded_80_20_partition():
    a, b, c = sachs_split("interpolation", 0), sachs_split("interpolation", 0), sachs_split("interpolation", 1)
    assert len(a.train_index) == 722 and len(a.test_index) == 180
    assert torch.equal(torch.cat([a.train_index, a.test_index]).sort().values, torch.arange(902))
    assert torch.equal(a.test_index, b.test_index) and not torch.equal(a.test_index, c.test_index)


def test_extrapolation_split_tests_both_tails_of_the_projection():
    s = sachs_split("extrapolation", 3)
    raw = sachs(subset="cd3cd28icam2", log=True, dtype=torch.float64).data
    x = raw[:, [SACHS_NODES.index("PKC"), SACHS_NODES.index("Plcg")]]
    z = ((x - x.mean(0)) / x.std(0)) @ s.direction
    assert math.isclose(float(s.direction.norm()), 1.0, rel_tol=1e-12)
    zc, zt = z[s.train_index], z[s.test_index]
    lower, upper = zt[zt < zc.min()], zt[zt > zc.max()]
    assert len(lower) == 90 and len(upper) == 90 and len(zt) == 180
    assert not torch.equal(s.direction, sachs_split("extrapolation", 4).direction)


def test_values_are_log_then_standardised_with_training_statistics():
    s = sachs_split("interpolation", 2)
    raw = sachs(subset="cd3cd28icam2", log=True, dtype=torch.float64).data
    for w in ("PKA", "Erk"):
        train = raw[s.train_index, SACHS_NODES.index(w)]
        assert torch.allclose(s.train_data[w][:, 0], (train - train.mean()) / train.std())
        assert torch.allclose(s.test_data[w][:, 0],
                              (raw[s.test_index, SACHS_NODES.index(w)] - train.mean()) / train.std())
    assert abs(float(s.train_inputs["PKC"].mean())) < 1e-12 and abs(float(s.train_inputs["PKC"].std()) - 1) < 1e-12


def test_dag_and_model_follow_the_paper():
    g = sachs_dag()
    assert g.number_of_edges() == 19 and ("h1", "PKA") in g.edges and ("h2", "Raf") in g.edges
    assert sorted(v for v in g if g.in_degree(v) == 0) == ["PKC", "Plcg", "h1", "h2"]
    model = sachs_model()
    assert model.latent_inputs == {"h1": 1, "h2": 1} and sorted(model.root_nodes) == ["PKC", "Plcg"]
    assert sorted(model.gp_nodes) == sorted(GP_NODES)
    assert sorted(model.parents["Raf"]) == ["PKA", "PKC", "h2"] and sorted(model.parents["PKA"]) == ["PKC", "h1"]
    assert all(model.num_inducing[w] == 32 for w in GP_NODES)
    for w in GP_NODES:       # ARD RBF on the concatenated parents, length-scales 0.1
        base = model.kernels[w].base
        assert type(base).__name__ == "RBF"
        assert torch.allclose(base.lengthscale, torch.full((len(model.parents[w]),), 0.1, dtype=torch.float64))
    assert all(abs(float(model.likelihoods[w].variance.detach()) - 0.01) < 1e-8 for w in GP_NODES)
    assert model.dtype == torch.float64


def test_node_metrics_against_closed_forms():
    torch.manual_seed(0)
    y = torch.randn(400, dtype=torch.float64)
    loc = torch.full((1, 400), 0.3, dtype=torch.float64)
    var = torch.full((1, 400), 0.5, dtype=torch.float64)
    m = node_metrics(loc, var, 0.25, y, num_noise_draws=4000)
    scale = math.sqrt(0.75)
    assert math.isclose(m["rmse"], float((0.3 - y).pow(2).mean().sqrt()), rel_tol=1e-12)
    nlpd = float(-torch.distributions.Normal(torch.full_like(y, 0.3), torch.full_like(y, scale)).log_prob(y).mean())
    assert math.isclose(m["nlpd"], nlpd, rel_tol=1e-10)
    crps = float(crps_gaussian(torch.full_like(y, 0.3), torch.full_like(y, scale), y))
    assert abs(m["crps"] - crps) < 0.01
    inside = float(((y - 0.3).abs() <= 1.959964 * scale).double().mean())
    assert abs(m["picp"] - inside) < 0.02
    # the mixture mean is the point prediction
    m2 = node_metrics(torch.stack([loc[0] - 1, loc[0] + 1]), var.expand(2, 400), 0.25, y)
    assert math.isclose(m2["rmse"], m["rmse"], rel_tol=1e-12)


def test_average_metrics_uses_the_named_nodes():
    per = {w: {"rmse": float(i)} for i, w in enumerate(GP_NODES)}
    assert average_metrics(per, GP_NODES)["rmse"] == pytest.approx(np.mean(range(9)))
    assert average_metrics(per, UNSEEN_NODES)["rmse"] == pytest.approx(np.mean(range(2, 9)))


def test_linear_sem_is_least_squares_on_the_observed_parents():
    s = sachs_split("interpolation", 0)
    r = fit_sachs("interpolation", 0, "linear_sem", split=s, num_samples=50)
    X = torch.cat([torch.ones(722, 1, dtype=torch.float64), s.train_inputs["PKC"], s.train_data["PKA"]], -1)
    beta = torch.linalg.lstsq(X, s.train_data["Raf"]).solution[:, 0]
    Xt = torch.cat([torch.ones(180, 1, dtype=torch.float64), s.test_inputs["PKC"], s.test_data["PKA"]], -1)
    expected = float((Xt @ beta - s.test_data["Raf"][:, 0]).pow(2).mean().sqrt())
    assert r["observed_parents"]["per_node"]["Raf"]["rmse"] == pytest.approx(expected, rel=1e-10)
    # propagated predictions see only the roots, so they are worse downstream
    assert r["propagated"]["per_node"]["Mek"]["rmse"] > r["observed_parents"]["per_node"]["Mek"]["rmse"]


def test_fit_sachs_short_run_scores_every_node():
    s = sachs_split("extrapolation", 0)
    r = fit_sachs("extrapolation", 0, "dag_vi", recipe="recommended", num_steps=6, pretrain_steps=3, split=s,
                  num_samples=20, latent_steps=5)
    assert set(r["per_node"]) == set(GP_NODES)
    assert all(math.isfinite(v) for m in r["per_node"].values() for v in m.values())
    assert r["all"]["rmse"] == pytest.approx(np.mean([r["per_node"][w]["rmse"] for w in GP_NODES]))
    assert r["unseen"]["crps"] == pytest.approx(np.mean([r["per_node"][w]["crps"] for w in UNSEEN_NODES]))
    assert r["pretrain_steps"] == 3 and r["num_steps"] == 6 and r["settings"]["freeze_steps"] == 2
    assert r["prediction"]["Mek"].samples.shape == (20, 180, 1)


def test_bad_arguments():
    with pytest.raises(ValueError, match="task"):
        sachs_split("extrapolate", 0)
    with pytest.raises(ValueError, match="method"):
        fit_sachs("interpolation", 0, "svi")
    with pytest.raises(ValueError, match="recipe"):
        fit_sachs("interpolation", 0, "dag_svi", recipe="fast")

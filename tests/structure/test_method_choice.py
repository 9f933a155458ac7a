"""fit's method by size: the rule of pyro_dag.structure.method_choice, and fit(X) with no options computing (and
naming) the exact posterior on a small graph, SVI-DAG when an SVI setting is given."""
import numpy as np
import pytest
import torch

from pyro_dag.structure import exact_posterior, fit
from pyro_dag.structure.method_choice import EXACT_AUTO_NODES, HYBRID_AUTO_NODES, choose_method


def test_the_rule():
    assert choose_method(5, 100, "linear").method == "exact"
    assert choose_method(EXACT_AUTO_NODES, 100, "bge").method == "exact"
    assert choose_method(37, 2000, "linear").method == "hybrid"
    assert choose_method(37, 40, "linear").method == "svi"                 # too few rows for the skeleton's tests
    assert choose_method(HYBRID_AUTO_NODES + 1, 10 ** 4, "linear").method == "svi"
    assert choose_method(5, 100, "mlp").method == "svi"                    # only SVI-DAG scores it
    choice = choose_method(5, 100, "linear", {"num_steps"})
    assert choice.method == "svi" and "num_steps" in choice.reason


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = 0.8 * a + 0.5 * rng.normal(size=n)
    c = -0.7 * b + 0.5 * rng.normal(size=n)
    return torch.tensor(np.stack([a, b, c], 1))


def test_fit_without_options_is_the_exact_posterior_and_says_so(capsys):
    X = _data()
    post = fit(X, num_threads=1)
    assert post.method == "exact" and post.settings["method"] == "exact"
    assert "exact posterior" in capsys.readouterr().err
    ref = exact_posterior(X, "linear", num_threads=1)
    assert torch.allclose(post.edge_probs(), ref.edge_probs())
    quiet = fit(X, progress=False, num_threads=1)
    assert quiet.method == "exact" and capsys.readouterr().err == ""


def test_an_svi_setting_or_method_svi_runs_svi_dag():
    X = _data(n=60)
    post = fit(X, num_steps=2, num_particles=2, progress=False, num_threads=1)
    assert post.method == "svi" and post.settings["method"] == "svi"
    with pytest.raises(ValueError, match="do not apply"):
        fit(X, method="exact", num_steps=2, progress=False)
    with pytest.raises(ValueError, match="method must be"):
        fit(X, method="fast", progress=False)

import numpy as np
import pytest

from pyro_dag.datasets.random_multifidelity import FIDELITY_MAPS, random_multifidelity


def test_draws_are_reproducible_nested_and_consistent_with_their_truth():
    for seed in range(6):
        p = random_multifidelity(seed)
        q = random_multifidelity(seed)
        names = list(p.train)
        assert names == [f"f{k + 1}" for k in range(len(names))] and len(names) in (2, 3)
        assert p.target == names[-1]
        for f in names:
            X, y = p.train[f]
            np.testing.assert_array_equal(X, q.train[f][0])
            assert ((X >= 0) & (X <= 1)).all() and y.shape == (X.shape[0], 1)
            np.testing.assert_allclose(y, p.truth[f](X), rtol=1e-12, atol=1e-12)   # deterministic by default
        for lo, hi in zip(names, names[1:]):
            low = {x.tobytes() for x in p.train[lo][0]}
            assert all(x.tobytes() in low for x in p.train[hi][0])      # nested designs
            assert p.train[hi][0].shape[0] <= p.train[lo][0].shape[0]
        assert p.parents[names[1]] == [names[0]]
        Xt, yt = p.test
        np.testing.assert_allclose(yt, p.truth[p.target](Xt))


def test_maps_differ_between_levels_and_are_related():
    """A linear map gives a high fidelity strongly correlated with the low one; the seeds draw every map."""
    p = random_multifidelity(3, num_fidelities=2, dim=2, maps=["linear"])
    X = np.random.default_rng(0).random((400, 2))
    lo, hi = p.truth["f1"](X)[:, 0], p.truth["f2"](X)[:, 0]
    assert abs(np.corrcoef(lo, hi)[0, 1]) > 0.8
    seen = {m for s in range(40) for m in random_multifidelity(s).maps}
    assert seen == set(FIDELITY_MAPS)


def test_noise_and_bad_arguments():
    p = random_multifidelity(1, num_fidelities=2, noise=0.1)
    X, y = p.train["f1"]
    assert not np.allclose(y, p.truth["f1"](X))
    with pytest.raises(ValueError, match="num_fidelities must be 2 or 3"):
        random_multifidelity(0, num_fidelities=4)
    with pytest.raises(ValueError, match="give 1 maps"):
        random_multifidelity(0, num_fidelities=2, maps=["cubic"])

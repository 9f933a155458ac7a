"""ExactGP.predict works through the rows in chunks (bounded memory on 10⁵ rows): the same numbers as one pass."""
import torch

import pyro_dag.baselines.exact_gp as exact_gp
from pyro_dag.baselines import ExactGP


def test_chunked_prediction_equals_one_pass(monkeypatch):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(150, 2, dtype=torch.float64, generator=g)
    y = torch.sin(4 * X[:, 0]) + X[:, 1] + 0.1 * torch.randn(150, dtype=torch.float64, generator=g)
    gp = ExactGP(restarts=1).fit(X, y)
    Xt = torch.rand(1003, 2, dtype=torch.float64, generator=g)
    one = gp.predict(Xt, include_noise=True)   # 1003 x 150 x 2 elements: one chunk
    monkeypatch.setattr(exact_gp, "PREDICT_CHUNK_ELEMENTS", 150 * 2 * 7)   # 7 rows per chunk, the last one short
    chunked = gp.predict(Xt, include_noise=True)
    for a, b in zip(one, chunked):   # the same to rounding (BLAS blocks the products by the chunk's size)
        assert a.shape == (1003,) and torch.allclose(a, b, rtol=1e-10, atol=1e-10)
    # and the closed form, written out
    Xs, Xts = (X - gp._lo) / gp._span, (Xt - gp._lo) / gp._span
    ls, sf2, sn2 = gp.log_lengthscale.exp(), gp.log_signal.exp(), gp.noise_fraction
    k = lambda A, B: sf2 * torch.exp(-0.5 * torch.cdist(A / ls, B / ls) ** 2)
    ys = (y - y.mean()) / y.std()
    K = k(Xs, Xs) + sn2 * torch.eye(150, dtype=torch.float64)
    Ks = k(Xts, Xs)
    mean = Ks @ torch.linalg.solve(K, ys)
    var = sf2 - (Ks * torch.linalg.solve(K, Ks.T).T).sum(-1) + sn2
    assert torch.allclose(chunked[0], y.mean() + y.std() * mean, atol=1e-8)
    assert torch.allclose(chunked[1], y.std() ** 2 * var, atol=1e-8)

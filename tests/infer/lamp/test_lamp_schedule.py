"""The LaMP-DGP batch schedule (Chang & Sung 2026, Eq. (13)), the paper's settings (Tables 1-2) and row-wise Adam
(Algorithm 1, line 12) against a dense Adam per row."""
import pytest
import torch

from pyro_dag.infer.lamp import LaMPSettings, RowwiseAdam, batch_size_schedule


def test_schedule_values():
    assert [batch_size_schedule(t, 10_000) for t in (1, 50, 100)] == [150, 150, 150]
    assert batch_size_schedule(101, 10_000) == 151                     # ⌈15 √101⌉ = ⌈150.75⌉
    assert batch_size_schedule(400, 10_000) == 300
    assert batch_size_schedule(1000, 10_000) == 475                    # ⌈474.34⌉
    assert batch_size_schedule(1111, 10_000) == 500 and batch_size_schedule(1112, 10_000) == 500
    assert batch_size_schedule(5000, 10_000) == 500                    # the cap m_max
    assert batch_size_schedule(1000, 320) == 320                       # capped by n
    assert batch_size_schedule(1, 90) == 90                            # n below the floor: full batch
    ts = range(1, 2000)
    sizes = [batch_size_schedule(t, 10_000) for t in ts]
    assert all(a <= b for a, b in zip(sizes, sizes[1:]))               # non-decreasing


def test_schedule_arguments():
    assert batch_size_schedule(100, 10_000, c=30, m_min=10, m_max=1000) == 300
    for bad in [dict(t=0, n=10), dict(t=1, n=0), dict(t=1.5, n=10)]:
        with pytest.raises(ValueError):
            batch_size_schedule(**bad)
    with pytest.raises(ValueError, match="c must be"):
        batch_size_schedule(1, 10, c=-1)


def test_paper_settings_tables_1_and_2():
    full, mini = LaMPSettings.full_batch(), LaMPSettings.mini_batch()
    assert full.lr == {"W": 0.1, "theta_hidden": 0.05, "theta_observed": 0.05, "nugget": 0.01}
    assert mini.lr == {"W": 0.05, "theta_hidden": 0.1, "theta_observed": 0.1, "nugget": 0.05}
    assert full.betas["W"] == (0.9, 0.99) and mini.betas["W"] == (0.9, 0.9)
    for s in (full, mini):
        assert s.betas["theta_hidden"] == s.betas["theta_observed"] == (0.5, 0.999)
        assert s.betas["nugget"] == (0.9, 0.999) and s.eps == 1e-4 and s.validate_every == 10
    assert (full.num_epochs, full.hyper_every, full.validation_fraction) == (5000, 25, 0.1)
    assert (mini.num_epochs, mini.hyper_every, mini.hyper_batch, mini.validation_fraction) == (1000, 50, 500, 0.2)
    assert mini.prediction_subset == 500
    assert LaMPSettings.paper(100) == full and LaMPSettings.paper(101) == mini
    assert full.batch_size(1000, 90) == 90 and mini.batch_size(400, 10_000) == 300


def test_lr_decay_every_250_epochs():
    mini = LaMPSettings.mini_batch()
    assert mini.lr_W(1) == mini.lr_W(250) == 0.05
    assert mini.lr_W(251) == pytest.approx(0.04) and mini.lr_W(1000) == pytest.approx(0.05 * 0.8 ** 3)
    assert LaMPSettings.full_batch().lr_W(4000) == 0.1


def test_replace_merges_and_checks():
    s = LaMPSettings.mini_batch().replace(num_epochs=20, lr={"W": 0.01})
    assert s.num_epochs == 20 and s.lr["W"] == 0.01 and s.lr["theta_hidden"] == 0.1
    with pytest.raises(ValueError, match="unknown LaMP setting"):
        LaMPSettings.mini_batch().replace(epochs=3)
    with pytest.raises(ValueError, match="unknown block"):
        LaMPSettings.mini_batch().replace(lr={"V": 1.0})
    with pytest.raises(ValueError, match="validation_fraction"):
        LaMPSettings.mini_batch().replace(validation_fraction=1.0)


def _batches(n, steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        m = int(torch.randint(1, n, (1,), generator=g))
        out.append(torch.randperm(n, generator=g)[:m])
    return out


def test_rowwise_adam_equals_a_dense_adam_per_row_and_leaves_other_rows_bitwise():
    n, d, betas, eps, lr = 9, 3, (0.9, 0.95), 1e-4, 0.05
    g = torch.Generator().manual_seed(3)
    init = torch.randn(n, d, generator=g, dtype=torch.float64)
    W = init.clone()
    adam = RowwiseAdam(W, betas=betas, eps=eps)
    rows_ref = [init[i].clone().requires_grad_() for i in range(n)]
    refs = [torch.optim.Adam([p], lr=lr, betas=betas, eps=eps) for p in rows_ref]
    for S in _batches(n, 25):
        grad = torch.randn(len(S), d, generator=g, dtype=torch.float64)
        before = W.clone()
        adam.step(S, grad, lr)
        untouched = torch.ones(n, dtype=torch.bool)
        untouched[S] = False
        assert torch.equal(W[untouched], before[untouched])          # rows outside the batch: bitwise
        for k, i in enumerate(S.tolist()):
            rows_ref[i].grad = grad[k].clone()
            refs[i].step()
    torch.testing.assert_close(W, torch.stack([p.detach() for p in rows_ref]), rtol=1e-12, atol=1e-14)
    counts = torch.zeros(n, dtype=torch.long)
    for S in _batches(n, 25):
        counts[S] += 1
    assert torch.equal(adam.steps, counts)


def test_stock_adam_on_the_whole_matrix_differs():
    """The teeth of the test above: a stock Adam over all rows moves rows outside the batch."""
    n, d = 6, 2
    W = torch.zeros(n, d, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([W], lr=0.1)
    W.grad = torch.ones(n, d, dtype=torch.float64)
    opt.step()
    W.grad = torch.zeros(n, d, dtype=torch.float64)
    W.grad[:2] = 1.0
    before = W.detach().clone()
    opt.step()
    assert not torch.equal(W.detach()[2:], before[2:])               # momentum moved the rows outside the batch
    R = torch.zeros(n, d, dtype=torch.float64)
    adam = RowwiseAdam(R, betas=(0.9, 0.999), eps=1e-8)
    adam.step(torch.arange(n), torch.ones(n, d, dtype=torch.float64), 0.1)
    before = R.clone()
    adam.step(torch.arange(2), torch.ones(2, d, dtype=torch.float64), 0.1)
    assert torch.equal(R[2:], before[2:])


def test_rowwise_adam_checks_shapes():
    with pytest.raises(ValueError, match=r"\[n, d\]"):
        RowwiseAdam(torch.zeros(3))
    adam = RowwiseAdam(torch.zeros(3, 2))
    with pytest.raises(ValueError, match="grad must be"):
        adam.step(torch.tensor([0, 1]), torch.zeros(2, 3), 0.1)

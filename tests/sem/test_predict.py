"""guide_samples: a clear error for num_samples < 1 and for data other than the training rows (the guide's per-case
latents belong to them); earlier these gave raw Pyro / torch errors or shape mismatches."""
import networkx as nx
import pyro
import pytest
from pyro.infer import SVI, Trace_ELBO

from pyro_dag.sem import LatentSEM, SEMSpecError
from pyro_dag.sem.guides import sem_guide
from pyro_dag.sem.predict import guide_samples

from test_model import IND, frame


@pytest.fixture(scope="module")
def fitted():
    pyro.clear_param_store()
    df, _, _ = frame(n=20)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=5)
    guide = sem_guide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    for _ in range(3):
        svi.step(df)
    return model, guide, df


@pytest.mark.parametrize("num_samples", [0, -1, 2.5, True])
def test_num_samples_below_one_is_refused(fitted, num_samples):
    model, guide, df = fitted
    with pytest.raises(SEMSpecError, match="num_samples must be a positive integer"):
        guide_samples(model, guide, df, num_samples=num_samples)


@pytest.mark.parametrize("rows", [slice(0, 5), slice(None)])
def test_rows_other_than_the_training_rows_are_refused(fitted, rows):
    import pandas as pd

    model, guide, df = fitted
    data = df.iloc[rows] if rows != slice(None) else pd.concat([df, df.iloc[:10]])
    with pytest.raises(SEMSpecError, match=f"data has {len(data)} rows but the guide was trained on 20"):
        guide_samples(model, guide, data, num_samples=3)
    draws = guide_samples(model, guide, df, num_samples=3)
    assert draws["A.x"].shape == (3, 20)

"""pyro_dag.plot.dag: the DAG with per-node posterior summaries."""
import numpy as np
import pytest
import torch

from helpers import collider_problem, setup_guide
from pyro_dag import plot
from pyro_dag.diagnostics import to_inference_data

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def test_dag_picture_from_predictions_and_idata():
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data)
    pred = model.predict(guide, inputs, num_samples=20)
    values, label = plot.node_summaries(model, pred)
    assert label == "posterior sd"
    assert values["w3"] == pytest.approx(float(pred["w3"].variance.sqrt().mean()))
    rmse, label = plot.node_summaries(model, pred, targets=data)
    assert label == "RMSE"
    assert rmse["w3"] == pytest.approx(float(((pred["w3"].mean - data["w3"]) ** 2).mean().sqrt()))
    ax = plot.dag(model, pred, targets=data, title="collider")
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("w3\n") for t in texts) and "x1" in texts
    assert ax.figure.axes[-1].get_ylabel() == "RMSE"  # the colour bar
    pos = {t.get_text().split("\n")[0]: t.get_position() for t in ax.texts}
    assert pos["x1"][0] < pos["w1"][0] < pos["w3"][0]  # depth slices left to right
    idata = to_inference_data(model, guide, inputs, data=data, num_samples=10)
    values, _ = plot.node_summaries(model, idata)
    assert set(values) == {"w1", "w2", "w3"}
    sd = idata.posterior["w1.f"].values.reshape(10, -1).std(0).mean()
    assert values["w1"] == pytest.approx(float(sd))
    plot.dag(model)  # the bare graph
    plt.close("all")
    with pytest.raises(ValueError, match="target node"):
        plot.node_summaries(model, {"w3": pred["w3"]}, targets={"w1": torch.zeros(12, 1)})
    assert np.isfinite(list(values.values())).all()

import networkx as nx
import torch
from pyro_dag import DAGDGP
from pyro_dag.infer import LatentMAP, train

s_train = torch.rand(80, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
step = torch.tanh(30 * (s_train - 0.5))                       # a step: a stationary GP fits it badly
lamp_model = DAGDGP(nx.DiGraph([("s", "warp"), ("warp", "step")])).double()   # the paper's two-layer DGP
lamp = LatentMAP(lamp_model, kernel="rbf", nugget=1e-4)       # nugget="estimate" for noisy data
lamp_result = train(lamp_model, lamp, {"s": s_train}, {"step": step}, num_steps=300, recipe="lamp")
s_test = torch.linspace(0, 1, 200, dtype=torch.float64)[:, None]
lamp_pred = lamp_model.predict(lamp, {"s": s_test}, num_samples=100)     # or lamp.predict(...)
print(lamp_pred["step"].mean.shape, lamp_pred["step"].samples.shape, lamp_result.best_step)
print(sorted(lamp.fitted_nodes()), lamp.latent_values()["warp"].shape)   # exact GPs; MAP values of the hidden node

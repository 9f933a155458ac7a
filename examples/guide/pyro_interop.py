from pyro.infer import MCMC, NUTS, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

import pyro_dag

pyro.clear_param_store()
normal = AutoNormal(model)                                           # Pyro's own guide: samples U, then F | U
svi = SVI(model, normal, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
for step in range(20):
    svi.step({"x": x}, {"y": y, "c": c})
draws = Predictive(model, guide=normal, num_samples=10)({"x": x})
print(draws["y.y"].shape)                                            # [10, n, 1]

pyro.clear_param_store()                                             # a new model with the same node names
small = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=5, sample_f=True)  # node values as sample sites
mcmc = MCMC(NUTS(small), num_samples=20, warmup_steps=20, disable_progbar=True)
mcmc.run({"x": x[:30]}, {"y": y[1:31]})
idata = pyro_dag.to_inference_data(mcmc=mcmc)                        # ArviZ InferenceData
print(idata.posterior["y.u"].shape)                                  # (chain, draw, 1, 5)

import arviz as az

from pyro_dag.diagnostics import MCMCStats
from pyro_dag.infer import TracedNUTS

pyro.clear_param_store()
small = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=5, sample_f=True,  # node values for MCMC
               collapse="inducing",                                  # the leaf's u integrated out, drawn after
               priors="weakly_informative")                          # + hyperpriors that NUTS samples
stats, runs = MCMCStats(), []                                        # divergences, step size, tree depth
for chain in range(2):                                               # two chains, one after the other (one core)
    pyro.set_rng_seed(chain)
    mcmc = MCMC(TracedNUTS(small), num_samples=200, warmup_steps=200,  # NUTS, its potential traced once:
                hook_fn=stats, disable_progbar=True)                 # the same potential, cheaper gradients
    mcmc.run({"x": x[:30]}, {"y": y[1:31]})
    runs.append(mcmc)
idata = pyro_dag.to_inference_data(mcmc=runs, sample_stats=stats)   # one chain per run
print(sorted(idata.groups()))
print(az.summary(idata, kind="diagnostics")["r_hat"].max())         # R-hat over every variable: 1.01
loo = az.loo(idata, var_name="y.y")                                  # PSIS-LOO, one variable per observed node
ax = pyro_dag.plot.dag(small, idata)                                 # the DAG with each node's posterior sd

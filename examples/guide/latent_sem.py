import pyro
from pyro.infer import Trace_ELBO
from pyro_dag.datasets.latent_sem import quadratic_sem
from pyro_dag.sem import LatentSEM, guide_samples, latent_means, predictive_log_likelihood, sem_guide
from pyro_dag.sem import sem_inference_data

sem_data = quadratic_sem(n=150, seed=0)             # X2 = 4 X1² + noise; Y1..Y3 measure X1, Y4..Y6 measure X2
print(sem_data.indicators, sem_data.anchors)
sem = LatentSEM(sem_data.graph, indicators=sem_data.indicators, anchors=sem_data.anchors, num_inducing=20)
sem_g = sem_guide(sem)                              # globals: AutoStructuredGuide; per case: a joint Gaussian
sem_svi = pyro.infer.SVI(sem, sem_g, pyro.optim.ClippedAdam({"lr": 0.02}), Trace_ELBO())
for step in range(300):
    sem_svi.step(sem_data.data, subsample_size=50)  # a DataFrame of the six indicator columns
draws = guide_samples(sem, sem_g, sem_data.data, num_samples=50)
means = latent_means(sem, draws)                    # [150, 2] posterior means, in the anchors' units
print(means.shape)
print(predictive_log_likelihood(sem, draws, sem_data.data.iloc[:5], num_latent_samples=200).shape)
sem_idata = sem_inference_data(sem, sem_data.data, samples=draws)   # ArviZ: posterior, log_likelihood, ...
print(sem_idata.posterior["X1.x"].shape, sem_idata.log_likelihood["indicators"].shape)   # (1, 50, 150) twice

import pyro_dag.structure as S
from pyro_dag.datasets import sample_sem

d = sample_sem(p=5, n=500, graph="er", mechanism="linear", num_edges=5, seed=0)  # d.data: [500, 5]
post = S.fit(d.data, likelihood="linear", num_steps=200, progress=False)
P = post.edge_probs()                     # [p, p], P[i, j] = P(i -> j)
dags = post.sample(1000)                  # [1000, p, p], every sample a DAG
print(sorted(post.to_networkx(threshold=0.5).edges()))

exact = S.exact_posterior(d.data, likelihood="linear")   # the same model, exactly (p <= 20)
print((P - exact.edge_probs()).abs().max())

from pyro_dag import metrics

print(metrics.structure_metrics(dags, d.adjacency, level="cpdag"))   # brier, e_shd, e_f1, auroc, auprc, edges
print(metrics.crps_samples(pred["h"].samples, h).item(), metrics.rmse(pred["h"].mean, h).item())

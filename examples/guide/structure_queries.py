i, j = (int(k) for k in d.adjacency.nonzero()[0])   # a true edge of d's graph
given = {(i, j): True, (j, 4): False}     # evidence: edges (indices or names) -> present / absent
print(round(exact.prob(given), 4))        # P(evidence | data), exactly (order DP on the restricted posterior)
P_given = exact.edge_probs(given=given)   # [p, p] P(i -> j | data, evidence), exactly
A_map = exact.map_dag(given=given)        # the most probable DAG given the evidence (a tie would warn)
dags_given = exact.sample(500, seed=0, given=given)   # exact conditional samples

spn = S.order_spn(exact, "exact", num_orders=500, expansion=(4, 2))   # order circuit on exact order samples
print(spn.num_orders, round(spn.coverage, 3))   # orders in its support, their exact posterior mass
print(bool((spn.edge_probs(given=given) - P_given).abs().max() < 0.2))  # exact in the circuit, near the DP
bce = spn.causal_effects(given=given)     # [p, p] expected total linear causal effects E[(I - B)^-1]

P_fit, se = post.edge_probs(given={(i, j): False}, return_stderr=True)  # fit: from its samples, with SEs

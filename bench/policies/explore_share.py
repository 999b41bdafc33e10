"""How much does the tree-ensemble policy still explore on a low-signal stream? The mean
probability of the greedy action over events 20k-30k of ``mooc_course`` (seed 0, defaults).

    python -m bench.policies.explore_share
"""
import numpy as np
from bench.common.streams import BanditStream
from bench.policies.compare import load
from online.policies.trees import TreeEnsemblePolicy
data = load("mooc_course")
pol = TreeEnsemblePolicy(seed=0)
for a in data.actions:
    pol.add_action(a)
best_p = []
for i, (x, row, label) in enumerate(BanditStream(data, seed=0).steps(30000)):
    d = pol.decide(x)
    if i >= 20000:
        best_p.append(max(d.probabilities.values()))
    pol.learn_one(x, d.action, float(d.action == data.actions[label]), d.probability)
print(f"mean probability of the greedy action over events 20k-30k: {np.mean(best_p):.3f}")

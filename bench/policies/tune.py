"""Choosing the tree-ensemble policy's defaults on held-out streams (not Letter, Shuttle, Adult).

Each variant (a name and the JSON of ``TreeEnsemblePolicy`` parameters that differ from the
defaults of the time) plays the paper's protocol on each stream; a name that is a peer of
``compare.PLAYERS`` (linucb, vw_eps, vw_squarecb) plays that peer. Prints the average reward at
1k, 3k, 10k, 30k, 100k steps and over the last 10k steps. Streams with more than 300 variables
get sparse contexts ({variable: 1} for the set ones). Seeds: $SEEDS (default 0).

    python -m bench.policies.tune 30000 vowel,vehicle 'base={}' 'nl63={"num_leaves": 63}' linucb={}
"""
import json, sys, time, os
import numpy as np
from bench.policies.compare import load, TreesPlayer, PLAYERS
from bench.common.streams import BanditStream
steps = int(sys.argv[1]); datas = sys.argv[2].split(","); seeds=[int(s) for s in os.environ.get("SEEDS","0").split(",")]
variants = [(v.split("=",1)[0], json.loads(v.split("=",1)[1])) for v in sys.argv[3:]]
H = [h for h in (1000, 3000, 10000, 30000, 100000, 300000) if h <= steps]
class Sparse(TreesPlayer):
    def play(self, X, y):
        out = np.empty(len(y)); names = np.array(self.names, dtype=object)
        decide, learn, index = self.policy.decide, self.policy.learn_one, self.index
        for i, (row, label) in enumerate(zip(X.view(bool), y.tolist())):
            x = dict.fromkeys(names[row].tolist(), 1)
            d = decide(x); out[i] = r = 1.0 if index[d.action] == label else 0.0
            learn(x, d.action, r, d.probability)
        return out
for d in datas:
    data = load(d)
    for name, params in variants:
        for seed in seeds:
            if name in PLAYERS and name != "trees":
                p = PLAYERS[name](data, seed, {})
            else:
                params = dict(params); sp = params.pop("sparse", data.X.shape[1] > 300)
                p = (Sparse if sp else TreesPlayer)(data, seed, **params)
            s = BanditStream(data, seed=seed)
            t = time.process_time(); rs = []
            for X, y in s.chunks(steps): rs.append(p.play(X, y))
            r = np.concatenate(rs); c = np.cumsum(r)
            cpu = time.process_time() - t
            pol = getattr(p, "policy", None)
            print(f"{d:10s} {name:14s} s{seed} " + " ".join(f"{h//1000}k={c[h-1]/h:.4f}" for h in H)
                  + f" last10k={r[-10000:].mean():.4f} cpu={cpu:.0f}s refits={getattr(pol,'n_refits',None)}", flush=True)

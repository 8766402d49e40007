# numpy's figures for bench/sum.ts on the float32 values in argv[1]: its float32 sum (pairwise), mean, var and
# the GB/s of the sum; prints JSON.
import json, sys
import numpy as np
from timing import best

x = np.fromfile(sys.argv[1], dtype=np.float32)
ones = np.ones_like(x)
out = {'sum': float(x.sum()), 'ones': float(ones.sum()), 'mean': float(x.mean()), 'var': float(x.var(ddof=1))}
out['sumGBs'] = 4 * x.size / best(lambda: x.sum()) / 1e9
print(json.dumps(out))

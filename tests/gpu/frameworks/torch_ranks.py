"""A two-rank PyTorch job (torchrun) whose ranks move different amounts
(issue 15's GPU check of rank-aware jobs). No process group: each rank
uploads (rank + 1) x 4 MiB of pageable memory three times and reads 4 MiB
back once, on the one GPU they share, and prints its counts as JSON.
Exits 77 ("no GPU") without torch or CUDA.
"""
import json
import os
import sys

try:
    import torch
except ImportError:
    print("torch_ranks: torch not installed: no GPU test here")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch_ranks: no GPU")
    sys.exit(77)

rank = int(os.environ["RANK"])
n = (rank + 1) << 20  # float32 elements: (rank + 1) x 4 MiB
x = torch.arange(n, dtype=torch.float32)
for _ in range(3):
    d = x.cuda()
y = d[: 1 << 20].cpu()
assert torch.equal(y, x[: 1 << 20])
print("torch_ranks " + json.dumps({"rank": rank, "H2D": 3 * 4 * n, "D2H": 4 << 20}), flush=True)

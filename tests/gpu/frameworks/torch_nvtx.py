"""PyTorch copies inside torch.cuda.nvtx ranges (issue 15's GPU check).

Uploads a 4 MiB pageable tensor three times inside "upload", reads it back
twice inside "train" > "readback", and prints the bytes it moved per range as
JSON on its last line, for tests/gpu/check_torch_nvtx.py to compare with the
report's per-range totals. Exits 77 ("no GPU") without torch or CUDA.
"""
import json
import sys

try:
    import torch
except ImportError:
    print("torch_nvtx: torch not installed: no GPU test here")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch_nvtx: no GPU")
    sys.exit(77)

N = 1 << 20  # float32: 4 MiB
x = torch.arange(N, dtype=torch.float32)
torch.cuda.init()
with torch.cuda.nvtx.range("upload"):
    for _ in range(3):
        d = x.cuda()
torch.cuda.synchronize()
with torch.cuda.nvtx.range("train"):
    with torch.cuda.nvtx.range("readback"):
        for _ in range(2):
            y = d.cpu()
assert torch.equal(y, x)
print(json.dumps({"upload": {"H2D": 3 * 4 * N}, "train / readback": {"D2H": 2 * 4 * N},
                  "train": {"D2H": 2 * 4 * N}}))

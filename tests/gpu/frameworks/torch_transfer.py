"""PyTorch: torch.from_numpy(x).cuda() (pageable H2D), .pin_memory().cuda() (pinned H2D), .cpu() (D2H).

Expected at least: H2D 2*SIZE bytes (SIZE from pageable), D2H SIZE bytes."""
import sys

from common import SIZE, need, no_gpu

np = need("numpy")
torch = need("torch")
if not torch.cuda.is_available():
    no_gpu("torch.cuda.is_available() is False")

x = np.arange(SIZE // 4, dtype=np.float32)
t = torch.from_numpy(x).cuda()  # pageable -> device
torch.cuda.synchronize()
p = torch.from_numpy(x).pin_memory()
t2 = p.cuda(non_blocking=True)  # pinned -> device
torch.cuda.synchronize()
y = t.cpu()  # device -> pageable
ok = np.array_equal(y.numpy(), x) and bool(torch.equal(t, t2))
print("torch transfers", "OK" if ok else "MISMATCH")
sys.exit(0 if ok else 1)

"""tensor.cpu() of a 256 MiB CUDA tensor into fresh pageable memory, timed with
the caller's clock (median of N), results checked. Issue 12's bar: >= 5x the
driver's pageable path under cuxfer record --rewrite=pin (`devtools/gpu.sh torch-cpu`)."""
import statistics
import sys
import time

try:
    import torch
except ImportError as e:  # visible skip
    print(f"torch not importable: {e}")
    sys.exit(77)
if not torch.cuda.is_available():
    print("no GPU")
    sys.exit(77)

n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
x = torch.arange(64 * 1024 * 1024, device="cuda", dtype=torch.float32)
torch.cuda.synchronize()
ref = x[::4097].cpu()
last = x[-1].item()
times = []
for i in range(n):
    t0 = time.perf_counter()
    y = x.cpu()  # a new pageable tensor each time: fresh memory
    times.append((time.perf_counter() - t0) * 1e3)
    if not torch.equal(y[::4097], ref) or y[-1].item() != last:
        print("MISMATCH")
        sys.exit(1)
    del y
print(f"tensor_cpu_fresh_256MiB median_ms={statistics.median(times):.1f} all_ms=" + ",".join(f"{t:.1f}" for t in times))

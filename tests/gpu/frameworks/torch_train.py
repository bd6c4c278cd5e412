"""PyTorch training loop as users run it: a small CNN on synthetic data, a
DataLoader with worker processes and pin_memory=False, batches moved with
.cuda(), the loss read back with .item() every step. Deterministic: prints the
losses and a checksum of the final weights, which must be identical with and
without cuxfer (observe and --rewrite=pin). `--profile` also runs PyTorch's
own profiler (CUPTI) over the loop. Prints the bytes the loop moved to the GPU
by its own count (batches and labels), for cross-checking the report.

  torch_train.py [--epochs 2] [--batches 24] [--batch 256] [--workers 2] [--profile]
"""
import argparse
import hashlib
import sys

from common import need, no_gpu

torch = need("torch")
if not torch.cuda.is_available():
    no_gpu("torch.cuda.is_available() is False")

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--batches", type=int, default=24)
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--profile", action="store_true")
a = ap.parse_args()

torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.use_deterministic_algorithms(True, warn_only=True)


class Synthetic(torch.utils.data.Dataset):
    def __len__(self):
        return a.batches * a.batch

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), int(i % 10)


class GlobalMean(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=(2, 3))  # deterministic backward, unlike adaptive pooling's


# Layers with deterministic CUDA backward passes only: the weights must come out
# bit-identical run to run.
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(2),
    torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), GlobalMean(),
    torch.nn.Linear(32, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loader = torch.utils.data.DataLoader(Synthetic(), batch_size=a.batch, shuffle=False, num_workers=a.workers,
                                     pin_memory=False)
moved = 0
losses = []


def train():
    global moved
    for _ in range(a.epochs):
        for x, y in loader:
            moved += x.numel() * x.element_size() + y.numel() * y.element_size()
            x, y = x.cuda(), y.cuda()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())


if a.profile:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        train()
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    print(f"torch profiler: {len(kernels)} CUDA event kinds recorded")
    if not kernels:
        print("torch profiler recorded no CUDA activity")
        sys.exit(1)
else:
    train()
h = hashlib.sha256()
for p in model.parameters():
    h.update(p.detach().cpu().numpy().tobytes())
print(f"torch_train: steps={len(losses)} first_loss={losses[0]:.6f} last_loss={losses[-1]:.6f} "
      f"h2d_bytes_by_torch={moved} weights_sha256={h.hexdigest()[:16]}")

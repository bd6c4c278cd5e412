#!/usr/bin/env python3
"""A PyTorch training step as small as they come, from pageable batches: the
cost of recording on a real training loop (issue 13's <= 1 % bar). An MLP
(1024-4096-1024), batches made on the CPU in pageable memory and moved with
.cuda() (synchronous H2D from pageable memory), labels too, loss.item() each
step (a 4-byte synchronous D2H), Adam. Prints one line:

  steps=N ms_per_step=X total_s=Y h2d_copies=N block_median_ms=B block_min_ms=M

after --warmup untimed steps, timed with the caller's clock around the loop
(torch.cuda.synchronize() at both ends). block_median_ms / block_min_ms: the
loop timed in blocks of --block steps (each step ends in loss.item(), which
waits for the step's GPU work, so a block boundary needs no extra sync), the
median and the fastest block's ms a step: a run's pauses (another tenant of
the host, a page-cache flush) move its mean but hardly its block median.
Exit 77 without torch or a GPU.

--toggle: the in-process A/B. Blocks of --block steps alternate between
torch.cuda.profiler.start() ("on") and torch.cuda.profiler.stop() ("off")
in ABBA order (off on on off, ...: a linear drift cancels within each
four), and the line adds each kind's median block, and the median over
adjacent on/off pairs of on/off with its interquartile range:

  ... toggle_pairs=P on_median_ms=A off_median_ms=B paired_ratio=R paired_iqr=LO-HI pair_ratios=R1,R2,...
      step_paired_ratio=S step_pair_ratios=S1,S2,... cpu_paired_ratio=C cpu_pair_ratios=C1,C2,...

pair_ratios compare the blocks' mean step (their wall time: everything,
pauses included); step_pair_ratios compare the blocks' median step (each
step timed alone; it ends in loss.item(), so its GPU work is in it): what
recording adds to a typical step, without the pauses (another tenant, the
interpreter's collector, a page-cache flush) that spread the first +-3-5 %.
A cost that comes as rare long stalls shows in the first and not the second.
cpu_pair_ratios compare the blocks' CPU time on the loop's thread
(time.thread_time: the hooks run there; the time the thread was not
scheduled, which another tenant of a VM's cores takes, is not in it). It
leaves out the shim's writer thread, which costs the loop only where cores
are short: the wall-clock ratios carry that.

Under `cuxfer record --capture-range=cudaProfilerApi` only the "on" blocks
are recorded, so R is what recording costs the loop with everything else
the same process (placement, clocks, allocator state): the between-process
noise that hides a 1 % effect here cancels. Without cuxfer, or recording the
whole run, the profiler calls change nothing and R is an A/A control.
--toggle-dry labels the blocks the same way without calling the profiler at
all: the A/A without the driver's cudaProfilerStart/Stop, to tell what those
calls move by themselves from what the block order does.

  torch_step.py [--steps 400] [--warmup 50] [--batch 256] [--block 50] [--toggle | --toggle-dry]
"""
import argparse
import statistics
import sys
import time

try:
    import torch
except ImportError as e:
    print(f"torch_step: no torch ({e}): skipping")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch_step: no GPU: skipping")
    sys.exit(77)

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=400)
ap.add_argument("--warmup", type=int, default=50)
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--block", type=int, default=50)
ap.add_argument("--toggle", action="store_true")
ap.add_argument("--toggle-dry", action="store_true")
a = ap.parse_args()
if a.toggle and a.toggle_dry:
    ap.error("--toggle and --toggle-dry exclude each other")
dry = a.toggle_dry
a.toggle = a.toggle or dry
if a.toggle and a.steps < 4 * a.block:
    ap.error("--toggle needs --steps of at least four --block")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
loss_fn = torch.nn.MSELoss()
batches = [(torch.randn(a.batch, 1024), torch.randn(a.batch, 1024)) for _ in range(8)]


def step(i):
    x, y = batches[i % len(batches)]
    x, y = x.cuda(), y.cuda()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def recorded(b):
    """Block b's kind under --toggle: off on on off, repeated."""
    return b % 4 in (1, 2)


for i in range(a.warmup):
    step(i)
torch.cuda.synchronize()
blocks, kinds, block_steps, steps_ms, cpu_blocks = [], [], [], [], []
t0 = tb = time.perf_counter()
cb = time.thread_time()
toggle_s = 0.0
for i in range(a.steps):
    if a.toggle and i % a.block == 0:
        # Outside the block's time: the switch itself is not what is measured.
        ts = time.perf_counter()
        b = i // a.block
        if not dry and (b == 0 or recorded(b) != recorded(b - 1)):
            (torch.cuda.profiler.start if recorded(b) else torch.cuda.profiler.stop)()
        tb = time.perf_counter()
        cb = time.thread_time()
        toggle_s += tb - ts
    s0 = time.perf_counter()
    step(i)
    now = time.perf_counter()
    steps_ms.append(1e3 * (now - s0))
    if (i + 1) % a.block == 0:
        blocks.append(1e3 * (now - tb) / a.block)
        kinds.append(recorded(i // a.block))
        block_steps.append(statistics.median(steps_ms))
        c = time.thread_time()
        cpu_blocks.append(1e3 * (c - cb) / a.block)
        steps_ms = []
        tb, cb = now, c
torch.cuda.synchronize()
t = time.perf_counter() - t0 - toggle_s
line = ""
if a.toggle:
    if not dry:
        torch.cuda.profiler.stop()
    on = [v for v, k in zip(blocks, kinds) if k]
    off = [v for v, k in zip(blocks, kinds) if not k]

    def paired(v):
        """On over off for adjacent pairs (0,1) and (2,3) of each four, i.e. off-on then on-off."""
        return sorted(v[j + 1] / v[j] if not kinds[j] else v[j] / v[j + 1] for j in range(0, len(v) - 1, 2))

    ratios, step_ratios, cpu_ratios = paired(blocks), paired(block_steps), paired(cpu_blocks)
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [ratios[0], 0, ratios[-1]]
    line = (f" toggle_pairs={len(ratios)} on_median_ms={statistics.median(on):.4f} "
            f"off_median_ms={statistics.median(off):.4f} paired_ratio={statistics.median(ratios):.4f} "
            f"paired_iqr={q[0]:.4f}-{q[2]:.4f} pair_ratios={','.join(f'{r:.4f}' for r in ratios)} "
            f"step_paired_ratio={statistics.median(step_ratios):.4f} "
            f"step_pair_ratios={','.join(f'{r:.4f}' for r in step_ratios)} "
            f"cpu_paired_ratio={statistics.median(cpu_ratios):.4f} "
            f"cpu_pair_ratios={','.join(f'{r:.4f}' for r in cpu_ratios)}")
blocks = sorted(blocks) or [1e3 * t / a.steps]
print(f"steps={a.steps} ms_per_step={1e3 * t / a.steps:.4f} total_s={t:.3f} h2d_copies={2 * a.steps} "
      f"block_median_ms={blocks[len(blocks) // 2]:.4f} block_min_ms={blocks[0]:.4f}{line}")

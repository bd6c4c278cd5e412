#!/usr/bin/env python3
"""Hugging Face generate() on a small GPT-2 made here (no download): many tiny
copies and a device-to-host read per token, the pattern the rewrite must not
slow (docs/benchmarks.md, "Programs not written for cuxfer").

  hf_generate.py [--calls 40] [--warmup 5] [--new-tokens 64] [--layers 6]

The model is GPT2LMHeadModel from GPT2Config(n_layer=--layers) with seeded
random weights (the size of distilgpt2), greedy decoding of --new-tokens
tokens after a 16-token prompt, batch 1. Each generate() is timed with the
caller's clock (perf_counter around the call, after a synchronize) and with
CUDA events on the current stream. Prints one line:
  generate calls=N new_tokens=T median_ms=X min_ms=X max_ms=X event_median_ms=X tokens=<sha of the output ids>
The output ids are the same in every run (greedy, seeded): the run script
checks them. Exit 77 when torch, transformers or a GPU is missing (said).
"""
import argparse
import hashlib
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--layers", type=int, default=6)
    a = ap.parse_args()
    try:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel
    except Exception as e:  # noqa: BLE001 - any import failure means "cannot run here"
        print(f"hf_generate: skipping: torch or transformers not importable ({e})")
        return 77
    if not torch.cuda.is_available():
        print("hf_generate: no GPU (torch.cuda.is_available() is False): skipping")
        return 77
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=a.layers)
    model = GPT2LMHeadModel(cfg).cuda().eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1)).cuda()
    mask = torch.ones_like(prompt)
    kw = dict(attention_mask=mask, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False,
              pad_token_id=cfg.eos_token_id)
    times, ev_times, out = [], [], None
    with torch.inference_mode():
        for i in range(a.warmup + a.calls):
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            e0.record()
            out = model.generate(prompt, **kw)
            e1.record()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            if i >= a.warmup:
                times.append((t1 - t0) * 1e3)
                ev_times.append(e0.elapsed_time(e1))
    ids = out.cpu().numpy().tobytes()
    print(f"generate calls={a.calls} new_tokens={a.new_tokens} median_ms={statistics.median(times):.3f} "
          f"min_ms={min(times):.3f} max_ms={max(times):.3f} event_median_ms={statistics.median(ev_times):.3f} "
          f"tokens={hashlib.sha256(ids).hexdigest()[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

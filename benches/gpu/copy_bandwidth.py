"""Device-to-device copy bandwidth (PyTorch) at w1's and w8's sizes and at 1 GiB: the ceiling
the memory-bound workloads' targets are measured against. One copy between events (what one
call costs) and 100 back to back (the copy engine's rate); best of 50, bytes read plus written."""
import torch


def best_seconds(n, back_to_back):
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    for _ in range(5):
        y.copy_(x)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(back_to_back):
            y.copy_(x)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / back_to_back)
    return best


for name, n in (("w1", 1 << 24), ("w8", 1 << 22), ("1 GiB", 1 << 28)):
    for k in (1, 100):
        t = best_seconds(n, k)
        print(f"copy {name} ({n} f32) x{k}: {t * 1e6:.2f} us a copy, {8 * n / t / 1e9:.0f} GB/s")

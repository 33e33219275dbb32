#!/usr/bin/env bash
# Issue 31's loss curve on a machine with an NVIDIA GPU, from the repository root, after
# benches/gpu/stage.sh: w10 (GPT-2 124M, bf16 products) trained for 300 steps by ferrax on
# CUDA and by jax_reference.py's step on JAX, from the same parameters on the same batches
# (windows of Shakespeare's text); prints both curves side by side. About three minutes. The
# inputs (500 MB of parameters) stay in /tmp; the curves' JSON go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/ferrax-gpu}
data=/tmp/ferrax-loss
mkdir -p "$out" "$data"
timeout 300 .gpu/ferrax-bench loss-curve w10 --steps "${STEPS:-300}" --device cuda --out "$data"
echo "ferrax-bench loss-curve exit $?"
PYTHONUNBUFFERED=1 timeout 400 python3 .gpu/jax_loss_curve.py "$data" \
    --reference .gpu/jax_reference.py | tee "$out/loss_curve.md"
echo "jax_loss_curve exit $?"
cp "$data"/*.json "$out"/

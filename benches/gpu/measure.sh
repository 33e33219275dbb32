#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, from the repository root, after benches/gpu/stage.sh:
# the CUDA test suite, the training example, each kernel's device time (ncu, where present),
# the device-to-device copy bandwidth at w1's and w8's sizes, GPU artifacts' load times, and
# compare.py against JAX on the same GPU. Logs go to $OUT (default /tmp/ferrax-gpu); the table
# prints last. The tests took 109-146 s on an H100; compare.py's two rounds of ten calls are
# meant to fit what is left of ten minutes.
set -uo pipefail
out=${OUT:-/tmp/ferrax-gpu}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
FERRAX_REQUIRE_GPU=1 timeout 300 .gpu/gpu-tests --test-threads 1 >"$out/tests.log" 2>&1
echo "tests/gpu.rs exit $?"
grep -E "FAILED|panicked|test result" "$out/tests.log"
timeout 60 .gpu/train_mlp --device cuda >"$out/train.log" 2>&1
echo "train_mlp --device cuda exit $?"
tail -3 "$out/train.log"
if command -v ncu >/dev/null; then
    timeout 90 ncu --clock-control none --csv --page raw \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        .gpu/ferrax-bench --device cuda --reps 1 \
        --only w1_gelu,w2_softmax,w3_layernorm,w4_matmul,w5_mlp_step,w7_rowsum,w8_sin_chain,w14_embedding_gather,w14_embedding_scatter_add,w14_embedding_scatter_add_atomic \
        >"$out/ncu.csv" 2>/dev/null
    echo "ncu kernel times: $out/ncu.csv (exit $?)"
fi
timeout 60 python3 .gpu/copy_bandwidth.py
# GPU artifacts' load times (issue 28): with machine code (ptxas on PATH assembles it when
# the artifact is made), then PTX alone with the driver's cache off, so each load compiles.
rows=w5_artifact_load,w9_artifact_load
{
    timeout 60 .gpu/ferrax-bench --device cuda --reps 10 --only $rows
    FERRAX_PTXAS=off CUDA_CACHE_DISABLE=1 timeout 90 .gpu/ferrax-bench --device cuda --reps 5 \
        --only $rows
} >"$out/artifacts.log" 2>&1
echo "artifact loads exit $?"
grep -E "artifact" "$out/artifacts.log"
# The workloads ferrax runs on the GPU today: JAX's GPT and CNN rows alone outrun the lease.
only=w1_gelu,w2_softmax,w3_layernorm,w4_matmul,w5_mlp_step,w6_compile_mlp_step,w6_compile_softmax
only=$only,w7_rowsum,w8_sin_chain,w13_scan_rnn_grad,w14_embedding_gather,w14_embedding_scatter_add
only=$only,w14_embedding_scatter_add_atomic
PYTHONUNBUFFERED=1 timeout $((560 - SECONDS)) python3 .gpu/compare.py --rounds 2 \
    "./.gpu/ferrax-bench --device cuda --reps 10 --only $only" \
    "python3 .gpu/jax_reference.py --reps 10 --only $only" \
    >"$out/compare.log" 2>&1
echo "compare.py exit $?"
cat "$out/compare.log"

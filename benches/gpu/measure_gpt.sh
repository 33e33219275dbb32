#!/usr/bin/env bash
# Issue 31's measurements on a machine with an NVIDIA GPU, from the repository root, after
# benches/gpu/stage.sh: the attention kernels and recorded graphs on the device (tests/gpu.rs),
# then w10's estimated traffic floor (ferrax-bench gpu-traffic), the w9 and w10 GPT steps with
# and without CUDA graphs, and JAX's on the same GPU
# (compare.py), with each attention kernel's device time under ncu where present. Logs go to
# $OUT (default /tmp/ferrax-gpu); the table prints last. Meant to fit in ten minutes.
set -uo pipefail
out=${OUT:-/tmp/ferrax-gpu}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
FERRAX_REQUIRE_GPU=1 timeout 120 .gpu/gpu-tests --test-threads 1 attention recorded \
    >"$out/tests.log" 2>&1
echo "tests/gpu.rs (attention, recorded runs) exit $?"
grep -E "FAILED|panicked|test result" "$out/tests.log"
rows=w9_gpt_step,w10_gpt2_124m_step,w10_compile_gpt2_124m_step
# The estimated floor of the w10 step (host only, about a second), to set beside its time.
.gpu/ferrax-bench gpu-traffic w10 --top 15 >"$out/traffic.log" 2>&1
head -9 "$out/traffic.log"
timeout 150 .gpu/ferrax-bench --device cuda --cuda-graphs --reps 5 --only $rows \
    >"$out/graphs.jsonl" 2>"$out/graphs.log"
echo "ferrax-bench --cuda-graphs exit $?"
cat "$out/graphs.jsonl"
if command -v ncu >/dev/null; then
    timeout 120 ncu --clock-control none --csv --page raw -k regex:_a[0-9]+ \
        --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
        .gpu/ferrax-bench --device cuda --reps 1 --only w10_gpt2_124m_step \
        >"$out/ncu_attention.csv" 2>/dev/null
    echo "ncu attention kernels: $out/ncu_attention.csv (exit $?)"
fi
PYTHONUNBUFFERED=1 timeout $((580 - SECONDS)) python3 .gpu/compare.py --rounds 1 \
    "./.gpu/ferrax-bench --device cuda --reps 5 --only $rows" \
    "python3 .gpu/jax_reference.py --reps 5 --only w9_gpt_step,w10_gpt2_124m_step" \
    >"$out/compare.log" 2>&1
echo "compare.py exit $?"
cat "$out/compare.log"

#!/usr/bin/env bash
# Issues 31 and 28 in one call of under ten minutes (a 15-minute lease holds one such call and
# the machine's start), from the repository root after benches/gpu/stage.sh, most wanted
# first, each part under its own limit: the attention kernels and recorded runs on the device;
# the GPT steps with and without CUDA graphs; JAX's; w10's loss curve against JAX's (with
# JAX's compile time); GPU artifacts' load times; then the rest of tests/gpu.rs in what is
# left (DEADLINE seconds in all, 570 by default). Logs and JSON lines go to $OUT (default
# /tmp/ferrax-gpu); the tables print last.
set -uo pipefail
out=${OUT:-/tmp/ferrax-gpu}
mkdir -p "$out"
deadline=${DEADLINE:-570}
# Seconds left before the deadline, at least $1 (a part that runs late still gets that much).
left() { local t=$((deadline - SECONDS - ${2:-0})); echo $((t > $1 ? t : $1)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
command -v ptxas || echo "no ptxas on PATH: modules load as PTX"
FERRAX_REQUIRE_GPU=1 timeout 90 .gpu/gpu-tests --test-threads 1 attention recorded \
    >"$out/tests_attention.log" 2>&1
echo "tests/gpu.rs (attention, recorded runs) exit $? at ${SECONDS}s"
grep -E "FAILED|panicked|test result" "$out/tests_attention.log"
.gpu/ferrax-bench gpu-traffic w10 --top 15 >"$out/traffic.log" 2>&1
rows=w9_gpt_step,w10_gpt2_124m_step,w10_compile_gpt2_124m_step
timeout 150 .gpu/ferrax-bench --device cuda --cuda-graphs --reps 5 --only $rows \
    >"$out/ferrax.jsonl" 2>"$out/ferrax_graphs.log"
echo "ferrax-bench --cuda-graphs exit $? at ${SECONDS}s"
timeout 100 .gpu/ferrax-bench --device cuda --reps 5 --only w9_gpt_step,w10_gpt2_124m_step \
    >>"$out/ferrax.jsonl" 2>"$out/ferrax.log"
echo "ferrax-bench exit $? at ${SECONDS}s"
cat "$out/ferrax.jsonl"
PYTHONUNBUFFERED=1 timeout 150 python3 .gpu/jax_reference.py --reps 5 \
    --only w9_gpt_step,w10_gpt2_124m_step >"$out/jax.jsonl" 2>"$out/jax.log"
echo "jax_reference.py exit $? at ${SECONDS}s"
cat "$out/jax.jsonl"
data=/tmp/ferrax-loss
mkdir -p "$data"
timeout 120 .gpu/ferrax-bench loss-curve w10 --steps "${STEPS:-300}" --device cuda \
    --out "$data" >"$out/loss_ferrax.log" 2>&1
echo "ferrax-bench loss-curve exit $? at ${SECONDS}s"
PYTHONUNBUFFERED=1 timeout "$(left 30 100)" python3 .gpu/jax_loss_curve.py "$data" \
    --reference .gpu/jax_reference.py >"$out/loss_curve.md" 2>"$out/loss_jax.log"
echo "jax_loss_curve exit $? at ${SECONDS}s"
cp "$data"/ferrax.json "$out"/loss_ferrax.json
cp "$data"/jax.json "$out"/loss_jax.json
# GPU artifacts' load times: machine code assembled by ptxas when the artifact is made.
timeout 40 .gpu/ferrax-bench --device cuda --reps 10 --only w5_artifact_load,w9_artifact_load \
    >"$out/artifacts.jsonl" 2>&1
echo "artifact loads exit $? at ${SECONDS}s"
FERRAX_REQUIRE_GPU=1 timeout "$(left 20)" .gpu/gpu-tests --test-threads 1 --skip attention \
    --skip recorded >"$out/tests.log" 2>&1
echo "tests/gpu.rs exit $? at ${SECONDS}s"
grep -E "FAILED|panicked|test result" "$out/tests.log"
head -9 "$out/traffic.log"
grep -E "artifact" "$out/artifacts.jsonl"
python3 .gpu/compare.py --rounds 1 "cat $out/ferrax.jsonl" "cat $out/jax.jsonl"
cat "$out/loss_curve.md"

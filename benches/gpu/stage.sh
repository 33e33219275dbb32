#!/usr/bin/env bash
# Builds what the GPU measurements run (release benchmark, training example, tests/gpu.rs)
# here and stages it in .gpu/ (git-ignored), for a device machine that has no Rust toolchain:
# carry .gpu there and run `bash .gpu/measure.sh` (or `bash .gpu/measure_lease.sh`: issues
# 31's and 28's measurements in one call of under ten minutes; `bash .gpu/measure_gpt.sh`: the
# GPT steps; `bash .gpu/loss_curve.sh`: w10's loss against JAX's; `.gpu/ferrax-bench
# gpu-compile w10`: what compiling it costs).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p ferrax-bench
cargo build --release --example train_mlp
tests=$(cargo test --release --all-features --test gpu --no-run 2>&1 |
    grep -o '[^ (]*release/deps/gpu-[0-9a-f]*' | tail -1)
if [ -d .git ] && ! grep -qx '/.gpu/' .git/info/exclude 2>/dev/null; then
    mkdir -p .git/info && echo '/.gpu/' >>.git/info/exclude
fi
rm -rf .gpu && mkdir .gpu
target=${CARGO_TARGET_DIR:-target}
cp "$target/release/ferrax-bench" "$target/release/examples/train_mlp" .gpu/
cp "$tests" .gpu/gpu-tests
strip .gpu/ferrax-bench .gpu/train_mlp .gpu/gpu-tests
cp benches/gpu/measure.sh benches/gpu/measure_gpt.sh benches/gpu/loss_curve.sh \
    benches/gpu/measure_lease.sh benches/gpu/jax_loss_curve.py benches/gpu/copy_bandwidth.py \
    ../shared/bench/compare.py ../shared/bench/jax_reference.py .gpu/
du -sh .gpu

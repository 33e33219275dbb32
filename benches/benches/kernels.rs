//! Criterion benches of the CPU backend's hot kernels, each through `jit` on inputs of a
//! size that fits in cache, so they measure the generated code rather than memory:
//! `cargo bench -p ferrax-bench --bench kernels`. The workload comparison with JAX is the
//! `ferrax-bench` binary (see `docs/performance.md`).
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrax::{jit, nn, Tensor};
use std::hint::black_box;

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 2000) as f32 / 500.0 - 2.0)
        .collect()
}

fn gelu(x: Tensor) -> Tensor {
    (&x * 0.5) * ((((&x * &x * &x) * 0.044715 + &x) * 0.7978845608).tanh() + 1.0)
}

fn kernels(c: &mut Criterion) {
    let n = 1 << 16;
    let x = Tensor::from_vec([n], data(n));
    let rows = Tensor::from_vec([64, 1024], data(n));
    let mut g = c.benchmark_group("cpu");
    g.throughput(Throughput::Elements(n as u64));
    let f = jit(gelu);
    g.bench_function("gelu_simd", |b| {
        b.iter(|| f.call(black_box(x.clone())).unwrap())
    });
    let f = jit(|x: Tensor| x.sin().exp());
    g.bench_function("sin_exp", |b| {
        b.iter(|| f.call(black_box(x.clone())).unwrap())
    });
    let f = jit(|x: Tensor| nn::softmax(&x, -1));
    g.bench_function("softmax_rows", |b| {
        b.iter(|| f.call(black_box(rows.clone())).unwrap())
    });
    let f = jit(|x: Tensor| x.sum(-1));
    g.bench_function("row_sum", |b| {
        b.iter(|| f.call(black_box(rows.clone())).unwrap())
    });
    let (m1, m2) = (
        Tensor::from_vec([256, 256], data(1 << 16)),
        Tensor::from_vec([256, 256], data(1 << 16)),
    );
    let f = jit(|(a, b): (Tensor, Tensor)| a.matmul(&b));
    g.throughput(Throughput::Elements(2 * 256 * 256 * 256));
    g.bench_function("matmul_256", |b| {
        b.iter(|| f.call(black_box((m1.clone(), m2.clone()))).unwrap())
    });
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);

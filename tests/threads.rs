#![allow(clippy::unwrap_used)]

//! `jit` shared between threads: what is `Send + Sync`, calls from many threads at once giving
//! the single-threaded bits, jitted functions calling each other while tracing, the bounded
//! cache, and compiled code freed with its last executable.

use ferrax::{grad, jit, Compiled, Error, Jit, Lowered, Tensor};
use std::sync::{Barrier, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;

const THREADS: usize = 8;

fn assert_send_sync<T: Send + Sync>(_: &T) {}

/// Held by the tests that spawn threads and by the one that measures resident memory, so that
/// the threads' allocations do not count as the measured growth.
fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn input(n: usize, seed: usize) -> Tensor {
    let values = (0..n)
        .map(|i| ((i * 7 + seed * 13) % 97) as f32 / 48.5 - 1.0)
        .collect();
    Tensor::from_vec([n], values)
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

/// Softmax-weighted sum: kernels, a row reduction, transcendentals.
fn model((x, w): (Tensor, Tensor)) -> Tensor {
    let e = (&x * &w).tanh().exp();
    let total = e.sum(..);
    (&e / &total * &x).sum(..) + x.sin()
}

#[test]
fn the_api_types_are_send_and_sync() {
    fn types<T: Send + Sync>() {}
    types::<Tensor>();
    types::<Error>();
    types::<Lowered<Tensor, Tensor>>();
    types::<Compiled<Tensor, Tensor>>();
    types::<JitFn>();
    let g = jit(grad(|p: Tensor| (p.sin() * &p).sum(..)));
    assert_send_sync(&g);
    let x = input(4, 0);
    assert_send_sync(&g.lower(&x).unwrap().compile());
}

#[test]
fn one_jit_called_from_many_threads_gives_the_single_threaded_bits() {
    let _exclusive = exclusive();
    // Every thread cycles through all shapes, starting at its own, so shapes repeat across
    // threads and several threads miss on one shape at once.
    let sizes = [3, 64, 1000, 4097, 17];
    let reference = jit(model);
    let want: Vec<Vec<u32>> = sizes
        .iter()
        .map(|&n| bits(&reference.call((input(n, n), input(n, n + 1))).unwrap()))
        .collect();
    let shared = jit(model);
    let start = Barrier::new(THREADS);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (shared, start, want) = (&shared, &start, &want);
            s.spawn(move || {
                start.wait();
                for round in 0..3 * sizes.len() {
                    let k = (t + round) % sizes.len();
                    let n = sizes[k];
                    let got = shared.call((input(n, n), input(n, n + 1))).unwrap();
                    assert_eq!(bits(&got), want[k], "thread {t}, f32[{n}]");
                }
            });
        }
    });
    assert_eq!(shared.cache_len(), sizes.len());
    let traces = shared.trace_count();
    assert!(
        (sizes.len()..=THREADS * sizes.len()).contains(&traces),
        "each thread traces a shape at most once: {traces}"
    );
}

#[test]
fn a_jitted_gradient_is_shared_between_threads() {
    let _exclusive = exclusive();
    let loss = |p: Tensor| ((&p * &p).sin() * p.exp()).sum(..);
    let reference = jit(grad(loss));
    let shared = jit(grad(loss));
    let want = bits(&reference.call(input(300, 5)).unwrap());
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..4 {
                    assert_eq!(bits(&shared.call(input(300, 5)).unwrap()), want);
                }
            });
        }
    });
    assert_eq!(shared.cache_len(), 1);
}

#[test]
fn jitted_functions_calling_jitted_functions_do_not_deadlock() {
    let _exclusive = exclusive();
    let inner = jit(|x: Tensor| x.exp() + 1.0);
    // Called on the outer tracer (inlined) and on concrete data (compiled and run) while the
    // outer function is being traced.
    let outer = jit(|x: Tensor| {
        let scale = inner.call(Tensor::scalar(0.0f32)).unwrap();
        inner.call(x).unwrap() * scale
    });
    let want: Vec<f32> = [0.0f32, 1.0, 2.0]
        .iter()
        .map(|v| 2.0 * (v.exp() + 1.0))
        .collect();
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let x = Tensor::from_vec([3], vec![0.0f32, 1.0, 2.0]);
                let got = outer.call(x).unwrap().to_vec::<f32>().unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-6 * w, "{got:?} vs {want:?}");
                }
            });
        }
    });
}

/// A jitted function of one tensor, named by a function pointer.
type JitFn = Jit<fn(Tensor) -> Tensor, Tensor, Tensor>;

/// A jitted function that, while tracing `f32[n]`, calls itself on concrete `f32[n - 1]`.
fn countdown(x: Tensor) -> Tensor {
    static SELF: OnceLock<JitFn> = OnceLock::new();
    let me = SELF.get_or_init(|| jit(countdown as fn(Tensor) -> Tensor));
    let n = x.numel();
    if n <= 1 {
        return x + 1.0;
    }
    let smaller = me
        .call(Tensor::from_vec([n - 1], vec![1.0f32; n - 1]))
        .unwrap();
    x * smaller.sum(..)
}

#[test]
fn a_jitted_function_may_call_itself_while_tracing() {
    let f = jit(countdown as fn(Tensor) -> Tensor);
    let got = f.call(Tensor::from_vec([4], vec![1.0f32; 4])).unwrap();
    // f32[1] gives 2; f32[2] gives 2 each, summing to 4; f32[3] 4 each, 12; f32[4] 12 each.
    assert_eq!(got.to_vec::<f32>().unwrap(), vec![12.0; 4]);
}

#[test]
fn the_cache_keeps_the_most_recently_used_signatures() {
    let f = jit(|x: Tensor| x * 2.0).cache_capacity(2);
    let call = |n: usize| f.call(input(n, 0)).unwrap();
    call(1);
    call(2);
    call(1);
    assert_eq!((f.trace_count(), f.cache_len()), (2, 2));
    call(3); // evicts f32[2], the least recently used
    assert_eq!((f.trace_count(), f.cache_len()), (3, 2));
    call(1);
    assert_eq!(f.trace_count(), 3, "f32[1] was kept");
    call(2);
    assert_eq!(f.trace_count(), 4, "f32[2] was evicted");
    assert_eq!(f.cache_len(), 2);

    let uncached = jit(|x: Tensor| x * 2.0).cache_capacity(0);
    uncached.call(input(1, 0)).unwrap();
    uncached.call(input(1, 0)).unwrap();
    assert_eq!((uncached.trace_count(), uncached.cache_len()), (2, 0));
}

#[test]
fn an_executable_outlives_its_eviction() {
    let f = jit(|x: Tensor| (x * 3.0).exp()).cache_capacity(1);
    let compiled = f.lower(&input(5, 1)).unwrap().compile();
    f.call(input(6, 1)).unwrap();
    assert_eq!(f.cache_len(), 1);
    let want = bits(&jit(|x: Tensor| (x * 3.0).exp()).call(input(5, 1)).unwrap());
    assert_eq!(bits(&compiled.call(input(5, 1)).unwrap()), want);
}

/// Resident bytes of this process, where `/proc` says.
fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn compiled_code_is_freed_with_its_last_executable() {
    let _exclusive = exclusive();
    let f = jit(|x: Tensor| (x * 3.0 + 1.0).tanh().exp()).cache_capacity(1);
    let compile = |sizes: std::ops::Range<usize>| {
        for n in sizes {
            f.call(input(n, 0)).unwrap();
        }
    };
    compile(1..200);
    let before = resident_bytes();
    compile(200..2000);
    assert_eq!((f.trace_count(), f.cache_len()), (1999, 1));
    if let (Some(before), Some(after)) = (before, resident_bytes()) {
        let grown = after.saturating_sub(before);
        // Leaked, the code of 1,800 programs is some 15 MB (Cranelift's default leaves it
        // mapped for the life of the process).
        assert!(
            grown < 6 << 20,
            "{grown} bytes more resident after 1800 programs"
        );
    }
}

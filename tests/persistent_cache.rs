//! The persistent compile cache: a program compiled in one `Jit` loads in another (as in a
//! later process) from the cache directory, computes the same bits and shows the same views;
//! damaged entries are ignored and replaced; concurrent writers leave one whole entry.
#![allow(clippy::unwrap_used)]

use ferrax::{jit, nn, DType, Tensor};
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrax-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn entries(dir: &PathBuf) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    found.sort();
    found
}

fn layer((x, w, g): (Tensor, Tensor, Tensor)) -> Tensor {
    let h = nn::gelu(&x.matmul(&w), true);
    nn::layer_norm(&h, &g, &Tensor::zeros(DType::F32, [32]), 1e-5)
}

fn inputs() -> (Tensor, Tensor, Tensor) {
    let v = |n: usize, s: usize| {
        (0..n)
            .map(|k| ((k * 31 + s) % 17) as f32 / 8.0 - 1.0)
            .collect::<Vec<f32>>()
    };
    (
        Tensor::from_vec([16, 24], v(16 * 24, 1)),
        Tensor::from_vec([24, 32], v(24 * 32, 2)),
        Tensor::from_vec([32], v(32, 3)),
    )
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn a_program_compiled_once_loads_in_later_jits() {
    let dir = scratch("hit");
    let args = inputs();
    let first = jit(layer).cache_dir(&dir);
    let lowered = first.lower(&args).unwrap();
    assert!(!lowered.from_persistent_cache());
    assert_eq!(entries(&dir).len(), 1, "{:?}", entries(&dir));
    let want = first.call(args.clone()).unwrap();

    let second = jit(layer).cache_dir(&dir);
    let again = second.lower(&args).unwrap();
    assert!(again.from_persistent_cache());
    assert_eq!(bits(&second.call(args.clone()).unwrap()), bits(&want));
    // What a compilation shows, a hit shows.
    assert_eq!(again.simplified(), lowered.simplified());
    assert_eq!(again.simplify_report(), lowered.simplify_report());
    assert_eq!(again.fused(), lowered.fused());
    assert_eq!(again.kernels(), lowered.kernels());

    // Another program, another entry; with the cache turned off, no hit where it holds one.
    let other = jit(|(x, w, g): (Tensor, Tensor, Tensor)| layer((x * 2.0, w, g))).cache_dir(&dir);
    assert!(!other.lower(&args).unwrap().from_persistent_cache());
    assert_eq!(entries(&dir).len(), 2);
    let off = jit(layer).cache_dir(&dir).no_persistent_cache();
    assert!(!off.lower(&args).unwrap().from_persistent_cache());
    assert_eq!(entries(&dir).len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damaged_entries_are_ignored_and_replaced() {
    let dir = scratch("damaged");
    let args = inputs();
    let want = jit(layer).cache_dir(&dir).call(args.clone()).unwrap();
    let [entry] = &entries(&dir)[..] else {
        panic!("{:?}", entries(&dir))
    };
    let good = std::fs::read(entry).unwrap();
    let damaged: [Vec<u8>; 3] = [
        {
            let mut b = good.clone();
            let at = b.len() / 2;
            b[at] ^= 1;
            b
        },
        good[..good.len() / 3].to_vec(),
        b"not an artifact".to_vec(),
    ];
    for bad in damaged {
        std::fs::write(entry, &bad).unwrap();
        let f = jit(layer).cache_dir(&dir);
        assert!(!f.lower(&args).unwrap().from_persistent_cache());
        assert_eq!(bits(&f.call(args.clone()).unwrap()), bits(&want));
        assert_eq!(
            std::fs::read(entry).unwrap(),
            good,
            "the entry is written again"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn concurrent_writers_leave_one_whole_entry() {
    let dir = scratch("concurrent");
    let args = inputs();
    let results: Vec<Vec<u32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (dir, args) = (&dir, args.clone());
                s.spawn(move || bits(&jit(layer).cache_dir(dir).call(args).unwrap()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    let found = entries(&dir);
    assert_eq!(found.len(), 1, "no temporary file left: {found:?}");
    assert!(jit(layer)
        .cache_dir(&dir)
        .lower(&args)
        .unwrap()
        .from_persistent_cache());
    std::fs::remove_dir_all(&dir).unwrap();
}

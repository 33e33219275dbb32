//! The persistent cache's bound (its own test binary: it sets the environment variable every
//! writer in the process reads): past `FERRAX_CACHE_MAX_BYTES`, the least recently used entries
//! go first.
#![allow(clippy::unwrap_used)]

use ferrax::{jit, Tensor};

#[test]
fn the_least_recently_used_entries_are_evicted_past_the_bound() {
    let dir = std::env::temp_dir().join(format!("ferrax-cache-bound-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let x = Tensor::from_vec([64], (0..64).map(|k| k as f32).collect::<Vec<f32>>());
    let program = |k: f64| move |x: Tensor| (x * k).sin();
    jit(program(1.0)).cache_dir(&dir).call(x.clone()).unwrap();
    let one = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap();
    let size = one.metadata().unwrap().len();
    // Room for two entries and a half.
    std::env::set_var("FERRAX_CACHE_MAX_BYTES", (size * 5 / 2).to_string());
    std::thread::sleep(std::time::Duration::from_millis(20));
    jit(program(2.0)).cache_dir(&dir).call(x.clone()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // A hit on the first marks it used: the second is now the least recent.
    assert!(jit(program(1.0))
        .cache_dir(&dir)
        .lower(&x)
        .unwrap()
        .from_persistent_cache());
    std::thread::sleep(std::time::Duration::from_millis(20));
    jit(program(3.0)).cache_dir(&dir).call(x.clone()).unwrap();
    let hit = |k: f64| {
        jit(program(k))
            .cache_dir(&dir)
            .lower(&x)
            .unwrap()
            .from_persistent_cache()
    };
    assert!(hit(1.0) && hit(3.0));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    assert!(!hit(2.0), "the least recently used entry was evicted");
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Work spread over the host's cores: loading PTX modules (the driver compiles each on the
//! thread that loads it) and assembling them with `ptxas` processes.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of each of `items`, in order, computed on as many threads as the host has cores (at
/// most one an item), each thread taking the next item not yet taken; `None` for an item
/// whose thread stopped (panicked) before computing it.
pub fn map_on_cores<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<Option<R>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.min(items.len());
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<R>> = items.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            break;
                        };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        for worker in workers {
            for (i, result) in worker.join().unwrap_or_default() {
                results[i] = Some(result);
            }
        }
    });
    results
}

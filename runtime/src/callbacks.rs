//! Host functions that programs call: a `debug_callback` or `pure_callback` instruction names
//! one by the id [`register`] gave it, and every executor calls it through [`call`] with the
//! operands' values. The ids are this process's: a program that holds one cannot be saved for another
//! process (artifacts and the persistent cache refuse it).
//!
//! Registered functions live as long as the process, as the programs that name them may.

use crate::{Array, RuntimeError};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A host function a program calls with its operands' values, returning its results (none
/// for a `debug_callback`). An `Err` (or a panic) stops the run with
/// [`RuntimeError::Callback`].
pub type HostCallback = Arc<dyn Fn(&[Array]) -> Result<Vec<Array>, String> + Send + Sync>;

struct Registry {
    functions: Vec<HostCallback>,
    /// Ids of the functions registered under a key, so that one source of callbacks traced
    /// again (a print statement in a function traced per call) registers once.
    keyed: HashMap<String, u64>,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            functions: Vec::new(),
            keyed: HashMap::new(),
        })
    })
}

/// Registers `f` and returns its id.
pub fn register(f: HostCallback) -> u64 {
    let mut r = registry().lock().unwrap_or_else(PoisonError::into_inner);
    r.functions.push(f);
    r.functions.len() as u64 - 1
}

/// The id registered under `key`, registering `make()` there the first time: for callbacks
/// that the key determines entirely (a format string), so retracing registers nothing new.
pub fn register_keyed(key: &str, make: impl FnOnce() -> HostCallback) -> u64 {
    let mut r = registry().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&id) = r.keyed.get(key) {
        return id;
    }
    r.functions.push(make());
    let id = r.functions.len() as u64 - 1;
    r.keyed.insert(key.to_string(), id);
    id
}

/// Calls the function registered as `id` on `args`. An id no function has (a program read
/// from text), an `Err` the function returns, and a panic in it are each an `Err`.
pub fn call(id: u64, args: &[&Array]) -> Result<Vec<Array>, RuntimeError> {
    let f = {
        let r = registry().lock().unwrap_or_else(PoisonError::into_inner);
        usize::try_from(id)
            .ok()
            .and_then(|i| r.functions.get(i))
            .cloned()
    };
    let failed = |message: String| RuntimeError::Callback {
        callback: id,
        message,
    };
    let f = f.ok_or_else(|| failed("no host function is registered under this id".into()))?;
    let owned: Vec<Array> = args.iter().map(|&a| a.clone()).collect();
    match catch_unwind(AssertUnwindSafe(|| f(&owned))) {
        Ok(result) => result.map_err(failed),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".into());
            Err(failed(format!("the host function panicked: {message}")))
        }
    }
}

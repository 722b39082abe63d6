//! Cranelift's incremental compilation cache, shared by every engine of the process: a function
//! whose compiler input was compiled before (by any module, any system of this process) gets its
//! machine code from here instead of Cranelift's optimiser and register allocator.
//!
//! Python and JavaScript modules embed the same interpreter: componentize-py's CPython and
//! componentize-js's SpiderMonkey are the same functions in every component, and only the data
//! (the pre-initialised heap) differs. So the second Python module a host compiles costs a
//! fraction of the first. The compiled-module cache on disk (`deploy::cache`) still keeps whole
//! compiled modules across runs; this one works within a run, across modules.
//!
//! Invariants:
//! - A hit returns exactly the bytes stored under that key: Cranelift's key hashes the
//!   function's IR and every compiler setting, so any engine may share an entry.
//! - The cache holds at most [`FunctionCache::BUDGET`] bytes of keys and values; past it, new
//!   entries are not kept (those kept stay valid), so a host compiling many distinct modules
//!   keeps a bounded amount of memory here.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Compiled functions by Cranelift's cache key, up to a byte budget.
#[derive(Debug, Default)]
pub struct FunctionCache {
    entries: Mutex<Entries>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// The entries and the bytes they hold.
#[derive(Debug, Default)]
struct Entries {
    by_key: HashMap<Vec<u8>, Arc<[u8]>>,
    bytes: usize,
}

/// How often compiled functions came from the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionCacheStats {
    /// Functions whose machine code came from the cache.
    pub hits: u64,
    /// Functions Cranelift compiled (and offered to the cache).
    pub misses: u64,
    /// Bytes the cache holds.
    pub bytes: u64,
}

impl FunctionCache {
    /// The most bytes (keys and values) the cache keeps: about four interpreters' worth.
    pub const BUDGET: usize = 256 << 20;

    /// The cache of this process, shared by every engine a system builds.
    pub fn process() -> Arc<FunctionCache> {
        static CACHE: OnceLock<Arc<FunctionCache>> = OnceLock::new();
        CACHE.get_or_init(Arc::default).clone()
    }

    /// Hits, misses and size so far.
    pub fn stats(&self) -> FunctionCacheStats {
        FunctionCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: self.lock().bytes as u64,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores `value` under `key` unless the budget is spent; true if it is kept.
    fn keep(&self, key: &[u8], value: Vec<u8>, budget: usize) -> bool {
        let mut entries = self.lock();
        let size = key.len() + value.len();
        if entries.by_key.contains_key(key) {
            return true;
        }
        if entries.bytes + size > budget {
            return false;
        }
        entries.bytes += size;
        entries.by_key.insert(key.to_vec(), value.into());
        true
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let found = self.lock().by_key.get(key).cloned();
        match found {
            Some(value) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(Cow::Owned(value.to_vec()))
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        self.keep(key, value, Self::BUDGET)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore;

    #[test]
    fn a_stored_function_comes_back_and_the_budget_bounds_what_is_kept() {
        let cache = FunctionCache::default();
        assert_eq!(cache.get(b"f"), None);
        assert!(cache.insert(b"f", vec![1, 2, 3]));
        assert_eq!(cache.get(b"f").as_deref(), Some(&[1u8, 2, 3][..]));
        assert!(!cache.keep(b"big", vec![0; 100], 50), "past the budget");
        assert_eq!(cache.get(b"big"), None);
        assert!(cache.keep(b"g", vec![9; 10], 50), "within it");
        assert_eq!(
            cache.stats(),
            FunctionCacheStats {
                hits: 1,
                misses: 2,
                bytes: 4 + 11
            }
        );
    }

    #[test]
    fn two_engines_share_compiled_functions_through_the_cache() {
        let cache = Arc::new(FunctionCache::default());
        let engine = || {
            let mut config = wasmtime::Config::new();
            config
                .enable_incremental_compilation(cache.clone())
                .expect("cranelift is on");
            wasmtime::Engine::new(&config).expect("engine")
        };
        let wat = r#"(module (func (export "f") (param i32) (result i32)
            local.get 0 i32.const 7 i32.mul))"#;
        wasmtime::Module::new(&engine(), wat).expect("compiles");
        let first = cache.stats();
        assert!(first.misses > 0 && first.bytes > 0, "{first:?}");
        wasmtime::Module::new(&engine(), wat).expect("compiles again");
        let second = cache.stats();
        assert_eq!(second.misses, first.misses, "nothing compiled twice");
        assert!(second.hits >= first.misses, "{second:?}");
    }
}

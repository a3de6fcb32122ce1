//! The process's heap under glibc: how many malloc arenas it keeps, and giving freed pages
//! back. Elsewhere than glibc both are no-ops.
//!
//! glibc gives each new thread an arena of its own, up to eight per core, and keeps what
//! an arena frees mapped. A proxy runs tokio's workers, a pool of blocking threads (the
//! policy plugins run there) and cranelift's compile threads, so an idle `serve` held
//! ~14 MiB of arenas it did not use (docs/benchmarks.md). [`limit_arenas`] allows one
//! arena per four cores (one on up to four cores): every arena beyond the first held ~12 MiB
//! at idle, and on 2 cores one arena served as many calls per second as sixteen (glibc's
//! per-thread caches take most small allocations without the arena's lock).
//! `GLIBC_TUNABLES` with `glibc.malloc.arena_max` still decides when it is set.

/// Caps malloc arenas at one per four cores. Call before the runtime starts its threads
/// (arenas made before stay).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        if tuned {
            return;
        }
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let arenas = libc::c_int::try_from(cores.div_ceil(4)).unwrap_or(libc::c_int::MAX);
        #[allow(unsafe_code, reason = "libc has no safe wrapper for mallopt")]
        // SAFETY: `mallopt` sets a tunable of the allocator under its own lock; it touches
        // no allocated block.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

/// Returns the pages malloc has free to the kernel: after compiling the plugins, which
/// frees memory on cranelift's threads that glibc would keep mapped (~8 MiB for good on a
/// start that compiles the six embedded plugins), and once start-up is over (the first
/// tool lists indexed).
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code, reason = "libc has no safe wrapper for malloc_trim")]
    // SAFETY: `malloc_trim` only returns free pages to the kernel; it takes the arenas'
    // locks itself and touches no allocated block.
    unsafe {
        libc::malloc_trim(0);
    }
}

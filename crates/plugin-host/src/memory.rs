//! The process's memory: under glibc, how many malloc arenas it keeps and giving freed
//! pages back (elsewhere than glibc both are no-ops); on Linux, taking the code start-up ran
//! out of the resident set ([`release_code_pages`]).
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

/// Takes the executable's code pages out of the process's resident set, once start-up is
/// over, and returns how many bytes were resident before.
///
/// Start-up runs code that an idle proxy never runs again (reading the config, compiling or
/// loading the plugins, building the index, the first listings), and the kernel maps code
/// in blocks around each page a thread runs: an idle `serve` held 23–31 MiB of its own
/// executable's pages (docs/benchmarks.md), most of them start-up's. The executable's code
/// mapping (`r-xp`) is never written, so dropping it from this process's page tables loses
/// nothing: the pages stay in the kernel's page cache, and a thread that runs one of them
/// again maps it back (a minor fault), as after the kernel reclaimed it under memory
/// pressure. Only the executable's code is released: not its read-only data (relocated data
/// shares those mappings), not libraries, not wasmtime's compiled plugins.
///
/// Skipped under a debugger (`TracerPid` set): its breakpoints are private copies of code
/// pages, which this would drop.
pub fn release_code_pages() -> usize {
    #[cfg(target_os = "linux")]
    {
        if being_traced() {
            return 0;
        }
        let (Ok(exe), Ok(maps)) = (
            std::fs::read_link("/proc/self/exe"),
            std::fs::read_to_string("/proc/self/maps"),
        ) else {
            return 0;
        };
        let Some(exe) = exe.to_str() else {
            return 0;
        };
        code_mappings(&maps, exe)
            .map(|(start, end)| {
                let length = end - start;
                #[allow(unsafe_code, reason = "libc has no safe wrapper for madvise")]
                // SAFETY: `[start, end)` is a whole mapping of this process's executable,
                // read and execute only (never written, so it holds no private copy): the
                // kernel drops its pages from the page tables and maps them back from the
                // executable's file at the next access, as after reclaim. No Rust object
                // lives in it.
                let done = unsafe {
                    libc::madvise(start as *mut libc::c_void, length, libc::MADV_DONTNEED)
                };
                if done == 0 { length } else { 0 }
            })
            .sum()
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Whether a debugger or tracer is attached (`TracerPid` in `/proc/self/status`).
#[cfg(target_os = "linux")]
fn being_traced() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("TracerPid:"))
            .is_some_and(|pid| pid.trim() != "0")
    })
}

/// The address ranges of `exe`'s read-and-execute mappings in `maps` (the text of
/// `/proc/self/maps`).
#[cfg(any(target_os = "linux", test))]
fn code_mappings<'a>(maps: &'a str, exe: &'a str) -> impl Iterator<Item = (usize, usize)> + 'a {
    maps.lines().filter_map(move |line| {
        // `start-end perms offset dev inode path`; the path may contain spaces.
        let mut fields = line.splitn(6, ' ');
        let range = fields.next()?;
        let perms = fields.next()?;
        let path = fields.nth(3)?.trim_start();
        if perms != "r-xp" || path != exe {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        (end > start).then_some((start, end))
    })
}

#[cfg(test)]
mod tests {
    use super::code_mappings;

    #[test]
    fn only_the_executables_code_mappings_are_picked() {
        let maps = "\
55d0a0000000-55d0a0200000 r--p 00000000 fd:01 123 /opt/mcp proxy/mcpproxy
55d0a0200000-55d0a1400000 r-xp 00200000 fd:01 123 /opt/mcp proxy/mcpproxy
55d0a1400000-55d0a1500000 r--p 01400000 fd:01 123 /opt/mcp proxy/mcpproxy
55d0a1500000-55d0a1510000 rw-p 01500000 fd:01 123 /opt/mcp proxy/mcpproxy
7f0000000000-7f0000100000 r-xp 00000000 00:00 0 
7f0000200000-7f0000300000 r-xp 00028000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000400000-7f0000500000 r-xp 00000000 fd:01 124 /opt/mcp proxy/mcpproxy-other
";
        let found: Vec<_> = code_mappings(maps, "/opt/mcp proxy/mcpproxy").collect();
        assert_eq!(found, [(0x55d0_a020_0000, 0x55d0_a140_0000)]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_code_released_comes_back_when_it_runs() {
        // This test binary ran code to get here: some of it was resident.
        let released = super::release_code_pages();
        assert!(released > 0 || super::being_traced());
        // The code this runs now was released: it maps back in, and runs as before.
        let again: Vec<_> = code_mappings("1000-2000 r-xp 0 0:0 1 /x", "/x").collect();
        assert_eq!(again, [(0x1000, 0x2000)]);
    }
}

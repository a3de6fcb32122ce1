//! The proxy's build script: links the `mcpproxy` binary with packed relative relocations
//! where the build machine's glibc loads them, and folds identical functions where the
//! linker is LLD.

use std::env;
use std::process::Command;

fn main() {
    pack_relative_relocations();
    fold_identical_code();
    println!("cargo::rerun-if-changed=build.rs");
}

/// Links the `mcpproxy` binary with packed relative relocations (`DT_RELR`) when it is built
/// for the GNU/Linux it is built on and that glibc loads them (2.36 and later). A
/// position-independent executable of this size carries ~80,000 relative relocations: 1.9 MB
/// as `RELA` entries, which the loader reads at every start and which stay resident, against
/// ~25 KB packed (an idle proxy's RSS is ~4 MiB smaller, docs/benchmarks.md). The binary is
/// as randomised (ASLR) as before.
fn pack_relative_relocations() {
    let var = |name: &str| env::var(name).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    if !native || var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    if host_glibc().is_some_and(|version| version >= (2, 36)) {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Links the `mcpproxy` binary with LLD's identical code folding (`--icf=all`): functions
/// whose machine code and relocations are the same (monomorphised copies that came out
/// alike) are kept once. -0.43 MB of the `dist` binary (docs/benchmarks.md, "Issue 50: the
/// `dist` binary"). Rust makes no promise that two functions have distinct addresses, so
/// folding them changes nothing a program may rely on; LLD keeps data whose address is taken
/// apart. Only where rustc links with its own LLD by
/// default (x86_64 GNU/Linux since Rust 1.90) and the build does not pick another linker
/// (GNU ld has no `--icf`), and in optimised builds only (a debug build's link stays fast).
fn fold_identical_code() {
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let picks_linker = env::var_os("RUSTC_LINKER").is_some()
        || flags.contains("linker")
        || flags.contains("link-self-contained");
    if var("TARGET") == "x86_64-unknown-linux-gnu" && var("OPT_LEVEL") != "0" && !picks_linker {
        println!("cargo::rustc-link-arg-bins=-Wl,--icf=all");
    }
}

/// The build machine's glibc version, from `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn host_glibc() -> Option<(u32, u32)> {
    let output = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let (major, rest) = text.trim().strip_prefix("glibc ")?.split_once('.')?;
    let minor = rest.split('.').next()?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

//! The proxy's build script: links the `mcpproxy` binary with packed relative relocations
//! where the build machine's glibc loads them.

use std::env;
use std::process::Command;

fn main() {
    pack_relative_relocations();
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

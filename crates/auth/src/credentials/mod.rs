//! Stored credentials: OAuth tokens, client registrations and the `${secret:NAME}` values of
//! the config, kept in the OS keyring (Secret Service on Linux, the Keychain on macOS) or,
//! where no keyring answers, in a 0600 file in the data dir. Values are never written to a
//! log line, an error or a `Debug` output: [`Secret`] redacts itself.

mod error;
mod file;
#[cfg(any(target_os = "linux", target_os = "macos"))]
mod keyring;
pub mod references;
mod secret;
mod store;

pub use error::CredentialError;
pub use secret::Secret;
pub use store::CredentialStore;

#[cfg(test)]
mod tests;

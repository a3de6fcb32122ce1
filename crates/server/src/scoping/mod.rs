//! Who sees what: the `scopes` rules of the config, applied to a logged-in caller. A
//! caller the rules name gets a [`View`], which says which servers and tools exist for
//! them; the proxy leaves everything else out of what it lists and refuses it, by the same
//! words whether it is hidden or does not exist (a caller cannot probe for names).

#[cfg(test)]
mod tests;
mod view;

pub use view::{Scopes, View, not_available};

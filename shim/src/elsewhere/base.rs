//! The bottom layer off Linux: the settings' defaults (Linux's own module, which is plain atomics
//! and constants).

// Only the defaults, `symbolize` and the service name are read here.
#[allow(dead_code)]
#[path = "../base/settings.rs"]
pub(crate) mod settings;

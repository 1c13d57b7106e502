//! The `floe` command-line program's commands, as a library so that tests can run them.

pub mod aws;
pub mod convert;
pub mod inspect;
pub mod local;

//! The shadow engine: runs a reconcile's control policy for real and its candidate in shadow.

pub mod classify;
pub mod dryrun;

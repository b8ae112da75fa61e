//! Waiting for a condition: the one poll loop of the tests and the benches
//! (`tests/suite/poll_loops.rs` fails on a hand-written one anywhere else).
//!
//! A probe answers `Ok(value)` once the condition holds, or `Err(state)`: what it saw instead
//! (`"2 of 5 reconciled"`, the last answer's status line, a command's stderr). The wait probes
//! every `every` until the probe answers `Ok` or `timeout` has passed, probing once more at the
//! deadline; a timeout's message names what was awaited, the timeout and the last state seen.
//! (A probe whose state costs too much to describe at every poll answers `Err(String::new())`,
//! and its caller adds the description to the message when the wait timed out.)
//! A probe that must end the wait at once (a process it waits on has exited) panics, or answers
//! `Ok` with a verdict of its own (`Ok(Err(why))`) for its caller to act on.
//!
//! Included by the harnesses through `tests/common/mod.rs`, and with `#[path]` by the benches
//! that wait and by whatever includes `apiserver.rs`, which uses it (benches,
//! `examples/control-plane.rs`).
#![allow(dead_code)] // each test binary uses a different subset

use std::time::{Duration, Instant};

/// The message of a wait that timed out.
fn timed_out(what: &str, timeout: Duration, last: &str) -> String {
    if last.is_empty() {
        format!("timed out after {timeout:?} waiting for {what}")
    } else {
        format!("timed out after {timeout:?} waiting for {what}; last: {last}")
    }
}

/// Probes every `every` until `probe` answers `Ok`, for `timeout` at most: the value, or the
/// timeout's message (what, timeout and the last `Err` the probe answered).
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let started = Instant::now();
    loop {
        let last = match probe() {
            Ok(value) => return Ok(value),
            Err(state) => state,
        };
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            return Err(timed_out(what, timeout, &last));
        }
        std::thread::sleep(every.min(timeout.saturating_sub(elapsed)));
    }
}

/// [`wait_until`], panicking with the timeout's message.
#[track_caller]
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    probe: impl FnMut() -> Result<T, String>,
) -> T {
    match wait_until(what, timeout, every, probe) {
        Ok(value) => value,
        Err(e) => panic!("{e}"),
    }
}

/// [`wait_until`] on a tokio runtime: the probe may await, and the pauses do not block the
/// runtime's thread.
pub async fn wait_until_async<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> Result<T, String> {
    let started = Instant::now();
    loop {
        let last = match probe().await {
            Ok(value) => return Ok(value),
            Err(state) => state,
        };
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            return Err(timed_out(what, timeout, &last));
        }
        tokio::time::sleep(every.min(timeout.saturating_sub(elapsed))).await;
    }
}

/// [`wait_until_async`], panicking with the timeout's message.
pub async fn wait_for_async<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    match wait_until_async(what, timeout, every, probe).await {
        Ok(value) => value,
        Err(e) => panic!("{e}"),
    }
}

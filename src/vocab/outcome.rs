//! The bounded vocabularies of a step: category, gate, shadow policy, error class and outcome.
//!
//! Every enum here maps to a fixed `&'static str` through an exhaustive `match`, so adding a variant
//! breaks the build until its label exists. These strings are what plans, metrics, Parquet columns
//! and docs use.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use super::{OpId, OpSet};

/// Whether an operation's failure blocks the operations gated on critical failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// A failure blocks every `no-critical-failure`-gated operation after it.
    Critical,
    /// A failure is collected and reported; it blocks only the operations that depend on it.
    NonCritical,
}

impl Category {
    /// The label used in plans, metrics and Parquet.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::NonCritical => "non-critical",
        }
    }
}

/// When an operation may run, in the phased model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    /// Always runs (HyperShift's `execute`), unless a dependency failed.
    #[default]
    None,
    /// Blocked once any critical operation has failed (HyperShift's `executeOrBlock`).
    NoCriticalFailure,
}

impl Gate {
    /// The label used in plans, metrics and Parquet.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::NoCriticalFailure => "no-critical-failure",
        }
    }
}

/// How the candidate treats an operation the control did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShadowPolicy {
    /// Executed through the dry-run client (`dryRun=All`).
    DryRun,
    /// Not simulated (external side effects a dry-run cannot contain); its dependents are `unknown`.
    Skip,
}

impl ShadowPolicy {
    /// The label used in plans and docs.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::DryRun => "dry-run",
            Self::Skip => "skip",
        }
    }
}

/// The bounded set of error classes a failed step is filed under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorClass {
    /// 409 Conflict: the object changed since it was read (stale resourceVersion).
    Conflict,
    /// 409 AlreadyExists: create of a name that exists.
    AlreadyExists,
    /// 404 NotFound.
    NotFound,
    /// 401/403: the client may not do this.
    Forbidden,
    /// 400/422: the request or object is invalid.
    Invalid,
    /// 429 Too Many Requests, or client-side rate limiting.
    Throttled,
    /// 5xx from the API server.
    Server,
    /// The request did not complete at the transport level (connect, TLS, reset).
    Transport,
    /// The request or the operation ran out of time.
    Timeout,
    /// A precondition the operation checks itself did not hold (e.g. an input secret is missing).
    Precondition,
    /// A bug or an unexpected state inside the operation.
    Internal,
}

impl ErrorClass {
    /// Every class, in documentation order.
    pub const ALL: [Self; 11] = [
        Self::Conflict,
        Self::AlreadyExists,
        Self::NotFound,
        Self::Forbidden,
        Self::Invalid,
        Self::Throttled,
        Self::Server,
        Self::Transport,
        Self::Timeout,
        Self::Precondition,
        Self::Internal,
    ];

    /// The label used in metrics, traces and Parquet.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Conflict => "conflict",
            Self::AlreadyExists => "already-exists",
            Self::NotFound => "not-found",
            Self::Forbidden => "forbidden",
            Self::Invalid => "invalid",
            Self::Throttled => "throttled",
            Self::Server => "server",
            Self::Transport => "transport",
            Self::Timeout => "timeout",
            Self::Precondition => "precondition",
            Self::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no error class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown error class {0:?}; expected one of conflict, already-exists, not-found, forbidden, invalid, throttled, server, transport, timeout, precondition, internal"
)]
pub struct UnknownErrorClass(pub String);

impl FromStr for ErrorClass {
    type Err = UnknownErrorClass;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|class| class.as_str() == s)
            .ok_or_else(|| UnknownErrorClass(s.to_owned()))
    }
}

/// How a step's result was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Execution {
    /// Executed with the real client: its writes persist.
    Real,
    /// A candidate step whose result is the control's real one (no new request).
    Reused,
    /// Executed through the dry-run client: nothing persists.
    DryRun,
    /// Declared `shadow: skip`: not executed, outcome unknown.
    NotSimulated,
    /// Decided by the model without executing (blocked, skipped, unknown by dependency).
    NotRun,
}

impl Execution {
    /// The label used in metrics, traces and Parquet.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Real => "real",
            Self::Reused => "reused",
            Self::DryRun => "dry-run",
            Self::NotSimulated => "not-simulated",
            Self::NotRun => "not-run",
        }
    }
}

/// What became of one operation in one run of a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The operation ran and returned no error.
    Succeeded,
    /// The operation ran and said it had nothing to do (a branch the object does not take, an
    /// object already as wanted): a success that is no evidence of what the operation does, so
    /// a candidate step that had nothing to do is never "unblocked", and its outcome is no
    /// change from a success.
    Idle,
    /// The operation ran and failed with an error of this class.
    Failed {
        /// The error's class.
        class: ErrorClass,
    },
    /// The phased model did not run the operation because these operations failed: the critical
    /// failures its gate waits on and the failures behind its failed or blocked dependencies.
    Blocked {
        /// The failed operations responsible, in plan order.
        by: OpSet,
    },
    /// The sequential model stopped (fail-fast) after this operation failed.
    Skipped {
        /// The failed operation the sequential run stopped at.
        after: OpId,
    },
    /// Whether the operation would run, or what it would return, depends on operations whose result
    /// is not known (declared `shadow: skip`); the operation itself may be one of them.
    Unknown {
        /// The not-simulated operations it depends on.
        on: OpSet,
    },
}

impl Outcome {
    /// The outcome's label (`succeeded`, `idle`, `failed`, `blocked`, `skipped`, `unknown`).
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Idle => "idle",
            Self::Failed { .. } => "failed",
            Self::Blocked { .. } => "blocked",
            Self::Skipped { .. } => "skipped",
            Self::Unknown { .. } => "unknown",
        }
    }

    /// Whether the operation actually ran (succeeded, had nothing to do, or failed).
    #[must_use]
    pub const fn ran(&self) -> bool {
        matches!(self, Self::Succeeded | Self::Idle | Self::Failed { .. })
    }

    /// Whether the operation ran without an error (succeeded or had nothing to do).
    #[must_use]
    pub const fn ok(&self) -> bool {
        matches!(self, Self::Succeeded | Self::Idle)
    }

    /// The error class when the operation failed.
    #[must_use]
    pub const fn error_class(&self) -> Option<ErrorClass> {
        match self {
            Self::Failed { class } => Some(*class),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_class_labels_round_trip() {
        for class in ErrorClass::ALL {
            assert_eq!(class.as_str().parse::<ErrorClass>(), Ok(class));
        }
        let err = "teapot".parse::<ErrorClass>().unwrap_err();
        assert!(err.to_string().contains("\"teapot\""), "{err}");
    }

    #[test]
    fn error_class_labels_are_distinct() {
        let mut labels: Vec<_> = ErrorClass::ALL.iter().map(|c| c.as_str()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), ErrorClass::ALL.len());
    }
}

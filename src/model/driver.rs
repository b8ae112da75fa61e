//! Runs a model over synchronous closures: for tests, benchmarks and model-only simulation.

use super::{Decision, Policy, Report, StepResult};
use crate::plan::Operation;

/// Runs one reconcile of `policy`, calling `execute` for each operation the model decides to run
/// (and only for those), and returns the report.
///
/// # Panics
/// Never: the driver completes exactly the operation the model asked for and decides every
/// operation before taking the report.
pub fn drive<F>(policy: &Policy, mut execute: F) -> Report
where
    F: FnMut(&Operation) -> StepResult,
{
    let mut run = policy.start();
    while let Some(decision) = run.next() {
        if let Decision::Run(op) = decision {
            let result = execute(policy.plan().operation(op));
            run.complete(op, result)
                .expect("the driver completes exactly the pending operation");
        }
    }
    run.into_report()
        .expect("the driver decides every operation")
}

//! One problem found in a plan file, with its location.

use std::fmt;

/// Longest operation name a diagnostic repeats.
const MAX_ECHO: usize = 100;
/// Longest message (with the values it quotes).
const MAX_MESSAGE: usize = 400;

/// A problem in a plan, located at `source:line:column`, naming the operation it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The plan's source (its path, or the name given to [`super::ReconcilePlan::from_yaml`]).
    pub source: String,
    /// 1-based line; 0 when the location is unknown.
    pub line: u64,
    /// 1-based column; 0 when the location is unknown.
    pub column: u64,
    /// The operation the problem concerns, when there is one.
    pub operation: Option<String>,
    /// What is wrong and, where it helps, what to do.
    pub message: String,
}

impl Diagnostic {
    pub(super) fn new(
        source: &str,
        at: serde_saphyr::Location,
        operation: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        // Echoed values (names, keys) are bounded: a 4 MB name never floods the output.
        Self {
            source: source.to_owned(),
            line: at.line(),
            column: at.column(),
            operation: operation.map(|o| crate::util::yaml::bounded(o, MAX_ECHO)),
            message: crate::util::yaml::bounded(
                &crate::util::yaml::bounded_quotes(&message.into(), MAX_ECHO),
                MAX_MESSAGE,
            ),
        }
    }

    /// All diagnostics, one per line.
    pub(super) fn render_all(diagnostics: &[Self]) -> String {
        diagnostics
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.source, self.line, self.column)?;
        if let Some(op) = &self.operation {
            write!(f, "operation {op}: ")?;
        }
        f.write_str(&self.message)
    }
}

//! Logs: `tracing-subscriber`, human-readable on a terminal and JSON otherwise (or as asked),
//! level from `RUST_LOG` (default `info`).

use std::io::IsTerminal;
use std::str::FromStr;

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable on a terminal, JSON otherwise.
    Auto,
    /// Human-readable.
    Human,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "human" => Ok(Self::Human),
            "json" => Ok(Self::Json),
            other => Err(format!(
                "unknown log format {other:?}; expected auto, human or json"
            )),
        }
    }
}

/// Installs the global subscriber, writing to stderr, at level `info` unless `RUST_LOG` says
/// otherwise. A second call changes nothing.
pub fn init(format: LogFormat) {
    init_at(format, "info");
}

/// [`init`] with another default level (`RUST_LOG` still wins): `simulate`, whose output is its
/// report, logs warnings and errors only.
pub fn init_at(format: LogFormat, default: &str) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into());
    let json = match format {
        LogFormat::Auto => !std::io::stderr().is_terminal(),
        LogFormat::Human => false,
        LogFormat::Json => true,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // `try_init` fails only when a subscriber is already installed: keep that one.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse() {
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert_eq!("human".parse(), Ok(LogFormat::Human));
        assert!("xml".parse::<LogFormat>().unwrap_err().contains("\"xml\""));
    }
}

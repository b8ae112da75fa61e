//! Time formatting without a date-time dependency: calendar dates in UTC from Unix time, and the
//! RFC 3339 timestamps Kubernetes writes (`creationTimestamp`, `lastTransitionTime`).

use std::time::{SystemTime, UNIX_EPOCH};

/// The UTC `(year, month, day)` of a day counted from 1970-01-01 (negative before it), by Howard
/// Hinnant's `civil_from_days`.
#[must_use]
pub const fn from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    (year, month, day)
}

/// The current time in seconds since the Unix epoch (for timestamp gauges).
#[must_use]
pub fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The current time as RFC 3339 in UTC, seconds precision (as `creationTimestamp`).
#[must_use]
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (year, month, day) = from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_days() {
        assert_eq!(super::from_days(0), (1970, 1, 1));
        assert_eq!(super::from_days(-1), (1969, 12, 31));
        assert_eq!(super::from_days(19_782), (2024, 2, 29));
        assert_eq!(super::from_days(20_786), (2026, 11, 29));
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = super::now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(
            t.starts_with("20") && t.ends_with('Z') && &t[10..11] == "T",
            "{t}"
        );
    }
}

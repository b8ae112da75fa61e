//! Calendar dates in UTC from Unix time, without a date-time dependency.

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

#[cfg(test)]
mod tests {
    #[test]
    fn known_days() {
        assert_eq!(super::from_days(0), (1970, 1, 1));
        assert_eq!(super::from_days(-1), (1969, 12, 31));
        assert_eq!(super::from_days(19_782), (2024, 2, 29));
        assert_eq!(super::from_days(20_786), (2026, 11, 29));
    }
}

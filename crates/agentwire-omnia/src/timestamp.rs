//! Frame timestamps, written the way Go's `time.Time` marshals to JSON,
//! because that is the form Omnia clients already parse.

use std::fmt;

use agentwire_core::Timestamp;
use serde::{Serialize, Serializer};

const NANOS_PER_SEC: i64 = 1_000_000_000;
const SECS_PER_DAY: i64 = 86_400;

/// RFC 3339 in UTC with the fraction's trailing zeros trimmed, and no dot at
/// all on a whole second: `2026-07-24T16:47:30.5Z`, `2026-07-24T16:47:30Z`.
pub fn format_timestamp(ts: Timestamp) -> String {
    Rfc3339(ts).to_string()
}

/// Streams the formatted timestamp into a frame without an intermediate
/// `String`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rfc3339(pub(crate) Timestamp);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Euclidean division keeps pre-epoch instants on the right calendar
        // day and second, with a non-negative fraction.
        let nanos = self.0.unix_nanos();
        let secs = nanos.div_euclid(NANOS_PER_SEC);
        let fraction = nanos.rem_euclid(NANOS_PER_SEC);
        let (year, month, day) = civil_from_days(secs.div_euclid(SECS_PER_DAY));
        let second_of_day = secs.rem_euclid(SECS_PER_DAY);
        let (hour, minute, second) = (
            second_of_day / 3600,
            second_of_day % 3600 / 60,
            second_of_day % 60,
        );
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}"
        )?;
        write_fraction(f, fraction)?;
        f.write_str("Z")
    }
}

impl Serialize for Rfc3339 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Writes `.ddd` with trailing zeros trimmed, or nothing for a whole second.
fn write_fraction(f: &mut fmt::Formatter<'_>, fraction: i64) -> fmt::Result {
    if fraction == 0 {
        return Ok(());
    }
    let mut digits = 9;
    let mut value = fraction;
    while value % 10 == 0 {
        value /= 10;
        digits -= 1;
    }
    write!(f, ".{value:0digits$}")
}

/// Proleptic Gregorian (year, month, day) for a count of days since
/// 1970-01-01. Howard Hinnant's `civil_from_days`, valid for every day an
/// `i64` nanosecond count can reach.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64, nanos: i64) -> String {
        format_timestamp(Timestamp(secs * NANOS_PER_SEC + nanos))
    }

    #[test]
    fn epoch_has_no_fraction() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn leap_days_are_on_the_calendar() {
        assert_eq!(at(1_709_251_199, 0), "2024-02-29T23:59:59Z");
        assert_eq!(at(1_709_251_200, 0), "2024-03-01T00:00:00Z");
        assert_eq!(at(951_868_800 - SECS_PER_DAY, 0), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn fraction_trailing_zeros_are_trimmed() {
        let t = 1_784_911_650;
        assert_eq!(at(t, 123_456_789), "2026-07-24T16:47:30.123456789Z");
        assert_eq!(at(t, 500_000_000), "2026-07-24T16:47:30.5Z");
        assert_eq!(at(t, 120_000_000), "2026-07-24T16:47:30.12Z");
        assert_eq!(at(t, 1), "2026-07-24T16:47:30.000000001Z");
        assert_eq!(at(t, 10), "2026-07-24T16:47:30.00000001Z");
        assert_eq!(at(t, 0), "2026-07-24T16:47:30Z");
    }

    #[test]
    fn pre_epoch_instants_do_not_panic_and_stay_correct() {
        assert_eq!(
            format_timestamp(Timestamp(-1)),
            "1969-12-31T23:59:59.999999999Z"
        );
        assert_eq!(
            format_timestamp(Timestamp(i64::MIN)),
            "1677-09-21T00:12:43.145224192Z"
        );
        assert_eq!(
            format_timestamp(Timestamp(i64::MAX)),
            "2262-04-11T23:47:16.854775807Z"
        );
    }

    #[test]
    fn serializes_as_a_json_string() {
        let json = serde_json::to_string(&Rfc3339(Timestamp(1_500_000_000))).unwrap();
        assert_eq!(json, r#""1970-01-01T00:00:01.5Z""#);
    }
}

//! Frame timestamps, written the way Go's `time.Time` marshals to JSON,
//! because that is the form Omnia clients already parse.

use std::fmt;

use agentwire_core::Timestamp;
use serde::{Serialize, Serializer};

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
        let t = self.0.to_utc();
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            t.year, t.month, t.day, t.hour, t.minute, t.second
        )?;
        write_fraction(f, t.nanosecond)?;
        f.write_str("Z")
    }
}

impl Serialize for Rfc3339 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Writes `.ddd` with trailing zeros trimmed, or nothing for a whole second.
fn write_fraction(f: &mut fmt::Formatter<'_>, fraction: u32) -> fmt::Result {
    if fraction == 0 {
        return Ok(());
    }
    let mut digits = 9;
    let mut value = fraction;
    while value.is_multiple_of(10) {
        value /= 10;
        digits -= 1;
    }
    write!(f, ".{value:0digits$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NANOS_PER_SEC: i64 = 1_000_000_000;
    const SECS_PER_DAY: i64 = 86_400;

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

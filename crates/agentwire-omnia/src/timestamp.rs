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

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, the longest form.
pub(crate) const MAX_LEN: usize = 30;

impl Rfc3339 {
    /// The text, written digit by digit into `buf`: frames carry a timestamp
    /// each, and `core::fmt` costs several times as much. An `i64` of
    /// nanoseconds spans the years 1677 to 2262, always four digits.
    pub(crate) fn write_into(self, buf: &mut [u8; MAX_LEN]) -> &str {
        let t = self.0.to_utc();
        write_digits(&mut buf[0..4], t.year.unsigned_abs() as u32);
        buf[4] = b'-';
        write_digits(&mut buf[5..7], u32::from(t.month));
        buf[7] = b'-';
        write_digits(&mut buf[8..10], u32::from(t.day));
        buf[10] = b'T';
        write_digits(&mut buf[11..13], u32::from(t.hour));
        buf[13] = b':';
        write_digits(&mut buf[14..16], u32::from(t.minute));
        buf[16] = b':';
        write_digits(&mut buf[17..19], u32::from(t.second));
        let mut len = 19;
        if t.nanosecond != 0 {
            buf[19] = b'.';
            write_digits(&mut buf[20..29], t.nanosecond);
            len = 29;
            while buf[len - 1] == b'0' {
                len -= 1;
            }
        }
        buf[len] = b'Z';
        // Only ASCII digits and separators were written.
        std::str::from_utf8(&buf[..=len]).unwrap_or_default()
    }
}

/// `value` in decimal, zero-padded to fill `out`.
fn write_digits(out: &mut [u8], mut value: u32) {
    for digit in out.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.write_into(&mut [0; MAX_LEN]))
    }
}

impl Serialize for Rfc3339 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.write_into(&mut [0; MAX_LEN]))
    }
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

//! Wall-clock time as the engine sees it.

/// Nanoseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn from_unix_millis(ms: i64) -> Timestamp {
        Timestamp(ms.saturating_mul(1_000_000))
    }

    pub fn unix_millis(self) -> i64 {
        self.0.div_euclid(1_000_000)
    }

    pub fn unix_nanos(self) -> i64 {
        self.0
    }

    /// `self + d`, saturating.
    pub fn plus(self, d: std::time::Duration) -> Timestamp {
        let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(nanos))
    }

    /// The instant on the proleptic Gregorian calendar, in UTC, for the wire
    /// crates' timestamp formats. Valid for every `i64` nanosecond count,
    /// before the epoch too.
    pub fn to_utc(self) -> UtcDateTime {
        // Euclidean division keeps pre-epoch instants on the right calendar
        // day and second, with a non-negative fraction.
        let secs = self.0.div_euclid(NANOS_PER_SEC);
        let (year, month, day) = civil_from_days(secs.div_euclid(SECS_PER_DAY));
        let second_of_day = secs.rem_euclid(SECS_PER_DAY);
        UtcDateTime {
            year,
            month: month as u8,
            day: day as u8,
            hour: (second_of_day / 3600) as u8,
            minute: (second_of_day % 3600 / 60) as u8,
            second: (second_of_day % 60) as u8,
            nanosecond: self.0.rem_euclid(NANOS_PER_SEC) as u32,
        }
    }
}

/// A [`Timestamp`] broken down into UTC calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcDateTime {
    pub year: i64,
    /// 1 to 12.
    pub month: u8,
    /// 1 to 31.
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    /// 0 to 999 999 999.
    pub nanosecond: u32,
}

/// RFC 3339 in UTC as Go's `time.Time` writes it (the form Omnia's clients
/// and PromptKit's tools use): the fraction's trailing zeros trimmed, no
/// dot on a whole second. `2026-07-24T16:47:30.5Z`, `2026-07-24T16:47:30Z`.
impl std::fmt::Display for UtcDateTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )?;
        if self.nanosecond != 0 {
            let fraction = format!("{:09}", self.nanosecond);
            write!(f, ".{}", fraction.trim_end_matches('0'))?;
        }
        f.write_str("Z")
    }
}

const NANOS_PER_SEC: i64 = 1_000_000_000;
const SECS_PER_DAY: i64 = 86_400;

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

/// The wall clock. Timers (tokio's) are separate; this is for stamping frames
/// and records and for expiry decisions that must survive a restart.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(ts: Timestamp) -> (i64, u8, u8, u8, u8, u8, u32) {
        let t = ts.to_utc();
        (
            t.year,
            t.month,
            t.day,
            t.hour,
            t.minute,
            t.second,
            t.nanosecond,
        )
    }

    #[test]
    fn calendar_fields_in_utc() {
        assert_eq!(utc(Timestamp(0)), (1970, 1, 1, 0, 0, 0, 0));
        assert_eq!(
            utc(Timestamp(1_709_251_199 * NANOS_PER_SEC + 5)),
            (2024, 2, 29, 23, 59, 59, 5)
        );
        assert_eq!(utc(Timestamp(-1)), (1969, 12, 31, 23, 59, 59, 999_999_999));
        assert_eq!(utc(Timestamp(i64::MIN)).0, 1677);
        assert_eq!(utc(Timestamp(i64::MAX)).0, 2262);
    }

    #[test]
    fn rfc3339_as_go_writes_it() {
        let at = Timestamp(1_753_375_650 * NANOS_PER_SEC);
        assert_eq!(at.to_utc().to_string(), "2025-07-24T16:47:30Z");
        assert_eq!(
            Timestamp(at.0 + 500_000_000).to_utc().to_string(),
            "2025-07-24T16:47:30.5Z"
        );
        assert_eq!(
            Timestamp(at.0 + 7).to_utc().to_string(),
            "2025-07-24T16:47:30.000000007Z"
        );
    }
}

//! The string formats the schema names: SemVer 2.0.0 versions (with an
//! optional `v`), RFC 3339 `date-time` and `date`.

/// `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`, an optional `v` before it.
pub(crate) fn is_semver(text: &str) -> bool {
    let text = text.strip_prefix('v').unwrap_or(text);
    let (text, build) = match text.split_once('+') {
        Some((head, build)) => (head, Some(build)),
        None => (text, None),
    };
    let (core, pre) = match text.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (text, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers.iter().all(|n| is_numeric_identifier(n))
        && pre.is_none_or(|pre| pre.split('.').all(is_prerelease_identifier))
        && build.is_none_or(|build| build.split('.').all(is_build_identifier))
}

/// `0`, or digits not starting with `0`.
fn is_numeric_identifier(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'))
}

fn is_prerelease_identifier(text: &str) -> bool {
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return is_numeric_identifier(text);
    }
    is_build_identifier(text)
}

fn is_build_identifier(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// `YYYY-MM-DD`, a real day.
pub(crate) fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) =
        (number(&text[..4]), number(&text[5..7]), number(&text[8..]))
    else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
pub(crate) fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    if !is_date(date) || time.len() < 9 {
        return false;
    }
    let (clock, rest) = time.split_at(8);
    let b = clock.as_bytes();
    let valid_clock = b[2] == b':'
        && b[5] == b':'
        && number(&clock[..2]).is_some_and(|h| h < 24)
        && number(&clock[3..5]).is_some_and(|m| m < 60)
        && number(&clock[6..]).is_some_and(|s| s <= 60);
    let rest = match rest.strip_prefix('.') {
        Some(fraction) => {
            let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return false;
            }
            &fraction[digits..]
        }
        None => rest,
    };
    valid_clock && is_offset(rest)
}

fn is_offset(text: &str) -> bool {
    if text == "Z" || text == "z" {
        return true;
    }
    let Some(offset) = text.strip_prefix(['+', '-']) else {
        return false;
    };
    offset.len() == 5
        && offset.as_bytes()[2] == b':'
        && number(&offset[..2]).is_some_and(|h| h < 24)
        && number(&offset[3..]).is_some_and(|m| m < 60)
}

fn number(text: &str) -> Option<u32> {
    match text.bytes().all(|b| b.is_ascii_digit()) {
        true => text.parse().ok(),
        false => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_as_the_schema_has_it() {
        for good in [
            "1.0.0",
            "v2.1.3",
            "1.0.0-alpha",
            "2.0.0-beta.1+build.123",
            "0.0.0",
        ] {
            assert!(is_semver(good), "{good}");
        }
        for bad in [
            "1.0", "01.0.0", "1.0.0-", "1.0.0-01", "1.0.0+", "v", "1.0.0.0", "x.y.z", "",
        ] {
            assert!(!is_semver(bad), "{bad}");
        }
    }

    #[test]
    fn dates_and_times() {
        assert!(is_date_time("2026-08-21T00:00:00Z"));
        assert!(is_date_time("2024-02-29T23:59:60.123+05:30"));
        for bad in [
            "2026-08-21",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-08-21T00:00:00",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
        assert!(is_date("2025-10-31") && !is_date("2025-10-32"));
    }
}

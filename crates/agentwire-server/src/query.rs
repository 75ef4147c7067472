//! The `/ws` query string, parsed by hand because the rules need what serde
//! hides: the first of repeated values, and whether a key was repeated.

use agentwire_core::Epoch;

/// Decoded `key=value` pairs in their order.
pub(crate) struct QueryParams {
    pairs: Vec<(String, String)>,
}

impl QueryParams {
    pub(crate) fn parse(raw: Option<&str>) -> QueryParams {
        let pairs = raw
            .unwrap_or_default()
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(key), percent_decode(value))
            })
            .collect();
        QueryParams { pairs }
    }

    /// The first value of `key`.
    pub(crate) fn first(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn count(&self, key: &str) -> usize {
        self.pairs.iter().filter(|(k, _)| k == key).count()
    }

    /// `stream=2`: the client asked for log positions (issue #13).
    pub(crate) fn wants_positions(&self) -> bool {
        self.first("stream") == Some("2")
    }

    /// `epoch` (16 hex digits) and `after` (a seq), as a rejoin names its
    /// position; `None` when either is missing or malformed.
    pub(crate) fn log_position(&self) -> Option<(Epoch, u64)> {
        let epoch = self.first("epoch").filter(|e| e.len() == 16)?;
        let epoch = u64::from_str_radix(epoch, 16).ok()?;
        let after = self.first("after")?.parse().ok()?;
        Some((Epoch(epoch), after))
    }
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a
/// byte; malformed escapes stay as they are; invalid UTF-8 is replaced.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match hex_pair(bytes.get(i + 1..i + 3)) {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_pair(pair: Option<&[u8]>) -> Option<u8> {
    let pair = pair?;
    let hi = (pair[0] as char).to_digit(16)?;
    let lo = (pair[1] as char).to_digit(16)?;
    Some((hi * 16 + lo) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_keeps_repeats() {
        let q = QueryParams::parse(Some("agent=a%20b&x=1&x=2&flag&m=%zz+c"));
        assert_eq!(q.first("agent"), Some("a b"));
        assert_eq!(q.first("x"), Some("1"));
        assert_eq!(q.count("x"), 2);
        assert_eq!(q.first("flag"), Some(""));
        assert_eq!(q.first("m"), Some("%zz c"));
        assert_eq!(q.first("missing"), None);
    }

    #[test]
    fn a_log_position_needs_both_halves_well_formed() {
        let at = |q: &str| QueryParams::parse(Some(q)).log_position();
        assert_eq!(at("epoch=00000000000000ff&after=7"), Some((Epoch(255), 7)));
        assert_eq!(at("epoch=ff&after=7"), None);
        assert_eq!(at("epoch=000000000000zzff&after=7"), None);
        assert_eq!(at("epoch=00000000000000ff&after=-1"), None);
        assert_eq!(at("epoch=00000000000000ff"), None);
    }
}

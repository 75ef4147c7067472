//! Shared JSON helpers: serde helpers for the shapes this crate reads, and
//! the string escaping of the frames it writes by hand.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// Accepts `T` only when written as a JSON object.
///
/// Derived struct impls also accept a JSON array and fill the fields by
/// position, so `["message","hi"]` would otherwise pass as a frame. Wire
/// shapes are objects, and anything else is a type mismatch.
pub(crate) struct Object<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(ObjectVisitor(PhantomData))
            .map(Object)
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        // The derived visitor receives serde_json's own MapAccess, so borrowed
        // and `RawValue` fields keep working through the wrapper.
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

/// Go's `omitempty` view of a string: empty means absent.
pub(crate) fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// Bytes `value` takes as the inside of a JSON string, escaped as
/// [`push_escaped`] escapes it, so a frame can be sized exactly before it is
/// written.
pub(crate) fn escaped_len(value: &str) -> usize {
    value.len()
        + value
            .bytes()
            .map(|b| match ESCAPES[usize::from(b)] {
                0 => 0,
                b'u' => 5,
                _ => 1,
            })
            .sum::<usize>()
}

/// Appends `value` as the inside of a JSON string (RFC 8259 §7), escaped
/// byte for byte as `serde_json` escapes it, so hand-written frames are
/// identical to serialised ones: `"` and `\` with a backslash, the control
/// characters below 0x20 as `\b \t \n \f \r` or `\u00xx` (lowercase
/// hex), everything else as is.
pub(crate) fn push_escaped(out: &mut String, value: &str) {
    let bytes = value.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = ESCAPES[usize::from(b)];
        if escape == 0 {
            continue;
        }
        // Every escaped byte is ASCII, so `i` is a character boundary.
        out.push_str(&value[start..i]);
        start = i + 1;
        out.push('\\');
        if escape == b'u' {
            out.push_str("u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push(char::from(escape));
        }
    }
    out.push_str(&value[start..]);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// For each byte, what follows the backslash of its escape (`u` for
/// `\u00xx`), or 0 when it is written as is.
static ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Pair {
        a: Option<String>,
        b: Option<u32>,
    }

    #[test]
    fn objects_are_accepted() {
        let Object(p) = serde_json::from_str::<Object<Pair>>(r#"{"a":"x","b":1,"c":[]}"#).unwrap();
        assert_eq!(
            p,
            Pair {
                a: Some("x".into()),
                b: Some(1)
            }
        );
    }

    #[test]
    fn arrays_are_refused_even_though_derive_would_take_them() {
        assert!(serde_json::from_str::<Pair>(r#"["x",1]"#).is_ok());
        assert!(serde_json::from_str::<Object<Pair>>(r#"["x",1]"#).is_err());
        assert!(serde_json::from_str::<Object<Pair>>(r#""x""#).is_err());
    }

    #[test]
    fn empty_strings_count_as_absent() {
        assert_eq!(non_empty(Some(String::new())), None);
        assert_eq!(non_empty(Some("a".into())), Some("a".into()));
        assert_eq!(non_empty(None), None);
    }

    fn escaped(value: &str) -> String {
        let mut out = String::new();
        push_escaped(&mut out, value);
        out
    }

    #[test]
    fn escapes_match_serde_json_for_every_ascii_byte() {
        for b in 0u8..0x80 {
            let value = format!("a{}b", char::from(b));
            let expected = serde_json::to_string(&value).unwrap();
            assert_eq!(
                format!("\"{}\"", escaped(&value)),
                expected,
                "byte {b:#04x}"
            );
            assert_eq!(escaped_len(&value) + 2, expected.len(), "byte {b:#04x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn escaping_is_serde_jsons_for_any_string(value in "\\PC*|[\\x00-\\x7f]*|.*") {
            let expected = serde_json::to_string(&value).unwrap();
            proptest::prop_assert_eq!(format!("\"{}\"", escaped(&value)), expected.clone());
            proptest::prop_assert_eq!(escaped_len(&value) + 2, expected.len());
        }

        #[test]
        fn escaping_is_serde_jsons_for_any_chars(value in proptest::collection::vec(proptest::char::any(), 0..64)) {
            let value: String = value.into_iter().collect();
            let expected = serde_json::to_string(&value).unwrap();
            proptest::prop_assert_eq!(format!("\"{}\"", escaped(&value)), expected.clone());
            proptest::prop_assert_eq!(escaped_len(&value) + 2, expected.len());
        }
    }
}

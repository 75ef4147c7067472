//! Shared serde helpers for the JSON shapes this crate reads.

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
}

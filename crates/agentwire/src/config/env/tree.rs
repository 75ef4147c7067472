//! The parsed file with its substituted values marked, and the deserializer
//! that reads it: a substituted value is the text it was unless the field it
//! lands in asks for a number or a boolean, and an error about it names the
//! reference, never the value.

use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, Expected, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::Value;

/// A parsed file. Collections without a substituted value inside stay the
/// JSON value they parsed to, and are read as serde_json reads them.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::config) enum Tree {
    Json(Value),
    List(Vec<Tree>),
    Map(Vec<(String, Tree)>),
    Substituted(Substituted),
}

/// A scalar whose text came through `${...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::config) struct Substituted {
    /// After substitution.
    pub(super) text: String,
    /// As the file wrote it (`${KEY}`, `Bearer ${TOKEN}`).
    pub(super) written: String,
    /// A plain (unquoted, untagged) value: a number or boolean field reads
    /// it as one, as it would a number written there. A quoted or block
    /// value stays text, as one written there does.
    pub(super) typed: bool,
}

impl Tree {
    pub(super) fn is_json(&self) -> bool {
        matches!(self, Tree::Json(_))
    }

    pub(super) fn into_json(self) -> Option<Value> {
        match self {
            Tree::Json(value) => Some(value),
            _ => None,
        }
    }
}

impl Substituted {
    fn scalar(&self) -> Scalar<'_> {
        Scalar {
            text: &self.text,
            typed: self.typed,
            written: Some(&self.written),
        }
    }
}

/// A deserialization error. Those serde builds from the value it refused
/// keep what they say apart from the value, so that the value can be left
/// out when it was substituted.
#[derive(Debug)]
pub(in crate::config) struct DeError {
    message: String,
    /// `("invalid type: string", "usize")`: the message without the value.
    without_value: Option<(String, String)>,
    /// Already says the reference instead of the value.
    hidden: bool,
}

impl DeError {
    fn about(head: &str, unexpected: Unexpected<'_>, expected: String) -> DeError {
        DeError {
            message: format!("{head}: {unexpected}, expected {expected}"),
            without_value: Some((format!("{head}: {}", kind(&unexpected)), expected)),
            hidden: false,
        }
    }

    /// This error about a value substituted from `written`, without the
    /// value: serde's own errors name what was expected; any other message
    /// has the value, as it is or as `{:?}` writes it, replaced.
    fn hide(self, text: &str, written: &str) -> DeError {
        if self.hidden {
            return self;
        }
        let message = match self.without_value {
            Some((head, expected)) => format!("{head} from `{written}`, expected {expected}"),
            None => super::hide_value(&self.message, text, written),
        };
        DeError {
            message,
            without_value: None,
            hidden: true,
        }
    }
}

/// An integer no integer field holds.
const OUT_OF_RANGE: &str = "integer out of range";

/// What kind of value `unexpected` is, without the value.
fn kind(unexpected: &Unexpected<'_>) -> String {
    match unexpected {
        Unexpected::Bool(_) => "boolean".to_owned(),
        Unexpected::Unsigned(_) | Unexpected::Signed(_) => "integer".to_owned(),
        Unexpected::Float(_) => "floating point".to_owned(),
        Unexpected::Char(_) => "character".to_owned(),
        Unexpected::Str(_) => "string".to_owned(),
        Unexpected::Other(OUT_OF_RANGE) => OUT_OF_RANGE.to_owned(),
        // Another's words may carry the value.
        Unexpected::Other(_) => "value".to_owned(),
        other => other.to_string(),
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

/// serde's messages, word for word; the ones about a value also kept
/// without it.
impl de::Error for DeError {
    fn custom<T: fmt::Display>(message: T) -> DeError {
        DeError {
            message: message.to_string(),
            without_value: None,
            hidden: false,
        }
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> DeError {
        DeError::about("invalid type", unexpected, expected.to_string())
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> DeError {
        DeError::about("invalid value", unexpected, expected.to_string())
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> DeError {
        let message = de::value::Error::unknown_variant(variant, expected).to_string();
        // serde's list of the variants, from its message about an empty name.
        let without = de::value::Error::unknown_variant("", expected).to_string();
        let expected = without
            .strip_prefix("unknown variant ``, expected ")
            .unwrap_or("no variant (there are none)");
        DeError {
            message,
            without_value: Some(("unknown variant".to_owned(), expected.to_owned())),
            hidden: false,
        }
    }
}

/// A scalar read by what the field asks for: the text for a string; for a
/// number or a boolean, the text read as one when it is `typed`. With
/// `written`, its errors name that instead of the text.
#[derive(Clone, Copy)]
struct Scalar<'a> {
    text: &'a str,
    typed: bool,
    written: Option<&'a str>,
}

impl Scalar<'_> {
    fn finish<T>(self, result: Result<T, DeError>) -> Result<T, DeError> {
        match self.written {
            Some(written) => result.map_err(|e| e.hide(self.text, written)),
            None => result,
        }
    }

    fn refuse<'de, V: Visitor<'de>>(self, visitor: &V) -> DeError {
        de::Error::invalid_type(Unexpected::Str(self.text), visitor)
    }

    /// A decimal integer (`100`, `-5`), else a decimal number the field's
    /// own checks refuse (`1e5`); never hexadecimal or octal.
    fn integer<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let text = self.text;
        let result = if !self.typed {
            Err(self.refuse(&visitor))
        } else if let Ok(n) = text.parse::<u64>() {
            visitor.visit_u64(n)
        } else if let Ok(n) = text.parse::<i64>() {
            visitor.visit_i64(n)
        } else if is_integer(text) {
            Err(de::Error::invalid_value(
                Unexpected::Other(OUT_OF_RANGE),
                &visitor,
            ))
        } else if let Some(n) = decimal(text) {
            visitor.visit_f64(n)
        } else {
            Err(self.refuse(&visitor))
        };
        self.finish(result)
    }

    fn float<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match decimal(self.text).filter(|_| self.typed) {
            Some(n) => visitor.visit_f64(n),
            None => Err(self.refuse(&visitor)),
        };
        self.finish(result)
    }
}

/// `-12`, `+7`, `300`.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `text` as a decimal number (`1.5`, `-2`, `1e5`); not `inf`, `NaN` or
/// hexadecimal.
fn decimal(text: &str) -> Option<f64> {
    let decimal_chars = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    let has_digit = text.bytes().any(|b| b.is_ascii_digit());
    (decimal_chars && has_digit)
        .then(|| text.parse().ok())
        .flatten()
}

/// A boolean as a plain YAML value spells it (serde-saphyr's reading:
/// `true`, `yes`, `on`, `y` and their opposites, in any case).
fn boolean(text: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["true", "yes", "y", "on"];
    const FALSE: [&str; 4] = ["false", "no", "n", "off"];
    let is = |words: [&str; 4]| words.iter().any(|w| w.eq_ignore_ascii_case(text));
    match (is(TRUE), is(FALSE)) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// The number requests, each answered by [`Scalar::integer`] or
/// [`Scalar::float`].
macro_rules! numbers {
    (integer: [$($integer:ident)*] float: [$($float:ident)*]) => {
        $(fn $integer<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            self.integer(visitor)
        })*
        $(fn $float<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            self.float(visitor)
        })*
    };
}

impl<'de> Deserializer<'de> for Scalar<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.finish(visitor.visit_str(self.text))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match boolean(self.text).filter(|_| self.typed) {
            Some(b) => visitor.visit_bool(b),
            None => Err(self.refuse(&visitor)),
        };
        self.finish(result)
    }

    numbers! {
        integer: [
            deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
            deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        ]
        float: [deserialize_f32 deserialize_f64]
    }

    /// An empty plain value is no value, as YAML reads one.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = if self.typed && self.text.is_empty() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        };
        self.finish(result)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = if self.typed && self.text.is_empty() {
            visitor.visit_unit()
        } else {
            Err(self.refuse(&visitor))
        };
        self.finish(result)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.finish(visitor.visit_newtype_struct(self))
    }

    /// A unit variant named by the text.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.finish(visitor.visit_enum(self.text.into_deserializer()))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf seq tuple tuple_struct map struct
        identifier
    }
}

/// Reads `tree` with `seed`. Errors about a substituted value are hidden
/// here too: a type's own checks (a duration's) fail after the value was
/// read, outside the deserializer's calls.
fn node<'de, S: DeserializeSeed<'de>>(seed: S, tree: Tree) -> Result<S::Value, DeError> {
    match tree {
        Tree::Substituted(sub) => seed
            .deserialize(sub.scalar())
            .map_err(|e| e.hide(&sub.text, &sub.written)),
        tree => seed.deserialize(tree),
    }
}

struct Items(std::vec::IntoIter<Tree>);

impl<'de> SeqAccess<'de> for Items {
    type Error = DeError;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, DeError> {
        self.0.next().map(|item| node(seed, item)).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries {
    entries: std::vec::IntoIter<(String, Tree)>,
    value: Option<Tree>,
}

impl<'de> MapAccess<'de> for Entries {
    type Error = DeError;

    /// Keys are read as serde_json reads a map's keys: text, or the number
    /// or boolean the field asks for.
    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, DeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        let key = Scalar {
            text: &key,
            typed: true,
            written: None,
        };
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, DeError> {
        match self.value.take() {
            Some(value) => node(seed, value),
            None => Err(de::Error::custom(
                "a map value was asked for before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// The requests a node answers by what it is: a JSON value as serde_json
/// does, a substituted value as its scalar, a collection as
/// `deserialize_any` does (its visitor refuses what it did not ask for, in
/// serde_json's words).
macro_rules! by_node {
    ($($method:ident($($arg:ident: $ty:ty),*))*) => {$(
        fn $method<V: Visitor<'de>>(
            self,
            $($arg: $ty,)*
            visitor: V,
        ) -> Result<V::Value, DeError> {
            match self {
                Tree::Json(value) => value.$method($($arg,)* visitor).map_err(de::Error::custom),
                Tree::Substituted(sub) => sub.scalar().$method($($arg,)* visitor),
                tree => tree.deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Tree {
    type Error = DeError;

    /// A collection is read whole, as serde_json reads one: what its
    /// visitor leaves unread is an error.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self {
            Tree::Json(value) => value.deserialize_any(visitor).map_err(de::Error::custom),
            Tree::Substituted(sub) => sub.scalar().deserialize_any(visitor),
            Tree::List(items) => {
                let len = items.len();
                let mut items = Items(items.into_iter());
                let value = visitor.visit_seq(&mut items)?;
                match items.0.len() {
                    0 => Ok(value),
                    _ => Err(de::Error::invalid_length(len, &"fewer elements in array")),
                }
            }
            Tree::Map(entries) => {
                let len = entries.len();
                let mut entries = Entries {
                    entries: entries.into_iter(),
                    value: None,
                };
                let value = visitor.visit_map(&mut entries)?;
                match entries.entries.len() {
                    0 => Ok(value),
                    _ => Err(de::Error::invalid_length(len, &"fewer elements in map")),
                }
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self {
            Tree::Json(value) => value.deserialize_option(visitor).map_err(de::Error::custom),
            Tree::Substituted(sub) => sub.scalar().deserialize_option(visitor),
            tree => visitor.visit_some(tree),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self {
            Tree::Json(value) => value
                .deserialize_newtype_struct(name, visitor)
                .map_err(de::Error::custom),
            Tree::Substituted(sub) => sub.scalar().deserialize_newtype_struct(name, visitor),
            tree => visitor.visit_newtype_struct(tree),
        }
    }

    /// A unit variant by name, or a variant with data as a map of one key.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self {
            Tree::Json(value) => value
                .deserialize_enum(name, variants, visitor)
                .map_err(de::Error::custom),
            Tree::Substituted(sub) => sub.scalar().deserialize_enum(name, variants, visitor),
            Tree::Map(entries) => visitor.visit_enum(MapAccessDeserializer::new(Entries {
                entries: entries.into_iter(),
                value: None,
            })),
            list @ Tree::List(_) => list.deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    by_node! {
        deserialize_bool()
        deserialize_i8() deserialize_i16() deserialize_i32() deserialize_i64()
        deserialize_u8() deserialize_u16() deserialize_u32() deserialize_u64()
        deserialize_i128() deserialize_u128()
        deserialize_f32() deserialize_f64() deserialize_char()
        deserialize_str() deserialize_string() deserialize_bytes() deserialize_byte_buf()
        deserialize_unit() deserialize_unit_struct(name: &'static str)
        deserialize_seq() deserialize_tuple(len: usize)
        deserialize_tuple_struct(name: &'static str, len: usize)
        deserialize_map() deserialize_struct(name: &'static str, fields: &'static [&'static str])
        deserialize_identifier()
    }
}

//! Request templates: literal text with `{{name}}` placeholders, filled from
//! a tool call's arguments and encoded for where they stand (see the crate
//! docs).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

/// What percent-encoding leaves alone: RFC 3986's unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// How a placeholder's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Percent-encoded (URLs and form bodies).
    Percent,
    /// As text (headers and plain bodies).
    Text,
    /// As JSON outside string literals, as escaped text inside them.
    Json,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Literal(String),
    Placeholder {
        /// The argument's path: `city`, or `address.city`, `list.0`.
        path: Vec<String>,
        /// Inside a JSON string literal of the surrounding text.
        in_string: bool,
    },
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses `text`. Errors name the problem and where it is.
    pub(crate) fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        let mut offset = 0;
        while let Some(start) = rest.find("{{") {
            // `{{{x}}}`: the first brace is literal (a JSON object around a
            // placeholder), the placeholder is the inner `{{x}}`.
            let mut start = start;
            while rest[start + 2..].starts_with('{') {
                start += 1;
            }
            let Some(length) = rest[start + 2..].find("}}") else {
                return Err(format!(
                    "unclosed \"{{{{\" at character {}",
                    char_index(text, offset + start)
                ));
            };
            let inner = &rest[start + 2..start + 2 + length];
            let path = parse_path(inner).map_err(|problem| {
                format!(
                    "placeholder \"{{{{{inner}}}}}\" at character {}: {problem}",
                    char_index(text, offset + start)
                )
            })?;
            if start > 0 {
                pieces.push(Piece::Literal(rest[..start].to_owned()));
            }
            pieces.push(Piece::Placeholder {
                path,
                in_string: false,
            });
            let end = start + 2 + length + 2;
            offset += end;
            rest = &rest[end..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Literal(rest.to_owned()));
        }
        let mut template = Template { pieces };
        template.mark_json_strings();
        Ok(template)
    }

    /// The top-level argument names the placeholders use.
    pub(crate) fn arguments(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Placeholder { path, .. } => path.first().map(String::as_str),
            Piece::Literal(_) => None,
        })
    }

    pub(crate) fn has_placeholders(&self) -> bool {
        self.arguments().next().is_some()
    }

    /// The literal text before the first placeholder (all of it if none).
    pub(crate) fn literal_prefix(&self) -> &str {
        match self.pieces.first() {
            Some(Piece::Literal(text)) => text,
            _ => "",
        }
    }

    /// The template filled from `arguments` (absent arguments count as `null`).
    pub(crate) fn render(&self, arguments: &Value, encoding: Encoding) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Placeholder { path, in_string } => {
                    let value = lookup(arguments, path);
                    write_value(&mut out, value, encoding, *in_string);
                }
            }
        }
        out
    }

    /// Marks the placeholders that stand inside a JSON string literal of the
    /// literal text around them.
    fn mark_json_strings(&mut self) {
        let mut in_string = false;
        let mut escaped = false;
        for piece in &mut self.pieces {
            match piece {
                Piece::Literal(text) => {
                    for c in text.chars() {
                        if !in_string {
                            in_string = c == '"';
                        } else if escaped {
                            escaped = false;
                        } else if c == '\\' {
                            escaped = true;
                        } else if c == '"' {
                            in_string = false;
                        }
                    }
                }
                Piece::Placeholder {
                    in_string: inside, ..
                } => *inside = in_string,
            }
        }
    }
}

fn char_index(text: &str, byte: usize) -> usize {
    text[..byte].chars().count() + 1
}

fn parse_path(inner: &str) -> Result<Vec<String>, &'static str> {
    let inner = inner.trim();
    if inner.is_empty() {
        return Err("no argument name");
    }
    inner
        .split('.')
        .map(|segment| {
            let valid = !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if valid {
                Ok(segment.to_owned())
            } else {
                Err("an argument name is letters, digits, `_` and `-`, with `.` between the parts of a path")
            }
        })
        .collect()
}

fn lookup<'a>(arguments: &'a Value, path: &[String]) -> &'a Value {
    let mut value = arguments;
    for segment in path {
        let next = match value {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match next {
            Some(next) => value = next,
            None => return &Value::Null,
        }
    }
    value
}

/// A value as text: strings as they are, `null` as nothing, the rest as JSON.
fn as_text(value: &Value) -> std::borrow::Cow<'_, str> {
    match value {
        Value::String(text) => text.into(),
        Value::Null => "".into(),
        other => other.to_string().into(),
    }
}

fn write_value(out: &mut String, value: &Value, encoding: Encoding, in_string: bool) {
    match encoding {
        Encoding::Percent => out.extend(utf8_percent_encode(&as_text(value), COMPONENT)),
        Encoding::Text => out.push_str(&as_text(value)),
        Encoding::Json if in_string => {
            // The text as a JSON string, without its quotes.
            let quoted = Value::String(as_text(value).into_owned()).to_string();
            out.push_str(&quoted[1..quoted.len() - 1]);
        }
        Encoding::Json => out.push_str(&value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn render(template: &str, arguments: Value, encoding: Encoding) -> String {
        Template::parse(template)
            .unwrap()
            .render(&arguments, encoding)
    }

    #[test]
    fn placeholders_are_found_with_or_without_spaces() {
        let template = Template::parse("a {{x}} b {{ y.z }} c").unwrap();
        assert_eq!(template.arguments().collect::<Vec<_>>(), ["x", "y"]);
        assert_eq!(template.literal_prefix(), "a ");
        assert!(!Template::parse("plain").unwrap().has_placeholders());
    }

    #[test]
    fn url_values_are_percent_encoded() {
        assert_eq!(
            render(
                "https://api.test/w/{{city}}?q={{q}}&n={{n}}",
                json!({"city": "São Paulo/../x", "q": "a&b=c d", "n": 3}),
                Encoding::Percent
            ),
            "https://api.test/w/S%C3%A3o%20Paulo%2F..%2Fx?q=a%26b%3Dc%20d&n=3"
        );
    }

    #[test]
    fn json_values_are_encoded_by_context() {
        let template = r#"{"city": {{city}}, "days": {{days}}, "q": "weather in {{city}}, \"{{days}}\"", "none": {{missing}}, "tags": {{tags}}}"#;
        let body = render(
            template,
            json!({"city": "Pa\"ris", "days": 2, "tags": ["a", "b"]}),
            Encoding::Json,
        );
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap(),
            json!({"city": "Pa\"ris", "days": 2, "q": "weather in Pa\"ris, \"2\"", "none": null, "tags": ["a", "b"]})
        );
    }

    #[test]
    fn nested_paths_and_indexes_are_followed() {
        assert_eq!(
            render(
                "{{a.b}}/{{list.1}}/{{a.missing}}/{{list.x}}",
                json!({"a": {"b": true}, "list": [1, "two"]}),
                Encoding::Text
            ),
            "true/two//"
        );
    }

    #[test]
    fn a_placeholder_may_sit_right_inside_braces() {
        let body = render(r#"{"a":{{{x}}}}"#, json!({"x": 1}), Encoding::Text);
        assert_eq!(body, r#"{"a":{1}}"#);
    }

    #[test]
    fn text_renders_objects_as_json_and_null_as_nothing() {
        assert_eq!(
            render(
                "[{{o}}|{{n}}]",
                json!({"o": {"k": 1}, "n": null}),
                Encoding::Text
            ),
            r#"[{"k":1}|]"#
        );
    }

    #[test]
    fn malformed_placeholders_are_errors() {
        let error = Template::parse("https://x/{{city").unwrap_err();
        assert_eq!(error, "unclosed \"{{\" at character 11");
        let error = Template::parse("a{{ }}").unwrap_err();
        assert!(error.contains("no argument name"), "{error}");
        let error = Template::parse("a{{ a b }}").unwrap_err();
        assert!(
            error.starts_with("placeholder \"{{ a b }}\" at character 2:"),
            "{error}"
        );
        assert!(Template::parse("{{a..b}}").is_err());
    }
}

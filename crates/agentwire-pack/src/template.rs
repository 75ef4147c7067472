//! The `{{variable}}` template syntax (`template_engine.syntax`), with
//! PromptPack's `basic_substitution` and `fragments` features: `{{name}}`
//! (spaces inside the braces allowed) stands for a variable's value or a
//! fragment's text. Nothing else is syntax: no conditionals, loops or
//! filters, so a `{{` that does not open a `{{name}}` is an error rather
//! than text a model would read by surprise.
//!
//! Errors say where (a character offset) and never quote the template: a
//! system prompt is not something to repeat in a log or an error frame.

use std::borrow::Cow;
use std::collections::BTreeMap;

/// A parsed template: text and the names it substitutes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(String),
    Name(String),
}

/// Why a template does not parse: what is wrong, at which character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem} at character {offset}")]
pub struct TemplateError {
    /// Characters from the start of the template.
    pub offset: usize,
    pub problem: &'static str,
}

/// A variable or fragment name: `^[a-zA-Z_][a-zA-Z0-9_]*$`.
pub fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Template {
    /// Parses `text`: every `{{` must open a `{{name}}`.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut segments = Vec::new();
        let mut rest = text;
        let mut consumed = 0;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                segments.push(Segment::Text(rest[..open].to_owned()));
            }
            let at = consumed + rest[..open].chars().count();
            let inner = &rest[open + 2..];
            let Some(close) = inner.find("}}") else {
                return Err(TemplateError {
                    offset: at,
                    problem: "a `{{` without its `}}`",
                });
            };
            let name = inner[..close].trim();
            if !is_name(name) {
                return Err(TemplateError {
                    offset: at,
                    problem: "only `{{name}}` substitution is supported (a name is letters, digits and `_`)",
                });
            }
            segments.push(Segment::Name(name.to_owned()));
            let used = open + 2 + close + 2;
            consumed += rest[..used].chars().count();
            rest = &rest[used..];
        }
        if !rest.is_empty() {
            segments.push(Segment::Text(rest.to_owned()));
        }
        Ok(Template { segments })
    }

    /// The names substituted, each once, in the order they first appear.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for segment in &self.segments {
            if let Segment::Name(name) = segment
                && !names.contains(&name.as_str())
            {
                names.push(name);
            }
        }
        names
    }

    /// The template with each `{{name}}` that names one of `fragments`
    /// replaced by that fragment's own segments (a fragment's `{{...}}`
    /// are variables: fragments do not nest).
    pub fn expand(&self, fragments: &BTreeMap<String, Template>) -> Template {
        let segments = self
            .segments
            .iter()
            .flat_map(|segment| match segment {
                Segment::Name(name) => match fragments.get(name) {
                    Some(fragment) => fragment.segments.clone(),
                    None => vec![segment.clone()],
                },
                Segment::Text(_) => vec![segment.clone()],
            })
            .collect();
        Template { segments }
    }

    /// The text with every name replaced by `value(name)`; the first name
    /// without a value is the error.
    pub fn render<'v>(
        &self,
        value: impl Fn(&str) -> Option<Cow<'v, str>>,
    ) -> Result<String, String> {
        let mut out = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Text(text) => out.push_str(text),
                Segment::Name(name) => match value(name) {
                    Some(text) => out.push_str(&text),
                    None => return Err(name.clone()),
                },
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(template: &Template, pairs: &[(&str, &str)]) -> Result<String, String> {
        template.render(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| Cow::Owned((*v).to_owned()))
        })
    }

    #[test]
    fn names_are_substituted_with_or_without_spaces() {
        let template =
            Template::parse("You are {{persona}}; {{ persona }} speaks {{lang}}.").unwrap();
        assert_eq!(template.names(), ["persona", "lang"]);
        assert_eq!(
            fill(&template, &[("persona", "Ada"), ("lang", "en")]).unwrap(),
            "You are Ada; Ada speaks en."
        );
        assert_eq!(fill(&template, &[("persona", "Ada")]).unwrap_err(), "lang");
    }

    #[test]
    fn anything_but_a_name_in_braces_is_refused_with_its_offset_not_its_text() {
        for (text, offset) in [
            ("ok {{#if x}}", 3),
            ("ok {{x | upper}}", 3),
            ("é{{unclosed", 1),
            ("{{}}", 0),
            ("{{1abc}}", 0),
        ] {
            let error = Template::parse(text).unwrap_err();
            assert_eq!(error.offset, offset, "{text}");
            assert!(!error.to_string().contains("abc"), "{error}");
        }
        // A lone `}}` is text.
        assert_eq!(
            fill(&Template::parse("a }} b").unwrap(), &[]).unwrap(),
            "a }} b"
        );
    }

    #[test]
    fn fragments_expand_into_their_variables() {
        let fragment = Template::parse("Customer: {{customer}}").unwrap();
        let fragments = BTreeMap::from([("context".to_owned(), fragment)]);
        let template = Template::parse("Hi. {{context}}!")
            .unwrap()
            .expand(&fragments);
        assert_eq!(template.names(), ["customer"]);
        assert_eq!(
            fill(&template, &[("customer", "Bo")]).unwrap(),
            "Hi. Customer: Bo!"
        );
    }
}

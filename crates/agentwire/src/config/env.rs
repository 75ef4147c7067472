//! `${VAR}` and `${VAR:default}` substitution in the config text. `$${` is a
//! literal `${`.

use super::ConfigError;

pub(super) fn substitute(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        if let Some(literal) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = literal;
            continue;
        }
        let Some(body) = after.strip_prefix("${") else {
            out.push('$');
            rest = &after[1..];
            continue;
        };
        let end = body
            .find('}')
            .ok_or_else(|| ConfigError::new("config", "unterminated `${` in the config text"))?;
        let (name, default) = match body[..end].split_once(':') {
            Some((name, default)) => (name, Some(default)),
            None => (&body[..end], None),
        };
        let valid_name =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_name {
            return Err(ConfigError::new(
                "config",
                format!("invalid variable name {name:?} in `${{...}}`"),
            ));
        }
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(ConfigError::new(
                    format!("${{{name}}}"),
                    "environment variable is not set and has no default",
                ));
            }
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "PORT").then(|| "9000".to_owned())
    }

    #[test]
    fn substitutes_values_and_defaults() {
        let out = substitute("a: ${PORT}\nb: ${MISSING:x y}\nc: $5 $${PORT}", env).unwrap();
        assert_eq!(out, "a: 9000\nb: x y\nc: $5 ${PORT}");
    }

    #[test]
    fn missing_variable_is_named() {
        let err = substitute("a: ${NOPE}", env).unwrap_err();
        assert_eq!(err.key, "${NOPE}");
    }

    #[test]
    fn malformed_references_fail() {
        assert!(substitute("a: ${PORT", env).is_err());
        assert!(substitute("a: ${}", env).is_err());
        assert!(substitute("a: ${A-B}", env).is_err());
    }
}

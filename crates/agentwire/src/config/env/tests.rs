//! Unit tests of substitution in values: comments and keys are left alone,
//! plain values keep their YAML type, quoted and block values stay text,
//! and errors name the key path and the line.

use serde_json::{Value, json};

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "PORT" => Some("9000".to_owned()),
        "FLAG" => Some("true".to_owned()),
        "YES" => Some("yes".to_owned()),
        "NEGATIVE" => Some("-5".to_owned()),
        "DASH" => Some("-".to_owned()),
        "TRICKY" => Some("a: b # not a comment, \"quoted\"\n- not a list".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn load(text: &str) -> Result<Value, ConfigError> {
    match parse(text, &env) {
        Ok((tree, _)) => Ok(tree),
        Err(LoadError::At(e)) => Err(e),
        Err(LoadError::Yaml(e)) => panic!("not YAML: {e}"),
    }
}

#[test]
fn references_in_comments_are_not_substituted() {
    let tree = load(
        "# api_key: ${NOT_SET_ANYWHERE}\nproviders:\n  - name: local   # or ${ALSO_NOT_SET}\n    # api_key: ${NOT_SET_ANYWHERE}  # trailing\n    model: llama3.2\n",
    )
    .unwrap();
    assert_eq!(
        tree,
        json!({"providers": [{"name": "local", "model": "llama3.2"}]})
    );
}

#[test]
fn plain_values_keep_their_yaml_type_and_quoted_values_stay_text() {
    let tree = load(concat!(
        "port: ${PORT}\n",
        "quoted_port: \"${PORT}\"\n",
        "single: '${PORT}'\n",
        "flag: ${FLAG}\n",
        "yes_flag: ${YES}\n",
        "written_yes: yes\n",
        "negative: ${NEGATIVE}\n",
        "dash: ${DASH}\n",
        "embedded: http://127.0.0.1:${PORT}/v1\n",
        "number_built: 1${PORT}\n",
        "defaulted: ${MISSING:30s}\n",
        "default_with_colons: ${MISSING:http://a:8080/x}\n",
        "empty_plain: ${EMPTY}\n",
        "empty_quoted: \"${EMPTY}\"\n",
        "literal: $${PORT} costs $5\n",
        "flow: {a: ${PORT}, b: [x, \"${PORT}\"]}\n",
        "block: |\n  port ${PORT}\n  done\n",
    ))
    .unwrap();
    assert_eq!(
        tree,
        json!({
            "port": 9000,
            "quoted_port": "9000",
            "single": "9000",
            "flag": true,
            "yes_flag": serde_saphyr::from_str::<Value>("yes").unwrap(),
            "written_yes": serde_saphyr::from_str::<Value>("yes").unwrap(),
            "negative": -5,
            "dash": "-",
            "embedded": "http://127.0.0.1:9000/v1",
            "number_built": 19000,
            "defaulted": "30s",
            "default_with_colons": "http://a:8080/x",
            "empty_plain": null,
            "empty_quoted": "",
            "literal": "${PORT} costs $5",
            "flow": {"a": 9000, "b": ["x", "9000"]},
            "block": "port 9000\ndone\n",
        })
    );
}

#[test]
fn unquoted_references_parse_inside_flow_collections() {
    let tree =
        load("a: {port: ${PORT}, url: http://h:${PORT}/x, list: [${PORT}, $${PORT}]}\n").unwrap();
    assert_eq!(
        tree,
        json!({"a": {"port": 9000, "url": "http://h:9000/x", "list": [9000, "${PORT}"]}})
    );
}

#[test]
fn yaml_errors_are_about_the_text_as_written() {
    let Err(LoadError::Yaml(message)) = parse("a: ${PORT}\nb: [unclosed\n", &env) else {
        panic!("not YAML");
    };
    assert!(!message.contains('\u{E000}'), "{message}");
}

#[test]
fn a_substituted_value_never_becomes_yaml_structure() {
    let tree = load("plain: ${TRICKY}\nquoted: \"x ${TRICKY}\"\n").unwrap();
    let tricky = env("TRICKY").unwrap();
    assert_eq!(
        tree,
        json!({"plain": tricky, "quoted": format!("x {tricky}")})
    );
}

#[test]
fn an_unset_variable_names_the_key_path_and_the_line() {
    let err = load(
        "agents:\n  - name: a\n  - name: b\n    provider:\n      api_key: \"Bearer ${NOPE}\"\n",
    )
    .unwrap_err();
    assert_eq!(err.key, "agents[1].provider.api_key");
    assert_eq!(
        err.message,
        "${NOPE}: environment variable is not set and has no default (line 5)"
    );
}

#[test]
fn references_in_keys_are_refused() {
    let err = load("tools:\n  - env:\n      ${NAME}: x\n").unwrap_err();
    assert_eq!(err.key, "tools[0].env.${NAME}");
    assert!(err.message.contains("values only"), "{}", err.message);
    // An escaped `$${` in a key is no reference.
    assert!(load("env:\n  $${NAME}: x\n").is_ok());
}

#[test]
fn malformed_references_fail_at_their_key() {
    for (text, message) in [
        ("a: ${PORT", "unterminated"),
        ("a: ${}", "invalid variable name"),
        ("a: ${A-B}", "invalid variable name"),
    ] {
        let err = load(text).unwrap_err();
        assert_eq!(err.key, "a", "{text}");
        assert!(err.message.contains(message), "{text}: {}", err.message);
    }
}

#[test]
fn errors_about_a_substituted_value_show_the_reference_not_the_value() {
    let secret = |name: &str| (name == "SECRET").then(|| "hunter2-value".to_owned());
    let Ok((_, written)) = parse("listen: ${SECRET}\n", &secret) else {
        panic!("parses");
    };
    let error = ConfigError::new("listen", "not a socket address: \"hunter2-value\"");
    let redacted = written.redact(error);
    assert_eq!(redacted.message, "not a socket address: \"${SECRET}\"");
    let other = written.redact(ConfigError::new("other", "hunter2-value"));
    assert_eq!(other.message, "hunter2-value");
}

/// Found by the `config` fuzz target: a file that is one scalar showed the
/// substituted value in its error (the root is `.` to the deserializer and
/// `""` to the substitution), and so did a value that the error's `{:?}`
/// escapes.
#[test]
fn a_file_that_is_one_substituted_scalar_shows_the_reference_not_the_value() {
    let secret = |name: &str| (name == "SECRET").then(|| "hunter2-value".to_owned());
    // The second: a value the error quotes escaped (`\u{feff}`).
    for text in ["${SECRET}\n", "\"x\u{feff} ${SECRET}\"\n"] {
        let error = crate::config::parse(text, secret).unwrap_err();
        assert_eq!(error.key, "config", "{text}");
        assert!(!error.message.contains("hunter2-value"), "{text}: {error}");
        assert!(error.message.contains("${SECRET}"), "{text}: {error}");
    }
}

//! Unit tests of substitution in values: comments and keys are left alone,
//! a substituted value is the text it was unless its field asks for a number
//! or a boolean (and then only a plain one is read as one), and errors name
//! the key path, the line and the reference, never the value.

use serde::Deserialize;
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

/// The file as a field that takes anything reads it: substituted values as
/// their text.
fn load(text: &str) -> Result<Value, ConfigError> {
    load_as(text)
}

/// The file read as `T`.
fn load_as<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    match parse(text, &env) {
        Ok((tree, _)) => deserialize(tree, "root"),
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
fn a_substituted_value_is_the_text_it_was() {
    let tree = load(concat!(
        "port: ${PORT}\n",
        "quoted_port: \"${PORT}\"\n",
        "single: '${PORT}'\n",
        "flag: ${FLAG}\n",
        "negative: ${NEGATIVE}\n",
        "dash: ${DASH}\n",
        "embedded: http://127.0.0.1:${PORT}/v1\n",
        "number_built: 1${PORT}\n",
        "defaulted: ${MISSING:30s}\n",
        "default_with_colons: ${MISSING:http://a:8080/x}\n",
        "hex: ${MISSING:0x1F}\n",
        "exponent: ${MISSING:1e5}\n",
        "empty_quoted: \"${EMPTY}\"\n",
        "literal: $${PORT} costs $5\n",
        "written_yes: yes\n",
        "written_port: 9000\n",
        "flow: {a: ${PORT}, b: [x, \"${PORT}\"]}\n",
        "block: |\n  port ${PORT}\n  done\n",
    ))
    .unwrap();
    assert_eq!(
        tree,
        json!({
            "port": "9000",
            "quoted_port": "9000",
            "single": "9000",
            "flag": "true",
            "negative": "-5",
            "dash": "-",
            "embedded": "http://127.0.0.1:9000/v1",
            "number_built": "19000",
            "defaulted": "30s",
            "default_with_colons": "http://a:8080/x",
            "hex": "0x1F",
            "exponent": "1e5",
            "empty_quoted": "",
            "literal": "${PORT} costs $5",
            "written_yes": serde_saphyr::from_str::<Value>("yes").unwrap(),
            "written_port": 9000,
            "flow": {"a": "9000", "b": ["x", "9000"]},
            "block": "port 9000\ndone\n",
        })
    );
}

/// Fields of every kind, for the reading a field's type decides.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Fields {
    text: Option<String>,
    count: Option<u32>,
    signed: Option<i64>,
    ratio: Option<f64>,
    flag: Option<bool>,
    kind: Option<Kind>,
    list: Option<Vec<u16>>,
    #[serde(default)]
    by_number: std::collections::BTreeMap<u32, String>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Mock,
    Openai,
}

fn fields(text: &str) -> Fields {
    load_as(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn a_text_field_takes_any_value_as_written() {
    let lookup = |value: &'static str| move |_: &str| Some(value.to_owned());
    for value in [
        "12345", "1e5", "0x1F", "true", "yes", "~", "null", "-5", "0o17", ".inf",
    ] {
        let (tree, _) = parse("text: ${KEY}\n", &lookup(value)).unwrap_or_else(|_| panic!());
        let read: Fields = deserialize(tree, "root").unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(read.text.as_deref(), Some(value));
    }
}

#[test]
fn a_number_or_boolean_field_reads_a_plain_value_as_one() {
    let read = fields(concat!(
        "count: ${PORT}\n",
        "signed: ${NEGATIVE}\n",
        "ratio: ${MISSING:1e5}\n",
        "flag: ${YES}\n",
        "kind: ${MISSING:mock}\n",
        "list: [${PORT}, 1${MISSING:2}]\n",
        "by_number: {1: ${PORT}}\n",
    ));
    assert_eq!(
        read,
        Fields {
            text: None,
            count: Some(9000),
            signed: Some(-5),
            ratio: Some(100_000.0),
            flag: Some(true),
            kind: Some(Kind::Mock),
            list: Some(vec![9000, 12]),
            by_number: [(1, "9000".to_owned())].into(),
        }
    );
    assert_eq!(fields("flag: ${FLAG}\n").flag, Some(true));
    assert_eq!(fields("ratio: ${PORT}\n").ratio, Some(9000.0));
    // An empty plain value is no value; a quoted one is the empty text.
    assert_eq!(fields("count: ${EMPTY}\ntext: ${EMPTY}\n").count, None);
    assert_eq!(fields("text: \"${EMPTY}\"\n").text.as_deref(), Some(""));
}

/// What a substituted value is refused as: the error names the key and
/// the reference, says what was expected, and shows no form of the value.
fn refused(text: &str, value: &str) -> ConfigError {
    let lookup = |_: &str| Some(value.to_owned());
    let (tree, _) = parse(text, &lookup).unwrap_or_else(|_| panic!("{text}: parses"));
    deserialize::<Fields>(tree, "root").expect_err(text)
}

#[test]
fn a_value_a_field_cannot_read_is_refused_without_the_value() {
    for (value, forms) in [
        ("1e5", &["1e5", "100000"][..]),
        ("0x1F", &["0x1F", "31"]),
        ("abc", &["abc"]),
        ("1.5", &["1.5"]),
        ("-7", &["-7"]),
        ("99999999999999999999999", &["99999", "1e"]),
        ("maybe", &["maybe"]),
    ] {
        for (text, key, expected) in [
            ("count: ${N}\n", "count", "expected u32"),
            ("flag: ${N}\n", "flag", "expected a boolean"),
            ("kind: ${N}\n", "kind", "expected `mock` or `openai`"),
            ("list: [1, ${N}]\n", "list[1]", "expected u16"),
        ] {
            let error = refused(text, value);
            assert_eq!(error.key, key, "{text} {value}: {error}");
            assert!(error.message.contains("`${N}`"), "{value}: {error}");
            assert!(error.message.contains(expected), "{value}: {error}");
            for form in forms {
                assert!(!error.message.contains(form), "{value}: {error}");
            }
        }
    }
}

#[test]
fn a_quoted_value_stays_text_for_a_number_field() {
    let error = refused("count: \"${N}\"\n", "25");
    assert_eq!(error.key, "count");
    assert_eq!(
        error.message,
        "invalid type: string from `${N}`, expected u32"
    );
    assert!(
        refused("flag: '${N}'\n", "true")
            .message
            .contains("expected a boolean")
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
    // An escaped `$${` in a key is no reference: the key is a literal `${`.
    assert_eq!(
        load("env:\n  $${NAME}: x\n  other: ${PORT}\n").unwrap(),
        json!({"env": {"${NAME}": "x", "other": "9000"}})
    );
    assert_eq!(
        load("env:\n  $${NAME}: x\n").unwrap(),
        json!({"env": {"${NAME}": "x"}})
    );
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

/// The defect of issue 32, through the whole loader: an API key is the text
/// the variable holds, whatever it looks like; a number field still reads
/// a number.
#[test]
fn an_api_key_is_the_variables_text_and_a_limit_its_number() {
    // Validating a provider builds its HTTP client (no request is made).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let text = concat!(
        "server:\n  limits:\n    max_connections: ${N}\n",
        "providers:\n  - {name: p, type: openai, model: m, api_key: ${KEY}}\n",
        "agents: [{name: a, handler: runtime, provider: p}]\n",
    );
    for key in ["12345", "1e5", "0x1F", "true", "-0"] {
        let lookup = |name: &str| match name {
            "KEY" => Some(key.to_owned()),
            "N" => Some("100".to_owned()),
            _ => None,
        };
        let config = crate::config::parse(text, lookup).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(config.limits.max_connections, 100);
        let agentwire_providers::ProviderKind::OpenAi {
            api_key: Some(api_key),
            ..
        } = &config.providers[0].kind
        else {
            panic!("an openai provider with a key");
        };
        assert_eq!(api_key.expose(), key);
    }
}

/// A type's own check fails after the value was read (a duration's): its
/// message names the reference where it quoted the value, and keeps its
/// own words even where they contain the value (`30` in "30s").
#[test]
fn a_types_own_check_names_the_reference() {
    for value in ["30", "hunter2 s"] {
        let lookup = |_: &str| Some(value.to_owned());
        let text =
            "server:\n  limits:\n    ping_interval: ${PING}\nagents: [{name: a, handler: echo}]\n";
        let error = crate::config::parse(text, lookup).unwrap_err();
        assert_eq!(error.key, "server.limits.ping_interval");
        assert!(
            error
                .message
                .starts_with("invalid duration \"${PING}\": write an integer"),
            "{error}"
        );
        assert!(
            error.message.contains("such as 500ms, 30s or 24h"),
            "{error}"
        );
        assert!(!error.message.contains(&format!("{value:?}")), "{error}");
        assert!(!error.message.contains("hunter2"), "{error}");
    }
}

/// A check of a whole entry (a provider built from its settings) may quote
/// a value inside it: the reference is shown there too.
#[test]
fn an_error_about_an_entry_hides_the_values_inside_it() {
    let written = Written {
        by_path: [(
            "providers[0].base_url".to_owned(),
            ("${URL}".to_owned(), "ftp://hunter2.example".to_owned()),
        )]
        .into(),
    };
    for key in ["providers[0]", "providers[0].base_url"] {
        let error = ConfigError::new(key, "unsupported URL ftp://hunter2.example (ftp)");
        assert_eq!(
            written.redact(error).message,
            "unsupported URL ${URL} (ftp)"
        );
    }
    let other = ConfigError::new("providers[1]", "ftp://hunter2.example");
    assert_eq!(written.redact(other).message, "ftp://hunter2.example");
}

/// A short value inside a longer word is the message's own text; a long
/// one is hidden wherever it stands.
#[test]
fn a_long_value_is_hidden_even_inside_a_word() {
    assert_eq!(
        hide_value("bad \"30\": such as 30s or 30", "30", "${P}"),
        "bad \"${P}\": such as 30s or ${P}"
    );
    assert_eq!(
        hide_value("token xsk-0123456789y", "sk-0123456789", "${KEY}"),
        "token x${KEY}y"
    );
}

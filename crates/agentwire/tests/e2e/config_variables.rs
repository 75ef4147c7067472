//! `${VAR}` through the built binary (issue 32): a substituted value is the
//! text the variable holds unless its field asks for a number, and an error
//! about one names the key and the reference, never the value.

use std::process::Output;

use serde_json::Value;

use crate::config_errors::{agentwire, write_config};

/// `check-config` (with `--print` when `print`) on `text` with `vars` set.
fn check_config_with(text: &str, vars: &[(&str, &str)], print: bool) -> Output {
    let (_dir, path) = write_config(text);
    let mut command = agentwire();
    command.arg("check-config").arg("--config").arg(&path);
    if print {
        command.arg("--print");
    }
    for (name, value) in vars {
        command.env(name, value);
    }
    command.output().expect("the binary runs")
}

/// An OpenAI provider whose API key is `${AGENTWIRE_TEST_API_KEY}`, and an
/// agent whose memory facet (shown by `--print`) is `${AGENTWIRE_TEST_TEXT}`.
const API_KEY_CONFIG: &str = "\
providers:
  - name: p
    type: openai
    model: m
    api_key: ${AGENTWIRE_TEST_API_KEY}
agents:
  - name: a
    handler: runtime
    provider: p
    memory_facet: ${AGENTWIRE_TEST_TEXT}
";

#[tokio::test]
async fn an_api_key_is_taken_as_the_text_its_variable_holds() {
    for value in ["12345", "1e5", "0x1F", "true"] {
        let vars = [
            ("AGENTWIRE_TEST_API_KEY", value),
            ("AGENTWIRE_TEST_TEXT", value),
        ];
        let output = check_config_with(API_KEY_CONFIG, &vars, false);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{value}: {stderr}");

        // The same value in a text field the printout shows: the text as
        // the variable holds it, not a number or a boolean made of it. (The
        // printout hides any text with the API key's value in it.)
        let vars = [
            ("AGENTWIRE_TEST_API_KEY", "sk-another"),
            ("AGENTWIRE_TEST_TEXT", value),
        ];
        let output = check_config_with(API_KEY_CONFIG, &vars, true);
        assert_eq!(output.status.code(), Some(0), "{value}");
        let printed: Value =
            serde_saphyr::from_str(&String::from_utf8_lossy(&output.stdout)).expect("YAML");
        assert_eq!(
            printed["agents"][0]["memory_facet"],
            Value::String(value.to_owned()),
            "{value}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}

/// `max_connections`, a number, from `${AGENTWIRE_TEST_N}`.
const NUMBER_CONFIG: &str = "\
server:
  limits:
    max_connections: ${AGENTWIRE_TEST_N}
agents:
  - name: a
    handler: echo
";

#[tokio::test]
async fn a_number_field_reads_its_variable_as_a_number() {
    let output = check_config_with(NUMBER_CONFIG, &[("AGENTWIRE_TEST_N", "100")], true);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Value =
        serde_saphyr::from_str(&String::from_utf8_lossy(&output.stdout)).expect("YAML");
    assert_eq!(printed["server"]["limits"]["max_connections"], 100);
}

#[tokio::test]
async fn a_number_field_refuses_what_is_no_number_without_showing_it() {
    for value in ["1e5", "0x1F", "abc"] {
        let output = check_config_with(NUMBER_CONFIG, &[("AGENTWIRE_TEST_N", value)], false);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(64), "{value}: {stderr}");
        assert!(
            stderr.starts_with("config error: server.limits.max_connections: "),
            "{value}: {stderr}"
        );
        assert!(
            stderr.contains("`${AGENTWIRE_TEST_N}`"),
            "{value}: {stderr}"
        );
        assert!(stderr.contains("expected usize"), "{value}: {stderr}");
        for form in ["1e5", "100000", "0x1F", "0x1f", "31", "abc"] {
            assert!(!stderr.contains(form), "{value} shown as {form}: {stderr}");
        }
        assert!(output.stdout.is_empty(), "{value}");
    }
}

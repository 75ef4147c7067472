//! The configurations in `examples/` load as written, and `check-config
//! --print` shows a configuration without its secrets.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::config_errors::{agentwire, write_config};
use crate::support::repo_root;

/// A value every variable an example needs can take: 64 hex digits, so it is
/// also a SHA-256 (`auth.api_keys[].sha256`) and long enough for a key.
const DUMMY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Every `*.yaml` directly in `examples/` (team files live in a folder of
/// their own), so a new example is covered without a change here.
fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("examples"))
        .expect("examples/ is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    files
}

/// The variables `text` refers to as `${NAME}` (needed) and
/// `${NAME:default}` (optional), from its values and from comments alike.
fn variables(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut needed, mut optional) = (Vec::new(), Vec::new());
    for (i, _) in text.match_indices("${") {
        if i > 0 && text.as_bytes()[i - 1] == b'$' {
            continue;
        }
        let Some(end) = text[i + 2..].find('}') else {
            continue;
        };
        let reference = &text[i + 2..i + 2 + end];
        let (name, list) = match reference.split_once(':') {
            Some((name, _)) => (name, &mut optional),
            None => (reference, &mut needed),
        };
        if !list.iter().any(|n| n == name) {
            list.push(name.to_owned());
        }
    }
    (needed, optional)
}

/// `check-config` (with `extra` arguments) on `path`, run from the
/// repository root as the examples' headers say, with every needed variable
/// set to [`DUMMY`] and every optional one unset.
fn check_example(path: &Path, extra: &[&str]) -> Output {
    let text = std::fs::read_to_string(path).expect("the example is readable");
    let (needed, optional) = variables(&text);
    let mut command = agentwire();
    command.current_dir(repo_root());
    for name in &optional {
        command.env_remove(name);
    }
    for name in &needed {
        command.env(name, DUMMY);
    }
    // A team file's variables are the team's example's too.
    for team in std::fs::read_dir(repo_root().join("examples/teams"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let (needed, optional) = variables(&std::fs::read_to_string(team.path()).unwrap());
        for name in optional {
            command.env_remove(name);
        }
        for name in needed {
            command.env(name, DUMMY);
        }
    }
    command
        .args(["check-config", "--config"])
        .arg(path)
        .args(extra)
        .output()
        .expect("the binary runs")
}

/// Each example passes `check-config` and prints with `--print`. Loading
/// builds the providers' HTTP clients and the tools' settings but connects
/// to nothing (no model, MCP server, JWKS or bucket is contacted), so this
/// needs no network.
#[test]
fn every_example_passes_check_config() {
    let files = example_files();
    assert!(files.len() >= 7, "examples/ holds {files:?}");
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.starts_with('#') && text.contains("Run it"),
            "{} starts with a comment saying how to run it",
            path.display()
        );
        for extra in [&[][..], &["--print"][..]] {
            let output = check_example(path, extra);
            assert_eq!(
                output.status.code(),
                Some(0),
                "{} {extra:?}: stderr: {}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

/// A config whose secrets all come from the environment (or, for S3, from
/// the AWS variables), beside values that are no secret.
const SECRETS_CONFIG: &str = r#"
server:
  listen: ${LISTEN_AT}
auth:
  pseudonym_key: ${PSEUDONYM}
  api_keys:
    - {id: web, sha256: "${KEY_HASH}", subject: web}
  jwt: {issuer: "https://login.test/", audience: agentwire, hs256_secret: "${JWT_HS256}"}
providers:
  - {name: model, type: openai, model: m, api_key: "${PROVIDER_KEY}"}
  - {name: other, type: anthropic, model: m, api_key_env: OTHER_PROVIDER_KEY}
tools:
  - name: weather
    type: http
    parameters: {type: object, properties: {city: {type: string}}}
    request:
      method: GET
      url: "https://weather.test/{{city}}?key=${WEATHER_API_KEY}"
      headers: {Authorization: "Bearer ${WEATHER_BEARER}"}
  - name: remote
    type: mcp
    url: https://mcp.test/mcp
    headers: {X-Api-Token: "${MCP_TOKEN}"}
storage:
  media: {backend: s3, bucket: media, endpoint: "http://127.0.0.1:9"}
agents:
  - {name: assistant, handler: runtime, provider: model, tools: [weather, remote],
     password_argon2: "${AGENT_PASSWORD_HASH}"}
"#;

/// The environment's secrets for [`SECRETS_CONFIG`]: none may be printed.
const SECRETS: [(&str, &str); 10] = [
    ("PSEUDONYM", "pseudonym-secret-4b1d9e"),
    (
        "KEY_HASH",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ),
    ("JWT_HS256", "hs256-secret-77c3a1"),
    ("PROVIDER_KEY", "sk-provider-secret-5e2f"),
    ("OTHER_PROVIDER_KEY", "sk-ant-other-secret-1a2b"),
    ("WEATHER_API_KEY", "weather-secret-93aa"),
    ("WEATHER_BEARER", "bearer-secret-0c1d"),
    ("MCP_TOKEN", "mcp-secret-6f6f"),
    (
        "AGENT_PASSWORD_HASH",
        "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$0mNZ3mG5uF2n7k6XQnNPbSx3HkFZ1rJwd+8v0Q8xqQE",
    ),
    ("AWS_SECRET_ACCESS_KEY", "aws-secret-key-88e1"),
];

/// `check-config --print` on `path` with [`SECRETS`] and the values that
/// are no secret in its environment.
fn print_with_secrets(path: &Path) -> Output {
    let mut command = agentwire();
    command
        .env("LISTEN_AT", "127.0.0.1:18081")
        .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE");
    for (name, value) in SECRETS {
        command.env(name, value);
    }
    command
        .args(["check-config", "--print", "--config"])
        .arg(path)
        .output()
        .expect("the binary runs")
}

/// `--print` shows the effective configuration: values substituted from the
/// environment and the defaults the file left out, but no secret, however
/// it reached the file.
#[test]
fn print_shows_the_effective_config_without_secrets() {
    let (_dir, path) = write_config(SECRETS_CONFIG);
    let output = print_with_secrets(&path);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for (name, value) in SECRETS {
        assert!(!stdout.contains(value), "{name}'s value printed:\n{stdout}");
    }
    assert!(stdout.contains("<redacted>"), "{stdout}");
    for shown in [
        "listen: 127.0.0.1:18081",
        "max_connections: 500",
        "ping_interval: 30s",
        "context_ttl: 24h",
        "bucket: media",
        "issuer: https://login.test/",
        "api_key_env: OTHER_PROVIDER_KEY",
    ] {
        assert!(stdout.contains(shown), "{shown:?} missing:\n{stdout}");
    }
    // What is printed is YAML.
    let _: serde_json::Value = serde_saphyr::from_str(&stdout).expect("--print writes YAML");
}

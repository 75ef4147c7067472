//! `agentwire check-config --print`: the effective configuration, as the
//! loader read it (after `${VAR}` substitution and with every default the
//! file's structs fill in), with its secrets replaced by `"<redacted>"`.

use serde_json::Value;

use super::{ConfigError, env, raw};

/// What a secret is printed as.
pub const REDACTED: &str = "<redacted>";

/// Keys whose values are secrets wherever they appear.
const SECRET_KEYS: [&str; 5] = [
    "api_key",
    "sha256",
    "password_argon2",
    "hs256_secret",
    "pseudonym_key",
];

/// Keys whose string values are secrets when their last word (`_`- or
/// `-`-separated) is one of these: `hs256_secret`, `pseudonym_key`,
/// `access_token`; not `first_token_timeout` or `api_key_env`.
const SECRET_WORDS: [&str; 8] = [
    "secret",
    "password",
    "token",
    "credential",
    "credentials",
    "passwd",
    "key",
    "hash",
];

/// Maps whose every value may carry a credential (`Authorization`, an MCP
/// server's environment).
const SECRET_MAPS: [&str; 2] = ["headers", "env"];

/// The effective configuration of `text` as YAML. `text` must be a valid
/// configuration (the same checks as [`super::parse`] run first).
pub fn effective_yaml(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    super::parse(text, &lookup)?;
    let (tree, written) = env::parse(text, &lookup).map_err(|e| match e {
        env::LoadError::Yaml(e) => ConfigError::new("config", format!("invalid YAML: {e}")),
        env::LoadError::At(e) => e,
    })?;
    let file: raw::File = env::deserialize(tree, "config")?;
    let mut value = serde_json::to_value(&file)
        .map_err(|e| ConfigError::new("config", format!("cannot print: {e}")))?;
    let secrets = written.secret_values();
    redact(&mut value, None, &secrets);
    drop_nulls(&mut value);
    serde_saphyr::to_string(&value)
        .map_err(|e| ConfigError::new("config", format!("cannot print: {e}")))
}

/// Reads `path` and prints its effective configuration, resolving `${VAR}`
/// from the process environment.
pub fn load_effective_yaml(path: &std::path::Path) -> Result<String, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new("--config", format!("cannot read {}: {e}", path.display()))
    })?;
    effective_yaml(&text, |name| std::env::var(name).ok())
}

fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let last = key.rsplit(['_', '-']).next().unwrap_or(&key);
    SECRET_KEYS.contains(&key.as_str()) || SECRET_WORDS.contains(&last)
}

/// Replaces, in place: the value of every secret key; every value of a
/// `headers` or `env` map; every string that is, or contains, a value
/// substituted from a variable whose name reads like a secret; and the
/// password of any URL (`postgres://user:PASSWORD@host/db`,
/// `?password=…`), the rest of the URL kept.
fn redact(value: &mut Value, key: Option<&str>, secrets: &[&str]) {
    match value {
        Value::Null => {}
        Value::String(text) => {
            let secret_key = key.is_some_and(is_secret_key);
            if secret_key || secrets.iter().any(|secret| text.contains(secret)) {
                *value = Value::String(REDACTED.to_owned());
            } else if text.contains("://") {
                let redacted = agentwire_store::redact_url(text);
                if redacted != *text {
                    *value = Value::String(redacted);
                }
            }
        }
        Value::Number(_) | Value::Bool(_) => {
            if key.is_some_and(|k| SECRET_KEYS.contains(&k)) {
                *value = Value::String(REDACTED.to_owned());
            }
        }
        Value::Array(items) => {
            for item in items {
                redact(item, key, secrets);
            }
        }
        Value::Object(map) => {
            let whole = key.is_some_and(|k| SECRET_MAPS.contains(&k));
            for (k, item) in map.iter_mut() {
                if whole && !item.is_null() {
                    *item = Value::String(REDACTED.to_owned());
                } else {
                    redact(item, Some(k), secrets);
                }
            }
        }
    }
}

/// Leaves out the keys that are not set (`null`), as a file would.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, item| !item.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn print(text: &str, vars: &[(&str, &str)]) -> String {
        // Validating a provider builds its HTTP client (no request is made).
        let _ = rustls::crypto::ring::default_provider().install_default();
        effective_yaml(text, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
        .expect("valid config")
    }

    #[test]
    fn defaults_are_filled_in() {
        let out = print("agents: [{name: a, handler: echo}]\n", &[]);
        for expected in [
            "listen: 127.0.0.1:8080",
            "sessions: sqlite://./data/agentwire.db",
            "max_connections: 500",
            "ping_interval: 30s",
            "context_ttl: 24h",
            "backend: none",
        ] {
            assert!(out.contains(expected), "{expected:?} missing from\n{out}");
        }
    }

    #[test]
    fn secrets_are_redacted() {
        let text = r#"
auth:
  pseudonym_key: ${PSEUDONYM}
  api_keys:
    - {id: web, sha256: "4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a4f1c2b3a", subject: u}
  jwt: {issuer: i, audience: a, hs256_secret: "${JWT_SECRET}"}
providers:
  - {name: p, type: openai, model: m, api_key: "${OPENAI_API_KEY}"}
tools:
  - name: weather
    type: http
    request:
      method: GET
      url: "https://weather.test/v1/{{city}}?key=${WEATHER_KEY}"
      headers: {Authorization: "Bearer ${WEATHER_TOKEN}"}
    parameters: {type: object, properties: {city: {type: string}}}
agents: [{name: a, handler: runtime, provider: p, tools: [weather]}]
"#;
        let secrets = [
            ("PSEUDONYM", "pseudonym-0123456789"),
            ("JWT_SECRET", "jwt-secret-0123456789"),
            ("OPENAI_API_KEY", "sk-openai-0123456789"),
            ("WEATHER_KEY", "weather-key-0123456789"),
            ("WEATHER_TOKEN", "weather-token-0123456789"),
        ];
        let out = print(text, &secrets);
        for (_, secret) in secrets {
            assert!(!out.contains(secret), "{secret} printed:\n{out}");
        }
        assert!(!out.contains("4f1c2b3a4f1c"), "sha256 printed:\n{out}");
        assert!(out.contains(REDACTED), "{out}");
        assert!(out.contains("issuer: i"), "{out}");
    }

    #[test]
    fn a_postgres_urls_password_is_redacted_and_the_rest_shown() {
        let text = "storage:\n  sessions: postgres://aw:pg-s3cret-0123@db.internal:5432/agentwire?sslmode=prefer\n  postgres: {pool_size: 8}\nagents: [{name: a, handler: echo}]\n";
        let out = print(text, &[]);
        assert!(!out.contains("pg-s3cret-0123"), "{out}");
        assert!(
            out.contains("postgres://aw:<redacted>@db.internal:5432/agentwire?sslmode=prefer"),
            "{out}"
        );
        assert!(out.contains("pool_size: 8"), "{out}");
        assert!(out.contains("statement_timeout: 30s"), "{out}");

        let text = "storage:\n  sessions: postgresql:///agentwire?host=/run/pg&password=pg-s3cret-0123\nagents: [{name: a, handler: echo}]\n";
        let out = print(text, &[]);
        assert!(!out.contains("pg-s3cret-0123"), "{out}");
        assert!(out.contains("password=<redacted>"), "{out}");

        // Substituted from a variable, the password goes too.
        let text = "storage:\n  sessions: postgres://aw:${PGPASS}@db/agentwire\nagents: [{name: a, handler: echo}]\n";
        let out = print(text, &[("PGPASS", "pg-s3cret-0123")]);
        assert!(!out.contains("pg-s3cret-0123"), "{out}");
    }

    #[test]
    fn settings_that_only_sound_secret_are_shown() {
        let text = "providers:\n  - {name: p, type: openai, model: m, first_token_timeout: 45s, api_key_env: MY_KEY}\nagents: [{name: a, handler: runtime, provider: p}]\n";
        let out = print(text, &[("MY_KEY", "sk-from-env-0123")]);
        assert!(out.contains("first_token_timeout: 45s"), "{out}");
        assert!(out.contains("api_key_env: MY_KEY"), "{out}");
        assert!(!out.contains("sk-from-env-0123"), "{out}");
    }
}

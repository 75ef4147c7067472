//! The built binary against bad config files: exit status 64 and a stderr
//! line that names the offending key; plus a smoke test of `serve` and
//! SIGTERM over a real process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// A valid `agents:` block for configs whose fault lies elsewhere.
pub(crate) const ONE_AGENT: &str = "agents:\n  - name: echo\n    handler: echo\n";

/// Writes `text` as `config.yaml` in a fresh directory.
pub(crate) fn write_config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// A command for the binary with the test's variables cleared from its
/// environment, so a developer's shell cannot change the outcome.
pub(crate) fn agentwire() -> Command {
    let mut command = Command::new(BIN);
    command
        .env_remove("AGENTWIRE_TEST_UNSET_VAR_XYZ")
        .env_remove("AGENTWIRE_TEST_PORT_VAR")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    command
}

pub(crate) fn check_config(path: &Path) -> Output {
    agentwire()
        .arg("check-config")
        .arg("--config")
        .arg(path)
        .output()
        .expect("the binary runs")
}

/// Runs `check-config` on `text`; asserts exit 64 and that stderr is
/// `config error: <key>: ...` mentioning `fragment`.
pub(crate) fn assert_rejected(text: &str, key: &str, fragment: &str) {
    let (_dir, path) = write_config(text);
    let output = check_config(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(64),
        "exit status for {key}; stderr: {stderr}"
    );
    let prefix = format!("config error: {key}: ");
    assert!(
        stderr.starts_with(&prefix),
        "stderr should start with {prefix:?}, got {stderr:?}"
    );
    assert!(
        stderr.contains(fragment),
        "stderr should mention {fragment:?}, got {stderr:?}"
    );
    assert!(
        output.stdout.is_empty(),
        "nothing on stdout: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[tokio::test]
async fn unknown_top_level_key_in_server_is_named() {
    assert_rejected(
        &format!("server:\n  limts: {{}}\n{ONE_AGENT}"),
        "server.limts",
        "unknown field `limts`",
    );
}

#[tokio::test]
async fn unknown_nested_limit_key_is_named() {
    assert_rejected(
        &format!("server:\n  limits:\n    max_conections: 5\n{ONE_AGENT}"),
        "server.limits.max_conections",
        "unknown field `max_conections`",
    );
}

#[tokio::test]
async fn unknown_root_and_agent_keys_are_named() {
    assert_rejected(
        &format!("bogus: 1\n{ONE_AGENT}"),
        "bogus",
        "unknown field `bogus`",
    );
    assert_rejected(
        "agents:\n  - name: a\n    handler: echo\n    extra: 1\n",
        "agents[0].extra",
        "unknown field `extra`",
    );
}

#[tokio::test]
async fn bad_duration_is_named() {
    assert_rejected(
        &format!("server:\n  limits:\n    ping_interval: 30 seconds\n{ONE_AGENT}"),
        "server.limits.ping_interval",
        "invalid duration \"30 seconds\"",
    );
}

#[tokio::test]
async fn unsupported_session_storage_is_named() {
    assert_rejected(
        &format!("storage:\n  sessions: mysql://x\n{ONE_AGENT}"),
        "storage.sessions",
        "mysql://x",
    );
}

#[tokio::test]
async fn runtime_agents_need_a_declared_provider() {
    assert_rejected(
        "agents:\n  - name: echo\n    handler: echo\n  - name: r\n    handler: runtime\n",
        "agents[1].provider",
        "required for `handler: runtime`",
    );
    assert_rejected(
        "agents:\n  - name: r\n    handler: runtime\n    provider: nope\n",
        "agents[0].provider",
        "no provider named \"nope\"",
    );
    assert_rejected(
        "providers:\n  - name: m\n    type: mock\nagents:\n  - name: r\n    handler: runtime\n    provider: m\n    context_messages: 0\n",
        "agents[0].context_messages",
        "must be greater than 0",
    );
}

#[tokio::test]
async fn runtime_fields_need_the_runtime_handler() {
    assert_rejected(
        "agents:\n  - name: e\n    handler: echo\n    instructions: be nice\n",
        "agents[0].handler",
        "need `handler: runtime`",
    );
    assert_rejected(
        "agents:\n  - name: e\n    handler: echo\n    memory: {enabled: true}\n",
        "agents[0].handler",
        "memory need `handler: runtime`",
    );
}

#[tokio::test]
async fn memory_keys_are_checked_and_named() {
    let runtime = "providers:\n  - name: m\n    type: mock\nagents:\n  - name: r\n    handler: runtime\n    provider: m\n";
    assert_rejected(
        &format!("{runtime}    memory: {{enabled: true, tier: everyone}}\n"),
        "agents[0].memory.tier",
        "\"everyone\" is not a tier: caller_agent or caller",
    );
    assert_rejected(
        &format!("{runtime}    memory: {{enabled: true, remember: all}}\n"),
        "agents[0].memory.remember",
        "unknown field",
    );
    assert_rejected(
        &format!("{runtime}    memory: {{enabled: true, retrieval: {{limit: 50}}}}\n"),
        "agents[0].memory.retrieval.limit",
        "must be 1 to 20",
    );
    assert_rejected(
        &format!("memory: {{category_ttl: {{memory:secrets: 24h}}}}\n{ONE_AGENT}"),
        "memory.category_ttl.memory:secrets",
        "not a category",
    );
    assert_rejected(
        &format!("memory: {{purge_every: 0s}}\n{ONE_AGENT}"),
        "memory.purge_every",
        "must be greater than 0",
    );
}

#[tokio::test]
async fn memory_embeddings_keys_are_checked_and_named() {
    let cases = [
        (
            "{base_url: \"http://127.0.0.1:9/v1\"}",
            "memory.embeddings.model",
            "required",
        ),
        (
            "{model: m, dimensions: 0}",
            "memory.embeddings.dimensions",
            "must be 1 to 8192",
        ),
        (
            "{model: m, timeout: 0s}",
            "memory.embeddings.timeout",
            "must be greater than 0",
        ),
        (
            "{model: m, api_key_env: AGENTWIRE_TEST_UNSET_KEY_XYZ}",
            "memory.embeddings.api_key_env",
            "AGENTWIRE_TEST_UNSET_KEY_XYZ is not set",
        ),
        (
            "{model: m, size: 3}",
            "memory.embeddings.size",
            "unknown field",
        ),
        (
            "{model: m, base_url: \"ftp://example.com\"}",
            "memory.embeddings.base_url",
            "must be an http or https URL",
        ),
    ];
    for (embeddings, key, problem) in cases {
        let yaml = format!("memory:\n  embeddings: {embeddings}\n{ONE_AGENT}");
        assert_rejected(&yaml, key, problem);
    }
}

#[tokio::test]
async fn providers_and_tools_are_validated() {
    let provider = "providers:\n  - name: p\n    type: mock\n";
    let agent = "agents:\n  - name: r\n    handler: runtime\n    provider: p\n";
    assert_rejected(
        &format!("{provider}{agent}    tools: [missing]\n"),
        "agents[0].tools[0]",
        "no tool named \"missing\"",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: openai\n",
        "providers[0].model",
        "required",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: openai\n    model: m\n    api_key_env: AGENTWIRE_TEST_UNSET_KEY_XYZ\n",
        "providers[0].api_key_env",
        "AGENTWIRE_TEST_UNSET_KEY_XYZ is not set",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: mock\n    base_url: http://x\n",
        "providers[0].base_url",
        "does not apply",
    );
    assert_rejected(
        "providers:\n  - name: p\n    type: gemini\n",
        "providers[0].type",
        "unknown variant",
    );
    assert_rejected(
        &format!("{provider}tools:\n  - name: t\n    type: http\n"),
        "tools[0].request",
        "required for `type: http`",
    );
    assert_rejected(
        &format!("{provider}tools:\n  - name: t\n    type: client\n    parameters: {{type: 12}}\n"),
        "tools[0].parameters",
        "schema",
    );
    assert_rejected(
        &format!("{provider}tools:\n  - name: t\n    type: client\n    command: ls\n"),
        "tools[0].command",
        "does not apply",
    );
    assert_rejected(
        &format!("{provider}{agent}    message_metadata_template: \"{{{{ unclosed\"\n"),
        "agents[0].message_metadata_template",
        "",
    );
    assert_rejected(
        &format!(
            "{provider}{provider_again}",
            provider_again = "  - name: p\n    type: mock\n"
        ),
        "providers[1].name",
        "duplicate",
    );
}

#[tokio::test]
async fn unknown_handler_is_named() {
    assert_rejected(
        "agents:\n  - name: a\n    handler: bogus\n",
        "agents[0].handler",
        "unknown variant `bogus`",
    );
}

#[tokio::test]
async fn duplicate_agent_name_is_named() {
    assert_rejected(
        "agents:\n  - name: a\n    handler: echo\n  - name: a\n    handler: test\n",
        "agents[1].name",
        "duplicate agent name \"a\"",
    );
}

#[tokio::test]
async fn no_agents_is_an_error() {
    assert_rejected(
        "storage:\n  sessions: memory\n",
        "agents",
        "at least one agent",
    );
    assert_rejected("agents: []\n", "agents", "at least one agent");
}

#[tokio::test]
async fn unset_variable_without_default_is_named() {
    assert_rejected(
        &format!("server:\n  listen: ${{AGENTWIRE_TEST_UNSET_VAR_XYZ}}\n{ONE_AGENT}"),
        "server.listen",
        "${AGENTWIRE_TEST_UNSET_VAR_XYZ}: environment variable is not set",
    );
}

#[tokio::test]
async fn pong_timeout_must_exceed_ping_interval() {
    for pong in ["30s", "10s"] {
        assert_rejected(
            &format!(
                "server:\n  limits:\n    ping_interval: 30s\n    pong_timeout: {pong}\n{ONE_AGENT}"
            ),
            "server.limits.pong_timeout",
            "ping_interval",
        );
    }
}

#[tokio::test]
async fn unreadable_config_file_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = check_config(&dir.path().join("missing.yaml"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "stderr: {stderr}");
    assert!(stderr.starts_with("config error: --config: "), "{stderr:?}");
}

#[tokio::test]
async fn variable_default_is_substituted() {
    // The default is used when the variable is unset...
    let (_dir, path) = write_config(&format!(
        "server:\n  listen: ${{AGENTWIRE_TEST_PORT_VAR:127.0.0.1:0}}\n{ONE_AGENT}"
    ));
    let output = check_config(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(": ok"), "stdout: {stdout:?}");

    // ...and is really what gets validated: a bad default fails on the key.
    assert_rejected(
        &format!("server:\n  listen: ${{AGENTWIRE_TEST_PORT_VAR:not-an-address}}\n{ONE_AGENT}"),
        "server.listen",
        "not-an-address",
    );

    // A set variable wins over the default.
    let (_dir2, path) = write_config(&format!(
        "server:\n  listen: ${{AGENTWIRE_TEST_PORT_VAR:not-an-address}}\n{ONE_AGENT}"
    ));
    let output = agentwire()
        .env("AGENTWIRE_TEST_PORT_VAR", "127.0.0.1:0")
        .arg("check-config")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn media_storage_keys_are_checked_and_named() {
    let media = |body: &str| format!("storage:\n  media:\n{body}{ONE_AGENT}");
    let cases = [
        (
            "    bogus: 1\n",
            "storage.media.bogus",
            "unknown field `bogus`",
        ),
        (
            "    backend: ftp\n",
            "storage.media.backend",
            "unknown variant `ftp`",
        ),
        (
            "    backend: local\n",
            "storage.media.path",
            "required when storage.media.backend is local",
        ),
        (
            "    backend: local\n    path: ''\n",
            "storage.media.path",
            "required",
        ),
        (
            "    backend: s3\n",
            "storage.media.bucket",
            "required when storage.media.backend is s3",
        ),
        (
            "    backend: s3\n    bucket: b\n    endpoint: ftp://x\n",
            "storage.media.endpoint",
            "http://",
        ),
        (
            "    backend: s3\n    bucket: b\n    path: /tmp/x\n",
            "storage.media.path",
            "only used with storage.media.backend local",
        ),
        (
            "    backend: local\n    path: /tmp/x\n    bucket: b\n",
            "storage.media.bucket",
            "only used with storage.media.backend s3",
        ),
        (
            "    backend: local\n    path: /tmp/x\n    region: r\n",
            "storage.media.region",
            "only used with storage.media.backend s3",
        ),
        (
            "    max_bytes: 0\n",
            "storage.media.max_bytes",
            "must be greater than 0",
        ),
        (
            "    max_bytes: lots\n",
            "storage.media.max_bytes",
            "invalid",
        ),
        ("    max_bytes: -1\n", "storage.media.max_bytes", "invalid"),
        (
            "    ttl: 1 day\n",
            "storage.media.ttl",
            "invalid duration \"1 day\"",
        ),
        (
            "    ttl: 0s\n",
            "storage.media.ttl",
            "must be greater than 0",
        ),
    ];
    for (body, key, fragment) in cases {
        assert_rejected(&media(body), key, fragment);
    }
}

#[tokio::test]
async fn valid_media_storage_configs_pass() {
    for body in [
        "    backend: none\n",
        // Keys of another backend are ignored while media is off.
        "    backend: none\n    path: /tmp/x\n    bucket: b\n",
        "    backend: local\n    path: ./data/media\n    max_bytes: 1048576\n    ttl: 1h\n",
        "    backend: s3\n    bucket: media\n    endpoint: http://127.0.0.1:9000\n    region: eu-west-1\n",
    ] {
        let (_dir, path) = write_config(&format!("storage:\n  media:\n{body}{ONE_AGENT}"));
        let output = check_config(&path);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{body}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn screening_keys_are_checked_and_named() {
    let cases = [
        (
            "screening:\n  enabld: false\n",
            "screening.enabld",
            "unknown field `enabld`",
        ),
        (
            "screening:\n  enabled: maybe\n",
            "screening.enabled",
            "expected a boolean",
        ),
        (
            "screening:\n  phrases: [\"open sesame\", \"  \"]\n",
            "screening.phrases[1]",
            "must not be empty",
        ),
        (
            "screening:\n  phrases: []\n",
            "screening.phrases",
            "at least one phrase, or `enabled: false`",
        ),
        (
            "screening:\n  phrases: open sesame\n",
            "screening.phrases",
            "expected a sequence",
        ),
    ];
    for (body, key, fragment) in cases {
        assert_rejected(&format!("{body}{ONE_AGENT}"), key, fragment);
    }
}

#[tokio::test]
async fn valid_screening_configs_pass() {
    for body in [
        "screening: {}\n",
        "screening:\n  enabled: false\n  phrases: []\n",
        "screening:\n  phrases: [open sesame, \"ignore   previous instructions\"]\n",
    ] {
        let (_dir, path) = write_config(&format!("{body}{ONE_AGENT}"));
        let output = check_config(&path);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{body}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn summary_keys_are_checked_and_named() {
    let provider = "providers:\n  - name: summaries\n    type: mock\n";
    let cases = [
        (
            "agents:\n  - name: echo\n    handler: echo\n    summary_after_idle: 0s\n",
            "agents[0].summary_after_idle",
            "must be greater than 0",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n    summary_after_idle: soon\n",
            "agents[0].summary_after_idle",
            "invalid duration",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n    summarizer: ghost\n",
            "agents[0].summarizer",
            "no provider named \"ghost\" in providers[]",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n  - name: b\n    handler: echo\n    summarizer: [summaries]\n",
            "agents[1].summarizer",
            "expected a string",
        ),
        (
            "agents:\n  - name: echo\n    handler: echo\n    summary_after_idel: 5m\n",
            "agents[0].summary_after_idel",
            "unknown field `summary_after_idel`",
        ),
    ];
    for (body, key, fragment) in cases {
        assert_rejected(&format!("{provider}{body}"), key, fragment);
    }
}

#[tokio::test]
async fn valid_summary_configs_pass() {
    let config = [
        "providers:",
        "  - name: summaries",
        "    type: mock",
        "agents:",
        "  - name: echo",
        "    handler: echo",
        "    summary_after_idle: 30s",
        "    summarizer: summaries",
        "  - name: demo",
        "    handler: demo",
    ];
    let (_dir, path) = write_config(&(config.join("\n") + "\n"));
    let output = check_config(&path);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runtime agents for the team tests: `lead` and `helper` (runtime) and `echo`.
const TEAM_AGENTS: &str = "providers:\n  - name: p\n    type: mock\nagents:\n  - name: lead\n    handler: runtime\n    provider: p\n  - name: helper\n    handler: runtime\n    provider: p\n  - name: echo\n    handler: echo\n";

#[tokio::test]
async fn delegation_and_handoff_keys_are_checked_and_named() {
    let lead =
        |extra: &str| TEAM_AGENTS.replacen("provider: p\n", &format!("provider: p\n{extra}"), 1);
    let cases = [
        (
            lead("    delegations: [ghost]\n"),
            "agents[0].delegations[0]",
            "no agent named \"ghost\" in agents[]",
        ),
        (
            lead("    delegations: [lead]\n"),
            "agents[0].delegations[0]",
            "an agent cannot name itself",
        ),
        (
            lead("    handoffs: [helper, echo]\n"),
            "agents[0].handoffs[1]",
            "\"echo\" is not a `handler: runtime` agent",
        ),
        (
            lead("    handoffs: [helper, helper]\n"),
            "agents[0].handoffs[1]",
            "listed twice",
        ),
        (
            format!("{TEAM_AGENTS}    delegations: [lead]\n"),
            "agents[2].handler",
            "delegations, handoffs and memory need `handler: runtime`",
        ),
        (
            lead("    delegations: helper\n"),
            "agents[0].delegations",
            "expected a sequence",
        ),
    ];
    for (text, key, fragment) in cases {
        assert_rejected(&text, key, fragment);
    }
}

#[tokio::test]
async fn team_keys_are_checked_and_named() {
    let teams = |block: &str| format!("{TEAM_AGENTS}teams:\n{block}");
    let cases = [
        (
            teams("  - name: t\n    orchestrator: ghost\n"),
            "teams[0].orchestrator",
            "no agent named \"ghost\" in agents[]",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    agents: [helper, ghost]\n"),
            "teams[0].agents[1]",
            "no agent named \"ghost\"",
        ),
        (
            teams("  - name: t\n    agents: [helper]\n"),
            "teams[0].orchestrator",
            "required",
        ),
        (
            teams("  - orchestrator: lead\n"),
            "teams[0].name",
            "required",
        ),
        (
            teams("  - name: help desk\n    orchestrator: lead\n"),
            "teams[0].name",
            "1 to 128 ASCII letters",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n  - name: t\n    orchestrator: helper\n"),
            "teams[1].name",
            "duplicate team name \"t\"",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    provider: p\n"),
            "teams[0].provider",
            "only with `file`",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    access_level: secret\n"),
            "teams[0].access_level",
            "unknown variant `secret`",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    password_argon2: plain\n"),
            "teams[0].password_argon2",
            "",
        ),
        (
            teams("  - name: t\n    orchestrator: lead\n    members: [helper]\n"),
            "teams[0].members",
            "unknown field `members`",
        ),
        (
            teams(
                "  - name: t\n    file: /nonexistent/agentwire-team.yaml\n    orchestrator: lead\n",
            ),
            "teams[0].orchestrator",
            "a team with `file` takes its agents from the file",
        ),
        (
            teams("  - name: t\n    file: /nonexistent/agentwire-team.yaml\n"),
            "teams[0].provider",
            "required with `file`",
        ),
        (
            teams("  - name: t\n    file: /nonexistent/agentwire-team.yaml\n    provider: p\n"),
            "teams[0].file",
            "cannot read /nonexistent/agentwire-team.yaml",
        ),
    ];
    for (text, key, fragment) in cases {
        assert_rejected(&text, key, fragment);
    }
}

/// Writes `team_yaml` as `team.yaml` and a config whose team `t` loads it.
fn team_file_config(team_yaml: &str, team_name: bool) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let team = dir.path().join("team.yaml");
    std::fs::write(&team, team_yaml).unwrap();
    let name = if team_name { "name: t\n    " } else { "" };
    let config = format!(
        "{TEAM_AGENTS}teams:\n  - {name}file: {}\n    provider: p\n",
        team.display()
    );
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config).unwrap();
    (dir, path, team.display().to_string())
}

/// `check-config` on `path` exits 64 naming `key`, with `fragment`.
fn assert_config_rejected(path: &Path, key: &str, fragment: &str) {
    let output = check_config(path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{key}: {stderr}");
    let prefix = format!("config error: {key}: ");
    assert!(stderr.starts_with(&prefix), "{prefix:?}: {stderr}");
    assert!(stderr.contains(fragment), "{fragment:?}: {stderr}");
}

#[tokio::test]
async fn team_file_errors_name_the_file_and_its_key_path() {
    let cases = [
        (
            "id: t\nagents:\n  - id: a\n    instructions: Answer.\n    delegations:\n      - target_agent_id: ghost\n",
            "agents[0].delegations[0].target_agent_id",
            "no agent with id or name \"ghost\" in the file",
        ),
        (
            "id: t\nagents:\n  - id: a\n    instructions: \"${AGENTWIRE_TEST_UNSET_VAR_XYZ}\"\n",
            "agents[0].instructions",
            "${AGENTWIRE_TEST_UNSET_VAR_XYZ}: environment variable is not set and has no default (line 4)",
        ),
        (
            "id: t\ntools:\n  - id: search\n    module: gnosari.tools.builtin.web_search\n    class: WebSearchTool\nagents:\n  - id: a\n    instructions: Answer.\n    tools: [search]\n",
            "agents[0].tools[0]",
            "declare a tool named \"search\" in tools[]",
        ),
        (
            "id: t\nagents:\n  - id: a\n    is_orchestrator: true\n    instructions: Answer.\n  - id: b\n    is_orchestrator: true\n    instructions: Answer too.\n",
            "agents[1].is_orchestrator",
            "a team has one",
        ),
        (
            "id: t\nagents:\n  - id: a\n    instructions: [not, text]\n",
            "agents[0].instructions",
            "invalid type",
        ),
    ];
    for (yaml, key_path, fragment) in cases {
        let (_dir, path, team) = team_file_config(yaml, true);
        assert_config_rejected(&path, &format!("{team}: {key_path}"), fragment);
    }
    let (_dir, path, team) = team_file_config("agents: [oops\n", true);
    assert_config_rejected(&path, "teams[0].file", &format!("{team}: invalid YAML"));
    let (_dir, path, team) = team_file_config(
        "name: No Id\nagents:\n  - name: a\n    instructions: Answer.\n",
        false,
    );
    assert_config_rejected(
        &path,
        "teams[0].name",
        &format!("the team file {team} has no `id`"),
    );
}

#[tokio::test]
async fn valid_team_configs_pass() {
    let (_dir, path, _) = team_file_config(
        "id: desk\nagents:\n  - id: a\n    is_orchestrator: true\n    instructions: Answer.\n    delegations: [{target_agent_id: b}]\n  - id: b\n    instructions: Help.\n    model: \"${AGENTWIRE_TEST_UNSET_VAR_XYZ:gpt-4o}\"\n",
        false,
    );
    let config = std::fs::read_to_string(&path).unwrap().replacen(
        "provider: p\n",
        "provider: p\n    delegations: [helper, echo]\n    handoffs: [helper]\n",
        1,
    ) + "  - name: pair\n    orchestrator: lead\n    agents: [helper, echo]\n    access_level: public\n";
    std::fs::write(&path, config).unwrap();
    let output = check_config(&path);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

//! What the operator's documentation promises, held to the binary: every
//! metric `/metrics` serves is in docs/metrics.md, the docs the README lists
//! exist, LICENSE is the workspace's license, `--version` names the commit,
//! and the log formats are what README says.

use crate::config_errors::{ONE_AGENT, agentwire, write_config};
use crate::support::{TestServer, repo_root};

/// The metric names of a Prometheus text body: every `# TYPE name kind`.
fn metric_names(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// A metric added to the server without its entry in docs/metrics.md fails
/// here: the names come from a running server's `/metrics`.
#[tokio::test]
async fn every_metric_the_server_serves_is_documented() {
    let server = TestServer::start().await;
    let (status, body) = server.get("/metrics").await;
    assert_eq!(status, 200, "{body}");
    let names = metric_names(&body);
    assert!(names.len() >= 10, "{body}");
    let doc = std::fs::read_to_string(repo_root().join("docs/metrics.md"))
        .expect("docs/metrics.md is readable");
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !doc.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/metrics.md has no entry (`name` in backticks) for {missing:?}"
    );
    // Each label value the server emits is named there too.
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        if let Some((_, labels)) = line.split_once('{') {
            let labels = labels.split('}').next().unwrap_or_default();
            for pair in labels.split(',') {
                let value = pair.split('=').nth(1).unwrap_or_default().trim_matches('"');
                assert!(
                    doc.contains(&format!("`{value}`")),
                    "docs/metrics.md does not name the label value {value:?} ({line})"
                );
            }
        }
    }
}

/// The README's documentation list names files that exist.
#[test]
fn the_documents_the_readme_lists_exist() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let mut linked = 0;
    for (i, _) in readme.match_indices("](docs/") {
        let rest = &readme[i + 2..];
        let target = rest.split([')', '#']).next().unwrap_or_default();
        assert!(
            repo_root().join(target).is_file(),
            "README.md links {target}, which does not exist"
        );
        linked += 1;
    }
    assert!(
        linked >= 8,
        "README.md links {linked} documents under docs/"
    );
}

/// The LICENSE file is the text of the license Cargo.toml names.
#[test]
fn the_license_file_matches_the_workspace_license() {
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("license = \"Apache-2.0\""),
        "the workspace license changed: update LICENSE and this test"
    );
    let license = std::fs::read_to_string(repo_root().join("LICENSE")).expect("LICENSE exists");
    assert!(license.contains("Apache License") && license.contains("Version 2.0, January 2004"));
}

/// The version is a real one, and CHANGELOG.md has its section: a release
/// is named there before it is built.
#[test]
fn the_changelog_names_this_version() {
    let version = env!("CARGO_PKG_VERSION");
    assert_ne!(version, "0.0.0", "give the workspace a real version");
    let changelog =
        std::fs::read_to_string(repo_root().join("CHANGELOG.md")).expect("CHANGELOG.md exists");
    assert!(
        changelog.contains("## Unreleased"),
        "CHANGELOG.md keeps an Unreleased section"
    );
    assert!(
        changelog.contains(&format!("## {version} ")),
        "CHANGELOG.md has no section for {version}"
    );
}

/// `agentwire --version`: the version, the commit the binary was built from
/// (`unknown` outside git) and the features built in.
#[test]
fn version_names_the_commit_and_the_features() {
    let output = agentwire()
        .arg("--version")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let prefix = format!("agentwire {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(stdout.starts_with(&prefix), "{stdout}");
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(repo_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    assert!(
        stdout.contains(&format!("(commit {commit};")),
        "expected commit {commit}: {stdout}"
    );
    let built: Vec<&str> = [
        ("jemalloc", cfg!(feature = "jemalloc")),
        ("postgres", cfg!(feature = "postgres")),
        ("redis", cfg!(feature = "redis")),
        ("s3", cfg!(feature = "s3")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    let features = if built.is_empty() {
        "features: none)".to_owned()
    } else {
        format!("features: {})", built.join(", "))
    };
    assert!(stdout.contains(&features), "{stdout}");
}

/// `serve` on `127.0.0.1:0` with `env`; the stderr line that says it is
/// listening. The process is killed before this returns.
fn listening_line(env: &[(&str, &str)], unset: &[&str]) -> String {
    use std::io::BufRead as _;
    let (_dir, path) = write_config(&format!("storage:\n  sessions: memory\n{ONE_AGENT}"));
    let mut command = agentwire();
    command
        .env("RUST_LOG", "info")
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for name in unset {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("the binary starts");
    let pipe = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("agentwire listening") => break Some(line),
            Ok(line) => seen.push(line),
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    found.unwrap_or_else(|| panic!("no listening line; stderr: {seen:#?}"))
}

/// `AGENTWIRE_LOG_FORMAT=json`: one JSON object per line.
#[test]
fn json_logs_are_one_object_per_line() {
    let line = listening_line(&[("AGENTWIRE_LOG_FORMAT", "json")], &[]);
    let value: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert_eq!(value["level"], "INFO", "{value}");
    assert_eq!(value["fields"]["message"], "agentwire listening", "{value}");
    assert!(value["fields"]["address"].is_string(), "{value}");
    assert!(value["timestamp"].is_string(), "{value}");
}

/// Text logs carry no colour codes when standard error is not a terminal,
/// even without `NO_COLOR`.
#[test]
fn text_logs_have_no_colours_off_a_terminal() {
    let line = listening_line(&[], &["AGENTWIRE_LOG_FORMAT", "NO_COLOR"]);
    assert!(!line.contains('\u{1b}'), "{line:?}");
    assert!(line.contains("INFO"), "{line:?}");
    assert!(!line.trim_start().starts_with('{'), "{line:?}");
}

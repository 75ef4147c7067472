//! The command line that starts an instance: the server's arguments with
//! the mounts' paths filled in, under `prlimit` when the sandbox has CPU
//! or memory limits, under `bwrap` with `isolation: bubblewrap`.
//!
//! Under bubblewrap the server sees the system read-only (`/usr`, and
//! `/bin`, `/sbin`, `/lib*` as the host has them, and `/etc`), the
//! sandbox's `read_only` directories, a private `/tmp`, `/dev` and `/proc`,
//! and each mount writable at `/sandbox/<role>/<id>`; nothing else of the
//! host. Its namespaces are its own (`--unshare-all`: no network but its
//! own loopback unless `network: true`), it is killed when agentwire dies
//! (`--die-with-parent`), and it has no controlling terminal
//! (`--new-session`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::plan::PlacedMount;
use super::{Isolation, MOUNTS_DIR, Network, SandboxSettings};

/// The placeholder that expands to one argument per mount.
const ALL_MOUNTS: &str = "{mounts}";
/// The start of the placeholder for a role's first mount, `{mount.<role>}`.
const ONE_MOUNT: &str = "{mount.";

/// The system directories a bubblewrap sandbox sees read-only, those the
/// host has: each a directory bound, or a symbolic link recreated.
const SYSTEM_PATHS: [&str; 7] = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"];

/// Checks one configured argument: `{mounts}` only as a whole argument,
/// and `{mount.<role>}` naming one of `roles`.
pub fn check_arg(arg: &str, roles: &[&str]) -> Result<(), String> {
    if arg.contains(ALL_MOUNTS) && arg != ALL_MOUNTS {
        return Err(format!("{ALL_MOUNTS} must be a whole argument"));
    }
    for role in roles_named(arg) {
        let Some(role) = role else {
            return Err(format!("{ONE_MOUNT}…}} is not closed"));
        };
        if !roles.contains(&role) {
            return Err(format!(
                "{{mount.{role}}} names no role of this sandbox's mount_roles"
            ));
        }
    }
    Ok(())
}

/// The roles an argument's `{mount.<role>}` placeholders name; `None` for
/// one not closed.
pub(super) fn roles_named(arg: &str) -> Vec<Option<&str>> {
    let mut roles = Vec::new();
    let mut rest = arg;
    while let Some(start) = rest.find(ONE_MOUNT) {
        let after = &rest[start + ONE_MOUNT.len()..];
        match after.find('}') {
            Some(end) => {
                roles.push(Some(&after[..end]));
                rest = &after[end + 1..];
            }
            None => {
                roles.push(None);
                break;
            }
        }
    }
    roles
}

/// The server's arguments with the placeholders filled in.
fn expand_args(args: &[String], mounts: &[PlacedMount]) -> Vec<String> {
    let mut expanded = Vec::with_capacity(args.len() + mounts.len());
    for arg in args {
        if arg == ALL_MOUNTS {
            expanded.extend(mounts.iter().map(|mount| mount.inside.clone()));
            continue;
        }
        let mut arg = arg.clone();
        for role in roles_named(&arg.clone()).into_iter().flatten() {
            if let Some(mount) = mounts.iter().find(|mount| mount.role == role) {
                arg = arg.replace(&format!("{ONE_MOUNT}{role}}}"), &mount.inside);
            }
        }
        expanded.push(arg);
    }
    expanded
}

/// Where a mount is placed for the server: under [`MOUNTS_DIR`] inside a
/// bubblewrap sandbox, at its host path without isolation.
pub(super) fn inside_path(isolation: Isolation, role: &str, id: &str, host: &Path) -> String {
    match isolation {
        Isolation::Bubblewrap => format!("{MOUNTS_DIR}/{role}/{id}"),
        Isolation::None => host.display().to_string(),
    }
}

/// The program to run and its arguments: `program` (the server's command,
/// found) with its expanded arguments, under `prlimit` and `bwrap` as the
/// settings say. `prlimit` is the program found at startup.
pub(super) fn command_line(
    settings: &SandboxSettings,
    program: &Path,
    prlimit: Option<&Path>,
    mounts: &[PlacedMount],
) -> (String, Vec<String>) {
    let mut line: Vec<String> = Vec::new();
    let limits = &settings.limits;
    if let Some(prlimit) = prlimit {
        line.push(prlimit.display().to_string());
        if let Some(seconds) = limits.cpu_seconds {
            line.push(format!("--cpu={seconds}"));
        }
        if let Some(bytes) = limits.memory_bytes {
            line.push(format!("--as={bytes}"));
        }
        line.push("--".to_owned());
    }
    line.push(program.display().to_string());
    line.extend(expand_args(&settings.args, mounts));
    match settings.isolation {
        Isolation::None => {
            let program = line.remove(0);
            (program, line)
        }
        Isolation::Bubblewrap => {
            let mut args = bubblewrap_args(settings, mounts);
            args.push("--".to_owned());
            args.extend(line);
            ("bwrap".to_owned(), args)
        }
    }
}

/// bwrap's options, before the `--` that ends them.
fn bubblewrap_args(settings: &SandboxSettings, mounts: &[PlacedMount]) -> Vec<String> {
    let mut args: Vec<String> = ["--die-with-parent", "--unshare-all"]
        .map(str::to_owned)
        .to_vec();
    if settings.network == Network::Shared {
        args.push("--share-net".to_owned());
    }
    args.push("--new-session".to_owned());
    // The private file systems first: a later bind may sit inside them
    // (a read-only directory under the host's /tmp).
    for (option, path) in [
        ("--dev", "/dev"),
        ("--proc", "/proc"),
        ("--tmpfs", "/tmp"),
        ("--tmpfs", MOUNTS_DIR),
    ] {
        args.extend([option.to_owned(), path.to_owned()]);
    }
    for path in SYSTEM_PATHS {
        let path = Path::new(path);
        match std::fs::read_link(path) {
            Ok(target) => args.extend([
                "--symlink".to_owned(),
                target.display().to_string(),
                path.display().to_string(),
            ]),
            Err(_) if path.is_dir() => ro_bind(&mut args, path),
            Err(_) => {}
        }
    }
    for path in &settings.read_only {
        ro_bind(&mut args, path);
    }
    for mount in mounts {
        args.extend([
            "--bind".to_owned(),
            mount.host.display().to_string(),
            mount.inside.clone(),
        ]);
    }
    args.extend(["--chdir".to_owned(), MOUNTS_DIR.to_owned()]);
    args
}

fn ro_bind(args: &mut Vec<String>, path: &Path) {
    let path = path.display().to_string();
    args.extend(["--ro-bind".to_owned(), path.clone(), path]);
}

/// Finds a program as `execvp` would: a name with a `/` as that path
/// (made absolute), else the first executable file of that name in
/// `path_var` (a `PATH` value).
pub fn find_program(name: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if name.contains('/') {
        let path = std::path::absolute(name).ok()?;
        return is_executable(&path).then_some(path);
    }
    std::env::split_paths(path_var?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sandbox::SandboxLimits;

    fn settings(isolation: Isolation, args: &[&str]) -> SandboxSettings {
        SandboxSettings {
            name: "files".into(),
            command: "server".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            isolation,
            network: Network::Isolated,
            read_only: vec![PathBuf::from("/opt/servers")],
            mount_roles: vec![],
            limits: SandboxLimits {
                instances_per_owner: 2,
                instances_per_node: 32,
                idle_ttl: Duration::from_secs(600),
                cpu_seconds: None,
                memory_bytes: None,
                start_timeout: Duration::from_secs(20),
                call_timeout: Duration::from_secs(30),
            },
        }
    }

    fn mount(role: &str, id: &str, isolation: Isolation) -> PlacedMount {
        let host = PathBuf::from(format!("/srv/{role}s/{id}"));
        PlacedMount {
            role: role.into(),
            id: id.into(),
            inside: inside_path(isolation, role, id, &host),
            host,
            missing: crate::sandbox::MissingDirectory::Refuse,
        }
    }

    #[test]
    fn arguments_are_checked() {
        let roles = ["project", "data"];
        assert_eq!(check_arg("{mounts}", &roles), Ok(()));
        assert_eq!(check_arg("--root={mount.project}", &roles), Ok(()));
        assert_eq!(check_arg("{mount.project}:{mount.data}", &roles), Ok(()));
        assert_eq!(check_arg("plain {braces}", &roles), Ok(()));
        assert!(
            check_arg("--dirs={mounts}", &roles)
                .unwrap_err()
                .contains("whole argument")
        );
        assert!(
            check_arg("{mount.repo}", &roles)
                .unwrap_err()
                .contains("mount.repo")
        );
        assert!(
            check_arg("{mount.project", &roles)
                .unwrap_err()
                .contains("not closed")
        );
    }

    #[test]
    fn placeholders_become_the_mounts_paths() {
        let mounts = [
            mount("project", "p1", Isolation::Bubblewrap),
            mount("data", "d1", Isolation::Bubblewrap),
            mount("project", "p2", Isolation::Bubblewrap),
        ];
        let args: Vec<String> = [
            "serve",
            "{mounts}",
            "--root={mount.project}",
            "{mount.data}",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            expand_args(&args, &mounts),
            [
                "serve",
                "/sandbox/project/p1",
                "/sandbox/data/d1",
                "/sandbox/project/p2",
                "--root=/sandbox/project/p1",
                "/sandbox/data/d1",
            ]
        );
        assert_eq!(
            expand_args(&args, &[]),
            ["serve", "--root={mount.project}", "{mount.data}"]
        );
    }

    #[test]
    fn without_isolation_the_server_runs_itself_under_prlimit_when_limited() {
        let mut settings = settings(Isolation::None, &["{mounts}"]);
        let mounts = [mount("project", "p1", Isolation::None)];
        let (program, args) = command_line(&settings, Path::new("/usr/bin/server"), None, &mounts);
        assert_eq!(
            (program.as_str(), args),
            ("/usr/bin/server", vec!["/srv/projects/p1".to_owned()])
        );
        settings.limits.cpu_seconds = Some(60);
        settings.limits.memory_bytes = Some(1 << 30);
        let prlimit = Path::new("/usr/bin/prlimit");
        let (program, args) = command_line(
            &settings,
            Path::new("/usr/bin/server"),
            Some(prlimit),
            &mounts,
        );
        assert_eq!(program, "/usr/bin/prlimit");
        assert_eq!(
            args,
            [
                "--cpu=60",
                "--as=1073741824",
                "--",
                "/usr/bin/server",
                "/srv/projects/p1"
            ]
        );
    }

    #[test]
    fn bubblewrap_binds_the_system_read_only_and_each_mount_writable() {
        let mut settings = settings(Isolation::Bubblewrap, &["{mounts}"]);
        let mounts = [mount("project", "p1", Isolation::Bubblewrap)];
        let (program, args) = command_line(&settings, Path::new("/usr/bin/server"), None, &mounts);
        assert_eq!(program, "bwrap");
        let line = args.join(" ");
        assert!(line.starts_with("--die-with-parent --unshare-all --new-session --dev /dev --proc /proc --tmpfs /tmp --tmpfs /sandbox "), "{line}");
        assert!(line.contains("--ro-bind /usr /usr"), "{line}");
        assert!(line.contains("--ro-bind /etc /etc"), "{line}");
        assert!(
            line.contains("--ro-bind /opt/servers /opt/servers"),
            "{line}"
        );
        assert!(line.ends_with("--bind /srv/projects/p1 /sandbox/project/p1 --chdir /sandbox -- /usr/bin/server /sandbox/project/p1"), "{line}");
        assert!(!line.contains("--share-net"), "{line}");
        assert!(!line.contains("--ro-bind / /"), "{line}");
        settings.network = Network::Shared;
        let (_, args) = command_line(&settings, Path::new("/usr/bin/server"), None, &mounts);
        assert!(
            args.join(" ")
                .starts_with("--die-with-parent --unshare-all --share-net --new-session")
        );
    }

    #[test]
    fn programs_are_found_on_the_path() {
        let path = std::env::join_paths(["/nonexistent-dir", "/usr/bin", "/bin"]).unwrap();
        assert_eq!(
            find_program("sh", Some(&path)).map(|p| p.is_absolute()),
            Some(true)
        );
        assert_eq!(find_program("agentwire-no-such-program", Some(&path)), None);
        assert_eq!(find_program("sh", None), None);
        assert_eq!(
            find_program("/bin/sh", None),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(find_program("/nonexistent/server", Some(&path)), None);
        // A file that is not executable is not a program.
        assert_eq!(find_program("/etc/passwd", None), None);
    }
}

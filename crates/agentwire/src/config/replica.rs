//! `replica`: how the replicas of a deployment reach each other, so a voice
//! call's `resume=` that lands on a replica other than the one holding the
//! call is relayed there (the book's replicas chapter).

use std::net::SocketAddr;

use agentwire_auth::Secret;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConfigError, LiveConfig};

/// `replica`: with `live: redis://…`, links the replicas so a voice call
/// can be resumed through any of them.
#[derive(Deserialize, Serialize, JsonSchema, Default)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawReplica {
    /// The secret every replica of the deployment shares, at least 32
    /// characters: it signs the hops between replicas (a resume relayed to
    /// the replica holding its call), and a request to the hop route
    /// without a valid signature is answered 404. Default: none (a voice
    /// call is resumed only on the replica holding it). Only with
    /// `live: redis://…`. A secret: use `${VAR}`.
    pub(super) secret: Option<String>,
    /// `HOST:PORT` where the other replicas reach this one's listener (its
    /// address on the deployment's network, such as the pod IP and port).
    /// Default: the bound address; required when `server.listen` is on
    /// every interface (`0.0.0.0`, `[::]`). Only with `replica.secret`.
    pub(super) advertise: Option<String>,
}

/// The replicas linked: `replica.secret`, and `replica.advertise` when set.
#[derive(Clone)]
pub struct ReplicaConfig {
    pub secret: Secret,
    /// `None`: the bound address.
    pub advertise: Option<String>,
}

impl std::fmt::Debug for ReplicaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaConfig")
            .field("advertise", &self.advertise)
            .finish_non_exhaustive()
    }
}

/// The shortest `replica.secret`: 256 bits of key material, at least.
const MIN_SECRET: usize = 32;

pub(super) fn validate(
    raw: RawReplica,
    live: &LiveConfig,
    listen: SocketAddr,
) -> Result<Option<ReplicaConfig>, ConfigError> {
    let Some(secret) = raw.secret else {
        if raw.advertise.is_some() {
            return Err(ConfigError::new(
                "replica.advertise",
                "only with replica.secret",
            ));
        }
        return Ok(None);
    };
    if *live == LiveConfig::Memory {
        return Err(ConfigError::new(
            "replica.secret",
            "only with `live: redis://…` (one process has no other replica)",
        ));
    }
    if secret.chars().count() < MIN_SECRET {
        return Err(ConfigError::new(
            "replica.secret",
            format!("at least {MIN_SECRET} characters"),
        ));
    }
    if let Some(advertise) = &raw.advertise
        && !is_host_and_port(advertise)
    {
        return Err(ConfigError::new(
            "replica.advertise",
            format!("expected HOST:PORT, got {advertise:?}"),
        ));
    }
    if raw.advertise.is_none() && listen.ip().is_unspecified() {
        return Err(ConfigError::new(
            "replica.advertise",
            format!(
                "required when server.listen is on every interface ({listen}): the other replicas cannot reach that address"
            ),
        ));
    }
    Ok(Some(ReplicaConfig {
        secret: Secret::new(secret),
        advertise: raw.advertise,
    }))
}

/// `host:port` or `[v6]:port`, a port above 0, and nothing a URL would
/// read as a path, user or query.
fn is_host_and_port(text: &str) -> bool {
    let Some((host, port)) = text.rsplit_once(':') else {
        return false;
    };
    let port_ok = port.parse::<u16>().is_ok_and(|port| port > 0);
    let host_ok = !host.is_empty()
        && !host
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '/' | '@' | '?' | '#'));
    port_ok && host_ok
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    const LIVE: &str = "live: redis://cache:6379\n";
    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn replica(block: &str) -> Result<Option<ReplicaConfig>, ConfigError> {
        let text = format!("{block}\nagents: [{{name: a, handler: echo}}]\n");
        parse(&text, |_| None).map(|config| config.replica)
    }

    #[test]
    fn off_without_a_secret_and_linked_with_one() {
        assert!(replica(LIVE).unwrap().is_none());
        let linked = replica(&format!(
            "server: {{listen: '10.0.0.5:8080'}}\n{LIVE}replica: {{secret: {SECRET}}}"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(linked.advertise, None);
        assert!(!format!("{linked:?}").contains(SECRET));
        let advertised = replica(&format!(
            "{LIVE}replica: {{secret: {SECRET}, advertise: 'pod-3.agentwire:8080'}}"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(
            advertised.advertise.as_deref(),
            Some("pod-3.agentwire:8080")
        );
    }

    #[test]
    fn bad_settings_name_their_key_and_never_the_secret() {
        let cases = [
            (format!("replica: {{secret: {SECRET}}}"), "replica.secret"),
            (
                format!("{LIVE}replica: {{secret: short-secret}}"),
                "replica.secret",
            ),
            (
                format!("{LIVE}replica: {{advertise: '10.0.0.5:8080'}}"),
                "replica.advertise",
            ),
            (
                format!("{LIVE}replica: {{secret: {SECRET}, advertise: 'http://pod/x:80'}}"),
                "replica.advertise",
            ),
            (
                format!("{LIVE}replica: {{secret: {SECRET}, advertise: 'pod:0'}}"),
                "replica.advertise",
            ),
            (
                format!("server: {{listen: '0.0.0.0:8080'}}\n{LIVE}replica: {{secret: {SECRET}}}"),
                "replica.advertise",
            ),
        ];
        for (block, key) in cases {
            let error = replica(&block).unwrap_err();
            assert_eq!(error.key, key, "{block}: {error}");
            assert!(!error.to_string().contains(SECRET), "{error}");
        }
    }
}

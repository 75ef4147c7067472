//! TLS to PostgreSQL, as libpq's `sslmode` and `sslrootcert` say in the
//! URL, through rustls with the crypto provider the binary's `main`
//! installed (this crate never installs one).
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `prefer` (the default) | when the server offers it, else plaintext | not checked |
//! | `require` | always | checked against `sslrootcert` when it is given (as `verify-ca`), else not |
//! | `verify-ca` | always | signed by `sslrootcert` (a PEM file; absent or `system`: the system's roots) |
//! | `verify-full` | always | as `verify-ca`, and issued for the host the URL names |
//!
//! As with libpq, a Unix socket is never encrypted (PostgreSQL offers no
//! TLS there), whatever `sslmode` says. `allow` and the other TLS
//! parameters libpq knows are refused, so a URL never means less than it
//! says.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the store's TCP connections are secured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgTls {
    pub mode: TlsMode,
    /// `sslrootcert`: where the trusted roots are.
    pub roots: Roots,
}

/// libpq's `sslmode` values this store implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// Not given: the system's roots where a mode checks the chain.
    Unset,
    /// `system`.
    System,
    /// A PEM file of CA certificates.
    File(PathBuf),
}

/// libpq's other TLS parameters: refused rather than ignored.
const UNSUPPORTED: [&str; 6] = [
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcrl",
    "sslcrldir",
    "sslsni",
];

impl PgTls {
    /// Takes `sslmode` and `sslrootcert` out of `url`'s query: the URL
    /// left for tokio-postgres, and what they ask. Errors name the
    /// parameter, never the URL (it may hold a password).
    pub(super) fn take_from(url: &str) -> Result<(String, PgTls), String> {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), PgTls::default()));
        };
        let mut kept = Vec::new();
        let mut tls = PgTls::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map_err(|_| format!("the URL's {key} is not UTF-8"))?;
            if UNSUPPORTED.contains(&key) {
                return Err(format!(
                    "the URL's {key} is not supported (TLS takes sslmode and sslrootcert)"
                ));
            }
            match key {
                "sslmode" => tls.mode = TlsMode::parse(&value)?,
                "sslrootcert" => {
                    tls.roots = match &*value {
                        "" => return Err("the URL's sslrootcert is empty".to_owned()),
                        "system" => Roots::System,
                        path => Roots::File(PathBuf::from(path)),
                    }
                }
                _ => kept.push(pair),
            }
        }
        let url = match kept.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", kept.join("&")),
        };
        Ok((url, tls))
    }

    /// What tokio-postgres is told: whether to ask for TLS, and whether it
    /// may do without.
    pub(super) fn ssl_mode(&self) -> SslMode {
        match self.mode {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        }
    }

    /// The connector for this mode. Fails when the roots cannot be read,
    /// or when no crypto provider was installed.
    pub(super) fn connector(&self) -> Result<MakeRustlsConnect, String> {
        let provider = CryptoProvider::get_default()
            .cloned()
            .ok_or("TLS to PostgreSQL needs rustls' crypto provider, which was not installed")?;
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS to PostgreSQL: {e}"))?;
        let checks_chain = match self.mode {
            TlsMode::Disable | TlsMode::Prefer => false,
            TlsMode::Require => matches!(self.roots, Roots::File(_) | Roots::System),
            TlsMode::VerifyCa | TlsMode::VerifyFull => true,
        };
        let config = if self.mode == TlsMode::VerifyFull {
            builder
                .with_root_certificates(self.root_store()?)
                .with_no_client_auth()
        } else {
            let chain = match checks_chain {
                true => Some(
                    WebPkiServerVerifier::builder_with_provider(
                        Arc::new(self.root_store()?),
                        provider.clone(),
                    )
                    .build()
                    .map_err(|e| format!("TLS to PostgreSQL: {e}"))?,
                ),
                false => None,
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Relaxed { chain, provider }))
                .with_no_client_auth()
        };
        Ok(MakeRustlsConnect::new(config))
    }

    fn root_store(&self) -> Result<RootCertStore, String> {
        let mut store = RootCertStore::empty();
        match &self.roots {
            Roots::File(path) => {
                let shown = path.display();
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| format!("cannot read sslrootcert {shown}: {e}"))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("sslrootcert {shown} is not PEM: {e}"))?;
                let (added, _) = store.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("sslrootcert {shown} holds no CA certificate"));
                }
            }
            Roots::Unset | Roots::System => {
                let found = rustls_native_certs::load_native_certs();
                store.add_parsable_certificates(found.certs);
                if store.is_empty() {
                    return Err(
                        "no system CA certificates found for TLS to PostgreSQL (name a file with sslrootcert)"
                            .to_owned(),
                    );
                }
            }
        }
        Ok(store)
    }
}

impl Default for PgTls {
    fn default() -> PgTls {
        PgTls {
            mode: TlsMode::Prefer,
            roots: Roots::Unset,
        }
    }
}

impl TlsMode {
    fn parse(value: &str) -> Result<TlsMode, String> {
        Ok(match value {
            "disable" => TlsMode::Disable,
            "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            "allow" => {
                return Err(
                    "the URL's sslmode allow is not supported: use disable, prefer, require, verify-ca or verify-full"
                        .to_owned(),
                );
            }
            _ => {
                return Err(
                    "the URL's sslmode must be disable, prefer, require, verify-ca or verify-full"
                        .to_owned(),
                );
            }
        })
    }
}

/// What `prefer`, `require` and `verify-ca` check of the server's
/// certificate: nothing (`chain: None`: encrypted, the server not
/// authenticated, libpq's meaning), or the chain to a trusted root
/// whatever host the certificate names. The handshake's signatures are
/// checked either way, so the session is the certificate holder's.
#[derive(Debug)]
struct Relaxed {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(url: &str) -> Result<(String, PgTls), String> {
        PgTls::take_from(url)
    }

    #[test]
    fn tls_parameters_leave_the_url_and_say_the_mode() {
        let (url, tls) = taken("postgres://u:p@db:5432/app").unwrap();
        assert_eq!(url, "postgres://u:p@db:5432/app");
        assert_eq!(tls, PgTls::default());
        assert_eq!(tls.ssl_mode(), SslMode::Prefer);

        let (url, tls) =
            taken("postgres://db/app?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&connect_timeout=3")
                .unwrap();
        assert_eq!(
            url,
            "postgres://db/app?application_name=x&connect_timeout=3"
        );
        assert_eq!(tls.mode, TlsMode::VerifyFull);
        assert_eq!(tls.roots, Roots::File(PathBuf::from("/etc/ca.pem")));
        assert_eq!(tls.ssl_mode(), SslMode::Require);

        let (url, tls) = taken("postgres://db/app?sslmode=disable").unwrap();
        assert_eq!(url, "postgres://db/app");
        assert_eq!(tls.ssl_mode(), SslMode::Disable);
        let (_, tls) = taken("postgres://db/app?sslmode=require&sslrootcert=system").unwrap();
        assert_eq!((tls.mode, tls.roots), (TlsMode::Require, Roots::System));
        let (_, tls) = taken("postgres://db/app?sslmode=verify-ca").unwrap();
        assert_eq!((tls.mode, tls.roots), (TlsMode::VerifyCa, Roots::Unset));
    }

    #[test]
    fn what_the_store_cannot_honour_is_refused_by_name() {
        for (url, named) in [
            ("postgres://u:pw@db/app?sslmode=allow", "sslmode allow"),
            ("postgres://u:pw@db/app?sslmode=strict", "sslmode must be"),
            ("postgres://u:pw@db/app?sslcert=/c.pem", "sslcert"),
            ("postgres://u:pw@db/app?sslkey=/k.pem", "sslkey"),
            (
                "postgres://u:pw@db/app?sslrootcert=",
                "sslrootcert is empty",
            ),
        ] {
            let error = taken(url).unwrap_err();
            assert!(error.contains(named), "{url}: {error}");
            assert!(!error.contains("pw"), "{error}");
        }
    }

    #[test]
    fn a_root_file_that_is_not_pem_or_missing_is_named() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let tls = PgTls {
            mode: TlsMode::VerifyFull,
            roots: Roots::File(missing.clone()),
        };
        let error = tls.connector().err().unwrap();
        assert!(error.contains("cannot read sslrootcert"), "{error}");
        assert!(error.contains(&missing.display().to_string()), "{error}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let tls = PgTls {
            mode: TlsMode::VerifyCa,
            roots: Roots::File(empty),
        };
        let error = tls.connector().err().unwrap();
        assert!(error.contains("holds no CA certificate"), "{error}");
        // Neither mode checks anything to build.
        for mode in [TlsMode::Prefer, TlsMode::Require] {
            let tls = PgTls {
                mode,
                roots: Roots::Unset,
            };
            assert!(tls.connector().is_ok());
        }
    }
}

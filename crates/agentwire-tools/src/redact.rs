//! Scrubbing configured secrets (header values, environment values, URL
//! credentials) out of error messages built from other libraries' errors.

/// Values shorter than this are not scrubbed: they would mangle ordinary
/// words and are no secret worth the name.
const MIN_SECRET_LEN: usize = 4;

#[derive(Debug, Default, Clone)]
pub(crate) struct Redactor {
    /// Longest first, so that a secret containing another is scrubbed whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub(crate) fn new(secrets: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|secret| secret.len() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// The secrets of a URL: the whole of it, its query, its password.
    pub(crate) fn url_secrets(url: &str) -> Vec<String> {
        let mut secrets = vec![url.to_owned()];
        if let Ok(parsed) = reqwest::Url::parse(url) {
            secrets.push(parsed.to_string());
            secrets.extend(parsed.query().map(str::to_owned));
            secrets.extend(parsed.password().map(str::to_owned));
        }
        secrets
    }

    pub(crate) fn redact(&self, message: String) -> String {
        let mut message = message;
        for secret in &self.secrets {
            if message.contains(secret.as_str()) {
                message = message.replace(secret.as_str(), "[redacted]");
            }
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_scrubbed_longest_first() {
        let mut secrets = Redactor::url_secrets("https://u:pw12@mcp.test/x?key=sekrit");
        secrets.push("Bearer abc123".to_owned());
        secrets.push("ab".to_owned());
        let redactor = Redactor::new(secrets);
        assert_eq!(
            redactor.redact(
                "error sending request for url (https://u:pw12@mcp.test/x?key=sekrit): \
                 token Bearer abc123, ab, key=sekrit, pw12"
                    .to_owned()
            ),
            "error sending request for url ([redacted]): token [redacted], ab, [redacted], [redacted]"
        );
    }
}

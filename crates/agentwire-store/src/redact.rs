//! Passwords out of connection URLs, for whatever shows a URL (a log line,
//! an error, `check-config --print`). Built without the `postgres` feature
//! too: the binary's config redacts a URL it cannot open.

/// What a password is shown as.
pub const REDACTED: &str = "<redacted>";

/// `url` with the password of its user info (`user:PASSWORD@`) and any
/// `password=` query parameter replaced by `<redacted>`; the rest as it was.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let start = scheme_end + 3;
        let authority_end = out[start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..authority_end].rfind('@') {
            let userinfo = &out[start..start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(start + colon + 1..start + at, REDACTED);
            }
        }
    }
    if let Some(query_start) = out.find('?') {
        let (head, query) = out.split_at(query_start + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                    format!("{key}={REDACTED}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_user_info_and_query_are_replaced() {
        assert_eq!(
            redact_url("postgres://aw:s3cret@db.internal:5432/agentwire?sslmode=prefer"),
            "postgres://aw:<redacted>@db.internal:5432/agentwire?sslmode=prefer"
        );
        assert_eq!(
            redact_url("postgresql:///aw?host=/run/pg&user=aw&password=s3cret&x=1"),
            "postgresql:///aw?host=/run/pg&user=aw&password=<redacted>&x=1"
        );
        assert_eq!(
            redact_url("postgres://aw@db/agentwire"),
            "postgres://aw@db/agentwire"
        );
        assert_eq!(redact_url("sqlite://./data/a.db"), "sqlite://./data/a.db");
        assert_eq!(redact_url("memory"), "memory");
        // An `@` in the password: the user info runs to the last one.
        assert_eq!(
            redact_url("postgres://aw:p@ss@db/agentwire"),
            "postgres://aw:<redacted>@db/agentwire"
        );
    }
}

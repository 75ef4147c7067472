//! Agent passwords: Argon2id PHC strings.

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Argon2, Params};

const ARGON2ID: &str = "argon2id";

/// Hashes `password` with Argon2id (the library's default parameters: 19 MiB,
/// 2 passes, 1 lane) and a random 16-byte salt, as a PHC string
/// (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`), for `agentwire hash-password`.
pub fn hash_password(password: &str) -> Result<String, String> {
    if password.is_empty() {
        return Err("the password is empty".to_owned());
    }
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|e| format!("hashing the password failed: {e}"))
}

/// Whether `password` matches the Argon2id PHC string `phc`. Any other
/// algorithm, or a string that does not parse, is `false`. CPU-heavy by
/// design: call it off the async runtime.
pub fn verify_password(phc: &str, password: &str) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else {
        return false;
    };
    if hash.algorithm.as_str() != ARGON2ID {
        return false;
    }
    Argon2::default()
        .verify_password(password.as_bytes(), &hash)
        .is_ok()
}

/// Configuration check: `phc` parses as a PHC string, is Argon2id, and has
/// valid parameters, a salt and a hash. The error never repeats the string.
pub fn check_password_hash(phc: &str) -> Result<(), String> {
    let hash = PasswordHash::new(phc)
        .map_err(|_| "not a PHC string (expected `$argon2id$v=19$m=…,t=…,p=…$<salt>$<hash>`)")?;
    if hash.algorithm.as_str() != ARGON2ID {
        return Err(format!(
            "must be an Argon2id hash, not `{}`",
            hash.algorithm.as_str()
        ));
    }
    Params::try_from(&hash).map_err(|e| format!("invalid Argon2 parameters: {e}"))?;
    if hash.salt.is_none() || hash.hash.is_none() {
        return Err("the PHC string has no salt or no hash".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_then_verify() {
        let phc = hash_password("correct horse").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$"), "{phc}");
        assert!(!phc.contains("correct horse"));
        check_password_hash(&phc).unwrap();
        assert!(verify_password(&phc, "correct horse"));
        assert!(!verify_password(&phc, "wrong horse"));
        // A random salt each time.
        assert_ne!(phc, hash_password("correct horse").unwrap());
    }

    #[test]
    fn empty_password_is_refused() {
        assert!(hash_password("").is_err());
    }

    #[test]
    fn malformed_or_other_algorithms_fail() {
        assert!(!verify_password("not a phc", "x"));
        assert!(!verify_password("", "x"));
        let argon2i = "$argon2i$v=19$m=16,t=2,p=1$c29tZXNhbHQ$dGVzdGhhc2h0ZXN0aGFzaA";
        assert!(!verify_password(argon2i, "x"));
        assert!(
            check_password_hash(argon2i)
                .unwrap_err()
                .contains("Argon2id")
        );
        let err = check_password_hash("hunter2").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(check_password_hash("$argon2id$v=19$m=1,t=1,p=1$c29tZXNhbHQ$aGFzaGhhc2g").is_err());
        assert!(check_password_hash("$argon2id$v=19$m=19456,t=2,p=1").is_err());
    }
}

//! For the fuzz targets (`fuzz/`): the JWKS parser, which is otherwise
//! reached only through a file or a fetch. Not an API.

/// Parses `document` as a JWKS, as a file or a fetched document is, and
/// verifies `signature` over `message` with every key kept: each key's
/// `kid` and verdict, or the parser's reason.
pub fn jwks_verify(
    document: &[u8],
    message: &[u8],
    signature: &[u8],
) -> Result<Vec<(Option<String>, bool)>, String> {
    Ok(crate::jwk::parse_jwks(document)?
        .into_iter()
        .map(|jwk| {
            let verified = jwk.key.verify(message, signature);
            (jwk.kid, verified)
        })
        .collect())
}

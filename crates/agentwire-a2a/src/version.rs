//! Which protocol generation a request speaks: its `A2A-Version` header.

/// A protocol generation this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `A2A-Version: 1.0`.
    V1_0,
    /// No header, an empty one, or `0.3`: the spec reads a missing version
    /// as 0.3 (§3.6).
    V0_3,
}

/// A version this server does not speak (`VersionNotSupportedError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("A2A version not supported")]
pub struct UnsupportedVersion;

impl Version {
    /// The version `header` asks for (`A2A-Version`, trimmed); `1.0.x`
    /// and `0.3.x` patch levels are the same generation.
    pub fn from_header(header: Option<&str>) -> Result<Version, UnsupportedVersion> {
        let value = header.map(str::trim).unwrap_or_default();
        match value {
            "" => Ok(Version::V0_3),
            v if v == "1" || v == "1.0" || v.starts_with("1.0.") => Ok(Version::V1_0),
            v if v == "0.3" || v.starts_with("0.3.") => Ok(Version::V0_3),
            _ => Err(UnsupportedVersion),
        }
    }

    /// As the card's `protocolVersion` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1_0 => "1.0",
            Version::V0_3 => "0.3",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_header_is_0_3() {
        assert_eq!(Version::from_header(None), Ok(Version::V0_3));
        assert_eq!(Version::from_header(Some(" ")), Ok(Version::V0_3));
        assert_eq!(Version::from_header(Some("0.3.0")), Ok(Version::V0_3));
        assert_eq!(Version::from_header(Some("1.0")), Ok(Version::V1_0));
        assert_eq!(Version::from_header(Some("2.0")), Err(UnsupportedVersion));
        assert_eq!(Version::from_header(Some("0.2.5")), Err(UnsupportedVersion));
    }
}

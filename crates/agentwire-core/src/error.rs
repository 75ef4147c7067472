//! The error vocabulary every dialect maps from.

/// Why a request or a turn failed, as the client sees it. The string forms are
/// the canonical codes of the Omnia contract; other dialects map from the enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidMessage,
    SessionExpired,
    Internal,
    UploadFailed,
    MediaNotEnabled,
    RateLimited,
    TurnInProgress,
    MaxRoundsExceeded,
    ProviderRateLimited,
    ProviderUnavailable,
    ProviderStalled,
    ProviderTimeout,
    ProviderAuthFailed,
    CredentialExpired,
    /// A code a scripted handler names itself (the test handler's `TEST_ERROR`).
    Custom(&'static str),
}

impl ErrorCode {
    /// Every code but `Custom`, for exporting metrics with a fixed label set.
    pub const KNOWN: [ErrorCode; 14] = [
        ErrorCode::InvalidMessage,
        ErrorCode::SessionExpired,
        ErrorCode::Internal,
        ErrorCode::UploadFailed,
        ErrorCode::MediaNotEnabled,
        ErrorCode::RateLimited,
        ErrorCode::TurnInProgress,
        ErrorCode::MaxRoundsExceeded,
        ErrorCode::ProviderRateLimited,
        ErrorCode::ProviderUnavailable,
        ErrorCode::ProviderStalled,
        ErrorCode::ProviderTimeout,
        ErrorCode::ProviderAuthFailed,
        ErrorCode::CredentialExpired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidMessage => "INVALID_MESSAGE",
            ErrorCode::SessionExpired => "SESSION_EXPIRED",
            ErrorCode::Internal => "INTERNAL_ERROR",
            ErrorCode::UploadFailed => "UPLOAD_FAILED",
            ErrorCode::MediaNotEnabled => "MEDIA_NOT_ENABLED",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::TurnInProgress => "TURN_IN_PROGRESS",
            ErrorCode::MaxRoundsExceeded => "MAX_ROUNDS_EXCEEDED",
            ErrorCode::ProviderRateLimited => "PROVIDER_RATE_LIMITED",
            ErrorCode::ProviderUnavailable => "PROVIDER_UNAVAILABLE",
            ErrorCode::ProviderStalled => "PROVIDER_STALLED",
            ErrorCode::ProviderTimeout => "PROVIDER_TIMEOUT",
            ErrorCode::ProviderAuthFailed => "PROVIDER_AUTH_FAILED",
            ErrorCode::CredentialExpired => "CREDENTIAL_EXPIRED",
            ErrorCode::Custom(code) => code,
        }
    }
}

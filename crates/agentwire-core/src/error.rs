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
    /// A voice call's provider failed, or the call could not go on.
    DuplexError,
    /// A voice provider's counter-offer needs an audio format the server
    /// does not serve.
    UnsatisfiableFormat,
    /// A session's `declare` was refused (`error.details` says why).
    SessionDeclarationRefused,
    /// A compile-mode agent's pack did not compile for the session.
    PackCompileFailed,
    /// A code a scripted handler names itself (the test handler's `TEST_ERROR`).
    Custom(&'static str),
}

impl ErrorCode {
    /// Every code but `Custom`, for exporting metrics with a fixed label set.
    pub const KNOWN: [ErrorCode; 18] = [
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
        ErrorCode::DuplexError,
        ErrorCode::UnsatisfiableFormat,
        ErrorCode::SessionDeclarationRefused,
        ErrorCode::PackCompileFailed,
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
            ErrorCode::DuplexError => "DUPLEX_ERROR",
            ErrorCode::UnsatisfiableFormat => "UNSATISFIABLE_FORMAT",
            ErrorCode::SessionDeclarationRefused => "SESSION_DECLARATION_REFUSED",
            ErrorCode::PackCompileFailed => "pack_compile_failed",
            ErrorCode::Custom(code) => code,
        }
    }
}

/// How many distinct custom codes a process learns from other replicas;
/// past it they read as `Internal`, so no peer can grow its memory.
const MAX_CUSTOM_CODES: usize = 64;

impl ErrorCode {
    /// The code called `name` ([`ErrorCode::as_str`] read back, from a
    /// peer or a store): a known one, or a custom one (kept for the
    /// process's life: custom codes are a handful of constants).
    pub fn named(name: &str) -> ErrorCode {
        if let Some(known) = ErrorCode::KNOWN.iter().find(|code| code.as_str() == name) {
            return *known;
        }
        static CUSTOM: parking_lot::Mutex<Vec<&'static str>> = parking_lot::Mutex::new(Vec::new());
        let mut custom = CUSTOM.lock();
        if let Some(code) = custom.iter().find(|code| **code == name) {
            return ErrorCode::Custom(code);
        }
        if custom.len() >= MAX_CUSTOM_CODES {
            return ErrorCode::Internal;
        }
        let code: &'static str = Box::leak(name.to_owned().into_boxed_str());
        custom.push(code);
        ErrorCode::Custom(code)
    }
}

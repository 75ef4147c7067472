//! `telemetry.traces`: OpenTelemetry traces over OTLP, off unless present.

use serde::Deserialize;

use super::ConfigError;

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/HTTP with protobuf bodies (`http/protobuf`), port 4318.
    HttpProtobuf,
    /// OTLP/gRPC (`grpc`), port 4317.
    Grpc,
}

/// Validated `telemetry.traces`.
#[derive(Debug, Clone, PartialEq)]
pub struct TracesConfig {
    /// The collector: for `http/protobuf` the full URL (with `/v1/traces`),
    /// for `grpc` the server's URL. `None`: the standard
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// variables, else the protocol's localhost default.
    pub endpoint: Option<String>,
    pub protocol: OtlpProtocol,
    /// `service.name` of every span.
    pub service_name: String,
}

/// `telemetry`: OpenTelemetry export.
#[derive(Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    /// Traces over OTLP. Default: off.
    traces: Option<RawTraces>,
}

/// `telemetry.traces`: spans exported over OTLP.
#[derive(Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTraces {
    /// The collector: for `http/protobuf` the full URL (with `/v1/traces`),
    /// for `grpc` the server's URL. Default: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
    /// then `OTEL_EXPORTER_OTLP_ENDPOINT`, then the protocol's localhost default.
    endpoint: Option<String>,
    /// `http/protobuf` or `grpc`; else `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`
    /// / `OTEL_EXPORTER_OTLP_PROTOCOL`; else `http/protobuf`.
    protocol: Option<String>,
    /// Else `OTEL_SERVICE_NAME`; else `agentwire`.
    service_name: Option<String>,
}

/// `None` when traces are off: no `telemetry.traces`, or
/// `OTEL_SDK_DISABLED=true` (the standard switch).
pub(super) fn validate(
    raw: Option<RawTelemetry>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TracesConfig>, ConfigError> {
    let Some(traces) = raw.and_then(|raw| raw.traces) else {
        return Ok(None);
    };
    if lookup("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let (protocol, key) = match traces.protocol {
        Some(protocol) => (protocol, "telemetry.traces.protocol"),
        None => match lookup("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(protocol) => (protocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            None => match lookup("OTEL_EXPORTER_OTLP_PROTOCOL") {
                Some(protocol) => (protocol, "OTEL_EXPORTER_OTLP_PROTOCOL"),
                None => ("http/protobuf".to_owned(), "telemetry.traces.protocol"),
            },
        },
    };
    let protocol = match protocol.trim() {
        "http/protobuf" => OtlpProtocol::HttpProtobuf,
        "grpc" => OtlpProtocol::Grpc,
        _ => {
            // As given, not trimmed: a substituted value is hidden only in
            // the form it was given.
            return Err(ConfigError::new(
                key,
                format!(
                    "unsupported OTLP protocol {protocol:?}: use \"http/protobuf\" or \"grpc\""
                ),
            ));
        }
    };
    if let Some(endpoint) = &traces.endpoint
        && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
    {
        return Err(ConfigError::new(
            "telemetry.traces.endpoint",
            "must start with http:// or https://",
        ));
    }
    let service_name = traces
        .service_name
        .or_else(|| lookup("OTEL_SERVICE_NAME"))
        .unwrap_or_else(|| "agentwire".to_owned());
    Ok(Some(TracesConfig {
        endpoint: traces.endpoint,
        protocol,
        service_name,
    }))
}

#[cfg(test)]
mod tests {
    use super::{OtlpProtocol, RawTelemetry, validate};

    fn parse(yaml: &str, env: &[(&str, &str)]) -> Result<Option<super::TracesConfig>, String> {
        let raw: Option<RawTelemetry> = serde_saphyr::from_str(yaml).unwrap();
        let lookup = |name: &str| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        };
        validate(raw, &lookup).map_err(|e| e.to_string())
    }

    #[test]
    fn traces_are_off_unless_configured_and_not_disabled() {
        assert_eq!(parse("null", &[]), Ok(None));
        assert_eq!(
            parse("{}", &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x")]),
            Ok(None)
        );
        assert_eq!(
            parse("traces: {}", &[("OTEL_SDK_DISABLED", "true")]),
            Ok(None)
        );
        let on = parse("traces: {}", &[]).unwrap().unwrap();
        assert_eq!(on.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(on.service_name, "agentwire");
        assert_eq!(on.endpoint, None);
    }

    #[test]
    fn the_protocol_comes_from_the_file_then_the_standard_variables() {
        let grpc = parse("traces: {}", &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(grpc.unwrap().unwrap().protocol, OtlpProtocol::Grpc);
        let file_wins = parse(
            "traces: {protocol: http/protobuf}",
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
        );
        assert_eq!(
            file_wins.unwrap().unwrap().protocol,
            OtlpProtocol::HttpProtobuf
        );
        let json = parse(
            "traces: {}",
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")],
        );
        assert!(
            json.unwrap_err()
                .starts_with("OTEL_EXPORTER_OTLP_PROTOCOL: unsupported"),
            "the error names the variable"
        );
        let bad = parse("traces: {endpoint: collector:4318}", &[]);
        assert!(bad.unwrap_err().starts_with("telemetry.traces.endpoint: "));
    }
}

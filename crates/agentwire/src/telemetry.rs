//! Traces over OTLP (`telemetry.traces`): the exporter, the batch processor
//! and the `tracing` layer that feeds them. Built only when configured, so
//! with traces off no exporter exists and the spans of
//! `agentwire_core::trace` stay disabled.

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::config::{OtlpProtocol, TracesConfig};

/// A running trace pipeline. [`Traces::shutdown`] exports what is still
/// batched.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Builds the exporter and its batch processor, which runs as a task
    /// on the current tokio runtime (so this is called inside it).
    pub fn start(config: &TracesConfig) -> anyhow::Result<Traces> {
        let exporter = match config.protocol {
            OtlpProtocol::HttpProtobuf => {
                let builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary);
                match &config.endpoint {
                    Some(endpoint) => builder.with_endpoint(endpoint).build(),
                    None => builder.build(),
                }
            }
            OtlpProtocol::Grpc => {
                let builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
                match &config.endpoint {
                    Some(endpoint) => builder.with_endpoint(endpoint).build(),
                    None => builder.build(),
                }
            }
        }
        .context("telemetry.traces: cannot build the OTLP exporter")?;
        let processor =
            BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(
                Resource::builder()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        Ok(Traces { provider })
    }

    /// The layer that turns the trace spans (and those alone) into
    /// OpenTelemetry spans.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let tracer = self.provider.tracer("agentwire");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(
                Targets::new().with_target(agentwire_core::trace::TARGET, tracing::Level::DEBUG),
            )
    }

    /// Exports the spans still batched and stops. Called outside the
    /// runtime's tasks (it waits for the processor's task to finish).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("telemetry: flushing traces failed: {e}");
        }
    }
}

//! `http` tools: one tool per HTTP API call, from a request template.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire_core::{ToolBox, ToolSource, ToolSpec};
use async_trait::async_trait;
use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde_json::Value;

use crate::schema::ArgumentSchema;
use crate::template::{Encoding, Template};
use crate::{DEFAULT_TIMEOUT, format_duration};

/// The most of a response body a tool reads; past it the call fails.
const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;

/// The methods a tool may use.
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// How many redirects (within the origin) a call follows.
const MAX_REDIRECTS: usize = 5;

/// The longest tool name model providers accept (OpenAI's limit).
const MAX_NAME_LEN: usize = 64;

/// One HTTP tool, as the config describes it.
///
/// `url`, header values and `body` are templates (see the crate docs). The
/// `Debug` output leaves out header values, which often hold credentials.
#[derive(Clone)]
pub struct HttpToolSettings {
    /// The tool's name as the model sees it: letters, digits, `_` and `-`,
    /// at most 64.
    pub name: String,
    pub description: String,
    /// A JSON Schema (`"type": "object"`) for the arguments.
    pub parameters: Value,
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`, `HEAD` or `OPTIONS` (any case).
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// For the whole call: connecting, sending, and reading the response.
    pub timeout: Duration,
}

impl HttpToolSettings {
    /// Settings with no description, headers or body, an empty-object schema
    /// and the [default timeout](DEFAULT_TIMEOUT).
    pub fn new(
        name: impl Into<String>,
        method: impl Into<String>,
        url: impl Into<String>,
    ) -> HttpToolSettings {
        HttpToolSettings {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for HttpToolSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("HttpToolSettings")
            .field("name", &self.name)
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &header_names)
            .field("body", &self.body.is_some())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Builds an HTTP tool: one [`ToolSource`] whose box holds one tool.
///
/// Checks everything it can up front and names the problem: the name, the
/// schema (it must compile and describe an object), the method, the
/// templates (they must parse, use only arguments the schema declares, keep
/// placeholders out of the URL's scheme and host, and a JSON body must stay
/// JSON), the header names, and the timeout.
pub fn http_tool(settings: HttpToolSettings) -> Result<Arc<dyn ToolSource>, String> {
    let name = settings.name.clone();
    let tool =
        HttpTool::new(settings).map_err(|problem| format!("http tool \"{name}\": {problem}"))?;
    Ok(Arc::new(HttpToolSource(Arc::new(tool))))
}

struct HttpToolSource(Arc<HttpTool>);

#[async_trait]
impl ToolSource for HttpToolSource {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn kind(&self) -> &'static str {
        "http"
    }

    /// Cheap: every box is the same stateless tool.
    async fn open(&self) -> Result<Arc<dyn ToolBox>, String> {
        Ok(self.0.clone())
    }
}

/// How a body's placeholders are written, and the content type it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Json,
    Form,
    Text,
}

/// A tool's headers: each name and its value's template.
type Headers = Vec<(HeaderName, Template)>;

struct HttpTool {
    name: String,
    specs: [ToolSpec; 1],
    schema: ArgumentSchema,
    method: Method,
    url: Template,
    headers: Headers,
    body: Option<(Template, BodyKind)>,
    /// `Content-Type` to add when the config sets none (a JSON body).
    default_content_type: Option<HeaderValue>,
    timeout: Duration,
    client: reqwest::Client,
}

impl HttpTool {
    fn new(settings: HttpToolSettings) -> Result<HttpTool, String> {
        let HttpToolSettings {
            name,
            description,
            parameters,
            method,
            url,
            headers,
            body,
            timeout,
        } = settings;

        check_name(&name)?;
        let schema = check_schema(&parameters)?;
        let declared = Declared(declared_arguments(&parameters));
        let method = parse_method(&method)?;
        let url = declared.template(&url, "url")?;
        check_url(&url)?;
        let (headers, content_type) = parse_headers(headers, &declared)?;
        let body = body
            .map(|body| parse_body(&body, content_type.as_deref(), &declared))
            .transpose()?;
        // A JSON body the config gives no type is sent as JSON.
        let default_content_type = match (&body, &content_type) {
            (Some((_, BodyKind::Json)), None) => Some(HeaderValue::from_static("application/json")),
            _ => None,
        };
        if timeout.is_zero() {
            return Err("timeout must be more than zero".to_owned());
        }
        let client = reqwest::Client::builder()
            .redirect(same_origin_redirects())
            .build()
            .map_err(|error| format!("cannot build an HTTP client: {error}"))?;

        Ok(HttpTool {
            specs: [ToolSpec {
                name: name.clone(),
                description,
                parameters,
            }],
            name,
            schema,
            method,
            url,
            headers,
            body,
            default_content_type,
            timeout,
            client,
        })
    }

    /// Sends the request and reads the result. Every message is safe to show
    /// the model: no URL (it may carry a key), no header value.
    async fn request(&self, arguments: &Value) -> Result<Value, String> {
        let name = &self.name;
        let url = Url::parse(&self.url.render(arguments, Encoding::Percent))
            .map_err(|_| format!("{name}: the arguments make an invalid URL"))?;
        let mut request = self.client.request(self.method.clone(), url);
        for (header, template) in &self.headers {
            let value = HeaderValue::from_str(&template.render(arguments, Encoding::Text))
                .map_err(|_| {
                    format!("{name}: the arguments make an invalid value for header {header}")
                })?;
            request = request.header(header, value);
        }
        if let Some(content_type) = &self.default_content_type {
            request = request.header(CONTENT_TYPE, content_type);
        }
        if let Some((template, kind)) = &self.body {
            let encoding = match kind {
                BodyKind::Json => Encoding::Json,
                BodyKind::Form => Encoding::Percent,
                BodyKind::Text => Encoding::Text,
            };
            request = request.body(template.render(arguments, encoding));
        }

        let mut response = request
            .send()
            .await
            .map_err(|error| describe_error(name, &error))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {} from {name}", status.as_u16()));
        }
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.to_ascii_lowercase().contains("json"));

        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| describe_error(name, &error))?
        {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(format!(
                    "the response from {name} is larger than {} MiB",
                    MAX_RESPONSE_BYTES / (1024 * 1024)
                ));
            }
            body.extend_from_slice(&chunk);
        }
        if is_json && let Ok(value) = serde_json::from_slice::<Value>(&body) {
            return Ok(value);
        }
        Ok(Value::String(String::from_utf8_lossy(&body).into_owned()))
    }
}

#[async_trait]
impl ToolBox for HttpTool {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<Value, String> {
        if name != self.name {
            return Err(format!("unknown tool \"{name}\""));
        }
        self.schema.validate(&arguments)?;
        let started = Instant::now();
        let result = match tokio::time::timeout(self.timeout, self.request(&arguments)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "{name} timed out after {}",
                format_duration(self.timeout)
            )),
        };
        tracing::info!(
            tool = %self.name,
            ok = result.is_ok(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "http tool call"
        );
        if let Err(error) = &result {
            tracing::debug!(tool = %self.name, %error, "http tool call failed");
        }
        result
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "the name must be 1 to {MAX_NAME_LEN} letters, digits, `_` or `-`"
        ))
    }
}

fn check_schema(parameters: &Value) -> Result<ArgumentSchema, String> {
    let Some(object) = parameters.as_object() else {
        return Err("parameters must be a JSON Schema object".to_owned());
    };
    if let Some(kind) = object.get("type")
        && kind != "object"
    {
        return Err("parameters must describe an object (\"type\": \"object\")".to_owned());
    }
    ArgumentSchema::compile(parameters).map_err(|problem| format!("parameters: {problem}"))
}

/// The method, one of [`METHODS`] in any case.
fn parse_method(method: &str) -> Result<Method, String> {
    let upper = method.trim().to_ascii_uppercase();
    if !METHODS.contains(&upper.as_str()) {
        return Err(format!(
            "method \"{method}\" is not one of {}",
            METHODS.join(", ")
        ));
    }
    Method::from_bytes(upper.as_bytes()).map_err(|_| format!("invalid method \"{method}\""))
}

/// The headers as names and value templates, and the `Content-Type` they
/// set (lowercase), if any.
fn parse_headers(
    headers: Vec<(String, String)>,
    declared: &Declared<'_>,
) -> Result<(Headers, Option<String>), String> {
    let mut parsed = Vec::with_capacity(headers.len());
    let mut content_type = None;
    for (header, value) in headers {
        let header_name = HeaderName::from_bytes(header.trim().as_bytes())
            .map_err(|_| format!("header \"{header}\" is not a valid header name"))?;
        // The value is not echoed: it may be a credential.
        let template = declared.template(&value, &format!("header \"{header}\""))?;
        if HeaderValue::from_str(&template.render(&Value::Null, Encoding::Text)).is_err() {
            return Err(format!(
                "header \"{header}\" has characters a header value cannot hold"
            ));
        }
        if header_name == CONTENT_TYPE {
            content_type = Some(value.to_ascii_lowercase());
        }
        parsed.push((header_name, template));
    }
    Ok((parsed, content_type))
}

/// The body's template and how its placeholders are written: by the
/// `content_type` the headers set, else JSON when it looks like JSON. A
/// JSON body must stay JSON once filled.
fn parse_body(
    body: &str,
    content_type: Option<&str>,
    declared: &Declared<'_>,
) -> Result<(Template, BodyKind), String> {
    let template = declared.template(body, "body")?;
    let kind = match content_type {
        Some(ct) if ct.contains("json") => BodyKind::Json,
        Some(ct) if ct.contains("x-www-form-urlencoded") => BodyKind::Form,
        Some(_) => BodyKind::Text,
        None if body.trim_start().starts_with(['{', '[']) => BodyKind::Json,
        None => BodyKind::Text,
    };
    if kind == BodyKind::Json {
        let sample = template.render(&Value::Null, Encoding::Json);
        serde_json::from_str::<Value>(&sample).map_err(|error| {
            format!("body is not valid JSON once its placeholders are filled: {error}")
        })?;
    }
    Ok((template, kind))
}

/// The argument names the schema declares, when it lists them: templates
/// may use no other.
struct Declared<'a>(Option<Vec<&'a str>>);

impl Declared<'_> {
    /// `text` as a template that uses only declared arguments; `what` names
    /// it in the error.
    fn template(&self, text: &str, what: &str) -> Result<Template, String> {
        let template = Template::parse(text).map_err(|problem| format!("{what}: {problem}"))?;
        if let Some(declared) = &self.0
            && let Some(unknown) = template.arguments().find(|arg| !declared.contains(arg))
        {
            return Err(format!(
                "{what} uses \"{unknown}\", which the parameters schema does not declare"
            ));
        }
        Ok(template)
    }
}

/// The argument names the schema declares, when it lists them (`properties`).
fn declared_arguments(parameters: &Value) -> Option<Vec<&str>> {
    let properties = parameters.get("properties")?.as_object()?;
    Some(properties.keys().map(String::as_str).collect())
}

/// The URL must be http(s), parse once filled, and keep its scheme and host
/// out of the model's hands.
fn check_url(url: &Template) -> Result<(), String> {
    let sample = url.render(&Value::Null, Encoding::Percent);
    let parsed = Url::parse(&sample).map_err(|error| format!("url is not a valid URL: {error}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("url must be http:// or https://".to_owned());
    }
    if url.has_placeholders() {
        let prefix = url.literal_prefix();
        let authority_ends = prefix
            .split_once("://")
            .is_some_and(|(_, rest)| rest.contains(['/', '?', '#']));
        if !authority_ends {
            return Err(
                "url placeholders may stand in the path, query or fragment only, not in the scheme or host"
                    .to_owned(),
            );
        }
    }
    Ok(())
}

/// Follows redirects within the configured origin only: another host would
/// receive the configured headers (credentials among them). A redirect not
/// followed is a non-2xx answer, so an error.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !same_origin || attempt.previous().len() > MAX_REDIRECTS {
            attempt.stop()
        } else {
            attempt.follow()
        }
    })
}

/// A transport error, without reqwest's own message (it names the URL, which
/// may carry a key): what happened, and the innermost cause.
fn describe_error(name: &str, error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut cause = None;
    let mut source = error.source();
    while let Some(inner) = source {
        cause = Some(inner.to_string());
        source = inner.source();
    }
    if error.is_timeout() {
        return format!("{name} timed out");
    }
    let what = if error.is_connect() {
        format!("could not connect to {name}")
    } else if error.is_redirect() {
        format!("{name} redirected too often")
    } else if error.is_body() || error.is_decode() {
        format!("could not read the response from {name}")
    } else {
        format!("the request to {name} failed")
    };
    match cause {
        Some(cause) => format!("{what}: {cause}"),
        None => what,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings() -> HttpToolSettings {
        // The client is built with the tool: install what `main` would.
        let _ = rustls::crypto::ring::default_provider().install_default();
        HttpToolSettings {
            description: "Weather for a city".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"]
            }),
            ..HttpToolSettings::new(
                "weather",
                "get",
                "https://api.test/w/{{city}}?days={{days}}",
            )
        }
    }

    fn problem(settings: HttpToolSettings) -> String {
        match http_tool(settings) {
            Ok(_) => panic!("accepted"),
            Err(problem) => problem,
        }
    }

    #[test]
    fn good_settings_are_accepted() {
        let mut good = settings();
        good.headers = vec![("Authorization".to_owned(), "Bearer k-{{city}}".to_owned())];
        good.body = Some(r#"{"city": {{city}}, "note": "in {{city}}"}"#.to_owned());
        let source = http_tool(good).unwrap();
        assert_eq!(source.name(), "weather");
    }

    #[test]
    fn each_problem_is_named() {
        type Change = fn(&mut HttpToolSettings);
        let cases: Vec<(Change, &str)> = vec![
            (|s| s.name = "bad name".to_owned(), "the name must be"),
            (
                |s| s.parameters = json!("string"),
                "parameters must be a JSON Schema object",
            ),
            (
                |s| s.parameters = json!({"type": "array"}),
                "must describe an object",
            ),
            (
                |s| s.parameters = json!({"type": "object", "properties": {"x": {"type": 5}}}),
                "parameters: the schema is invalid",
            ),
            (
                |s| s.method = "FETCH".to_owned(),
                "method \"FETCH\" is not one of",
            ),
            (
                |s| s.url = "https://api.test/{{city".to_owned(),
                "url: unclosed",
            ),
            (
                |s| s.url = "https://api.test/{{town}}".to_owned(),
                "url uses \"town\", which the parameters schema does not declare",
            ),
            (
                |s| s.url = "https://{{city}}.api.test/".to_owned(),
                "not in the scheme or host",
            ),
            (|s| s.url = "ftp://api.test/".to_owned(), "url must be http"),
            (|s| s.url = "not a url".to_owned(), "url is not a valid URL"),
            (
                |s| s.headers = vec![("bad header".to_owned(), "v".to_owned())],
                "header \"bad header\" is not a valid header name",
            ),
            (
                |s| s.headers = vec![("X-Key".to_owned(), "secret\nvalue".to_owned())],
                "header \"X-Key\" has characters",
            ),
            (
                |s| s.body = Some(r#"{"city": "{{city}}" "#.to_owned()),
                "body is not valid JSON",
            ),
            (
                |s| s.body = Some("{{nope}}".to_owned()),
                "body uses \"nope\"",
            ),
            (
                |s| s.timeout = Duration::ZERO,
                "timeout must be more than zero",
            ),
        ];
        for (change, expected) in cases {
            let mut bad = settings();
            change(&mut bad);
            let problem = problem(bad);
            assert!(problem.starts_with("http tool \""), "{problem}");
            assert!(problem.contains(expected), "{problem} lacks {expected}");
            assert!(!problem.contains("secret"), "{problem}");
        }
    }

    #[test]
    fn body_kind_follows_the_content_type() {
        let mut form = settings();
        form.method = "POST".to_owned();
        form.headers = vec![(
            "content-type".to_owned(),
            "application/x-www-form-urlencoded".to_owned(),
        )];
        form.body = Some("city={{city}}".to_owned());
        let tool = HttpTool::new(form).unwrap();
        assert_eq!(tool.body.as_ref().unwrap().1, BodyKind::Form);
        assert!(tool.default_content_type.is_none());

        let mut text = settings();
        text.body = Some("city: {{city}}".to_owned());
        let tool = HttpTool::new(text).unwrap();
        assert_eq!(tool.body.as_ref().unwrap().1, BodyKind::Text);

        let mut json = settings();
        json.body = Some("  [{{city}}]".to_owned());
        let tool = HttpTool::new(json).unwrap();
        assert_eq!(tool.body.as_ref().unwrap().1, BodyKind::Json);
        assert_eq!(
            tool.default_content_type.as_ref().unwrap(),
            "application/json"
        );
    }

    #[test]
    fn a_schema_without_properties_allows_any_placeholder() {
        let mut open = settings();
        open.parameters = json!({"type": "object"});
        open.url = "https://api.test/{{anything}}".to_owned();
        assert!(http_tool(open).is_ok());
    }

    #[test]
    fn debug_hides_header_values() {
        let mut secret = settings();
        secret.headers = vec![("Authorization".to_owned(), "Bearer sk-secret".to_owned())];
        let debug = format!("{secret:?}");
        assert!(debug.contains("Authorization"), "{debug}");
        assert!(!debug.contains("sk-secret"), "{debug}");
    }

    #[tokio::test]
    async fn calls_check_the_name_and_the_schema_first() {
        let source = http_tool(settings()).unwrap();
        let tools = source.open().await.unwrap();
        assert_eq!(tools.specs().len(), 1);
        assert_eq!(tools.specs()[0].name, "weather");
        assert_eq!(tools.specs()[0].description, "Weather for a city");
        let error = tools.call("other", json!({})).await.unwrap_err();
        assert_eq!(error, "unknown tool \"other\"");
        let error = tools.call("weather", json!({"city": 1})).await.unwrap_err();
        assert!(error.contains("/city"), "{error}");
    }
}

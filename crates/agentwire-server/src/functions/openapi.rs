//! `GET /openapi.json`: an OpenAPI 3.1 document of the HTTP APIs a client
//! calls: each function (`/functions/{name}`, its input and output schemas
//! inlined as configured), the sessions API, the memories API, the media
//! routes and Gnosari's `/assets`, and the agents listing. It lives beside the functions because it is
//! built from their schemas; the rest is written by hand here, and the
//! end-to-end suite holds it to what the server answers (every route
//! listed, answers matching their schemas).
//!
//! Anyone may read it, as anyone may read `/api/v1/agents`: it names the
//! function agents and their schemas, which are config, not secrets.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::routes::api::{ApiError, json as json_response};
use crate::{AppState, FunctionSpec};

pub(super) async fn serve(State(state): State<Arc<AppState>>) -> Response {
    json_response(StatusCode::OK, &document(&state))
}

pub(super) fn method_not_allowed() -> Response {
    (
        [(header::ALLOW, "GET")],
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    )
        .into_response()
}

/// The whole document for the agents `state` serves.
fn document(state: &AppState) -> Value {
    let mut paths = function_paths(state);
    for (path, item) in [
        sessions_paths(),
        memories_paths(),
        media_paths(),
        other_paths(),
    ]
    .into_iter()
    .flat_map(|p| p.into_iter())
    {
        paths.insert(path, item);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "agentwire",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP APIs of an agentwire server: its REST functions, the \
                caller's sessions and memories, and its agents. The WebSocket protocols \
                (/ws, /ws/agent/{agent}) are described by AsyncAPI documents at \
                /api/asyncapi/omnia.yaml and /api/asyncapi/gnosari.yaml."
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                    "description": "An API key or a JWT."},
                "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-AUTH-TOKEN"},
                "apiKeyQuery": {"type": "apiKey", "in": "query", "name": "api_key"}
            },
            "schemas": schemas(),
            "responses": {"FunctionError": {"description": "The call failed: see error.",
                "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/FunctionError"}}}}}
        }
    })
}

/// `/functions/{name}` for each function agent, by name.
fn function_paths(state: &AppState) -> Map<String, Value> {
    let mut functions: Vec<(&str, &FunctionSpec)> = state
        .agents()
        .filter_map(|(name, entry)| Some((name.as_str(), entry.facades.function.as_ref()?)))
        .collect();
    functions.sort_by_key(|(name, _)| *name);
    functions
        .into_iter()
        .map(|(name, spec)| (format!("/functions/{name}"), function_operation(name, spec)))
        .collect()
}

fn function_operation(name: &str, spec: &FunctionSpec) -> Value {
    let any = json!({});
    let input = spec.input.as_ref().map_or(&any, |s| &s.document);
    let text = json!({"type": "string", "description": "The agent's answer, as text."});
    let output = spec.output.as_ref().map_or(&text, |s| &s.document);
    let error = json!({"$ref": "#/components/responses/FunctionError"});
    json!({"post": {
        "operationId": format!("call_{name}"),
        "summary": format!("Call the agent {name} as a function"),
        "description": "One turn in a session of its own. A JSON string input is the \
            message's text; any other value is sent as compact JSON text.",
        "security": [{"bearer": []}, {}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": input}}},
        "responses": {
            "200": {"description": "The agent's output.", "links": session_links(),
                "content": {"application/json": {
                "schema": {
                    "type": "object",
                    "required": ["output", "invocation_id", "duration_ms"],
                    "additionalProperties": false,
                    "properties": {
                        "output": output,
                        "invocation_id": {"type": "string",
                            "description": "The call's session id (/api/v1/sessions/{id})."},
                        "duration_ms": {"type": "integer", "minimum": 0}
                    }
                }
            }}},
            "400": error, "401": error, "403": error, "404": error, "405": error,
            "413": error, "415": error, "429": error, "500": error, "502": error,
            "503": error
        }
    }})
}

/// A call's session, named by its `invocation_id`.
fn session_links() -> Value {
    let id = json!({"id": "$response.body#/invocation_id"});
    json!({
        "GetSession": {"operationId": "getSession", "parameters": id},
        "ListSessionMessages": {"operationId": "listSessionMessages", "parameters": id}
    })
}

/// An API error response (`{"error": text}`) with `description`.
fn api_error(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/ApiError"}}}})
}

/// A JSON response of the schema `name` in the components.
fn ok(description: &str, name: &str) -> Value {
    json!({"description": description, "content": {"application/json": {
        "schema": {"$ref": format!("#/components/schemas/{name}")}}}})
}

/// The credentials the JSON APIs take, or none (an anonymous caller).
fn api_security() -> Value {
    json!([{"bearer": []}, {"apiKeyHeader": []}, {"apiKeyQuery": []}, {}])
}

/// The largest count a query parameter takes: the server reads a
/// 64-bit number and refuses a larger one (400).
const MAX_COUNT: u64 = u64::MAX;

fn count_schema(minimum: u64) -> Value {
    json!({"type": "integer", "minimum": minimum, "maximum": MAX_COUNT})
}

fn limit_parameter(default: u64, max: u64) -> Value {
    json!({"name": "limit", "in": "query", "required": false,
        "description": format!("Default {default}; a larger value is taken as {max}."),
        "schema": count_schema(1)})
}

fn id_parameter(what: &str) -> Value {
    json!({"name": "id", "in": "path", "required": true,
        "description": format!("The {what}'s id."), "schema": {"type": "string"}})
}

fn sessions_paths() -> Map<String, Value> {
    let missing = api_error("No such session of the caller's.");
    let refused = api_error("A refused credential.");
    let invalid = api_error("An invalid query parameter.");
    let cursor = json!({"name": "cursor", "in": "query", "required": false,
        "description": "The previous page's next_cursor, as it was (opaque).",
        "schema": {"type": "string"}});
    let after = json!({"name": "after", "in": "query", "required": false,
        "description": "Show messages after this seq.", "schema": count_schema(0)});
    let sessions = json!({"get": {
        "operationId": "listSessions", "summary": "The caller's sessions, most recent first",
        "security": api_security(),
        "parameters": [limit_parameter(20, 100), cursor],
        "responses": {"200": ok("A page of sessions.", "SessionPage"),
            "400": invalid, "401": refused}
    }});
    let session = json!({
        "get": {"operationId": "getSession", "summary": "One session",
            "security": api_security(), "parameters": [id_parameter("session")],
            "responses": {"200": ok("The session.", "Session"), "401": refused,
                "404": missing}},
        "delete": {"operationId": "deleteSession",
            "summary": "Delete a session, its messages and its summary",
            "security": api_security(), "parameters": [id_parameter("session")],
            "responses": {"204": {"description": "Deleted."}, "401": refused,
                "404": missing, "409": api_error("A turn is running on the session.")}}
    });
    let messages = json!({"get": {
        "operationId": "listSessionMessages", "summary": "A session's messages, by seq",
        "security": api_security(),
        "parameters": [id_parameter("session"), limit_parameter(100, 500), after],
        "responses": {"200": ok("A page of messages.", "MessagePage"),
            "400": invalid, "401": refused, "404": missing}
    }});
    Map::from_iter([
        ("/api/v1/sessions".to_owned(), sessions),
        ("/api/v1/sessions/{id}".to_owned(), session),
        ("/api/v1/sessions/{id}/messages".to_owned(), messages),
    ])
}

fn memories_paths() -> Map<String, Value> {
    let missing = api_error("No such memory of the caller's, or memory is not enabled.");
    let refused = api_error("A refused credential.");
    let text = |name: &str, what: &str| {
        json!({"name": name, "in": "query", "required": false, "description": what,
            "schema": {"type": "string"}})
    };
    let offset = json!({"name": "offset", "in": "query", "required": false,
        "schema": count_schema(0)});
    let list = json!({
        "get": {"operationId": "listMemories", "summary": "The caller's memories, newest first",
            "security": api_security(),
            "parameters": [text("agent", "One agent's."),
                text("memory_facet", "One facet's; empty: those without a facet."),
                limit_parameter(20, 100), offset],
            "responses": {"200": ok("A page of memories.", "MemoryPage"),
                "400": api_error("An invalid limit or offset."), "401": refused,
                "404": missing}},
        "delete": {"operationId": "deleteMemories", "summary": "Delete every memory of the caller's",
            "security": api_security(),
            "responses": {"200": ok("How many were deleted.", "Deleted"), "401": refused,
                "404": missing}}
    });
    let export = json!({"get": {"operationId": "exportMemories",
        "summary": "Every live memory, one JSON object a line", "security": api_security(),
        "responses": {"200": {"description": "Memories as JSON lines.",
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
            "401": refused, "404": missing}}});
    let import = json!({"post": {"operationId": "importMemories",
        "summary": "Remember exported lines in the caller's memory", "security": api_security(),
        "requestBody": {"required": true,
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
        "responses": {"200": ok("How many were imported.", "Imported"),
            "400": api_error("A line that is not a memory (nothing is stored)."),
            "401": refused, "403": api_error("An anonymous caller."), "404": missing}}});
    let one = json!({
        "get": {"operationId": "getMemory", "summary": "One memory", "security": api_security(),
            "parameters": [id_parameter("memory")],
            "responses": {"200": ok("The memory.", "Memory"), "401": refused, "404": missing}},
        "delete": {"operationId": "deleteMemory", "summary": "Delete one memory for good",
            "security": api_security(), "parameters": [id_parameter("memory")],
            "responses": {"204": {"description": "Deleted."}, "401": refused, "404": missing}}
    });
    Map::from_iter([
        ("/api/v1/memories".to_owned(), list),
        ("/api/v1/memories/export".to_owned(), export),
        ("/api/v1/memories/import".to_owned(), import),
        ("/api/v1/memories/{id}".to_owned(), one),
    ])
}

/// The media routes (`docs/src/http-api.md`) and Gnosari's `/assets`
/// (`docs/src/gnosari.md`). Their refusals are plain text, as Go's
/// `http.Error` writes them (the Omnia reference's), not the JSON APIs'
/// `{"error": …}`.
fn media_paths() -> Map<String, Value> {
    let refused = |description: &str| {
        json!({"description": description,
            "content": {"text/plain": {"schema": {"type": "string"}}}})
    };
    let refusals = |statuses: &[(&str, &str)]| -> Map<String, Value> {
        statuses
            .iter()
            .map(|(status, what)| ((*status).to_owned(), refused(what)))
            .collect()
    };
    let common = [
        ("401", "A refused credential."),
        (
            "404",
            "No such media or session of the caller's, or media storage is not enabled.",
        ),
        ("405", "Another method."),
        (
            "429",
            "Too many failed authentication attempts (Retry-After).",
        ),
        ("500", "The media backend failed."),
    ];
    let with = |extra: &[(&str, &str)], ok: (&str, Value)| {
        let mut responses = refusals(&common);
        responses.extend(refusals(extra));
        responses.insert(ok.0.to_owned(), ok.1);
        Value::Object(responses)
    };
    let media_path = [
        json!({"name": "session_id", "in": "path", "required": true,
            "schema": {"type": "string"}}),
        json!({"name": "media_id", "in": "path", "required": true,
            "schema": {"type": "string"}}),
    ];
    let upload_id = json!({"name": "upload_id", "in": "path", "required": true,
        "description": "The upload_id of the ticket.", "schema": {"type": "string"}});
    let request = json!({"post": {"operationId": "requestUpload",
        "summary": "A ticket to upload one file into a session", "security": api_security(),
        "requestBody": {"required": true, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/UploadRequest"}}}},
        "responses": with(&[("400", "An invalid body or session id."),
            ("413", "Larger than the media max_bytes."),
            ("415", "A missing or malformed MIME type.")],
            ("200", ok("Where and how to upload.", "UploadTicket")))}});
    let upload = json!({"put": {"operationId": "upload",
        "summary": "The file's bytes (the local backend; each ticket once)",
        "parameters": [upload_id],
        "requestBody": {"required": true, "content": {"*/*": {
            "schema": {"type": "string", "format": "binary"}}}},
        "responses": with(&[("400", "An invalid, unknown, used or expired upload id, or \
                an empty body."),
            ("413", "More bytes than the ticket's size_bytes or the media max_bytes.")],
            ("204", json!({"description": "Stored."})))}});
    let confirm = json!({"post": {"operationId": "confirmUpload",
        "summary": "After a presigned PUT (the s3 backend)", "security": api_security(),
        "parameters": [upload_id],
        "responses": with(&[("400", "An invalid, unknown or expired upload id, or no \\
                object uploaded.")],
            ("200", ok("The stored file.", "MediaInfo")))}});
    let info = json!({"get": {"operationId": "getMediaInfo", "summary": "A stored file's facts",
        "security": api_security(), "parameters": media_path,
        "responses": with(&[("400", "An invalid path."), ("410", "The file expired.")],
            ("200", ok("The stored file.", "MediaInfo")))}});
    let download = json!({"get": {"operationId": "downloadMedia",
        "summary": "A stored file's bytes", "security": api_security(),
        "parameters": media_path,
        "responses": with(&[("400", "An invalid path."), ("410", "The file expired.")],
            ("200", json!({"description": "The bytes, with the file's Content-Type and \
                Content-Disposition: inline (the local backend).",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}})))}});
    let assets = json!({"post": {"operationId": "uploadAsset",
        "summary": "A Gnosari attachment: one file into a session, at once",
        "security": api_security(),
        "requestBody": {"required": true, "content": {"multipart/form-data": {
            "schema": {"type": "object", "required": ["file", "session_id"],
                "properties": {"file": {"type": "string", "format": "binary",
                    "description": "image/png, image/jpeg, image/webp, image/gif or \
                        application/pdf."},
                    "session_id": {"type": "string"}}}}}},
        "responses": with(&[("400", "A malformed form, or no file or session_id."),
            ("413", "Larger than the media max_bytes."),
            ("415", "Not one of the allowed types.")],
            ("200", ok("The stored asset, to name in a message's attachments.", "Asset")))}});
    let mut paths = Map::from_iter([
        ("/assets".to_owned(), assets),
        ("/media/request-upload".to_owned(), request),
        ("/media/upload/{upload_id}".to_owned(), upload),
        ("/media/confirm-upload/{upload_id}".to_owned(), confirm),
        ("/media/info/{session_id}/{media_id}".to_owned(), info),
        (
            "/media/download/{session_id}/{media_id}".to_owned(),
            download,
        ),
    ]);
    paths["/media/download/{session_id}/{media_id}"]["get"]["responses"]["307"] =
        json!({"description": "A presigned URL for the bytes, valid 1 h (the s3 backend)."});
    paths
}

fn other_paths() -> Map<String, Value> {
    let agents = json!({"get": {"operationId": "listAgents",
        "summary": "The agents the WebSocket serves", "security": [{}],
        "responses": {"200": ok("The agents, by name.", "AgentListing")}}});
    let openapi = json!({"get": {"operationId": "getOpenApi", "summary": "This document",
        "security": [{}],
        "responses": {"200": {"description": "An OpenAPI 3.1 document.",
            "content": {"application/json": {"schema": {"type": "object"}}}}}}});
    Map::from_iter([
        ("/api/v1/agents".to_owned(), agents),
        ("/openapi.json".to_owned(), openapi),
    ])
}

/// Every named schema: the responses' bodies, closed
/// (`additionalProperties: false`) so a field the server adds and this
/// document lacks fails the test that holds them together.
fn schemas() -> Value {
    let mut all = session_schemas();
    all.extend(memory_schemas());
    all.extend(error_schemas());
    all.extend(media_schemas());
    all.insert("AgentListing".to_owned(), agent_listing());
    Value::Object(all)
}

fn session_schemas() -> Map<String, Value> {
    let time = json!({"type": "string", "format": "date-time"});
    let session = json!({"type": "object", "additionalProperties": false,
        "required": ["id", "agent", "created_at", "last_active_at"],
        "properties": {"id": {"type": "string"}, "agent": {"type": "string"},
            "created_at": time, "last_active_at": time,
            "summary": {"type": "object", "additionalProperties": false,
                "required": ["text", "created_at"],
                "properties": {"text": {"type": "string"}, "created_at": time}}}});
    let page = json!({"type": "object", "additionalProperties": false,
        "required": ["sessions", "next_cursor"],
        "properties": {"sessions": {"type": "array",
            "items": {"$ref": "#/components/schemas/Session"}},
            "next_cursor": {"type": ["string", "null"]}}});
    let message = json!({"type": "object", "additionalProperties": false,
        "required": ["seq", "role", "content", "created_at"],
        "properties": {"seq": {"type": "integer", "minimum": 0},
            "role": {"enum": ["user", "assistant", "tool"]},
            "content": {"description": "Text; for a tool step, {call: {id, name, arguments, \
                side}} or {result: {id, status, value}}.",
                "oneOf": [{"type": "string"}, {"type": "object"}]},
            "created_at": time,
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}}}});
    let messages = json!({"type": "object", "additionalProperties": false,
        "required": ["messages", "next_after"],
        "properties": {"messages": {"type": "array",
            "items": {"$ref": "#/components/schemas/Message"}},
            "next_after": {"type": ["integer", "null"]}}});
    Map::from_iter([
        ("Session".to_owned(), session),
        ("SessionPage".to_owned(), page),
        ("Message".to_owned(), message),
        ("MessagePage".to_owned(), messages),
    ])
}

fn memory_schemas() -> Map<String, Value> {
    let text = json!({"type": "string"});
    let time = json!({"type": "string", "format": "date-time"});
    let memory = json!({"type": "object", "additionalProperties": false,
        "required": ["id", "tier", "type", "content", "metadata", "confidence",
            "created_at", "updated_at"],
        "properties": {"id": text, "tier": {"enum": ["caller_agent", "caller"]},
            "agent": text, "memory_facet": text, "type": text, "content": text,
            "metadata": {"type": "object"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "category": text, "about_kind": text, "about_key": text, "purpose": text,
            "title": text, "summary": text, "session_id": text,
            "created_at": time, "updated_at": time, "expires_at": time}});
    let page = json!({"type": "object", "additionalProperties": false,
        "required": ["memories", "next_offset"],
        "properties": {"memories": {"type": "array",
            "items": {"$ref": "#/components/schemas/Memory"}},
            "next_offset": {"type": ["integer", "null"]}}});
    let count = |name: &str| {
        let property =
            Map::from_iter([(name.to_owned(), json!({"type": "integer", "minimum": 0}))]);
        json!({"type": "object", "additionalProperties": false, "required": [name],
            "properties": property})
    };
    Map::from_iter([
        ("Memory".to_owned(), memory),
        ("MemoryPage".to_owned(), page),
        ("Deleted".to_owned(), count("deleted")),
        ("Imported".to_owned(), count("imported")),
    ])
}

fn media_schemas() -> Map<String, Value> {
    let time = json!({"type": "string", "format": "date-time"});
    let request = json!({"type": "object",
        "required": ["session_id", "filename", "mime_type", "size_bytes"],
        "properties": {"session_id": {"type": "string"}, "filename": {"type": "string"},
            "mime_type": {"type": "string"}, "size_bytes": {"type": "integer", "minimum": 1}}});
    let ticket = json!({"type": "object", "additionalProperties": false,
        "required": ["upload_id", "upload_url", "storage_ref", "expires_at"],
        "properties": {"upload_id": {"type": "string"}, "upload_url": {"type": "string"},
            "storage_ref": {"type": "string"}, "expires_at": time,
            "method": {"type": "string", "description": "PUT; omitted means PUT."},
            "headers": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "Headers the upload must carry (a presigned PUT's)."}}});
    let info = json!({"type": "object", "additionalProperties": false,
        "required": ["storage_ref", "filename", "mime_type", "size_bytes", "created_at"],
        "properties": {"storage_ref": {"type": "string"}, "filename": {"type": "string"},
            "mime_type": {"type": "string"}, "size_bytes": {"type": "integer", "minimum": 0},
            "created_at": time, "expires_at": time}});
    let asset = json!({"type": "object", "additionalProperties": false,
        "required": ["asset_id", "session_id", "filename", "mime_type", "size_bytes"],
        "properties": {"asset_id": {"type": "string", "format": "uuid"},
            "session_id": {"type": "string"}, "filename": {"type": "string"},
            "mime_type": {"type": "string"}, "size_bytes": {"type": "integer", "minimum": 1}}});
    Map::from_iter([
        ("Asset".to_owned(), asset),
        ("UploadRequest".to_owned(), request),
        ("UploadTicket".to_owned(), ticket),
        ("MediaInfo".to_owned(), info),
    ])
}

fn error_schemas() -> Map<String, Value> {
    let api = json!({"type": "object", "additionalProperties": false, "required": ["error"],
        "properties": {"error": {"type": "string"}}});
    let function = json!({"type": "object", "additionalProperties": false,
        "required": ["error", "detail"],
        "properties": {
            "error": {"enum": ["method_not_allowed", "missing_function_name",
                "unsupported_media_type", "payload_too_large", "read_body_failed",
                "function_not_found", "input_invalid", "runtime_error", "output_invalid",
                "internal_error", "unauthorized", "forbidden", "rate_limited",
                "server_busy", "unavailable"]},
            "detail": {"type": "string"},
            "raw_output": {"type": "string",
                "description": "The agent's answer, with output_invalid."}}});
    Map::from_iter([
        ("ApiError".to_owned(), api),
        ("FunctionError".to_owned(), function),
    ])
}

fn agent_listing() -> Value {
    let agent = json!({"type": "object", "additionalProperties": false,
        "required": ["name", "access_level", "credential_required", "ai_disclosure",
            "voice", "memory", "a2a_card", "mcp_tool", "function", "pack"],
        "properties": {"name": {"type": "string"},
            "access_level": {"enum": ["public", "private"]},
            "credential_required": {"type": "boolean"},
            "ai_disclosure": {"type": ["boolean", "null"]},
            "voice": {"type": "boolean"},
            "memory": {"enum": ["caller_agent", "caller", null]},
            "a2a_card": {"type": ["string", "null"]},
            "mcp_tool": {"type": ["string", "null"]},
            "function": {"type": ["string", "null"]},
            "pack": {"oneOf": [{"type": "null"}, pack_status()]}}});
    json!({"type": "object", "additionalProperties": false, "required": ["agents", "media"],
        "properties": {"agents": {"type": "array", "items": agent},
            "media": {"type": "boolean"}}})
}

/// A pack agent's pack and its latest compile.
fn pack_status() -> Value {
    let text = json!({"type": ["string", "null"]});
    json!({"type": "object", "additionalProperties": false,
        "required": ["id", "version", "prompt", "compile", "compiles", "error", "warnings"],
        "properties": {"id": text, "version": text, "prompt": text,
            "compile": {"enum": ["at_startup", "per_session"]},
            "compiles": {"type": "integer", "minimum": 0},
            "error": text,
            "warnings": {"type": "array", "items": {"type": "string"}}}})
}

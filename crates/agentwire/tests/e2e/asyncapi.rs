//! The WebSocket dialects' AsyncAPI documents as the binary serves them:
//! the committed files, byte for byte, as YAML. (That every frame of the
//! suite matches them is checked by the suite's `Client` itself.)

use crate::support::{Dialect, TestServer};

#[tokio::test]
async fn the_asyncapi_documents_are_served_as_committed() {
    let server = TestServer::start().await;
    for (path, dialect) in [
        ("/api/asyncapi/omnia.yaml", Dialect::Omnia),
        ("/api/asyncapi/gnosari.yaml", Dialect::Gnosari),
    ] {
        let response = server.http("GET", path, &[], b"").await;
        assert_eq!(response.status, 200, "{path}: {}", response.text());
        assert_eq!(response.header("content-type"), Some("application/yaml"));
        let served = response.text();
        assert_eq!(served, dialect.document_text(), "{path}");
        let document: serde_json::Value =
            serde_saphyr::from_str(&served).unwrap_or_else(|e| panic!("{path} is not YAML: {e}"));
        assert_eq!(document["asyncapi"], "3.0.0", "{path}");
        let posted = server.http("POST", path, &[], b"").await;
        assert_eq!(posted.status, 405, "{path}");
        assert_eq!(posted.header("allow"), Some("GET"), "{path}");
    }
    server.stop().await;
}

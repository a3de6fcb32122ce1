//! The resources of the `resources-*` scenarios: a static text and a static
//! binary resource, the template `test://template/{id}/data`, and
//! `test://watched-resource`, which clients may subscribe to and which the
//! tool `touch_watched_resource` changes (sending `notifications/resources/updated`
//! to subscribed sessions). Unknown URIs are a resource-not-found error carrying
//! the URI in `data` (SEP-2164; rmcp picks the code for the negotiated version).

use std::{
    collections::HashSet,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    ErrorData as McpError,
    model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate},
};
use serde_json::json;

use crate::media;

pub const STATIC_TEXT: &str = "test://static-text";
pub const STATIC_BINARY: &str = "test://static-binary";
pub const WATCHED: &str = "test://watched-resource";
pub const TEMPLATE: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// The direct resources, in a fixed order.
pub fn list() -> Vec<Resource> {
    vec![
        Resource::new(STATIC_TEXT, "static-text")
            .with_description("A static text resource")
            .with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary")
            .with_description("A static binary resource (a PNG image)")
            .with_mime_type(media::PNG_MIME),
        Resource::new(WATCHED, "watched-resource")
            .with_description("A resource that changes when touch_watched_resource is called")
            .with_mime_type("text/plain"),
    ]
}

/// The resource templates.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(TEMPLATE, "template-data")
            .with_description("JSON data for the ID substituted into the URI")
            .with_mime_type("application/json"),
    ]
}

/// The ID in a URI of the form `test://template/{id}/data`.
pub fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix(TEMPLATE_PREFIX)?
        .strip_suffix(TEMPLATE_SUFFIX)
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// The revision of the watched resource, shared by every session.
#[derive(Debug, Default)]
pub struct Watched {
    revision: AtomicU64,
}

impl Watched {
    /// Changes the watched resource; returns its new revision.
    pub fn touch(&self) -> u64 {
        self.revision.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn text(&self) -> String {
        format!(
            "Watched resource, revision {}.",
            self.revision.load(Ordering::SeqCst)
        )
    }
}

/// `resources/read` of `uri`.
pub fn read(uri: &str, watched: &Watched) -> Result<ReadResourceResult, McpError> {
    let contents = match uri {
        STATIC_TEXT => {
            ResourceContents::text("This is the content of the static text resource.", uri)
                .with_mime_type("text/plain")
        }
        STATIC_BINARY => {
            ResourceContents::blob(media::PNG_BASE64, uri).with_mime_type(media::PNG_MIME)
        }
        WATCHED => ResourceContents::text(watched.text(), uri).with_mime_type("text/plain"),
        _ => match template_id(uri) {
            Some(id) => {
                let data = json!({
                    "id": id,
                    "templateTest": true,
                    "data": format!("Data for ID: {id}"),
                });
                ResourceContents::text(data.to_string(), uri).with_mime_type("application/json")
            }
            None => {
                return Err(McpError::resource_not_found(
                    format!("no resource {uri}"),
                    Some(json!({ "uri": uri })),
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

/// Whether `uri` names a resource this server serves (subscribable).
pub fn exists(uri: &str) -> bool {
    matches!(uri, STATIC_TEXT | STATIC_BINARY | WATCHED) || template_id(uri).is_some()
}

/// One session's subscribed URIs.
#[derive(Debug, Default)]
pub struct Subscriptions(Mutex<HashSet<String>>);

impl Subscriptions {
    pub fn subscribe(&self, uri: &str) {
        mcpproxy_support::lock(&self.0).insert(uri.to_owned());
    }

    pub fn unsubscribe(&self, uri: &str) {
        mcpproxy_support::lock(&self.0).remove(uri);
    }

    pub fn contains(&self, uri: &str) -> bool {
        mcpproxy_support::lock(&self.0).contains(uri)
    }
}

//! The owner's parts put together around its [`Runtime`]: the live manager of the upstream
//! servers and the plugin reloader (each watching its files), the routes of `/mcp`,
//! `/api/v1` and the page, and the control socket other mcpproxy processes use.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use mcpproxy_activity::Delivery;
use mcpproxy_auth::access::Access;
use mcpproxy_config::Config;

use super::Error;
use crate::api::{self, ApiState, key};
use crate::control::owner::{ControlSocket, Sessions};
use crate::manage::Manager;
use crate::mcp::{self, ProxyServer};
use crate::metrics::Open;
use crate::proxy::Proxy;
use crate::runtime::{Reloader, Runtime};

/// What the owner serves, ready to be put on a listener, stdio or the control socket.
pub(super) struct App {
    /// `/mcp`, `/api/v1` and the page.
    pub(super) router: Router,
    /// The MCP server, for stdio and the control socket's sessions.
    pub(super) mcp_server: ProxyServer,
    /// The control socket, when it could be bound.
    pub(super) control: Option<ControlSocket>,
    /// Set to the HTTP listener's address once bound (`GET /status` shows it).
    pub(super) listening: Arc<std::sync::OnceLock<std::net::SocketAddr>>,
}

/// Where the owner's files are, for the parts that watch or write them.
pub(super) struct Files {
    pub(super) data_dir: PathBuf,
    pub(super) config_path: Option<PathBuf>,
    pub(super) home: Option<PathBuf>,
    pub(super) plugins_dir: Option<PathBuf>,
}

/// Puts the owner's parts together; `running_config` is the config as the file says it (the
/// manager writes changes back to it, so the command line's additions stay out of it).
pub(super) fn assemble(
    runtime: &Runtime,
    running_config: Config,
    files: &Files,
    cluster: Option<&Arc<mcpproxy_cluster::Cluster>>,
    delivery: Arc<Delivery>,
    shutdown: &CancellationToken,
) -> Result<App, Error> {
    // Without the socket this process still serves; only other mcpproxy processes on the
    // data dir cannot reach it (they say so).
    let control = match ControlSocket::bind(&files.data_dir) {
        Ok(control) => Some(control),
        Err(e) => {
            tracing::warn!(
                "{e}; other mcpproxy processes (IDE windows, the CLI) cannot use this one and will find the data dir busy"
            );
            None
        }
    };
    let manager = manager(runtime, running_config, files, cluster, shutdown);
    if let Some(cluster) = cluster {
        runtime.proxy.approvals().share_through(cluster.clone());
    }
    let mcp_server = ProxyServer::new(runtime.proxy.clone()).with_manager(manager.clone());
    let access = Access {
        allowed_hosts: runtime.config.allowed_hosts.clone(),
        allowed_origins: runtime.config.allowed_origins.clone(),
    };
    let reloader = Arc::new(
        Reloader::new(
            runtime.config.clone(),
            files.data_dir.clone(),
            files.plugins_dir.clone(),
            runtime.proxy.clone(),
        )
        .following(files.config_path.clone(), files.home.clone())
        .starting_with(crate::runtime::Reloaded::of(
            &runtime.annotators,
            &runtime.validators,
            &runtime.guards,
        )),
    );
    if let Err(e) = crate::runtime::watch_plugins(reloader.clone(), shutdown.clone()) {
        tracing::warn!(
            "cannot watch the plugins dir for changes (run `mcpproxy plugins reload` after changing it): {e}"
        );
    }
    let api_key = key::load_or_create(&files.data_dir, runtime.config.api_key.as_deref())?;
    let api_state = ApiState {
        proxy: runtime.proxy.clone(),
        journal: runtime.proxy.journal().clone(),
        delivery: Some(delivery),
        api_key: Arc::from(api_key),
        access: Arc::new(access.clone()),
        metrics_public: runtime.config.http.metrics_public,
        manager: Some(manager),
        reloader: Some(reloader),
        cluster_journal: mcpproxy_cluster::journal::ClusterJournal::from_config(&runtime.config)
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        listening: Arc::default(),
    };
    let listening = api_state.listening.clone();
    let mut mcp_router = mcp::http::router(
        mcp_server.clone(),
        endpoint(&runtime.config, access.clone()),
        shutdown.child_token(),
    );
    if let Some(replica) = &runtime.config.cluster.replica {
        mcp_router = mcp::sticky::mark(mcp_router, replica);
    }
    let router = mcp_router
        .merge(api::router(api_state))
        .merge(crate::web::router(Arc::new(access)));
    Ok(App {
        router,
        mcp_server,
        control,
        listening,
    })
}

/// The live manager of the upstream servers, following the config file's edits and, in a
/// cluster, the other replicas' changes.
fn manager(
    runtime: &Runtime,
    running_config: Config,
    files: &Files,
    cluster: Option<&Arc<mcpproxy_cluster::Cluster>>,
    shutdown: &CancellationToken,
) -> Arc<Manager> {
    let config_path = files.config_path.clone().or_else(|| {
        files
            .home
            .as_deref()
            .map(|h| mcpproxy_config::default_path(Some(h)))
    });
    let manager = Arc::new(
        Manager::new(
            config_path,
            files.home.clone(),
            runtime.proxy.clone(),
            running_config,
        )
        .with_cluster(cluster.cloned()),
    );
    if let Some(cluster) = cluster {
        crate::manage::follow_cluster(manager.clone(), cluster.clone(), shutdown.clone());
    }
    if let Err(e) = crate::manage::watch(manager.clone(), shutdown.clone()) {
        tracing::warn!(
            "cannot watch the config file for edits (restart mcpproxy after editing it): {e}"
        );
    }
    manager
}

/// The `/mcp` endpoint's rules, from the config's `http` and `auth`.
fn endpoint(config: &Config, access: Access) -> mcp::http::Endpoint {
    let http = &config.http;
    mcp::http::Endpoint {
        access,
        auth_token: http.auth_token.clone(),
        sessions: mcp::sessions::SessionBounds {
            max_sessions: http.max_sessions,
            max_sessions_per_client: http.max_sessions_per_client,
            idle: http.session_idle,
        },
        auth: config
            .auth
            .clone()
            .map(|auth| Arc::new(mcpproxy_auth::client_auth::Verifier::new(auth))),
    }
}

/// MCP sessions on the control socket: each served as on stdio, of the aggregate endpoint
/// or (after `@server NAME`) of one upstream's direct endpoint.
pub(super) fn control_sessions(server: ProxyServer, proxy: Arc<Proxy>) -> Sessions {
    let metrics = proxy.metrics().clone();
    let check_server = Arc::new(move |name: &str| {
        if proxy.upstreams().get(name).is_some() {
            return Ok(());
        }
        Err(format!(
            "--server {}: there is no upstream server of that name; configured: {}",
            mcpproxy_support::quote(name),
            proxy.upstreams().names().join(", ")
        ))
    });
    let serve = Arc::new(move |fixed: Option<String>, read, write| {
        let open = metrics.opened(Open::Session, "socket");
        let mut server = server.for_new_session();
        if let Some(name) = fixed {
            server = server.for_server(name);
        }
        Box::pin(async move {
            let _open = open;
            let read = mcpproxy_upstream::line_guard::LineGuard::new(
                read,
                mcpproxy_upstream::line_guard::oversized_request,
            );
            match server.serve((read, write)).await {
                Ok(service) => {
                    let _ = service.waiting().await;
                }
                Err(e) => tracing::debug!("a forwarded stdio session did not start: {e}"),
            }
        }) as Pin<Box<dyn Future<Output = ()> + Send>>
    });
    Sessions {
        serve,
        check_server,
    }
}

//! What every worker of a server shares: the settings that may change at run time, the
//! counters INFO reports, the client ids and the shutdown flag.

use crate::config::ServerConfig;
use crate::store::Store;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Shared by the workers of one server.
pub struct ServerShared {
    config: Mutex<ServerConfig>,
    started: Instant,
    /// Connections open now.
    pub clients: AtomicUsize,
    /// Connections accepted since start.
    pub connections_received: AtomicU64,
    /// Connections refused at the client limit.
    pub rejected_connections: AtomicU64,
    /// Commands run.
    pub commands: AtomicU64,
    /// Requests that were malformed (their connection was closed).
    pub protocol_errors: AtomicU64,
    /// Clients closed for not reading their replies.
    pub output_limit_closes: AtomicU64,
    /// Expired keys the sweep removed.
    pub expired_keys: AtomicU64,
    /// Every open connection (`CLIENT LIST`, `CLIENT KILL`).
    pub client_table: std::sync::Arc<crate::clients::ClientTable>,
    /// The chunk and field tables.
    pub store: Store,
    /// This node's view of the cluster (or, not in cluster mode, its id alone).
    pub cluster: crate::cluster::ClusterState,
    /// Its role in replication, its stream and its replicas.
    pub replication: std::sync::Arc<crate::replication::Replication>,
    /// How the network workers talk to the kernel, as the first worker to start found it.
    pub network: std::sync::OnceLock<crate::NetworkChoice>,
    next_client_id: AtomicU64,
    last_save_secs: AtomicU64,
    shutdown: AtomicBool,
    bound: Mutex<Option<std::net::SocketAddr>>,
}

impl ServerShared {
    /// The shared state of a server with `config`.
    pub fn new(
        config: ServerConfig,
        store: Store,
        cluster: crate::cluster::ClusterState,
        replication: std::sync::Arc<crate::replication::Replication>,
    ) -> ServerShared {
        ServerShared {
            config: Mutex::new(config),
            started: Instant::now(),
            clients: AtomicUsize::new(0),
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            output_limit_closes: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            client_table: Default::default(),
            store,
            cluster,
            replication,
            network: std::sync::OnceLock::new(),
            next_client_id: AtomicU64::new(1),
            last_save_secs: AtomicU64::new(crate::value::now_ms() / 1000),
            shutdown: AtomicBool::new(false),
            bound: Mutex::new(None),
        }
    }

    /// `CONFIG RESETSTAT`: the counters INFO's stats section reports start again from zero.
    pub fn reset_statistics(&self) {
        for counter in [
            &self.connections_received,
            &self.rejected_connections,
            &self.commands,
            &self.protocol_errors,
            &self.output_limit_closes,
            &self.expired_keys,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// Redis's `timeout` now, in seconds (0: connections are never closed for idleness).
    pub fn idle_timeout_secs(&self) -> u64 {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .idle_timeout_secs
    }

    /// The settings now.
    pub fn config(&self) -> ServerConfig {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The password, if one is set.
    pub fn password(&self) -> Option<String> {
        self.config().password
    }

    /// A new client id.
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Seconds since the server started.
    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Unix time of the last SAVE.
    pub fn last_save_secs(&self) -> u64 {
        self.last_save_secs.load(Ordering::Relaxed)
    }

    /// Records a SAVE now.
    pub fn saved_now(&self) {
        self.last_save_secs
            .store(crate::value::now_ms() / 1000, Ordering::Relaxed);
    }

    /// Records the TCP address the listeners were bound to.
    pub fn set_bound_address(&self, address: std::net::SocketAddr) {
        *self.bound.lock().unwrap_or_else(|p| p.into_inner()) = Some(address);
    }

    /// The TCP address the listeners are bound to.
    pub fn bound_address(&self) -> Option<std::net::SocketAddr> {
        *self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The TCP address others reach this server by (`host:port`; an unspecified bind
    /// address is named by loopback).
    pub fn tcp_address(&self) -> Option<String> {
        let address = self.bound_address().or(self.config().listen)?;
        let ip = match address.ip() {
            std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
            ip => ip,
        };
        Some(std::net::SocketAddr::new(ip, address.port()).to_string())
    }

    /// Asks every worker to stop.
    pub fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
    }

    /// Whether a stop was asked for.
    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// The settings CONFIG GET answers, by Redis's names.
    pub fn settings(&self) -> Vec<(String, String)> {
        let config = self.config();
        let port = config.listen.map_or(0, |address| address.port());
        vec![
            ("maxclients".into(), config.max_clients.to_string()),
            (
                "proto-max-bulk-len".into(),
                config.max_bulk_bytes.to_string(),
            ),
            (
                "requirepass".into(),
                config.password.clone().unwrap_or_default(),
            ),
            ("port".into(), port.to_string()),
            (
                "bind".into(),
                config.listen.map_or(String::new(), |a| a.ip().to_string()),
            ),
            ("timeout".into(), config.idle_timeout_secs.to_string()),
            ("databases".into(), "1".into()),
            ("save".into(), String::new()),
            ("appendonly".into(), "yes".into()),
            (
                "client-output-buffer-limit".into(),
                format!(
                    "normal {} {} 0",
                    config.max_reply_bytes, config.max_reply_bytes
                ),
            ),
        ]
    }

    /// CONFIG SET of a setting that may change while running.
    pub fn set_setting(&self, name: &[u8], value: &[u8]) -> Result<(), String> {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let text = String::from_utf8_lossy(value).into_owned();
        let mut config = self.config.lock().unwrap_or_else(|p| p.into_inner());
        let number = || {
            text.parse::<usize>()
                .map_err(|_| format!("ERR Invalid argument '{text}' for CONFIG SET '{name}'"))
        };
        match name.as_str() {
            "maxclients" => config.max_clients = number()?.max(1),
            "timeout" => config.idle_timeout_secs = number()? as u64,
            "requirepass" => config.password = (!text.is_empty()).then(|| text.clone()),
            "save" | "appendonly" | "appendfsync" => {}
            _ => {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ))
            }
        }
        Ok(())
    }
}

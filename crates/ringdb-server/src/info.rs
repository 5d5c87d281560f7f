//! INFO: the sections and fields clients and tools read, with the server's own figures.

use crate::command::Reply;
use crate::shared::ServerShared;
use ringdb::Db;
use std::sync::atomic::Ordering;

/// The INFO text for `sections` (none, `default`, `all` or `everything`: every section).
pub fn info(db: &Db, shared: &ServerShared, sections: &[Vec<u8>]) -> Reply {
    let wanted: Vec<String> = sections
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|s| s == "default" || s == "all" || s == "everything");
    let wants = |name: &str| all || wanted.iter().any(|w| *w == name.to_ascii_lowercase());
    let mut text = String::new();
    for (name, body) in sections_text(db, shared) {
        if wants(name) {
            text.push_str(&format!("# {name}\r\n{body}\r\n"));
        }
    }
    // Counted by a walk over the keys: only when asked for.
    if wants("Keyspace") {
        match keyspace(db) {
            Ok(body) => text.push_str(&format!("# Keyspace\r\n{body}\r\n")),
            Err(reply) => return reply,
        }
    }
    Reply::Verbatim(text)
}

/// The keyspace section: Redis's line for database 0, absent when it holds no live key.
fn keyspace(db: &Db) -> Result<String, Reply> {
    let counts = crate::sample::keyspace_counts(db)?;
    if counts.keys == 0 {
        return Ok(String::new());
    }
    Ok(format!(
        "db0:keys={},expires={},avg_ttl={}\r\n",
        counts.keys, counts.expires, counts.average_ttl_ms
    ))
}

/// How the network workers talk to the kernel and where they run (INFO server).
fn network_choice(shared: &ServerShared) -> (&'static str, &'static str, &'static str) {
    shared
        .network
        .get()
        .map_or(("none", "none", "none"), |choice| {
            let placement = if choice.on_shards {
                "shards"
            } else {
                "threads"
            };
            (choice.api, choice.receive, placement)
        })
}

fn sections_text(db: &Db, shared: &ServerShared) -> Vec<(&'static str, String)> {
    let config = shared.config();
    let port = config.listen.map_or(0, |a| a.port());
    let memory = db.stats().map_or(0, |stats| {
        stats
            .shards
            .iter()
            .map(|shard| shard.memory.total().current_bytes)
            .sum::<u64>()
    });
    let (multiplexing, receive, placement) = network_choice(shared);
    vec![
        (
            "Server",
            format!(
                "redis_version:{}\r\nringdb_version:{}\r\nredis_mode:{mode}\r\nos:Linux\r\narch_bits:64\r\nmultiplexing_api:{multiplexing}\r\nringdb_receive:{receive}\r\nringdb_network_placement:{placement}\r\nprocess_id:{}\r\ntcp_port:{port}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\n",
                crate::REDIS_VERSION,
                env!("CARGO_PKG_VERSION"),
                std::process::id(),
                shared.uptime_secs(),
                shared.uptime_secs() / 86_400,
                mode = if shared.cluster.enabled() { "cluster" } else { "standalone" },
            ),
        ),
        (
            "Clients",
            format!(
                "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\ntotal_watched_keys:{}\r\n",
                shared.clients.load(Ordering::Relaxed),
                config.max_clients,
                shared.store.watches.watched()
            ),
        ),
        (
            "Memory",
            format!("used_memory:{memory}\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n"),
        ),
        (
            "Persistence",
            format!(
                "loading:0\r\naof_enabled:1\r\nrdb_last_save_time:{}\r\nrdb_changes_since_last_save:0\r\n",
                shared.last_save_secs()
            ),
        ),
        (
            "Stats",
            format!(
                "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\nclient_output_buffer_limit_disconnections:{}\r\nexpired_keys:{}\r\ntotal_error_replies:0\r\n",
                shared.connections_received.load(Ordering::Relaxed),
                shared.commands.load(Ordering::Relaxed),
                shared.rejected_connections.load(Ordering::Relaxed),
                shared.output_limit_closes.load(Ordering::Relaxed),
                shared.expired_keys.load(Ordering::Relaxed),
            ),
        ),
        ("Replication", shared.replication.info()),
        (
            "Cluster",
            format!("cluster_enabled:{}\r\n", u8::from(shared.cluster.enabled())),
        ),
    ]
}

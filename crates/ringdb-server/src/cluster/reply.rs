//! The replies of `CLUSTER` (SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT, HELP) and `CLUSTERX`
//! (SETNODES, VERSION), in Redis 7's shapes: cluster clients parse them field by field.

use super::slot::{key_slot, SLOT_COUNT};
use super::topology::{Node, Topology};
use crate::command::{errors, Reply};
use crate::shared::ServerShared;
use std::sync::Arc;

fn upper(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_ascii_uppercase()
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(text.as_bytes().to_vec())
}

/// The topology the replies describe: the pushed one in cluster mode, else this node alone,
/// owning every slot. Its host is the address it listens on, or empty when that is a
/// wildcard (clients then use the address they reached it at, as Redis's specification says).
fn described(shared: &ServerShared) -> Arc<Topology> {
    let cluster = &shared.cluster;
    if cluster.enabled() {
        return cluster.topology();
    }
    let (host, port) = own_address(shared);
    Arc::new(Topology::single(cluster.my_id(), &host, port))
}

fn own_address(shared: &ServerShared) -> (String, u16) {
    let address = shared.bound_address().or(shared.config().listen);
    match address {
        Some(address) if address.ip().is_unspecified() => (String::new(), address.port()),
        Some(address) => (address.ip().to_string(), address.port()),
        None => (String::new(), 0),
    }
}

/// `CLUSTER <subcommand> ...` (its arity, at least 2, already checked); COUNTKEYSINSLOT and
/// GETKEYSINSLOT walk the keys and run with the commands over the whole database.
pub(crate) fn cluster_command(arguments: &[Vec<u8>], shared: &ServerShared) -> Reply {
    let sub = upper(&arguments[1]);
    let exact = |count: usize| arguments.len() == count;
    match sub.as_str() {
        "MYID" if exact(2) => bulk(shared.cluster.my_id()),
        "SLOTS" if exact(2) => slots(&described(shared)),
        "SHARDS" if exact(2) => shards(&described(shared), shared.cluster.my_id()),
        "NODES" if exact(2) => Reply::Verbatim(nodes(shared)),
        "INFO" if exact(2) => Reply::Verbatim(info(&described(shared), shared.cluster.my_id())),
        "KEYSLOT" if exact(3) => Reply::Integer(i64::from(key_slot(&arguments[2]))),
        "HELP" => Reply::Array(
            HELP.iter()
                .map(|line| Reply::Simple(line.to_string()))
                .collect(),
        ),
        "MYID" | "SLOTS" | "SHARDS" | "NODES" | "INFO" | "KEYSLOT" => Reply::error(errors::arity(
            &format!("cluster|{}", sub.to_ascii_lowercase()),
        )),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
            String::from_utf8_lossy(&arguments[1])
        )),
    }
}

const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "COUNTKEYSINSLOT <slot>",
    "GETKEYSINSLOT <slot> <count>",
    "INFO",
    "KEYSLOT <key>",
    "MYID",
    "NODES",
    "SHARDS",
    "SLOTS",
    "The topology is pushed by a controller: CLUSTERX SETNODES <nodes> <epoch>, CLUSTERX VERSION.",
];

/// `CLUSTERX SETNODES <text> <epoch>`, `CLUSTERX VERSION` and `CLUSTERX BYPASS` (MIGRATE
/// and PURGE run with the commands over the whole database).
pub(crate) fn clusterx_command(
    session: &mut crate::command::Session,
    arguments: &[Vec<u8>],
    shared: &ServerShared,
) -> Reply {
    match (upper(&arguments[1]).as_str(), arguments.len()) {
        ("BYPASS", 2) if !shared.cluster.enabled() => {
            Reply::error("ERR This instance has cluster support disabled")
        }
        ("BYPASS", 2) => {
            session.bypass_slots = true;
            Reply::Ok
        }
        ("SETNODES", 4) => {
            let text = String::from_utf8_lossy(&arguments[2]);
            let Some(epoch) = crate::command::parse_integer(&arguments[3]).filter(|e| *e > 0)
            else {
                return Reply::error("ERR the epoch is a positive integer");
            };
            match shared.cluster.set_topology(&text, epoch as u64) {
                Ok(()) => match super::apply_role(shared) {
                    Ok(()) => Reply::Ok,
                    Err(text) => Reply::Error(format!("ERR the topology is held, but {text}")),
                },
                Err(text) => Reply::Error(text),
            }
        }
        ("VERSION", 2) => Reply::Integer(shared.cluster.topology().epoch as i64),
        ("SETNODES" | "VERSION" | "BYPASS", _) => Reply::error(errors::arity(&format!(
            "clusterx|{}",
            String::from_utf8_lossy(&arguments[1]).to_ascii_lowercase()
        ))),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try SETNODES, VERSION, MIGRATE, PURGE or BYPASS.",
            String::from_utf8_lossy(&arguments[1])
        )),
    }
}

/// Every node's ranges, in slot order.
fn ranges_in_order(topology: &Topology) -> Vec<(u16, u16, &Node)> {
    let mut ranges: Vec<(u16, u16, &Node)> = topology
        .nodes
        .iter()
        .flat_map(|node| node.ranges.iter().map(move |&(f, l)| (f, l, node)))
        .collect();
    ranges.sort_by_key(|&(first, ..)| first);
    ranges
}

/// `CLUSTER SLOTS`: per range, its primary's endpoint and then its replicas'.
fn slots(topology: &Topology) -> Reply {
    let endpoint = |node: &Node| {
        Reply::Array(vec![
            bulk(&node.host),
            Reply::Integer(i64::from(node.port)),
            bulk(&node.id),
            Reply::Array(Vec::new()),
        ])
    };
    let entries = ranges_in_order(topology)
        .into_iter()
        .map(|(first, last, node)| {
            let mut entry = vec![
                Reply::Integer(i64::from(first)),
                Reply::Integer(i64::from(last)),
                endpoint(node),
            ];
            entry.extend(topology.replicas_of(&node.id).map(endpoint));
            Reply::Array(entry)
        })
        .collect();
    Reply::Array(entries)
}

fn shards(topology: &Topology, my_id: &str) -> Reply {
    let shard = |node: &Node| {
        let slots = node
            .ranges
            .iter()
            .flat_map(|&(f, l)| [Reply::Integer(i64::from(f)), Reply::Integer(i64::from(l))])
            .collect();
        let described = |node: &Node, role: &str| {
            Reply::Map(vec![
                (bulk("id"), bulk(&node.id)),
                (bulk("port"), Reply::Integer(i64::from(node.port))),
                (bulk("ip"), bulk(&node.host)),
                (bulk("endpoint"), bulk(&node.host)),
                (bulk("role"), bulk(role)),
                (bulk("replication-offset"), Reply::Integer(0)),
                (bulk("health"), bulk("online")),
            ])
        };
        debug_assert!(!node.id.is_empty() && !my_id.is_empty());
        let mut members = vec![described(node, "master")];
        members.extend(
            topology
                .replicas_of(&node.id)
                .map(|replica| described(replica, "replica")),
        );
        Reply::Map(vec![
            (bulk("slots"), Reply::Array(slots)),
            (bulk("nodes"), Reply::Array(members)),
        ])
    };
    let primaries = topology.nodes.iter().filter(|n| n.replica_of.is_none());
    Reply::Array(primaries.map(shard).collect())
}

/// One line per node, Redis's `CLUSTER NODES` format; this node is listed even when the
/// topology does not name it yet.
fn nodes(shared: &ServerShared) -> String {
    let topology = described(shared);
    let my_id = shared.cluster.my_id();
    let mut text = String::new();
    let line = |node: &Node, text: &mut String| {
        let role = match node.replica_of {
            Some(_) => "slave",
            None => "master",
        };
        let flags = match node.id == my_id {
            true => format!("myself,{role}"),
            false => role.to_string(),
        };
        let primary = node.replica_of.as_deref().unwrap_or("-");
        let bus_port = node.port.checked_add(10_000).unwrap_or(0);
        text.push_str(&format!(
            "{} {}:{}@{} {flags} {primary} 0 0 {} connected",
            node.id, node.host, node.port, bus_port, topology.epoch
        ));
        for &(first, last) in &node.ranges {
            match first == last {
                true => text.push_str(&format!(" {first}")),
                false => text.push_str(&format!(" {first}-{last}")),
            }
        }
        text.push('\n');
    };
    if !topology.nodes.iter().any(|node| node.id == my_id) {
        let (host, port) = own_address(shared);
        let myself = Node {
            id: my_id.to_string(),
            host,
            port,
            ranges: Vec::new(),
            replica_of: None,
        };
        line(&myself, &mut text);
    }
    topology.nodes.iter().for_each(|node| line(node, &mut text));
    text
}

fn info(topology: &Topology, my_id: &str) -> String {
    let assigned = topology.assigned_slots();
    let state = if assigned == usize::from(SLOT_COUNT) {
        "ok"
    } else {
        "fail"
    };
    let serving = topology
        .nodes
        .iter()
        .filter(|n| !n.ranges.is_empty())
        .count();
    let known = topology.nodes.len() + usize::from(!topology.nodes.iter().any(|n| n.id == my_id));
    format!(
        "cluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{known}\r\ncluster_size:{serving}\r\ncluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
        epoch = topology.epoch
    )
}

//! Redis Cluster's protocol: clients that speak it (redis-py's `RedisCluster`, `redis-cli -c`,
//! `redis-benchmark --cluster`, go-redis, Jedis) compute each key's slot and send it to the
//! node that owns the slot, so a ringdb cluster needs no proxy.
//!
//! - `slot.rs`: a key's slot (CRC16 of the key or its hash tag), exactly as Redis computes it.
//! - `topology.rs`: which node owns which slots, at which epoch, as a controller pushes it
//!   (`CLUSTERX SETNODES`, `ringdb cluster push`): there is no gossip between nodes; the
//!   controller is the one source of the topology, as with Dragonfly and Kvrocks.
//! - `reply.rs`: the replies of `CLUSTER SLOTS`, `SHARDS`, `NODES`, `INFO`, `MYID`.
//!
//! A server started without cluster mode answers these commands as one node owning every
//! slot (so cluster clients work against it) and never redirects. In cluster mode a command
//! whose keys lie in two slots gets `-CROSSSLOT`, one whose slot another node owns gets
//! `-MOVED <slot> <host>:<port>`, one whose slot nobody owns `-CLUSTERDOWN`. Inside a node,
//! keys go to shards by the database's own hash, as without cluster mode.

mod migrate;
mod moving;
mod reply;
pub mod slot;
pub mod topology;

pub(crate) use migrate::{migrate, purge};
pub(crate) use moving::WriteTicket;
pub(crate) use reply::{cluster_command, clusterx_command};

use crate::command::Reply;
use crate::shared::ServerShared;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use topology::Topology;

/// The first line of a node's state file.
const STATE_HEADER: &str = "ringdb-cluster-state 1";

/// The largest state file a node reads (a topology of [`topology::NODES_MAX`] nodes fits).
const STATE_BYTES_MAX: u64 = 4 << 20;

/// A node's view of the cluster.
pub(crate) struct ClusterState {
    /// This node's id (40 hexadecimal digits).
    my_id: String,
    /// Where the id and the topology are kept, in cluster mode; `None`: not in cluster mode.
    state_file: Option<PathBuf>,
    topology: RwLock<Arc<Topology>>,
    /// The slots moving away from this node, while they do.
    pub moving: Arc<moving::Moving>,
}

impl ClusterState {
    /// A server not in cluster mode: one node owning every slot, never redirecting.
    pub fn standalone() -> ClusterState {
        ClusterState {
            my_id: new_node_id(),
            state_file: None,
            topology: RwLock::new(Arc::new(Topology::empty())),
            moving: Arc::default(),
        }
    }

    /// A cluster node whose id and topology are kept in `state_file` (created with a new id
    /// and no topology when absent).
    pub fn open(state_file: &Path) -> Result<ClusterState, String> {
        let (my_id, topology) = match std::fs::metadata(state_file) {
            Ok(_) => read_state(state_file)?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let id = new_node_id();
                write_state(state_file, &id, &Topology::empty())?;
                (id, Topology::empty())
            }
            Err(error) => return Err(format!("{}: {error}", state_file.display())),
        };
        Ok(ClusterState {
            my_id,
            state_file: Some(state_file.to_path_buf()),
            topology: RwLock::new(Arc::new(topology)),
            moving: Arc::default(),
        })
    }

    /// Whether the server runs in cluster mode.
    pub fn enabled(&self) -> bool {
        self.state_file.is_some()
    }

    /// This node's id.
    pub fn my_id(&self) -> &str {
        &self.my_id
    }

    /// The topology now (in cluster mode; empty otherwise).
    pub fn topology(&self) -> Arc<Topology> {
        self.topology
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether `topology` has this node serve `slot`.
    pub fn serves(&self, topology: &Topology, slot: u16) -> bool {
        topology
            .owner_of(slot)
            .is_some_and(|owner| owner.id == self.my_id)
    }

    /// Where a command on `keys` must go: `None` to run it here, else the error reply
    /// (`-CROSSSLOT`, `-MOVED`, `-CLUSTERDOWN`) Redis Cluster gives.
    /// A replica in `READONLY` mode (`replica_reads`) serves its primary's slots' reads.
    pub fn redirect<'a>(
        &self,
        keys: impl IntoIterator<Item = &'a [u8]>,
        replica_reads: bool,
    ) -> Option<Reply> {
        if !self.enabled() {
            return None;
        }
        let mut keys = keys.into_iter();
        let slot = slot::key_slot(keys.next()?);
        if keys.any(|key| slot::key_slot(key) != slot) {
            return Some(Reply::error(
                "CROSSSLOT Keys in request don't hash to the same slot",
            ));
        }
        let topology = self.topology();
        match topology.owner_of(slot) {
            None => Some(Reply::error("CLUSTERDOWN Hash slot not served")),
            Some(owner) if owner.id == self.my_id => None,
            Some(owner)
                if replica_reads
                    && topology
                        .node(&self.my_id)
                        .and_then(|n| n.replica_of.as_deref())
                        == Some(owner.id.as_str()) =>
            {
                None
            }
            Some(owner) => Some(Reply::Error(format!(
                "MOVED {slot} {}:{}",
                owner.host, owner.port
            ))),
        }
    }

    /// Takes the topology `text` at `epoch` (`CLUSTERX SETNODES`): refused when older than the
    /// one held, or when the epoch is the one held with other contents. Kept in the state file
    /// before it is acknowledged.
    pub fn set_topology(&self, text: &str, epoch: u64) -> Result<(), String> {
        let Some(state_file) = &self.state_file else {
            return Err("ERR This instance has cluster support disabled".to_string());
        };
        let topology = Topology::parse(text, epoch).map_err(|e| format!("ERR {e}"))?;
        let mut held = self.topology.write().unwrap_or_else(|p| p.into_inner());
        if epoch < held.epoch {
            return Err(format!(
                "ERR the topology's epoch {epoch} is older than this node's {}",
                held.epoch
            ));
        }
        if epoch == held.epoch {
            return match held.to_text() == topology.to_text() {
                true => Ok(()),
                false => Err(format!("ERR epoch {epoch} already holds another topology")),
            };
        }
        // Slots handed to the primary this node becomes a replica of need no copy: it has
        // this node's writes by replication, and from the swap on this node takes none.
        let my_primary = topology
            .node(&self.my_id)
            .and_then(|n| n.replica_of.clone());
        let to_my_primary = |slot| {
            let owner = topology.owner_of(slot).map(|n| n.id.as_str());
            owner.is_some() && owner == my_primary.as_deref()
        };
        let given_away: Vec<u16> = (0..slot::SLOT_COUNT)
            .filter(|&slot| self.serves(&held, slot) && !self.serves(&topology, slot))
            .filter(|&slot| !to_my_primary(slot))
            .collect();
        if !given_away.is_empty() {
            self.moving.may_hand_over(&given_away)?;
        }
        write_state(state_file, &self.my_id, &topology).map_err(|e| format!("ERR {e}"))?;
        *held = Arc::new(topology);
        if !given_away.is_empty() {
            // After the swap: a write that finds the fence gone finds the new topology too
            // (writes take their ticket before they check their slot), so -MOVED follows.
            self.moving.end();
        }
        Ok(())
    }
}

/// Makes this node's replication role the one the topology gives it: a replica of its
/// primary, or a primary (promoted, when it was a replica). A node the topology does not
/// name keeps its role.
pub(crate) fn apply_role(shared: &ServerShared) -> Result<(), String> {
    let cluster = &shared.cluster;
    if !cluster.enabled() {
        return Ok(());
    }
    let topology = cluster.topology();
    let Some(me) = topology.node(cluster.my_id()) else {
        return Ok(());
    };
    let replication = &shared.replication;
    match &me.replica_of {
        Some(primary) => {
            let primary = topology.node(primary).ok_or("its primary is not named")?;
            let address = format!("{}:{}", primary.host, primary.port);
            replication.become_replica(shared, address)
        }
        None => {
            replication.become_primary();
            Ok(())
        }
    }
}

/// Whether `slot` lies in one of `ranges` (inclusive).
fn in_ranges(ranges: &[(u16, u16)], slot: u16) -> bool {
    ranges
        .iter()
        .any(|&(first, last)| (first..=last).contains(&slot))
}

/// 40 hexadecimal digits from the kernel's random source (or, where `/dev/urandom` cannot be
/// read, from the standard library's randomly keyed hasher).
fn new_node_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::io::Read;
    let mut bytes = [0u8; 20];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        for (index, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_usize(index);
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            let word = hasher.finish().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a state file: the header, `id <id>`, `epoch <n>`, then the topology's lines.
fn read_state(path: &Path) -> Result<(String, Topology), String> {
    let describe = |what: &str| format!("{}: {what}", path.display());
    let length = std::fs::metadata(path)
        .map_err(|e| describe(&e.to_string()))?
        .len();
    if length > STATE_BYTES_MAX {
        return Err(describe("larger than a cluster state file can be"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| describe(&e.to_string()))?;
    let mut lines = text.lines();
    if lines.next() != Some(STATE_HEADER) {
        return Err(describe("not a ringdb cluster state file"));
    }
    let id = match lines.next().and_then(|line| line.strip_prefix("id ")) {
        Some(id) if id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()) => id.to_string(),
        _ => return Err(describe("no node id on its second line")),
    };
    let epoch = lines
        .next()
        .and_then(|line| line.strip_prefix("epoch "))
        .and_then(|epoch| epoch.parse::<u64>().ok())
        .ok_or_else(|| describe("no epoch on its third line"))?;
    let rest: Vec<&str> = lines.collect();
    let topology = Topology::parse(&rest.join("\n"), epoch).map_err(|e| describe(&e))?;
    Ok((id, topology))
}

/// Writes the state file whole: a new file synced, renamed over the old one, the folder synced.
fn write_state(path: &Path, id: &str, topology: &Topology) -> Result<(), String> {
    use std::io::Write;
    let describe = |error: std::io::Error| format!("{}: {error}", path.display());
    let text = format!(
        "{STATE_HEADER}\nid {id}\nepoch {}\n{}",
        topology.epoch,
        topology.to_text()
    );
    let fresh = path.with_extension("new");
    let mut file = std::fs::File::create(&fresh).map_err(describe)?;
    file.write_all(text.as_bytes()).map_err(describe)?;
    file.sync_all().map_err(describe)?;
    std::fs::rename(&fresh, path).map_err(describe)?;
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::File::open(folder)
        .and_then(|f| f.sync_all())
        .map_err(describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_keeps_its_id_and_newest_topology_across_restarts() {
        let folder = std::env::temp_dir().join(format!("ringdb-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join("cluster.conf");
        let _ = std::fs::remove_file(&file);
        let node = ClusterState::open(&file).unwrap();
        let id = node.my_id().to_string();
        assert_eq!(
            node.redirect([&b"foo"[..]], false),
            Some(Reply::error("CLUSTERDOWN Hash slot not served"))
        );
        let other = "b".repeat(40);
        let text = format!(
            "{id} 127.0.0.1 7000 master - 0-9999\n{other} 127.0.0.1 7001 master - 10000-16383\n"
        );
        node.set_topology(&text, 2).unwrap();
        node.set_topology(&text, 2).unwrap();
        assert!(node.set_topology(&text, 1).unwrap_err().contains("older"));
        assert!(node
            .set_topology(&text.replace("9999", "9998"), 2)
            .unwrap_err()
            .contains("another"));
        // foo is in slot 12182, bar in 5061.
        assert_eq!(
            node.redirect([&b"foo"[..]], false),
            Some(Reply::error("MOVED 12182 127.0.0.1:7001"))
        );
        assert_eq!(node.redirect([&b"bar"[..]], false), None);
        assert_eq!(node.redirect([&b"{bar}x"[..], b"bar"], false), None);
        assert_eq!(
            node.redirect([&b"bar"[..], b"foo"], false),
            Some(Reply::error(
                "CROSSSLOT Keys in request don't hash to the same slot"
            ))
        );
        slots_leave_only_after_a_fenced_copy(&node, &other);
        drop(node);
        let again = ClusterState::open(&file).unwrap();
        assert_eq!(again.my_id(), id);
        assert_eq!(again.topology().epoch, 3);
        std::fs::write(&file, "something else\n").unwrap();
        assert!(ClusterState::open(&file).is_err());
        std::fs::remove_dir_all(&folder).unwrap();
    }

    /// A topology giving away slots is refused until a migration copied and fenced them; then
    /// it is taken and the fence ends with it.
    fn slots_leave_only_after_a_fenced_copy(node: &ClusterState, other: &str) {
        let id = node.my_id();
        let wait = std::time::Duration::from_secs(1);
        let moved = format!(
            "{id} 127.0.0.1 7000 master - 0-4999\n{other} 127.0.0.1 7001 master - 5000-16383\n"
        );
        let refused = node.set_topology(&moved, 3).unwrap_err();
        assert!(refused.contains("has not copied"), "{refused}");
        node.moving.start(vec![(5000, 7000)], wait).unwrap();
        node.moving.fence(wait).unwrap();
        node.moving.finished();
        // Fenced: a write to a moving slot must wait (bar is in slot 5061).
        let fenced = node.moving.begin_write(&[&b"bar"[..]]).err();
        assert_eq!(fenced, Some(Reply::error(moving::TRY_AGAIN)));
        // The copy covered 5000-7000 only: 7001-9999 would be left behind.
        assert!(node
            .set_topology(&moved, 3)
            .unwrap_err()
            .contains("slot 7001"));
        node.moving.start(vec![(5000, 9999)], wait).unwrap();
        node.moving.fence(wait).unwrap();
        node.moving.finished();
        node.set_topology(&moved, 3).unwrap();
        assert!(!node.moving.active());
        assert!(node.moving.begin_write(&[&b"bar"[..]]).is_ok());
        assert_eq!(
            node.redirect([&b"bar"[..]], false),
            Some(Reply::error("MOVED 5061 127.0.0.1:7001"))
        );
    }

    #[test]
    fn a_standalone_server_never_redirects() {
        let node = ClusterState::standalone();
        assert!(!node.enabled());
        assert_eq!(node.redirect([&b"foo"[..], b"bar"], false), None);
        assert_eq!(node.my_id().len(), 40);
        assert!(node.set_topology("", 1).is_err());
    }
}

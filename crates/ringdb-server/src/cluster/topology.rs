//! A cluster's topology as a controller pushes it: which node owns which slot ranges, at which
//! epoch. Its text form is one line per node,
//!
//! ```text
//! <node id> <host> <port> master - <first>-<last> <slot> ...
//! <node id> <host> <port> slave <primary's node id>
//! ```
//!
//! (the form Kvrocks' `CLUSTERX SETNODES` takes, so the format is one operators know). A node
//! keeps the text it was given, with its epoch, in its state file, so it restarts with the
//! topology it last acknowledged.

use super::slot::SLOT_COUNT;

/// One node of the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The node's id: 40 hexadecimal digits, chosen by the node at its first start.
    pub id: String,
    /// The address clients reach it at.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The slot ranges it owns, inclusive, in the order given (none for a replica).
    pub ranges: Vec<(u16, u16)>,
    /// A replica: the id of the primary it copies.
    pub replica_of: Option<String>,
}

/// Slot owner marker for a slot nobody owns.
const NO_OWNER: u16 = u16::MAX;

/// The most nodes a topology may name (a slot owner is a `u16` index).
pub const NODES_MAX: usize = 1000;

/// Who owns each slot, at one epoch.
#[derive(Clone, Debug)]
pub struct Topology {
    /// The version: a node refuses a topology older than the one it has.
    pub epoch: u64,
    /// The nodes, in the order given.
    pub nodes: Vec<Node>,
    /// For each slot, the index of its owner in `nodes`, or [`NO_OWNER`].
    owner: Vec<u16>,
}

impl Topology {
    /// The topology before any was pushed: epoch 0, no node, no slot served.
    pub fn empty() -> Topology {
        Topology {
            epoch: 0,
            nodes: Vec::new(),
            owner: vec![NO_OWNER; usize::from(SLOT_COUNT)],
        }
    }

    /// One node owning every slot (a server not in cluster mode answers as this).
    pub fn single(id: &str, host: &str, port: u16) -> Topology {
        let node = Node {
            id: id.to_string(),
            host: host.to_string(),
            port,
            ranges: vec![(0, SLOT_COUNT - 1)],
            replica_of: None,
        };
        Topology {
            epoch: 0,
            nodes: vec![node],
            owner: vec![0; usize::from(SLOT_COUNT)],
        }
    }

    /// Reads the text form; refuses a malformed line, a slot owned twice, a node named twice.
    pub fn parse(text: &str, epoch: u64) -> Result<Topology, String> {
        let mut topology = Topology::empty();
        topology.epoch = epoch;
        let lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
        for (number, line) in lines.enumerate() {
            if number >= NODES_MAX {
                return Err(format!("more than {NODES_MAX} nodes"));
            }
            let node = parse_node(line)?;
            if let Some(other) = topology
                .nodes
                .iter()
                .find(|n| n.id == node.id || (n.host == node.host && n.port == node.port))
            {
                return Err(format!(
                    "node {} {}:{} is named twice",
                    other.id, other.host, other.port
                ));
            }
            topology.add(node)?;
        }
        for node in &topology.nodes {
            let Some(primary) = &node.replica_of else {
                continue;
            };
            match topology.node(primary) {
                Some(found) if found.replica_of.is_none() => {}
                Some(_) => return Err(format!("node {}: its primary is a replica", node.id)),
                None => {
                    return Err(format!(
                        "node {}: its primary {primary} is not named",
                        node.id
                    ))
                }
            }
        }
        Ok(topology)
    }

    /// The node with id `id`.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// The replicas of the primary `id`, in the order given.
    pub fn replicas_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Node> {
        self.nodes
            .iter()
            .filter(move |node| node.replica_of.as_deref() == Some(id))
    }

    fn add(&mut self, node: Node) -> Result<(), String> {
        let index = self.nodes.len() as u16;
        assert!(index != NO_OWNER, "the node count is bounded");
        for &(first, last) in &node.ranges {
            for slot in first..=last {
                let owner = &mut self.owner[usize::from(slot)];
                if *owner != NO_OWNER {
                    return Err(format!("slot {slot} is assigned to two nodes"));
                }
                *owner = index;
            }
        }
        self.nodes.push(node);
        Ok(())
    }

    /// The text form ([`Topology::parse`] reads it back).
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for node in &self.nodes {
            if let Some(primary) = &node.replica_of {
                let line = format!("{} {} {} slave {primary}\n", node.id, node.host, node.port);
                text.push_str(&line);
                continue;
            }
            text.push_str(&format!("{} {} {} master -", node.id, node.host, node.port));
            for &(first, last) in &node.ranges {
                match first == last {
                    true => text.push_str(&format!(" {first}")),
                    false => text.push_str(&format!(" {first}-{last}")),
                }
            }
            text.push('\n');
        }
        text
    }

    /// The node that owns `slot`, if any.
    pub fn owner_of(&self, slot: u16) -> Option<&Node> {
        let owner = *self.owner.get(usize::from(slot))?;
        (owner != NO_OWNER).then(|| &self.nodes[usize::from(owner)])
    }

    /// Slots some node owns.
    pub fn assigned_slots(&self) -> usize {
        self.owner
            .iter()
            .filter(|&&owner| owner != NO_OWNER)
            .count()
    }

    /// The first slot nobody owns, if any (a controller refuses such a topology).
    pub fn first_unassigned(&self) -> Option<u16> {
        let position = self.owner.iter().position(|&owner| owner == NO_OWNER)?;
        Some(position as u16)
    }
}

/// One line: `<id> <host> <port> master - <ranges...>`.
fn parse_node(line: &str) -> Result<Node, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 5 {
        return Err(format!(
            "'{line}': a node is '<id> <host> <port> master - <slots>...'"
        ));
    }
    let id = words[0];
    if !is_node_id(id) {
        return Err(format!("'{id}': a node id is 40 hexadecimal digits"));
    }
    let port: u16 = match words[2].parse() {
        Ok(port) if port != 0 => port,
        _ => return Err(format!("'{}': not a port", words[2])),
    };
    let replica_of = match (words[3], words[4]) {
        ("master", "-") => None,
        ("slave" | "replica", primary) if words.len() == 5 && is_node_id(primary) => {
            Some(primary.to_ascii_lowercase())
        }
        ("slave" | "replica", _) => {
            return Err(format!(
                "'{line}': a replica is '<id> <host> <port> slave <primary id>', without slots"
            ))
        }
        (role, _) => return Err(format!("'{role}': a node's role is 'master' or 'slave'")),
    };
    let ranges = words[5..]
        .iter()
        .map(|word| parse_range(word))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Node {
        id: id.to_ascii_lowercase(),
        host: words[1].to_string(),
        port,
        ranges,
        replica_of,
    })
}

/// Whether `word` is a node id: 40 hexadecimal digits.
fn is_node_id(word: &str) -> bool {
    word.len() == 40 && word.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `first-last` or one slot.
pub fn parse_range(word: &str) -> Result<(u16, u16), String> {
    let slot = |text: &str| match text.parse::<u16>() {
        Ok(slot) if slot < SLOT_COUNT => Ok(slot),
        _ => Err(format!("'{word}': slots are 0 to {}", SLOT_COUNT - 1)),
    };
    let (first, last) = match word.split_once('-') {
        Some((first, last)) => (slot(first)?, slot(last)?),
        None => (slot(word)?, slot(word)?),
    };
    if first > last {
        return Err(format!("'{word}': the range ends before it starts"));
    }
    Ok((first, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn a_topology_reads_back_from_its_text() {
        let text = format!("{A} 127.0.0.1 7000 master - 0-8000 9000\n{B} 127.0.0.1 7001 master - 8001-8999 9001-16383\n");
        let topology = Topology::parse(&text, 3).unwrap();
        assert_eq!(topology.to_text(), text);
        assert_eq!(topology.assigned_slots(), 16384);
        assert_eq!(topology.first_unassigned(), None);
        assert_eq!(topology.owner_of(9000).unwrap().port, 7000);
        assert_eq!(topology.owner_of(8001).unwrap().id, B);
        assert!(topology.owner_of(16384).is_none());
    }

    #[test]
    fn replicas_read_back_and_own_no_slot() {
        let text = format!("{A} 127.0.0.1 7000 master - 0-16383\n{B} 127.0.0.1 7001 slave {A}\n");
        let topology = Topology::parse(&text, 2).unwrap();
        assert_eq!(topology.to_text(), text);
        assert_eq!(topology.owner_of(5).unwrap().id, A);
        let replicas: Vec<_> = topology.replicas_of(A).map(|n| n.port).collect();
        assert_eq!(replicas, [7001]);
        let chained = format!("{text}{} h 3 slave {B}\n", "c".repeat(40));
        assert!(Topology::parse(&chained, 2)
            .unwrap_err()
            .contains("is a replica"));
    }

    #[test]
    fn overlaps_duplicates_and_bad_lines_are_refused() {
        let overlap = format!("{A} h 1 master - 0-100\n{B} h 2 master - 100-200\n");
        assert_eq!(
            Topology::parse(&overlap, 1).unwrap_err(),
            "slot 100 is assigned to two nodes"
        );
        let twice = format!("{A} h 1 master - 0\n{A} h 2 master - 1\n");
        assert!(Topology::parse(&twice, 1)
            .unwrap_err()
            .contains("named twice"));
        let same_address = format!("{A} h 1 master - 0\n{B} h 1 master - 1\n");
        assert!(Topology::parse(&same_address, 1)
            .unwrap_err()
            .contains("named twice"));
        for bad in [
            format!("{A} h 1 master - 16384"),
            format!("{A} h 1 master - 9-3"),
            format!("{A} h 0 master - 1"),
            format!("{A} h 1 boss - 1"),
            format!("{A} h 1 slave {B} 1"),
            "xyz h 1 master - 1".to_string(),
            format!("{A} h 1"),
        ] {
            assert!(Topology::parse(&bad, 1).is_err(), "{bad}");
        }
        let no_primary = format!("{A} h 1 master - 0-16383\n{B} h 2 slave {}", "c".repeat(40));
        assert!(Topology::parse(&no_primary, 1)
            .unwrap_err()
            .contains("not named"));
        let gap = Topology::parse(&format!("{A} h 1 master - 0-99 101-16383"), 1).unwrap();
        assert_eq!(gap.first_unassigned(), Some(100));
    }
}

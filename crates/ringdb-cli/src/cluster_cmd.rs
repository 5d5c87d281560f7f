//! `ringdb cluster`: the controller of a ringdb cluster. Nodes do not gossip; this command
//! reads the topology an operator wrote (which node serves which slots), asks each node its
//! id, and pushes the topology to every node at a new epoch (`CLUSTERX SETNODES`), then checks
//! that each holds it. A topology with a slot served twice or by nobody is refused before
//! anything is pushed.
//!
//! The file has one line per node, `#` starts a comment:
//!
//! ```text
//! 127.0.0.1:7000 0-5460
//! 127.0.0.1:7001 5461-10922
//! 127.0.0.1:7002 10923-16383
//! ```

use clap::{Args, Subcommand};
use ringdb_server::client::{Client, Value};
use ringdb_server::cluster::topology::{parse_range, Topology};
use std::path::{Path, PathBuf};
use std::time::Duration;

type Failure = Box<dyn std::error::Error>;

#[derive(Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    action: Action,
    /// How long to wait for a node to connect or answer.
    #[arg(long, default_value_t = 5)]
    timeout_secs: u64,
}

#[derive(Subcommand)]
enum Action {
    /// Pushes the topology in FILE to every node it names, at a new epoch (one past the
    /// newest any node holds, or --epoch), and checks that every node took it.
    Push {
        /// The topology: lines of `host:port slot-ranges...`.
        file: PathBuf,
        /// The epoch to push at (default: one past the newest a node holds).
        #[arg(long)]
        epoch: Option<u64>,
        /// Move slots from one node to another although slot migration is not built yet:
        /// the keys of a moved slot stay on its old node, out of reach.
        #[arg(long)]
        force: bool,
    },
    /// Checks that every node in FILE holds FILE's topology, all at one epoch.
    Check {
        /// The topology: lines of `host:port slot-ranges...`.
        file: PathBuf,
    },
}

/// One line of the topology file.
struct Planned {
    address: String,
    host: String,
    port: u16,
    ranges: Vec<String>,
}

/// A node reached: its connection, its id and the epoch it holds.
struct Reached {
    client: Client,
    id: String,
    epoch: u64,
}

pub fn run(args: ClusterArgs) -> Result<(), Failure> {
    let timeout = Duration::from_secs(args.timeout_secs.max(1));
    match args.action {
        Action::Push { file, epoch, force } => push(&file, epoch, force, timeout),
        Action::Check { file } => check(&file, timeout),
    }
}

fn read_file(path: &Path) -> Result<Vec<Planned>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut planned = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |what: String| format!("{}:{}: {what}", path.display(), number + 1);
        let mut words = line.split_whitespace();
        let address = words.next().unwrap_or_default().to_string();
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)))
            .filter(|(host, port)| !host.is_empty() && *port != 0)
            .ok_or_else(|| at(format!("'{address}': a node is host:port")))?;
        let ranges: Vec<String> = words.map(str::to_string).collect();
        for range in &ranges {
            parse_range(range).map_err(&at)?;
        }
        planned.push(Planned {
            address,
            host,
            port,
            ranges,
        });
    }
    if planned.is_empty() {
        return Err(format!("{}: names no node", path.display()).into());
    }
    Ok(planned)
}

/// Connects to every node and asks its id and epoch.
fn reach_all(planned: &[Planned], timeout: Duration) -> Result<Vec<Reached>, Failure> {
    let mut reached = Vec::with_capacity(planned.len());
    for node in planned {
        let mut client = Client::connect(&node.address, timeout)?;
        let id = match client.command(&["CLUSTER", "MYID"])? {
            value @ Value::Bulk(_) => value.text().unwrap_or_default(),
            other => return Err(format!("{}: CLUSTER MYID: {other:?}", node.address).into()),
        };
        let epoch = match client.command(&["CLUSTERX", "VERSION"])? {
            Value::Integer(epoch) => epoch as u64,
            other => {
                return Err(format!(
                    "{}: not a ringdb node in cluster mode (start it with `ringdb serve --cluster`): {other:?}",
                    node.address
                )
                .into())
            }
        };
        reached.push(Reached { client, id, epoch });
    }
    Ok(reached)
}

/// The topology's text with the nodes' ids, checked: every slot served once.
fn topology_text(planned: &[Planned], reached: &[Reached]) -> Result<(String, Topology), Failure> {
    let text: String = planned
        .iter()
        .zip(reached)
        .map(|(node, found)| {
            format!(
                "{} {} {} master - {}\n",
                found.id,
                node.host,
                node.port,
                node.ranges.join(" ")
            )
        })
        .collect();
    let topology = Topology::parse(&text, 1).map_err(|e| format!("the topology: {e}"))?;
    if let Some(slot) = topology.first_unassigned() {
        return Err(format!("the topology: slot {slot} is assigned to no node").into());
    }
    Ok((text, topology))
}

/// A node's `CLUSTER SLOTS`, as (first, last, owner id).
fn slots_of(client: &mut Client) -> Result<Vec<(u16, u16, String)>, Failure> {
    let Value::Array(entries) = client.command(&["CLUSTER", "SLOTS"])? else {
        return Err("CLUSTER SLOTS: not an array".into());
    };
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let parsed = match &entry {
            Value::Array(parts) if parts.len() >= 3 => match (&parts[0], &parts[1], &parts[2]) {
                (Value::Integer(first), Value::Integer(last), Value::Array(node)) => node
                    .get(2)
                    .and_then(Value::text)
                    .map(|id| (*first as u16, *last as u16, id)),
                _ => None,
            },
            _ => None,
        };
        ranges.push(parsed.ok_or_else(|| format!("CLUSTER SLOTS: entry {entry:?}"))?);
    }
    Ok(ranges)
}

/// Slots the new topology gives to another node than the newest held one does.
fn moved_slots(old: &[(u16, u16, String)], new: &Topology) -> Vec<(u16, String, String)> {
    let mut moved = Vec::new();
    for (first, last, old_owner) in old {
        for slot in *first..=*last {
            match new.owner_of(slot) {
                Some(owner) if owner.id != *old_owner => {
                    moved.push((slot, old_owner.clone(), owner.id.clone()))
                }
                _ => {}
            }
        }
    }
    moved
}

fn push(file: &Path, epoch: Option<u64>, force: bool, timeout: Duration) -> Result<(), Failure> {
    let planned = read_file(file)?;
    let mut reached = reach_all(&planned, timeout)?;
    let (text, topology) = topology_text(&planned, &reached)?;
    let newest = reached.iter().map(|node| node.epoch).max().unwrap_or(0);
    let epoch = epoch.unwrap_or(newest + 1);
    if let Some(holder) = reached
        .iter_mut()
        .filter(|n| n.epoch > 0)
        .max_by_key(|n| n.epoch)
    {
        let moved = moved_slots(&slots_of(&mut holder.client)?, &topology);
        if let Some((slot, from, to)) = moved.first().filter(|_| !force) {
            return Err(format!(
                "{} slot(s) would move between nodes (slot {slot}: {from} -> {to}); slot migration is not built yet, so their keys would stay behind: pass --force to move them anyway",
                moved.len()
            )
            .into());
        }
    }
    let mut refused = Vec::new();
    for (node, found) in planned.iter().zip(reached.iter_mut()) {
        let epoch_text = epoch.to_string();
        match found
            .client
            .command(&["CLUSTERX", "SETNODES", &text, &epoch_text])?
        {
            Value::Simple(ok) if ok == "OK" => {
                eprintln!("{} ({}): epoch {epoch}", node.address, found.id)
            }
            other => refused.push(format!("{}: {other:?}", node.address)),
        }
    }
    if !refused.is_empty() {
        return Err(format!("nodes refused the topology: {}", refused.join("; ")).into());
    }
    check_reached(&planned, &mut reached, &topology, epoch)?;
    println!(
        "pushed: {} node(s), 16384 slots, epoch {epoch}",
        planned.len()
    );
    Ok(())
}

/// Every node holds `epoch` and serves the slots `topology` gives.
fn check_reached(
    planned: &[Planned],
    reached: &mut [Reached],
    topology: &Topology,
    epoch: u64,
) -> Result<(), Failure> {
    for (node, found) in planned.iter().zip(reached.iter_mut()) {
        let held = match found.client.command(&["CLUSTERX", "VERSION"])? {
            Value::Integer(held) => held as u64,
            other => return Err(format!("{}: CLUSTERX VERSION: {other:?}", node.address).into()),
        };
        if held != epoch {
            return Err(format!("{} holds epoch {held}, not {epoch}", node.address).into());
        }
        for (first, last, owner) in slots_of(&mut found.client)? {
            let expected = topology.owner_of(first).map(|n| n.id.as_str());
            let whole = (first..=last)
                .all(|slot| topology.owner_of(slot).map(|n| n.id.as_str()) == expected);
            if expected != Some(owner.as_str()) || !whole {
                return Err(format!(
                    "{}: slots {first}-{last} served by {owner}, not as the file says",
                    node.address
                )
                .into());
            }
        }
    }
    Ok(())
}

fn check(file: &Path, timeout: Duration) -> Result<(), Failure> {
    let planned = read_file(file)?;
    let mut reached = reach_all(&planned, timeout)?;
    let (_, topology) = topology_text(&planned, &reached)?;
    let epoch = reached[0].epoch;
    if epoch == 0 {
        return Err(format!("{} holds no topology yet: push one", planned[0].address).into());
    }
    check_reached(&planned, &mut reached, &topology, epoch)?;
    println!(
        "ok: {} node(s) at epoch {epoch}, 16384 slots served",
        planned.len()
    );
    Ok(())
}

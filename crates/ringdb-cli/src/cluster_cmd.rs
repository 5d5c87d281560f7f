//! `ringdb cluster`: the controller of a ringdb cluster. Nodes do not gossip; this command
//! reads the topology an operator wrote (which node serves which slots), asks each node its
//! id, and pushes the topology to every node at a new epoch (`CLUSTERX SETNODES`), then checks
//! that each holds it. A topology with a slot served twice or by nobody is refused before
//! anything is pushed.
//!
//! Slots the file gives to another node than the newest topology does are moved first, while
//! clients run: the target drops what an earlier, cut move left of them (`CLUSTERX PURGE`),
//! the source copies their keys to it and fences them (`CLUSTERX MIGRATE`, see
//! `ringdb-server/src/cluster/migrate.rs`); then the topology is pushed (the sources first) and
//! every node deletes the keys of slots it no longer serves. A move cut by a crash leaves the
//! old topology in force: pushing again starts it over.
//!
//! The file has one line per node, `#` starts a comment; a replica names its primary:
//!
//! ```text
//! 127.0.0.1:7000 0-5460
//! 127.0.0.1:7001 5461-10922
//! 127.0.0.1:7002 10923-16383
//! 127.0.0.1:7100 replica-of 127.0.0.1:7000
//! ```
//!
//! A node that the file makes a replica copies its primary and follows its log (see
//! `ringdb-server/src/replication/`). **Failover** is a push of a file where the replica
//! serves its primary's slots (and the old primary, if named, is a replica of it): slots
//! handed from a primary to its own replica need no copy. With `--skip-unreachable` a dead
//! node is left out of the push; push the same file again once it is back, and it becomes a
//! replica (its writes no replica had are discarded: see `INFO replication`).

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
    #[arg(long, default_value_t = 5, global = true)]
    timeout_secs: u64,
    /// The nodes' password (their --requirepass; or the environment's
    /// RINGDB_CLUSTER_PASSWORD).
    #[arg(long, global = true)]
    password: Option<String>,
}

#[derive(Subcommand)]
enum Action {
    /// Moves the keys of slots that change nodes, then pushes the topology in FILE to every
    /// node it names, at a new epoch (one past the newest any node holds, or --epoch), checks
    /// that every node took it, and has each delete the keys of slots it no longer serves.
    Push {
        /// The topology: lines of `host:port slot-ranges...` or `host:port replica-of host:port`.
        file: PathBuf,
        /// The epoch to push at (default: one past the newest a node holds).
        #[arg(long)]
        epoch: Option<u64>,
        /// Print the slot moves the push would make, and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Push to the nodes that answer and leave out those that do not (a failover with a
        /// dead primary); their ids are taken from the topology the others hold.
        #[arg(long)]
        skip_unreachable: bool,
    },
    /// Checks that every node in FILE holds FILE's topology, all at one epoch.
    Check {
        /// The topology: lines of `host:port slot-ranges...` or `host:port replica-of host:port`.
        file: PathBuf,
    },
    /// Prints the topology a node holds, as a file `push` takes (to edit and push again).
    Show {
        /// The node: host:port.
        address: String,
    },
}

/// One line of the topology file.
struct Planned {
    address: String,
    host: String,
    port: u16,
    ranges: Vec<String>,
    /// A replica: its primary's address.
    replica_of: Option<String>,
}

/// A node: its connection (`None`: it did not answer), its id and the epoch it holds.
struct Reached {
    client: Option<Client>,
    id: String,
    epoch: u64,
}

/// How the controller reaches a node.
struct Connect {
    timeout: Duration,
    password: Option<String>,
}

impl Connect {
    /// A connection to `address`, authenticated when the cluster has a password.
    fn open(&self, address: &str) -> Result<Client, Failure> {
        let mut client = Client::connect(address, self.timeout)?;
        if let Some(password) = &self.password {
            match client.command(&["AUTH", password])? {
                Value::Simple(ok) if ok == "OK" => {}
                other => return Err(format!("{address}: AUTH: {other:?}").into()),
            }
        }
        Ok(client)
    }
}

pub fn run(args: ClusterArgs) -> Result<(), Failure> {
    let how = Connect {
        timeout: Duration::from_secs(args.timeout_secs.max(1)),
        password: args
            .password
            .or_else(|| std::env::var("RINGDB_CLUSTER_PASSWORD").ok()),
    };
    match args.action {
        Action::Push {
            file,
            epoch,
            dry_run,
            skip_unreachable,
        } => push(&file, (epoch, dry_run, skip_unreachable), &how),
        Action::Show { address } => show(&address, &how),
        Action::Check { file } => check(&file, &how),
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
        let mut ranges: Vec<String> = words.map(str::to_string).collect();
        let replica_of = match ranges.first().map(String::as_str) {
            Some("replica-of") if ranges.len() == 2 => Some(ranges.pop().expect("two words")),
            Some("replica-of") => {
                return Err(at("a replica is 'host:port replica-of host:port'".into()).into())
            }
            _ => None,
        };
        if replica_of.is_some() {
            ranges.clear();
        }
        for range in &ranges {
            parse_range(range).map_err(&at)?;
        }
        planned.push(Planned {
            address,
            host,
            port,
            ranges,
            replica_of,
        });
    }
    if planned.is_empty() {
        return Err(format!("{}: names no node", path.display()).into());
    }
    for node in planned.iter().filter(|n| n.replica_of.is_some()) {
        let primary = node.replica_of.as_deref().unwrap_or_default();
        if !planned
            .iter()
            .any(|p| p.address == primary && p.replica_of.is_none())
        {
            let file = path.display();
            return Err(format!(
                "{file}: {}: its primary {primary} is not a primary of the file",
                node.address
            )
            .into());
        }
    }
    Ok(planned)
}

/// Connects to every node and asks its id and epoch; with `skip`, a node that does not answer
/// is left out, its id taken from the topology the others hold.
fn reach_all(planned: &[Planned], how: &Connect, skip: bool) -> Result<Vec<Reached>, Failure> {
    let mut reached = Vec::with_capacity(planned.len());
    for node in planned {
        match how
            .open(&node.address)
            .and_then(|client| reach(node, client))
        {
            Ok(found) => reached.push(found),
            Err(error) if skip => {
                eprintln!("{}: left out: {error}", node.address);
                reached.push(Reached {
                    client: None,
                    id: String::new(),
                    epoch: 0,
                });
            }
            Err(error) => return Err(error),
        }
    }
    let mut known = Vec::new();
    if let Some(found) = reached.iter_mut().filter_map(|r| r.client.as_mut()).next() {
        known = known_ids(found)?;
    }
    for (node, found) in planned.iter().zip(reached.iter_mut()) {
        if found.client.is_none() {
            found.id = known
                .iter()
                .find(|(_, address)| *address == node.address)
                .map(|(id, _)| id.clone())
                .ok_or_else(|| {
                    format!(
                        "{}: does not answer, and no node knows its id",
                        node.address
                    )
                })?;
        }
    }
    Ok(reached)
}

/// The ids and addresses of the nodes a node's topology names (`CLUSTER NODES`).
fn known_ids(client: &mut Client) -> Result<Vec<(String, String)>, Failure> {
    let text = client
        .command(&["CLUSTER", "NODES"])?
        .text()
        .unwrap_or_default();
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let id = words.next()?.to_string();
            let address = words.next()?.split('@').next()?.to_string();
            Some((id, address))
        })
        .collect())
}

/// A node's id and epoch.
fn reach(node: &Planned, mut client: Client) -> Result<Reached, Failure> {
    let id = match client.command(&["CLUSTER", "MYID"])? {
        value @ Value::Bulk(_) => value.text().unwrap_or_default(),
        Value::Error(text) if text.starts_with("NOAUTH") => {
            return Err(format!(
                "{}: {text} (give the nodes' password: --password, or RINGDB_CLUSTER_PASSWORD)",
                node.address
            )
            .into())
        }
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
    Ok(Reached {
        client: Some(client),
        id,
        epoch,
    })
}

/// The topology's text with the nodes' ids, checked: every slot served once.
fn topology_text(planned: &[Planned], reached: &[Reached]) -> Result<(String, Topology), Failure> {
    let id_of = |address: &str| {
        let index = planned.iter().position(|p| p.address == address);
        index.map_or(String::new(), |index| reached[index].id.clone())
    };
    let text: String = planned
        .iter()
        .zip(reached)
        .map(|(node, found)| match &node.replica_of {
            Some(primary) => {
                let primary = id_of(primary);
                format!("{} {} {} slave {primary}\n", found.id, node.host, node.port)
            }
            None => format!(
                "{} {} {} master - {}\n",
                found.id,
                node.host,
                node.port,
                node.ranges.join(" ")
            ),
        })
        .collect();
    let topology = Topology::parse(&text, 1).map_err(|e| format!("the topology: {e}"))?;
    if let Some(slot) = topology.first_unassigned() {
        return Err(format!("the topology: slot {slot} is assigned to no node").into());
    }
    Ok((text, topology))
}

/// One range of a node's `CLUSTER SLOTS`.
struct Served {
    first: u16,
    last: u16,
    id: String,
    address: String,
    /// The ids of its primary's replicas.
    replicas: Vec<String>,
}

/// A node's `CLUSTER SLOTS`.
fn slots_of(client: &mut Client) -> Result<Vec<Served>, Failure> {
    let Value::Array(entries) = client.command(&["CLUSTER", "SLOTS"])? else {
        return Err("CLUSTER SLOTS: not an array".into());
    };
    let mut served = Vec::with_capacity(entries.len());
    for entry in entries {
        let parsed = match &entry {
            Value::Array(parts) if parts.len() >= 3 => match (&parts[0], &parts[1], &parts[2]) {
                (Value::Integer(first), Value::Integer(last), Value::Array(node)) => {
                    match (node.first().and_then(Value::text), node.get(1), node.get(2)) {
                        (Some(host), Some(Value::Integer(port)), Some(id)) => Some(Served {
                            first: *first as u16,
                            last: *last as u16,
                            id: id.text().unwrap_or_default(),
                            address: format!("{host}:{port}"),
                            replicas: parts[3..].iter().filter_map(replica_id).collect(),
                        }),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };
        served.push(parsed.ok_or_else(|| format!("CLUSTER SLOTS: entry {entry:?}"))?);
    }
    Ok(served)
}

/// The id in a `CLUSTER SLOTS` endpoint.
fn replica_id(endpoint: &Value) -> Option<String> {
    match endpoint {
        Value::Array(parts) => parts.get(2)?.text(),
        _ => None,
    }
}

/// Slot ranges that move from one node to another.
struct Move {
    from: (String, String),
    to: (String, String),
    ranges: Vec<(u16, u16)>,
}

/// The moves from the topology `old` (the newest a node holds) to `new`, by pair of nodes.
/// A slot handed from a primary to its own replica (a failover) needs no move.
fn moves_between(old: &[Served], new: &Topology) -> Vec<Move> {
    let mut moves: Vec<Move> = Vec::new();
    for served in old {
        for slot in served.first..=served.last {
            let Some(owner) = new
                .owner_of(slot)
                .filter(|owner| owner.id != served.id && !served.replicas.contains(&owner.id))
            else {
                continue;
            };
            let to = (owner.id.clone(), format!("{}:{}", owner.host, owner.port));
            let index = match moves
                .iter()
                .position(|m| m.from.0 == served.id && m.to == to)
            {
                Some(index) => index,
                None => {
                    let from = (served.id.clone(), served.address.clone());
                    moves.push(Move {
                        from,
                        to,
                        ranges: Vec::new(),
                    });
                    moves.len() - 1
                }
            };
            let ranges = &mut moves[index].ranges;
            match ranges.last_mut() {
                Some(range) if range.1 + 1 == slot => range.1 = slot,
                _ => ranges.push((slot, slot)),
            }
        }
    }
    moves
}

fn ranges_text(ranges: &[(u16, u16)]) -> Vec<String> {
    ranges
        .iter()
        .map(|(first, last)| format!("{first}-{last}"))
        .collect()
}

/// Copies every move's keys to its target (`CLUSTERX MIGRATE` on the source, after the
/// target dropped what an earlier, cut migration left of them). The topology is untouched
/// until every move is done.
fn migrate_all(moves: &[Move], how: &Connect) -> Result<(), Failure> {
    for step in moves {
        let ranges = ranges_text(&step.ranges);
        let failed = |what: String| {
            format!(
                "moving slots {} from {} to {} failed: {what}; the topology was not changed: push again",
                ranges.join(" "), step.from.1, step.to.1
            )
        };
        let mut target = how.open(&step.to.1)?;
        let mut purge = vec!["CLUSTERX".to_string(), "PURGE".to_string()];
        purge.extend(ranges.iter().cloned());
        match target.command(&purge)? {
            Value::Integer(_) => {}
            other => return Err(failed(format!("{}: {other:?}", step.to.1)).into()),
        }
        let mut source = how.open(&step.from.1)?;
        source.set_timeout(MIGRATION_WAIT)?;
        let mut migrate = vec![
            "CLUSTERX".to_string(),
            "MIGRATE".to_string(),
            step.to.1.clone(),
        ];
        migrate.extend(ranges.iter().cloned());
        match source
            .command(&migrate)
            .map_err(|e| failed(e.to_string()))?
        {
            Value::Integer(keys) => eprintln!(
                "moved slots {} from {} to {}: {keys} key(s) copied",
                ranges.join(" "),
                step.from.1,
                step.to.1
            ),
            other => return Err(failed(format!("{other:?}")).into()),
        }
    }
    Ok(())
}

/// The longest a migration may take before the controller gives up on it.
const MIGRATION_WAIT: Duration = Duration::from_secs(6 * 3600);

fn push(
    file: &Path,
    (epoch, dry_run, skip): (Option<u64>, bool, bool),
    how: &Connect,
) -> Result<(), Failure> {
    let planned = read_file(file)?;
    let mut reached = reach_all(&planned, how, skip)?;
    let (text, topology) = topology_text(&planned, &reached)?;
    let newest = reached.iter().map(|node| node.epoch).max().unwrap_or(0);
    let epoch = epoch.unwrap_or(newest + 1);
    let holder = reached
        .iter_mut()
        .filter(|n| n.epoch > 0 && n.epoch == newest)
        .find_map(|n| n.client.as_mut());
    let moves = match holder {
        Some(client) => moves_between(&slots_of(client)?, &topology),
        None => Vec::new(),
    };
    if dry_run {
        for step in &moves {
            let ranges = ranges_text(&step.ranges).join(" ");
            println!(
                "would move slots {ranges} from {} to {}",
                step.from.1, step.to.1
            );
        }
        println!("would push epoch {epoch} to {} node(s)", planned.len());
        return Ok(());
    }
    migrate_all(&moves, how)?;
    // Nodes that give slots away and are not in the file learn the topology too.
    let mut others = Vec::new();
    for step in &moves {
        if !reached.iter().any(|n| n.id == step.from.0)
            && !others
                .iter()
                .any(|(a, _): &(String, Client)| *a == step.from.1)
        {
            others.push((step.from.1.clone(), how.open(&step.from.1)?));
        }
    }
    let mut order = push_order(&planned, &mut reached, &mut others, &moves);
    switch_all(&mut order, &text, epoch)?;
    purge_all(&mut order, &topology)?;
    drop(order);
    check_reached(&planned, &mut reached, &topology, epoch)?;
    let left_out = reached.iter().filter(|n| n.client.is_none()).count();
    println!(
        "pushed: {} node(s), 16384 slots, epoch {epoch}{}",
        planned.len() - left_out,
        match left_out {
            0 => String::new(),
            n => format!("; {n} node(s) left out: push the same file again once they are back"),
        }
    );
    Ok(())
}

/// The order the topology is pushed in: nodes that are replicas in it first (a demoted
/// primary stops taking writes before its replica takes its slots), then sources of moves
/// (a source takes the topology only while its copy is fenced), then targets, then the rest.
fn push_order<'a>(
    planned: &[Planned],
    reached: &'a mut [Reached],
    others: &'a mut [(String, Client)],
    moves: &[Move],
) -> Vec<(String, &'a mut Client)> {
    let replicas: Vec<String> = planned
        .iter()
        .filter(|n| n.replica_of.is_some())
        .map(|n| n.address.clone())
        .collect();
    let rank = |address: &String| match () {
        _ if replicas.contains(address) => 0,
        _ if moves.iter().any(|m| m.from.1 == *address) => 1,
        _ if moves.iter().any(|m| m.to.1 == *address) => 2,
        _ => 3,
    };
    let mut order: Vec<(String, &mut Client)> = planned
        .iter()
        .zip(reached.iter_mut())
        .filter_map(|(node, found)| Some((node.address.clone(), found.client.as_mut()?)))
        .chain(
            others
                .iter_mut()
                .map(|(address, client)| (address.clone(), client)),
        )
        .collect();
    order.sort_by_key(|(address, _)| rank(address));
    order
}

/// Pushes the topology to the nodes in `order`, stopping at the first that refuses it.
fn switch_all(order: &mut [(String, &mut Client)], text: &str, epoch: u64) -> Result<(), Failure> {
    let epoch_text = epoch.to_string();
    for (address, client) in order.iter_mut() {
        match client.command(&["CLUSTERX", "SETNODES", text, &epoch_text])? {
            Value::Simple(ok) if ok == "OK" => eprintln!("{address}: epoch {epoch}"),
            other => {
                return Err(format!(
                    "{address} refused the topology: {other:?}; push again (nodes after it in the order sources, targets, others were not changed)"
                )
                .into())
            }
        }
    }
    Ok(())
}

/// Has every primary delete the keys of slots it no longer serves (a replica's deletions come
/// from its primary).
fn purge_all(order: &mut [(String, &mut Client)], topology: &Topology) -> Result<(), Failure> {
    let is_replica = |address: &String| {
        topology
            .nodes
            .iter()
            .any(|n| n.replica_of.is_some() && format!("{}:{}", n.host, n.port) == *address)
    };
    for (address, client) in order.iter_mut() {
        if is_replica(address) {
            continue;
        }
        client.set_timeout(MIGRATION_WAIT)?;
        match client.command(&["CLUSTERX", "PURGE"])? {
            Value::Integer(0) => {}
            Value::Integer(purged) => {
                eprintln!("{address}: {purged} key(s) of slots it no longer serves deleted")
            }
            other => return Err(format!("{address}: CLUSTERX PURGE: {other:?}").into()),
        }
    }
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
        let Some(client) = found.client.as_mut() else {
            continue;
        };
        let held = match client.command(&["CLUSTERX", "VERSION"])? {
            Value::Integer(held) => held as u64,
            other => return Err(format!("{}: CLUSTERX VERSION: {other:?}", node.address).into()),
        };
        if held != epoch {
            return Err(format!("{} holds epoch {held}, not {epoch}", node.address).into());
        }
        for Served {
            first,
            last,
            id: owner,
            ..
        } in slots_of(client)?
        {
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

fn check(file: &Path, how: &Connect) -> Result<(), Failure> {
    let planned = read_file(file)?;
    let mut reached = reach_all(&planned, how, false)?;
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

/// The topology `address` holds, in the file's form, its epoch in a comment.
fn show(address: &str, how: &Connect) -> Result<(), Failure> {
    let mut client = how.open(address)?;
    let epoch = match client.command(&["CLUSTERX", "VERSION"])? {
        Value::Integer(epoch) => epoch,
        other => return Err(format!("{address}: not a node in cluster mode: {other:?}").into()),
    };
    let text = client
        .command(&["CLUSTER", "NODES"])?
        .text()
        .unwrap_or_default();
    // `<id> <host:port@bus> <flags> <primary id or -> 0 0 <epoch> connected <slots>...`
    let nodes: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let address_of = |id: &str| {
        let node = nodes.iter().find(|words| words.first() == Some(&id))?;
        node.get(1)?.split('@').next()
    };
    println!("# the topology {address} holds, epoch {epoch}");
    for words in nodes.iter().filter(|words| words.len() >= 8) {
        let node = words[1].split('@').next().unwrap_or_default();
        match (words[3], address_of(words[3])) {
            ("-", _) if words.len() > 8 => println!("{node} {}", words[8..].join(" ")),
            ("-", _) => {}
            (_, Some(primary)) => println!("{node} replica-of {primary}"),
            (primary, None) => println!("# {node}: a replica of {primary}, which is not named"),
        }
    }
    Ok(())
}

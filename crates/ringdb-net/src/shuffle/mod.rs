//! The distributed shuffle of paper Sec. 4.1 (Fig. 10): N nodes x W workers, morsel-driven
//! scan, hash partitioning, chunked frames, probe-table build on the receiver, join checked
//! against a single-process reference.
//!
//! The pieces, from the outside in:
//! - the cluster: [`run_local`] runs every node as a thread of this process (tests, quick
//!   checks); [`run_processes`] starts one child process per node (the way `ringdb shuffle`
//!   runs, so nodes do not share an allocator or a scheduler's view of one process), and the
//!   child side is [`serve_node`]. Either way the nodes connect as a mesh ([`connect_mesh`]) and
//!   the result is a [`ShuffleReport`] whose join was checked against [`reference_join`];
//! - one node, [`run_node`]: worker threads, each with its own transport (ring per thread),
//!   scanning morsels of the node's table and sending every tuple to the node its key
//!   partitions to, in chunks framed by [`crate::frame`]; it reports a [`NodeReport`];
//! - the data, [`ShuffleSpec`]: deterministic tables, so every node and the reference agree
//!   on the input without moving it;
//! - the place, [`NetnsGuard`]: nodes in network namespaces joined by veth pairs (root only),
//!   so the bytes cross a network device instead of loopback.

// (visible to the crate root, which re-exports its process guard)
pub(crate) mod cluster;
mod data;
mod netns;
mod node;
mod table;

pub use cluster::{connect_mesh, run_local, run_processes, serve_node, NodeCommand, ShuffleReport};
pub use data::{reference_join, JoinResult, ShuffleSpec};
pub use netns::NetnsGuard;
pub use node::{peers_of, run_node, NodeReport};

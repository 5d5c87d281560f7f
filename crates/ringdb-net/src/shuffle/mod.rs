//! The distributed shuffle of paper Sec. 4.1 (Fig. 10): N nodes x W workers, morsel-driven
//! scan, hash partitioning, chunked frames, probe-table build on the receiver, join checked
//! against a single-process reference.

pub mod cluster;
pub mod data;
pub mod netns;
pub mod node;
pub mod table;

pub use cluster::{run_local, run_processes, serve_node, NodeCommand, ShuffleReport};
pub use data::{reference_join, JoinResult, ShuffleSpec};
pub use node::{run_node, NodeReport};

//! Network namespaces joined by veth pairs through a bridge (root only): each node gets its own
//! namespace and address, so the shuffle crosses a veth device instead of loopback. The guard
//! deletes every namespace it created (which removes their veths and the bridge) when dropped.

use crate::error::{ChildProblem, ChildProcess, NetError, NetSetting, NetSwitch, Result};
use std::process::Command;

/// The network namespaces of one run (and the hub namespace with the bridge), deleted when the
/// guard is dropped.
pub struct NetnsGuard {
    /// One namespace per node, node `i` in `names[i]`.
    pub names: Vec<String>,
    /// The namespace that holds the bridge.
    pub hub: String,
}

/// The most nodes the namespaces can hold (one /24 of addresses).
const MAX_NODES: usize = 200;

/// Runs `ip ARGS`; its failure means network namespaces are unavailable here (not root, or no
/// iproute2).
fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|source| NetError::Child {
            process: ChildProcess::IpCommand,
            problem: ChildProblem::CannotStart {
                program: "ip".into(),
                source,
            },
        })?;
    if !out.status.success() {
        return Err(NetError::Unsupported {
            switch: NetSwitch::NetworkNamespaces,
            reason: format!(
                "`ip {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(())
}

impl NetnsGuard {
    /// Namespaces `rdb<pid>n<i>` with address 10.77.0.(i+1)/24 on a veth attached to a bridge
    /// in the hub namespace `rdb<pid>hub`.
    pub fn create(nodes: usize) -> Result<NetnsGuard> {
        NetError::check_range(NetSetting::NamespacedNodes, nodes, 0, MAX_NODES)?;
        let pid = std::process::id();
        let mut g = NetnsGuard {
            names: Vec::new(),
            hub: format!("rdb{pid}hub"),
        };
        ip(&["netns", "add", &g.hub])?;
        ip(&["-n", &g.hub, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &g.hub, "link", "set", "br0", "up"])?;
        for i in 0..nodes {
            let ns = format!("rdb{pid}n{i}");
            ip(&["netns", "add", &ns])?;
            g.names.push(ns.clone());
            let (a, b) = (format!("rdbv{i}a"), format!("rdbv{i}b"));
            ip(&[
                "link", "add", &a, "netns", &ns, "type", "veth", "peer", "name", &b, "netns",
                &g.hub,
            ])?;
            let addr = format!("{}/24", Self::addr(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &a])?;
            ip(&["-n", &ns, "link", "set", &a, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &g.hub, "link", "set", &b, "master", "br0"])?;
            ip(&["-n", &g.hub, "link", "set", &b, "up"])?;
        }
        Ok(g)
    }

    /// The address of node `i` on its veth.
    pub fn addr(i: usize) -> String {
        format!("10.77.0.{}", i + 1)
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        for ns in self.names.iter().chain(std::iter::once(&self.hub)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

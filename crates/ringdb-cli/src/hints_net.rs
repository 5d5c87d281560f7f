//! The CLI's words for ringdb-net's typed errors. The network library names the setting,
//! switch or child process that failed in its own vocabulary ([`NetSetting`], [`NetSwitch`],
//! transport specs); this is the one place that knows which flag of `ringdb pingpong` or
//! `ringdb shuffle` sets each of them, and says what to change as a hint line under the error.
//! (io_uring failures inside a transport, [`NetError::Ring`], get the I/O layer's hints in
//! `hints.rs` before this is asked.)

use ringdb_net::{ChildProblem, ChildProcess, NetError, NetSetting, NetSwitch};
use std::error::Error;

/// Where transports are named on the command line.
const TRANSPORT_FLAGS: &str = "--mode/--modes (pingpong) or --transport (shuffle)";

/// A hint in flag words for `error`, when it is a [`NetError`] that one helps.
pub fn net_hint(error: &(dyn Error + 'static)) -> Option<String> {
    let error = error.downcast_ref::<NetError>()?;
    match error {
        NetError::OutOfRange {
            setting, min, max, ..
        } => range_hint(*setting, *min, *max),
        NetError::NotMultiple { setting, step, .. } => setting_flag(*setting)
            .map(|flag| format!("{flag} takes a multiple of {}", setting.amount(*step))),
        NetError::UnknownTransportWord { .. } => Some(format!(
            "transports are named in {TRANSPORT_FLAGS}: a base such as epoll, uring or uring-sqpoll, then +switches, e.g. uring+regfds+regbufs"
        )),
        NetError::NeedsUring { switch } => Some(needs_uring_hint(*switch)),
        NetError::Conflict { first, second, .. } => Some(format!(
            "drop +{first} or +{second} from {TRANSPORT_FLAGS}"
        )),
        NetError::Unsupported { switch, .. } => unsupported_hint(*switch),
        NetError::ZcRecvUnsupported { .. } => unsupported_hint(NetSwitch::ZeroCopyReceive),
        NetError::UnknownProtocol { .. } => Some("--proto takes tcp, udp or both".into()),
        NetError::Timeout { .. } => {
            Some("raise --timeout (seconds without progress before a step gives up)".into())
        }
        NetError::Child {
            process: ChildProcess::IpCommand,
            problem: ChildProblem::CannotStart { .. },
            ..
        } => Some("--netns needs the ip command of iproute2; install it, or drop --netns".into()),
        _ => None,
    }
}

/// The flag that sets `setting`, for the settings a command line sets (the others follow from
/// them, e.g. buffer sizes from the message or chunk size).
fn setting_flag(setting: NetSetting) -> Option<&'static str> {
    Some(match setting {
        NetSetting::MessageSize | NetSetting::UdpMessageSize => "--size",
        NetSetting::Nodes | NetSetting::NamespacedNodes => "--nodes",
        NetSetting::Workers => "--workers",
        NetSetting::TupleSize => "--tuple-size",
        NetSetting::Chunk => "--chunk",
        NetSetting::Morsel => "--morsel",
        _ => return None,
    })
}

/// What to give `setting` instead of a value outside `min..=max`.
fn range_hint(setting: NetSetting, min: u64, max: u64) -> Option<String> {
    match setting {
        NetSetting::RowsPerNode => {
            Some("--table-size must hold at least one tuple of --tuple-size bytes".into())
        }
        NetSetting::NamespacedNodes => Some(format!(
            "--nodes takes {} with --netns (one address each on a /24)",
            setting.range(min, max)
        )),
        NetSetting::Chunk => Some(format!(
            "--chunk takes {} (at least one --tuple-size)",
            setting.range(min, max)
        )),
        _ => setting_flag(setting).map(|flag| format!("{flag} takes {}", setting.range(min, max))),
    }
}

/// How to ask for `switch` on an io_uring base instead of epoll.
fn needs_uring_hint(switch: NetSwitch) -> String {
    match switch {
        NetSwitch::Sqpoll => {
            format!("use the uring-sqpoll base instead of epoll in {TRANSPORT_FLAGS}")
        }
        other => format!("write uring+{other} instead of epoll+{other} in {TRANSPORT_FLAGS}"),
    }
}

/// What to do without `switch` on this machine.
fn unsupported_hint(switch: NetSwitch) -> Option<String> {
    let text = match switch {
        NetSwitch::Napi => format!(
            "drop +napi from {TRANSPORT_FLAGS}: NAPI busy poll needs a NIC queue, and loopback and veth have none"
        ),
        NetSwitch::ZeroCopyReceive => format!(
            "drop uring+zc-recv from {TRANSPORT_FLAGS}: zero-copy receive needs a NIC with header split"
        ),
        NetSwitch::NetworkNamespaces => {
            "--netns needs root (network namespaces and veth pairs) and iproute2; run as root, or drop --netns".into()
        }
        other => format!("drop +{other} from {TRANSPORT_FLAGS}"),
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_flags_with_their_range() {
        let nodes = NetError::OutOfRange {
            setting: NetSetting::Nodes,
            value: 1,
            min: 2,
            max: 64,
        };
        assert_eq!(net_hint(&nodes).unwrap(), "--nodes takes 2..=64");
        let size = NetError::OutOfRange {
            setting: NetSetting::UdpMessageSize,
            value: 70000,
            min: 2,
            max: 65000,
        };
        assert_eq!(net_hint(&size).unwrap(), "--size takes 2 B..=65000 B");
        let tuple = NetError::NotMultiple {
            setting: NetSetting::TupleSize,
            value: 100,
            step: 8,
        };
        assert_eq!(
            net_hint(&tuple).unwrap(),
            "--tuple-size takes a multiple of 8 B"
        );
        // A setting no flag sets directly gets no hint.
        let internal = NetError::OutOfRange {
            setting: NetSetting::SendBuffers,
            value: 0,
            min: 1,
            max: 4096,
        };
        assert!(net_hint(&internal).is_none());
    }

    #[test]
    fn switches_and_specs_get_transport_hints() {
        let spec = "epoll+napi".parse::<ringdb_net::NetConfig>().unwrap_err();
        let text = net_hint(&spec).unwrap();
        assert!(
            text.contains("uring+napi") && text.contains("--mode"),
            "{text}"
        );
        let unknown = "tcp".parse::<ringdb_net::NetConfig>().unwrap_err();
        assert!(net_hint(&unknown).unwrap().contains("--transport"));
        let conflict = "uring+zc-send+multishot"
            .parse::<ringdb_net::NetConfig>()
            .unwrap_err();
        let text = net_hint(&conflict).unwrap();
        assert!(
            text.contains("+zc-send") && text.contains("+multishot"),
            "{text}"
        );
        let netns = NetError::Unsupported {
            switch: NetSwitch::NetworkNamespaces,
            reason: "`ip netns add x` failed: Operation not permitted".into(),
        };
        assert!(net_hint(&netns).unwrap().contains("--netns"));
        let napi = NetError::Unsupported {
            switch: NetSwitch::Napi,
            reason: "no NAPI context".into(),
        };
        assert!(net_hint(&napi).unwrap().contains("+napi"));
    }

    #[test]
    fn hints_reach_through_a_boxed_error_and_skip_others() {
        let boxed: Box<dyn Error> = Box::new(NetError::UnknownProtocol {
            name: "sctp".into(),
        });
        assert!(net_hint(boxed.as_ref()).unwrap().contains("--proto"));
        let ring = NetError::Ring(ringdb_io::IoError::RuntimeGone);
        assert!(net_hint(&ring).is_none());
        let other = std::io::Error::other("not a network error");
        assert!(net_hint(&other).is_none());
        let through_hint = crate::hints::hint(&NetError::Timeout {
            what: "an echo".into(),
            after: std::time::Duration::from_secs(1),
        });
        assert!(through_hint.unwrap().contains("--timeout"));
    }
}

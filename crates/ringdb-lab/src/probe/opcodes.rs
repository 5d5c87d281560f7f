//! io_uring opcode names: the probe lists the opcodes a kernel supports, and the well-known
//! ones it lacks, by their `IORING_OP_*` names.

/// io_uring opcode numbers (`IORING_OP_*`) this build knows by name.
const OPCODE_NAMES: &[&str] = &[
    "NOP",
    "READV",
    "WRITEV",
    "FSYNC",
    "READ_FIXED",
    "WRITE_FIXED",
    "POLL_ADD",
    "POLL_REMOVE",
    "SYNC_FILE_RANGE",
    "SENDMSG",
    "RECVMSG",
    "TIMEOUT",
    "TIMEOUT_REMOVE",
    "ACCEPT",
    "ASYNC_CANCEL",
    "LINK_TIMEOUT",
    "CONNECT",
    "FALLOCATE",
    "OPENAT",
    "CLOSE",
    "FILES_UPDATE",
    "STATX",
    "READ",
    "WRITE",
    "FADVISE",
    "MADVISE",
    "SEND",
    "RECV",
    "OPENAT2",
    "EPOLL_CTL",
    "SPLICE",
    "PROVIDE_BUFFERS",
    "REMOVE_BUFFERS",
    "TEE",
    "SHUTDOWN",
    "RENAMEAT",
    "UNLINKAT",
    "MKDIRAT",
    "SYMLINKAT",
    "LINKAT",
    "MSG_RING",
    "FSETXATTR",
    "SETXATTR",
    "FGETXATTR",
    "GETXATTR",
    "SOCKET",
    "URING_CMD",
    "SEND_ZC",
    "SENDMSG_ZC",
    "READ_MULTISHOT",
    "WAITID",
    "FUTEX_WAIT",
    "FUTEX_WAKE",
    "FUTEX_WAITV",
    "FIXED_FD_INSTALL",
    "FTRUNCATE",
    "BIND",
    "LISTEN",
    "RECV_ZC",
    "EPOLL_WAIT",
    "READV_FIXED",
    "WRITEV_FIXED",
    "PIPE",
];

/// The name of `op` without the `IORING_OP_` prefix, if this build knows it.
pub(super) fn known_opcode_name(op: u8) -> Option<&'static str> {
    OPCODE_NAMES.get(usize::from(op)).copied()
}

/// The `IORING_OP_*` name of `op` without the prefix, or `op<N>` for numbers unknown here.
pub fn opcode_name(op: u8) -> String {
    known_opcode_name(op).map_or_else(|| format!("op{op}"), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(opcode_name(22), "READ");
        assert_eq!(opcode_name(46), "URING_CMD");
        assert_eq!(opcode_name(58), "RECV_ZC");
        assert_eq!(opcode_name(200), "op200");
    }
}

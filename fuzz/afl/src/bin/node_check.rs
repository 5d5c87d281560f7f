//! AFL++ target: `ringdb_afl::node_check` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("node_check", data));
}

//! AFL++ target: `ringdb_afl::racy_node` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("racy_node", data));
}

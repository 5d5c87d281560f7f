//! AFL++ target: `ringdb_afl::page_verify` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("page_verify", data));
}

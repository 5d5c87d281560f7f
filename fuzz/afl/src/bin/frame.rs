//! AFL++ target: `ringdb_afl::frame` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("frame", data));
}

//! AFL++ target: `ringdb_afl::meta` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("meta", data));
}

//! AFL++ target: `ringdb_afl::resp` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("resp", data));
}

//! AFL++ target: `ringdb_afl::wal_record` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("wal_record", data));
}

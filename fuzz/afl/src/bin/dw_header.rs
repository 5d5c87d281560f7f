//! AFL++ target: `ringdb_afl::dw_header` (see `lib.rs`).

fn main() {
    afl::fuzz!(|data: &[u8]| ringdb_afl::run("dw_header", data));
}

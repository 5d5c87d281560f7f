//! Writes the targets' seed inputs: `seeds DIR` makes `DIR/<target>/<name>`.

fn main() -> std::io::Result<()> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("seeds".into()));
    for (target, name, bytes) in ringdb_afl::seeds() {
        std::fs::create_dir_all(dir.join(target))?;
        std::fs::write(dir.join(target).join(name), bytes)?;
    }
    for target in ringdb_afl::TARGETS {
        // Every target runs its seeds once here, so a seed that fails is seen before AFL++.
        for entry in std::fs::read_dir(dir.join(target))? {
            ringdb_afl::run(target, &std::fs::read(entry?.path())?);
        }
    }
    Ok(())
}

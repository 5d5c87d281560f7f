//! The recommendation as a configuration file ([`ConfigFile`](crate::config::ConfigFile)): what `Db::open`,
//! `ringdb ycsb --config`, `ringdb io --config` and `ringdb ladder --config` take, so advice
//! becomes settings in one step. Comment lines at its head say what wrote it, for which
//! target and workload, and why.

use super::{Advice, AdviseOpts, Preset, Workload};
use crate::config::{ConfigFile, DbSettings, WorkloadSettings};

/// The recommended configuration, or `None` when nothing can run here.
pub fn config_of(advice: &Advice, opts: &AdviseOpts) -> Option<ConfigFile> {
    let best = advice.recommendation()?;
    let ycsb = match opts.workload {
        Workload::Preset { preset } => Some(ycsb_name(preset).to_string()),
        Workload::Custom { .. } => None,
    };
    Some(ConfigFile {
        io: best.io.clone(),
        db: DbSettings {
            pool_bytes: Some((opts.pool_pages * opts.page_size) as u64),
            page_size_bytes: Some(opts.page_size as u64),
            shards: Some(best.rings),
            ..DbSettings::default()
        },
        workload: WorkloadSettings {
            tasks: Some(best.tasks_per_ring),
            value_size: Some(opts.value_size),
            // The presets draw keys uniformly (the advice's model assumes it).
            distribution: ycsb.as_ref().map(|_| "uniform".to_string()),
            ycsb,
            ..WorkloadSettings::default()
        },
    })
}

/// `ringdb ycsb`'s name for a preset.
fn ycsb_name(preset: Preset) -> &'static str {
    match preset {
        Preset::UpdateOnly => "update-only",
        Preset::YcsbA => "a",
        Preset::YcsbB => "b",
        Preset::YcsbC => "c",
    }
}

/// The file's text: a commented head (what, for what, why), then the settings.
pub fn config_text(advice: &Advice, config: &ConfigFile) -> String {
    let mut head = vec![
        "# written by `ringdb advise`".to_string(),
        format!("# target: {}", advice.target),
        format!("# workload: {}", advice.workload),
        format!(
            "# machine: {} thread(s), {} operations in flight",
            advice.machine.threads, advice.machine.concurrency
        ),
    ];
    if let Some(best) = advice.recommendation() {
        head.push(format!(
            "# recommended: {} ({}), predicted {:.0} ops/s at {:.0} cycles per operation, bound by {}",
            best.name, best.description, best.ops_per_s, best.cpu_cycles_per_op, best.bound
        ));
    }
    if let Some(v) = &advice.verification {
        head.push(format!("# verified: {}", v.verdict));
    }
    head.extend(
        advice
            .reasons
            .iter()
            .filter(|r| r.guideline != "probe")
            .map(|r| format!("# [{}] {}", r.guideline, r.text)),
    );
    head.push(
        "# [db] shards: one ring per shard; durability is left at the engine's default".into(),
    );
    let mut text = head.join("\n");
    text.push_str("\n\n");
    text.push_str(&config.to_toml());
    text
}

//! `ringdb ycsb`'s cost model beside the run (issue 15 item 2): a short calibration after the
//! load and before the run (`--no-model` skips it), then the prediction for the run's measured
//! page reads and writes, printed beside the cycles per operation it measured. A calibration
//! that cannot run says why, and the run goes on without a prediction: never a wrong figure.

use super::ycsb_cmd::{CmdResult, Settings, YcsbArgs};
use ringdb::LocalDb;
use ringdb_bench::units::parse_duration;
use ringdb_bench::ycsb::PhaseReport;
use ringdb_bench::ycsb_model::{self, ModelCosts, ModelSpec};
use ringdb_io::IoConfig;
use serde_json::{json, Value};

/// The calibration's outcome, before the run.
pub(crate) enum Model {
    /// `--no-model`.
    Off,
    /// The calibration failed; the reason, for the table and the JSON.
    NotComputed(String),
    /// The costs measured.
    Costs(ModelCosts),
}

/// Measures the model's costs on the loaded database for the run `a` describes (progress on
/// stderr), unless `--no-model`.
pub(crate) fn calibrate(
    db: &mut LocalDb,
    a: &YcsbArgs,
    settings: &Settings,
    io: IoConfig,
) -> CmdResult<Model> {
    if a.no_model {
        return Ok(Model::Off);
    }
    let spec = ModelSpec {
        workload: settings.workload,
        distribution: settings.distribution,
        records: a.records,
        value_size: a.value_size,
        tasks: a.tasks,
        seed: a.seed,
        measure: parse_duration(&a.model_time)?,
        data: ycsb_model::data_file(&a.db),
        io,
    };
    eprintln!(
        "ycsb: model: calibrating ({} per measurement)",
        a.model_time
    );
    let progress = |step: &str| eprintln!("ycsb: model: {step}");
    Ok(match ycsb_model::calibrate(db, &spec, &progress) {
        Ok(costs) => {
            eprintln!("ycsb: model: calibrated in {:.1} s", costs.secs);
            Model::Costs(costs)
        }
        Err(e) => {
            eprintln!("ycsb: model: not computed: {e}");
            Model::NotComputed(e.to_string())
        }
    })
}

/// The model beside the run: the table's lines and the JSON report's `model` value.
pub(crate) fn beside(model: &Model, run: &PhaseReport, a: &YcsbArgs) -> (Vec<String>, Value) {
    let costs = match model {
        Model::Off => return (Vec::new(), Value::Null),
        Model::NotComputed(why) => {
            return (
                vec![format!("model: not computed: {why}")],
                json!({ "not_computed": why }),
            )
        }
        Model::Costs(costs) => costs,
    };
    match ycsb_model::compare(costs, run, &ycsb_model::data_file(&a.db)) {
        Ok(p) => (
            vec![p.line(), p.costs_line()],
            serde_json::to_value(&p).unwrap_or(Value::Null),
        ),
        Err(e) => (
            vec![format!("model: not computed: {e}")],
            json!({ "not_computed": e.to_string(), "costs": costs }),
        ),
    }
}

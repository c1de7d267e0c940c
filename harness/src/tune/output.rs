//! A finished tune's results: the table the algorithm loads
//! (`ALG:table=FILE`; [`cc_algorithms::tuned`]), `result.json` and a
//! convergence plot (`convergence.svg`) in the work directory.

use std::collections::BTreeMap;
use std::path::Path;

use cc_algorithms::tuned::{TunedEntry, TunedTable};
use plotters::prelude::*;

use super::optimizer::Trace;
use super::{ConditionResult, TuneConfig, TuneError, TuneResult, View};

/// Builds the result from the finished traces and the validation runs.
pub fn finish(v: &View<'_>, traces: &[Option<Trace>], ran: usize) -> Result<TuneResult, TuneError> {
    let space = &v.cfg.space;
    let mut conditions = Vec::new();
    for (c, t) in v.cfg.conditions.iter().zip(traces) {
        let t = t.as_ref().ok_or_else(|| {
            TuneError::Input("internal: a condition's optimiser did not finish".into())
        })?;
        let values = space.values(&t.best);
        let best_spec = space.spec(&values);
        let best = (v.measure)(&best_spec, c, &v.cfg.validate_seeds);
        let default = (v.measure)(&space.base_spec(), c, &v.cfg.validate_seeds);
        let mut so_far = f64::NEG_INFINITY;
        let convergence = t
            .told
            .iter()
            .map(|(_, f)| {
                if f.is_finite() {
                    so_far = so_far.max(*f);
                }
                so_far
            })
            .collect();
        conditions.push(ConditionResult {
            condition: c.clone(),
            best: space
                .params
                .iter()
                .map(|p| p.name.clone())
                .zip(values.iter().copied())
                .collect(),
            best_spec,
            search_value: t.best_value,
            best_validated: best.value,
            default_spec: space.base_spec(),
            default_validated: default.value,
            best_metrics: best.metrics,
            default_metrics: default.metrics,
            convergence,
            evaluations: t.told.iter().map(|(x, f)| (space.values(x), *f)).collect(),
        });
    }
    Ok(TuneResult {
        algorithm: space.algorithm.clone(),
        objective: (v.cfg.objective.clone(), v.objective.expr.clone()),
        optimizer: v.cfg.optimizer.kind.name().into(),
        conditions,
        evaluations_run: ran,
        evaluations_stored: v.stored,
    })
}

/// The table of a result.
pub fn table(r: &TuneResult) -> TunedTable {
    TunedTable {
        algorithm: Some(r.algorithm.clone()),
        objective: Some(r.objective.0.clone()),
        entry: r
            .conditions
            .iter()
            .map(|c| TunedEntry {
                rtt_ms: c.condition.rtt_ns as f64 / 1e6,
                rate_bps: c.condition.rate_bps,
                loss: c.condition.loss,
                flows: c.condition.flows,
                fitness: round4(c.best_validated.0),
                params: c.best.clone(),
            })
            .collect(),
        path: Default::default(),
    }
}

fn round4(v: f64) -> f64 {
    if v.is_finite() {
        (v * 1e4).round() / 1e4
    } else {
        0.0
    }
}

/// Writes the table (atomically) to `out`, and `result.json` and
/// `convergence.svg` into the work directory.
pub fn write(r: &TuneResult, cfg: &TuneConfig, work: &Path, out: &Path) -> Result<(), TuneError> {
    let header = format!(
        "Parameters of `{alg}` tuned by `cclab tune` ({opt}) at {time}.\nObjective: {obj} = {expr}\nfitness: the objective's mean over {n} validation seed(s) the search did not use.\nUse it with --cc {alg}:table={path}",
        alg = r.algorithm,
        opt = r.optimizer,
        time = crate::run::now_rfc3339(),
        obj = r.objective.0,
        expr = r.objective.1,
        n = cfg.validate_seeds.len(),
        path = out.display(),
    );
    if let Some(p) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(p)?;
    }
    let tmp = out.with_extension("toml.part");
    std::fs::write(&tmp, table(r).to_toml(&header))?;
    std::fs::rename(&tmp, out)?;
    crate::files::write_json_atomic(&work.join("result.json"), r)?;
    // The plot needs a TrueType font; without one the table still stands.
    let svg = qlog_analysis::plot::ensure_font()
        .map_err(|e| e.to_string())
        .and_then(|_| convergence_svg(r));
    match svg {
        Ok(svg) => {
            let tmp = work.join("convergence.svg.part");
            std::fs::write(&tmp, svg)?;
            std::fs::rename(&tmp, work.join("convergence.svg"))?;
        }
        Err(e) => eprintln!("cclab tune: no convergence plot: {e}"),
    }
    Ok(())
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
];

/// Every evaluation's value (dots) and the best so far (line) against the
/// evaluation's number, one colour per condition; the defaults' validated
/// value as a dashed level.
pub fn convergence_svg(r: &TuneResult) -> Result<String, String> {
    let finite = |v: &f64| v.is_finite();
    let all: Vec<f64> = r
        .conditions
        .iter()
        .flat_map(|c| {
            c.evaluations
                .iter()
                .map(|e| e.1)
                .chain([c.default_validated.0, c.best_validated.0])
        })
        .filter(finite)
        .collect();
    let (lo, hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    let (lo, hi) = if lo < hi {
        (lo, hi)
    } else {
        (lo - 1.0, lo + 1.0)
    };
    let pad = (hi - lo) * 0.05;
    let n = r
        .conditions
        .iter()
        .map(|c| c.evaluations.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .caption(
                format!(
                    "{} tuned for {} ({})",
                    r.algorithm, r.objective.0, r.optimizer
                ),
                ("sans-serif", 16),
            )
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..n as f64, (lo - pad)..(hi + pad))
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("evaluation")
            .y_desc("objective")
            .max_light_lines(0)
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, c) in r.conditions.iter().enumerate() {
            draw_condition(&mut chart, c, COLOURS[i % COLOURS.len()], n)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// One condition: its evaluations as dots, the best so far as a line, the
/// defaults' validated value dashed.
fn draw_condition(
    chart: &mut Chart<'_, '_>,
    c: &ConditionResult,
    col: RGBColor,
    n: usize,
) -> Result<(), String> {
    let dots = c
        .evaluations
        .iter()
        .enumerate()
        .filter(|(_, e)| e.1.is_finite())
        .map(|(k, e)| Circle::new((k as f64 + 1.0, e.1), 2, col.mix(0.45).filled()));
    chart.draw_series(dots).map_err(|e| e.to_string())?;
    let line = c
        .convergence
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(k, v)| (k as f64 + 1.0, *v));
    chart
        .draw_series(LineSeries::new(line, col.stroke_width(2)))
        .map_err(|e| e.to_string())?
        .label(c.condition.label())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], col.stroke_width(2)));
    if c.default_validated.0.is_finite() {
        let y = c.default_validated.0;
        let dashes = (0..n).step_by(2).map(move |k| {
            PathElement::new(
                vec![(k as f64, y), (k as f64 + 1.0, y)],
                col.stroke_width(1),
            )
        });
        chart.draw_series(dashes).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Mean metrics, for printing: `name value` pairs of the interesting ones.
pub fn brief(m: &BTreeMap<String, f64>) -> String {
    let get = |k: &str| m.get(k).copied().unwrap_or(f64::NAN);
    format!(
        "goodput {:.1}%, queue {:.1} ms (p95 {:.1}), loss {:.2}%",
        get("goodput") * 100.0,
        get("queue_delay"),
        get("p95_queue_delay"),
        get("loss_rate") * 100.0
    )
}

/// The printout of a finished tune: per condition the best spec against
/// the defaults on the validation seeds, and where the files are.
pub fn summary_text(r: &TuneResult, out: &Path, work: &Path) -> String {
    let pm = |(m, h): (f64, f64)| format!("{m:.4} ± {h:.4}");
    let mut s = String::new();
    for c in &r.conditions {
        let gain = c.best_validated.0 - c.default_validated.0;
        s += &format!(
            "{}: best {}  objective {} (defaults {}: {}; {:+.4})\n  best:     {}\n  defaults: {}\n",
            c.condition.label(),
            c.best_spec,
            pm(c.best_validated),
            c.default_spec,
            pm(c.default_validated),
            gain,
            brief(&c.best_metrics),
            brief(&c.default_metrics),
        );
    }
    let objective = if r.objective.0 == r.objective.1 {
        r.objective.0.clone()
    } else {
        format!("{} = {}", r.objective.0, r.objective.1)
    };
    s += &format!(
        "objective {objective} (mean ± 95% CI on validation seeds)\n{} evaluations run, {} stored\ntable: {} (use --cc {}:table={})\nconvergence: {}\n",
        r.evaluations_run,
        r.evaluations_stored,
        out.display(),
        r.algorithm,
        out.display(),
        work.join("convergence.svg").display()
    );
    s
}

//! A claim's verdict: its metric measured for every label (at every
//! label of its `over` axis), then its directional test on the means.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::expr::{self, Outcome, Stat, Test};
use super::jobs::Job;
use super::manifest::{Claim, Experiment, Manifest, Selector};
use super::metrics::RunData;
use super::{ClaimResult, Measured};

/// Why a selector matched no point: validation guarantees it names real
/// labels, so the point was left out by `--quick`.
const SKIPPED: &str = "no point matches: left out by --quick";

/// Each run's measurements, by run directory.
pub(super) type Data = BTreeMap<PathBuf, Result<RunData, String>>;

/// The point of `e` that `sel` picks, restricted to `at` (axis, label).
fn pick<'a>(
    jobs: &'a [Job],
    exp: usize,
    sel: &Selector,
    at: Option<(&str, &str)>,
) -> Result<&'a Job, String> {
    let c: Vec<&Job> = jobs
        .iter()
        .filter(|j| j.exp == exp && j.point.matches(sel))
        .filter(|j| at.is_none_or(|(a, l)| j.point.coord(a) == Some(l)))
        .collect();
    match c.len() {
        1 => Ok(c[0]),
        0 => Err(SKIPPED.into()),
        n => Err(format!(
            "{n} points match; add axis conditions so that one does ({})",
            c.iter()
                .map(|j| j.point.dir_name())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn measure(
    jobs: &[Job],
    data: &Data,
    exp: usize,
    metric: &str,
    selector: &str,
    at: Option<(&str, &str)>,
) -> Result<Stat, String> {
    let sel = Selector::parse(selector)?;
    let j = pick(jobs, exp, &sel, at)?;
    let d = data
        .get(&j.dir)
        .ok_or("no run")?
        .as_ref()
        .map_err(|e| format!("run {} has no results: {e}", j.point.dir_name()))?;
    let v = d
        .values(metric, sel.flow.as_deref())
        .map_err(|e| e.to_string())?;
    Stat::of(&v).ok_or_else(|| format!("{metric} was not measured in {}", j.point.dir_name()))
}

/// The claim as the manifest states it, not yet measured: N/A.
fn unmeasured(c: &Claim) -> ClaimResult {
    let paper = c
        .paper
        .as_ref()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(serde_json::Value::Null);
    ClaimResult {
        id: c.id.clone(),
        source: c.source.clone(),
        statement: c.statement.clone(),
        metric: c.metric.clone(),
        paper,
        ours: Vec::new(),
        test: c.test.clone(),
        over: c.over.clone(),
        verdict: "N/A".into(),
        significant: false,
        detail: String::new(),
        reason: c.na.clone(),
        note: c.note.clone(),
    }
}

/// A FAIL for want of a measurement.
fn fail(r: &mut ClaimResult, why: String) {
    r.verdict = "FAIL".into();
    r.detail = format!("no measurement: {why}");
    r.reason = Some("a run is missing or failed (see the detail); nothing was measured".into());
}

/// Checks claim `c` against the runs.
pub(super) fn evaluate(m: &Manifest, c: &Claim, jobs: &[Job], data: &Data) -> ClaimResult {
    let mut r = unmeasured(c);
    if c.na.is_some() {
        return r;
    }
    // Validated by Manifest::load.
    let exp = m
        .experiments
        .iter()
        .position(|e| Some(&e.id) == c.experiment.as_ref())
        .expect("validated experiment");
    let test = Test::parse(c.test.as_deref().unwrap_or("")).expect("validated test");
    let over = over_labels(&m.experiments[exp], exp, c, jobs);
    // Measure every label at every place.
    let places: Vec<Option<&str>> = if over.is_empty() {
        vec![None]
    } else {
        over.iter().map(|(l, _)| Some(l.as_str())).collect()
    };
    let table = match measure_table(c, jobs, data, exp, &places, &mut r) {
        Ok(t) => t,
        Err(Unmeasured::LeftOut(reason)) => {
            r.verdict = "N/A".into();
            r.ours.clear();
            r.reason = Some(reason);
            return r;
        }
        Err(Unmeasured::Failed(why)) => {
            fail(&mut r, why);
            return r;
        }
    };
    let outcome = if test.is_trend() {
        let series: Vec<(f64, expr::Row)> = over
            .iter()
            .zip(&table)
            .map(|((_, x), row)| (*x, row.clone()))
            .collect();
        test.eval_trend(&series)
    } else {
        at_every_place(c, &test, &places, &table)
    };
    match outcome {
        Ok(o) => {
            r.verdict = if o.holds { "PASS" } else { "FAIL" }.into();
            r.significant = o.significant;
            r.detail = o.detail;
            if !o.holds {
                r.reason = c.if_fail.clone().or_else(|| {
                    Some(
                        "no explanation recorded yet; the measured figures are in the detail"
                            .into(),
                    )
                });
            }
        }
        Err(e) => fail(&mut r, e),
    }
    r
}

/// The labels (and x values) of the claim's `over` axis present in this
/// reproduction (`--quick` may keep fewer); none without an axis.
fn over_labels(e: &Experiment, exp: usize, c: &Claim, jobs: &[Job]) -> Vec<(String, f64)> {
    let Some(o) = &c.over else {
        return Vec::new();
    };
    let a = e
        .axes
        .iter()
        .find(|a| &a.name == o)
        .expect("validated axis");
    (0..a.values.len())
        .map(|i| (Experiment::label(a, i), Experiment::x(a, i)))
        .filter(|(l, _)| {
            jobs.iter()
                .any(|j| j.exp == exp && j.point.coord(o) == Some(l))
        })
        .collect()
}

/// Why a claim's table could not be filled.
enum Unmeasured {
    /// A point `--quick` leaves out: N/A, for this reason.
    LeftOut(String),
    /// A run is missing or failed: FAIL, for this reason.
    Failed(String),
}

/// One row per place: every label's measurement there (also added to
/// `r.ours`).
fn measure_table(
    c: &Claim,
    jobs: &[Job],
    data: &Data,
    exp: usize,
    places: &[Option<&str>],
    r: &mut ClaimResult,
) -> Result<Vec<expr::Row>, Unmeasured> {
    let metric = c.metric.clone().unwrap_or_default();
    let mut table: Vec<expr::Row> = Vec::new();
    for at in places {
        let mut row = BTreeMap::new();
        for (label, selector) in &c.values {
            let at2 = at.map(|l| (c.over.as_deref().unwrap_or(""), l));
            match measure(jobs, data, exp, &metric, selector, at2) {
                Ok(s) => {
                    r.ours.push(Measured {
                        label: label.clone(),
                        at: at.map(str::to_string),
                        stat: s,
                    });
                    row.insert(label.clone(), s);
                }
                Err(why) if why.starts_with(SKIPPED) => {
                    return Err(Unmeasured::LeftOut(format!(
                        "not run in --quick: {label} ({selector}{}) is a point --quick leaves out",
                        at.map(|a| format!(" at {a}")).unwrap_or_default()
                    )));
                }
                Err(why) => {
                    return Err(Unmeasured::Failed(format!(
                        "{label} ({selector}) {}: {why}",
                        at.unwrap_or("")
                    )));
                }
            }
        }
        table.push(row);
    }
    Ok(table)
}

/// The test at each place, combined: it holds where it holds at every
/// place (or, with `require = "most"`, at most places).
fn at_every_place(
    c: &Claim,
    test: &Test,
    places: &[Option<&str>],
    table: &[expr::Row],
) -> Result<Outcome, String> {
    let mut outs = Vec::new();
    for (k, row) in table.iter().enumerate() {
        let mut o = test.eval(row)?;
        if let Some(Some(at)) = places.get(k) {
            o.detail = format!("{} {at}: {}", c.over.as_deref().unwrap_or(""), o.detail);
        }
        outs.push(o);
    }
    let n = outs.len();
    let held = outs.iter().filter(|o| o.holds).count();
    let sig = outs.iter().filter(|o| o.significant).count();
    let most = c.require.as_deref() == Some("most");
    let holds = if most { 2 * held > n } else { held == n };
    let significant = if most { 2 * sig > n } else { sig == n };
    Ok(Outcome {
        holds,
        significant,
        detail: if n > 1 {
            format!(
                "holds at {held} of {n} {}: {}",
                c.over.as_deref().unwrap_or("points"),
                outs.iter()
                    .map(|o| o.detail.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        } else {
            outs.pop().map(|o| o.detail).unwrap_or_default()
        },
    })
}

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
        .values_on(metric, sel.flow.as_deref(), sel.link.as_deref())
        .map_err(|e| e.to_string())?;
    strict_stat(&v, metric, &j.point.dir_name(), j.scenario.duration_ns)
}

/// Mean and CI of every repetition's value; a repetition without one
/// (a transfer that did not finish, a metric the run did not record) is
/// an error naming it, never left out.
fn strict_stat(v: &[f64], metric: &str, run: &str, duration_ns: u64) -> Result<Stat, String> {
    if v.is_empty() {
        return Err(format!("{metric}: run {run} has no repetitions"));
    }
    let missing: Vec<String> = v
        .iter()
        .enumerate()
        .filter(|(_, x)| !x.is_finite())
        .map(|(i, _)| (i + 1).to_string())
        .collect();
    if !missing.is_empty() {
        let why = if metric == "completion_s" {
            format!(
                "a sized flow did not finish within the run's {} s",
                duration_ns as f64 / 1e9
            )
        } else {
            "the run did not record it".to_string()
        };
        return Err(format!(
            "{metric} missing in repetition(s) {} of {} of run {run}: {why}",
            missing.join(", "),
            v.len()
        ));
    }
    Stat::of(v).ok_or_else(|| format!("{metric} was not measured in {run}"))
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
        class: Class::NotApplicable,
        significant: false,
        effect_pct: None,
        min_effect_pct: 100.0 * c.min_effect(),
        detail: String::new(),
        reason: c.na.clone(),
        caveat: None,
        note: None,
        related: c.duplicate_of.clone().or_else(|| c.contradicts.clone()),
        reinterpretation: c.reinterpretation.clone(),
    }
}

/// A FAIL for want of a measurement.
fn fail(r: &mut ClaimResult, why: String) {
    r.verdict = "FAIL".into();
    r.class = Class::Unmeasured;
    r.detail = format!("no measurement: {why}");
    r.reason = Some(
        "a run is missing, failed or did not finish (see the detail); the claim was not measured"
            .into(),
    );
}

/// Checks claim `c` against the runs; its class as a single claim
/// (duplicates and contradictory pairs are marked by [`relate`]).
pub(super) fn evaluate(m: &Manifest, c: &Claim, jobs: &[Job], data: &Data) -> ClaimResult {
    let mut r = unmeasured(c);
    let exp_id = c.experiment.as_deref().unwrap_or("");
    let quote = |t: &Option<String>| {
        t.as_deref().map(|t| {
            super::quote::render(t, &|q| {
                let e = q.experiment.as_deref().unwrap_or(exp_id);
                let ei = m
                    .experiments
                    .iter()
                    .position(|x| x.id == e)
                    .ok_or_else(|| format!("no experiment `{e}`"))?;
                measure(jobs, data, ei, &q.metric, &q.selector, None)
            })
        })
    };
    // Remarks go with every verdict, N/A included.
    r.caveat = quote(&c.caveat);
    r.note = quote(&c.note);
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
    let min_effect = c.min_effect();
    let outcome = if test.is_trend() {
        let series: Vec<(f64, expr::Row)> = over
            .iter()
            .zip(&table)
            .map(|((_, x), row)| (*x, row.clone()))
            .collect();
        test.eval_trend(&series)
            .map(|o| combine(c, vec![o], min_effect))
    } else {
        at_every_place(c, &test, &places, &table, min_effect)
    };
    match outcome {
        Ok(o) => {
            r.verdict = if o.holds { "PASS" } else { "FAIL" }.into();
            r.significant = o.significant;
            r.effect_pct = o.effect.map(|e| 100.0 * e);
            r.class = match (o.holds, o.decisive) {
                (true, true) => Class::Pass,
                (true, false) => Class::PassWithinNoise,
                (false, true) => Class::Fail,
                (false, false) => Class::FailWithinNoise,
            };
            r.detail = o.detail;
            if !o.decisive {
                r.detail.push_str(&format!(
                    "; within noise: {}",
                    if o.significant {
                        format!(
                            "below the claim's minimum effect of {:.0}%",
                            100.0 * c.min_effect()
                        )
                    } else {
                        "inside the repetitions' 95% confidence intervals".to_string()
                    }
                ));
            }
            if !o.holds {
                r.reason = quote(&c.if_fail).or_else(|| {
                    Some(
                        "no explanation recorded yet; the measured figures are in the detail"
                            .into(),
                    )
                });
            }
            if let Some(g) = quote(&c.guaranteed) {
                r.class = Class::Guaranteed;
                r.caveat = Some(match r.caveat.take() {
                    Some(cv) => format!("guaranteed here: {g}. {cv}"),
                    None => format!("guaranteed here: {g}"),
                });
            }
        }
        Err(e) => fail(&mut r, e),
    }
    r
}

/// How a claim counts in a paper's totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Holds, beyond the noise and the minimum effect: agreement.
    Pass,
    /// Holds on the means, but within noise or below the minimum effect.
    PassWithinNoise,
    /// Does not hold, beyond the noise and the minimum effect.
    Fail,
    /// Does not hold on the means, within noise or below the minimum effect.
    FailWithinNoise,
    /// A run was missing, failed or unfinished: nothing to compare.
    Unmeasured,
    /// Cannot be run (`na`).
    #[serde(rename = "n/a")]
    NotApplicable,
    /// The same phenomenon as another claim on the same runs.
    Duplicate,
    /// One of a pair of claims stating opposite relations.
    Contradictory,
    /// Cannot come out otherwise in our setup.
    Guaranteed,
}

impl Class {
    /// The verdict as the tables print it.
    pub fn label(self, verdict: &str, related: Option<&str>) -> String {
        let rel = related.unwrap_or("?");
        match self {
            Class::Pass | Class::Fail => verdict.to_string(),
            Class::PassWithinNoise | Class::FailWithinNoise => format!("{verdict} (within noise)"),
            Class::Unmeasured => "FAIL (not measured)".into(),
            Class::NotApplicable => "N/A".into(),
            Class::Duplicate => format!("{verdict} (duplicate of {rel}, not counted)"),
            Class::Contradictory => {
                format!("{verdict} (contradicts {rel}: the pair is not counted)")
            }
            Class::Guaranteed => format!("{verdict} (guaranteed here, not counted)"),
        }
    }
}

/// A paper's verdicts, counted: each phenomenon once, agreement only
/// where it is beyond noise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    /// Claims in the paper.
    pub claims: usize,
    /// PASS beyond noise and the minimum effect.
    pub pass: usize,
    /// PASS within noise.
    pub pass_within_noise: usize,
    /// FAIL beyond noise and the minimum effect.
    pub fail: usize,
    /// FAIL within noise.
    pub fail_within_noise: usize,
    /// Not measured (a run missing, failed or unfinished).
    pub unmeasured: usize,
    /// N/A.
    pub na: usize,
    /// Contradictory pairs (each pair once; two claims).
    pub contradictory_pairs: usize,
    /// Duplicates (counted through the claim they repeat).
    pub duplicates: usize,
    /// Guaranteed outcomes.
    pub guaranteed: usize,
    /// Claims that test a reinterpretation of ours, by class (PASS, FAIL,
    /// PASS and FAIL within noise; the other classes count as above):
    /// never in the paper's PASS and FAIL.
    pub reinterpretation: Reinterpreted,
}

/// Verdicts of claims that test a reinterpretation of ours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reinterpreted {
    /// PASS beyond noise and the minimum effect.
    pub pass: usize,
    /// FAIL beyond noise and the minimum effect.
    pub fail: usize,
    /// PASS within noise.
    pub pass_within_noise: usize,
    /// FAIL within noise.
    pub fail_within_noise: usize,
}

impl Reinterpreted {
    fn total(&self) -> usize {
        self.pass + self.fail + self.pass_within_noise + self.fail_within_noise
    }
}

impl Counts {
    /// Counts the claims by class.
    pub fn of(claims: &[ClaimResult]) -> Counts {
        let n = |k: Class| claims.iter().filter(|c| c.class == k).count();
        // A verdict on a reinterpretation of ours is counted apart.
        let ours = |c: &&ClaimResult| c.reinterpretation.is_none();
        let paper = |k: Class| claims.iter().filter(ours).filter(|c| c.class == k).count();
        let re = |k: Class| n(k) - paper(k);
        Counts {
            claims: claims.len(),
            pass: paper(Class::Pass),
            pass_within_noise: paper(Class::PassWithinNoise),
            fail: paper(Class::Fail),
            fail_within_noise: paper(Class::FailWithinNoise),
            unmeasured: n(Class::Unmeasured),
            na: n(Class::NotApplicable),
            contradictory_pairs: n(Class::Contradictory) / 2,
            duplicates: n(Class::Duplicate),
            guaranteed: n(Class::Guaranteed),
            reinterpretation: Reinterpreted {
                pass: re(Class::Pass),
                fail: re(Class::Fail),
                pass_within_noise: re(Class::PassWithinNoise),
                fail_within_noise: re(Class::FailWithinNoise),
            },
        }
    }

    /// Adds another paper's counts.
    pub fn add(&mut self, o: &Counts) {
        self.claims += o.claims;
        self.pass += o.pass;
        self.pass_within_noise += o.pass_within_noise;
        self.fail += o.fail;
        self.fail_within_noise += o.fail_within_noise;
        self.unmeasured += o.unmeasured;
        self.na += o.na;
        self.contradictory_pairs += o.contradictory_pairs;
        self.duplicates += o.duplicates;
        self.guaranteed += o.guaranteed;
        let (r, q) = (&mut self.reinterpretation, o.reinterpretation);
        r.pass += q.pass;
        r.fail += q.fail;
        r.pass_within_noise += q.pass_within_noise;
        r.fail_within_noise += q.fail_within_noise;
    }

    /// One line: `3 PASS, 2 PASS within noise, ...; not counted: ...`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} PASS, {} FAIL beyond noise; {} PASS and {} FAIL within noise",
            self.pass, self.fail, self.pass_within_noise, self.fail_within_noise
        );
        if self.unmeasured > 0 {
            s.push_str(&format!("; {} NOT MEASURED", self.unmeasured));
        }
        s.push_str(&format!("; {} N/A", self.na));
        let mut nc = Vec::new();
        if self.contradictory_pairs > 0 {
            nc.push(format!(
                "{} contradictory pair{}",
                self.contradictory_pairs,
                if self.contradictory_pairs == 1 {
                    ""
                } else {
                    "s"
                }
            ));
        }
        if self.duplicates > 0 {
            nc.push(format!(
                "{} duplicate{}",
                self.duplicates,
                if self.duplicates == 1 { "" } else { "s" }
            ));
        }
        if self.guaranteed > 0 {
            nc.push(format!("{} guaranteed", self.guaranteed));
        }
        if !nc.is_empty() {
            s.push_str(&format!("; not counted: {}", nc.join(", ")));
        }
        let r = self.reinterpretation;
        if r.total() > 0 {
            s.push_str(&format!(
                "; apart, testing reinterpretations of ours: {} PASS, {} FAIL beyond noise, {} PASS and {} FAIL within noise",
                r.pass, r.fail, r.pass_within_noise, r.fail_within_noise
            ));
        }
        s
    }
}

/// Marks duplicates and contradictory pairs (after every claim was
/// evaluated on its own): a measured claim that repeats another, or
/// states the opposite of another, is reported with its verdict but
/// counted only through the relation.
pub(super) fn relate(m: &Manifest, results: &mut [ClaimResult]) {
    let measured = |r: &ClaimResult| !matches!(r.class, Class::NotApplicable | Class::Unmeasured);
    for (i, c) in m.claims.iter().enumerate() {
        if !measured(&results[i]) {
            continue;
        }
        if let Some(d) = &c.duplicate_of {
            results[i].class = Class::Duplicate;
            results[i].related = Some(d.clone());
        }
        if let Some(o) = &c.contradicts {
            let Some(j) = m.claims.iter().position(|x| &x.id == o) else {
                continue;
            };
            if !measured(&results[j]) {
                continue;
            }
            for (k, other) in [(i, o.clone()), (j, c.id.clone())] {
                results[k].class = Class::Contradictory;
                results[k].related = Some(other);
            }
        }
    }
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

/// A verdict before it is classed.
pub(super) struct Verdict {
    /// Holds on the means.
    pub holds: bool,
    /// Would come out the same if every place within the confidence
    /// intervals came out the other way.
    pub significant: bool,
    /// The same, counting places below the minimum effect as noise too.
    pub decisive: bool,
    /// The effect (at one place; the smallest deciding one at several).
    pub effect: Option<f64>,
    /// The figures.
    pub detail: String,
}

/// The test at each place, combined: it holds where it holds at every
/// place (or, with `require = "most"`, at most places).
fn at_every_place(
    c: &Claim,
    test: &Test,
    places: &[Option<&str>],
    table: &[expr::Row],
    min_effect: f64,
) -> Result<Verdict, String> {
    let mut outs = Vec::new();
    for (k, row) in table.iter().enumerate() {
        let mut o = test.eval(row)?;
        if let Some(Some(at)) = places.get(k) {
            o.detail = format!("{} {at}: {}", c.over.as_deref().unwrap_or(""), o.detail);
        }
        outs.push(o);
    }
    Ok(combine(c, outs, min_effect))
}

/// Places' outcomes as one verdict. A verdict is significant (decisive)
/// when flipping every place that is within noise (or, for decisive, below
/// the minimum effect) would not change it: with `all`, a PASS needs every
/// place clear and a FAIL one clear failing place; with `most`, a PASS
/// needs a majority of clear passes and a FAIL no majority even if every
/// unclear place passed.
pub(super) fn combine(c: &Claim, mut outs: Vec<Outcome>, min_effect: f64) -> Verdict {
    let n = outs.len();
    let held = outs.iter().filter(|o| o.holds).count();
    let most = c.require.as_deref() == Some("most");
    let holds = if most { 2 * held > n } else { held == n };
    let clear = |o: &Outcome, with_effect: bool| {
        o.significant && (!with_effect || o.effect.is_none_or(|e| e >= min_effect))
    };
    let stable = |with_effect: bool| {
        let clear_holds = outs
            .iter()
            .filter(|o| o.holds && clear(o, with_effect))
            .count();
        let clear_fails = outs
            .iter()
            .filter(|o| !o.holds && clear(o, with_effect))
            .count();
        let best_holds = n - clear_fails;
        match (holds, most) {
            (true, false) => clear_holds == n,
            (false, false) => clear_fails >= 1,
            (true, true) => 2 * clear_holds > n,
            (false, true) => 2 * best_holds <= n,
        }
    };
    let (significant, decisive) = (stable(false), stable(true));
    // The effect shown: the smallest among the places that decide the
    // verdict (clear ones when it is decisive, else every place on its
    // side).
    let effect = outs
        .iter()
        .filter(|o| o.holds == holds && (!decisive || clear(o, true)))
        .filter_map(|o| o.effect)
        .min_by(|a, b| a.total_cmp(b));
    let detail = if n > 1 {
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
    };
    Verdict {
        holds,
        significant,
        decisive,
        effect,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use std::path::Path;

    /// A paper with one experiment (axis `cc`: a, b) and these claims.
    fn manifest(dir: &Path, claims: &str) -> Result<Manifest, String> {
        std::fs::write(
            dir.join("x.toml"),
            "name = \"x\"\n[[flows]]\ncc = \"newreno\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("paper.toml"),
            format!(
                r#"paper = "p"
title = "t"
seed = "s"
[[experiment]]
id = "e"
source = "s"
scenario = "x.toml"
[[experiment.axis]]
name = "cc"
field = "flows.0.cc"
values = ["a", "b"]
{claims}"#
            ),
        )
        .unwrap();
        Manifest::load(dir).map_err(|e| e.to_string())
    }

    /// A run directory whose repetitions have these link figures (drops,
    /// utilization, queue delay) and flow completions.
    fn run(dir: &Path, reps: &[Rep]) -> RunData {
        let reps: Vec<serde_json::Value> = reps
            .iter()
            .enumerate()
            .map(|(i, (d, u, q, done))| {
                serde_json::json!({
                    "rep": i + 1,
                    "bottleneck": {"drops": *d as u64, "utilization": u, "queue_delay_ms_mean": q, "loss_rate": 0.01},
                    "flows": [{"index": 0, "cc": "x", "bytes": 1_000_000, "goodput_bps": 1e6, "complete": done}]
                })
            })
            .collect();
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("summary.json"),
            serde_json::json!({"bottleneck": {"direction": "down"}, "repetitions": reps})
                .to_string(),
        )
        .unwrap();
        RunData::load(dir).unwrap()
    }

    /// One repetition's link figures: drops, utilization, queue delay,
    /// whether the flow finished.
    type Rep = (f64, f64, f64, bool);

    /// Every point of every experiment of `m`, in order, run with the next
    /// entry of `figures`: the jobs and their data.
    fn runs(m: &Manifest, dir: &Path, figures: &[&[Rep]]) -> (Vec<Job>, Data) {
        let sc = Scenario::parse("name = \"x\"\n[[flows]]\ncc = \"newreno\"\n", "t", dir).unwrap();
        let (mut jobs, mut data) = (Vec::new(), Data::new());
        let points = m.experiments.iter().enumerate().flat_map(|(ei, e)| {
            e.points(false)
                .into_iter()
                .map(move |p| (ei, dir.join(&e.id).join(p.dir_name()), p))
        });
        for ((exp, dir, point), reps) in points.zip(figures) {
            data.insert(dir.clone(), Ok(run(&dir, reps)));
            jobs.push(Job {
                exp,
                name: point.dir_name(),
                qlog: quic_app::QlogLevel::Off,
                packet_log: false,
                point,
                dir,
                scenario: sc.clone(),
                host: Default::default(),
            });
        }
        (jobs, data)
    }

    const CLAIMS: &str = r#"
[[claim]]
id = "up"
source = "s"
statement = "a drops more"
experiment = "e"
metric = "drops"
values = { a = "cc=a", b = "cc=b" }
test = "a > b"
[[claim]]
id = "down"
source = "s"
statement = "a drops less (the paper says both)"
experiment = "e"
metric = "drops"
values = { a = "cc=a", b = "cc=b" }
test = "a < b"
contradicts = "up"
[[claim]]
id = "again"
source = "s"
statement = "the same phenomenon in utilization"
experiment = "e"
metric = "utilization"
values = { a = "cc=a", b = "cc=b" }
test = "a > b"
duplicate_of = "up"
[[claim]]
id = "tiny"
source = "s"
statement = "a queues longer"
experiment = "e"
metric = "queue_delay_ms"
values = { a = "cc=a", b = "cc=b" }
test = "a > b"
caveat = "b queues {queue_delay_ms:cc=b} ms"
[[claim]]
id = "sat"
source = "s"
statement = "both use the link alike"
experiment = "e"
metric = "utilization"
values = { a = "cc=a", b = "cc=b" }
test = "within(a, b, 5%)"
guaranteed = "both saturate the link"
[[claim]]
id = "done"
source = "s"
statement = "a finishes"
experiment = "e"
metric = "completion_s"
values = { a = "cc=a" }
test = "a < 100"
[[claim]]
id = "cannot"
source = "s"
statement = "a radio claim"
na = "no radio here"
note = "the paper used 802.11"
"#;

    #[test]
    fn counts_each_phenomenon_once_and_noise_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let m = manifest(tmp.path(), CLAIMS).unwrap();
        let a = [
            (110.0, 0.99, 10.0, true),
            (112.0, 0.99, 10.1, false),
            (111.0, 0.99, 10.05, true),
        ];
        let b = [
            (100.0, 0.95, 10.0, true),
            (101.0, 0.96, 9.95, true),
            (99.0, 0.95, 10.0, true),
        ];
        let (jobs, data) = runs(&m, tmp.path(), &[&a, &b]);
        let mut r: Vec<ClaimResult> = m
            .claims
            .iter()
            .map(|c| evaluate(&m, c, &jobs, &data))
            .collect();
        relate(&m, &mut r);
        let class = |id: &str| r.iter().find(|c| c.id == id).unwrap().class;
        assert_eq!(class("up"), Class::Contradictory);
        assert_eq!(class("down"), Class::Contradictory);
        assert_eq!(class("again"), Class::Duplicate);
        assert_eq!(class("tiny"), Class::PassWithinNoise, "{:?}", r[3]);
        assert_eq!(class("sat"), Class::Guaranteed);
        assert_eq!(class("done"), Class::Unmeasured, "{:?}", r[5]);
        assert!(
            r[5].detail.contains("repetition(s) 2 of 3"),
            "{}",
            r[5].detail
        );
        assert_eq!(class("cannot"), Class::NotApplicable);
        assert_eq!(r[6].note.as_deref(), Some("the paper used 802.11"));
        let up = &r[0];
        assert!(
            up.detail
                .contains("a 111 ± 2.48 > b 100 ± 2.48 (differ by 9.9%)"),
            "the relation observed: {}",
            up.detail
        );
        assert!(
            r[3].caveat
                .as_deref()
                .unwrap()
                .starts_with("b queues 9.98 ±"),
            "{:?}",
            r[3].caveat
        );
        let n = Counts::of(&r);
        assert_eq!(
            n,
            Counts {
                claims: 7,
                pass: 0,
                pass_within_noise: 1,
                fail: 0,
                fail_within_noise: 0,
                unmeasured: 1,
                na: 1,
                contradictory_pairs: 1,
                duplicates: 1,
                guaranteed: 1,
                reinterpretation: Reinterpreted::default(),
            }
        );
        // Without the relations, the same runs count two agreements more.
        let plain = CLAIMS
            .replace("contradicts = \"up\"\n", "")
            .replace("duplicate_of = \"up\"\n", "")
            .replace("test = \"a < b\"", "test = \"b > 2 * a\"");
        let m2 = manifest(tmp.path(), &plain).unwrap();
        let mut r2: Vec<ClaimResult> = m2
            .claims
            .iter()
            .map(|c| evaluate(&m2, c, &jobs, &data))
            .collect();
        relate(&m2, &mut r2);
        let n2 = Counts::of(&r2);
        assert_eq!((n2.pass, n2.fail, n2.duplicates), (2, 1, 0), "{n2:?}");
        // A claim on a reinterpretation of ours leaves the paper's counts
        // for a line of its own, with its class and label kept.
        let re = plain.replace(
            "test = \"b > 2 * a\"",
            "test = \"b > 2 * a\"\nreinterpretation = \"our equation\"",
        );
        let m3 = manifest(tmp.path(), &re).unwrap();
        let mut r3: Vec<ClaimResult> = m3
            .claims
            .iter()
            .map(|c| evaluate(&m3, c, &jobs, &data))
            .collect();
        relate(&m3, &mut r3);
        let n3 = Counts::of(&r3);
        assert_eq!((n3.pass, n3.fail), (2, 0), "{n3:?}");
        assert_eq!(n3.reinterpretation.fail, 1, "{n3:?}");
        let down = r3.iter().find(|c| c.id == "down").unwrap();
        assert_eq!(down.class, Class::Fail);
        assert!(
            down.label().contains("reinterpretation"),
            "{}",
            down.label()
        );
        assert!(n3
            .line()
            .contains("reinterpretations of ours: 0 PASS, 1 FAIL"));
    }

    #[test]
    fn sensitivity_runs_reevaluate_their_base_claims_uncounted() {
        let tmp = tempfile::tempdir().unwrap();
        let extra = r#"
[[experiment]]
id = "old"
source = "the old setting"
scenario = "x.toml"
sensitivity_of = "e"
[[experiment.axis]]
name = "cc"
field = "flows.0.cc"
values = ["a", "b"]
[[claim]]
id = "up"
source = "s"
statement = "a drops more"
experiment = "e"
metric = "drops"
values = { a = "cc=a", b = "cc=b" }
test = "a > b"
"#;
        let m = manifest(tmp.path(), extra).unwrap();
        let figures: [&[Rep]; 4] = [
            &[
                (110.0, 0.9, 1.0, true),
                (111.0, 0.9, 1.0, true),
                (112.0, 0.9, 1.0, true),
            ],
            &[
                (100.0, 0.9, 1.0, true),
                (101.0, 0.9, 1.0, true),
                (99.0, 0.9, 1.0, true),
            ],
            &[
                (90.0, 0.9, 1.0, true),
                (91.0, 0.9, 1.0, true),
                (92.0, 0.9, 1.0, true),
            ],
            &[
                (100.0, 0.9, 1.0, true),
                (101.0, 0.9, 1.0, true),
                (99.0, 0.9, 1.0, true),
            ],
        ];
        let (jobs, data) = runs(&m, tmp.path(), &figures);
        let r: Vec<ClaimResult> = m
            .claims
            .iter()
            .map(|c| evaluate(&m, c, &jobs, &data))
            .collect();
        assert_eq!(r[0].class, Class::Pass);
        let s = crate::reproduce::sensitivity_runs(&m, &jobs, &data, &r);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].claims[0].class, Class::Fail, "{:?}", s[0].claims[0]);
        assert_eq!(Counts::of(&r).pass, 1);
        let bad = extra.replace(
            "values = [\"a\", \"b\"]\n[[claim]]",
            "values = [\"a\", \"c\"]\n[[claim]]",
        );
        let e = manifest(tmp.path(), &bad).unwrap_err();
        assert!(e.contains("same axes and labels"), "{e}");
    }

    #[test]
    fn a_verdict_over_places_is_decided_by_its_clear_places() {
        let c: Claim =
            toml::from_str("id = \"c\"\nsource = \"s\"\nstatement = \"s\"\nrequire = \"most\"")
                .unwrap();
        let o = |holds: bool, significant: bool, effect: f64| Outcome {
            holds,
            significant,
            effect: Some(effect),
            detail: String::new(),
        };
        // Three clear passes of five decide a `most` PASS; the effect
        // shown is the smallest of those, not the tie at another place.
        let v = combine(
            &c,
            vec![
                o(true, true, 0.1),
                o(true, false, 0.0),
                o(true, true, 0.05),
                o(false, true, 0.2),
                o(true, true, 0.3),
            ],
            0.02,
        );
        assert!(v.holds && v.decisive, "{:?}", (v.holds, v.decisive));
        assert_eq!(v.effect, Some(0.05));
        // Two clear passes of five do not, whatever the rest.
        let v = combine(
            &c,
            vec![
                o(true, true, 0.1),
                o(true, false, 0.0),
                o(true, true, 0.01),
                o(false, true, 0.2),
                o(true, true, 0.3),
            ],
            0.02,
        );
        assert!(v.holds && !v.decisive);
        // With `all`, one clear failure decides a FAIL.
        let all: Claim = toml::from_str("id = \"c\"\nsource = \"s\"\nstatement = \"s\"").unwrap();
        let v = combine(&all, vec![o(true, false, 0.0), o(false, true, 0.3)], 0.02);
        assert!(!v.holds && v.decisive);
        let v = combine(&all, vec![o(true, true, 0.1), o(false, false, 0.01)], 0.02);
        assert!(!v.holds && !v.decisive);
    }

    #[test]
    fn undeclared_opposites_and_repeats_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let c = |t: &str, extra: &str| {
            format!(
                r#"
[[claim]]
id = "one"
source = "s"
statement = "s"
experiment = "e"
metric = "drops"
values = {{ a = "cc=a", b = "cc=b" }}
test = "a > b"
[[claim]]
id = "two"
source = "s"
statement = "s"
experiment = "e"
metric = "drops"
values = {{ a = "cc=a", b = "cc=b" }}
test = "{t}"
{extra}"#
            )
        };
        let e = manifest(tmp.path(), &c("b > a", "")).unwrap_err();
        assert!(
            e.contains("opposite relations") && e.contains("contradicts"),
            "{e}"
        );
        let e = manifest(tmp.path(), &c("a > b", "")).unwrap_err();
        assert!(e.contains("duplicate_of"), "{e}");
        manifest(tmp.path(), &c("b > a", "contradicts = \"one\"")).unwrap();
        let e = manifest(tmp.path(), &c("b > a", "contradicts = \"nobody\"")).unwrap_err();
        assert!(e.contains("no claim `nobody`"), "{e}");
        let e = manifest(tmp.path(), &c("a < 2 * b", "min_effect = \"two\"")).unwrap_err();
        assert!(e.contains("min_effect"), "{e}");
        let e = manifest(
            tmp.path(),
            &c("a < 2 * b", "if_fail = \"our queue {queue:cc=a}\""),
        )
        .unwrap_err();
        assert!(e.contains("metric `queue`"), "{e}");
        let e = manifest(tmp.path(), &c("a < 2 * b", "note = \"{drops:cc=c}\"")).unwrap_err();
        assert!(e.contains("`c` is not a label"), "{e}");
    }

    #[test]
    fn a_duplicate_reads_the_runs_of_the_claim_it_repeats() {
        let tmp = tempfile::tempdir().unwrap();
        let c = |values: &str| {
            format!(
                r#"
[[claim]]
id = "one"
source = "s"
statement = "s"
experiment = "e"
metric = "drops"
values = {{ a = "cc=a", b = "cc=b" }}
test = "a > b"
[[claim]]
id = "two"
source = "s"
statement = "s"
experiment = "e"
metric = "utilization"
values = {values}
test = "a > b"
duplicate_of = "one""#
            )
        };
        // The same runs, another metric of the same phenomenon: accepted.
        manifest(tmp.path(), &c(r#"{ a = "cc=a", b = "cc=b" }"#)).unwrap();
        // Runs of other points are evidence of their own.
        let e = manifest(tmp.path(), &c(r#"{ a = "cc=a", b = "cc=a" }"#)).unwrap_err();
        assert!(e.contains("measured on other runs"), "{e}");
        // One place of an `over` claim is its runs.
        let over = |v: &str, over: &str| {
            format!(
                r#"
[[claim]]
id = "one"
source = "s"
statement = "s"
experiment = "e"
metric = "drops"
over = "cc"
values = {{ x = "" }}
test = "x > 0"
[[claim]]
id = "two"
source = "s"
statement = "s"
experiment = "e"
metric = "drops"
{over}values = {{ x = "{v}" }}
test = "x > 0"
duplicate_of = "one""#
            )
        };
        let e = manifest(tmp.path(), &over("cc=a", "over = \"cc\"\n")).unwrap_err();
        assert!(e.contains("measured on other runs"), "{e}");
        manifest(tmp.path(), &over("", "over = \"cc\"\n")).unwrap();
        manifest(tmp.path(), &over("cc=b", "")).unwrap();
    }
}

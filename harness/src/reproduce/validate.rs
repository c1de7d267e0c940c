//! Checks of a paper's manifest before anything runs: every experiment's
//! scenario and axes, every claim's experiment, metric, test and
//! selectors, every figure's kind and series.

use std::collections::BTreeSet;

use super::expr::Test;
use super::manifest::{Axis, Claim, Experiment, Fields, Figure, Manifest, Selector};
use super::manifest::{METRICS, SIGNALS};

impl Manifest {
    /// Every problem of the manifest, the first one found.
    pub(super) fn validate(&self) -> Result<(), String> {
        let mut ids = BTreeSet::new();
        for e in &self.experiments {
            if !ids.insert(&e.id) {
                return Err(format!("experiment `{}` is defined twice", e.id));
            }
            self.validate_experiment(e)?;
        }
        let mut cids = BTreeSet::new();
        for c in &self.claims {
            if !cids.insert(&c.id) {
                return Err(format!("claim `{}` is defined twice", c.id));
            }
            if c.na.is_some() {
                continue;
            }
            self.validate_claim(c)
                .map_err(|p| format!("claim `{}`: {p}", c.id))?;
        }
        for c in &self.claims {
            if let Some(e) = c.experiment.as_deref().and_then(|x| self.experiment(x)) {
                if e.sensitivity_of.is_some() {
                    return Err(format!(
                        "claim `{}`: experiment `{}` is a sensitivity run; claims name the experiment it varies",
                        c.id, e.id
                    ));
                }
            }
            self.validate_relations(c)
                .map_err(|p| format!("claim `{}`: {p}", c.id))?;
        }
        self.undeclared_relations()?;
        for f in &self.figures {
            self.validate_figure(f)
                .map_err(|p| format!("figure `{}`: {p}", f.id))?;
        }
        Ok(())
    }

    /// `duplicate_of` and `contradicts` name another measured claim that is
    /// in no relation of its own; the quoted figures of the texts are real.
    fn validate_relations(&self, c: &Claim) -> Result<(), String> {
        let find = |field: &str, id: &str| -> Result<&Claim, String> {
            if id == c.id {
                return Err(format!("{field}: a claim cannot name itself"));
            }
            let o = self
                .claims
                .iter()
                .find(|x| x.id == id)
                .ok_or_else(|| format!("{field}: no claim `{id}` in this paper"))?;
            if o.na.is_some() {
                return Err(format!(
                    "{field}: `{id}` is N/A, so nothing is repeated or contradicted"
                ));
            }
            if o.duplicate_of.is_some() || o.contradicts.is_some() {
                return Err(format!(
                    "{field}: `{id}` is itself a duplicate or one of a contradictory pair; name the claim it refers to"
                ));
            }
            Ok(o)
        };
        let related = [
            c.duplicate_of.is_some(),
            c.contradicts.is_some(),
            c.guaranteed.is_some(),
        ];
        if related.iter().filter(|x| **x).count() > 1 {
            return Err("duplicate_of, contradicts and guaranteed exclude each other".into());
        }
        if c.na.is_some() && related.iter().any(|x| *x) {
            return Err(
                "an N/A claim is not measured: drop duplicate_of, contradicts or guaranteed".into(),
            );
        }
        if let Some(d) = &c.duplicate_of {
            let o = find("duplicate_of", d)?;
            if o.experiment != c.experiment || !same_runs(c, o) {
                return Err(format!(
                    "duplicate_of: `{d}` is measured on other runs (its experiment, `over` axis or selected points differ), so this claim is evidence of its own; count it, or mark it `contradicts` or `guaranteed`"
                ));
            }
        }
        if let Some(o) = &c.contradicts {
            let other = find("contradicts", o)?;
            if self
                .claims
                .iter()
                .any(|x| x.id != c.id && x.contradicts.as_deref() == Some(o))
            {
                return Err(format!(
                    "contradicts: `{o}` is already in a contradictory pair"
                ));
            }
            if other.guaranteed.is_some() {
                return Err(format!("contradicts: `{o}` is marked guaranteed"));
            }
        }
        if let Some(me) = &c.min_effect {
            if super::manifest::parse_percent(me).is_none() {
                return Err(format!(
                    "min_effect: `{me}` is not a percentage from 0% to 100% such as \"2%\""
                ));
            }
        }
        for (field, text) in [
            ("if_fail", &c.if_fail),
            ("caveat", &c.caveat),
            ("note", &c.note),
            ("guaranteed", &c.guaranteed),
        ] {
            let Some(t) = text else { continue };
            for q in super::quote::parse(t).map_err(|p| format!("{field}: {p}"))? {
                let eid = q
                    .experiment
                    .as_deref()
                    .or(c.experiment.as_deref())
                    .ok_or_else(|| {
                        format!(
                            "{field}: {{{}:{}}} needs @experiment (the claim has none)",
                            q.metric, q.selector
                        )
                    })?;
                let e = self
                    .experiment(eid)
                    .ok_or_else(|| format!("{field}: experiment `{eid}` is not defined"))?;
                check_metric(&q.metric).map_err(|p| format!("{field}: {p}"))?;
                check_selector(e, &q.selector)
                    .map_err(|p| format!("{field}: {{{}:{}}}: {p}", q.metric, q.selector))?;
            }
        }
        Ok(())
    }

    /// Two measured claims on the same runs and metric that test the same
    /// relation (a duplicate) or opposite ones (one always passes) must
    /// say so, or the counts would be inflated.
    fn undeclared_relations(&self) -> Result<(), String> {
        let measured: Vec<&Claim> = self.claims.iter().filter(|c| c.na.is_none()).collect();
        for (i, a) in measured.iter().enumerate() {
            for b in &measured[i + 1..] {
                if a.experiment != b.experiment
                    || a.metric != b.metric
                    || a.over != b.over
                    || a.values != b.values
                {
                    continue;
                }
                let (Some(ta), Some(tb)) = (a.test.as_deref(), b.test.as_deref()) else {
                    continue;
                };
                let (Ok(ta), Ok(tb)) = (Test::parse(ta), Test::parse(tb)) else {
                    continue;
                };
                let declared = |x: &Claim, y: &Claim| {
                    x.contradicts.as_deref() == Some(y.id.as_str())
                        || x.duplicate_of.as_deref() == Some(y.id.as_str())
                };
                if declared(a, b) || declared(b, a) {
                    continue;
                }
                if ta == tb {
                    return Err(format!(
                        "claims `{}` and `{}` test the same relation on the same measurements; mark one `duplicate_of` the other",
                        a.id, b.id
                    ));
                }
                if ta.opposes(&tb) {
                    return Err(format!(
                        "claims `{}` and `{}` test opposite relations on the same measurements, so one passes whatever we measure; mark one `contradicts` the other",
                        a.id, b.id
                    ));
                }
            }
        }
        Ok(())
    }

    fn validate_experiment(&self, e: &Experiment) -> Result<(), String> {
        if let Some(b) = &e.sensitivity_of {
            let base = self.experiment(b).ok_or_else(|| {
                format!("experiment `{}`: sensitivity_of: no experiment `{b}`", e.id)
            })?;
            if base.sensitivity_of.is_some() {
                return Err(format!(
                    "experiment `{}`: sensitivity_of: `{b}` is itself a sensitivity run; name the experiment it varies",
                    e.id
                ));
            }
            let labels = |x: &Experiment| -> Vec<(String, Vec<String>)> {
                x.axes
                    .iter()
                    .map(|a| {
                        (
                            a.name.clone(),
                            (0..a.values.len())
                                .map(|i| Experiment::label(a, i))
                                .collect(),
                        )
                    })
                    .collect()
            };
            if labels(base) != labels(e) {
                return Err(format!(
                    "experiment `{}`: sensitivity_of `{b}` needs the same axes and labels as `{b}` (its claims' selectors are reused)",
                    e.id
                ));
            }
        }
        if !self.dir.join(&e.scenario).exists() {
            return Err(format!(
                "experiment `{}`: scenario `{}` not found next to paper.toml",
                e.id, e.scenario
            ));
        }
        for a in &e.axes {
            validate_axis(a)
                .map_err(|p| format!("experiment `{}` axis `{}`: {p}", e.id, a.name))?;
            if a.name == "flow" {
                return Err(format!(
                    "experiment `{}`: `flow` is reserved for flow selectors; name the axis otherwise",
                    e.id
                ));
            }
        }
        for k in e.quick.keep.keys() {
            if !e.axes.iter().any(|a| &a.name == k) {
                return Err(format!(
                    "experiment `{}`: quick.keep names axis `{k}`; axes: {}",
                    e.id,
                    axis_names(e)
                ));
            }
        }
        Ok(())
    }

    fn validate_claim(&self, c: &Claim) -> Result<(), String> {
        let eid = c.experiment.as_deref().ok_or_else(|| {
            "needs `experiment` (or `na` with the reason it cannot be run)".to_string()
        })?;
        let e = self.experiment(eid).ok_or_else(|| {
            format!(
                "experiment `{eid}` is not defined; defined: {}",
                self.experiments
                    .iter()
                    .map(|e| e.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        check_metric(c.metric.as_deref().unwrap_or(""))?;
        let test = c
            .test
            .as_deref()
            .ok_or_else(|| "needs a `test`".to_string())?;
        let t = Test::parse(test).map_err(|p| format!("test: {p}"))?;
        for l in t.labels() {
            if !c.values.contains_key(&l) {
                return Err(format!(
                    "test names `{l}`, which `values` does not define (defined: {})",
                    c.values.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        if let Some(o) = &c.over {
            if !e.axes.iter().any(|a| &a.name == o) {
                return Err(format!(
                    "over: axis `{o}` not in experiment `{eid}`; axes: {}",
                    axis_names(e)
                ));
            }
        } else if t.is_trend() {
            return Err("increasing()/decreasing() need `over = <axis>`".into());
        }
        if !matches!(c.require.as_deref(), None | Some("all") | Some("most")) {
            return Err("require: expected `all` or `most`".into());
        }
        for (label, s) in &c.values {
            check_selector(e, s).map_err(|p| format!("values.{label}: {p}"))?;
        }
        Ok(())
    }

    fn validate_figure(&self, f: &Figure) -> Result<(), String> {
        let e = self
            .experiment(&f.experiment)
            .ok_or_else(|| format!("experiment `{}` is not defined", f.experiment))?;
        match f.kind.strip_prefix("metric:") {
            Some(m) => {
                check_metric(m)?;
                let along = f
                    .along
                    .as_deref()
                    .ok_or_else(|| "metric figures need `along = <axis>`".to_string())?;
                if !e.axes.iter().any(|a| a.name == along) {
                    return Err(format!(
                        "along: axis `{along}` not in experiment; axes: {}",
                        axis_names(e)
                    ));
                }
            }
            None => {
                if !SIGNALS.contains(&f.kind.as_str()) {
                    return Err(format!(
                        "kind `{}` is not one of: {}, or metric:<name>",
                        f.kind,
                        SIGNALS.join(", ")
                    ));
                }
            }
        }
        for (label, s) in &f.series {
            check_selector(e, s).map_err(|p| format!("series.{label}: {p}"))?;
        }
        Ok(())
    }
}

/// An axis's values, labels, x positions and fields agree.
pub(crate) fn validate_axis(a: &Axis) -> Result<(), String> {
    if a.values.is_empty() {
        return Err("no values".into());
    }
    if !a.labels.is_empty() && a.labels.len() != a.values.len() {
        return Err(format!(
            "{} labels for {} values",
            a.labels.len(),
            a.values.len()
        ));
    }
    if !a.x.is_empty() && a.x.len() != a.values.len() {
        return Err(format!(
            "{} x positions for {} values",
            a.x.len(),
            a.values.len()
        ));
    }
    if matches!(&a.field, Fields::One(f) if f == super::manifest::SET_AXIS) {
        if !a.values.iter().all(|v| v.is_table()) {
            return Err(
                "with field = \"set\" each value must be a table of overrides ({} for none)".into(),
            );
        }
        if a.labels.is_empty() {
            return Err("with field = \"set\" the values need labels".into());
        }
    }
    if let Fields::Many(fs) = &a.field {
        let ok = a
            .values
            .iter()
            .all(|v| v.as_array().is_some_and(|x| x.len() == fs.len()));
        if !ok {
            return Err(format!(
                "with {} fields each value must be an array of {} items",
                fs.len(),
                fs.len()
            ));
        }
    }
    Ok(())
}

/// `m` is a metric claims and figures can read.
fn check_metric(m: &str) -> Result<(), String> {
    if super::manifest::is_metric(m) {
        Ok(())
    } else {
        Err(format!(
            "metric `{m}` is not one of: {}, or last:NAME (a controller's metric in the qlog)",
            METRICS.join(", ")
        ))
    }
}

fn axis_names(e: &Experiment) -> String {
    if e.axes.is_empty() {
        return "(none)".into();
    }
    e.axes
        .iter()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses selector `s` and checks that each of its axes is one of `e`'s
/// and each label one of that axis's.
pub(crate) fn check_selector(e: &Experiment, s: &str) -> Result<Selector, String> {
    let sel = Selector::parse(s)?;
    for (k, v) in &sel.axes {
        let a = e.axes.iter().find(|a| &a.name == k).ok_or_else(|| {
            format!(
                "`{k}` is not an axis of `{}` (axes: {}; or flow=)",
                e.id,
                axis_names(e)
            )
        })?;
        let labels: Vec<String> = (0..a.values.len())
            .map(|i| Experiment::label(a, i))
            .collect();
        if !labels.contains(v) {
            return Err(format!(
                "`{v}` is not a label of axis `{k}`; labels: {}",
                labels.join(", ")
            ));
        }
    }
    Ok(sel)
}

/// The conditions of a selector (`aqm=red, flow=exp`), as a sorted set.
fn conditions(selector: &str) -> Vec<String> {
    let mut v: Vec<String> = selector
        .split(',')
        .map(|c| c.split_whitespace().collect::<String>())
        .filter(|c| !c.is_empty())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether duplicate `c` reads runs its original `o` reads (both of one
/// experiment): the same selectors and `over` axis, or, where `o` runs
/// over an axis and `c` does not, `o`'s selectors narrowed to one label of
/// that axis (one of its places).
fn same_runs(c: &Claim, o: &Claim) -> bool {
    let sets = |x: &Claim, extra: Option<&str>| -> Vec<Vec<String>> {
        let mut v: Vec<Vec<String>> = x
            .values
            .values()
            .map(|s| {
                let mut cs = conditions(s);
                if let Some(e) = extra {
                    cs.push(e.to_string());
                    cs.sort();
                }
                cs
            })
            .collect();
        v.sort();
        v
    };
    if c.over == o.over {
        return sets(c, None) == sets(o, None);
    }
    let (None, Some(axis)) = (&c.over, &o.over) else {
        return false;
    };
    // The place c narrowed o to: its first selector's condition on `axis`.
    let prefix = format!("{axis}=");
    let Some(place) = c
        .values
        .values()
        .next()
        .and_then(|s| conditions(s).into_iter().find(|x| x.starts_with(&prefix)))
    else {
        return false;
    };
    sets(c, None) == sets(o, Some(&place))
}

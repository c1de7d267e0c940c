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
        for f in &self.figures {
            self.validate_figure(f)
                .map_err(|p| format!("figure `{}`: {p}", f.id))?;
        }
        Ok(())
    }

    fn validate_experiment(&self, e: &Experiment) -> Result<(), String> {
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
fn validate_axis(a: &Axis) -> Result<(), String> {
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
    if METRICS.contains(&m) {
        Ok(())
    } else {
        Err(format!(
            "metric `{m}` is not one of: {}",
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

fn check_selector(e: &Experiment, s: &str) -> Result<(), String> {
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
    Ok(())
}

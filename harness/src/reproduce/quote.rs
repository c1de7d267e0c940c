//! Figures quoted in a claim's explanations (`if_fail`, `caveat`,
//! `note`): `{metric:selector}` or `{metric:selector@experiment}`,
//! measured from the current runs each time the verdicts are written, so
//! an explanation never carries a figure from an older run.

use super::expr::{fmt_stat, Stat};

/// One placeholder of a text.
#[derive(Clone, Debug, PartialEq)]
pub struct Quote {
    /// Byte range of `{...}` in the text.
    pub span: (usize, usize),
    /// The metric.
    pub metric: String,
    /// The selector (axis conditions, `flow=`).
    pub selector: String,
    /// Another experiment of the paper; `None`: the claim's own.
    pub experiment: Option<String>,
}

/// Every placeholder of `text`, or what is wrong with one.
pub fn parse(text: &str) -> Result<Vec<Quote>, String> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(i) = text[rest..].find('{') {
        let st = rest + i;
        let len = text[st..]
            .find('}')
            .ok_or_else(|| format!("`{{` at byte {st} is not closed by `}}`"))?;
        let inner = &text[st + 1..st + len];
        let (metric, sel) = inner.split_once(':').ok_or_else(|| {
            format!("`{{{inner}}}` is not a quoted figure: write {{metric:selector}} or {{metric:selector@experiment}}")
        })?;
        let (selector, experiment) = match sel.split_once('@') {
            Some((s, e)) => (s, Some(e.trim().to_string())),
            None => (sel, None),
        };
        out.push(Quote {
            span: (st, st + len + 1),
            metric: metric.trim().to_string(),
            selector: selector.trim().to_string(),
            experiment,
        });
        rest = st + len + 1;
    }
    Ok(out)
}

/// `text` with each placeholder replaced by its measurement (`mean ±
/// ci`), or by `[not measured: why]`.
pub fn render(text: &str, measure: &dyn Fn(&Quote) -> Result<Stat, String>) -> String {
    let Ok(qs) = parse(text) else {
        return text.to_string();
    };
    let mut s = String::new();
    let mut at = 0;
    for q in qs {
        s.push_str(&text[at..q.span.0]);
        match measure(&q) {
            Ok(v) => s.push_str(&fmt_stat(&v)),
            Err(e) => s.push_str(&format!("[{} not measured: {e}]", q.metric)),
        }
        at = q.span.1;
    }
    s.push_str(&text[at..]);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_and_replaced() {
        let t = "our queue {queue_pkts:cc=smcc} vs {queue_pkts:cc=vegas@other}.";
        let q = parse(t).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].metric, "queue_pkts");
        assert_eq!(q[1].selector, "cc=vegas");
        assert_eq!(q[1].experiment.as_deref(), Some("other"));
        let r = render(t, &|q| {
            if q.selector == "cc=smcc" {
                Ok(Stat {
                    mean: 6.9,
                    ci95: 0.2,
                    n: 5,
                })
            } else {
                Err("no run".into())
            }
        });
        assert_eq!(
            r,
            "our queue 6.90 ± 0.200 vs [queue_pkts not measured: no run]."
        );
        assert!(parse("an {open brace").is_err());
        assert!(parse("a {name} without a metric").is_err());
        assert_eq!(parse("no figures").unwrap(), vec![]);
    }
}

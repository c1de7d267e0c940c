//! Checks of a reproduction's results, for `make test`:
//!
//! - [`problems`]: every expected paper ran, every claim has a verdict, a
//!   FAIL carries its measured figures and a reason, an N/A a reason, and
//!   no run failed or was interrupted (verdicts themselves are results);
//! - [`fingerprint`]: every claim's measured figures, to 6 significant
//!   digits, so that a quick run can tell whether the published pages
//!   (`docs/reproduction/quick-figures.json`) are still the current
//!   code's (sim runs are deterministic: any difference is a change);
//! - [`published_problems`]: the published pages say what their
//!   claims.json files say (counts, the index table, each headline), and
//!   no PASS counted as agreement is within noise or below its minimum
//!   effect.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::claims::{Class, Counts, Reinterpreted};
use super::PaperResult;

/// What is wrong with `results` (none: every claim judged with its
/// figures); `expect` names the papers that must be there.
pub fn problems(results: &[PaperResult], expect: &[String]) -> Vec<String> {
    let mut out: Vec<String> = expect
        .iter()
        .filter(|w| !results.iter().any(|p| &p.paper == *w))
        .map(|w| format!("paper {w}: missing from the results"))
        .collect();
    for p in results {
        let name = &p.paper;
        if p.interrupted {
            out.push(format!("{name}: interrupted"));
        }
        out.extend(p.failed.iter().map(|f| format!("{name}: run failed: {f}")));
        if p.claims.is_empty() {
            out.push(format!("{name}: no claims"));
        }
        for c in &p.claims {
            let id = format!("{name}/{}", c.id);
            if !matches!(c.verdict.as_str(), "PASS" | "FAIL" | "N/A") {
                out.push(format!(
                    "{id}: verdict `{}` is not PASS, FAIL or N/A",
                    c.verdict
                ));
                continue;
            }
            if c.class == Class::Unmeasured {
                out.push(format!("{id}: not measured: {}", c.detail));
            }
            let reason = c.reason.as_deref().is_some_and(|r| !r.is_empty());
            match c.verdict.as_str() {
                "FAIL" => {
                    if !c.detail.chars().any(|ch| ch.is_ascii_digit()) {
                        out.push(format!("{id}: FAIL without a measured figure"));
                    }
                    if !reason {
                        out.push(format!("{id}: FAIL without a reason"));
                    }
                    if c.detail.starts_with("no measurement") {
                        out.push(format!("{id}: nothing measured: {}", c.detail));
                    }
                }
                "N/A" if !reason => out.push(format!("{id}: N/A without a reason")),
                "PASS" if c.ours.is_empty() => {
                    out.push(format!("{id}: PASS without a measurement"))
                }
                _ => {}
            }
        }
    }
    out
}

/// The verdicts of `results`, in words: `5 paper(s), 59 claims: 20 PASS,
/// 31 FAIL, 8 N/A`.
pub fn verdict_line(results: &[PaperResult]) -> String {
    let n = |v: &str| {
        results
            .iter()
            .flat_map(|p| &p.claims)
            .filter(|c| c.verdict == v)
            .count()
    };
    format!(
        "{} paper(s), {} claims: {} PASS, {} FAIL, {} N/A",
        results.len(),
        results.iter().map(|p| p.claims.len()).sum::<usize>(),
        n("PASS"),
        n("FAIL"),
        n("N/A")
    )
}

/// `x` as C's `%.6g` writes it (and Python's): 6 significant digits,
/// trailing zeros dropped, an exponent (`e+06`, `e-05`) outside
/// 1e-4 ..< 1e6.
pub fn g6(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    // The exponent after rounding to 6 digits.
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..6).contains(&exp) {
        trim(&format!("{x:.*}", (5 - exp) as usize))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    }
}

/// One measured figure as fingerprinted: label, mean, 95% half-width (to 6
/// significant digits), repetitions.
pub type Figure = (String, String, String, usize);

/// The fingerprint file: every claim's quick figures and the builds that
/// made them.
#[derive(Debug, Serialize, Deserialize)]
pub struct Fingerprint {
    /// What it is.
    pub about: String,
    /// The builds (git revisions) that made the runs.
    pub builds: Vec<String>,
    /// `paper/claim` to its figures.
    pub claims: BTreeMap<String, Vec<Figure>>,
}

/// The fingerprint of `results`.
pub fn fingerprint(results: &[PaperResult]) -> Fingerprint {
    let mut claims = BTreeMap::new();
    for p in results {
        for c in &p.claims {
            claims.insert(
                format!("{}/{}", p.paper, c.id),
                c.ours
                    .iter()
                    .map(|m| (m.label.clone(), g6(m.stat.mean), g6(m.stat.ci95), m.stat.n))
                    .collect(),
            );
        }
    }
    let mut builds: Vec<String> = results
        .iter()
        .map(|p| p.build.git_revision.clone())
        .collect();
    builds.sort();
    builds.dedup();
    Fingerprint {
        about: "every claim's figures in `cclab reproduce all --quick` at the build that published docs/reproduction/; `cclab reproduce all --quick --fingerprint-check` compares a new quick run with them".into(),
        builds,
        claims,
    }
}

/// Whether `now` gives the figures `published` recorded: Ok with a line
/// saying so, or Err naming the claims whose figures moved.
pub fn compare(now: &Fingerprint, published: &Fingerprint) -> Result<String, String> {
    let keys: std::collections::BTreeSet<&String> =
        now.claims.keys().chain(published.claims.keys()).collect();
    let moved: Vec<&String> = keys
        .into_iter()
        .filter(|k| now.claims.get(*k) != published.claims.get(*k))
        .collect();
    if moved.is_empty() {
        return Ok(format!(
            "the {} claims' quick figures are the published build's ({})",
            now.claims.len(),
            published.builds.join(", ")
        ));
    }
    let show = |f: Option<&Vec<Figure>>| f.map_or("absent".to_string(), |v| format!("{v:?}"));
    let mut e = format!(
        "docs/reproduction/ predates a change that alters what runs measure: {} of {} claims' quick figures differ from those of the published build ({}; now {}). Re-publish: `make reproduce && make publish-reproduction`.",
        moved.len(),
        now.claims.len(),
        published.builds.join(", "),
        now.builds.join(", ")
    );
    for k in moved.iter().take(20) {
        e += &format!(
            "\n  {k}: published {} now {}",
            show(published.claims.get(*k)),
            show(now.claims.get(*k))
        );
    }
    if moved.len() > 20 {
        e += &format!("\n  ... and {} more", moved.len() - 20);
    }
    Err(e)
}

/// What a published claims.json is read for.
#[derive(Deserialize)]
struct Published {
    counts: Option<Counts>,
    claims: Vec<PublishedClaim>,
}

#[derive(Deserialize)]
struct PublishedClaim {
    id: String,
    class: Class,
    #[serde(default)]
    verdict: String,
    reason: Option<String>,
    #[serde(default)]
    significant: bool,
    effect_pct: Option<f64>,
    #[serde(default)]
    min_effect_pct: f64,
    reinterpretation: Option<String>,
}

/// What is wrong with the published reproduction under `root` (README.md
/// and one directory per paper with claims.json and REPRODUCTION.md): the
/// counts derived here from the claims' classes, independently of the
/// code that wrote them, against the stored counts, the index's row and
/// the page's headline. Err when there is nothing to check.
pub fn published_problems(root: &Path) -> Result<(usize, Vec<String>), String> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let index = read(&root.join("README.md"))?;
    let papers = super::publish::paper_dirs(root)?;
    let mut out = Vec::new();
    for p in &papers {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let c: Published = serde_json::from_str(&read(&p.join("claims.json"))?)
            .map_err(|e| format!("{name}/claims.json: {e}"))?;
        let Some(counts) = c.counts else {
            out.push(format!(
                "{name}: claims.json has no counts (published before verdict classes)"
            ));
            continue;
        };
        let mut d = Counts {
            claims: c.claims.len(),
            ..Counts::default()
        };
        let mut apart = Reinterpreted::default();
        for cl in &c.claims {
            let re = cl.reinterpretation.is_some();
            match cl.class {
                Class::Pass if re => apart.pass += 1,
                Class::Fail if re => apart.fail += 1,
                Class::PassWithinNoise if re => apart.pass_within_noise += 1,
                Class::FailWithinNoise if re => apart.fail_within_noise += 1,
                Class::Pass => d.pass += 1,
                Class::Fail => d.fail += 1,
                Class::PassWithinNoise => d.pass_within_noise += 1,
                Class::FailWithinNoise => d.fail_within_noise += 1,
                Class::Unmeasured => d.unmeasured += 1,
                Class::NotApplicable => d.na += 1,
                Class::Duplicate => d.duplicates += 1,
                Class::Contradictory => d.contradictory_pairs += 1,
                Class::Guaranteed => d.guaranteed += 1,
            }
            let id = format!("{name}/{}", cl.id);
            if cl.verdict == "FAIL"
                && cl
                    .reason
                    .as_deref()
                    .unwrap_or_default()
                    .starts_with("no explanation recorded")
            {
                out.push(format!(
                    "{id}: a FAIL without an explanation (give the claim an if_fail)"
                ));
            }
            if cl.class == Class::Pass && !re {
                if !cl.significant {
                    out.push(format!("{id}: counted PASS but not significant"));
                }
                if let Some(eff) = cl.effect_pct.filter(|e| *e < cl.min_effect_pct) {
                    out.push(format!(
                        "{id}: counted PASS with effect {eff:.2}% below its minimum {}%",
                        cl.min_effect_pct
                    ));
                }
            }
        }
        d.contradictory_pairs /= 2;
        d.reinterpretation = apart;
        if d != counts {
            out.push(format!(
                "{name}: claims.json counts {counts:?} but its claims give {d:?}"
            ));
        }
        // The headline's five counts; the index row adds two.
        let five = [
            counts.claims,
            counts.pass,
            counts.fail,
            counts.pass_within_noise,
            counts.fail_within_noise,
        ];
        let want: Vec<String> = five
            .iter()
            .chain(&[counts.unmeasured, counts.na])
            .map(|n| n.to_string())
            .collect();
        let row_start = format!("| [{name}](");
        match index.lines().find(|l| l.starts_with(&row_start)) {
            None => out.push(format!("{name}: no row in {}/README.md", root.display())),
            Some(row) => {
                let cells: Vec<&str> = row
                    .trim()
                    .trim_matches('|')
                    .split('|')
                    .map(str::trim)
                    .collect();
                if cells.get(2..9) != Some(&want.iter().map(String::as_str).collect::<Vec<_>>()[..])
                {
                    out.push(format!(
                        "{name}: README row {:?} but claims.json counts {want:?}",
                        cells.get(2..9)
                    ));
                }
            }
        }
        let md = read(&p.join("REPRODUCTION.md"))?;
        match headline(&md) {
            None => out.push(format!("{name}: REPRODUCTION.md has no verdict headline")),
            Some(got) if got != five => out.push(format!(
                "{name}: REPRODUCTION.md headline {got:?} but claims.json counts {five:?}"
            )),
            Some(_) => {}
        }
    }
    Ok((papers.len(), out))
}

/// The five numbers of a page's headline: `**N claims: P PASS, F FAIL
/// beyond noise; p PASS and f FAIL within noise`.
fn headline(md: &str) -> Option<[usize; 5]> {
    const SHAPE: &str = " claims:  PASS,  FAIL beyond noise;  PASS and  FAIL within noise";
    md.match_indices("**").find_map(|(i, _)| {
        let rest = &md[i + 2..];
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        // The text with its first five numbers taken out must read as
        // the headline does.
        let mut nums = Vec::new();
        let mut shape = String::new();
        let mut digits = String::new();
        for ch in rest.chars() {
            if nums.len() < 5 && ch.is_ascii_digit() {
                digits.push(ch);
                continue;
            }
            if !digits.is_empty() {
                nums.push(digits.parse::<usize>().ok()?);
                digits.clear();
            }
            if shape.len() >= SHAPE.len() {
                break;
            }
            shape.push(ch);
        }
        (nums.len() == 5 && shape == SHAPE).then(|| [nums[0], nums[1], nums[2], nums[3], nums[4]])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::reproduce::expr::Stat;
    use crate::reproduce::{Build, ClaimResult, Measured};

    fn claim(
        id: &str,
        verdict: &str,
        class: Class,
        detail: &str,
        reason: Option<&str>,
    ) -> ClaimResult {
        ClaimResult {
            id: id.into(),
            source: String::new(),
            statement: String::new(),
            metric: None,
            paper: serde_json::Value::Null,
            ours: if verdict == "PASS" || detail.contains('1') {
                vec![Measured {
                    label: "a".into(),
                    at: None,
                    stat: Stat {
                        mean: 12.5,
                        ci95: 0.25,
                        n: 3,
                    },
                }]
            } else {
                Vec::new()
            },
            test: None,
            over: None,
            verdict: verdict.into(),
            class,
            significant: true,
            effect_pct: None,
            min_effect_pct: 2.0,
            detail: detail.into(),
            reason: reason.map(Into::into),
            caveat: None,
            note: None,
            related: None,
            reinterpretation: None,
        }
    }

    fn paper(claims: Vec<ClaimResult>) -> PaperResult {
        PaperResult {
            paper: "p".into(),
            title: String::new(),
            seed: String::new(),
            backend: "sim".into(),
            quick: true,
            runs: 1,
            ran: 1,
            failed: Vec::new(),
            interrupted: false,
            wall_s: 1.0,
            build: Build {
                git_revision: "abc".into(),
                fingerprint: String::new(),
            },
            counts: Counts::default(),
            claims,
            sensitivity: Vec::new(),
            figures: Vec::new(),
            dir: Default::default(),
        }
    }

    /// A judged paper passes; each kind of gap is named.
    #[test]
    fn problems_name_each_gap_and_a_judged_paper_has_none() {
        let good = paper(vec![
            claim("ok", "PASS", Class::Pass, "a 12.5", None),
            claim("f", "FAIL", Class::Fail, "a 12.5 < 13", Some("why")),
            claim("na", "N/A", Class::NotApplicable, "", Some("cannot run")),
        ]);
        assert!(problems(&[good], &["p".into()]).is_empty());
        let bad = paper(vec![
            claim("f1", "FAIL", Class::Fail, "no figure", Some("why")),
            claim("f2", "FAIL", Class::Fail, "a 1", None),
            claim("na", "N/A", Class::NotApplicable, "", None),
            claim("x", "MAYBE", Class::Pass, "", None),
        ]);
        let p = problems(&[bad], &["p".into(), "q".into()]);
        for want in [
            "paper q: missing",
            "p/f1: FAIL without a measured figure",
            "p/f2: FAIL without a reason",
            "p/na: N/A without a reason",
            "p/x: verdict `MAYBE`",
        ] {
            assert!(p.iter().any(|x| x.contains(want)), "{want}: {p:?}");
        }
    }

    /// The same results match their own fingerprint; one moved figure is
    /// named.
    #[test]
    fn a_moved_figure_is_named() {
        let r = [paper(vec![claim(
            "ok",
            "PASS",
            Class::Pass,
            "a 12.5",
            None,
        )])];
        let fp = fingerprint(&r);
        assert_eq!(
            fp.claims["p/ok"],
            vec![("a".into(), "12.5".into(), "0.25".into(), 3)]
        );
        assert!(compare(&fingerprint(&r), &fp).is_ok());
        let mut moved = fingerprint(&r);
        moved.claims.get_mut("p/ok").unwrap()[0].1 = "12.6".into();
        let e = compare(&moved, &fp).unwrap_err();
        assert!(e.contains("1 of 1") && e.contains("p/ok"), "{e}");
    }

    #[test]
    fn g6_writes_as_printf_does() {
        for (x, s) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (37.3752123, "37.3752"),
            (0.171198, "0.171198"),
            (0.0129653, "0.0129653"),
            (2.94632e-5, "2.94632e-05"),
            (0.0001, "0.0001"),
            (123456.0, "123456"),
            (999999.5, "1e+06"),
            (1234567.0, "1.23457e+06"),
            (-12.5, "-12.5"),
            (100.0, "100"),
            (0.1 + 0.2, "0.3"),
        ] {
            assert_eq!(g6(x), s, "{x}");
        }
    }

    /// The published pages pass; a changed headline, index row or count
    /// is named.
    #[test]
    fn the_published_pages_agree_and_a_change_is_named() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reproduction");
        let tmp = tempfile::tempdir().unwrap();
        let copy = |paper: &str| {
            std::fs::create_dir_all(tmp.path().join(paper)).unwrap();
            for f in ["claims.json", "REPRODUCTION.md"] {
                std::fs::copy(src.join(paper).join(f), tmp.path().join(paper).join(f)).unwrap();
            }
        };
        copy("smcc");
        let index = std::fs::read_to_string(src.join("README.md")).unwrap();
        std::fs::write(tmp.path().join("README.md"), &index).unwrap();
        assert_eq!(published_problems(tmp.path()).unwrap(), (1, vec![]));
        // The headline.
        let md_path = tmp.path().join("smcc/REPRODUCTION.md");
        let md = std::fs::read_to_string(&md_path).unwrap();
        let (n, _) = headline(&md).map(|h| (h[0], h)).unwrap();
        std::fs::write(
            &md_path,
            md.replacen(
                &format!("**{n} claims:"),
                &format!("**{} claims:", n + 1),
                1,
            ),
        )
        .unwrap();
        let (_, p) = published_problems(tmp.path()).unwrap();
        assert!(p.len() == 1 && p[0].contains("headline"), "{p:?}");
        std::fs::write(&md_path, &md).unwrap();
        // The stored counts.
        let cj = tmp.path().join("smcc/claims.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
        let pass = v["counts"]["pass"].as_u64().unwrap();
        v["counts"]["pass"] = (pass + 1).into();
        std::fs::write(&cj, v.to_string()).unwrap();
        let (_, p) = published_problems(tmp.path()).unwrap();
        assert!(p.iter().any(|x| x.contains("but its claims give")), "{p:?}");
        assert!(p.iter().any(|x| x.contains("README row")), "{p:?}");
        // Nothing to check.
        assert!(published_problems(&tmp.path().join("smcc")).is_err());
    }

    #[test]
    fn a_headline_is_read_only_in_its_shape() {
        let md = "# T\n\n**59 claims: 12 PASS, 5 FAIL beyond noise; 2 PASS and 4 FAIL within noise**, 8 N/A";
        assert_eq!(headline(md), Some([59, 12, 5, 2, 4]));
        assert_eq!(headline("**59 claims, 12 PASS**"), None);
        let later = "**Bold** first.\n\n**3 claims: 1 PASS, 0 FAIL beyond noise; 1 PASS and 1 FAIL within noise; 0 N/A.**";
        assert_eq!(headline(later), Some([3, 1, 0, 1, 1]));
    }
}

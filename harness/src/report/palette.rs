//! One colour per algorithm, the same in every figure of every report.
//!
//! The registry's algorithms have fixed colours, taken from the Okabe–Ito
//! and Paul Tol palettes (chosen to stay apart under the common forms of
//! colour blindness); the baselines people compare against most (CUBIC,
//! BBRv2, NewReno) have the most distinct ones. Nineteen colours cannot all
//! be told apart by every reader, so figures never rely on colour alone:
//! every small-multiple panel is titled and every scatter point labelled.
//!
//! Names outside the table (a new plugin) hash into the same palette.
//! A spec with parameters (`vegas:alpha=4`) takes its algorithm's hue in a
//! shade picked by hashing the whole spec, so two variants in one report
//! differ while keeping the family resemblance.

use plotters::style::RGBColor;

/// Fixed colours of the registry's algorithms.
const BY_NAME: [(&str, RGBColor); 19] = [
    ("cubic", RGBColor(0x00, 0x72, 0xB2)),     // Okabe–Ito blue
    ("bbr2", RGBColor(0xD5, 0x5E, 0x00)),      // Okabe–Ito vermillion
    ("newreno", RGBColor(0x22, 0x22, 0x22)),   // near black
    ("reno", RGBColor(0x77, 0x77, 0x77)),      // grey
    ("vegas", RGBColor(0x00, 0x9E, 0x73)),     // Okabe–Ito bluish green
    ("smcc", RGBColor(0xCC, 0x79, 0xA7)),      // Okabe–Ito reddish purple
    ("ewphcc", RGBColor(0xE6, 0x9F, 0x00)),    // Okabe–Ito orange
    ("westwood+", RGBColor(0x56, 0xB4, 0xE9)), // Okabe–Ito sky blue
    ("dcm+", RGBColor(0x88, 0x22, 0x55)),      // Tol wine
    ("dcm", RGBColor(0xAA, 0x44, 0x99)),       // Tol purple
    ("br-tcp", RGBColor(0x33, 0x22, 0x88)),    // Tol indigo
    ("exp", RGBColor(0x99, 0x99, 0x33)),       // Tol olive
    ("tahoe", RGBColor(0x44, 0xAA, 0x99)),     // Tol teal
    ("binomial", RGBColor(0xCC, 0x66, 0x77)),  // Tol rose
    ("aimd", RGBColor(0x11, 0x77, 0x33)),      // Tol green
    ("iiad", RGBColor(0xDD, 0xAA, 0x33)),      // Tol gold
    ("sqrt", RGBColor(0x66, 0x99, 0xCC)),      // Tol medium blue
    ("mimd", RGBColor(0x99, 0x44, 0x55)),      // Tol dark rose
    ("fixed", RGBColor(0x66, 0xCC, 0xEE)),     // Tol cyan
];

/// The algorithm's name without parameters (`vegas` of `vegas:alpha=4`).
pub fn base_name(spec: &str) -> &str {
    spec.split(':').next().unwrap_or(spec).trim()
}

/// FNV-1a: stable across runs, platforms and Rust versions (unlike
/// `DefaultHasher`).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The colour of an algorithm spec.
pub fn colour(spec: &str) -> RGBColor {
    let base = base_name(spec);
    let c = known(base).unwrap_or_else(|| BY_NAME[(fnv1a(base) % BY_NAME.len() as u64) as usize].1);
    if base.len() == spec.trim().len() {
        return c;
    }
    // A variant: darker or lighter by up to 35%, never the plain shade.
    let f = [-0.35, -0.2, 0.2, 0.35][(fnv1a(spec) % 4) as usize];
    shade(c, f)
}

/// Darker (`f < 0`, towards black) or lighter (`f > 0`, towards white).
pub fn shade(c: RGBColor, f: f64) -> RGBColor {
    let m = |v: u8| {
        let v = v as f64;
        let out = if f < 0.0 {
            v * (1.0 + f)
        } else {
            v + (255.0 - v) * f
        };
        out.round().clamp(0.0, 255.0) as u8
    };
    RGBColor(m(c.0), m(c.1), m(c.2))
}

/// The fixed colour of a registry algorithm's plain name (no parameters).
pub fn known(name: &str) -> Option<RGBColor> {
    BY_NAME
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
        .map(|(_, c)| *c)
}

/// Every colour of the palette, in table order.
pub fn all() -> impl Iterator<Item = RGBColor> {
    BY_NAME.iter().map(|(_, c)| *c)
}

/// `#rrggbb`, for HTML.
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registry_algorithm_has_its_own_colour() {
        for a in cc_algorithms::algorithms() {
            assert!(
                BY_NAME.iter().any(|(n, _)| *n == a.name),
                "{} has no colour in report::palette::BY_NAME",
                a.name
            );
        }
        for (i, (n, c)) in BY_NAME.iter().enumerate() {
            for (m, d) in &BY_NAME[i + 1..] {
                assert!(c != d, "{n} and {m} share a colour");
            }
        }
    }

    #[test]
    fn colours_are_stable_and_keyed_by_name() {
        assert_eq!(hex(colour("cubic")), "#0072b2");
        assert_eq!(colour("CUBIC"), colour("cubic"));
        // Unknown names hash into the palette, the same way every time.
        assert_eq!(colour("my-new-cc"), colour("my-new-cc"));
        assert!(BY_NAME.iter().any(|(_, c)| *c == colour("my-new-cc")));
        // A variant keeps a shade of its family, distinct from the plain one.
        let v = colour("vegas:alpha=4");
        assert_ne!(v, colour("vegas"));
        assert_eq!(v, colour("vegas:alpha=4"));
        // Reproductions look plain names up without a fallback.
        assert_eq!(known("vegas"), Some(colour("vegas")));
        assert_eq!(known("vegas:alpha=4"), None);
        assert_eq!(all().count(), BY_NAME.len());
    }

    #[test]
    fn shade_moves_towards_black_or_white() {
        let c = RGBColor(100, 200, 0);
        assert_eq!(shade(c, -0.5), RGBColor(50, 100, 0));
        assert_eq!(shade(c, 0.5), RGBColor(178, 228, 128));
        assert_eq!(shade(c, 0.0), c);
    }
}

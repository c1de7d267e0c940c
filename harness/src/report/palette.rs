//! One colour per algorithm, the same in every figure of every report.
//!
//! The harness knows algorithms only through the registry: the registry's
//! algorithms take the colours of `PALETTE` in the registry's order
//! ([`cc_algorithms::registry::algorithms`]), the first algorithm the
//! first colour. The colours come from the Okabe–Ito and Paul Tol
//! palettes (chosen to stay apart under the common forms of colour
//! blindness); their order follows the registry's (the seed papers' and
//! classic plugins, quiche's built-ins, then plugins added later such as
//! `dctcp` and `prague`), so each algorithm keeps the colour reports have
//! always drawn it in. An algorithm added to the registry takes the next colour;
//! past the end of the palette, a darker and then a lighter shade of the
//! palette again. So many colours cannot all be told apart by every
//! reader, so figures never rely on colour alone: every small-multiple
//! panel is titled and every scatter point labelled.
//!
//! Names outside the registry (a plugin of one's own) hash into the same
//! palette. A spec with parameters (`name:key=value`) takes its
//! algorithm's hue in a shade picked by hashing the whole spec, so two
//! variants in one report differ while keeping the family resemblance.

use plotters::style::RGBColor;

/// The palette, in the order the registry's algorithms take it.
const PALETTE: [RGBColor; 19] = [
    RGBColor(0x22, 0x22, 0x22), // near black
    RGBColor(0x44, 0xAA, 0x99), // Tol teal
    RGBColor(0x00, 0x9E, 0x73), // Okabe–Ito bluish green
    RGBColor(0x56, 0xB4, 0xE9), // Okabe–Ito sky blue
    RGBColor(0x33, 0x22, 0x88), // Tol indigo
    RGBColor(0x99, 0x99, 0x33), // Tol olive
    RGBColor(0x88, 0x22, 0x55), // Tol wine
    RGBColor(0xAA, 0x44, 0x99), // Tol purple
    RGBColor(0xCC, 0x79, 0xA7), // Okabe–Ito reddish purple
    RGBColor(0xE6, 0x9F, 0x00), // Okabe–Ito orange
    RGBColor(0xCC, 0x66, 0x77), // Tol rose
    RGBColor(0x11, 0x77, 0x33), // Tol green
    RGBColor(0xDD, 0xAA, 0x33), // Tol gold
    RGBColor(0x66, 0x99, 0xCC), // Tol medium blue
    RGBColor(0x99, 0x44, 0x55), // Tol dark rose
    RGBColor(0x66, 0xCC, 0xEE), // Tol cyan
    RGBColor(0x77, 0x77, 0x77), // grey
    RGBColor(0x00, 0x72, 0xB2), // Okabe–Ito blue
    RGBColor(0xD5, 0x5E, 0x00), // Okabe–Ito vermillion
];

/// The algorithm's name without parameters (`name` of `name:key=value`).
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

/// The colour of the registry's `i`-th algorithm: the palette's `i`-th,
/// then past its end darker and lighter shades of it, in turn.
fn nth(i: usize) -> RGBColor {
    let c = PALETTE[i % PALETTE.len()];
    match i / PALETTE.len() {
        0 => c,
        round => shade(c, if round % 2 == 1 { -0.35 } else { 0.35 }),
    }
}

/// The colour of an algorithm spec.
pub fn colour(spec: &str) -> RGBColor {
    let base = base_name(spec);
    let c = known(base).unwrap_or_else(|| PALETTE[(fnv1a(base) % PALETTE.len() as u64) as usize]);
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
    let name = name.trim();
    cc_algorithms::registry::algorithms()
        .position(|a| a.name.eq_ignore_ascii_case(name))
        .map(nth)
}

/// Every colour of the palette, in order.
pub fn all() -> impl Iterator<Item = RGBColor> {
    PALETTE.into_iter()
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
        let names = cc_algorithms::registry::names();
        let colours: Vec<RGBColor> = names.iter().map(|n| colour(n)).collect();
        for (i, c) in colours.iter().enumerate() {
            for (j, d) in colours.iter().enumerate().skip(i + 1) {
                assert!(c != d, "{} and {} share a colour", names[i], names[j]);
            }
        }
        for (i, c) in PALETTE.iter().enumerate() {
            assert!(!PALETTE[i + 1..].contains(c), "the palette repeats {c:?}");
        }
    }

    #[test]
    fn colours_follow_the_registry_order() {
        for (i, n) in cc_algorithms::registry::names().iter().enumerate() {
            assert_eq!(colour(n), nth(i), "{n}");
            assert_eq!(known(n), Some(nth(i)), "{n}");
        }
        assert_eq!(nth(0), PALETTE[0]);
        // Past the palette: shades of it, distinct from the plain colours.
        let past: Vec<RGBColor> = (PALETTE.len()..3 * PALETTE.len()).map(nth).collect();
        assert!(past.iter().all(|c| !PALETTE.contains(c)));
        assert_eq!(past.len(), 2 * PALETTE.len());
    }

    #[test]
    fn colours_are_stable_and_keyed_by_name() {
        let a = cc_algorithms::registry::names()[0];
        assert_eq!(colour(&a.to_uppercase()), colour(a));
        // Unknown names hash into the palette, the same way every time.
        assert_eq!(colour("my-new-cc"), colour("my-new-cc"));
        assert!(PALETTE.contains(&colour("my-new-cc")));
        assert_eq!(known("my-new-cc"), None);
        // A variant keeps a shade of its family, distinct from the plain one.
        let variant = format!("{a}:x=4");
        let v = colour(&variant);
        assert_ne!(v, colour(a));
        assert_eq!(v, colour(&variant));
        // Reproductions look plain names up without a fallback.
        assert_eq!(known(a), Some(colour(a)));
        assert_eq!(known(&variant), None);
        assert_eq!(all().count(), PALETTE.len());
    }

    #[test]
    fn shade_moves_towards_black_or_white() {
        let c = RGBColor(100, 200, 0);
        assert_eq!(shade(c, -0.5), RGBColor(50, 100, 0));
        assert_eq!(shade(c, 0.5), RGBColor(178, 228, 128));
        assert_eq!(shade(c, 0.0), c);
    }
}

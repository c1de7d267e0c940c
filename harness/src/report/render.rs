//! Rendering a figure three ways from one drawing: SVG for the page, and
//! SVG and PNG files next to it for papers.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{draw_multiples, multiples_size, DrawResult, WIDTH};
use super::scatter::{draw_scatter, Point, HEIGHT};
use super::series::Multiples;

/// Scale of the PNG files relative to the SVG (sharp in print).
const PNG_SCALE: f64 = 2.0;

/// What a figure draws.
pub enum Kind<'a> {
    Scatter(&'a [Point]),
    Multiples(&'a Multiples),
    RttMap(&'a [super::rtt_map::Map]),
}

impl Kind<'_> {
    fn size(&self) -> (u32, u32) {
        match self {
            Kind::Scatter(_) => (WIDTH, HEIGHT),
            Kind::Multiples(m) => multiples_size(m),
            Kind::RttMap(m) => super::rtt_map::size(m),
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>, s: f64) -> DrawResult {
        match self {
            Kind::Scatter(p) => draw_scatter(root, p, s),
            Kind::Multiples(m) => draw_multiples(root, m, s),
            Kind::RttMap(m) => super::rtt_map::draw(root, m, s),
        }
    }
}

/// A rendered figure.
pub struct Rendered {
    /// File stem and HTML id.
    pub name: String,
    pub heading: String,
    pub note: String,
    pub svg: String,
    /// Panels drawn (1 for the scatter).
    pub panels: usize,
    /// The SVG and PNG files, when written.
    pub files: Vec<PathBuf>,
}

/// Draws `kind` as SVG text.
pub fn svg(kind: &Kind) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, kind.size()).into_drawing_area();
        kind.draw(root, 1.0)?;
    }
    Ok(out)
}

/// Writes `kind` as a PNG at [`PNG_SCALE`] (through a temporary file).
pub fn png(kind: &Kind, path: &Path) -> Result<(), String> {
    let (w, h) = kind.size();
    let size = ((w as f64 * PNG_SCALE) as u32, (h as f64 * PNG_SCALE) as u32);
    let tmp = path.with_extension("png.part.png");
    {
        let root = BitMapBackend::new(&tmp, size).into_drawing_area();
        kind.draw(root, PNG_SCALE)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Renders a figure for the page and, when `dir` is given, as
/// `<dir>/<name>.svg` and `<dir>/<name>.png`.
pub fn render(
    name: &str,
    heading: &str,
    note: String,
    kind: Kind,
    dir: Option<&Path>,
) -> Result<Rendered, String> {
    let svg = svg(&kind)?;
    let mut files = Vec::new();
    if let Some(dir) = dir {
        let path = dir.join(format!("{name}.svg"));
        super::write_atomic(&path, svg.as_bytes())?;
        files.push(path);
        let path = dir.join(format!("{name}.png"));
        png(&kind, &path)?;
        files.push(path);
    }
    Ok(Rendered {
        name: name.to_string(),
        heading: heading.to_string(),
        note,
        svg,
        panels: match kind {
            Kind::Scatter(_) => 1,
            Kind::Multiples(m) => m.panels.len(),
            Kind::RttMap(m) => m.len(),
        },
        files,
    })
}

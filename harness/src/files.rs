//! Writing result files so that a reader never sees half of one.

use std::path::Path;

use serde::Serialize;

/// Writes `v` as pretty JSON to `path` through a `.part` file renamed into
/// place.
pub(crate) fn write_json_atomic(path: &Path, v: &impl Serialize) -> std::io::Result<()> {
    let tmp = path.with_extension("json.part");
    std::fs::write(&tmp, serde_json::to_vec_pretty(v)?)?;
    std::fs::rename(tmp, path)
}

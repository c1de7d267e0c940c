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

/// Writes `bytes` to `path` through `PATH.part`, synced before it is
/// renamed into place: a reader on the other side of a user-mode Linux
/// guest's host filesystem (which writes back late) sees the whole file
/// or none.
pub(crate) fn write_synced_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".part");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(tmp, path)
}

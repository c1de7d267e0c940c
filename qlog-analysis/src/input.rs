//! Opening qlog files: plain, gzip or zstd, recognised by their first bytes.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// Opens `path` for reading, decompressing `.gz` and `.zst` content
/// transparently (by magic number, not by name). Errors name the path.
pub fn open(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let file = File::open(path).map_err(named)?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let head = r.fill_buf().map_err(named)?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(r),
        ))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let z = zstd::stream::read::Decoder::with_buffer(r).map_err(named)?;
        Box::new(BufReader::with_capacity(1 << 20, z))
    } else {
        Box::new(r)
    })
}

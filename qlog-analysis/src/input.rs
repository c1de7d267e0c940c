//! Opening qlog files: plain, gzip or zstd, recognised by their first bytes.
//!
//! A compressed file whose writer never finished it (a process killed
//! while writing: the zstd frame or gzip member has no end) is read as far
//! as its complete blocks go, and then ends as if the file did: see
//! [`Opened::cut_short`]. Other damage is an error.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// An opened qlog file.
pub struct Opened {
    /// Its content, decompressed.
    pub input: Box<dyn BufRead + Send>,
    /// The container format: `plain`, `gzip` or `zstd`.
    pub container: &'static str,
    pub(crate) cut: Arc<AtomicBool>,
}

impl Opened {
    /// Whether the compressed stream ended before its end marker (known
    /// once `input` has been read to its end).
    pub fn cut_short(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }
}

/// Ends a decompressor's output at an unexpected end of its input (an
/// unfinished frame), noting it, instead of failing.
struct UntilCut<R> {
    inner: R,
    cut: Arc<AtomicBool>,
}

impl<R: Read> Read for UntilCut<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cut.load(Ordering::Relaxed) {
            return Ok(0);
        }
        match self.inner.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.cut.store(true, Ordering::Relaxed);
                Ok(0)
            }
            r => r,
        }
    }
}

/// Opens `path` for reading, decompressing `.gz` and `.zst` content
/// transparently (by magic number, not by name). Errors name the path.
pub fn open(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    Ok(open_file(path)?.input)
}

/// [`open`], also telling which container the file is and whether it was
/// cut short.
pub fn open_file(path: &Path) -> io::Result<Opened> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let file = File::open(path).map_err(named)?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let head = r.fill_buf().map_err(named)?;
    let cut = Arc::new(AtomicBool::new(false));
    let until_cut = |inner| UntilCut {
        inner,
        cut: cut.clone(),
    };
    let (input, container): (Box<dyn BufRead + Send>, _) = if head.starts_with(&[0x1f, 0x8b]) {
        let gz: Box<dyn Read + Send> = Box::new(flate2::bufread::MultiGzDecoder::new(r));
        (
            Box::new(BufReader::with_capacity(1 << 20, until_cut(gz))),
            "gzip",
        )
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let z: Box<dyn Read + Send> =
            Box::new(zstd::stream::read::Decoder::with_buffer(r).map_err(named)?);
        (
            Box::new(BufReader::with_capacity(1 << 20, until_cut(z))),
            "zstd",
        )
    } else {
        (Box::new(r), "plain")
    };
    Ok(Opened {
        input,
        container,
        cut,
    })
}

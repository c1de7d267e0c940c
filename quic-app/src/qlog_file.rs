//! qlog files on disk: zstd-compressed JSON-SEQ (`ROLE-CID.sqlog.zst`) by
//! default, plain (`ROLE-CID.sqlog`) on request.
//!
//! quiche's qlog is repetitive JSON: one 10 s, 20 Mbit/s download at the
//! `core` level writes 30 to 45 MB from its two ends (more the more often
//! the receiver acknowledges), and zstd at level 1
//! (with a smaller hash table, [`ZSTD_HASH_LOG`]) makes that 14 (sender)
//! to 17 (receiver) times smaller. Level 1 is the fastest regular level
//! and, on this JSON, also smaller than levels 2 to 5; the faster negative
//! levels compress only 9 to 12 times. It runs at about 0.6 to 1 GB/s
//! (sender's trace) and 1 to 1.3 GB/s (receiver's) on one core of the
//! project's machines, on a thread of its own per file
//! ([`BackgroundZstd`]), so an endpoint's event loop only copies its qlog
//! into 256 KiB chunks. `qlog-analysis` and every reader in the project
//! open both forms; `zstd -d` gives back the plain file.
//!
//! # When the frame is finished, and what a killed writer leaves
//!
//! A zstd frame is finished (its last block and checksum written) when the
//! writer is dropped or [`QlogWriter::finish`]ed; both wait for the
//! compressing thread. quiche drops the writer when the connection
//! closes, and when the connection itself is dropped; `quic-server` closes
//! its connections on SIGINT and SIGTERM, and `quic-client` its own on the
//! same signals, before they exit. Only a writer that never runs its
//! destructor (SIGKILL, a crash, `std::process::exit`) leaves an
//! unfinished frame.
//!
//! No data is held back waiting for the finish: the encoder writes every
//! complete 128 KiB block to the file as it fills, so an unfinished file
//! decodes up to its last complete block. `qlog-analysis` reads such a
//! file as far as it goes and reports it `truncated` (like a plain file
//! cut in the middle of a record); `zstd -dc` prints the same content and
//! then fails with an error about the truncated input. What is lost is
//! what had not reached a complete block: the chunk being gathered
//! ([`CHUNK`]), chunks still queued for the thread (normally none), and
//! zstd's partial block (under 128 KiB): well under a second of a
//! 20 Mbit/s `core` trace. There is no flush on a timer: a flush by the
//! clock would make the compressed bytes differ between two runs of the
//! same simulation, and an explicit zstd flush ends a block early, which
//! costs size and buys nothing the block boundaries do not already give.
//!
//! # Choosing
//!
//! [`compression`] is what [`crate::qlog_to_file`] uses: what
//! [`set_compression`] chose, else the environment variable
//! [`COMPRESS_ENV`] (`CCLAB_QLOG_COMPRESS=0` for plain files), else zstd.
//! The variable reaches every process `cclab` starts, and the simulator
//! (which runs its endpoints in-process) reads it too.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// zstd level of qlog files (see the module documentation).
pub const ZSTD_LEVEL: i32 = 1;

/// log2 of the entries in zstd's match-finder hash table, for every
/// [`ZstdWriter`]. Level 1 picks 13 or 14; qlog's repetition is local, and
/// a table that stays in the cache made quiche traces 8 to 10% smaller and
/// compression 5 to 20% faster (11 against level 1's own; 10 and 12 about
/// the same, 8 worse); the bottleneck log does not care.
pub const ZSTD_HASH_LOG: u32 = 11;

/// The plain writer's buffer, and what a [`ZstdWriter`] gathers before it
/// compresses: quiche's serializer writes a record in many small pieces.
pub const BUFFER: usize = 64 << 10;

/// The environment variable that picks plain or compressed qlog files:
/// `0`, `false`, `no`, `off` or `plain` for plain `.sqlog`; `1`, `true`,
/// `yes`, `on` or `zstd` (or unset) for `.sqlog.zst`.
pub const COMPRESS_ENV: &str = "CCLAB_QLOG_COMPRESS";

/// How a qlog file is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QlogCompression {
    /// zstd, `.sqlog.zst` (the default).
    #[default]
    Zstd,
    /// Plain JSON-SEQ text, `.sqlog`.
    Plain,
}

/// What [`QlogCompression::parse`] accepts, for messages.
pub const COMPRESS_VALUES: &str = "true, 1, yes, on, zstd (compressed) or false, 0, no, off, plain";

impl QlogCompression {
    /// Parses a yes/no or a format name (see [`COMPRESS_ENV`]).
    pub fn parse(s: &str) -> Option<QlogCompression> {
        match s.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" | "zstd" => Some(QlogCompression::Zstd),
            "0" | "false" | "no" | "off" | "plain" => Some(QlogCompression::Plain),
            _ => None,
        }
    }

    /// The choice [`COMPRESS_ENV`] makes: zstd when it is unset or empty,
    /// an error naming the variable, its value and what is allowed when
    /// it is not understood.
    pub fn from_env() -> Result<QlogCompression, String> {
        match std::env::var(COMPRESS_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(QlogCompression::Zstd),
            Err(std::env::VarError::NotUnicode(v)) => Err(format!(
                "{COMPRESS_ENV}: `{}` is not one of {COMPRESS_VALUES}",
                v.to_string_lossy()
            )),
            Ok(v) if v.trim().is_empty() => Ok(QlogCompression::Zstd),
            Ok(v) => QlogCompression::parse(&v)
                .ok_or_else(|| format!("{COMPRESS_ENV}: `{v}` is not one of {COMPRESS_VALUES}")),
        }
    }

    /// The file name extension, without the leading dot.
    pub fn extension(self) -> &'static str {
        match self {
            QlogCompression::Zstd => "sqlog.zst",
            QlogCompression::Plain => "sqlog",
        }
    }
}

// 0: not chosen (ask the environment), 1: zstd, 2: plain.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// Makes [`compression`] answer `c` in this process from now on (the
/// binaries call it with their `--qlog-compress`).
pub fn set_compression(c: QlogCompression) {
    let v = match c {
        QlogCompression::Zstd => 1,
        QlogCompression::Plain => 2,
    };
    CHOSEN.store(v, Ordering::Relaxed);
}

/// How this process writes qlog files: what [`set_compression`] chose,
/// else [`COMPRESS_ENV`], else zstd. A value of the variable that is not
/// understood counts as unset here; the binaries reject it at start.
pub fn compression() -> QlogCompression {
    match CHOSEN.load(Ordering::Relaxed) {
        1 => QlogCompression::Zstd,
        2 => QlogCompression::Plain,
        _ => QlogCompression::from_env().unwrap_or_default(),
    }
}

/// Settles this process's choice from a `--qlog-compress` value (when
/// given) or else [`COMPRESS_ENV`], and makes [`compression`] answer it.
/// Errors name the flag or the variable, the value and what is allowed.
pub fn choose(flag: Option<&str>) -> Result<QlogCompression, String> {
    let c = match flag {
        Some(v) => QlogCompression::parse(v)
            .ok_or_else(|| format!("--qlog-compress: `{v}` is not one of {COMPRESS_VALUES}"))?,
        None => QlogCompression::from_env()?,
    };
    set_compression(c);
    Ok(c)
}

/// The qlog file of connection `cid_hex` of `role` (`client` or `server`)
/// in `dir`, compressed or not, if there is one.
pub fn find(dir: &Path, role: &str, cid_hex: &str) -> Option<PathBuf> {
    [QlogCompression::Zstd, QlogCompression::Plain]
        .into_iter()
        .map(|c| dir.join(format!("{role}-{cid_hex}.{}", c.extension())))
        .find(|p| p.is_file())
}

/// Whether a file name is one of ours: `.sqlog` or `.sqlog.zst`.
pub fn is_qlog_name(name: &str) -> bool {
    name.ends_with(".sqlog") || name.ends_with(".sqlog.zst")
}

/// A qlog file being written; compressed ones are finished when this is
/// dropped (or [`finish`](Self::finish)ed).
pub enum QlogWriter {
    /// `.sqlog`.
    Plain(BufWriter<File>),
    /// `.sqlog.zst`, compressed on a thread of its own.
    Zstd(BackgroundZstd),
}

impl QlogWriter {
    /// Creates (truncates) `path`, written as `c` says. The name is the
    /// caller's business: see [`QlogCompression::extension`].
    pub fn create(path: &Path, c: QlogCompression) -> io::Result<QlogWriter> {
        let file = File::create(path)?;
        Ok(match c {
            QlogCompression::Plain => QlogWriter::Plain(BufWriter::with_capacity(BUFFER, file)),
            QlogCompression::Zstd => QlogWriter::Zstd(BackgroundZstd::new(
                file,
                ZSTD_LEVEL,
                CHUNK,
                QUEUED_CHUNKS,
                false,
            )?),
        })
    }

    /// Writes what is buffered and ends the zstd frame; reports the errors
    /// that dropping the writer would swallow.
    pub fn finish(mut self) -> io::Result<()> {
        match &mut self {
            QlogWriter::Plain(w) => w.flush(),
            QlogWriter::Zstd(z) => z.finish(),
        }
    }
}

impl Write for QlogWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            QlogWriter::Plain(w) => w.write(buf),
            QlogWriter::Zstd(z) => z.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            QlogWriter::Plain(w) => w.write_all(buf),
            QlogWriter::Zstd(z) => z.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            QlogWriter::Plain(w) => w.flush(),
            QlogWriter::Zstd(z) => z.flush(),
        }
    }
}

/// Bytes of qlog a writer gathers before handing them to its compressing
/// thread: large enough that waking the thread costs little.
pub const CHUNK: usize = 256 << 10;

/// Chunks a qlog file may have waiting for its compressing thread before
/// the writer blocks (4 MB).
const QUEUED_CHUNKS: usize = 16;

/// A zstd file compressed on a thread of its own: the writer only gathers
/// bytes into chunks and hands them over, so compressing costs the
/// writing thread (an endpoint's event loop, the emulator's forwarding
/// loop) a copy, not the compression. The output is a [`ZstdWriter`]'s,
/// byte for byte, whatever the threads' timing. [`finish`](Self::finish)
/// (or dropping) waits until the frame is finished and written.
pub struct BackgroundZstd {
    pending: Vec<u8>,
    chunk: usize,
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    worker: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl BackgroundZstd {
    /// Starts a frame at `level` into `file`, handing over `chunk` bytes
    /// at a time with at most `queue` chunks waiting; `sync` also syncs
    /// the file to disk at the end.
    pub fn new(
        file: File,
        level: i32,
        chunk: usize,
        queue: usize,
        sync: bool,
    ) -> io::Result<BackgroundZstd> {
        let mut z = ZstdWriter::new(file, level)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(queue);
        let worker = std::thread::Builder::new()
            .name("zstd-writer".into())
            .spawn(move || {
                for c in rx {
                    z.write_all(&c)?;
                }
                z.finish()?;
                if sync {
                    z.get_ref().sync_all()?;
                }
                Ok(())
            })?;
        Ok(BackgroundZstd {
            pending: Vec::with_capacity(chunk),
            chunk,
            tx: Some(tx),
            worker: Some(worker),
        })
    }

    /// Hands the pending bytes to the thread; if it has stopped on an
    /// error, that error.
    fn hand_over(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.pending, Vec::with_capacity(self.chunk));
        match self.tx.as_ref().map(|tx| tx.send(full)) {
            Some(Ok(())) => Ok(()),
            _ => {
                // The thread ended early: say why.
                self.finish()?;
                Err(io::Error::other("the zstd writer has stopped"))
            }
        }
    }

    /// Hands over the rest, waits until the thread has compressed it and
    /// finished the frame, and returns the first error it met. Later calls
    /// do nothing; later writes fail.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.tx.is_some() && !self.pending.is_empty() {
            let full = std::mem::take(&mut self.pending);
            let _ = self.tx.as_ref().map(|tx| tx.send(full));
        }
        drop(self.tx.take());
        match self.worker.take().map(|w| w.join()) {
            None => Ok(()),
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the zstd writer panicked")),
        }
    }
}

impl Write for BackgroundZstd {
    /// quiche's serializer writes a record in many pieces of a few bytes:
    /// those only append to the chunk.
    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.pending.len() + buf.len() < self.chunk && self.tx.is_some() {
            self.pending.extend_from_slice(buf);
            Ok(())
        } else {
            self.write(buf).map(drop)
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.tx.is_none() {
            return Err(io::Error::other("the zstd frame is already finished"));
        }
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= self.chunk {
            self.hand_over()?;
        }
        Ok(buf.len())
    }

    /// Hands what is buffered to the compressing thread (which writes
    /// every block as it completes); does not wait for it.
    fn flush(&mut self) -> io::Result<()> {
        if self.tx.is_none() {
            return Ok(());
        }
        self.hand_over()
    }
}

impl Drop for BackgroundZstd {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A streaming zstd encoder (one frame, with a checksum) that hands every
/// compressed block to `W` as soon as the block is complete, so what `W`
/// holds is readable up to the last complete block even if the frame is
/// never finished. Input is gathered in [`BUFFER`]-byte pieces first.
/// Finished by [`finish`](Self::finish) or on drop. [`BackgroundZstd`]
/// runs one on a thread.
pub struct ZstdWriter<W: Write> {
    enc: zstd::stream::raw::Encoder<'static>,
    pending: Vec<u8>,
    out: Vec<u8>,
    inner: W,
    finished: bool,
}

impl<W: Write> ZstdWriter<W> {
    /// Starts a frame at `level` into `inner`.
    pub fn new(inner: W, level: i32) -> io::Result<ZstdWriter<W>> {
        let mut enc = zstd::stream::raw::Encoder::new(level)?;
        enc.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))?;
        enc.set_parameter(zstd::stream::raw::CParameter::HashLog(ZSTD_HASH_LOG))?;
        Ok(ZstdWriter {
            enc,
            pending: Vec::with_capacity(BUFFER),
            out: vec![0; zstd::zstd_safe::CCtx::out_size()],
            inner,
            finished: false,
        })
    }

    /// The writer the frame goes to.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Compresses what is pending and writes every complete block out.
    fn compress(&mut self) -> io::Result<()> {
        let pending = std::mem::take(&mut self.pending);
        let r = self.compress_slice(&pending);
        self.pending = pending;
        self.pending.clear();
        r
    }

    /// Compresses `data` and writes every complete block out.
    fn compress_slice(&mut self, data: &[u8]) -> io::Result<()> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        let mut input = InBuffer::around(data);
        loop {
            let mut output = OutBuffer::around(&mut self.out[..]);
            self.enc.run(&mut input, &mut output)?;
            let n = output.pos();
            self.inner.write_all(&self.out[..n])?;
            // Done when all input is taken and the output had room left
            // (so nothing more is waiting inside the encoder).
            if input.pos() == data.len() && n < self.out.len() {
                return Ok(());
            }
        }
    }

    /// Drains the encoder with `step` (a zstd flush or end) until it has
    /// nothing left.
    fn drain(
        &mut self,
        step: fn(
            &mut zstd::stream::raw::Encoder<'static>,
            &mut zstd::stream::raw::OutBuffer<'_, [u8]>,
        ) -> io::Result<usize>,
    ) -> io::Result<()> {
        loop {
            let mut output = zstd::stream::raw::OutBuffer::around(&mut self.out[..]);
            let left = step(&mut self.enc, &mut output)?;
            let n = output.pos();
            self.inner.write_all(&self.out[..n])?;
            if left == 0 {
                return Ok(());
            }
        }
    }

    /// Writes what is pending, ends the frame and flushes `W`. Later
    /// calls do nothing; later writes fail.
    pub fn finish(&mut self) -> io::Result<()> {
        use zstd::stream::raw::Operation;
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        self.compress()?;
        self.drain(|e, o| e.finish(o, true))?;
        self.inner.flush()
    }
}

impl<W: Write> Write for ZstdWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.finished {
            return Err(io::Error::other("the zstd frame is already finished"));
        }
        if self.pending.is_empty() && buf.len() >= BUFFER {
            // A whole chunk (as the compressing thread hands over): no copy.
            self.compress_slice(buf)?;
        } else {
            self.pending.extend_from_slice(buf);
            if self.pending.len() >= BUFFER {
                self.compress()?;
            }
        }
        Ok(buf.len())
    }

    /// Compresses what is pending and ends the current block early, so
    /// all of it is readable from `W`; the frame goes on.
    fn flush(&mut self) -> io::Result<()> {
        use zstd::stream::raw::Operation;
        if self.finished {
            return Ok(());
        }
        self.compress()?;
        self.drain(|e, o| e.flush(o))?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for ZstdWriter<W> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn text(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..n {
            writeln!(
                v,
                "\u{1e}{{\"time\":{i}.5,\"name\":\"quic:packet_sent\",\"data\":{{\"pn\":{i}}}}}"
            )
            .unwrap();
        }
        v
    }

    #[test]
    fn zstd_files_start_with_the_magic_and_decode_to_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.sqlog.zst");
        let data = text(50_000);
        let mut w = QlogWriter::create(&p, QlogCompression::Zstd).unwrap();
        // In small pieces, as quiche's serializer writes.
        for piece in data.chunks(7) {
            w.write_all(piece).unwrap();
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
        assert!(
            bytes.len() * 5 < data.len(),
            "{} of {}",
            bytes.len(),
            data.len()
        );
        assert_eq!(zstd::decode_all(&bytes[..]).unwrap(), data);
    }

    #[test]
    fn dropping_finishes_the_frame_and_plain_stays_plain() {
        let dir = tempfile::tempdir().unwrap();
        let data = text(1000);
        let z = dir.path().join("a.sqlog.zst");
        let p = dir.path().join("a.sqlog");
        for (path, c) in [(&z, QlogCompression::Zstd), (&p, QlogCompression::Plain)] {
            let mut w: Box<dyn Write + Send + Sync> =
                Box::new(QlogWriter::create(path, c).unwrap());
            w.write_all(&data).unwrap();
            drop(w);
        }
        assert_eq!(
            zstd::decode_all(&std::fs::read(&z).unwrap()[..]).unwrap(),
            data
        );
        assert_eq!(std::fs::read(&p).unwrap(), data);
    }

    #[test]
    fn a_writer_that_never_finishes_leaves_every_complete_block_readable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("killed.sqlog.zst");
        let data = text(200_000);
        // The encoder the compressing thread runs, written to as that
        // thread writes (whole chunks).
        let mut w = ZstdWriter::new(File::create(&p).unwrap(), ZSTD_LEVEL).unwrap();
        for c in data.chunks(BUFFER) {
            w.write_all(c).unwrap();
        }
        // As if the process were killed: no destructor runs.
        std::mem::forget(w);
        let bytes = std::fs::read(&p).unwrap();
        let mut d = zstd::stream::read::Decoder::new(&bytes[..]).unwrap();
        let mut got = Vec::new();
        let e = d.read_to_end(&mut got).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(data.starts_with(&got));
        let lost = data.len() - got.len();
        assert!(
            lost <= BUFFER + (128 << 10),
            "lost {lost} of {}",
            data.len()
        );
    }

    #[test]
    fn names_and_choices() {
        assert_eq!(QlogCompression::parse("0"), Some(QlogCompression::Plain));
        assert_eq!(
            QlogCompression::parse(" Plain "),
            Some(QlogCompression::Plain)
        );
        assert_eq!(QlogCompression::parse("true"), Some(QlogCompression::Zstd));
        assert_eq!(QlogCompression::parse("gzip"), None);
        assert_eq!(QlogCompression::Zstd.extension(), "sqlog.zst");
        assert!(is_qlog_name("server-ab.sqlog") && is_qlog_name("server-ab.sqlog.zst"));
        assert!(!is_qlog_name("client.json") && !is_qlog_name("x.sqlog.part"));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find(dir.path(), "server", "ab"), None);
        std::fs::write(dir.path().join("server-ab.sqlog"), b"").unwrap();
        assert_eq!(
            find(dir.path(), "server", "ab"),
            Some(dir.path().join("server-ab.sqlog"))
        );
        std::fs::write(dir.path().join("server-ab.sqlog.zst"), b"").unwrap();
        assert_eq!(
            find(dir.path(), "server", "ab"),
            Some(dir.path().join("server-ab.sqlog.zst"))
        );
    }
}

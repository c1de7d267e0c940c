//! The bottleneck log, written by both backends.
//!
//! - **Per-packet events** (`emu` and `sim`), in `bottleneck.bin`: the magic
//!   `CCLABBN1`, a little-endian u32 length and a JSON header (format
//!   version, the resolved link, the clock's epoch), then fixed 32-byte
//!   little-endian records: time (ns since the epoch, u64), flow (u16),
//!   direction (u8: 0 up, 1 down), kind (u8: 0 arrive, 1 drop, 2 depart,
//!   3 duplicate, 4 mark), reason (u8: for drops 1 loss, 2 queue_full,
//!   3 red, 4 codel, 5 pie, 6 dualpi2_c, 7 dualpi2_l; for marks the same
//!   code for the same AQM, 3 red, 4 codel, 5 pie, 6 dualpi2_c,
//!   7 dualpi2_l, and 8 step), the packet's ECN codepoint after the event
//!   (u8: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE; this byte was padding, 0,
//!   before ECN, and a link without ECT traffic still writes 0), size
//!   (u16), queue bytes after the event (u32), queue packets after (u32),
//!   sojourn ns for departs, dequeue drops and dequeue marks (u32,
//!   saturating), and 4 reserved bytes. A mark at enqueue (RED, PIE, a
//!   step in packets or bytes) follows its packet's arrival record; a mark
//!   at dequeue (CoDel, a step in time, DualPI2) comes just before its
//!   departure record, at the same time. At
//!   100 000 packets/s that is about 6 MB/s before compression. The file
//!   holds that stream zstd-compressed (level [`ZSTD_LEVEL`]; about 4.5
//!   times smaller; `zstd -dc bottleneck.bin` gives the bytes above);
//!   [`Reader`] also takes the uncompressed form older runs wrote. The
//!   [`Writer`] compresses on a thread of its own, so the emulator's
//!   forwarding loop only copies 32 bytes per event; complete zstd blocks
//!   reach the file as they fill, so a log whose writer was killed reads
//!   up to its last complete block.
//! - **Periodic samples** (both backends), in `bottleneck-samples.jsonl`:
//!   one JSON object per direction per interval with the bytes sent,
//!   utilization, queue occupancy and drops ([`Sample`]), and CE marks
//!   (`marks`, `marks_total`) once there are any.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

pub use link_model::log::{Kind, NoSink, Record, Sample, Sink, MAGIC, RECORD_BYTES};

/// zstd level of the per-packet log: level 1 is the fastest and, on these
/// records, within 1% of levels 2 to 5 in size.
pub const ZSTD_LEVEL: i32 = 1;
/// Bytes of records handed to the compressing thread at a time.
const CHUNK: usize = 256 << 10;
/// Chunks that may wait for the compressing thread before the writer
/// blocks (16 MB; compression runs far faster than any link fills it).
const QUEUED_CHUNKS: usize = 64;
/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Writes the binary per-packet log, zstd-compressed on a thread of its
/// own.
pub struct Writer {
    z: quic_app::qlog_file::BackgroundZstd,
    error: Option<io::Error>,
    /// Records written.
    pub records: u64,
}

impl Writer {
    /// Creates `path` and writes the header.
    pub fn create(path: &Path, header: &serde_json::Value) -> io::Result<Writer> {
        let file = File::create(path)?;
        let mut z =
            quic_app::qlog_file::BackgroundZstd::new(file, ZSTD_LEVEL, CHUNK, QUEUED_CHUNKS, true)?;
        let h = serde_json::to_vec(header)?;
        z.write_all(MAGIC)?;
        z.write_all(&(h.len() as u32).to_le_bytes())?;
        z.write_all(&h)?;
        Ok(Writer {
            z,
            error: None,
            records: 0,
        })
    }

    /// Writes the rest, ends the zstd frame and syncs the file; the first
    /// write error, if any, is returned here.
    pub fn finish(mut self) -> io::Result<u64> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.z.finish()?;
        Ok(self.records)
    }
}

impl Sink for Writer {
    fn record(&mut self, r: &Record) {
        if self.error.is_none() {
            match self.z.write_all(&r.encode()) {
                Ok(()) => self.records += 1,
                Err(e) => self.error = Some(e),
            }
        }
    }
}

/// Reads a per-packet log, compressed or not: its header, then records
/// one by one.
pub struct Reader {
    input: Box<dyn BufRead + Send>,
    /// The JSON header.
    pub header: serde_json::Value,
}

impl Reader {
    /// Opens `path` and reads the header. Errors name the file.
    pub fn open(path: &Path) -> io::Result<Reader> {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {what}", path.display()),
            )
        };
        let mut file = BufReader::with_capacity(
            1 << 20,
            File::open(path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
        );
        let head = file
            .fill_buf()
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let mut input: Box<dyn BufRead + Send> = if head.starts_with(&ZSTD_MAGIC) {
            let z = zstd::stream::read::Decoder::with_buffer(file)
                .map_err(|e| bad(&format!("zstd: {e}")))?;
            Box::new(BufReader::with_capacity(1 << 20, z))
        } else {
            Box::new(file)
        };
        let mut magic = [0u8; 8];
        input
            .read_exact(&mut magic)
            .map_err(|_| bad("too short for a bottleneck log"))?;
        if &magic != MAGIC {
            return Err(bad("not a bottleneck log (bad magic)"));
        }
        let mut len = [0u8; 4];
        input
            .read_exact(&mut len)
            .map_err(|_| bad("truncated header"))?;
        let len = u32::from_le_bytes(len) as usize;
        if len > 16 << 20 {
            return Err(bad("header length is implausible"));
        }
        let mut h = vec![0u8; len];
        input
            .read_exact(&mut h)
            .map_err(|_| bad("truncated header"))?;
        let header = serde_json::from_slice(&h).map_err(|e| bad(&format!("header: {e}")))?;
        Ok(Reader { input, header })
    }
}

impl Iterator for Reader {
    type Item = Record;
    /// The next record; a truncated last record (or a zstd frame that
    /// ends early: a writer that was killed) ends the log.
    fn next(&mut self) -> Option<Record> {
        let mut b = [0u8; RECORD_BYTES];
        self.input.read_exact(&mut b).ok()?;
        Some(Record::decode(&b))
    }
}

/// Appends samples as JSON lines.
pub struct SampleWriter {
    out: BufWriter<File>,
}

impl SampleWriter {
    /// Creates `path`.
    pub fn create(path: &Path) -> io::Result<SampleWriter> {
        Ok(SampleWriter {
            out: BufWriter::new(File::create(path)?),
        })
    }

    /// Writes one sample.
    pub fn write(&mut self, s: &Sample) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, s)?;
        self.out.write_all(b"\n")
    }

    /// Flushes to disk.
    pub fn finish(mut self) -> io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}

/// The per-packet log's header: the format, the backend that wrote it,
/// its clock's epoch (Unix and monotonic ns; 0 in virtual time) and the
/// resolved link.
pub fn packet_log_header(
    backend: &str,
    epoch_unix_ns: u64,
    epoch_monotonic_ns: u64,
    link: &crate::link::LinkSpec,
) -> serde_json::Value {
    serde_json::json!({
        "format": "cclab-bottleneck",
        "version": 1,
        "backend": backend,
        "epoch_unix_ns": epoch_unix_ns,
        "epoch_monotonic_ns": epoch_monotonic_ns,
        "link": link.to_toml(),
    })
}

/// A bottleneck file that could not be written.
#[derive(Debug)]
pub struct LogError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

/// Tags an I/O error with the file it concerns.
fn log_err(path: &Path) -> impl FnOnce(io::Error) -> LogError {
    let path = path.to_path_buf();
    move |source| LogError { path, source }
}

/// The bottleneck's files while a backend (emu, sim) runs:
/// `bottleneck-samples.jsonl` and, if asked, `bottleneck.bin`, written
/// under `.part` names until [`LogFiles::finish`] renames them.
pub struct LogFiles {
    dir: PathBuf,
    samples: SampleWriter,
    packets: Option<Writer>,
    no_sink: NoSink,
}

impl LogFiles {
    /// Creates the files in `dir`; `bottleneck.bin` only with a `header`
    /// ([`packet_log_header`]).
    pub fn create(dir: &Path, header: Option<&serde_json::Value>) -> Result<LogFiles, LogError> {
        let s = dir.join("bottleneck-samples.jsonl.part");
        let samples = SampleWriter::create(&s).map_err(log_err(&s))?;
        let packets = match header {
            Some(h) => {
                let p = dir.join("bottleneck.bin.part");
                Some(Writer::create(&p, h).map_err(log_err(&p))?)
            }
            None => None,
        };
        Ok(LogFiles {
            dir: dir.to_path_buf(),
            samples,
            packets,
            no_sink: NoSink,
        })
    }

    /// Where per-packet events go: the per-packet log, or nowhere.
    pub fn sink(&mut self) -> &mut dyn Sink {
        match self.packets.as_mut() {
            Some(w) => w,
            None => &mut self.no_sink,
        }
    }

    /// Writes one sample.
    pub fn sample(&mut self, s: &Sample) -> io::Result<()> {
        self.samples.write(s)
    }

    /// Finishes both files and gives them their final names; returns the
    /// per-packet records written.
    pub fn finish(self) -> Result<u64, LogError> {
        let mut records = 0;
        if let Some(w) = self.packets {
            let p = self.dir.join("bottleneck.bin");
            records = w.finish().map_err(log_err(&p))?;
            std::fs::rename(self.dir.join("bottleneck.bin.part"), &p).map_err(log_err(&p))?;
        }
        let p = self.dir.join("bottleneck-samples.jsonl");
        self.samples.finish().map_err(log_err(&p))?;
        std::fs::rename(self.dir.join("bottleneck-samples.jsonl.part"), &p).map_err(log_err(&p))?;
        Ok(records)
    }
}

/// Where link `i` of `topo` writes its files in a repetition's directory
/// `rep_dir`: the first link where a single-link run writes them (the
/// directory itself), every other link in `links/NAME/`.
pub fn link_dir(rep_dir: &Path, topo: &link_model::topology::Topology, i: usize) -> PathBuf {
    if i == 0 {
        rep_dir.to_path_buf()
    } else {
        rep_dir.join("links").join(&topo.links[i].name)
    }
}

/// The files of every link of a topology ([`link_dir`]), or of none.
pub struct LinkLogs {
    files: Vec<LogFiles>,
    none: NoSink,
}

impl LinkLogs {
    /// No files: events and samples go nowhere.
    pub fn none() -> LinkLogs {
        LinkLogs {
            files: Vec::new(),
            none: NoSink,
        }
    }

    /// Creates every link's files under `rep_dir`; `header(i)` is link
    /// `i`'s per-packet log header, `None` for samples only.
    pub fn create(
        rep_dir: &Path,
        topo: &link_model::topology::Topology,
        header: impl Fn(usize) -> Option<serde_json::Value>,
    ) -> Result<LinkLogs, LogError> {
        let mut files = Vec::with_capacity(topo.links.len());
        for i in 0..topo.links.len() {
            let d = link_dir(rep_dir, topo, i);
            std::fs::create_dir_all(&d).map_err(log_err(&d))?;
            files.push(LogFiles::create(&d, header(i).as_ref())?);
        }
        Ok(LinkLogs {
            files,
            none: NoSink,
        })
    }

    /// Writes one sample of link `i` (nothing without files).
    pub fn sample(&mut self, i: usize, s: &Sample) -> io::Result<()> {
        match self.files.get_mut(i) {
            Some(f) => f.sample(s),
            None => Ok(()),
        }
    }

    /// Finishes every link's files; returns the per-packet records written.
    pub fn finish(self) -> Result<u64, LogError> {
        let mut n = 0;
        for f in self.files {
            n += f.finish()?;
        }
        Ok(n)
    }
}

impl link_model::topology::LinkSinks for LinkLogs {
    fn sink(&mut self, link: usize) -> &mut dyn Sink {
        match self.files.get_mut(link) {
            Some(f) => f.sink(),
            None => &mut self.none,
        }
    }
}

/// Reads a samples file; a malformed line is an error naming it.
pub fn read_samples(path: &Path) -> io::Result<Vec<Sample>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} line {}: {e}", path.display(), i + 1),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.bin");
        let mut w = Writer::create(&p, &serde_json::json!({"version": 1})).unwrap();
        let recs: Vec<Record> = (0..1000u64)
            .map(|i| Record {
                t_ns: i * 1_000_000_007,
                flow: (i % 7) as u16,
                dir: (i % 2) as u8,
                kind: (i % 5) as u8,
                reason: (i % 9) as u8,
                ecn: (i % 4) as u8,
                size: 1350,
                queue_bytes: i as u32 * 3,
                queue_packets: i as u32,
                sojourn_ns: u32::MAX - i as u32,
            })
            .collect();
        for r in &recs {
            w.record(r);
        }
        assert_eq!(w.finish().unwrap(), 1000);
        let r = Reader::open(&p).unwrap();
        assert_eq!(r.header["version"], 1);
        assert_eq!(r.collect::<Vec<_>>(), recs);
        std::fs::write(&p, b"garbage!").unwrap();
        let e = Reader::open(&p).err().unwrap().to_string();
        assert!(e.contains("b.bin") && e.contains("magic"), "{e}");
    }

    fn records(n: u64) -> Vec<Record> {
        (0..n)
            .map(|i| Record {
                t_ns: i * 12_345,
                flow: (i % 3) as u16,
                dir: 1,
                kind: (i % 3) as u8,
                size: 1350,
                queue_bytes: (i % 100) as u32 * 1350,
                queue_packets: (i % 100) as u32,
                ..Record::default()
            })
            .collect()
    }

    #[test]
    fn the_log_is_zstd_and_smaller_and_the_plain_form_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bottleneck.bin");
        let header = serde_json::json!({"format": "cclab-bottleneck", "version": 1});
        let recs = records(100_000);
        let mut w = Writer::create(&p, &header).unwrap();
        for r in &recs {
            w.record(r);
        }
        assert_eq!(w.finish().unwrap(), 100_000);
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(bytes[..4], ZSTD_MAGIC);
        let raw = zstd::decode_all(&bytes[..]).unwrap();
        assert!(raw.starts_with(MAGIC));
        let plain_len = raw.len();
        assert_eq!(
            plain_len,
            12 + serde_json::to_vec(&header).unwrap().len() + 32 * 100_000
        );
        assert!(
            bytes.len() * 3 < plain_len,
            "{} of {plain_len}",
            bytes.len()
        );
        let r = Reader::open(&p).unwrap();
        assert_eq!(r.header, header);
        assert_eq!(r.collect::<Vec<_>>(), recs);
        // What older runs wrote: the same bytes, uncompressed.
        let old = dir.path().join("old.bin");
        std::fs::write(&old, &raw).unwrap();
        assert_eq!(Reader::open(&old).unwrap().collect::<Vec<_>>(), recs);
    }

    #[test]
    fn a_log_cut_short_reads_up_to_where_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bottleneck.bin");
        let recs = records(200_000);
        let mut w = Writer::create(&p, &serde_json::json!({"version": 1})).unwrap();
        for r in &recs {
            w.record(r);
        }
        w.finish().unwrap();
        // A writer killed in the middle: the frame stops partway.
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() * 2 / 3]).unwrap();
        let got: Vec<Record> = Reader::open(&p).unwrap().collect();
        assert!(got.len() > 100_000, "{} records", got.len());
        assert!(got.len() < recs.len());
        assert_eq!(got[..], recs[..got.len()]);
    }

    #[test]
    fn two_identical_logs_compress_to_identical_files() {
        let dir = tempfile::tempdir().unwrap();
        let recs = records(50_000);
        let mut files = Vec::new();
        for name in ["a.bin", "b.bin"] {
            let p = dir.path().join(name);
            let mut w = Writer::create(&p, &serde_json::json!({})).unwrap();
            for r in &recs {
                w.record(r);
            }
            w.finish().unwrap();
            files.push(std::fs::read(&p).unwrap());
        }
        assert!(files[0] == files[1]);
    }

    /// A mark record's fields survive the file, and a log of Not-ECT
    /// traffic encodes exactly as before ECN (the codepoint byte was
    /// padding, 0).
    #[test]
    fn marks_and_codepoints_round_trip_and_not_ect_bytes_are_unchanged() {
        let r = Record {
            t_ns: 5,
            flow: 2,
            dir: 1,
            kind: Kind::Mark as u8,
            reason: link_model::elements::MarkReason::DualPi2L as u8,
            ecn: 3,
            size: 1200,
            queue_bytes: 7,
            queue_packets: 1,
            sojourn_ns: 1_000_001,
        };
        let b = r.encode();
        assert_eq!((b[11], b[12], b[13]), (4, 7, 3));
        assert_eq!(Record::decode(&b), r);
        let plain = Record {
            ecn: 0,
            kind: Kind::Depart as u8,
            reason: 0,
            ..r
        };
        let mut want = [0u8; RECORD_BYTES];
        want[0..8].copy_from_slice(&5u64.to_le_bytes());
        want[8..10].copy_from_slice(&2u16.to_le_bytes());
        want[10] = 1;
        want[11] = 2;
        want[14..16].copy_from_slice(&1200u16.to_le_bytes());
        want[16..20].copy_from_slice(&7u32.to_le_bytes());
        want[20..24].copy_from_slice(&1u32.to_le_bytes());
        want[24..28].copy_from_slice(&1_000_001u32.to_le_bytes());
        assert_eq!(plain.encode(), want);
        // Samples: no mark fields until there are marks; old lines read.
        let s = Sample::default();
        let j = serde_json::to_string(&s).unwrap();
        assert!(!j.contains("marks"), "{j}");
        let back: Sample = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
        let m = Sample {
            marks: 3,
            marks_total: 9,
            ..Sample::default()
        };
        let j = serde_json::to_string(&m).unwrap();
        assert!(
            j.contains("\"marks\":3") && j.contains("\"marks_total\":9"),
            "{j}"
        );
    }
}

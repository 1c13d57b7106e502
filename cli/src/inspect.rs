//! `floe inspect`: prints a segment's committed records as JSON lines, or its summary.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use floe_core::segment::{BatchTxn, FileSource, Limits, Record, SegmentReader, parse_txn_index};
use serde::Serialize;

#[derive(Serialize)]
pub struct RecordLine<'a> {
    offset: i64,
    timestamp: i64,
    timestamp_type: &'static str,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<HeaderLine<'a>>,
}

#[derive(Serialize)]
pub struct HeaderLine<'a> {
    key: std::borrow::Cow<'a, str>,
    value: Option<String>,
}

pub fn line<'a>(record: &Record<'a>) -> RecordLine<'a> {
    let b64 = |b: Option<&[u8]>| b.map(|b| STANDARD.encode(b));
    RecordLine {
        offset: record.offset,
        timestamp: record.timestamp,
        timestamp_type: record.timestamp_type.name(),
        key: b64(record.key),
        value: b64(record.value),
        headers: record
            .headers
            .iter()
            .map(|h| HeaderLine { key: String::from_utf8_lossy(h.key), value: b64(h.value) })
            .collect(),
    }
}

/// Decodes `segment` and writes its committed records as JSON lines to `out` (or, with
/// `summary_only`, the [`floe_core::segment::SegmentSummary`] as one JSON object).
pub async fn run(segment: &Path, txn_index: Option<&Path>, summary_only: bool, out: impl Write) -> anyhow::Result<()> {
    crate::regular_file("segment", segment)?;
    if let Some(path) = txn_index {
        crate::regular_file("--txn-index", path)?;
    }
    let mut reader = SegmentReader::open(Arc::new(FileSource::new(segment)), Limits::default()).await?;
    if let Some(path) = txn_index {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let aborted = parse_txn_index(&bytes).with_context(|| format!("{}", path.display()))?;
        reader = reader.with_txn_index(aborted);
    }
    let mut out = std::io::BufWriter::new(out);
    while let Some(batch) = reader.next_batch().await? {
        if summary_only || batch.txn != BatchTxn::Committed {
            continue;
        }
        for record in &batch.records {
            serde_json::to_writer(&mut out, &line(&record))?;
            out.write_all(b"\n")?;
        }
    }
    if summary_only {
        serde_json::to_writer_pretty(&mut out, reader.summary())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

//! The segment reader against real broker segments, kafka-python-built segments, and
//! damaged input.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use floe_aws::segment_source::S3Source;
use floe_core::retry::Retryable;
use floe_core::segment::{
    BatchTxn, FileSource, Limits, MemorySource, SegmentError, SegmentErrorKind, SegmentReader, SegmentSummary,
    decode_bytes, parse_txn_index,
};
use serde_json::Value;

use crate::support::{self, cases};

/// Decodes a segment from a source: the committed records as `floe inspect` lines and the
/// summary.
async fn decode(
    source: Arc<dyn floe_core::segment::SegmentSource>,
    txn_index: Option<&Path>,
    limits: Limits,
) -> Result<(Vec<Value>, SegmentSummary), SegmentError> {
    let mut reader = SegmentReader::open(source, limits).await?;
    if let Some(path) = txn_index {
        reader = reader.with_txn_index(parse_txn_index(&std::fs::read(path).unwrap()).unwrap());
    }
    let mut lines = Vec::new();
    while let Some(batch) = reader.next_batch().await? {
        if batch.txn == BatchTxn::Committed {
            for r in &batch.records {
                lines.push(serde_json::to_value(floe_cli::inspect::line(&r)).unwrap());
            }
        }
    }
    Ok((lines, reader.into_summary()))
}

async fn decode_file(path: &Path) -> Result<(Vec<Value>, SegmentSummary), SegmentError> {
    decode(Arc::new(FileSource::new(path)), None, Limits::default()).await
}

fn decode_mem(bytes: Vec<u8>, limits: Limits) -> Result<SegmentSummary, SegmentError> {
    decode_bytes("mem.log", Bytes::from(bytes), limits)
}

/// The handout's fixtures: (file name part, batches, committed data records, control
/// records, first offset, last offset, tombstones). Counts from its README (legacy inner
/// messages from the independent walker it names).
const FIXTURES: &[(&str, u64, u64, u64, i64, i64, u64)] = &[
    ("BiggerBrain+kafka__data__lsx1-0", 14, 14, 0, 0, 13, 0),
    ("__consumer_offsets-17", 2, 2, 0, 1, 2, 1),
    ("__consumer_offsets-39", 1, 2, 0, 18, 19, 2),
    ("ksql-default__command_topic-0", 2, 1, 1, 0, 1, 0),
    ("kafka-data___schemas-0", 42, 42, 0, 0, 41, 42),
    ("dspiderTask-0", 167, 167, 0, 0, 166, 0),
    ("actual-group-consumption-rekey-0", 12, 14, 0, 0, 13, 0),
    ("docker-connect-configs-0", 45, 54, 0, 0, 53, 18),
    ("some-topic-0", 9, 9, 0, 0, 8, 0),
    ("bp.nsi.v3.changes.fre", 4, 4, 0, 0, 3, 0),
    ("fixture_gzip.records", 1, 1, 0, 0, 0, 0),
    ("fixture_lz4.records", 1, 1, 0, 0, 0, 0),
    ("fixture_nocompression.records", 1, 1, 0, 0, 0, 0),
    ("fixture_null_key.records", 1, 1, 0, 0, 0, 0),
    ("fixture_snappy.records", 1, 1, 0, 0, 0, 0),
    ("fixture_snappy_java.records", 1, 2, 0, 0, 1, 0),
    ("fixture_zstd.records", 1, 1, 0, 0, 0, 0),
    ("v1-v1.hex", 4, 4, 0, 0, 3, 0),
    ("v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex", 15, 20, 0, 0, 19, 0),
    ("v1c-v1-v1c.hex", 5, 6, 0, 0, 5, 0),
    ("v1c-v1c.hex", 3, 4, 0, 0, 3, 0),
    ("v2-v2.hex", 2, 4, 0, 0, 3, 0),
    ("v2b-v1.hex", 3, 4, 0, 0, 3, 0),
    ("v2bc-v1-v1c.hex", 4, 6, 0, 0, 5, 0),
    ("v2bc-v1.hex", 3, 4, 0, 0, 3, 0),
    ("v2bc-v1c.hex", 2, 4, 0, 0, 3, 0),
    ("v2c-v2-v2c.hex", 3, 6, 0, 0, 5, 0),
    ("v2c-v2c.hex", 2, 4, 0, 0, 3, 0),
    ("v0_response.json", 1, 1, 0, 0, 0, 0),
    ("v0_response_gzip.json", 3, 3, 0, 0, 2, 0),
    ("v1_response_gzip.json", 1, 3, 0, 0, 2, 0),
    ("v4_from_scala_producer_response.json", 6, 6, 0, 0, 5, 0),
    ("v4_response.json", 1, 3, 0, 0, 2, 0),
    ("v4_response_010_format.json", 1, 1, 0, 0, 0, 0),
    ("v4_response_gzip.json", 2, 6, 0, 0, 5, 0),
    ("v4_response_mixed_formats.json", 1614, 2425, 0, 0, 2424, 0),
    ("v4_response_snappy.json", 1, 1, 0, 0, 0, 0),
    ("all-codecs-txn-abort-commit", 9, 55, 2, 0, 61, 15),
    ("legacy_v1_gzip_wrapper", 1, 3, 0, 0, 2, 0),
];

fn fixture_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(support::data("kafka"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log" || e == "records"))
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn every_fixture_decodes_to_its_listed_counts() {
    let files = fixture_files();
    assert_eq!(files.len(), FIXTURES.len(), "a fixture without expectations, or one missing");
    for &(part, batches, records, control, first, last, tombstones) in FIXTURES {
        let matching: Vec<_> = files.iter().filter(|f| f.to_string_lossy().contains(part)).collect();
        assert_eq!(matching.len(), 1, "{part} matches {matching:?}");
        let (lines, s) = decode_file(matching[0]).await.unwrap_or_else(|e| panic!("{part}: {e}"));
        let total: u64 = s.batches.values().sum();
        assert_eq!(
            (total, s.records, s.control_records, s.first_offset, s.last_offset, s.tombstones),
            (batches, records, control, Some(first), Some(last), tombstones),
            "{part}"
        );
        assert_eq!(lines.len() as u64, records, "{part}");
        let offsets: Vec<i64> = lines.iter().map(|l| l["offset"].as_i64().unwrap()).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{part}: offsets not increasing");
    }
}

#[tokio::test]
async fn fixture_details_match_the_brokers() {
    // lz4 batch with log-append time: every record carries the batch's max timestamp.
    let files = fixture_files();
    let rekey = files.iter().find(|f| f.to_string_lossy().contains("rekey-0")).unwrap();
    let (lines, s) = decode_file(rekey).await.unwrap();
    assert!(lines.iter().all(|l| l["timestamp_type"] == "log_append"));
    assert_eq!(s.codecs.len(), 1);
    // The ksql command topic: a committed transaction (one record and its COMMIT marker).
    let ksql = files.iter().find(|f| f.to_string_lossy().contains("command_topic-0")).unwrap();
    let (_, s) = decode_file(ksql).await.unwrap();
    assert_eq!(s.markers.len(), 1);
    assert!(s.markers[0].commit);
    assert_eq!(s.markers[0].offset, 1);
    assert!(s.open_transactions.is_empty());
}

#[tokio::test]
async fn kafka_python_segments_decode_exactly() {
    let cases = cases();
    assert!(cases.len() >= 20, "generator produced {} cases", cases.len());
    for case in cases {
        let limits = case.limits.as_ref().map_or(Limits::default(), |l| Limits {
            max_batch_bytes: l.max_batch_bytes,
            max_decompressed_bytes: l.max_decompressed_bytes,
        });
        let result = decode(Arc::new(FileSource::new(&case.log)), case.txn_index.as_deref(), limits).await;
        if let Some(expected_error) = &case.error {
            let err = result.err().unwrap_or_else(|| panic!("{}: decoded, expected an error", case.name));
            let msg = err.to_string();
            assert!(msg.contains(expected_error), "{}: {msg}", case.name);
            assert!(msg.contains(&case.log.display().to_string()), "{}: no file in {msg}", case.name);
            assert!(err.base_offset.is_some(), "{}: no base offset in {msg}", case.name);
            assert!(!err.retryable(), "{}", case.name);
            continue;
        }
        let (lines, summary) = result.unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let expected: Vec<Value> = std::fs::read_to_string(&case.expected)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), expected.len(), "{}: record count", case.name);
        for (got, want) in lines.iter().zip(&expected) {
            assert_eq!(got, want, "{}", case.name);
        }
        let got = serde_json::to_value(&summary).unwrap();
        for (field, want) in case.summary.as_object().unwrap() {
            assert_eq!(&got[field], want, "{}: summary field {field}", case.name);
        }
    }
}

#[tokio::test]
async fn inspect_prints_the_documented_shape() {
    let case = cases().into_iter().find(|c| c.name == "v2_gzip").unwrap();
    let mut out = Vec::new();
    floe_cli::inspect::run(&case.log, None, false, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with(r#"{"offset":0,"timestamp":1764000000000,"timestamp_type":"create","key":"#), "{first}");
    assert!(first.contains(r#""headers":[{"key":"trace-id","value":"#), "{first}");
    assert!(first.contains(r#"{"key":"nullable","value":null}"#), "{first}");
    let expected = std::fs::read_to_string(&case.expected).unwrap();
    assert_eq!(text.lines().count(), expected.lines().count());

    let txn = cases().into_iter().find(|c| c.name == "txn_with_index").unwrap();
    let mut out = Vec::new();
    floe_cli::inspect::run(&txn.log, txn.txn_index.as_deref(), true, &mut out).await.unwrap();
    let summary: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(summary["batches"]["control"], 5);
    assert_eq!(summary["codecs"]["gzip"], 2);
    assert_eq!(summary["open_transactions"][0]["producer_id"], 3000);
    assert_eq!((summary["first_offset"].clone(), summary["last_offset"].clone()), (0.into(), 31.into()));
}

/// Batch boundaries of a segment: (position, base offset) from the framing prefix.
fn boundaries(bytes: &[u8]) -> Vec<(usize, i64)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 12 <= bytes.len() {
        let base = i64::from_be_bytes(bytes[pos..pos + 8].try_into().unwrap());
        let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
        out.push((pos, base));
        pos += 12 + len as usize;
    }
    out
}

fn generated(name: &str) -> Vec<u8> {
    let case = cases().into_iter().find(|c| c.name == name).unwrap();
    std::fs::read(case.log).unwrap()
}

#[test]
fn truncation_anywhere_is_an_error_unless_at_a_batch_boundary() {
    for name in ["v2_zstd", "legacy_v1_gzip", "txn"] {
        let bytes = generated(name);
        let bounds = boundaries(&bytes);
        let full = decode_mem(bytes.clone(), Limits::default()).unwrap();
        for cut in 0..bytes.len() {
            let result = decode_mem(bytes[..cut].to_vec(), Limits::default());
            if let Some(i) = bounds.iter().position(|&(p, _)| p == cut) {
                let s = result.unwrap_or_else(|e| panic!("{name} cut at boundary {cut}: {e}"));
                assert!(s.records <= full.records);
                assert_eq!(s.batches.values().sum::<u64>(), i as u64, "{name} at {cut}");
            } else {
                let err = result.err().unwrap_or_else(|| panic!("{name} cut at {cut} decoded"));
                let (pos, base) = *bounds.iter().rev().find(|&&(p, _)| p < cut).unwrap();
                assert_eq!(err.position, pos as u64, "{name} at {cut}: {err}");
                if cut - pos >= 12 {
                    assert_eq!(err.base_offset, Some(base), "{name} at {cut}: {err}");
                    assert!(matches!(err.kind, SegmentErrorKind::Truncated { .. }), "{name} at {cut}: {err}");
                }
            }
        }
    }
}

#[test]
fn a_flipped_bit_in_any_batch_fails_its_checksum() {
    for name in ["v2_none", "v2_snappy", "legacy_v0_gzip", "legacy_v1_none"] {
        let bytes = generated(name);
        let bounds = boundaries(&bytes);
        for (i, &(pos, base)) in bounds.iter().enumerate() {
            let end = bounds.get(i + 1).map_or(bytes.len(), |b| b.0);
            // CRC-covered region: v2 from attributes (pos+21); legacy from magic (pos+16).
            let covered = if bytes[pos + 16] == 2 { pos + 21 } else { pos + 16 };
            for at in (covered..end).step_by(7) {
                let mut damaged = bytes.clone();
                damaged[at] ^= 0x10;
                let err = decode_mem(damaged, Limits::default()).unwrap_err();
                assert!(
                    matches!(err.kind, SegmentErrorKind::Checksum { .. } | SegmentErrorKind::UnsupportedMagic(_)),
                    "{name} byte {at}: {err}"
                );
                assert_eq!((err.position, err.base_offset), (pos as u64, Some(base)), "{name} byte {at}");
            }
        }
    }
}

#[test]
fn absurd_lengths_fail_before_allocating() {
    let bytes = generated("v2_gzip");
    let (second, base) = boundaries(&bytes)[1];
    for (length, expect_too_large) in [(i32::MAX, true), (-5, false), (3, false)] {
        let mut damaged = bytes.clone();
        damaged[second + 8..second + 12].copy_from_slice(&length.to_be_bytes());
        let err = decode_mem(damaged, Limits::default()).unwrap_err();
        assert_eq!((err.position, err.base_offset), (second as u64, Some(base)), "{err}");
        assert_eq!(matches!(err.kind, SegmentErrorKind::BatchTooLarge { .. }), expect_too_large, "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("byte {second}")) && msg.contains(&format!("base offset {base}")), "{msg}");
    }
    // A length within the limit but far beyond the file: truncated, not a 60 MB buffer.
    let mut damaged = bytes[..bytes.len().min(200)].to_vec();
    damaged[8..12].copy_from_slice(&(60i32 << 20).to_be_bytes());
    let err = decode_mem(damaged, Limits::default()).unwrap_err();
    assert!(matches!(err.kind, SegmentErrorKind::Truncated { .. }), "{err}");
}

#[test]
fn garbage_and_bad_tails_are_errors_not_panics() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..500 {
        let len = (next() % 400) as usize + 1;
        let mut junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 && len > 17 {
            // plausible framing, garbage body
            junk[8..12].copy_from_slice(&((len as i32) - 12).to_be_bytes());
            junk[16] = (round % 3) as u8;
        }
        let _ = decode_mem(junk, Limits::default());
    }
    let mut tail = generated("zero_tail");
    assert_eq!(decode_mem(tail.clone(), Limits::default()).unwrap().trailing_zero_bytes, 4096);
    let last = tail.len() - 5;
    tail[last] = 1;
    let err = decode_mem(tail, Limits::default()).unwrap_err();
    assert!(err.to_string().contains("garbage after the last batch"), "{err}");
}

#[tokio::test]
async fn memory_and_file_sources_agree() {
    let case = cases().into_iter().find(|c| c.name == "v2_large").unwrap();
    let bytes = std::fs::read(&case.log).unwrap();
    let (from_file, _) = decode_file(&case.log).await.unwrap();
    let (from_mem, _) = decode(Arc::new(MemorySource::new("m", bytes)), None, Limits::default()).await.unwrap();
    assert_eq!(from_file, from_mem);
    assert_eq!(from_file.len(), 3000);
}

#[test]
fn fuzz_corpus_replays_without_panics() {
    let dir = support::root().join("fuzz/corpus/decode_segment");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let _ = decode_mem(bytes, Limits { max_batch_bytes: 1 << 20, max_decompressed_bytes: 1 << 22 });
        n += 1;
    }
    assert!(n >= 10, "corpus has only {n} inputs");
}

#[tokio::test]
async fn s3_ranged_reads_decode_like_the_file() {
    let s3 = support::s3_client().await;
    let bucket = "floe-segments-range-test";
    s3.create_bucket().bucket(bucket).send().await.unwrap();
    for (name, range) in [("v2_large", 64 * 1024), ("txn", 100), ("legacy_v1_snappy", 7)] {
        let case = cases().into_iter().find(|c| c.name == name).unwrap();
        let key = format!("tiered/{name}-AAAAAAAAAAAAAAAAAAAAAA/0/00000000000000000000-BBBBBBBBBBBBBBBBBBBBBB.log");
        let body = std::fs::read(&case.log).unwrap();
        s3.put_object().bucket(bucket).key(&key).body(body.into()).send().await.unwrap();
        let source = S3Source::open(s3.clone(), bucket, &key).await.unwrap().with_range_bytes(range);
        let (from_s3, s3_summary) = decode(Arc::new(source), None, Limits::default()).await.unwrap();
        let (from_file, file_summary) = decode_file(&case.log).await.unwrap();
        assert_eq!(from_s3, from_file, "{name}");
        assert_eq!(s3_summary.records, file_summary.records, "{name}");
        assert_eq!(s3_summary.markers, file_summary.markers, "{name}");
        assert!(s3_summary.file.starts_with("s3://floe-segments-range-test/tiered/"));
    }
}

#[tokio::test]
async fn s3_object_replaced_mid_read_is_a_retryable_error() {
    let s3 = support::s3_client().await;
    let bucket = "floe-segments-etag-test";
    s3.create_bucket().bucket(bucket).send().await.unwrap();
    let body = generated("v2_none");
    s3.put_object().bucket(bucket).key("t-0/00000000000000000000.log").body(body.clone().into()).send().await.unwrap();
    let source = S3Source::open(s3.clone(), bucket, "t-0/00000000000000000000.log").await.unwrap();
    let mut other = body.clone();
    other[100] ^= 1;
    s3.put_object().bucket(bucket).key("t-0/00000000000000000000.log").body(other.into()).send().await.unwrap();
    let err = decode(Arc::new(source), None, Limits::default()).await.unwrap_err();
    assert!(err.retryable(), "{err}");
    assert!(err.to_string().contains("s3://floe-segments-etag-test/t-0/"), "{err}");
    assert!(S3Source::open(s3, bucket, "missing.log").await.is_err());
}

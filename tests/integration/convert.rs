//! `floe convert`: segments → Parquet files, judged by pyarrow (tests/py/check_parquet.py).

use std::path::Path;

use floe_core::config::FloeConfig;
use floe_core::retry::Retryable;
use serde_json::Value;

use crate::support::{self, cases};

/// Runs `floe convert`; returns the JSON lines it printed.
async fn convert(segment: &Path, out: &Path, config: &FloeConfig) -> anyhow::Result<Vec<Value>> {
    let mut printed = Vec::new();
    floe_cli::convert::run(segment, "floe-test.events", 0, out, config, &mut printed).await?;
    Ok(String::from_utf8(printed)?.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// pyarrow must read `files` back as exactly the lines of `expected` (with `rows_mode`,
/// the rows of a value-as-payload table).
pub fn judge(expected: &Path, files: &[&str], rows_mode: bool) {
    run_judge(&[], expected, files, rows_mode)
}

/// [`judge`] of a value-as-payload table whose columns are also held to the
/// documentation and the table schema: exactly the columns of `types` (JSON: column →
/// Arrow type, pyarrow's spelling), and on every column, nested ones too, the field id
/// that `schema` gives its name.
pub fn judge_typed(expected: &Path, files: &[&str], types: &Path, schema: &iceberg::spec::Schema) {
    let ids: std::collections::BTreeMap<&str, i32> =
        schema.field_id_to_name_map().iter().map(|(id, name)| (name.as_str(), *id)).collect();
    let ids_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ids_file.path(), serde_json::to_vec(&ids).unwrap()).unwrap();
    let args = ["--types".as_ref(), types.as_os_str(), "--field-ids".as_ref(), ids_file.path().as_os_str()];
    run_judge(&args, expected, files, true)
}

fn run_judge(options: &[&std::ffi::OsStr], expected: &Path, files: &[&str], rows_mode: bool) {
    let mut cmd = std::process::Command::new(support::python());
    cmd.arg(support::root().join("tests/py/check_parquet.py"));
    if rows_mode {
        cmd.arg("--rows");
    }
    let out = cmd.args(options).arg(expected).args(files).output().unwrap();
    assert!(
        out.status.success(),
        "pyarrow disagrees: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn every_generated_segment_converts_to_what_pyarrow_reads_back() {
    for case in cases().into_iter().filter(|c| c.error.is_none()) {
        let out = tempfile::tempdir().unwrap();
        let lines = convert(&case.log, out.path(), &FloeConfig::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e:#}", case.name));
        let committed: Vec<&Value> = lines.iter().filter(|l| l.get("pending_producer_id").is_none()).collect();
        let pending: u64 = lines
            .iter()
            .filter(|l| l.get("pending_producer_id").is_some())
            .map(|l| l["record_count"].as_u64().unwrap())
            .sum();
        let records: u64 = committed.iter().map(|l| l["record_count"].as_u64().unwrap()).sum();
        assert_eq!(records, case.summary["records"].as_u64().unwrap(), "{}", case.name);
        assert_eq!(pending, case.summary["open_records"].as_u64().unwrap(), "{}", case.name);
        let files: Vec<&str> = committed.iter().map(|l| l["path"].as_str().unwrap()).collect();
        if records > 0 {
            judge(&case.expected, &files, false);
        }
    }
}

#[tokio::test]
async fn files_roll_at_the_target_size_and_no_file_is_written_twice() {
    let case = cases().into_iter().find(|c| c.name == "v2_large").unwrap();
    let config = FloeConfig::parse("[defaults]\nenabled = true\ntarget_file_size = \"1MiB\"").unwrap();
    let a = tempfile::tempdir().unwrap();
    let first = convert(&case.log, a.path(), &config).await.unwrap();
    assert_eq!(first.len(), 3, "3 MB of incompressible values in 1 MiB files: {first:?}");
    let mut next_offset = 0;
    for (i, line) in first.iter().enumerate() {
        assert_eq!(line["first_offset"].as_i64().unwrap(), next_offset, "files cover the offsets in order");
        next_offset = line["last_offset"].as_i64().unwrap() + 1;
        // Files land within 10% of the target; only the last is smaller.
        let size = std::fs::metadata(line["path"].as_str().unwrap()).unwrap().len();
        assert!(size <= (1 << 20) + (1 << 20) / 10, "file {i}: {size} bytes");
        assert!(i == first.len() - 1 || size >= (1 << 20) - (1 << 20) / 10, "file {i}: {size} bytes, rolled early");
    }
    assert_eq!(next_offset, 3000);
    let files: Vec<&str> = first.iter().map(|l| l["path"].as_str().unwrap()).collect();
    judge(&case.expected, &files, false);
    let before: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // The same input again, into the same directory: new files with the same bytes; the
    // first ones (which a snapshot may reference) untouched.
    let second = convert(&case.log, a.path(), &config).await.unwrap();
    let names = |lines: &[Value]| -> Vec<String> {
        lines
            .iter()
            .map(|l| Path::new(l["path"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into())
            .collect()
    };
    assert!(names(&first).iter().all(|n| !names(&second).contains(n)), "a name written twice");
    for ((x, y), bytes) in first.iter().zip(&second).zip(&before) {
        assert_eq!(&std::fs::read(x["path"].as_str().unwrap()).unwrap(), bytes);
        assert_eq!(&std::fs::read(y["path"].as_str().unwrap()).unwrap(), bytes);
    }
}

#[tokio::test]
async fn a_topic_the_config_does_not_enable_is_refused() {
    let case = cases().into_iter().find(|c| c.name == "v2_none").unwrap();
    let config = FloeConfig::parse("[[topics]]\ntopic = \"other\"").unwrap();
    let err = convert(&case.log, tempfile::tempdir().unwrap().path(), &config).await.unwrap_err();
    assert!(err.to_string().contains("not enabled"), "{err}");
}

#[tokio::test]
async fn each_file_is_described_as_an_iceberg_data_file() {
    let case = cases().into_iter().find(|c| c.name == "v2_base_offset").unwrap();
    let out = tempfile::tempdir().unwrap();
    let config = FloeConfig::default();
    let topic = config.resolve("floe-test.events").unwrap();
    let formats = floe_core::formats::Formats::load(&config, &topic, None).await.unwrap();
    let done = support::materialize(&config, "floe-test.events", &case.log, out.path()).await.unwrap();
    assert_eq!(done.files.len(), 1);
    let file = &done.files[0];
    let df = &file.data_file;
    assert_eq!(df.record_count(), 5);
    assert_eq!(df.file_size_in_bytes(), std::fs::metadata(file.path()).unwrap().len());
    // `_kafka.offset` is field 3: its bounds are the file's offsets.
    let offset_id = 3;
    let offset_field = formats.schema.field_by_id(offset_id).unwrap();
    assert_eq!(offset_field.name, "offset");
    assert_eq!(df.lower_bounds()[&offset_id], iceberg::spec::Datum::long(1_000_000));
    assert_eq!(df.upper_bounds()[&offset_id], iceberg::spec::Datum::long(1_000_004));
    assert_eq!(df.value_counts()[&offset_id], 5);
    assert_eq!(df.null_value_counts()[&offset_id], 0);
    assert!(df.column_sizes().contains_key(&offset_id));
    assert_eq!((file.first_offset, file.last_offset), (1_000_000, 1_000_004));
    let json = file.data_file_json(&iceberg::spec::StructType::new(vec![])).unwrap();
    assert_eq!(json["record_count"], 5);
    assert_eq!(json["file_format"], "PARQUET");
    assert_eq!(json["file_path"].as_str().unwrap(), file.path());
    assert!(json["lower_bounds"].as_array().unwrap().iter().any(|b| b["key"] == offset_id));
}

/// A decoder with a bug: it panics on every payload.
struct Panics;

#[async_trait::async_trait]
impl floe_core::columns::PayloadDecoder for Panics {
    fn append(
        &self,
        _: floe_core::columns::Payload<'_>,
        _: &mut floe_core::columns::Column,
    ) -> Result<(), floe_core::columns::DecodeError> {
        panic!("a decoder bug, on purpose")
    }
}

#[tokio::test]
async fn a_panic_while_converting_is_an_error_naming_the_segment_not_a_crash() {
    use floe_core::materializer::segment::{MaterializeError, MaterializeOptions, materialize_segment};
    use floe_core::segment::{FileSource, Limits, SegmentReader};
    use std::sync::Arc;

    let config = FloeConfig::parse("[defaults]\nenabled = true\n").unwrap();
    let topic = config.resolve("orders").unwrap();
    let formats = floe_core::formats::Formats::load(&config, &topic, None).await.unwrap();
    let segment = support::protobuf_data().join("orders-0/00000000000000000000.log");
    let reader = SegmentReader::open(Arc::new(FileSource::new(&segment)), Limits::default()).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let options = MaterializeOptions {
        topic,
        partition: 0,
        data_dir: out.path().join("data").display().to_string(),
        dead_letter_dir: out.path().join("dead_letter").display().to_string(),
        source_id: "test".into(),
        partition_spec: Arc::new(iceberg::spec::PartitionSpec::unpartition_spec()),
        pages: floe_core::datafile::Pages::Zstd,
    };
    let file_io = iceberg::io::FileIO::new_with_fs();
    let (key, value) = (Arc::new(Panics), Arc::new(Panics));
    let e = materialize_segment(reader, formats.schema, key, value, &options, &file_io).await.unwrap_err();
    assert!(matches!(e, MaterializeError::Internal { .. }) && !e.retryable(), "{e:?}");
    let message = e.to_string();
    assert!(
        message.contains(&segment.display().to_string()) && message.contains("a decoder bug, on purpose"),
        "{message}"
    );
}

/// The payload fuzz target's inputs through its harness: no panic, errors within their
/// payloads, every batch a valid Arrow array. The seeds (`fuzz/seeds/decode_payload`,
/// written by `tests/py/make_fuzz_seeds.py`) are valid and must all decode; the corpus
/// (`fuzz/corpus/decode_payload`) holds what fuzzing found.
#[test]
fn payload_fuzz_seeds_decode_and_corpus_replays_into_valid_batches() {
    let root = support::root();
    let harness = floe_core::fuzz::PayloadHarness::new(&root.join("fuzz/schemas")).unwrap();
    let seeds = floe_core::fuzz::replay(&harness, &root.join("fuzz/seeds/decode_payload")).unwrap();
    // 6 values of each of the 4 formats: each alone, and all 6 in one input.
    assert_eq!(seeds, (28, 48), "(seed inputs, records decoded)");
    let (inputs, _) = floe_core::fuzz::replay(&harness, &root.join("fuzz/corpus/decode_payload")).unwrap();
    assert!(inputs >= 1000, "corpus has only {inputs} inputs");
}

//! `floe convert`: the materializer's core run by hand — a segment to Parquet files in a
//! directory, one JSON line per file.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use floe_core::config::FloeConfig;
use floe_core::materializer::segment::{MaterializeError, Materialized, materialize_segment, source_id};
use floe_core::materializer::{Destination, MaterializerError, Prepared, prepare_segment};
use floe_core::segment::{FileSource, Limits, SegmentReader};
use serde::Serialize;

#[derive(Serialize)]
struct FileLine<'a> {
    path: &'a str,
    record_count: u64,
    first_offset: i64,
    last_offset: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dead_letter: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pending_producer_id: Option<i64>,
}

/// Runs the materializer's core on `segment` into `out_dir` and prints one JSON line per
/// file written to `out`.
pub async fn run(
    segment: &Path,
    topic: &str,
    partition: i32,
    out_dir: &Path,
    config: &FloeConfig,
    out: impl Write,
) -> anyhow::Result<()> {
    let done = materialize(segment, topic, partition, out_dir, config).await?;
    let mut out = std::io::BufWriter::new(out);
    let files = done.files.iter().map(|f| (f, None, None));
    let dead = done.dead_letter_files.iter().map(|f| (f, Some(true), None));
    let pending = done.open_parts.iter().flat_map(|(pid, part)| {
        let dead = part.dead_letter_files.iter().map(move |f| (f, Some(true), Some(*pid)));
        part.files.iter().map(move |f| (f, None, Some(*pid))).chain(dead)
    });
    for (f, dead_letter, pending_producer_id) in files.chain(dead).chain(pending) {
        let line = FileLine {
            path: f.path(),
            record_count: f.record_count(),
            first_offset: f.first_offset,
            last_offset: f.last_offset,
            dead_letter,
            pending_producer_id,
        };
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    tracing::info!(records = done.records, skipped = done.skipped, dead_letters = done.dead_letters, "converted");
    Ok(())
}

/// The materializer's core on one local segment of `topic`'s `partition`, with the
/// configured formats (plain JSON's types inferred from the segment first): data files
/// under `out_dir/data`, dead letters under `out_dir/dead_letter`.
pub async fn materialize(
    segment: &Path,
    topic: &str,
    partition: i32,
    out_dir: &Path,
    config: &FloeConfig,
) -> anyhow::Result<Materialized> {
    if let Some(why) = floe_core::config::topic_name_error(topic) {
        anyhow::bail!("--topic: {why}");
    }
    anyhow::ensure!(partition >= 0, "--partition: {partition}: a partition number is 0 or more");
    crate::regular_file("segment", segment)?;
    let topic_config =
        config.resolve(topic).with_context(|| format!("topic {topic:?} is not enabled by the configuration"))?;
    let registry = floe_core::formats::http_registry(config)?;
    let out_dir = crate::warehouse::folder("--out", out_dir, true)?;
    let meta = std::fs::metadata(segment).with_context(|| format!("{}", segment.display()))?;
    let destination = Destination {
        table: topic.to_string(),
        partition,
        data_dir: out_dir.join("data").display().to_string(),
        dead_letter_dir: out_dir.join("dead_letter").display().to_string(),
        source_id: source_id(&segment.display().to_string(), &meta.len().to_string()),
    };
    let open = async || -> Result<SegmentReader, MaterializerError> {
        let reader = SegmentReader::open(Arc::new(FileSource::new(segment)), Limits::default()).await;
        reader.map_err(|e| MaterializeError::Segment(e).into())
    };
    let Prepared { formats, options } =
        prepare_segment(config, &topic_config, registry, None, destination, open).await?;
    let reader = SegmentReader::open(Arc::new(FileSource::new(segment)), Limits::default()).await?;
    let file_io = iceberg::io::FileIO::new_with_fs();
    Ok(materialize_segment(reader, formats.schema, formats.key, formats.value, &options, &file_io).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bad_arguments_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let segment =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/segments/orders-1/00000000000000000000.log");
        let config = FloeConfig::default();
        let error = |segment: &Path, topic: &str, partition: i32, out: &Path| {
            let (segment, topic, out, config) = (segment.to_path_buf(), topic.to_string(), out.to_path_buf(), &config);
            async move { materialize(&segment, &topic, partition, &out, config).await.map(drop).unwrap_err().to_string() }
        };
        let out = dir.path().join("out");
        let e = error(&segment, "../x", 0, &out).await;
        assert_eq!(e, "--topic: \"../x\" is not a Kafka topic name: it holds '/' (use [a-zA-Z0-9._-])");
        assert!(error(&segment, "..", 0, &out).await.starts_with("--topic: \"..\" is not a Kafka topic name"));
        assert_eq!(error(&segment, "orders", -7, &out).await, "--partition: -7: a partition number is 0 or more");
        #[cfg(unix)]
        assert!(
            error(Path::new("/dev/zero"), "orders", 0, &out)
                .await
                .ends_with("not a regular file (a device, FIFO or socket has no known end)")
        );
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(error(&segment, "orders", 0, &file).await, format!("--out {}: not a folder", file.display()));
        assert!(!out.exists(), "nothing written for bad arguments");
        materialize(&segment, "orders", 1, &out, &config).await.unwrap();
    }
}

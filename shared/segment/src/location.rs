//! Topic, partition and base offset from the key (or path) of a segment object.
//!
//! Layouts understood:
//!
//! | layout | key |
//! |---|---|
//! | broker log dir | `…/<topic>-<partition>/<offset:020>.log` |
//! | tiered storage (Aiven plugin) | `<prefix><topic>-<topicId>/<partition>/<offset:020>-<segmentId>.log` |
//! | Kafka `LocalTieredStorage` | `…/<topic>-<partition>-<topicId>/<offset:020>-<segmentId>.log` |
//!
//! Topic names may contain `-` and `.`; topic and segment ids are Kafka `Uuid`s printed as
//! 22 characters of URL-safe base64 (which may contain `-` too), so they are split off by
//! length, not by the last `-`. The prefix of the tiered layout is taken to end in `/`.

/// Which layout a key follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentLayout {
    BrokerLogDir,
    TieredStorage,
    LocalTieredStorage,
}

/// What the object is, from its extension.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// The record data.
    Log,
    /// The broker's transaction index (`.txnindex`).
    TxnIndex,
    /// The Aiven plugin's blob of all indexes (`.indexes`).
    Indexes,
    /// The Aiven plugin's manifest (`.rsm-manifest`), uploaded last.
    Manifest,
    /// Another index or checkpoint file (`.index`, `.timeindex`, `.snapshot`, …).
    Other(String),
}

/// Where a segment object belongs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SegmentLocation {
    pub layout: SegmentLayout,
    /// Everything before the topic directory (tiered storage prefix or log dir path).
    pub prefix: String,
    pub topic: String,
    pub partition: i32,
    pub base_offset: i64,
    pub topic_id: Option<String>,
    pub segment_id: Option<String>,
    pub kind: ObjectKind,
}

const UUID_LEN: usize = 22;
const OFFSET_LEN: usize = 20;

impl SegmentLocation {
    /// Parses an object key or file path; `None` when it follows no known layout.
    pub fn parse(key: &str) -> Option<SegmentLocation> {
        Self::parse_with(key, valid_topic)
    }

    /// Why a key that follows a known layout is no segment of a topic: its topic folder
    /// is no Kafka topic name (`"bad topic" is not a Kafka topic name: it holds ' ' …`).
    /// `None` when the key is a segment's, or follows no layout at all.
    pub fn invalid_topic(key: &str) -> Option<String> {
        if Self::parse(key).is_some() {
            return None;
        }
        let location = Self::parse_with(key, |t| Some(t.to_string()))?;
        topic_name_error(&location.topic)
    }

    fn parse_with(key: &str, valid_topic: fn(&str) -> Option<String>) -> Option<SegmentLocation> {
        let (dirs, file) = key.rsplit_once('/').map_or(("", key), |(d, f)| (d, f));
        let (stem, ext) = split_extension(file)?;
        let kind = match ext {
            "log" => ObjectKind::Log,
            "txnindex" => ObjectKind::TxnIndex,
            "indexes" => ObjectKind::Indexes,
            "rsm-manifest" => ObjectKind::Manifest,
            other => ObjectKind::Other(other.to_string()),
        };
        let base_offset = parse_offset(stem.get(..OFFSET_LEN)?)?;
        let (parent_path, parent) = dirs.rsplit_once('/').map_or(("", dirs), |(p, d)| (p, d));
        let with_slash = |p: &str| {
            if p.is_empty() { String::new() } else { format!("{p}/") }
        };

        if stem.len() == OFFSET_LEN {
            let (topic, partition) = parent.rsplit_once('-')?;
            return Some(SegmentLocation {
                layout: SegmentLayout::BrokerLogDir,
                prefix: with_slash(parent_path),
                topic: valid_topic(topic)?,
                partition: parse_partition(partition)?,
                base_offset,
                topic_id: None,
                segment_id: None,
                kind,
            });
        }
        let segment_id = stem.get(OFFSET_LEN..)?.strip_prefix('-').filter(|id| is_uuid(id))?;
        if let Some(partition) = parse_partition(parent) {
            // Aiven: <prefix><topic>-<topicId>/<partition>/<file>
            let (prefix, topic_dir) = parent_path.rsplit_once('/').map_or(("", parent_path), |(p, d)| (p, d));
            let (topic, topic_id) = split_uuid_suffix(topic_dir)?;
            return Some(SegmentLocation {
                layout: SegmentLayout::TieredStorage,
                prefix: with_slash(prefix),
                topic: valid_topic(topic)?,
                partition,
                base_offset,
                topic_id: Some(topic_id.to_string()),
                segment_id: Some(segment_id.to_string()),
                kind,
            });
        }
        // LocalTieredStorage: <root>/<topic>-<partition>-<topicId>/<file>
        let (topic_partition, topic_id) = split_uuid_suffix(parent)?;
        let (topic, partition) = topic_partition.rsplit_once('-')?;
        Some(SegmentLocation {
            layout: SegmentLayout::LocalTieredStorage,
            prefix: with_slash(parent_path),
            topic: valid_topic(topic)?,
            partition: parse_partition(partition)?,
            base_offset,
            topic_id: Some(topic_id.to_string()),
            segment_id: Some(segment_id.to_string()),
            kind,
        })
    }
}

/// `00000000000000000042-abc.rsm-manifest` → (`…-abc`, `rsm-manifest`).
fn split_extension(file: &str) -> Option<(&str, &str)> {
    if let Some(stem) = file.strip_suffix(".rsm-manifest") {
        return Some((stem, "rsm-manifest"));
    }
    file.rsplit_once('.')
}

fn parse_offset(digits: &str) -> Option<i64> {
    if digits.len() == OFFSET_LEN && digits.bytes().all(|b| b.is_ascii_digit()) { digits.parse().ok() } else { None }
}

fn parse_partition(s: &str) -> Option<i32> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) { s.parse().ok() } else { None }
}

fn is_uuid(s: &str) -> bool {
    s.len() == UUID_LEN && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `name-<22-char uuid>` → (`name`, uuid).
fn split_uuid_suffix(s: &str) -> Option<(&str, &str)> {
    let split = s.len().checked_sub(UUID_LEN + 1)?;
    let (name, rest) = s.split_at_checked(split)?;
    let id = rest.strip_prefix('-')?;
    is_uuid(id).then_some((name, id))
}

/// Kafka topic names: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
fn valid_topic(topic: &str) -> Option<String> {
    topic_name_error(topic).is_none().then(|| topic.to_string())
}

/// Kafka's limit on topic names.
pub const MAX_TOPIC_LEN: usize = 249;

/// Why `name` is not a Kafka topic name (1 to 249 characters of `[a-zA-Z0-9._-]`, not
/// `.` or `..`), or `None` when it is one.
pub fn topic_name_error(name: &str) -> Option<String> {
    let why = if name.is_empty() {
        "it is empty".to_string()
    } else if name == "." || name == ".." {
        "`.` and `..` are not topic names".to_string()
    } else if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        format!("it holds {c:?} (use [a-zA-Z0-9._-])")
    } else if name.len() > MAX_TOPIC_LEN {
        format!("{} characters, more than {MAX_TOPIC_LEN}", name.len())
    } else {
        return None;
    };
    Some(format!("{name:?} is not a Kafka topic name: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_log_dir() {
        let loc = SegmentLocation::parse("/var/kafka-logs/orders.v1-eu-12/00000000000000001234.log").unwrap();
        assert_eq!(loc.layout, SegmentLayout::BrokerLogDir);
        assert_eq!(loc.topic, "orders.v1-eu");
        assert_eq!(loc.partition, 12);
        assert_eq!(loc.base_offset, 1234);
        assert_eq!(loc.kind, ObjectKind::Log);
        assert_eq!(loc.prefix, "/var/kafka-logs/");
        let idx = SegmentLocation::parse("t-0/00000000000000000000.txnindex").unwrap();
        assert_eq!(idx.kind, ObjectKind::TxnIndex);
        assert_eq!(idx.topic, "t");
        assert_eq!(idx.prefix, "");
    }

    #[test]
    fn tiered_storage_with_dashes_in_topic_and_ids() {
        let key = "tiered/prod/pay-ments.v2-Ab3-efGhIjKlMnOpQrStUv/7/00000000000000004096-zz_-_abcdefghijklmnopq.rsm-manifest";
        let loc = SegmentLocation::parse(key).unwrap();
        assert_eq!(loc.layout, SegmentLayout::TieredStorage);
        assert_eq!(loc.prefix, "tiered/prod/");
        assert_eq!(loc.topic, "pay-ments.v2");
        assert_eq!(loc.topic_id.as_deref(), Some("Ab3-efGhIjKlMnOpQrStUv"));
        assert_eq!(loc.partition, 7);
        assert_eq!(loc.base_offset, 4096);
        assert_eq!(loc.segment_id.as_deref(), Some("zz_-_abcdefghijklmnopq"));
        assert_eq!(loc.kind, ObjectKind::Manifest);
        let no_prefix = "orders-Ab3defGhIjKlMnOpQrStUv/0/00000000000000000000-zz_-_abcdefghijklmnopq.log";
        let loc = SegmentLocation::parse(no_prefix).unwrap();
        assert_eq!((loc.prefix.as_str(), loc.topic.as_str(), loc.kind), ("", "orders", ObjectKind::Log));
    }

    #[test]
    fn local_tiered_storage() {
        let key = "/tmp/kafka-remote/orders-3-Ab3defGhIjKlMnOpQrStUv/00000000000000000010-zz_-_abcdefghijklmnopq.log";
        let loc = SegmentLocation::parse(key).unwrap();
        assert_eq!(loc.layout, SegmentLayout::LocalTieredStorage);
        assert_eq!((loc.topic.as_str(), loc.partition, loc.base_offset), ("orders", 3, 10));
    }

    #[test]
    fn not_segments() {
        for key in [
            "",
            "README.md",
            "t-0/123.log",
            "t-x/00000000000000000000.log",
            "no-partition/00000000000000000000.log",
            "t/0/00000000000000000000-short.log",
            "bad topic-0/00000000000000000000.log",
        ] {
            assert_eq!(SegmentLocation::parse(key), None, "{key}");
        }
    }

    #[test]
    fn invalid_topic_folders_say_why() {
        for (key, why) in [
            ("bad topic-0/00000000000000000000.log", "holds ' '"),
            ("commandes-été-0/00000000000000000000.log", "holds 'é'"),
            ("..-0/00000000000000000000.log", "`.` and `..`"),
            (
                "a b-Ab3defGhIjKlMnOpQrStUv/0/00000000000000000000-zz_-_abcdefghijklmnopq.rsm-manifest",
                "\"a b\" is not a Kafka topic name",
            ),
        ] {
            assert_eq!(SegmentLocation::parse(key), None, "{key}");
            let got = SegmentLocation::invalid_topic(key).unwrap_or_default();
            assert!(got.contains(why), "{key}: {got}");
        }
        assert_eq!(SegmentLocation::invalid_topic("t-0/00000000000000000000.log"), None);
        assert_eq!(SegmentLocation::invalid_topic("README.md"), None);
        assert_eq!(
            SegmentLocation::invalid_topic(&format!("{}-0/00000000000000000000.log", "x".repeat(250)))
                .map(|w| w.contains("250 characters")),
            Some(true)
        );
    }
}

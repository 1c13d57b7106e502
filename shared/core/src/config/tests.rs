//! The unit tests of `floe.toml` as a whole (each section's own are beside it).

use super::url::leaves_the_machine;
use super::*;

#[test]
fn on_s3_tables_floe_leaves_compaction_and_the_sweep_to_it_unless_turned_on() {
    let arn = "arn:aws:s3tables:us-east-1:123456789012:bucket/floe";
    let glue = FloeConfig::parse("").unwrap().own_maintenance();
    assert_eq!((glue.compaction, glue.orphan_sweep, glue.left_out()), (true, true, None));
    let s3tables = FloeConfig::parse(&format!("[catalog]\ntype = \"s3tables\"\ntable_bucket_arn = \"{arn}\"\n"));
    let own = s3tables.unwrap().own_maintenance();
    assert_eq!((own.compaction, own.orphan_sweep), (false, false));
    assert_eq!(own.left_out().unwrap(), "compaction and orphan sweep left to S3 Tables, which does it itself");
    let text = format!("[catalog]\ntype = \"s3tables\"\ntable_bucket_arn = \"{arn}\"\ncompaction = true\n");
    let own = FloeConfig::parse(&text).unwrap().own_maintenance();
    assert_eq!((own.compaction, own.orphan_sweep), (true, false));
    assert_eq!(own.left_out().unwrap(), "orphan sweep left to S3 Tables, which does it itself");
}

#[test]
fn the_configured_tables_are_those_of_exact_topic_entries() {
    let text = "[[topics]]\ntopic = \"orders\"\nnamespace = \"sales\"\n[[topics]]\npattern = \"audit\\\\..*\"\n";
    let tables = FloeConfig::parse(text).unwrap().configured_tables();
    let orders = TableName { namespace: "sales".into(), name: "orders".into() };
    assert_eq!(tables, vec![orders]);
}

const EXAMPLE: &str = r#"
    [defaults]
    namespace = "raw_kafka"
    target_file_size = "64MiB"
    compaction_window = "5m"

    [schema_registry]
    url = "http://127.0.0.1:8081"
    username = "floe"
    password_env = "SR_PASSWORD"

    [[topics]]
    topic = "orders"
    namespace = "sales"
    value_format = "avro"
    partition_by = ["day(timestamp)", "bucket(16, key)"]
    compaction_target_size = "256MiB"
    orphan_grace = "7d"
    transaction_timeout = "1h"
    retention = "30d"
    retention_column = "event.at"

    [[topics]]
    pattern = "audit\\..*"
    value_format = "json-schema"
    value_schema = { file = "schemas/audit.json" }
    bad_records = "dlq"
"#;

#[test]
fn resolves_exact_then_pattern_then_defaults() {
    let c = FloeConfig::parse(EXAMPLE).unwrap();
    let orders = c.resolve("orders").unwrap();
    assert_eq!((orders.namespace.as_str(), orders.table.as_str()), ("sales", "orders"));
    assert_eq!(orders.value_format, Format::Avro);
    assert_eq!(orders.key_format, Format::Raw);
    assert_eq!(orders.target_file_size, 64 << 20);
    assert_eq!((orders.compaction_target_size, orders.compaction_window_ms), (256 << 20, 5 * 60 * 1000));
    assert_eq!(orders.orphan_grace_ms, 7 * 24 * 60 * 60 * 1000);
    assert_eq!(orders.transaction_timeout_ms, 60 * 60 * 1000);
    assert_eq!((orders.retention_ms, orders.retention_column.as_str()), (Some(30 * 24 * 60 * 60 * 1000), "event.at"));
    assert_eq!(orders.partition_by[1], PartitionField { source: "key".into(), transform: Transform::Bucket(16) });
    let audit = c.resolve("audit.logins-eu").unwrap();
    assert_eq!(audit.table, "audit_logins_eu");
    assert_eq!(audit.namespace, "raw_kafka");
    assert_eq!(audit.bad_records, BadRecordMode::Dlq);
    assert_eq!((audit.compaction_target_size, audit.compaction_window_ms), (128 << 20, 5 * 60 * 1000));
    assert_eq!(audit.value_schema, SchemaSource::File("schemas/audit.json".into()));
    assert_eq!(audit.orphan_grace_ms, 3 * 24 * 60 * 60 * 1000, "the default: 3 days");
    assert_eq!(audit.transaction_timeout_ms, 15 * 60 * 1000, "the default: Kafka's 15 minutes");
    assert_eq!((audit.retention_ms, audit.retention_column.as_str()), (None, "_kafka.timestamp"), "rows kept for good");
    assert_eq!(c.resolve("audit"), None, "pattern must match the whole name");
    assert_eq!(c.resolve("payments"), None, "unmatched topics are ignored unless enabled");
    assert!(format!("{:?}", c.schema_registry).contains("<set>"));
    assert!(!format!("{:?}", c.schema_registry).contains("\"floe\""));
}

#[test]
fn default_config_takes_every_topic_raw() {
    let t = FloeConfig::default().resolve("Orders.V2-eu").unwrap();
    assert_eq!((t.namespace.as_str(), t.table.as_str()), ("kafka", "orders_v2_eu"));
    assert_eq!((t.key_format, t.value_format, t.bad_records), (Format::Raw, Format::Raw, BadRecordMode::Suspend));
    assert_eq!((t.compaction_target_size, t.compaction_window_ms), (128 << 20, 15 * 60 * 1000));
    assert_eq!(table_name_for("42-things"), "t_42_things");
}

#[test]
fn partition_by_is_checked_against_what_is_known_at_start_up() {
    let error = |text: &str| FloeConfig::parse(text).unwrap_err().to_string();
    // `_kafka` columns are known whatever the format.
    let e = error(
        "[[topics]]\ntopic = \"a\"\nvalue_format = \"avro\"\npartition_by = [\"region\", \"day(_kafka.timestamp_type)\"]",
    );
    assert!(e.starts_with("topics[0].partition_by[1]: day does not apply to `_kafka.timestamp_type`"), "{e}");
    let e = error("[[topics]]\ntopic = \"a\"\nvalue_format = \"json\"\npartition_by = [\"hour(_kafka.time)\"]");
    assert!(e.starts_with("topics[0].partition_by[0]: no column `_kafka.time`"), "{e}");
    // A raw topic has nothing but `_kafka`, `key` and `value`.
    let e = error("[[topics]]\ntopic = \"a\"\npartition_by = [\"identity(region)\"]");
    assert!(e.starts_with("topics[0].partition_by[0]: no column `region`"), "{e}");
    // …and its binary key, which can be bucketed but not truncated (iceberg-rust 0.10.1).
    let e = error("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(16, key)\", \"truncate(4, key)\"]");
    assert!(e.starts_with("topics[0].partition_by[1]: truncate[4] of `key` cannot be computed"), "{e}");
    // Inherited from the defaults: named there.
    let e = error(
        "[defaults]\npartition_by = [\"region\"]\nvalue_format = \"avro\"\n[[topics]]\ntopic = \"a\"\nvalue_format = \"raw\"",
    );
    assert!(e.starts_with("defaults.partition_by[0]: no column `region`"), "{e}");

    let c = FloeConfig::parse(
        "[defaults]\nenabled = true\npartition_by = [\"day(_kafka.timestamp)\"]\n\
         [[topics]]\ntopic = \"a\"\nvalue_format = \"avro\"\npartition_by = [\"bucket(16, id)\", \"region\"]",
    )
    .unwrap();
    let a = c.resolve("a").unwrap();
    assert_eq!(a.partition_by_field, "topics[0].partition_by");
    assert_eq!(a.partition_by[1], PartitionField { source: "region".into(), transform: Transform::Identity });
    let other = c.resolve("b").unwrap();
    assert_eq!(other.partition_by_field, "defaults.partition_by");
    assert_eq!(
        other.partition_by,
        vec![PartitionField { source: "_kafka.timestamp".into(), transform: Transform::Day }]
    );
}

#[test]
fn errors_name_the_field() {
    for (text, field) in [
        ("[[topics]]\ntopic = \"a\"\nvalue_format = \"avroo\"", "value_format"),
        ("[[topics]]\ntopic = \"a\"\npattern = \"b\"", "topics[0]"),
        ("[[topics]]\npattern = \"(\"", "topics[0].pattern"),
        ("[[topics]]\ntopic = \"a\"\nnamespace = \"Bad-NS\"", "topics[0].namespace"),
        ("[defaults]\ntarget_file_size = \"12XB\"", "target_file_size"),
        ("[defaults]\ntarget_file_size = 10", "defaults.target_file_size"),
        ("[[topics]]\ntopic = \"a\"\ntarget_file_size = \"5GiB\"", "topics[0].target_file_size"),
        ("[[topics]]\ntopic = \"a\"\ncompaction_target_size = \"5GiB\"", "topics[0].compaction_target_size"),
        ("[defaults]\ncompaction_target_size = \"1KiB\"", "defaults.compaction_target_size"),
        ("[defaults]\ncompaction_window = \"15x\"", "compaction_window"),
        ("[defaults]\ncompaction_window = 900", "compaction_window"),
        ("[[topics]]\ntopic = \"a\"\ncompaction_window = \"25h\"", "topics[0].compaction_window"),
        ("[[topics]]\ntopic = \"a\"\norphan_grace = \"59m\"", "topics[0].orphan_grace"),
        ("[defaults]\norphan_grace = \"3w\"", "orphan_grace"),
        ("[[topics]]\ntopic = \"a\"\ntransaction_timeout = \"500ms\"", "topics[0].transaction_timeout"),
        ("[[topics]]\ntopic = \"a\"\nretention = \"59m\"", "topics[0].retention"),
        ("[defaults]\nretention_column = \"a..b\"", "retention_column"),
        ("[[topics]]\ntopic = \"a\"\npartition_by = [\"week(ts)\"]", "topics[0].partition_by[0]"),
        ("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(0, ts)\"]", "topics[0].partition_by[0]"),
        ("[[topics]]\ntopic = \"a\"\ntable = \"9x\"", "topics[0].table"),
        ("[[topics]]\ntopic = \"a\"\nvalue_schema = { file = \"x\" }", "topics[0].value_schema"),
        ("[schema_registry]\nurl = \"ftp://x\"", "schema_registry.url"),
        ("[schema_registry]\nurl = \"https://u:secret@sr.example.com/x\"", "schema_registry.url"),
        ("[defaults]\nnamespce = \"x\"", "namespce"),
    ] {
        let err = FloeConfig::parse(text).unwrap_err().to_string();
        assert!(err.contains(field), "{text:?} → {err}");
        assert!(!err.contains("secret"), "{err}");
    }
    assert!(!url_has_credentials("https://sr.example.com:8081/path@x?q=a@b"));
    // A schema file that is not there: at start-up, naming the field.
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("floe.toml");
    let text = "[[topics]]\ntopic = \"a\"\nvalue_format = \"avro\"\nvalue_schema = { file = \"/no/such.avsc\" }\n";
    std::fs::write(&toml, text).unwrap();
    let err = FloeConfig::from_file(&toml).unwrap_err().to_string();
    assert!(err.starts_with("topics[0].value_schema: /no/such.avsc: No such file"), "{err}");
    std::fs::write(&toml, text.replace("/no/such.avsc", &toml.display().to_string())).unwrap();
    FloeConfig::from_file(&toml).unwrap();
    assert!(url_has_credentials("http://user@sr"));
    // docs/configuration.md's example, word for word.
    let err = FloeConfig::parse("[[topics]]\ntopic = \"a\"\n[[topics]]\ntopic = \"b\"\nvalue_format = \"avroo\"");
    assert!(err.unwrap_err().to_string().contains("topics[1].value_format: unknown variant `avroo`"));
}

#[test]
fn entries_sharing_a_table_are_refused_naming_both() {
    let error = |text: &str| FloeConfig::parse(text).unwrap_err().to_string();
    // Names folding to one table.
    let e = error("[[topics]]\ntopic = \"a.b\"\n[[topics]]\ntopic = \"A_B\"");
    assert!(
        e.starts_with(
            "topics[1].topic: topic \"A_B\" (topics[1]) and topic \"a.b\" (topics[0]) both map to table kafka.a_b"
        ),
        "{e}"
    );
    // The same `table`, explicitly (a pattern's too).
    let e = error("[[topics]]\ntopic = \"x\"\ntable = \"t\"\n[[topics]]\npattern = \"y.*\"\ntable = \"t\"");
    assert!(
        e.starts_with(
            "topics[1].table: pattern \"y.*\" (topics[1]) and topic \"x\" (topics[0]) both map to table kafka.t"
        ),
        "{e}"
    );
    // A topic named like another's dead-letter table, in either order.
    let e = error("[[topics]]\ntopic = \"orders\"\nbad_records = \"dlq\"\n[[topics]]\ntopic = \"orders_dlq\"");
    assert!(e.contains("topic \"orders_dlq\" (topics[1]) maps to table kafka.orders_dlq, the dead-letter table of topic \"orders\" (topics[0])"), "{e}");
    let e =
        error("[defaults]\nbad_records = \"dlq\"\n[[topics]]\ntopic = \"orders_dlq\"\n[[topics]]\ntopic = \"orders\"");
    assert!(e.starts_with("topics[1].topic: the dead-letter table of topic \"orders\" (topics[1]) (bad_records = \"dlq\") is kafka.orders_dlq, the table of topic \"orders_dlq\" (topics[0])"), "{e}");
    // One topic named twice.
    let e = error("[[topics]]\ntopic = \"a\"\n[[topics]]\ntopic = \"a\"\nnamespace = \"b\"");
    assert!(e.starts_with("topics[1].topic: topic \"a\" has an entry already: topics[0]"), "{e}");
    // Other namespaces, other modes, or patterns without a table: no clash.
    FloeConfig::parse("[[topics]]\ntopic = \"a.b\"\n[[topics]]\ntopic = \"a_b\"\nnamespace = \"other\"").unwrap();
    FloeConfig::parse("[[topics]]\ntopic = \"orders\"\n[[topics]]\ntopic = \"orders_dlq\"").unwrap();
    FloeConfig::parse("[[topics]]\ntopic = \"a.b\"\n[[topics]]\npattern = \"a.*\"").unwrap();
}

#[test]
fn topics_found_at_run_time_that_share_a_table_are_named() {
    let c = FloeConfig::parse(
        "[defaults]\nenabled = true\n[[topics]]\ntopic = \"orders\"\nbad_records = \"dlq\"\n\
         [[topics]]\npattern = \"audit\\\\..*\"\ntable = \"audit\"",
    )
    .unwrap();
    let clashes =
        c.check_table_claims(["a.b", "a_b", "orders", "orders_dlq", "payments", "audit.eu", "audit.us", "a.b"]);
    let text: Vec<String> = clashes.iter().map(|c| c.to_string()).collect();
    assert_eq!(clashes.len(), 3, "{text:#?}");
    assert!(text[0].starts_with("topic \"a_b\" and topic \"a.b\" both map to table kafka.a_b;"), "{}", text[0]);
    assert_eq!(clashes[0].topics(), ["a_b", "a.b"]);
    assert!(
        text[1].starts_with("topic \"audit.us\" and topic \"audit.eu\" both map to table kafka.audit;"),
        "{}",
        text[1]
    );
    assert!(
        text[2].starts_with(
            "topic \"orders_dlq\" maps to table kafka.orders_dlq, the dead-letter table of topic \"orders\""
        )
    );
    assert!(c.check_table_claims(["a.b", "orders", "payments", "audit.eu"]).is_empty());
    // Not enabled: claims nothing.
    let c = FloeConfig::parse("[[topics]]\ntopic = \"a.b\"").unwrap();
    assert!(c.check_table_claims(["a.b", "a_b"]).is_empty());
}

#[test]
fn names_beyond_glue_and_filesystem_limits_are_refused() {
    let error = |text: String| FloeConfig::parse(&text).unwrap_err().to_string();
    let long = "t".repeat(256);
    let e = error(format!("[[topics]]\ntopic = \"a\"\ntable = \"{long}\""));
    assert!(e.starts_with("topics[0].table: 256 characters, more than 255"), "{e}");
    // In dlq mode `_dlq` must fit too.
    let e = error(format!("[[topics]]\ntopic = \"a\"\nbad_records = \"dlq\"\ntable = \"{}\"", &long[..252]));
    assert!(e.starts_with("topics[0].table: 252 characters, more than 251"), "{e}");
    FloeConfig::parse(&format!("[[topics]]\ntopic = \"a\"\ntable = \"{}\"", &long[..255])).unwrap();
    let e = error(format!("[defaults]\nnamespace = \"{}\"", &long[..253]));
    assert!(e.starts_with("defaults.namespace: 253 characters, more than 252"), "{e}");
    let e = error(format!("[[topics]]\ntopic = \"{}\"", &long[..250]));
    assert!(e.starts_with("topics[0].topic: \"tttt"), "{e}");
    assert!(e.ends_with("is not a Kafka topic name: 250 characters, more than 249"), "{e}");
    for (topic, why) in
        [("..", "`.` and `..`"), (".", "`.` and `..`"), ("../x", "holds '/'"), ("", "empty"), ("été", "holds 'é'")]
    {
        let e = error(format!("[[topics]]\ntopic = \"{topic}\""));
        assert!(e.starts_with("topics[0].topic: ") && e.contains(why), "{topic}: {e}");
    }
    // bucket / truncate widths are 32-bit integers.
    for width in ["2147483648", "4294967296", "99999999999999999999"] {
        let e = error(format!("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket({width}, key)\"]"));
        assert!(e.starts_with("topics[0].partition_by[0]: "), "{e}");
    }
    let e = error("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(2147483648, key)\"]".into());
    assert!(e.contains("at most 2147483647"), "{e}");
    FloeConfig::parse("[[topics]]\ntopic = \"a\"\npartition_by = [\"bucket(2147483647, key)\"]").unwrap();
}

#[test]
fn registry_credentials_over_plain_http_need_allow_insecure_http() {
    let parse = |url: &str, extra: &str| {
        FloeConfig::parse(&format!("[schema_registry]\nurl = \"{url}\"\n{extra}")).map(|c| c.schema_registry.unwrap())
    };
    for auth in ["username = \"floe\"", "password_env = \"P\"", "secret_arn = \"arn:x\""] {
        let e = parse("http://sr.example.com:8081", auth).unwrap_err().to_string();
        assert!(e.starts_with("schema_registry.url: basic auth over http:// sends the password in clear text"), "{e}");
        assert!(e.contains("schema_registry.allow_insecure_http = true"), "{e}");
        let allowed = parse("http://sr.example.com:8081", &format!("{auth}\nallow_insecure_http = true")).unwrap();
        assert!(allowed.allow_insecure_http);
        parse("https://sr.example.com", auth).unwrap();
        // This machine: nothing crosses the network.
        for local in ["http://127.0.0.1:8081", "http://localhost/x", "http://[::1]:8081", "http://127.5.0.1"] {
            parse(local, auth).unwrap();
        }
    }
    parse("http://sr.example.com", "").unwrap();
    assert!(leaves_the_machine("http://localhost.example.com"));
    assert!(leaves_the_machine("http://10.0.0.1:8081"));
}

#[test]
fn upsert_topics_name_their_key_and_envelope_and_each_setting_is_checked() {
    let text = "[[topics]]\ntopic = \"c\"\nvalue_format = \"json\"\nmode = \"upsert\"\nenvelope = \"debezium\"\n\
                [[topics]]\ntopic = \"o\"\nvalue_format = \"json\"\nmode = \"upsert\"\nkey_columns = [\"id\", \"a.b\"]\n";
    let c = FloeConfig::parse(text).unwrap();
    let changes = c.resolve("c").unwrap();
    assert_eq!(
        (changes.mode, changes.envelope, changes.key_columns.len()),
        (Mode::Upsert, Some(Envelope::Debezium), 0)
    );
    let orders = c.resolve("o").unwrap();
    assert_eq!((orders.mode, orders.key_columns.as_slice()), (Mode::Upsert, &["id".to_string(), "a.b".into()][..]));
    assert_eq!(FloeConfig::default().resolve("x").unwrap().mode, Mode::Append);
    let error =
        |settings: &str| FloeConfig::parse(&format!("[[topics]]\ntopic = \"t\"\n{settings}")).unwrap_err().to_string();
    let e = error("key_columns = [\"id\"]\n");
    assert!(e.starts_with("topics[0].key_columns: a key is for mode = \"upsert\""), "{e}");
    let e = error("mode = \"upsert\"\nkey_columns = [\"a..b\"]\n");
    assert!(e.starts_with("topics[0].key_columns: [\"a..b\"]"), "{e}");
    let e = error("value_format = \"json\"\nenvelope = \"debezium\"\n");
    assert!(e.starts_with("topics[0].envelope: debezium change events"), "{e}");
    let e = error("mode = \"upsert\"\nvalue_format = \"protobuf\"\nenvelope = \"debezium\"\n");
    assert!(e.starts_with("topics[0].envelope: debezium envelopes are read from JSON or Avro values"), "{e}");
    let v3 = FloeConfig::parse("[[topics]]\ntopic = \"t\"\nmode = \"upsert\"\nformat_version = 3\n").unwrap();
    assert_eq!(v3.resolve("t").unwrap().format_version, iceberg::spec::FormatVersion::V3, "deletion vectors");
    let e = error("mode = \"merge\"\n");
    assert!(e.contains("merge"), "{e}");
}

#[test]
fn formats_are_iceberg_unless_delta_is_listed() {
    use crate::vocabulary::Formats;
    let c = FloeConfig::parse(
        "[defaults]\nformats = [\"iceberg\", \"delta\"]\n[[topics]]\ntopic = \"plain\"\nformats = [\"iceberg\"]\n",
    )
    .unwrap();
    assert_eq!(c.resolve("other"), None);
    assert_eq!(c.resolve("plain").unwrap().formats, Formats::default());
    let enabled = FloeConfig::parse("[defaults]\nenabled = true\nformats = [\"delta\", \"iceberg\"]\n").unwrap();
    assert_eq!(enabled.resolve("t").unwrap().formats, Formats::BOTH);
    assert_eq!(FloeConfig::default().resolve("t").unwrap().formats, Formats::default());
    let error =
        |settings: &str| FloeConfig::parse(&format!("[[topics]]\ntopic = \"t\"\n{settings}")).unwrap_err().to_string();
    let alone = FloeConfig::parse("[[topics]]\ntopic = \"t\"\nformats = [\"delta\"]\n").unwrap();
    assert!(!alone.resolve("t").unwrap().formats.iceberg() && alone.has_delta_only());
    assert!(!c.has_delta_only() && !enabled.has_delta_only());
    let by_default = FloeConfig::parse("[defaults]\nformats = [\"delta\"]\n[[topics]]\ntopic = \"t\"\n").unwrap();
    assert!(by_default.has_delta_only());
    let overridden =
        FloeConfig::parse("[defaults]\nformats = [\"delta\"]\n[[topics]]\ntopic = \"t\"\nformats = [\"iceberg\"]\n");
    assert!(overridden.unwrap().has_delta_only(), "other topics still take the defaults");
    let upsert = FloeConfig::parse("[[topics]]\ntopic = \"t\"\nformats = [\"delta\"]\nmode = \"upsert\"\n").unwrap();
    assert_eq!(upsert.resolve("t").unwrap().formats, alone.resolve("t").unwrap().formats, "deletion vectors");
    for (list, why) in [("[]", "no format"), ("[\"iceberg\", \"iceberg\"]", "listed twice"), ("[\"hudi\"]", "hudi")] {
        let e = error(&format!("formats = {list}\n"));
        assert!(e.contains(why), "{list}: {e}");
    }
}

#[test]
fn delta_is_refused_on_s3_tables_which_removes_unreferenced_files() {
    let catalog =
        "[catalog]\ntype = \"s3tables\"\ntable_bucket_arn = \"arn:aws:s3tables:us-east-1:123456789012:bucket/b\"\n";
    let e = FloeConfig::parse(&format!("{catalog}[[topics]]\ntopic = \"t\"\nformats = [\"iceberg\", \"delta\"]\n"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("topics[0].formats: S3 Tables removes the files"), "{e}");
    let e = FloeConfig::parse(&format!("[defaults]\nformats = [\"iceberg\", \"delta\"]\n{catalog}"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("defaults.formats: S3 Tables"), "{e}");
    assert!(FloeConfig::parse(&format!("{catalog}[[topics]]\ntopic = \"t\"\nformats = [\"iceberg\"]\n")).is_ok());
}

#[test]
fn delta_alone_is_refused_on_a_rest_catalog_which_assigns_table_storage() {
    let catalog = "[catalog]\ntype = \"rest\"\nuri = \"https://catalog.example.com\"\n";
    let e = FloeConfig::parse(&format!("{catalog}[[topics]]\ntopic = \"t\"\nformats = [\"delta\"]\n"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("topics[0].formats: [\"delta\"] alone keeps the table's Iceberg record"), "{e}");
    let both = format!("{catalog}[[topics]]\ntopic = \"t\"\nformats = [\"iceberg\", \"delta\"]\n");
    assert!(FloeConfig::parse(&both).is_ok());
    let sql = "[catalog]\ntype = \"sql\"\n[[topics]]\ntopic = \"t\"\nformats = [\"delta\"]\n";
    assert!(FloeConfig::parse(sql).is_ok());
}

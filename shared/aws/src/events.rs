//! The events that start the materializer, turned into the objects they name.
//!
//! - S3 event notifications (`Records[].s3`, several per event; keys URL-encoded, `+` for
//!   a space), as S3 invokes a function or as they arrive inside SQS messages;
//! - EventBridge "Object Created" events from S3 (`detail.bucket.name`,
//!   `detail.object.key`), which work with an existing tiered-storage bucket;
//! - `s3:TestEvent`, sent when a notification is configured: nothing to do.

use serde_json::Value;

use floe_core::materializer::ObjectRef;

/// What an event asks for.
#[derive(Debug, Default, PartialEq)]
pub struct EventObjects {
    pub objects: Vec<ObjectRef>,
    /// Parts of the event that name nothing to materialize, with the reason.
    pub ignored: Vec<String>,
}

/// Reads an event of any supported shape.
pub fn objects_in_event(event: &Value) -> Result<EventObjects, String> {
    let mut out = EventObjects::default();
    collect(event, &mut out)?;
    Ok(out)
}

fn collect(event: &Value, out: &mut EventObjects) -> Result<(), String> {
    if event.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        out.ignored.push("s3:TestEvent".to_string());
        return Ok(());
    }
    if event.get("detail-type").is_some() {
        return collect_eventbridge(event, out);
    }
    let Some(records) = event.get("Records").and_then(Value::as_array) else {
        return Err(format!("not an S3, SQS or EventBridge event: {}", preview(event)));
    };
    if records.iter().any(|r| r.get("eventSource").and_then(Value::as_str) == Some("aws:sqs")) {
        for record in records {
            let body = record.get("body").and_then(Value::as_str).unwrap_or_default();
            let inner: Value = serde_json::from_str(body).map_err(|e| format!("SQS message body is not JSON: {e}"))?;
            collect(&inner, out)?;
        }
        return Ok(());
    }
    for record in records {
        let (name, bucket, key) = s3_record(record)?;
        let key = url_decode(&key)?;
        if !name.starts_with("ObjectCreated:") {
            out.ignored.push(format!("s3://{bucket}/{key}: event {name}"));
            continue;
        }
        out.objects.push(ObjectRef::new(bucket, key));
    }
    Ok(())
}

/// (event name, bucket, URL-encoded key) of one S3 notification record: read as
/// `aws_lambda_events`' `S3EventRecord`, or, when a field that type
/// requires is absent (S3-compatible stores and emulators leave out `userIdentity` and
/// others), from the three fields Floe needs.
fn s3_record(record: &Value) -> Result<(String, String, String), String> {
    if let Ok(typed) = serde_json::from_value::<aws_lambda_events::event::s3::S3EventRecord>(record.clone())
        && let (Some(bucket), Some(key)) = (typed.s3.bucket.name, typed.s3.object.key)
    {
        return Ok((typed.event_name.unwrap_or_default(), bucket, key));
    }
    let text = |pointer: &str| record.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    match (text("/eventName"), text("/s3/bucket/name"), text("/s3/object/key")) {
        (Some(name), Some(bucket), Some(key)) => Ok((name, bucket, key)),
        _ => Err(format!("not an S3 event record: {}", preview(record))),
    }
}

fn collect_eventbridge(event: &Value, out: &mut EventObjects) -> Result<(), String> {
    let detail_type = event.get("detail-type").and_then(Value::as_str).unwrap_or_default();
    if detail_type != "Object Created" {
        out.ignored.push(format!("EventBridge event {detail_type:?}"));
        return Ok(());
    }
    let detail = event.get("detail").ok_or("EventBridge event without detail")?;
    let bucket = detail.pointer("/bucket/name").and_then(Value::as_str);
    let key = detail.pointer("/object/key").and_then(Value::as_str);
    let (Some(bucket), Some(key)) = (bucket, key) else {
        return Err(format!("EventBridge Object Created event without bucket or key: {}", preview(detail)));
    };
    // EventBridge URL-encodes keys like S3 notifications do.
    out.objects.push(ObjectRef::new(bucket, url_decode(key)?));
    Ok(())
}

fn preview(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// Decodes an S3 event key: `+` is a space, `%XX` a byte.
pub fn url_decode(key: &str) -> Result<String, String> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = key.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(hex.ok_or_else(|| format!("bad escape at byte {i} of key {key:?}"))?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| format!("key {key:?} does not decode to UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_keys() {
        assert_eq!(url_decode("a+b%2Fc%3D.log").unwrap(), "a b/c=.log");
        assert_eq!(url_decode("t%C3%B6pic").unwrap(), "töpic");
        assert!(url_decode("bad%2").is_err());
        assert!(url_decode("bad%zz").is_err());
    }

    #[test]
    fn test_events_and_other_event_names_are_ignored() {
        let test = serde_json::json!({"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-11-30T00:00:00Z",
            "Bucket":"b","RequestId":"r","HostId":"h"});
        let got = objects_in_event(&test).unwrap();
        assert!(got.objects.is_empty());
        assert_eq!(got.ignored, vec!["s3:TestEvent"]);
        assert!(objects_in_event(&serde_json::json!({"hello": 1})).is_err());
    }
}

#[cfg(test)]
mod event_files {
    //! The sample events in `events/` (also what `cargo lambda invoke --data-file` sends).
    use super::*;

    fn event(name: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events").join(name);
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn s3_notification_with_two_records() {
        let got = objects_in_event(&event("s3-object-created.json")).unwrap();
        assert_eq!(
            got.objects,
            vec![
                ObjectRef::new("kafka-tiered", "logs/orders-0/00000000000000000000.log"),
                ObjectRef::new("kafka-tiered", "logs/orders-1/00000000000000000000.log"),
            ]
        );
    }

    #[test]
    fn eventbridge_sqs_and_test_events() {
        let got = objects_in_event(&event("eventbridge-object-created.json")).unwrap();
        let manifest =
            "tiered/page.views-MWJ6FHTfRYy67jzwZdeqSQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ.rsm-manifest";
        assert_eq!(got.objects, vec![ObjectRef::new("kafka-tiered", manifest)]);
        let got = objects_in_event(&event("sqs-s3-notification.json")).unwrap();
        assert_eq!(got.objects, vec![ObjectRef::new("kafka-tiered", "logs/orders-0/00000000000000000100.log")]);
        let got = objects_in_event(&event("s3-test-event.json")).unwrap();
        assert!(got.objects.is_empty() && got.ignored == vec!["s3:TestEvent"]);
    }

    #[test]
    fn the_compactors_scheduled_event() {
        use aws_lambda_events::event::eventbridge::EventBridgeEvent;
        let scheduled: EventBridgeEvent<Value> = serde_json::from_value(event("eventbridge-scheduled.json")).unwrap();
        assert_eq!((scheduled.detail_type.as_str(), scheduled.source.as_str()), ("Scheduled Event", "aws.events"));
        assert!(scheduled.resources.unwrap()[0].starts_with("arn:aws:events:us-east-1:123456789012:rule/"));
        assert_eq!(scheduled.time.map(|t| t.timestamp()), Some(1_796_025_900));
        assert_eq!(scheduled.detail, serde_json::json!({}));
    }

    /// The function each sample is for: every file of `events/` is listed.
    #[derive(Debug, Clone, Copy)]
    enum Function {
        Materializer,
        Committer,
        Compactor,
    }

    const SAMPLES: [(&str, Function); 7] = [
        ("s3-object-created.json", Function::Materializer),
        ("eventbridge-object-created.json", Function::Materializer),
        ("sqs-s3-notification.json", Function::Materializer),
        ("s3-test-event.json", Function::Materializer),
        ("sqs-commit-tasks.json", Function::Committer),
        ("sqs-compaction-tasks.json", Function::Committer),
        ("eventbridge-scheduled.json", Function::Compactor),
    ];

    #[test]
    fn every_sample_event_parses_as_the_event_of_its_function() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events");
        let mut files: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        files.sort();
        let mut listed: Vec<String> = SAMPLES.iter().map(|(name, _)| name.to_string()).collect();
        listed.sort();
        assert_eq!(files, listed, "every file of events/ is listed here with its function");
        for (name, function) in SAMPLES {
            let sample = event(name);
            match function {
                // What the materializer's main hands its handler: any JSON, read as objects.
                Function::Materializer => {
                    let got = objects_in_event(&sample).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(!got.objects.is_empty() || !got.ignored.is_empty(), "{name}");
                }
                Function::Committer => committer_sample(name, sample),
                Function::Compactor => {
                    use aws_lambda_events::event::eventbridge::EventBridgeEvent;
                    serde_json::from_value::<EventBridgeEvent<Value>>(sample).unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
    }

    /// An SQS event as Lambda's event source hands the committer a batch of the task
    /// queue: every body a task, every message with its group (the table).
    fn committer_sample(name: &str, sample: Value) {
        use aws_lambda_events::event::sqs::SqsEvent;
        use floe_core::task::Task;
        let event: SqsEvent = serde_json::from_value(sample).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!event.records.is_empty(), "{name}");
        for message in &event.records {
            assert_eq!(message.event_source.as_deref(), Some("aws:sqs"), "{name}");
            assert!(message.receipt_handle.is_some() && message.message_id.is_some(), "{name}");
            let task = Task::from_json(message.body.as_deref().unwrap_or_default().as_bytes())
                .unwrap_or_else(|e| panic!("{name}: a body is no task: {e}"));
            assert_eq!(message.attributes.get("MessageGroupId"), Some(&task.table().to_string()), "{name}");
            let expected = match name {
                "sqs-compaction-tasks.json" => matches!(task, Task::Compaction(_)),
                _ => matches!(task, Task::Data(_)),
            };
            assert!(expected, "{name}: {task:?}");
        }
    }
}

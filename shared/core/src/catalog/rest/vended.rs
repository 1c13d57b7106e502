//! The storage credentials an Iceberg REST catalog vends with a table
//! (`X-Iceberg-Access-Delegation: vended-credentials`), as its `loadTable` answer states
//! them ([`VendedS3::from_load_result`]), and when they are due again ([`refresh_at_ms`]).
//! Where they go is the host's ([`StorageCredentials`]: on AWS, floe-aws `vended`, the
//! S3 client each path of the table's files is read and written with); the catalog
//! registers, the storage looks up, and asks the catalog to load the table again
//! ([`ReloadTable`]) when they are due.
//!
//! Refresh: a credential with an expiry (`s3.session-token-expires-at-ms` or
//! `expiration-time`, milliseconds since the epoch) is due at 80% of the life it had
//! when received ([`refresh_at_ms`]); one that S3 refuses (403) is due at once.

use std::sync::Weak;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::vocabulary::TableName;

/// The shortest time a credential is used before it is due again (one received
/// already expired is not reloaded for every request).
const MIN_USE_MS: i64 = 1_000;

/// S3 credentials and settings a catalog vended for the files under `prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendedS3 {
    pub prefix: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub path_style: Option<bool>,
    pub expires_at_ms: Option<i64>,
}

impl VendedS3 {
    /// The vended S3 credentials of a `LoadTableResult` (or a stage-create's answer) of
    /// a table at `location`: each `storage-credentials` entry of an S3 prefix holding S3 keys, its
    /// `config` over the table's `config`, for its prefix; else the table's `config`
    /// when it holds S3 keys, for the whole location. Empty: nothing vended.
    pub fn from_load_result(location: &str, answer: &Value) -> Vec<VendedS3> {
        let table = answer["config"].as_object().cloned().unwrap_or_default();
        let entries: Vec<VendedS3> = answer["storage-credentials"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                let prefix = entry["prefix"].as_str().filter(|p| is_s3(p))?;
                let mut config = table.clone();
                config.extend(entry["config"].as_object().cloned().unwrap_or_default());
                VendedS3::from_config(prefix, &config)
            })
            .collect();
        if !entries.is_empty() {
            return entries;
        }
        VendedS3::from_config(location, &table).into_iter().collect()
    }

    /// `None` unless `config` holds an access key id and a secret.
    fn from_config(prefix: &str, config: &Map<String, Value>) -> Option<VendedS3> {
        let text = |key: &str| match config.get(key)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        };
        let expires_at_ms = ["s3.session-token-expires-at-ms", "expiration-time"]
            .iter()
            .find_map(|key| text(key).and_then(|v| v.parse::<i64>().ok()));
        Some(VendedS3 {
            prefix: prefix.trim_end_matches('/').to_string(),
            access_key_id: text("s3.access-key-id")?,
            secret_access_key: text("s3.secret-access-key")?,
            session_token: text("s3.session-token"),
            endpoint: text("s3.endpoint"),
            region: text("s3.region").or_else(|| text("client.region")),
            path_style: text("s3.path-style-access").map(|v| v.eq_ignore_ascii_case("true")),
            expires_at_ms,
        })
    }

    /// Whether `path` is one of this credential's files.
    pub fn covers(&self, path: &str) -> bool {
        let (path, prefix) = (normal(path), normal(&self.prefix));
        path.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// The same place and settings: the client made for them is kept, with new keys.
    pub fn same_client(&self, other: &VendedS3) -> bool {
        (&self.prefix, &self.endpoint, &self.region, self.path_style)
            == (&other.prefix, &other.endpoint, &other.region, other.path_style)
    }
}

fn is_s3(path: &str) -> bool {
    normal(path).starts_with("s3://")
}

/// `s3a://` and `s3n://` are `s3://` (as tables may name their files either way).
fn normal(path: &str) -> String {
    for scheme in ["s3a://", "s3n://"] {
        if let Some(rest) = path.strip_prefix(scheme) {
            return format!("s3://{rest}");
        }
    }
    path.to_string()
}

/// When a credential received at `received_ms` is due for a reload: at 80% of its life
/// (as the catalog's OAuth2 token), at least a second after it came; `None` (never)
/// without an expiry.
pub fn refresh_at_ms(received_ms: i64, expires_at_ms: Option<i64>) -> Option<i64> {
    let life = expires_at_ms? - received_ms;
    Some(received_ms + (life / 5 * 4).max(MIN_USE_MS))
}

/// What reloads a table, registering its new vended credentials (the REST catalog).
#[async_trait]
pub trait ReloadTable: Send + Sync {
    async fn reload(&self, table: &TableName) -> Result<(), String>;
}

/// Where a REST catalog's vended credentials go: the host's storage, which signs each
/// path of a table's files with them.
pub trait StorageCredentials: Send + Sync {
    /// Replaces the vended credentials of `table` at `location` by `vended` (none: the
    /// host's own credentials again), received at `now_ms`; `reloader` loads the table
    /// again when one is due.
    fn register(
        &self,
        table: &TableName,
        location: &str,
        vended: Vec<VendedS3>,
        reloader: Weak<dyn ReloadTable>,
        now_ms: i64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LOCATION: &str = "s3://bucket/wh/kafka/orders";

    #[test]
    fn table_config_keys_cover_the_whole_location() {
        let answer = json!({"config": {
            "s3.access-key-id": "AK", "s3.secret-access-key": "SK", "s3.session-token": "ST",
            "s3.endpoint": "http://127.0.0.1:9000", "s3.region": "eu-west-1", "s3.path-style-access": "true",
            "s3.session-token-expires-at-ms": "1700000060000",
        }});
        let vended = VendedS3::from_load_result(&format!("{LOCATION}/"), &answer);
        assert_eq!(
            vended,
            [VendedS3 {
                prefix: LOCATION.into(),
                access_key_id: "AK".into(),
                secret_access_key: "SK".into(),
                session_token: Some("ST".into()),
                endpoint: Some("http://127.0.0.1:9000".into()),
                region: Some("eu-west-1".into()),
                path_style: Some(true),
                expires_at_ms: Some(1_700_000_060_000),
            }]
        );
        let v = &vended[0];
        assert!(v.covers(&format!("{LOCATION}/data/x.parquet")) && v.covers(LOCATION));
        assert!(v.covers("s3a://bucket/wh/kafka/orders/metadata/m.avro"));
        assert!(!v.covers("s3://bucket/wh/kafka/orders_dlq/data/x.parquet"));
        assert!(!v.covers("s3://bucket/wh/kafka/other/data/x.parquet"));
    }

    #[test]
    fn storage_credentials_take_their_prefix_and_the_table_config_beneath() {
        let answer = json!({
            "config": {"s3.endpoint": "http://e", "s3.region": "r", "s3.access-key-id": "table-key",
                       "s3.secret-access-key": "table-secret"},
            "storage-credentials": [
                {"prefix": "s3://bucket/wh/kafka/orders/data", "config": {
                    "s3.access-key-id": "data-key", "s3.secret-access-key": "data-secret",
                    "expiration-time": 1700000060000u64}},
                {"prefix": "gs://elsewhere", "config": {"gcs.oauth2.token": "t"}},
            ],
        });
        let vended = VendedS3::from_load_result(LOCATION, &answer);
        assert_eq!(vended.len(), 1);
        let v = &vended[0];
        assert_eq!((v.prefix.as_str(), v.access_key_id.as_str()), ("s3://bucket/wh/kafka/orders/data", "data-key"));
        assert_eq!((v.endpoint.as_deref(), v.region.as_deref()), (Some("http://e"), Some("r")));
        assert_eq!(v.expires_at_ms, Some(1_700_000_060_000));
    }

    #[test]
    fn no_keys_no_vending() {
        assert!(VendedS3::from_load_result(LOCATION, &json!({"config": {"s3.endpoint": "http://e"}})).is_empty());
        assert!(VendedS3::from_load_result(LOCATION, &json!({"metadata": {}})).is_empty());
        let half = json!({"config": {"s3.access-key-id": "AK"}});
        assert!(VendedS3::from_load_result(LOCATION, &half).is_empty());
    }

    #[test]
    fn credentials_are_due_at_four_fifths_of_their_life() {
        assert_eq!(refresh_at_ms(1_000_000, None), None);
        // An hour's credential: reloaded after 48 minutes.
        assert_eq!(refresh_at_ms(0, Some(3_600_000)), Some(2_880_000));
        // Received expired, or nearly: used for a second, not reloaded at every request.
        assert_eq!(refresh_at_ms(10_000, Some(9_000)), Some(11_000));
        assert_eq!(refresh_at_ms(10_000, Some(10_500)), Some(11_000));
    }
}

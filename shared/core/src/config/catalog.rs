//! The `[catalog]` section of `floe.toml`: which Iceberg catalog holds the tables, and
//! how to reach it. Parsed and checked at start-up into a typed [`CatalogConfig`]; each
//! error names its field (`catalog.uri: …`). Without the section each side keeps its
//! default ([`CatalogConfig::Glue`] on Lambda and `floe aws`, [`CatalogConfig::Sql`] for
//! `floe local`). Credentials are never held here, only where to read them.

use serde::Deserialize;

use super::{ConfigError, insecure, url_has_credentials};

/// The catalog Floe commits to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogConfig {
    /// AWS Glue: one database per namespace.
    Glue,
    /// The local SQLite catalog `floe` of a warehouse folder (`floe local`).
    Sql,
    /// An Iceberg REST catalog.
    Rest(RestCatalogConfig),
    /// An Amazon S3 table bucket.
    S3Tables(S3TablesConfig),
}

impl CatalogConfig {
    /// Its `type` in floe.toml.
    pub fn kind(&self) -> &'static str {
        match self {
            CatalogConfig::Glue => "glue",
            CatalogConfig::Sql => "sql",
            CatalogConfig::Rest(_) => "rest",
            CatalogConfig::S3Tables(_) => "s3tables",
        }
    }
}

/// An Iceberg REST catalog: where it is and how Floe authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestCatalogConfig {
    /// The catalog's base URI; endpoints are `{uri}/v1/…`.
    pub uri: String,
    /// The warehouse asked for at `GET {uri}/v1/config` (its `prefix` goes into every path).
    pub warehouse: Option<String>,
    pub auth: RestAuth,
    /// The OAuth2 scope asked for with client credentials (default `catalog`).
    pub scope: Option<String>,
    /// The token endpoint (default `{uri}/v1/oauth/tokens`).
    pub oauth2_server_uri: Option<String>,
    /// Sign each request with AWS SigV4 (Glue's and S3 Tables' Iceberg REST endpoints).
    pub sigv4: Option<SigV4Config>,
    /// Credentials may travel over plain `http://` to other hosts: the catalog URI, the
    /// token endpoint, and storage endpoints the catalog vends (off: only loopback).
    pub allow_insecure_http: bool,
}

/// How Floe authenticates to a REST catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestAuth {
    /// No token (an open catalog, or SigV4 alone).
    None,
    /// OAuth2 client credentials `client_id:client_secret` in this environment variable.
    CredentialEnv(String),
    /// A bearer token in this environment variable.
    TokenEnv(String),
    /// A Secrets Manager secret `{"credential": "id:secret"}` or `{"token": "…"}`.
    Secret(String),
}

/// AWS SigV4 signing of REST requests.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigV4Config {
    pub region: String,
    /// The signing name: `glue` (Glue's Iceberg REST endpoint), `s3tables`, `execute-api`.
    pub service: String,
}

/// An Amazon S3 table bucket, and which of Floe's maintenance it leaves to S3 Tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3TablesConfig {
    /// `arn:aws:s3tables:<region>:<account>:bucket/<name>`.
    pub table_bucket_arn: String,
    /// Run Floe's own compaction (S3 Tables compacts by itself). Floe's orphan sweep
    /// never runs on S3 Tables: a table bucket refuses the listing it needs, and S3
    /// Tables removes unreferenced files itself.
    pub compaction: bool,
}

impl S3TablesConfig {
    /// The bucket's region (the ARN's fourth field).
    pub fn region(&self) -> &str {
        self.table_bucket_arn.split(':').nth(3).unwrap_or_default()
    }
}

/// The section as written, one variant a `type`: each type's keys are declared once, in
/// its settings struct. A key of another type is refused naming that type (its keys are
/// read from the struct, [`keys`]); a key of no type by serde, naming it.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum RawCatalog {
    Glue(NoKeys),
    Sql(NoKeys),
    Rest(RestKeys),
    S3Tables(S3TablesKeys),
}

impl RawCatalog {
    /// Each type by name, with the keys its settings declare.
    fn types() -> [(&'static str, &'static [&'static str]); 4] {
        [
            ("glue", keys::<NoKeys>()),
            ("sql", keys::<NoKeys>()),
            ("rest", keys::<RestKeys>()),
            ("s3tables", keys::<S3TablesKeys>()),
        ]
    }

    /// The types, as an error lists them: `glue, sql, rest or s3tables`.
    fn listed() -> String {
        let names: Vec<&str> = Self::types().iter().map(|(name, _)| *name).collect();
        let (last, first) = names.split_last().unwrap_or((&"", &[]));
        format!("{} or {last}", first.join(", "))
    }
}

/// The settings of `glue` and `sql`: none.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoKeys {}

/// The keys of `type = "rest"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestKeys {
    uri: Option<String>,
    warehouse: Option<String>,
    credential_env: Option<String>,
    token_env: Option<String>,
    secret_arn: Option<String>,
    scope: Option<String>,
    oauth2_server_uri: Option<String>,
    sigv4: Option<SigV4Config>,
    #[serde(default)]
    allow_insecure_http: bool,
}

/// The keys of `type = "s3tables"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct S3TablesKeys {
    table_bucket_arn: Option<String>,
    compaction: Option<bool>,
    orphan_sweep: Option<bool>,
}

/// The keys a settings struct declares: serde's own list of its fields, read by a
/// deserializer that stops at it.
fn keys<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

/// A deserializer that only records the field names of the struct asked of it.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(serde::de::Error::custom("field names read"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

fn invalid(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::invalid(format!("catalog.{field}"), message)
}

/// Parses and checks the `[catalog]` table.
pub(super) fn parse_catalog(table: toml::Table) -> Result<CatalogConfig, ConfigError> {
    let kind = match table.get("type") {
        None => return Err(invalid("type", format!("missing: {}", RawCatalog::listed()))),
        Some(toml::Value::String(kind)) => kind.clone(),
        Some(other) => return Err(invalid("type", format!("{other}: expected {}", RawCatalog::listed()))),
    };
    let types = RawCatalog::types();
    let Some((_, own)) = types.iter().find(|(name, _)| *name == kind) else {
        return Err(invalid("type", format!("{kind:?}: expected {}", RawCatalog::listed())));
    };
    for key in table.keys().filter(|key| *key != "type" && !own.contains(&key.as_str())) {
        if let Some((owner, _)) = types.iter().find(|(_, keys)| keys.contains(&key.as_str())) {
            return Err(invalid(key, format!("only for type = \"{owner}\", not \"{kind}\"")));
        }
    }
    match super::typed::<RawCatalog>("catalog", table)? {
        RawCatalog::Glue(NoKeys {}) => Ok(CatalogConfig::Glue),
        RawCatalog::Sql(NoKeys {}) => Ok(CatalogConfig::Sql),
        RawCatalog::Rest(keys) => parse_rest(keys).map(CatalogConfig::Rest),
        RawCatalog::S3Tables(keys) => parse_s3tables(keys).map(CatalogConfig::S3Tables),
    }
}

fn check_http_url(field: &str, url: &str) -> Result<(), ConfigError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(invalid(field, format!("{url:?}: must start with http:// or https://")));
    }
    if url_has_credentials(url) {
        return Err(invalid(
            field,
            "holds credentials (user:password@), which would show in logs and errors: use credential_env, token_env or secret_arn",
        ));
    }
    Ok(())
}

fn check_env_name(field: &str, name: &str) -> Result<(), ConfigError> {
    let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if valid { Ok(()) } else { Err(invalid(field, format!("{name:?}: not an environment variable name"))) }
}

fn parse_rest(raw: RestKeys) -> Result<RestCatalogConfig, ConfigError> {
    let uri = raw.uri.ok_or_else(|| invalid("uri", "missing: the catalog's base URI (endpoints are {uri}/v1/…)"))?;
    check_http_url("uri", &uri)?;
    let uri = uri.trim_end_matches('/').to_string();
    if let Some(server) = &raw.oauth2_server_uri {
        check_http_url("oauth2_server_uri", server)?;
        // Only set with client credentials (checked below): the secret goes there.
        if insecure(server) && !raw.allow_insecure_http {
            return Err(invalid(
                "oauth2_server_uri",
                "the client secret would cross the network in clear text over http://: use https://, or set catalog.allow_insecure_http = true",
            ));
        }
    }
    let sources =
        [("credential_env", &raw.credential_env), ("token_env", &raw.token_env), ("secret_arn", &raw.secret_arn)];
    let set: Vec<&str> = sources.iter().filter(|(_, v)| v.is_some()).map(|(k, _)| *k).collect();
    if set.len() > 1 {
        return Err(invalid(
            set[1],
            format!("set one of credential_env, token_env and secret_arn, not {}", set.join(" and ")),
        ));
    }
    let auth = match (raw.credential_env, raw.token_env, raw.secret_arn) {
        (Some(env), _, _) => {
            check_env_name("credential_env", &env)?;
            RestAuth::CredentialEnv(env)
        }
        (_, Some(env), _) => {
            check_env_name("token_env", &env)?;
            RestAuth::TokenEnv(env)
        }
        (_, _, Some(arn)) => {
            if !arn.starts_with("arn:aws") || !arn.contains(":secretsmanager:") {
                return Err(invalid("secret_arn", format!("{arn:?}: not a Secrets Manager secret ARN")));
            }
            RestAuth::Secret(arn)
        }
        _ => RestAuth::None,
    };
    if auth == RestAuth::None && (raw.scope.is_some() || raw.oauth2_server_uri.is_some()) {
        let field = if raw.scope.is_some() { "scope" } else { "oauth2_server_uri" };
        return Err(invalid(field, "only with OAuth2 client credentials (credential_env or secret_arn)"));
    }
    if let Some(sigv4) = &raw.sigv4 {
        if auth != RestAuth::None {
            return Err(invalid(
                "sigv4",
                "signs with AWS credentials: remove credential_env, token_env and secret_arn",
            ));
        }
        if sigv4.region.is_empty() || sigv4.service.is_empty() {
            return Err(invalid("sigv4", "set both region and service (glue, s3tables, execute-api)"));
        }
    }
    if insecure(&uri) && auth != RestAuth::None && !raw.allow_insecure_http {
        return Err(invalid(
            "uri",
            "a token over http:// crosses the network in clear text: use https://, or set catalog.allow_insecure_http = true",
        ));
    }
    Ok(RestCatalogConfig {
        uri,
        warehouse: raw.warehouse,
        auth,
        scope: raw.scope,
        oauth2_server_uri: raw.oauth2_server_uri,
        sigv4: raw.sigv4,
        allow_insecure_http: raw.allow_insecure_http,
    })
}

fn parse_s3tables(raw: S3TablesKeys) -> Result<S3TablesConfig, ConfigError> {
    let arn = raw
        .table_bucket_arn
        .ok_or_else(|| invalid("table_bucket_arn", "missing: arn:aws:s3tables:<region>:<account>:bucket/<name>"))?;
    let fields: Vec<&str> = arn.split(':').collect();
    let valid = fields.len() == 6
        && fields[0] == "arn"
        && fields[1].starts_with("aws")
        && fields[2] == "s3tables"
        && !fields[3].is_empty()
        && fields[4].len() == 12
        && fields[4].bytes().all(|b| b.is_ascii_digit())
        && fields[5].strip_prefix("bucket/").is_some_and(|name| !name.is_empty() && !name.contains('/'));
    if !valid {
        return Err(invalid(
            "table_bucket_arn",
            format!("{arn:?}: expected arn:aws:s3tables:<region>:<account>:bucket/<name>"),
        ));
    }
    if raw.orphan_sweep == Some(true) {
        // A table bucket serves only the S3 Tables API: listing a table's files, which
        // the sweep needs, is refused (MethodNotAllowed) on every compactor run.
        return Err(invalid(
            "orphan_sweep",
            "S3 Tables cannot be swept by Floe (a table bucket refuses listing its files), and it removes unreferenced files itself: remove orphan_sweep, or set it to false",
        ));
    }
    Ok(S3TablesConfig { table_bucket_arn: arn, compaction: raw.compaction.unwrap_or(false) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CatalogConfig, ConfigError> {
        parse_catalog(text.parse().unwrap())
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn each_type_parses_into_its_settings() {
        assert_eq!(parse("type = \"glue\"").unwrap(), CatalogConfig::Glue);
        assert_eq!(parse("type = \"sql\"").unwrap(), CatalogConfig::Sql);
        let rest = parse(
            r#"type = "rest"
               uri = "https://catalog.example.com/api/catalog/"
               warehouse = "analytics"
               credential_env = "FLOE_CATALOG_CREDENTIAL"
               scope = "PRINCIPAL_ROLE:ALL""#,
        )
        .unwrap();
        let CatalogConfig::Rest(rest) = rest else { panic!("{rest:?}") };
        assert_eq!(rest.uri, "https://catalog.example.com/api/catalog");
        assert_eq!(rest.warehouse.as_deref(), Some("analytics"));
        assert_eq!(rest.auth, RestAuth::CredentialEnv("FLOE_CATALOG_CREDENTIAL".into()));
        assert_eq!(rest.scope.as_deref(), Some("PRINCIPAL_ROLE:ALL"));
        let signed = parse(
            r#"type = "rest"
               uri = "https://glue.us-east-1.amazonaws.com/iceberg"
               sigv4 = { region = "us-east-1", service = "glue" }"#,
        )
        .unwrap();
        let CatalogConfig::Rest(signed) = signed else { panic!("{signed:?}") };
        assert_eq!(signed.sigv4, Some(SigV4Config { region: "us-east-1".into(), service: "glue".into() }));
        assert_eq!(signed.auth, RestAuth::None);
        let tables = parse(
            r#"type = "s3tables"
               table_bucket_arn = "arn:aws:s3tables:us-east-1:123456789012:bucket/analytics""#,
        )
        .unwrap();
        let CatalogConfig::S3Tables(tables) = tables else { panic!("{tables:?}") };
        assert!(!tables.compaction);
        assert_eq!(tables.region(), "us-east-1");
    }

    #[test]
    fn each_type_is_named_by_its_kind_and_declares_its_keys() {
        for (kind, keys) in RawCatalog::types() {
            let required = match kind {
                "rest" => "uri = \"https://x\"",
                "s3tables" => "table_bucket_arn = \"arn:aws:s3tables:r:123456789012:bucket/b\"",
                _ => "",
            };
            assert_eq!(parse(&format!("type = \"{kind}\"\n{required}")).unwrap().kind(), kind);
            assert_eq!(keys.is_empty(), kind == "glue" || kind == "sql", "{kind}: {keys:?}");
        }
        assert_eq!(RawCatalog::listed(), "glue, sql, rest or s3tables");
        assert!(keys::<RestKeys>().contains(&"allow_insecure_http"));
        assert!(keys::<S3TablesKeys>().contains(&"orphan_sweep"));
        let e = error("type = \"sql\"\ncompaction = true");
        assert!(e.starts_with("catalog.compaction: only for type = \"s3tables\", not \"sql\""), "{e}");
        let e = error("type = \"glue\"\nport = 1");
        assert!(e.starts_with("catalog: unknown field `port`"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        assert!(error("uri = \"https://x\"").starts_with("catalog.type: missing"));
        assert!(error("type = \"hive\"").starts_with("catalog.type: \"hive\""));
        assert!(error("type = \"rest\"").starts_with("catalog.uri: missing"));
        assert!(error("type = \"rest\"\nuri = \"ftp://x\"").starts_with("catalog.uri: \"ftp://x\""));
        assert!(error("type = \"rest\"\nuri = \"https://u:p@x\"").starts_with("catalog.uri: holds credentials"));
        assert!(
            error("type = \"glue\"\nuri = \"https://x\"").starts_with("catalog.uri: only for type = \"rest\""),
            "{}",
            error("type = \"glue\"\nuri = \"https://x\"")
        );
        assert!(
            error("type = \"rest\"\nuri = \"https://x\"\ntable_bucket_arn = \"a\"")
                .starts_with("catalog.table_bucket_arn: only for type = \"s3tables\"")
        );
        assert!(
            error("type = \"rest\"\nuri = \"https://x\"\ntoken_env = \"A\"\ncredential_env = \"B\"")
                .starts_with("catalog.token_env: set one of")
        );
        assert!(error("type = \"rest\"\nuri = \"https://x\"\ntoken_env = \"A-B\"").starts_with("catalog.token_env:"));
        assert!(
            error("type = \"rest\"\nuri = \"https://x\"\ntoken_env = \"A\"\nsigv4 = { region = \"r\", service = \"glue\" }")
                .starts_with("catalog.sigv4:")
        );
        assert!(error("type = \"rest\"\nuri = \"https://x\"\nscope = \"s\"").starts_with("catalog.scope:"));
        assert!(error("type = \"rest\"\nuri = \"https://x\"\nsecret_arn = \"x\"").starts_with("catalog.secret_arn:"));
        assert!(error("type = \"rest\"\nuri = \"https://x\"\nport = 1").contains("port"));
        assert!(
            error("type = \"s3tables\"\ntable_bucket_arn = \"arn:aws:s3:::bucket\"")
                .starts_with("catalog.table_bucket_arn:")
        );
    }

    #[test]
    fn an_orphan_sweep_on_s3_tables_is_refused_naming_why() {
        let arn = "type = \"s3tables\"\ntable_bucket_arn = \"arn:aws:s3tables:us-east-1:123456789012:bucket/b\"";
        let e = error(&format!("{arn}\norphan_sweep = true"));
        assert!(e.starts_with("catalog.orphan_sweep: S3 Tables cannot be swept"), "{e}");
        assert!(e.contains("removes unreferenced files itself"), "{e}");
        assert!(parse(&format!("{arn}\norphan_sweep = false")).is_ok());
    }

    #[test]
    fn a_token_over_http_stays_on_this_machine_unless_allowed() {
        let remote = "type = \"rest\"\nuri = \"http://catalog.internal\"\ntoken_env = \"T\"";
        assert!(error(remote).starts_with("catalog.uri: a token over http://"));
        assert!(parse(&format!("{remote}\nallow_insecure_http = true")).is_ok());
        assert!(parse("type = \"rest\"\nuri = \"http://127.0.0.1:8181\"\ntoken_env = \"T\"").is_ok());
        assert!(parse("type = \"rest\"\nuri = \"http://catalog.internal\"").is_ok(), "no token, nothing to leak");
        // The token endpoint receives the client secret, whatever the catalog's URI.
        let token_elsewhere = "type = \"rest\"\nuri = \"https://catalog.example.com\"\ncredential_env = \"C\"\noauth2_server_uri = \"http://auth.example.com/token\"";
        let e = error(token_elsewhere);
        assert!(e.starts_with("catalog.oauth2_server_uri: the client secret would cross the network"), "{e}");
        let CatalogConfig::Rest(allowed) = parse(&format!("{token_elsewhere}\nallow_insecure_http = true")).unwrap()
        else {
            panic!()
        };
        assert!(allowed.allow_insecure_http);
        assert!(parse(&token_elsewhere.replace("http://auth.example.com", "http://127.0.0.1:9")).is_ok());
        assert!(parse(&token_elsewhere.replace("http://", "https://")).is_ok());
    }
}

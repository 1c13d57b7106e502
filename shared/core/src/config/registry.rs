//! `[schema_registry]`: the Confluent Schema Registry and how Floe authenticates to it
//! (checked in [`super::FloeConfig::parse`]).

use serde::Deserialize;

/// The Confluent Schema Registry to use. Credentials are never logged.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SchemaRegistryConfig {
    pub url: String,
    pub username: Option<String>,
    /// Name of the environment variable holding the password.
    pub password_env: Option<String>,
    /// ARN of a Secrets Manager secret `{"username": …, "password": …}` (Lambda).
    pub secret_arn: Option<String>,
    /// Request timeout in milliseconds (default 5000).
    pub timeout_ms: Option<u64>,
    /// Allow credentials over a plain `http://` URL to a host other than this machine
    /// (the password then crosses the network in clear text).
    #[serde(default)]
    pub allow_insecure_http: bool,
}

impl std::fmt::Debug for SchemaRegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaRegistryConfig")
            .field("url", &self.url)
            .field("username", &self.username.as_ref().map(|_| "<set>"))
            .field("password_env", &self.password_env)
            .field("secret_arn", &self.secret_arn)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish()
    }
}

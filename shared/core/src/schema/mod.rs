//! Schemas: what a topic's records look like and what its table looks like.
//!
//! - [`layout`]: the columns every table has (Kafka metadata, key, value);
//! - [`evolution`]: the planner from (table schema, source schema) to compatible changes
//!   with stable field ids, or an incompatible verdict.

pub mod avro;
pub mod by_id;
pub mod evolution;
pub mod formats;
pub mod json;
mod json_decode;
pub mod json_infer;
pub mod json_schema;
pub mod layout;
pub mod part;
pub mod protobuf;
mod protobuf_decode;
mod protobuf_plan;
pub mod registry;
pub mod utf8;
pub mod uuid_text;
pub mod wire;

pub use evolution::{Change, Evolution, Incompatible, plan};
pub use layout::{PayloadType, table_struct};

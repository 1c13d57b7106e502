//! The table's schema: the columns every table has, and how it evolves.
//!
//! - [`layout`]: the columns every table has (Kafka metadata, key, value);
//! - [`evolution`]: the planner from (table schema, source schema) to compatible changes
//!   with stable field ids, or an incompatible verdict.
//!
//! What a topic's records look like is [`crate::formats`]'s; where their schemas come
//! from, [`crate::registry`]'s.

pub mod evolution;
pub mod layout;

pub use evolution::{Change, Evolution, Incompatible, plan, plan_above};
pub use layout::{PayloadType, table_struct};

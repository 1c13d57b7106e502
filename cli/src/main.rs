//! `floe`: Floe's core on one machine — the embedded default and operator commands.

mod inspect;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "floe",
    version,
    about = "Kafka tiered-storage segments → Apache Iceberg tables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode a Kafka log segment: one JSON object per committed record, in offset order.
    Inspect {
        /// The segment (`.log`) file.
        segment: PathBuf,
        /// The segment's `.txnindex`, checked against the transaction markers found.
        #[arg(long)]
        txn_index: Option<PathBuf>,
        /// Print counts per batch kind and codec, open transactions and offsets instead.
        #[arg(long)]
        summary: bool,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("FLOE_LOG"))
        .init();
    let result = match Cli::parse().command {
        Command::Inspect {
            segment,
            txn_index,
            summary,
        } => inspect::run(&segment, txn_index.as_deref(), summary).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe: {e:#}");
            ExitCode::FAILURE
        }
    }
}

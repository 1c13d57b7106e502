//! `floe`: Floe's core on one machine — the embedded default and operator commands.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use floe_cli::inspect;

#[derive(Parser)]
#[command(name = "floe", version, about = "Kafka tiered-storage segments → Apache Iceberg tables")]
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
    /// Convert a segment to Parquet files (the materializer's core, by hand): one JSON
    /// line per file written.
    Convert {
        /// The segment (`.log`) file.
        segment: PathBuf,
        /// The Kafka topic the segment belongs to.
        #[arg(long)]
        topic: String,
        /// The Kafka partition the segment belongs to.
        #[arg(long, allow_negative_numbers = true)]
        partition: i32,
        /// Directory for the Parquet files (`data/`, `dead_letter/`).
        #[arg(long)]
        out: PathBuf,
        /// `floe.toml`; without it, every topic converts with raw key and value.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run Floe on this machine.
    Local {
        #[command(subcommand)]
        command: LocalCommand,
    },
    /// Operate a deployed stack (credentials and region from the AWS environment).
    Aws {
        #[command(subcommand)]
        command: AwsCommand,
    },
}

#[derive(Subcommand)]
enum AwsCommand {
    /// Every table: its state (running, degraded, suspended, config issue) and why, last
    /// commit, files and bytes, and (suspended) the command that resumes it; a readable
    /// table, or with --json one JSON line per table, with its committed offsets and what
    /// maintenance did.
    Status {
        /// The stack's lock table (its `LockTableName` output).
        #[arg(long)]
        lock_table: String,
        /// One JSON object per line instead of the table.
        #[arg(long)]
        json: bool,
        /// The functions' floe.toml (`s3://…` or a path: the stack's ConfigUri): its
        /// `[catalog]` is where the tables are read (Glue without it).
        #[arg(long)]
        config: Option<String>,
    },
    /// Resume a suspended table: the committer commits its kept tasks again.
    Resume {
        /// The table, `namespace.name`.
        table: String,
        #[arg(long)]
        lock_table: String,
    },
    /// End a stranded transaction part (status: `degraded`, "transaction records wait
    /// for a marker that came and left before them"): look its transaction up in Kafka,
    /// then queue the decision for the committer: commit its records as rows (--commit)
    /// or drop them (--abort).
    Resolve {
        #[command(flatten)]
        decision: DecisionArgs,
        /// The stack's task queue (its `TaskQueueUrl` output).
        #[arg(long)]
        queue_url: String,
        #[command(flatten)]
        stack: StackArgs,
    },
    /// Prove from the table's data (through its catalog, files in S3) that it holds every
    /// committed Kafka record once: offsets per partition, gaps and what explains them,
    /// duplicates. Exit code 0: exactly once; 1: a duplicate, an unexplained gap or a row
    /// never committed; 2: the table could not be audited.
    Audit {
        /// The table, `namespace.name`.
        table: String,
        /// One JSON object instead of the readable report.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        stack: StackArgs,
    },
    /// Hand the segments already in tiered storage to the materializer, as if each had just
    /// been uploaded: segments the tables hold are skipped, none is committed twice.
    /// Progress goes to a state file, so a rerun hands only the rest. The stack's floe.toml
    /// (--config) finds each topic's table and tells the topics it does not enable, whose
    /// segments are skipped too; without it, the defaults (as the functions without one).
    Backfill {
        /// The bucket of segments (the tiered-storage bucket).
        #[arg(long)]
        bucket: String,
        /// Only keys under this prefix.
        #[arg(long, default_value = "")]
        prefix: String,
        /// Only this topic's segments.
        #[arg(long)]
        topic: Option<String>,
        /// The materializer function (its name or ARN: the stack's `MaterializerFunction`).
        #[arg(long, required_unless_present = "dry_run")]
        function: Option<String>,
        /// Invocations at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// The segments handed so far, one key a line after a line naming the bucket
        /// (default `floe-backfill-<bucket>.state`); another bucket's is refused.
        #[arg(long)]
        state: Option<PathBuf>,
        /// Stop after handing this many segments.
        #[arg(long)]
        limit: Option<usize>,
        /// Print what would be handed and its estimated cost; hand nothing.
        #[arg(long)]
        dry_run: bool,
        /// The materializer's memory, for the dry run's estimate.
        #[arg(long, default_value_t = 1024)]
        memory_mib: u64,
        #[command(flatten)]
        stack: StackArgs,
    },
}

/// Where a stack's tables are read, as its functions read them.
#[derive(clap::Args)]
struct StackArgs {
    /// The functions' floe.toml (`s3://…` or a path: the stack's ConfigUri): its
    /// `[catalog]` is where the tables are read (Glue without it).
    #[arg(long)]
    config: Option<String>,
    /// The stack's lock table (its `LockTableName` output), where the Iceberg records of
    /// Delta-only topics are kept: needed when floe.toml has one.
    #[arg(long)]
    lock_table: Option<String>,
}

/// A decision on a stranded transaction part, as `floe … resolve` takes it.
#[derive(clap::Args)]
struct DecisionArgs {
    /// The table, `namespace.name` (`kafka.orders`).
    table: String,
    /// The part's Kafka partition, as status names it.
    #[arg(long)]
    partition: i32,
    /// The part's first offset, as status names it.
    #[arg(long)]
    offset: i64,
    /// Its transaction committed in Kafka: its records become rows.
    #[arg(long, conflicts_with = "abort", required_unless_present = "abort")]
    commit: bool,
    /// Its transaction aborted in Kafka: its records never become rows.
    #[arg(long)]
    abort: bool,
}

impl DecisionArgs {
    fn decision(self) -> floe_cli::resolve::Decision {
        let DecisionArgs { table, partition, offset, commit, .. } = self;
        floe_cli::resolve::Decision { table, partition, first_offset: offset, commit }
    }
}

#[derive(Subcommand)]
enum LocalCommand {
    /// Materialize and commit every segment under INPUT (broker log dirs or tiered-storage
    /// keys) into Iceberg tables in WAREHOUSE (SQLite catalog `floe` in WAREHOUSE/catalog.db).
    /// Segments already in their table are skipped.
    Run {
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        warehouse: PathBuf,
        /// `floe.toml`; without it every topic found becomes `kafka.<topic>` with raw key and value.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Compact and maintain the tables of WAREHOUSE: small files rewritten into files of
    /// the compaction target size (once they reach it, or once the compaction window has
    /// passed), committed at once. One line per table. (`floe local run` ends with this.)
    Compact {
        #[arg(long)]
        warehouse: PathBuf,
        /// `floe.toml`: each topic's compaction target, window and orphan grace period.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Every table of WAREHOUSE: its state (running, degraded, suspended, config issue)
    /// and why, last commit, files and bytes, and (suspended) the command that resumes it;
    /// a readable table, or with --json one JSON object per line, with its snapshots, the
    /// Kafka offsets it holds and what maintenance did.
    Status {
        #[arg(long)]
        warehouse: PathBuf,
        /// `floe.toml` of the run: the catalog its `[catalog]` names (REST) instead of the
        /// warehouse's SQLite one.
        #[arg(long)]
        config: Option<PathBuf>,
        /// One JSON object per line instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Where a table is (its folder and current metadata file) and a query ready to paste
    /// for DuckDB, PyIceberg and Spark. Rewrites the table's `metadata/version-hint.text`
    /// when it names another version than the catalog.
    Table {
        /// The table, `namespace.name` (`kafka.orders`).
        table: String,
        #[arg(long)]
        warehouse: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Resume a suspended table (an incompatible schema, or a bad record in `suspend`
    /// mode, stopped it): the next run commits its segments again.
    Resume {
        /// The table, `namespace.name` (`kafka.orders`).
        table: String,
        #[arg(long)]
        warehouse: PathBuf,
    },
    /// End a stranded transaction part (status: `degraded`, "transaction records wait
    /// for a marker that came and left before them"): look its transaction up in Kafka,
    /// then commit its records as rows (--commit) or drop them (--abort).
    Resolve {
        #[command(flatten)]
        decision: DecisionArgs,
        #[arg(long)]
        warehouse: PathBuf,
        /// `floe.toml` of the run: the catalog its `[catalog]` names.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Prove from the table's data that it holds every committed Kafka record once:
    /// offsets per partition, gaps and what explains them, duplicates. Exit code 0:
    /// exactly once; 1: a duplicate, an unexplained gap or a row never committed; 2: the
    /// table could not be audited.
    Audit {
        /// The table, `namespace.name` (`kafka.orders`).
        table: String,
        #[arg(long)]
        warehouse: PathBuf,
        /// One JSON object instead of the readable report.
        #[arg(long)]
        json: bool,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("FLOE_LOG"))
        .init();
    let result = match Cli::parse().command {
        Command::Inspect { segment, txn_index, summary } => {
            inspect::run(&segment, txn_index.as_deref(), summary, std::io::stdout().lock()).await
        }
        Command::Convert { segment, topic, partition, out, config } => {
            convert(&segment, &topic, partition, &out, config.as_deref()).await
        }
        Command::Local { command: LocalCommand::Run { input, warehouse, config } } => {
            match load_config(config.as_deref()) {
                Ok(config) => {
                    floe_cli::local::run(&input, &warehouse, config, std::io::stdout().lock()).await.map(drop)
                }
                Err(e) => Err(e),
            }
        }
        Command::Local { command: LocalCommand::Compact { warehouse, config } } => match load_config(config.as_deref())
        {
            Ok(config) => {
                let clock = floe_core::lock::Clock::Wall;
                floe_cli::compact::compact(&warehouse, config, clock, std::io::stdout().lock()).await.map(drop)
            }
            Err(e) => Err(e),
        },
        Command::Local { command: LocalCommand::Status { warehouse, config, json } } => {
            let tables = match load_config(config.as_deref()) {
                Ok(config) => floe_cli::local::status_in(&warehouse, &config).await,
                Err(e) => Err(e),
            };
            tables.and_then(|tables| {
                let rows: Vec<_> = tables.iter().map(|t| (t.table.as_str(), &t.health)).collect();
                print_status(&tables, &rows, json)
            })
        }
        Command::Local { command: LocalCommand::Table { table, warehouse, json } } => {
            table_access(&warehouse, &table, json).await
        }
        Command::Local { command: LocalCommand::Audit { table, warehouse, json } } => {
            let report = floe_cli::audit::local(&warehouse, &table).await;
            floe_cli::audit::verdict(report, json, std::io::stdout().lock())
        }
        Command::Aws { command } => aws(command).await,
        Command::Local { command: LocalCommand::Resume { table, warehouse } } => {
            floe_cli::local::resume(&warehouse, &table).await.map(|reason| resumed(&table, reason))
        }
        Command::Local { command: LocalCommand::Resolve { decision, warehouse, config } } => {
            match load_config(config.as_deref()) {
                Ok(config) => floe_cli::local::resolve(&warehouse, &config, &decision.decision())
                    .await
                    .map(|done| println!("{done}")),
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`floe inspect … | head`) is the reader's choice, not a failure.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floe: {}", floe_cli::error_line(&e));
            floe_cli::audit::exit_code(&e).map_or(ExitCode::FAILURE, ExitCode::from)
        }
    }
}

/// Status: one JSON line per table (`json`), or the readable table of `rows`.
fn print_status<T: serde::Serialize>(
    tables: &[T],
    rows: &[(&str, &floe_cli::health::HealthView)],
    json: bool,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        tables.iter().try_for_each(|t| Ok(writeln!(out, "{}", serde_json::to_string(t)?)?))
    } else {
        Ok(write!(out, "{}", floe_cli::health::render(rows))?)
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().filter_map(|c| c.downcast_ref::<std::io::Error>()).any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

async fn convert(
    segment: &std::path::Path,
    topic: &str,
    partition: i32,
    out: &std::path::Path,
    config: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let config = load_config(config)?;
    floe_cli::convert::run(segment, topic, partition, out, &config, std::io::stdout().lock()).await
}

async fn table_access(warehouse: &std::path::Path, table: &str, json: bool) -> anyhow::Result<()> {
    let access = floe_cli::table::access(warehouse, table).await?;
    let mut out = std::io::stdout().lock();
    match json {
        true => writeln!(out, "{}", serde_json::to_string(&access)?)?,
        false => floe_cli::table::print(&access, out)?,
    }
    Ok(())
}

async fn stack_tables(
    config: &aws_config::SdkConfig,
    s3: &aws_sdk_s3::Client,
    stack: &StackArgs,
) -> anyhow::Result<(floe_core::config::FloeConfig, floe_core::table::CatalogTables)> {
    floe_cli::aws::stack_tables(config, s3, stack.config.as_deref(), stack.lock_table.as_deref()).await
}

async fn aws(command: AwsCommand) -> anyhow::Result<()> {
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // As the functions address S3 (`FLOE_S3_PATH_STYLE=true` for S3 emulators).
    let path_style = std::env::var("FLOE_S3_PATH_STYLE").is_ok_and(|v| v == "true" || v == "1");
    let s3 = floe_cli::aws::s3_client(&config, path_style);
    match command {
        AwsCommand::Status { lock_table, json, config: config_uri } => {
            let stack = StackArgs { config: config_uri, lock_table: Some(lock_table.clone()) };
            let (_, tables) = stack_tables(&config, &s3, &stack).await?;
            let tables = floe_cli::aws::status_of(&config, &lock_table, &tables).await?;
            let rows: Vec<_> = tables.iter().map(|t| (t.table.as_str(), &t.health)).collect();
            print_status(&tables, &rows, json)
        }
        AwsCommand::Resolve { decision, queue_url, stack } => {
            let (_, tables) = stack_tables(&config, &s3, &stack).await?;
            let done = floe_cli::aws::resolve(&config, &s3, &tables, &queue_url, &decision.decision()).await?;
            println!("{done}");
            Ok(())
        }
        AwsCommand::Resume { table, lock_table } => {
            let reason = floe_cli::aws::resume(&config, &lock_table, &table).await?;
            resumed(&table, reason);
            Ok(())
        }
        AwsCommand::Audit { table, json, stack } => {
            let report = async {
                let (_, tables) = stack_tables(&config, &s3, &stack).await?;
                floe_cli::audit::stack_table(&tables, &table).await
            };
            floe_cli::audit::verdict(report.await, json, std::io::stdout().lock())
        }
        AwsCommand::Backfill {
            bucket,
            prefix,
            topic,
            function,
            concurrency,
            state,
            limit,
            dry_run,
            memory_mib,
            stack,
        } => {
            use floe_cli::backfill;
            let segments = backfill::list_segments(&s3, &bucket, &prefix, topic.as_deref()).await?;
            let (floe_config, tables) = stack_tables(&config, &s3, &stack).await?;
            let skip = backfill::Skip {
                held: backfill::already_held(&s3, &bucket, &segments, &floe_config, &tables).await?,
                not_enabled: backfill::not_enabled(&segments, &floe_config),
            };
            let state = state.unwrap_or_else(|| PathBuf::from(format!("floe-backfill-{bucket}.state")));
            let mut progress = backfill::Progress::open(&state, &bucket)?;
            let out = std::io::stdout().lock();
            if dry_run {
                let cost = backfill::CostModel { memory_mib, ..Default::default() };
                return backfill::dry_run(&bucket, &segments, &skip, &progress, &cost, out).map(drop);
            }
            let function = function.context("--function is required")?;
            let invoker = backfill::LambdaInvoker { client: aws_sdk_lambda::Client::new(&config), function };
            let options = backfill::Options { concurrency, limit };
            let report = backfill::backfill(&bucket, &segments, &skip, &invoker, &mut progress, &options, out).await?;
            match report.failed.len() {
                0 => Ok(()),
                n => anyhow::bail!("{n} segment(s) failed; run the same command again to retry them"),
            }
        }
    }
}

/// Says what `resume` did.
fn resumed(table: &str, reason: Option<String>) {
    match reason {
        Some(reason) => println!("{table} resumed (it was suspended: {reason})"),
        None => println!("{table} was not suspended"),
    }
}

fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<floe_core::config::FloeConfig> {
    Ok(match path {
        Some(path) => floe_core::config::FloeConfig::from_file(path)?,
        None => floe_core::config::FloeConfig::default(),
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_documented_command_lines_parse() {
        Cli::command().debug_assert();
        let parse = |line: &str| Cli::try_parse_from(line.split_whitespace()).map(|c| c.command);
        match parse("floe convert a.log --topic orders --partition 3 --out out --config floe.toml").unwrap() {
            Command::Convert { segment, topic, partition, out, config } => {
                assert_eq!((segment, topic.as_str(), partition), (PathBuf::from("a.log"), "orders", 3));
                assert_eq!((out, config), (PathBuf::from("out"), Some(PathBuf::from("floe.toml"))));
            }
            _ => panic!("not convert"),
        }
        match parse("floe local resume kafka.orders --warehouse wh").unwrap() {
            Command::Local { command: LocalCommand::Resume { table, warehouse } } => {
                assert_eq!((table.as_str(), warehouse), ("kafka.orders", PathBuf::from("wh")));
            }
            _ => panic!("not resume"),
        }
        match parse("floe aws resume kafka.orders --lock-table floe-leases").unwrap() {
            Command::Aws { command: AwsCommand::Resume { table, lock_table } } => {
                assert_eq!((table.as_str(), lock_table.as_str()), ("kafka.orders", "floe-leases"));
            }
            _ => panic!("not aws resume"),
        }
        assert!(parse("floe aws status").is_err(), "--lock-table is required");
        match parse("floe local audit kafka.orders --warehouse wh --json").unwrap() {
            Command::Local { command: LocalCommand::Audit { table, warehouse, json } } => {
                assert_eq!((table.as_str(), warehouse, json), ("kafka.orders", PathBuf::from("wh"), true));
            }
            _ => panic!("not local audit"),
        }
        assert!(matches!(
            parse("floe aws audit kafka.orders").unwrap(),
            Command::Aws { command: AwsCommand::Audit { json: false, stack: StackArgs { config: None, .. }, .. } }
        ));
        match parse("floe aws status --lock-table floe-leases --config s3://cfg/floe.toml").unwrap() {
            Command::Aws { command: AwsCommand::Status { config, .. } } => {
                assert_eq!(config.as_deref(), Some("s3://cfg/floe.toml"));
            }
            _ => panic!("not aws status"),
        }
        match parse("floe aws backfill --bucket ts --topic orders --function floe-materializer --limit 5").unwrap() {
            Command::Aws { command: AwsCommand::Backfill { bucket, topic, function, concurrency, limit, .. } } => {
                assert_eq!(
                    (bucket.as_str(), topic.as_deref(), function.as_deref()),
                    ("ts", Some("orders"), Some("floe-materializer"))
                );
                assert_eq!((concurrency, limit), (4, Some(5)));
            }
            _ => panic!("not aws backfill"),
        }
        assert!(parse("floe aws backfill --bucket ts").is_err(), "--function is required to hand segments");
        assert!(parse("floe aws backfill --bucket ts --dry-run").is_ok(), "but not for a dry run");
        assert!(matches!(
            parse("floe local status --warehouse wh").unwrap(),
            Command::Local { command: LocalCommand::Status { .. } }
        ));
        match parse("floe local compact --warehouse wh --config floe.toml").unwrap() {
            Command::Local { command: LocalCommand::Compact { warehouse, config } } => {
                assert_eq!((warehouse, config), (PathBuf::from("wh"), Some(PathBuf::from("floe.toml"))));
            }
            _ => panic!("not compact"),
        }
        assert!(parse("floe local compact").is_err(), "--warehouse is required");
        match parse("floe local table kafka.orders --warehouse wh --json").unwrap() {
            Command::Local { command: LocalCommand::Table { table, warehouse, json } } => {
                assert_eq!((table.as_str(), warehouse, json), ("kafka.orders", PathBuf::from("wh"), true));
            }
            _ => panic!("not table"),
        }
        assert!(parse("floe local table --warehouse wh").is_err(), "the table is required");
        assert!(matches!(
            parse("floe local run --input in --warehouse wh").unwrap(),
            Command::Local { command: LocalCommand::Run { config: None, .. } }
        ));
        assert!(parse("floe convert a.log --topic orders --out out").is_err(), "--partition is required");
        assert!(parse("floe convert a.log --topic orders --partition x --out out").is_err());
        // A negative partition reaches the check that names it, not clap's "unexpected argument".
        match parse("floe convert a.log --topic orders --partition -7 --out out").unwrap() {
            Command::Convert { partition, .. } => assert_eq!(partition, -7),
            _ => panic!("not convert"),
        }
    }
}

//! `floe local table`: where a table of a local warehouse is, and a query ready to paste
//! for each engine — DuckDB on the table's folder (found through its
//! `metadata/version-hint.text`), PyIceberg and Spark through the SQLite catalog; and
//! for a table with a Delta table (`_delta_log/` in its folder), DuckDB's `delta_scan`
//! and delta-rs on the folder. A Delta-only topic's table is the Delta table alone: its
//! Iceberg metadata is Floe's record (the file's own catalog, `floe-own`), no table to
//! query, so only the Delta queries are given.
//!
//! ```text
//!  catalog.db (floe-own, then floe) ─▶ the table's metadata file ─▶ its folder
//!  the folder's version hint, rewritten when it names another file (another engine
//!  committed through the catalog, or the warehouse predates hints)
//!  ─▶ TableAccess { location, metadata_location, version_hint, duckdb, pyiceberg, spark,
//!                   delta: { duckdb, python }, delta_only }
//! ```

use std::io::Write;
use std::path::Path;

use floe_core::catalog::Catalog;
use floe_core::catalog::hint;
use floe_core::catalog::sqlite::{OWN_CATALOG, SqliteCatalog};
use floe_core::delta::{LocalLogStore, LogStore};
use floe_core::table::TableName;

use crate::warehouse::folder;

/// How each engine reaches one table of a local warehouse.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableAccess {
    pub table: String,
    /// The table's folder, which DuckDB's `iceberg_scan` takes.
    pub location: String,
    /// The current metadata file, as the catalog names it.
    pub metadata_location: String,
    /// What `metadata/version-hint.text` holds; `None` when the metadata is no local file.
    pub version_hint: Option<String>,
    /// Set when the hint named another version (or there was none) and was rewritten:
    /// what it held (`it held "00001-…"`, `there was none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint_rewritten: Option<String>,
    /// One line for the DuckDB shell.
    pub duckdb: String,
    /// Python lines leaving the table's rows in `table` (a pyarrow Table).
    pub pyiceberg: String,
    /// A `spark-sql` command line.
    pub spark: String,
    /// The queries of its Delta table, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaAccess>,
    /// Whether the Delta table is the table's only one (a Delta-only topic's): the Iceberg
    /// metadata is Floe's record of its commits, not a table to query.
    pub delta_only: bool,
}

/// How engines read a table's Delta table, by its folder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeltaAccess {
    /// One line for the DuckDB shell (its `delta` extension).
    pub duckdb: String,
    /// Python lines leaving the table's rows in `table` (a pyarrow Table), with delta-rs.
    pub python: String,
}

/// Versions in the printed Spark command: an Iceberg runtime and the SQLite JDBC driver.
const SPARK_PACKAGES: &str = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.1,org.xerial:sqlite-jdbc:3.46.1.0";

/// The table `table` (`namespace.name`) of the warehouse in `warehouse`: its locations
/// and a query per engine. Rewrites its version hint when that names another version.
pub async fn access(warehouse: &Path, table: &str) -> anyhow::Result<TableAccess> {
    let warehouse = folder("--warehouse", warehouse, false)?;
    let db = warehouse.join("catalog.db");
    anyhow::ensure!(db.is_file(), "no warehouse at {} (no catalog.db)", warehouse.display());
    let name = TableName::parse(table)
        .ok_or_else(|| anyhow::anyhow!("{table:?}: a table is named <namespace>.<table> (kafka.orders)"))?;
    let user = SqliteCatalog::open(&db, "floe")?;
    let own = user.named(OWN_CATALOG);
    let (catalog, pointer, delta_only) = match own.current(&name).await? {
        Some(pointer) => (own, pointer, true),
        None => match user.current(&name).await? {
            Some(pointer) => (user, pointer, false),
            None => anyhow::bail!("no table {name} in {} (its tables: {})", db.display(), table_list(&user).await?),
        },
    };
    let metadata_location = pointer.metadata_location;
    let (location, version_hint, hint_rewritten) = match hint::hint_for(&metadata_location) {
        Some((hint_file, expected)) => {
            // `<table>/metadata/version-hint.text` → `<table>`
            let dir = hint_file.parent().and_then(Path::parent).unwrap_or(Path::new("/")).to_path_buf();
            let found = hint::read(&dir)?;
            let rewritten = match found.as_deref() == Some(expected.as_str()) {
                true => None,
                false => {
                    catalog.write_version_hint(&name).await?;
                    Some(found.map_or_else(|| "there was none".into(), |old| format!("it held {old:?}")))
                }
            };
            (dir.display().to_string(), Some(expected), rewritten)
        }
        None => (metadata_location.clone(), None, None),
    };
    let db = db.display().to_string();
    let delta = match LocalLogStore.exists(&format!("{location}/_delta_log/{:020}.json", 0)).await? {
        true => Some(DeltaAccess {
            duckdb: format!("INSTALL delta; LOAD delta; SELECT * FROM delta_scan({});", sql_string(&location)),
            python: delta_lines(&location),
        }),
        false => None,
    };
    Ok(TableAccess {
        delta,
        delta_only,
        duckdb: format!("INSTALL iceberg; LOAD iceberg; SELECT * FROM iceberg_scan({});", sql_string(&location)),
        pyiceberg: pyiceberg_lines(&db, &warehouse.display().to_string(), table),
        spark: spark_command(&db, &warehouse.display().to_string(), table),
        table: name.to_string(),
        location,
        metadata_location,
        version_hint,
        hint_rewritten,
    })
}

/// The catalog's tables (its own too: Delta-only topics'), `a.b, a.c`, for an error
/// naming a table it does not have.
async fn table_list(catalog: &SqliteCatalog) -> anyhow::Result<String> {
    let mut names = Vec::new();
    for namespace in catalog.namespaces().await? {
        for catalog in [catalog.clone(), catalog.named(OWN_CATALOG)] {
            names.extend(catalog.list(&namespace).await?.iter().map(TableName::to_string));
        }
    }
    names.sort();
    Ok(if names.is_empty() { "none".into() } else { names.join(", ") })
}

/// delta-rs's lines for the Delta table in the folder `location`, its rows in `table`.
fn delta_lines(location: &str) -> String {
    let python = serde_json::to_string(location).expect("a string serializes");
    [
        "import pyarrow",
        "from deltalake import DeltaTable, QueryBuilder",
        &format!("delta = DeltaTable({python})"),
        "table = pyarrow.table(QueryBuilder().register(\"t\", delta).execute(\"SELECT * FROM t\").read_all())",
    ]
    .join("\n")
}

fn pyiceberg_lines(db: &str, warehouse: &str, table: &str) -> String {
    let python = |s: &str| serde_json::to_string(s).expect("a string serializes");
    [
        "from pyiceberg.catalog.sql import SqlCatalog".to_string(),
        format!(
            "catalog = SqlCatalog(\"floe\", uri={}, warehouse={})",
            python(&format!("sqlite:///{db}")),
            python(&format!("file://{warehouse}"))
        ),
        format!("table = catalog.load_table({}).scan().to_arrow()", python(table)),
    ]
    .join("\n")
}

fn spark_command(db: &str, warehouse: &str, table: &str) -> String {
    let conf =
        |key: &str, value: &str| format!("  --conf {}", shell_word(&format!("spark.sql.catalog.floe{key}={value}")));
    [
        format!("spark-sql --packages {SPARK_PACKAGES}"),
        conf("", "org.apache.iceberg.spark.SparkCatalog"),
        conf(".type", "jdbc"),
        conf(".uri", &format!("jdbc:sqlite:{db}")),
        conf(".warehouse", warehouse),
        format!("  -e {}", shell_word(&format!("SELECT * FROM floe.{table}"))),
    ]
    .join(" \\\n")
}

/// A SQL string literal.
fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// One shell word: as it is when it holds nothing the shell reads, else single-quoted.
fn shell_word(s: &str) -> String {
    let plain = s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-=:,+@%".contains(c));
    if plain && !s.is_empty() { s.to_string() } else { format!("'{}'", s.replace('\'', "'\\''")) }
}

/// Prints `access` for a person: the locations, then each engine's query.
pub fn print(access: &TableAccess, mut out: impl Write) -> std::io::Result<()> {
    writeln!(out, "{}", access.table)?;
    writeln!(out, "  folder:   {}", access.location)?;
    let indent = |text: &str| text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n");
    if !access.delta_only {
        writeln!(out, "  metadata: {}", access.metadata_location)?;
        if let Some(before) = &access.hint_rewritten {
            writeln!(out, "  metadata/{} rewritten: {before}", hint::FILE_NAME)?;
        }
        writeln!(out, "\nDuckDB:\n{}", indent(&access.duckdb))?;
        writeln!(out, "\nPyIceberg (pip install \"pyiceberg[sql-sqlite,pyarrow]\"):\n{}", indent(&access.pyiceberg))?;
        writeln!(out, "\nSpark (Iceberg's JDBC catalog on catalog.db; the Spark catalog must be named floe):")?;
        writeln!(out, "{}", indent(&access.spark))?;
    }
    if let Some(delta) = &access.delta {
        let what = match access.delta_only {
            true => "a Delta table alone: its Iceberg metadata is Floe's record of its commits",
            false => "a Delta table of the same files",
        };
        writeln!(out, "\nDuckDB ({what}):\n{}", indent(&delta.duckdb))?;
        writeln!(out, "\ndelta-rs (pip install deltalake):\n{}", indent(&delta.python))?;
    }
    writeln!(out, "\nMore engines, and tables on AWS: docs/querying.md, docs/delta.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_survive_each_language() {
        assert_eq!(sql_string("/w/it's"), "'/w/it''s'");
        assert_eq!(
            shell_word("spark.sql.catalog.floe.uri=jdbc:sqlite:/w/catalog.db"),
            "spark.sql.catalog.floe.uri=jdbc:sqlite:/w/catalog.db"
        );
        assert_eq!(shell_word("a b's"), "'a b'\\''s'");
        let lines = pyiceberg_lines("/w \"x\"/catalog.db", "/w \"x\"", "kafka.orders");
        assert!(lines.contains(r#"uri="sqlite:////w \"x\"/catalog.db", warehouse="file:///w \"x\"""#), "{lines}");
    }

    #[tokio::test]
    async fn an_unknown_table_or_warehouse_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = access(dir.path(), "kafka.orders").await.unwrap_err().to_string();
        assert!(e.starts_with("no warehouse at ") && e.ends_with("(no catalog.db)"), "{e}");
        SqliteCatalog::open(&dir.path().join("catalog.db"), "floe").unwrap();
        let e = access(dir.path(), "kafka.orders").await.unwrap_err().to_string();
        assert!(e.starts_with("no table kafka.orders in ") && e.ends_with("catalog.db (its tables: none)"), "{e}");
        let e = access(dir.path(), "orders").await.unwrap_err().to_string();
        assert_eq!(e, "\"orders\": a table is named <namespace>.<table> (kafka.orders)");
    }
}

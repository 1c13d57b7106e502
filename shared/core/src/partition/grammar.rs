//! The `partition_by` grammar of `floe.toml`: `day(_kafka.timestamp)`, `bucket(16, id)`,
//! `identity(region)` or a bare column — parsed and checked here, bound to a schema by
//! the parent module.

/// One partition field: a source column and an Iceberg transform.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionField {
    pub source: String,
    pub transform: Transform,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transform {
    Identity,
    Year,
    Month,
    Day,
    Hour,
    Bucket(u32),
    Truncate(u32),
}

/// The largest `bucket` / `truncate` width: Iceberg's (and Java's) widths are signed
/// 32-bit integers.
pub const MAX_WIDTH: u32 = i32::MAX as u32;

/// `day(timestamp)`, `bucket(16, key)`, `identity(partition)`, or a bare column name.
pub fn parse_partition_field(s: &str) -> Result<PartitionField, String> {
    let s = s.trim();
    let Some((name, rest)) = s.split_once('(') else {
        return valid_column(s).map(|source| PartitionField { source, transform: Transform::Identity });
    };
    let args = rest.strip_suffix(')').ok_or_else(|| format!("missing ')' in {s:?}"))?;
    let args: Vec<&str> = args.split(',').map(str::trim).collect();
    let width = |args: &[&str]| -> Result<(u32, String), String> {
        match args {
            [n, col] => match n.parse::<u64>() {
                Ok(0) | Err(_) => Err(format!("invalid width {n:?} in {s:?} (a whole number, at least 1)")),
                Ok(w) => match u32::try_from(w) {
                    Ok(w) if w <= MAX_WIDTH => Ok((w, valid_column(col)?)),
                    _ => Err(format!(
                        "width {w} in {s:?} is too large: at most {MAX_WIDTH} (Iceberg widths are 32-bit integers)"
                    )),
                },
            },
            _ => Err(format!("{name} takes (width, column): {s:?}")),
        }
    };
    let single = |args: &[&str]| -> Result<String, String> {
        match args {
            [col] => valid_column(col),
            _ => Err(format!("{name} takes one column: {s:?}")),
        }
    };
    let (transform, source) = match name.trim() {
        "identity" => (Transform::Identity, single(&args)?),
        "year" => (Transform::Year, single(&args)?),
        "month" => (Transform::Month, single(&args)?),
        "day" => (Transform::Day, single(&args)?),
        "hour" => (Transform::Hour, single(&args)?),
        "bucket" => {
            let (n, col) = width(&args)?;
            (Transform::Bucket(n), col)
        }
        "truncate" => {
            let (n, col) = width(&args)?;
            (Transform::Truncate(n), col)
        }
        other => {
            return Err(format!("unknown transform {other:?} (identity, year, month, day, hour, bucket, truncate)"));
        }
    };
    Ok(PartitionField { source, transform })
}

fn valid_column(s: &str) -> Result<String, String> {
    let ok = !s.is_empty() && s.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'));
    if ok { Ok(s.to_string()) } else { Err(format!("invalid column name {s:?}")) }
}

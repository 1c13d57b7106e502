//! The `floe` command-line program's commands, as a library so that tests can run them.

pub mod audit;
pub mod aws;
pub mod backfill;
pub mod compact;
pub mod convert;
pub mod health;
pub mod inspect;
pub mod local;
pub mod resolve;
pub mod table;
pub mod warehouse;

use std::path::Path;

/// Refuses what is not a regular file before opening it: a FIFO would block the open,
/// and a device (`/dev/zero`) never ends. `what` names the argument in the error.
pub fn regular_file(what: &str, path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) if m.is_dir() => anyhow::bail!("{what} {}: a folder, not a file", path.display()),
        Ok(_) => {
            anyhow::bail!("{what} {}: not a regular file (a device, FIFO or socket has no known end)", path.display())
        }
        Err(e) => anyhow::bail!("{what} {}: {e}", path.display()),
    }
}

/// An error and its causes as one line, `a: b: c`, leaving out a cause whose text is
/// already there (an error that prints its source would otherwise show it twice).
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_do_not_repeat_their_cause() {
        let missing = Path::new("/no/such/floe.toml");
        let e = anyhow::Error::from(floe_core::config::FloeConfig::from_file(missing).unwrap_err());
        assert_eq!(format!("{e:#}").matches("No such file").count(), 2, "the source printed twice: {e:#}");
        assert_eq!(error_line(&e), "/no/such/floe.toml: No such file or directory (os error 2)");
        // Context that does not repeat its cause keeps it.
        let e = anyhow::Error::from(std::io::Error::other("disk full")).context("writing x");
        assert_eq!(error_line(&e), "writing x: disk full");
    }

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_read() {
        let e = regular_file("segment", Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(e, "segment /dev/zero: not a regular file (a device, FIFO or socket has no known end)");
        let dir = tempfile::tempdir().unwrap();
        assert!(regular_file("segment", dir.path()).unwrap_err().to_string().ends_with(": a folder, not a file"));
        let e = regular_file("segment", &dir.path().join("none.log")).unwrap_err().to_string();
        assert!(e.contains("none.log: No such file"), "{e}");
        let file = dir.path().join("x.log");
        std::fs::write(&file, b"").unwrap();
        regular_file("segment", &file).unwrap();
    }
}

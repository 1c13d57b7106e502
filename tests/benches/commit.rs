//! Committer benchmark: time per commit (one task, one append snapshot) on a table with
//! 10 and with 10,000 prior commits, on the local SQLite catalog and file system — the
//! cost must not grow with the table's history.
//!
//! `cargo bench -p floe-tests --bench commit` — writes its rows into BENCHMARKS.md.

#[path = "common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{cpu, update_benchmarks};
use floe_core::committer::TaskResult;
use floe_core::task::CommitTask;

const MEASURED: usize = 50;

/// Task `i`: the next 1000 offsets, its own (unread) file name.
fn task(template: &CommitTask, i: usize) -> CommitTask {
    common::task_at(template, (i * 1000) as i64, &format!("bench-{i}"))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().display().to_string();
    let committer = common::shared::committer::local_committer(dir.path(), "bench");
    let rows = rt.block_on(async {
        let template = common::segment_task(&warehouse).await;
        let mut next = 0;
        let mut rows = Vec::new();
        for prior in [10usize, 10_000] {
            while next < prior {
                let r = committer.commit(&[task(&template, next)], None).await;
                assert_eq!(r.results[0].1, TaskResult::Committed);
                next += 1;
            }
            let mut times = Vec::new();
            for _ in 0..MEASURED {
                let started = Instant::now();
                let r = committer.commit(&[task(&template, next)], None).await;
                times.push(started.elapsed());
                assert_eq!(r.results[0].1, TaskResult::Committed);
                next += 1;
            }
            rows.push((prior, median(times)));
        }
        rows
    });
    let ratio = rows[1].1.as_secs_f64() / rows[0].1.as_secs_f64();
    let mut body = format!(
        "CPU: {}. One task per batch, one append snapshot per commit (manifest, manifest list,\n\
         metadata file, SQLite compare-and-swap, lease renewal), local file system; median of\n\
         {MEASURED} commits after the given number of prior commits. Snapshots beyond 100 expire\n\
         and small manifests are merged every 100 commits, so neither the metadata file nor the\n\
         manifest list grows with history.\n\n| prior commits | time per commit |\n|---|---|\n",
        cpu()
    );
    for (prior, t) in &rows {
        body.push_str(&format!("| {prior} | {:.2} ms |\n", t.as_secs_f64() * 1e3));
    }
    body.push_str(&format!("\n10,000 vs 10: {ratio:.2}× (target ≤ 1.5×).\n"));
    print!("{body}");
    update_benchmarks("commit", "Committer: time per commit vs table history", &body);
}

//! The compactor Lambda: an EventBridge schedule → every registered table's small files
//! rewritten and queued as CompactionTasks for the committer, then its orphans swept;
//! then the stall metric (how long tasks have waited uncommitted), all printed as EMF lines.
//! All logic is in `floe_core::maintenance`; this binary reads its environment and builds
//! its clients once per container.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use floe_aws::lambda::{
    CompactorEnv, CompactorResponse, compactor, handle_compactor_event, init_tracing, measured, print_emf, stop_before,
};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

/// Time kept, after the last table is started, for it to finish before the timeout.
const FINISH_MARGIN: std::time::Duration = std::time::Duration::from_secs(120);

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let env = CompactorEnv::from_env()?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let service = compactor(&aws, &env).await?;
    let (service, timeout) = (&service, env.timeout);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<EventBridgeEvent<Value>>| async move {
        let deadline = stop_before(event.context.deadline(), FINISH_MARGIN, timeout);
        let (response, metrics) =
            measured("compactor", handle_compactor_event(service, event.payload, Some(deadline))).await;
        print_emf(&metrics);
        Ok::<CompactorResponse, Error>(response)
    }))
    .await
}

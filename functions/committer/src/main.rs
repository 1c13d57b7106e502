//! The committer Lambda: batches of CommitTasks from the FIFO queue → one Iceberg
//! snapshot per table, exactly once, with an SQS partial batch response; its metrics
//! printed as EMF lines after each invocation. All logic is in
//! `floe_core::committer`; this binary reads its environment and builds its clients once.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use floe_aws::lambda::{
    CommitterEnv, committer, committer_catalog, handle_committer_event, init_tracing, measured, print_emf, stop_before,
};
use lambda_runtime::{Error, LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let env = CommitterEnv::from_env()?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let catalog = committer_catalog(&aws, &env).await?;
    let service = committer(&aws, &env, catalog);
    let (service, timeout) = (&service, env.timeout);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // Stop retrying conflicts well before the function's own timeout.
        let deadline = stop_before(event.context.deadline(), std::time::Duration::from_secs(5), timeout);
        let (response, metrics) =
            measured("committer", handle_committer_event(service, event.payload, Some(deadline))).await;
        print_emf(&metrics);
        Ok::<SqsBatchResponse, Error>(response)
    }))
    .await
}

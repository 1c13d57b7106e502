//! The materializer Lambda: S3 (or EventBridge) object-created events → Parquet files in
//! the warehouse → one CommitTask per segment on the FIFO queue; its metrics printed as EMF
//! lines after each invocation. All logic is in
//! `floe_core::materializer`; this binary reads its environment and builds its clients
//! once per container.

use floe_aws::lambda::{MaterializerEnv, handle_materializer_event, init_tracing, materializer, measured, print_emf};
use lambda_runtime::{Diagnostic, Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    init_tracing();
    let env = MaterializerEnv::from_env()?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let materializer = materializer(&aws, &env).await?;
    let materializer = &materializer;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let failed = |f: floe_aws::lambda::MaterializerFailure| Diagnostic {
            error_type: f.error_type().to_string(),
            error_message: f.to_string(),
        };
        let (response, metrics) =
            measured("materializer", handle_materializer_event(materializer, event.payload)).await;
        print_emf(&metrics);
        response.map_err(failed)
    }))
    .await
}

//! The S3 clients of the warehouse's files: the process's own, and per location prefix
//! the one a REST catalog vended for a table ([`S3Clients`], over [`VendedRoutes`]). The
//! vended credentials themselves, as a `loadTable` answer states them, are the REST
//! catalog's (`floe_core::catalog::rest::vended`).
//!
//! ```text
//!  RestCatalog loadTable / stage-create  (X-Iceberg-Access-Delegation: vended-credentials)
//!     └─ config + storage-credentials ─▶ VendedS3 per prefix ─▶ VendedRoutes::register(table, …)
//!  FileIO (s3.rs) and the sweep's listing (files.rs), for each path:
//!     S3Clients::client(path) ─▶ the longest registered prefix of the path: its vended client
//!                                 (the table reloaded first when its credentials are due)
//!                              ─▶ none: the process's own client
//! ```
//!
//! Every read and write of a table's files goes through a `FileIO` or the sweep's
//! listing with a path under the table's location, so routing by location prefix (as the
//! spec's `storage-credentials` do) gives each table its credentials without the core
//! knowing about them: the catalog registers, the storage looks up. The routes are made
//! with the catalog (`crate::catalogs::open`) and handed to both: the REST catalog
//! registers into them, the `FileIO` and the sweep's listing of the same catalog read
//! them. Nothing is process-global.
//!
//! Refresh: a credential is due at 80% of its life (`refresh_at_ms`), or at once when S3
//! refuses it (403). A due credential's table is loaded again from its catalog before the next use, which
//! registers the new credentials; one caller reloads, the others go on with the keys in
//! hand, and a reload that failed is tried again 5 seconds later.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use aws_sdk_s3::Client;
use aws_sdk_s3::config::interceptors::BeforeDeserializationInterceptorContextRef;
use aws_sdk_s3::config::{
    BehaviorVersion, ConfigBag, Credentials, IdentityCache, Intercept, ProvideCredentials, Region, RuntimeComponents,
};
use aws_sdk_s3::error::BoxError;

use floe_core::catalog::rest::vended::{ReloadTable, StorageCredentials, VendedS3, refresh_at_ms};
use floe_core::table::TableName;

/// After a reload is tried, the next waits this long, and requests meanwhile go on with
/// the keys in hand: while the catalog is down, its requests do not multiply with S3's.
const RELOAD_RETRY_MS: i64 = 5_000;

/// The keys of a vended credential, as the SDK signs with them.
fn credentials(v: &VendedS3) -> Credentials {
    let (id, secret, token) = (&v.access_key_id, &v.secret_access_key, v.session_token.clone());
    Credentials::new(id, secret, token, None, "rest-catalog-vended")
}

/// The client of one vended place, kept while the catalog vends it new keys: the keys
/// it signs with are read from `keys` at each request, so its connections are kept too.
#[derive(Clone)]
struct Signer {
    client: Client,
    keys: Arc<RwLock<Credentials>>,
    /// Set on a 403 from S3 (the client's interceptor): reload before the next use.
    refused: Arc<AtomicBool>,
}

impl Signer {
    /// An S3 client signing with `v`'s keys, on its endpoint, region and addressing where
    /// given (else `base`'s; path-style with a vended endpoint).
    fn new(v: &VendedS3, base: Option<&aws_config::SdkConfig>) -> Signer {
        let keys = Arc::new(RwLock::new(credentials(v)));
        let refused = Arc::new(AtomicBool::new(false));
        let mut config = match base {
            Some(aws) => aws_sdk_s3::config::Builder::from(aws),
            None => aws_sdk_s3::Config::builder().behavior_version(BehaviorVersion::latest()),
        };
        config = config
            .credentials_provider(CurrentKeys(keys.clone()))
            .identity_cache(IdentityCache::no_cache())
            .interceptor(RefusedMarksDue(refused.clone()));
        if let Some(endpoint) = &v.endpoint {
            config = config.endpoint_url(endpoint);
        }
        let region = v.region.clone().or_else(|| base.and_then(|aws| aws.region()).map(|r| r.to_string()));
        config = config.region(Region::new(region.unwrap_or_else(|| "us-east-1".into())));
        let client = Client::from_conf(config.force_path_style(v.path_style.unwrap_or(v.endpoint.is_some())).build());
        Signer { client, keys, refused }
    }

    /// Signs with `v`'s keys from now on, no longer refused.
    fn rekey(&self, v: &VendedS3) {
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = credentials(v);
        self.refused.store(false, Ordering::Relaxed);
    }
}

/// The keys a [`Signer`] holds now (its client asks at each request: no identity cache).
#[derive(Debug)]
struct CurrentKeys(Arc<RwLock<Credentials>>);

impl ProvideCredentials for CurrentKeys {
    fn provide_credentials<'a>(&'a self) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let keys = self.0.read().unwrap_or_else(|e| e.into_inner()).clone();
        aws_credential_types::provider::future::ProvideCredentials::ready(Ok(keys))
    }
}

/// One vended credential in use.
struct Route {
    table: TableName,
    /// The table's location when registered.
    location: String,
    vended: VendedS3,
    signer: Signer,
    refresh_at_ms: Option<i64>,
    reloader: Weak<dyn ReloadTable>,
    /// No reload is tried before this time ([`RELOAD_RETRY_MS`] after the last one).
    reload_from_ms: AtomicI64,
}

impl Route {
    fn due(&self, now_ms: i64) -> bool {
        self.signer.refused.load(Ordering::Relaxed) || self.refresh_at_ms.is_some_and(|at| now_ms >= at)
    }

    /// Whether this caller reloads the table now: it is due and no reload was tried in
    /// the last [`RELOAD_RETRY_MS`]. The claim is taken at once, so concurrent callers go
    /// on with the keys in hand rather than reload too.
    fn claim_reload(&self, now_ms: i64) -> bool {
        let from = self.reload_from_ms.load(Ordering::Relaxed);
        self.due(now_ms)
            && now_ms >= from
            && self
                .reload_from_ms
                .compare_exchange(from, now_ms + RELOAD_RETRY_MS, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// The vended credentials in use, by location prefix: a fact about the files under a
/// location, whichever table of the catalog learnt it. Made with the catalog, shared by
/// it (registering) and its storage ([`S3Clients`], looking up).
#[derive(Default)]
pub struct VendedRoutes {
    routes: RwLock<Vec<Route>>,
    /// The configuration a new vended client starts from (the catalog's AWS one, if any).
    base: Option<aws_config::SdkConfig>,
}

impl VendedRoutes {
    /// No routes yet; `base`: the configuration a new vended client starts from (the
    /// catalog's AWS one; none: the SDK's defaults).
    pub fn new(base: Option<aws_config::SdkConfig>) -> Arc<VendedRoutes> {
        Arc::new(VendedRoutes { routes: RwLock::default(), base })
    }
}

impl StorageCredentials for VendedRoutes {
    /// Registrations are by location: two tables of one name in other places do not meet.
    fn register(
        &self,
        table: &TableName,
        location: &str,
        vended: Vec<VendedS3>,
        reloader: Weak<dyn ReloadTable>,
        now_ms: i64,
    ) {
        let location = location.trim_end_matches('/');
        let mut made = Vec::new();
        for v in vended {
            let kept = self.with_route(|r| r.location == location && r.vended.same_client(&v), |r| r.signer.clone());
            let signer = match kept {
                Some(signer) => {
                    signer.rekey(&v);
                    signer
                }
                None => Signer::new(&v, self.base.as_ref()),
            };
            let refresh_at_ms = refresh_at_ms(now_ms, v.expires_at_ms);
            let (table, location) = (table.clone(), location.to_string());
            made.push(Route {
                table,
                location,
                vended: v,
                signer,
                refresh_at_ms,
                reloader: reloader.clone(),
                reload_from_ms: AtomicI64::new(0),
            });
        }
        let mut routes = self.routes.write().unwrap_or_else(|e| e.into_inner());
        routes.retain(|r| r.location != location && !made.iter().any(|m| m.vended.prefix == r.vended.prefix));
        routes.extend(made);
    }
}

impl VendedRoutes {
    /// The vended client for `path`, its table reloaded first when due (at most once per
    /// 5 seconds); `None`: no catalog vended credentials for it.
    pub async fn client(&self, path: &str) -> Option<Client> {
        let now = chrono::Utc::now().timestamp_millis();
        let reload = self.with_route(
            |r| r.vended.covers(path),
            |r| r.claim_reload(now).then(|| (r.table.clone(), r.reloader.clone())),
        )?;
        if let Some((table, reloader)) = reload
            && let Some(reloader) = reloader.upgrade()
            && let Err(e) = reloader.reload(&table).await
        {
            tracing::warn!(table = %table, error = %e, "reloading the table for new storage credentials failed");
        }
        self.with_route(|r| r.vended.covers(path), |r| r.signer.client.clone())
    }

    /// The registered prefix whose client `path` takes, if any.
    pub fn prefix_of(&self, path: &str) -> Option<String> {
        self.with_route(|r| r.vended.covers(path), |r| r.vended.prefix.clone())
    }

    /// `what` of the route with the longest prefix among those `matches` takes.
    fn with_route<T>(&self, matches: impl Fn(&Route) -> bool, what: impl FnOnce(&Route) -> T) -> Option<T> {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        routes.iter().filter(|r| matches(r)).max_by_key(|r| r.vended.prefix.len()).map(what)
    }
}

/// The warehouse's S3 clients: the vended one of a path's table (its catalog's
/// [`VendedRoutes`]), else the process's own.
pub struct S3Clients {
    own: tokio::sync::OnceCell<Client>,
    /// The catalog's vended credentials; none: it vends none.
    routes: Option<Arc<VendedRoutes>>,
    /// For an own client made on first use (`floe local`): path-style addressing.
    path_style: bool,
}

impl S3Clients {
    /// `own` for every path.
    pub fn new(own: Client) -> Arc<S3Clients> {
        Arc::new(S3Clients { own: tokio::sync::OnceCell::new_with(Some(own)), routes: None, path_style: false })
    }

    /// The client `routes` holds for a path's table, else `own`.
    pub fn vended(own: Client, routes: Arc<VendedRoutes>) -> Arc<S3Clients> {
        Arc::new(S3Clients { own: tokio::sync::OnceCell::new_with(Some(own)), routes: Some(routes), path_style: false })
    }

    /// The own client made from the default AWS configuration on first use only (a
    /// `floe local` run whose catalog vends every table's credentials never loads it);
    /// `AWS_S3_FORCE_PATH_STYLE=true` for path-style addressing.
    /// `routes` are the catalog's vended credentials.
    pub fn lazy(routes: Arc<VendedRoutes>) -> Arc<S3Clients> {
        let path_style = std::env::var("AWS_S3_FORCE_PATH_STYLE").is_ok_and(|v| v == "true");
        Arc::new(S3Clients { own: tokio::sync::OnceCell::new(), routes: Some(routes), path_style })
    }

    /// The client for `path`: its table's vended one, else the own.
    pub async fn client(&self, path: &str) -> Client {
        let vended = match &self.routes {
            Some(routes) => routes.client(path).await,
            None => None,
        };
        match vended {
            Some(client) => client,
            None => self.own().await,
        }
    }

    /// The registered prefix whose vended client `path` takes, if any.
    pub fn prefix_of(&self, path: &str) -> Option<String> {
        self.routes.as_ref().and_then(|routes| routes.prefix_of(path))
    }

    async fn own(&self) -> Client {
        self.own
            .get_or_init(|| async {
                let aws = aws_config::load_defaults(BehaviorVersion::latest()).await;
                Client::from_conf(aws_sdk_s3::config::Builder::from(&aws).force_path_style(self.path_style).build())
            })
            .await
            .clone()
    }
}

/// Marks a vended credential due when S3 answers 403 with it (expired, revoked).
#[derive(Debug)]
struct RefusedMarksDue(Arc<AtomicBool>);

impl Intercept for RefusedMarksDue {
    fn name(&self) -> &'static str {
        "FloeVendedCredentialRefused"
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context.response().status().as_u16() == 403 {
            self.0.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use serde_json::json;
    use std::sync::OnceLock;

    const LOCATION: &str = "s3://bucket/wh/kafka/orders";

    fn base() -> aws_config::SdkConfig {
        aws_config::SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .build()
    }

    fn vended(prefix: &str, key: &str, expires_at_ms: Option<i64>) -> VendedS3 {
        let answer = json!({"config": {"s3.access-key-id": key, "s3.secret-access-key": "s",
                                       "s3.session-token-expires-at-ms": expires_at_ms}});
        VendedS3::from_load_result(prefix, &answer).remove(0)
    }

    /// The access key id `path` is signed with after [`VendedRoutes::client`] (what its
    /// client's credentials provider answers; "own": none vended).
    async fn key_of(routes: &VendedRoutes, path: &str) -> String {
        match routes.client(path).await {
            None => "own".into(),
            Some(_) => routes
                .with_route(|r| r.vended.covers(path), |r| r.signer.keys.read().unwrap().access_key_id().to_string())
                .unwrap(),
        }
    }

    /// Each reload registers a new key, counting.
    struct Catalog {
        routes: Arc<VendedRoutes>,
        reloads: std::sync::atomic::AtomicUsize,
        me: OnceLock<Weak<dyn ReloadTable>>,
        /// Reloads fail (the catalog is down).
        down: AtomicBool,
    }

    impl Catalog {
        /// A catalog registering into its own routes; `down`: its reloads fail.
        fn new(down: bool) -> (Arc<VendedRoutes>, Arc<Catalog>) {
            let routes = VendedRoutes::new(Some(base()));
            let catalog = Arc::new(Catalog {
                routes: routes.clone(),
                reloads: Default::default(),
                me: OnceLock::new(),
                down: AtomicBool::new(down),
            });
            let me: Arc<dyn ReloadTable> = catalog.clone();
            catalog.me.set(Arc::downgrade(&me)).ok().unwrap();
            (routes, catalog)
        }

        fn register(&self, table: &TableName, key: &str, received_ms: i64, expires_at_ms: i64) {
            let me = self.me.get().unwrap().clone();
            let v = vec![vended(LOCATION, key, Some(expires_at_ms))];
            self.routes.register(table, LOCATION, v, me, received_ms);
        }
    }

    #[async_trait]
    impl ReloadTable for Catalog {
        async fn reload(&self, table: &TableName) -> Result<(), String> {
            let n = self.reloads.fetch_add(1, Ordering::SeqCst) + 1;
            if self.down.load(Ordering::SeqCst) {
                return Err("catalog unavailable".into());
            }
            let now = chrono::Utc::now().timestamp_millis();
            self.register(table, &format!("k{n}"), now, now + 3_600_000);
            Ok(())
        }
    }

    #[tokio::test]
    async fn paths_take_their_table_s_key_until_it_is_due_then_the_table_is_reloaded() {
        let (routes, catalog) = Catalog::new(false);
        let table = TableName { namespace: "kafka".into(), name: "orders".into() };
        let now = chrono::Utc::now().timestamp_millis();
        let data = format!("{LOCATION}/data/a.parquet");
        catalog.register(&table, "k0", now, now + 3_600_000);
        assert_eq!(key_of(&routes, &data).await, "k0");
        assert_eq!(key_of(&routes, "s3://bucket/wh/kafka/other/x").await, "own");
        assert_eq!(catalog.reloads.load(Ordering::SeqCst), 0);
        let keys = |routes: &VendedRoutes| routes.with_route(|r| r.vended.covers(&data), |r| r.signer.keys.clone());
        let first = keys(&routes).unwrap();
        // Expired: the table is reloaded before the next use, which takes the new key; the
        // client (and its connections) is the same, signing with the new key.
        catalog.register(&table, "k0", now - 60_000, now - 1);
        assert_eq!(key_of(&routes, &data).await, "k1");
        assert!(Arc::ptr_eq(&first, &keys(&routes).unwrap()));
        assert_eq!(key_of(&routes, &data).await, "k1");
        // Refused by S3 (the interceptor's mark): reloaded too.
        routes.with_route(|r| r.vended.covers(&data), |r| r.signer.refused.store(true, Ordering::SeqCst));
        assert_eq!(key_of(&routes, &data).await, "k2");
        assert_eq!(catalog.reloads.load(Ordering::SeqCst), 2);
        // Nothing vended any more: the own client.
        routes.register(&table, LOCATION, Vec::new(), catalog.me.get().unwrap().clone(), now);
        assert_eq!(key_of(&routes, &data).await, "own");
    }

    #[tokio::test]
    async fn a_catalog_that_is_down_is_asked_again_only_after_the_retry_interval() {
        let (routes, catalog) = Catalog::new(true);
        let table = TableName { namespace: "kafka".into(), name: "orders".into() };
        let now = chrono::Utc::now().timestamp_millis();
        let data = format!("{LOCATION}/data/a.parquet");
        catalog.register(&table, "k0", now - 60_000, now - 1);
        // Due, the catalog down: one reload is tried, and the requests go on with the keys
        // in hand until the retry interval has passed.
        for _ in 0..5 {
            assert_eq!(key_of(&routes, &data).await, "k0");
        }
        assert_eq!(catalog.reloads.load(Ordering::SeqCst), 1);
        let from = routes.with_route(|r| r.vended.covers(&data), |r| r.reload_from_ms.load(Ordering::SeqCst)).unwrap();
        assert!(from >= now + RELOAD_RETRY_MS, "{from} vs {now}");
        // The interval passed (as if), the catalog back: the next use reloads.
        catalog.down.store(false, Ordering::SeqCst);
        routes.with_route(|r| r.vended.covers(&data), |r| r.reload_from_ms.store(0, Ordering::SeqCst));
        assert_eq!(key_of(&routes, &data).await, "k2");
        assert_eq!(catalog.reloads.load(Ordering::SeqCst), 2);
    }
}

//! `recliner`: a CouchDB-compatible database server with a built-in replicator.
//!
//! This binary composes the store, the HTTP API and (later) the replicator and
//! the `_replicator` document manager. It reads the layered configuration,
//! sets up logging, serves HTTP, and shuts down gracefully on SIGINT/SIGTERM.

mod backup;
mod config;
mod logging;
mod manager;
mod node_config;
mod replicate_cmd;
mod request_target;
mod security;
mod shared_admins;
mod tls;

/// jemalloc instead of glibc's allocator: the blocking threads that open
/// and close database connections left glibc's per-thread arenas holding
/// freed memory, and resident memory grew with every database ever opened.
/// jemalloc gives freed memory back within a second (see the build
/// settings in `.cargo/config.toml`) and measured faster under load.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use config::{Config, FlagOverrides};

/// Recliner: a CouchDB-compatible database server with a built-in replicator.
///
/// Run without a subcommand to start the server (on 127.0.0.1:5984 with its
/// data in ./data unless told otherwise). Every setting can also be given as
/// an environment variable (RECLINER_PORT, RECLINER_BIND, RECLINER_DATA_DIR,
/// RECLINER_LOG_LEVEL, RECLINER_REPLICATOR_MAX_JOBS, ...) or in
/// recliner.toml; `--print-config` shows them all.
///
/// `recliner replicate SOURCE TARGET` runs one replication between two
/// database URLs with the server's replicator and reports its progress.
#[derive(Debug, Parser)]
#[command(name = "recliner", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to listen on [default: 127.0.0.1]
    #[arg(long, global = true)]
    bind: Option<std::net::IpAddr>,
    /// Port to listen on; 0 picks a free one [default: 5984]
    #[arg(long, global = true)]
    port: Option<u16>,
    /// Folder for the server's data [default: ./data]
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Where the databases are kept: postgres://user:password@host/dbname
    /// for a PostgreSQL database several nodes share [default: SQLite files
    /// in the data folder]
    #[arg(long, global = true)]
    store: Option<String>,
    /// Log filter, e.g. info or debug [default: info]
    #[arg(long, global = true)]
    log_level: Option<String>,
    /// Write the log to this file, rotated by size (log_max_size,
    /// log_max_files), instead of standard error
    #[arg(long, global = true)]
    log_file: Option<PathBuf>,
    /// Configuration file [default: recliner.toml in the data folder, if present]
    #[arg(long, env = "RECLINER_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Print the effective configuration as TOML and exit
    #[arg(long)]
    print_config: bool,
    /// A server admin, NAME:PASSWORD (also RECLINER_ADMIN); its password is
    /// hashed in memory and never written anywhere
    #[arg(long, env = "RECLINER_ADMIN", hide_env_values = true)]
    admin: Option<String>,
    /// Let every caller act as a server admin (no login). Only for a
    /// throwaway server nobody else can reach
    #[arg(long)]
    insecure_admin_party: bool,
    /// Serve HTTPS too, with this certificate chain (PEM)
    #[arg(long, global = true)]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM)
    #[arg(long, global = true)]
    tls_key: Option<PathBuf>,
    /// Port for HTTPS; 0 picks a free one [default: 6984]
    #[arg(long, global = true)]
    tls_port: Option<u16>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Replicate SOURCE to TARGET (database URLs) and exit: status 0 only on
    /// success. Shows progress (docs read and written, changes pending, rate)
    /// and a final summary. Checkpoints are shared with this data folder's
    /// server, so a second run resumes where the first stopped.
    Replicate(replicate_cmd::ReplicateArgs),
    /// Back a database up to a file (or standard output) in the format of
    /// @cloudant/couchbackup: every leaf revision with its history and its
    /// attachments. An interrupted dump to a file resumes when run again.
    Dump(backup::DumpArgs),
    /// Load a backup written by `recliner dump` or couchbackup into a
    /// database (created if missing), revisions and conflicts as they were.
    Load(backup::LoadArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let flags = FlagOverrides {
        bind: cli.bind,
        port: cli.port,
        data_dir: cli.data_dir.clone(),
        store: cli.store.clone(),
        log_level: cli.log_level.clone(),
        log_file: cli.log_file.clone(),
        insecure_admin_party: cli.insecure_admin_party.then_some(true),
        tls_cert: cli.tls_cert.clone(),
        tls_key: cli.tls_key.clone(),
        tls_port: cli.tls_port,
    };
    let env: Vec<(String, String)> = std::env::vars().collect();
    let config = match Config::load(cli.config.as_deref(), &flags, &env)
        .and_then(|c| c.validate().map(|()| c))
    {
        Ok(config) => config,
        Err(line) => {
            eprintln!("recliner: {line}");
            return ExitCode::from(2);
        }
    };
    let explicit_admin = match cli.admin.as_deref().map(security::parse_admin_arg) {
        None => None,
        Some(Ok(admin)) => Some(admin),
        Some(Err(line)) => {
            eprintln!("recliner: {line}");
            return ExitCode::from(2);
        }
    };
    if cli.print_config {
        return match toml_string(&config) {
            Ok(text) => {
                print!("{text}");
                // Names only: passwords and their hashes are never shown.
                let names: Vec<&str> = config.admins.keys().map(String::as_str).collect();
                if !names.is_empty() {
                    println!("# admins (passwords hidden): {}", names.join(", "));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("recliner: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let mut log_config = config.clone();
    if cli.command.is_some() && cli.log_level.is_none() {
        // A command's output is its progress and summary: only problems are logged.
        log_config.log_level = "warn".into();
    }
    if let Err(line) = logging::init(&log_config) {
        eprintln!("recliner: {line}");
        return ExitCode::from(2);
    }
    if let Err(line) = config.peer_tls().and_then(replicator::set_peer_tls) {
        eprintln!("recliner: {line}");
        return ExitCode::from(2);
    }
    // Handlers and blocking tasks hold documents up to `ejson::MAX_DEPTH`
    // deep: their threads get the stack that takes.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(ejson::THREAD_STACK)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("recliner: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(Command::Replicate(args)) = cli.command {
        let store = match config.open_store() {
            Ok(store) => store,
            Err(e) => {
                eprintln!(
                    "recliner: cannot open the store ({}): {e}",
                    config.store_shown()
                );
                return ExitCode::FAILURE;
            }
        };
        let defaults = config.scheduler_config().spec_defaults;
        return runtime.block_on(replicate_cmd::run(args, store, &defaults));
    }
    match cli.command {
        Some(Command::Dump(args)) => {
            return runtime.block_on(backup::dump(args, &config));
        }
        Some(Command::Load(args)) => {
            return runtime.block_on(backup::load(args, &config));
        }
        _ => {}
    }
    // One server per data folder: a second one would write the same files.
    let _data_lock = match store::DataDirLock::acquire(&config.data_dir) {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("recliner: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config_file = config.file_path(cli.config.as_deref());
    let setup = match security::prepare(&config, &config_file, explicit_admin) {
        Ok(setup) => setup,
        Err(e) => {
            eprintln!("recliner: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    announce(&config, &setup);
    match runtime.block_on(serve(config, setup, config_file)) {
        Ok(stopped) if stopped.restart => {
            runtime.shutdown_timeout(std::time::Duration::from_secs(5));
            let e = restart(&stopped);
            tracing::error!(error = %e, "cannot restart");
            eprintln!("recliner: cannot restart: {e}");
            ExitCode::FAILURE
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("recliner: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Tells the operator how to log in, once: a generated admin's password is
/// shown only now. An admin party is warned about at every start.
fn announce(config: &Config, setup: &security::Setup) {
    if let Some((name, password)) = &setup.generated {
        let file = setup
            .written
            .as_ref()
            .map(|f| f.display().to_string())
            .unwrap_or_default();
        println!(
            "No admin was configured, so one was created. Log in as:\n  name:     {name}\n  password: {password}\n\
             This is the only time the password is shown; only its hash is kept (in {file}).\n\
             Set your own with --admin NAME:PASSWORD or RECLINER_ADMIN, or under [admins] in that file."
        );
        tracing::info!(admin = %name, file = %file, "created the first server admin");
    }
    if config.cors_enabled
        && config.cors_credentials
        && config.cors_origins.iter().any(|o| o.trim() == "*")
    {
        let warning = "CORS allows any origin with credentials: any web page a logged-in user opens can act as that user here. List the origins you trust in cors_origins instead of *.";
        eprintln!("recliner: WARNING: {warning}");
        tracing::warn!("{warning}");
    }
    if config.proxy_auth_enabled && !config.proxy_use_secret {
        let warning = "proxy authentication trusts X-Auth-CouchDB-UserName from any caller: set proxy_use_secret, or let only your proxy reach this server.";
        eprintln!("recliner: WARNING: {warning}");
        tracing::warn!("{warning}");
    }
    if config.insecure_admin_party {
        let warning = "ADMIN PARTY: --insecure-admin-party is on, so EVERY caller is a server admin and can read, change and delete everything. Never use it on a server others can reach.";
        eprintln!("recliner: WARNING: {warning}");
        tracing::warn!("{warning}");
    }
}

/// Puts the password rules (`password_regexp`) in force. A setting that cannot be
/// read refuses every new password (as CouchDB does) and says why here.
fn apply_password_rules(setting: &str) {
    let rules = auth::password_rules::PasswordRules::parse(setting);
    if let auth::password_rules::PasswordRules::Broken(why) = &rules {
        tracing::warn!(reason = %why, "password_regexp cannot be read: new passwords are refused until it is mended");
    }
    auth::password_rules::set_password_rules(rules);
}

/// How long after `authentication_db` names another database that
/// database gets `_design/_auth`.
const AUTH_DB_FOLLOW_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// Makes sure the authentication database, if it exists, holds
/// `_design/_auth`, as CouchDB does when it starts following it (at start,
/// and when the setting names another database).
async fn ensure_auth_design_doc(store: &store::Store) {
    let name = access::authentication_db();
    let result = match store.db(&name).await {
        Ok(db) => access::ensure_auth_design_doc(&db).await,
        Err(store::StoreError::DbNotFound(_)) => Ok(()),
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        tracing::warn!(db = %name, error = %e, "cannot write _design/_auth");
    }
}

/// The configuration as TOML, with the store's password hidden.
fn toml_string(config: &Config) -> anyhow::Result<String> {
    let mut shown = config.clone();
    shown.store = config::redact_url(&config.store);
    Ok(toml::to_string(&shown)?)
}

async fn serve(
    config: Config,
    setup: security::Setup,
    config_file: PathBuf,
) -> anyhow::Result<Stopped> {
    let store = config
        .open_store()
        .map_err(|e| anyhow::anyhow!("cannot open the store ({}): {e}", config.store_shown()))?;
    // CouchDB's system databases exist from the first start.
    for system in store::name::SYSTEM_DATABASES {
        match store.create_db(system).await {
            // The events name every database: server admins only, whatever
            // `default_security` says.
            Ok(db) if *system == store::db_events::GLOBAL_CHANGES_DB => {
                db.set_security(serde_json::json!({
                    "members": {"roles": ["_admin"]},
                    "admins": {"roles": ["_admin"]}
                }))
                .await?
            }
            Ok(_) | Err(store::StoreError::DbExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    access::set_authentication_db(&config.users_db());
    apply_password_rules(&config.password_rules());
    ensure_auth_design_doc(&store).await;
    let validators = design_functions::Validators::new(design_functions::Engine::new(
        config.query_server_limits(),
    ));
    let scheduler =
        replicator::Scheduler::new(store.clone(), config.scheduler_config(), validators.clone());
    // The configuration API shows and keeps the admins as hashes, the
    // generated one too; the command line's admin stays apart from them.
    let mut config = config;
    config.admins = setup
        .admins
        .iter()
        .filter(|(name, _)| setup.explicit.as_ref().is_none_or(|(n, _)| n != name))
        .map(|(name, creds)| (name.clone(), creds.to_admin_string()))
        .collect();
    // Nodes sharing a store share the cookie secret too, so a session
    // cookie from one is good on every other behind the same load balancer
    // (unless the configuration names a secret of its own).
    let secret = match (
        &config.secret,
        store.shared_value("cookie_secret", &setup.secret).await?,
    ) {
        (Some(own), _) if !own.is_empty() => setup.secret.clone(),
        (_, Some(shared)) => shared,
        _ => setup.secret.clone(),
    };
    let api_config_of = {
        let explicit = setup.explicit.clone();
        move |config: &Config| {
            let mut api = config.api_config();
            api.auth.admins = security::admins_of(config, explicit.as_ref());
            // A secret set through the configuration API applies at once.
            api.auth.secret = match &config.secret {
                Some(own) if !own.is_empty() => own.clone(),
                _ => secret.clone(),
            };
            api
        }
    };
    let mut state = http_api::AppState::with_scheduler(
        store.clone(),
        api_config_of(&config),
        scheduler.clone(),
        validators,
    );
    // The same node after a restart on its folder: it takes back its own
    // replication leases at once instead of waiting for them to run out.
    state.node = store::node_uuid(&config.data_dir)?.into();
    let server_config = std::sync::Arc::new(node_config::ServerConfig::new(
        config.clone(),
        config_file,
        scheduler.clone(),
        store.server_uuid().to_string(),
    ));
    state.node_config = Some(server_config.clone());
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let roles: manager::RolesLookup = {
        let state = state.clone();
        std::sync::Arc::new(move |name: String| {
            let state = state.clone();
            Box::pin(async move { state.roles_of(&name).await })
        })
    };
    let manager = tokio::spawn(
        manager::ReplicatorManager::new(
            store.clone(),
            scheduler.clone(),
            roles,
            state.node.clone(),
            // What an anonymous caller is: in an admin party, an admin.
            if config.insecure_admin_party {
                auth::UserCtx::party_admin()
            } else {
                auth::UserCtx::anonymous()
            },
        )
        .run(shutdown_rx.clone()),
    );
    let rotation = tokio::spawn(scheduler.clone().run(shutdown_rx.clone()));
    // Nodes sharing a store share their admins and show each other's
    // replications.
    let mut admins = shared_admins::AdminSync::default();
    if store.is_shared() {
        admins.sync(&store, &server_config).await;
    }
    let publisher = store.is_shared().then(|| {
        let state = state.clone();
        let (store, server_config) = (store.clone(), server_config.clone());
        let mut stop = shutdown_rx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(manager::LEASE_TICK);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        admins.sync(&store, &server_config).await;
                        http_api::publish_scheduler_state(&state).await;
                    }
                    _ = stop.changed() => break,
                }
            }
        })
    });
    let auto_compaction = config.auto_compaction().map(|settings| {
        let store = store.clone();
        let stop = shutdown_rx.clone();
        tokio::spawn(async move { store.compact_automatically(settings, stop).await })
    });
    let auto_purge = tokio::spawn({
        let store = store.clone();
        let stop = shutdown_rx.clone();
        let interval = std::time::Duration::from_millis(config.auto_purge_interval_ms);
        let node = state.node.to_string();
        async move { store.purge_automatically(interval, &node, stop).await }
    });
    let db_events = tokio::spawn({
        let store = store.clone();
        let stop = shutdown_rx.clone();
        async move { store.record_db_events(stop).await }
    });
    // A deleted database's search indexes are closed with it.
    let search_cleanup = tokio::spawn({
        let (store, searches) = (store.clone(), state.searches.clone());
        let stop = shutdown_rx.clone();
        async move { searches.forget_deleted_databases(&store, stop).await }
    });
    let stopping = state.shutdown.clone();
    let restart = state.restart.clone();
    let live = http_api::LiveApi::new(state);
    // A configuration change through the API applies from the next request.
    server_config.on_change({
        let live = live.clone();
        let store = store.clone();
        node_config::OnChange(Box::new(move |next: &Config| {
            store.apply_options(&next.store_options());
            apply_password_rules(&next.password_rules());
            let users_db = next.users_db();
            if access::configured_authentication_db()
                .as_deref()
                .unwrap_or_default()
                != users_db
            {
                access::set_authentication_db(&users_db);
                // Written a moment later, as CouchDB's authentication
                // cache starts following the database the setting names
                // (documents an admin writes first are not judged by it).
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let store = store.clone();
                    runtime.spawn(async move {
                        tokio::time::sleep(AUTH_DB_FOLLOW_DELAY).await;
                        ensure_auth_design_doc(&store).await
                    });
                }
            }
            live.reconfigure(api_config_of(next))
        }))
    });
    let app = live.router();
    // Both listeners are bound before either is announced: the HTTP line,
    // which scripts wait for, comes first, then the HTTPS one.
    let https = match config.tls_files() {
        Some((cert, key)) => {
            let tls = tls::server_config(cert, key)?;
            let addr = SocketAddr::new(config.bind, config.tls_port);
            let tcp = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let listener = tls::TlsListener::new(tcp, tls)?;
            let local = axum::serve::Listener::local_addr(&listener)?;
            let app = app
                .clone()
                .layer(axum::Extension(http_api::Https))
                .into_make_service_with_connect_info::<SocketAddr>();
            let mut stop = stopping.subscribe();
            let listener = request_target::LenientListener(listener);
            // Tapping (doing nothing) gives the connection its address.
            let listener = axum::serve::ListenerExt::tap_io(listener, |_| {});
            let serving = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .into_future();
            Some((local, serving))
        }
        None => None,
    };
    let addr = SocketAddr::new(config.bind, config.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    // One stable line on stdout so scripts and tests learn the real port.
    println!("Recliner listening on http://{local}");
    tracing::info!(address = %local, data_dir = %config.data_dir.display(), store = %config.store_shown(), "listening");
    let https_port = https.as_ref().map(|(local, _)| local.port());
    let https = https.map(|(local, serving)| {
        println!("Recliner listening on https://{local}");
        tracing::info!(address = %local, "listening (HTTPS)");
        tokio::spawn(serving)
    });
    // Streamed answers (feeds, _all_docs) go out in several writes: without
    // TCP_NODELAY, Nagle's algorithm and the client's delayed ACK stall each
    // response by ~40 ms.
    let listener = request_target::LenientListener(listener);
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.inner().set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    let signal = {
        let stopping = stopping.clone();
        let mut asked = stopping.subscribe();
        async move {
            // A signal, or `_restart` (which sets the flag itself).
            tokio::select! {
                _ = shutdown_signal() => {}
                _ = asked.wait_for(|s| *s) => {}
            }
            // Waiting feeds end now; other requests may finish within the grace period.
            stopping.send_replace(true);
        }
    };
    // Each request knows its caller's address: login lockouts are per address.
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(signal)
        .into_future();
    let mut stop_rx = stopping.subscribe();
    tokio::select! {
        result = server => result.context("server error")?,
        _ = async {
            let _ = stop_rx.wait_for(|s| *s).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => tracing::warn!(grace = ?SHUTDOWN_GRACE, "requests still running after the grace period are cut"),
    }
    if let Some(https) = https {
        https.abort();
    }
    // Running replications checkpoint before the databases close.
    let _ = shutdown_tx.send(true);
    finish_within(manager, "the _replicator manager").await;
    // The scheduler stops every job, each writing its checkpoint; a peer
    // that does not answer cannot hold the shutdown past the limit.
    finish_within(rotation, "the replication jobs").await;
    finish_within(db_events, "the database events recorder").await;
    search_cleanup.abort();
    if let Some(publisher) = publisher {
        publisher.abort();
    }
    // A purge in flight ends with its write; the rest waits for the next
    // round.
    auto_purge.abort();
    if let Some(compaction) = auto_compaction {
        // A compaction step in flight ends with its write; the rest waits
        // for the next start.
        compaction.abort();
    }
    store.close_all().await;
    tracing::info!("stopped");
    let restart = restart.load(std::sync::atomic::Ordering::SeqCst);
    Ok(Stopped {
        restart,
        port: local.port(),
        tls_port: https_port,
    })
}

/// How the server ended.
struct Stopped {
    /// `POST /_node/{node}/_restart` asked to start again.
    restart: bool,
    /// The ports it listened on, which a restart keeps.
    port: u16,
    tls_port: Option<u16>,
}

/// Starts the server again in this process, with the same arguments and
/// environment but the ports it had (a port of 0 would pick new ones).
#[cfg(unix)]
fn restart(stopped: &Stopped) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return e,
    };
    let mut args = Vec::new();
    let mut skip_next = false;
    for arg in std::env::args_os().skip(1) {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let text = arg.to_string_lossy();
        if text == "--port" || text == "--tls-port" {
            skip_next = true;
            continue;
        }
        if text.starts_with("--port=") || text.starts_with("--tls-port=") {
            continue;
        }
        args.push(arg);
    }
    let mut command = std::process::Command::new(exe);
    command
        .args(args)
        .env("RECLINER_PORT", stopped.port.to_string());
    if let Some(port) = stopped.tls_port {
        command.env("RECLINER_TLS_PORT", port.to_string());
    }
    command.exec()
}

#[cfg(not(unix))]
fn restart(_: &Stopped) -> std::io::Error {
    std::io::Error::other("restarting in place needs a Unix system")
}

/// How long the replicator may take to stop at shutdown (its jobs write
/// their checkpoints, possibly to remote peers) before it is cut.
const REPLICATOR_STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Awaits a background task at shutdown, for at most `REPLICATOR_STOP_LIMIT`;
/// past it the task is aborted, so no stuck peer holds the process.
async fn finish_within(task: tokio::task::JoinHandle<()>, what: &str) {
    let abort = task.abort_handle();
    if tokio::time::timeout(REPLICATOR_STOP_LIMIT, task)
        .await
        .is_err()
    {
        tracing::warn!(limit = ?REPLICATOR_STOP_LIMIT, "{what} did not stop in time; cut");
        abort.abort();
    }
}

/// How long requests in flight at shutdown may take to finish.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutdown requested");
}

//! Running the HTTP server: bind, serve, shut down gracefully.

use tokio::net::TcpListener;

use crate::{app, config::AppConfig, db::Db};

/// Serves until SIGINT/SIGTERM; requests in flight are allowed to finish.
pub async fn serve(listener: TcpListener, db: Db, config: AppConfig) -> anyhow::Result<()> {
    let router = app::build(db.clone(), config);
    axum::serve(listener, router).with_graceful_shutdown(shutdown_signal()).await?;
    db.close().await;
    Ok(())
}

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
    tracing::info!("shutting down: finishing requests in flight");
}

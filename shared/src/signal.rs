//! Stopping on request: both binaries stop on Ctrl-C or SIGTERM.

/// Completes on Ctrl-C or SIGTERM.
pub async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = term => {},
    }
}

/// Ctrl-C and SIGTERM, heard from now on: a signal that comes before
/// anyone waits (while a lead starts, say) is kept, not the end of the
/// process. `stopped` on the receiver completes once one came.
pub fn stop_watch() -> std::io::Result<tokio::sync::watch::Receiver<bool>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = interrupt.recv() => {},
        }
        let _ = tx.send(true);
        // Kept open: a receiver that looks later still sees it.
        tx.closed().await;
    });
    Ok(rx)
}

/// Completes once `stop` (from [`stop_watch`]) says a signal came.
pub async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    if stop.wait_for(|stopped| *stopped).await.is_err() {
        std::future::pending::<()>().await;
    }
}

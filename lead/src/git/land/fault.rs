//! The fault tests' hook in a landing, compiled only with the `faults`
//! feature: with `MESH_FAULT_LAND=POINT:FILE`, a landing that reaches
//! `POINT` writes the new commit to `FILE` and stops there for good, so
//! that the test can kill the lead at exactly that instant.

/// Stops the landing for good at `point` if the variable names it.
pub(super) async fn stop_at(point: &str, commit: &str) {
    let Ok(spec) = std::env::var("MESH_FAULT_LAND") else {
        return;
    };
    let Some((at, file)) = spec.split_once(':') else {
        return;
    };
    if at == point {
        let _ = std::fs::write(file, commit);
        tracing::warn!(point, "MESH_FAULT_LAND: the landing stops here");
        std::future::pending::<()>().await;
    }
}

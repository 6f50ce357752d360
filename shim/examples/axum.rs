//! The profiler's endpoints mounted in a program's own axum router, beside its routes, instead of
//! the standalone listener (`jeprof_shim::serve`).
//!
//! ```text
//! cargo run --example axum -p jeprof-shim --features http [-- 127.0.0.1:6060]
//! (open http://127.0.0.1:6060/ in a browser: the heap at a glance)
//! go tool pprof -top http://127.0.0.1:6060/debug/pprof/heap
//! jeprof --text http://127.0.0.1:6060/pprof/heap
//! ```
//!
//! [`jeprof_shim::http::handle`] is synchronous and may block (`?seconds=N` waits N seconds), so
//! it runs on tokio's blocking pool, never on the async workers. Its own allocations are outside
//! sampling; axum's and tokio's, like the rest of the program's, are sampled.

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use axum::Router;

#[global_allocator]
static ALLOC: jeprof_shim::Profiled<tikv_jemallocator::Jemalloc> =
    jeprof_shim::Profiled::new(tikv_jemallocator::Jemalloc);

/// `/`, and every `/debug/pprof/…` and `/pprof/…` request, handed to the profiler.
async fn profiler(method: Method, uri: Uri, body: Bytes) -> impl IntoResponse {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    let answer = tokio::task::spawn_blocking(move || {
        jeprof_shim::http::handle(&jeprof_shim::http::Request {
            method: method.as_str(),
            path: &path,
            query: &query,
            body: &body,
        })
    })
    .await;
    match answer {
        Ok(r) => (
            StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [(header::CONTENT_TYPE, r.content_type)],
            r.body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("the profiler's handler failed: {e}\n").into_bytes(),
        ),
    }
}

/// The program's own work: some memory kept live, so there is something to see.
#[inline(never)]
fn build_cache() -> Vec<Vec<u8>> {
    (0..20_000).map(|i| vec![i as u8; 1024]).collect()
}

#[tokio::main]
async fn main() {
    // Loopback by default: the profiles reveal code addresses and the memory map.
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:6060".into());
    jeprof_shim::set_service("axum-example").expect("a valid service name");
    let cache = std::sync::Arc::new(build_cache());
    let app = Router::new()
        // The profiler's page (its links point to the routes below).
        .route("/", get(profiler))
        .route(
            "/cache",
            get(move || {
                let cache = cache.clone();
                async move { format!("{} cached blocks\n", cache.len()) }
            }),
        )
        .route("/debug/pprof/{*endpoint}", any(profiler))
        .route("/pprof/{*endpoint}", any(profiler))
        // `/pprof/symbol` bodies: the same cap the standalone listener applies (413 beyond).
        .layer(DefaultBodyLimit::max(jeprof_shim::http::MAX_SYMBOL_BODY));
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| panic!("cannot listen on {addr}: {e}"));
    println!("serving on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.expect("axum serves");
}

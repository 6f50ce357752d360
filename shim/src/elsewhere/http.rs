//! The HTTP endpoints, off Linux (feature `http`): there is no profile to serve, so [`serve`]
//! fails and [`handle`] answers 501 with the reason. The types and limits are the crate's one set.

use std::io;
use std::net::ToSocketAddrs;

use super::unsupported;

pub use crate::api::http::{
    Request, Response, Server, MAX_CONCURRENT_WINDOWS, MAX_CONNECTIONS, MAX_HEAD, MAX_SYMBOL_BODY,
    MAX_WINDOW_SECONDS, PATHS, QUEUE, READ_DEADLINE, SHUTDOWN_WAIT, WORKERS, WRITE_DEADLINE,
};

/// 501 Not Implemented, with the reason, for every request.
pub fn handle(_request: &Request<'_>) -> Response {
    Response::error(501, unsupported("http::handle"))
}

/// Fails with [`io::ErrorKind::Unsupported`]: there is no profile to serve here.
pub fn serve(_addr: impl ToSocketAddrs) -> io::Result<Server> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        unsupported("serve"),
    ))
}

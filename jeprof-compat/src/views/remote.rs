//! Profiles fetched from a running process, as jeprof 5.3.1 fetches them
//! (`FetchDynamicProfile`, `FetchSymbols`, `FetchProgramName`):
//! - `GET <base>/pprof/heap`: the dump (jemalloc's `heap_v2`, raw or with a symbol section);
//! - for a raw dump, `POST <base>/pprof/symbol` with its lookup addresses (`0x<16 hex>` joined by
//!   `+`, sorted), answered by `0x<address> <names>` lines (names joined by `--`, the outer
//!   function first, as in a symbol section);
//! - `GET <base>/pprof/cmdline`: the program's command line, whose first word names the program
//!   (in `--dot` titles).
//!
//! A profile argument is a URL when it starts with `http://`, or when it is no file and looks like
//! `host:port[/path]` (jeprof takes any argument that is not a file for a URL). As in jeprof, the
//! base is everything before the `/pprof/...` page; with no page, `/pprof/heap` is fetched (jeprof
//! would fetch a CPU profile, which is no heap profile). Plain `http` only: `https` is refused.

use std::path::Path;
use std::time::Duration;

use jeprof_dumpfmt::{Profile, SymbolTable};

use crate::error::Error;

/// The pages jeprof knows, which end a profile URL's base.
const PAGES: [&str; 8] = [
    "/pprof/heap",
    "/pprof/profile",
    "/pprof/pmuprofile",
    "/pprof/growth",
    "/pprof/contention",
    "/pprof/wall",
    "/pprof/filteredprofile",
    "/pprof/censusprofile",
];

/// Whether a profile argument is a URL rather than a file (see the module documentation).
pub fn is_url(arg: &str) -> bool {
    if arg.starts_with("http://") || arg.starts_with("https://") {
        return true;
    }
    if Path::new(arg).exists() {
        return false;
    }
    let hostport = arg.split('/').next().unwrap_or("");
    hostport
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

/// A profile URL split as jeprof's `ParseProfileURL` splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileUrl {
    /// `http://host:port` and any prefix before the page.
    pub base: String,
    /// The page (`/pprof/heap` when none is given).
    pub page: String,
}

impl ProfileUrl {
    /// Splits `arg`; `https://` is an error (plain http only).
    pub fn parse(arg: &str) -> Result<ProfileUrl, Error> {
        if arg.starts_with("https://") {
            return Err(Error::Fetch {
                url: arg.to_string(),
                reason: "https is not supported (plain http only)".into(),
            });
        }
        let rest = arg.strip_prefix("http://").unwrap_or(arg);
        let (hostport, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let (prefix, page) = match PAGES.iter().find_map(|p| path.find(p).map(|i| (i, p))) {
            Some((i, _)) => (&path[..i], &path[i..]),
            None => (path.trim_end_matches('/'), "/pprof/heap"),
        };
        Ok(ProfileUrl {
            base: format!("http://{hostport}{prefix}"),
            page: page.to_string(),
        })
    }

    /// The profile's own URL.
    pub fn profile(&self) -> String {
        format!("{}{}", self.base, self.page)
    }
}

/// A profile fetched from a process, symbolized through its symbol page when the dump has no
/// symbol section, and the program's name when the process gives it.
pub struct Fetched {
    /// The dump, with a symbol table.
    pub profile: Profile,
    /// The program (first word of `/pprof/cmdline`).
    pub program: Option<String>,
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        // A status is checked here, to say which page answered what.
        .http_status_as_error(false)
        .build()
        .into()
}

fn failed(url: &str, reason: impl std::fmt::Display) -> Error {
    Error::Fetch {
        url: url.to_string(),
        reason: reason.to_string(),
    }
}

/// A request's failure, with what to do when nothing listens there: a process serves its
/// profiles only when asked to.
fn unreachable_hint(e: ureq::Error) -> String {
    let refused =
        matches!(&e, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused);
    if refused {
        format!(
            "{e}: nothing listens there. A process serves its profiles when started with \
             JEPROF_SHIM=http:HOST:PORT (the preload library or a program built with jeprof-shim's \
             `http` feature), or when it calls jeprof_shim::serve"
        )
    } else {
        e.to_string()
    }
}

/// The body of a response, or an error naming the URL and the status.
fn body(
    url: &str,
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Vec<u8>, Error> {
    let mut response = response.map_err(|e| failed(url, unreachable_hint(e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(url, format!("the server answered {status}")));
    }
    response
        .body_mut()
        .with_config()
        // A dump of a large process is hundreds of megabytes; ureq's default cap is 10 MB.
        .limit(u64::MAX)
        .read_to_vec()
        .map_err(|e| failed(url, e))
}

/// Fetches the profile at `arg` (see the module documentation), waiting at most `timeout` for
/// each request.
pub fn fetch(arg: &str, timeout: Duration) -> Result<Fetched, Error> {
    let url = ProfileUrl::parse(arg)?;
    let agent = agent(timeout);
    let profile_url = url.profile();
    let bytes = body(&profile_url, agent.get(&profile_url).call())?;
    let mut profile = jeprof_dumpfmt::read::parse(&bytes)
        .map_err(|e| failed(&profile_url, format!("not a heap profile: {e}")))?;
    let cmdline_url = format!("{}/pprof/cmdline", url.base);
    // Only titles need it: a process without the page is still profiled.
    let program = body(&cmdline_url, agent.get(&cmdline_url).call())
        .ok()
        .and_then(|b| {
            let text = String::from_utf8_lossy(&b).into_owned();
            let first = text.split(['\0', '\n']).next().unwrap_or("").to_string();
            (!first.is_empty()).then_some(first)
        });
    if profile.symbols.is_none() {
        let symbol_url = format!("{}/pprof/symbol", url.base);
        let mut keys = profile.symbol_keys();
        keys.sort_unstable();
        keys.dedup();
        let request: Vec<String> = keys.iter().map(|k| format!("0x{k:016x}")).collect();
        let answer = body(
            &symbol_url,
            agent.post(&symbol_url).send(request.join("+").as_bytes()),
        )?;
        let mut table = parse_symbols(&String::from_utf8_lossy(&answer));
        table.binary.clone_from(&program);
        profile.symbols = Some(table);
    }
    Ok(Fetched { profile, program })
}

/// A symbol page's answer as jeprof's `ReadSymbols` reads it: `0x<hex> <names>` lines (names
/// joined by `--`, the outer function first); every other line is ignored.
pub fn parse_symbols(text: &str) -> SymbolTable {
    let mut table = SymbolTable::default();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        let Some(rest) = line.strip_prefix("0x") else {
            continue;
        };
        let end = rest
            .find(|c: char| !c.is_ascii_hexdigit() || c.is_ascii_uppercase())
            .unwrap_or(rest.len());
        let (digits, after) = rest.split_at(end);
        let names = after.trim();
        if !after.starts_with(char::is_whitespace) || names.is_empty() {
            continue;
        }
        let Ok(address) = u64::from_str_radix(digits, 16) else {
            continue;
        };
        let mut list: Vec<String> = names.split("--").map(str::to_string).collect();
        list.reverse();
        table.names.insert(address, list);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_as_jeprof_splits_them() {
        let u = ProfileUrl::parse("http://localhost:8080/pprof/heap").unwrap();
        assert_eq!(u.base, "http://localhost:8080");
        assert_eq!(u.page, "/pprof/heap");
        let u = ProfileUrl::parse("host:1234/app/pprof/heap").unwrap();
        assert_eq!(u.base, "http://host:1234/app");
        let u = ProfileUrl::parse("host:1234").unwrap();
        assert_eq!(u.profile(), "http://host:1234/pprof/heap");
        assert!(ProfileUrl::parse("https://host/pprof/heap").is_err());
        assert!(is_url("http://x/pprof/heap"));
        assert!(is_url("localhost:8080/pprof/heap"));
        assert!(!is_url("no-such-file.heap"));
    }

    #[test]
    fn symbol_answers_give_names_innermost_first() {
        let t =
            parse_symbols("num_symbols: 2\n0x4011a5 main--inlined_helper\r\n0x00401149 mid_a\n");
        assert_eq!(t.names[&0x4011a5], ["inlined_helper", "main"]);
        assert_eq!(t.names[&0x401149], ["mid_a"]);
        assert_eq!(t.names.len(), 2);
    }
}

//! # jeprof-conformance: the real jeprof as referee
//!
//! Support for the conformance tests: [`jeprof`] builds a runnable `jeprof` from the jemalloc
//! source that cargo already downloaded for `tikv-jemalloc-sys` (`bin/jeprof.in`, with
//! `@jemalloc_version@` and `@JEMALLOC_PREFIX@` substituted), [`run`] runs it, and [`parse_text`]
//! reads its `--text` output. The workspace's one way of getting the real jeprof: the shim's and
//! jeprof-compat's tests use it too (dev-dependency), and jeprof-compat's bench uses
//! [`try_jeprof`], going on without jeprof where it cannot be built.
//!
//! Requirements: `perl`, `addr2line`, `nm`, `objdump` (binutils) and `file` on `PATH`. When one is
//! missing the tests fail with a message naming it; they never skip silently.

pub mod memory_cgroup;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A runnable jeprof and the files it needs.
#[derive(Debug)]
pub struct Jeprof {
    /// The generated script.
    pub script: PathBuf,
    /// An empty file to pass as the program for raw dumps (frames then print as 16-digit keys).
    pub empty_program: PathBuf,
    /// The jemalloc version substituted into the script.
    pub version: String,
    /// A scratch folder for jeprof's temporary files and for re-written dumps.
    pub scratch: PathBuf,
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|p| {
            let f = p.join(tool);
            f.is_file()
        })
    })
}

fn cargo_home() -> PathBuf {
    if let Some(h) = std::env::var_os("CARGO_HOME") {
        return PathBuf::from(h);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    Path::new(&home).join(".cargo")
}

/// `registry/src/*/tikv-jemalloc-sys-*/jemalloc/bin/jeprof.in` under the cargo home, and the
/// jemalloc version (the part of the directory name after `+`). The newest directory name wins.
pub fn find_jeprof_in() -> Result<(PathBuf, String), String> {
    let src = cargo_home().join("registry").join("src");
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    let registries = std::fs::read_dir(&src).map_err(|e| {
        format!(
            "cannot list {}: {e}; build the workspace once so that cargo fetches tikv-jemalloc-sys",
            src.display()
        )
    })?;
    for reg in registries.flatten() {
        let Ok(crates) = std::fs::read_dir(reg.path()) else {
            continue;
        };
        for c in crates.flatten() {
            let name = c.file_name().to_string_lossy().into_owned();
            if let Some(rest) = name.strip_prefix("tikv-jemalloc-sys-") {
                let script = c.path().join("jemalloc/bin/jeprof.in");
                if let (Some((_, version)), true) = (rest.split_once('+'), script.is_file()) {
                    found.push((script, version.to_string()));
                }
            }
        }
    }
    found.sort();
    found.pop().ok_or_else(|| {
        format!(
            "no tikv-jemalloc-sys-*/jemalloc/bin/jeprof.in under {}; build the workspace once \
             (cargo fetch) so that the jemalloc source is in the registry",
            src.display()
        )
    })
}

fn build() -> Result<Jeprof, String> {
    let missing: Vec<&str> = ["perl", "addr2line", "nm", "objdump", "file"]
        .into_iter()
        .filter(|t| !on_path(t))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the jeprof conformance tests need {} on PATH (Debian/Ubuntu: apt-get install perl \
             binutils file); they do not skip",
            missing.join(", ")
        ));
    }
    let (input, version) = find_jeprof_in()?;
    let text = std::fs::read_to_string(&input).map_err(|e| format!("{}: {e}", input.display()))?;
    let script_text = text
        .replace("@jemalloc_version@", &version)
        .replace("@JEMALLOC_PREFIX@", "");
    let scratch = std::env::temp_dir().join(format!("jeprof-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let script = scratch.join("jeprof");
    std::fs::write(&script, script_text).map_err(|e| format!("{}: {e}", script.display()))?;
    let empty_program = scratch.join("empty-program");
    std::fs::write(&empty_program, b"").map_err(|e| format!("{}: {e}", empty_program.display()))?;
    Ok(Jeprof {
        script,
        empty_program,
        version,
        scratch,
    })
}

/// The jeprof of this process, built on first use, or why it cannot be built (missing tools or
/// jemalloc source). For callers that can go on without jeprof (the benches); tests use [`jeprof`].
pub fn try_jeprof() -> Result<&'static Jeprof, &'static str> {
    static J: OnceLock<Result<Jeprof, String>> = OnceLock::new();
    J.get_or_init(build).as_ref().map_err(String::as_str)
}

/// The jeprof of this test process, built on first use. Panics with the reason when it cannot
/// be built (missing tools or jemalloc source): a conformance test must not pass without jeprof.
pub fn jeprof() -> &'static Jeprof {
    match try_jeprof() {
        Ok(j) => j,
        Err(e) => panic!("cannot build jeprof: {e}"),
    }
}

/// Whether this run is CI's (`CI=true`, as `.ci/run` and hosted CI set it). There a test whose
/// tool or input is missing fails; elsewhere it may skip, saying why.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A loopback port that was free a moment ago, for a test's server or a setting that names one
/// (the port is released before it is used, so another process could take it in between: the
/// tests accept that rare race rather than pass a listening socket into code that binds its own).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding a loopback port")
}

/// The name cargo and the `cc` crate give this test binary's target in environment variables
/// (`aarch64_unknown_linux_gnu`): the tests run on Linux with glibc only.
fn target_env_name() -> String {
    format!("{}_unknown_linux_gnu", std::env::consts::ARCH)
}

/// `CARGO_TARGET_<TRIPLE>_RUNNER`, the runner cargo ran this test behind, if set.
fn target_runner() -> Option<String> {
    std::env::var(format!(
        "CARGO_TARGET_{}_RUNNER",
        target_env_name().to_uppercase()
    ))
    .ok()
}

/// A command that runs `program`, a binary built for this test's own target (the test binary
/// itself, a test program compiled with [`target_c_compiler`]), the way cargo ran this test: behind
/// `CARGO_TARGET_<TRIPLE>_RUNNER` when that variable is set. A cross-built test runs under an
/// emulator (`qemu-aarch64 -cpu max`, `.ci/aarch64.sh`), which starts host programs (perl, go) as
/// they are but cannot start a binary of the target by itself without a binfmt_misc registration;
/// the variable cargo read is in the test's environment, so its children get the same runner.
/// (A runner set in `.cargo/config.toml` instead is not seen here.)
pub fn target_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let runner = target_runner().unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(emulator) => {
            let mut command = Command::new(emulator);
            command.args(words).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// The C compiler for test programs of this test's target: `CC_<triple>` as the `cc` crate reads
/// it (`CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc` in a cross build), else `cc`.
pub fn target_c_compiler() -> String {
    std::env::var(format!("CC_{}", target_env_name())).unwrap_or_else(|_| "cc".to_string())
}

/// The C++ compiler for test programs of this test's target: `CXX_<triple>`, else `c++`.
pub fn target_cxx_compiler() -> String {
    std::env::var(format!("CXX_{}", target_env_name())).unwrap_or_else(|_| "c++".to_string())
}

/// A binutils program (`objcopy`) that handles this test's own binaries: the target's
/// (`aarch64-linux-gnu-objcopy`, from the cross compiler's binutils) when the test runs behind a
/// runner as [`target_command`] reads it, else the host's, which handles only the host's objects.
pub fn target_binutil(tool: &str) -> String {
    match target_runner() {
        Some(runner) if !runner.trim().is_empty() => {
            format!("{}-linux-gnu-{tool}", std::env::consts::ARCH)
        }
        _ => tool.to_string(),
    }
}

/// `go`, for the tests that check what we serve and write with `go tool pprof` (Debian's
/// `golang-go`): the first that runs of `go` on `PATH` and `/usr/lib/go/bin/go` (where Debian
/// installs it, linked from `/usr/bin` only by some images). When there is none: a panic under
/// `CI=true` ([`in_ci`]), else a notice on stderr and `None`, and the caller skips what needs `go`.
pub fn require_go() -> Option<PathBuf> {
    static GO: OnceLock<Option<PathBuf>> = OnceLock::new();
    let go = GO.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        first_that_runs(
            std::env::split_paths(&path)
                .chain([PathBuf::from("/usr/lib/go/bin")])
                .map(|dir| dir.join("go")),
            "version",
        )
    });
    required(
        go,
        "`go` is neither on PATH nor in /usr/lib/go/bin",
        "golang-go",
        "the go tool pprof checks",
    )
}

/// `go tool pprof ARGS` (the profile, a file or a URL, last among them): its standard output.
/// pprof keeps fetched profiles under `PPROF_TMPDIR` and reads its settings from `$HOME/.config`,
/// so both point at `scratch`, never at the user's. Panics with pprof's standard error when it
/// fails.
pub fn go_pprof(go: &Path, scratch: &Path, args: &[&str]) -> String {
    let out = Command::new(go)
        .args(["tool", "pprof"])
        .args(args)
        .env("PPROF_TMPDIR", scratch)
        .env("HOME", scratch)
        .output()
        .expect("go runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `valgrind`, for the tests that count instructions with callgrind (Debian's `valgrind`): the
/// first on `PATH` that answers `--version`. When there is none: a panic under `CI=true`
/// ([`in_ci`]), else a notice on stderr and `None`, and the caller skips.
pub fn require_valgrind() -> Option<PathBuf> {
    static VALGRIND: OnceLock<Option<PathBuf>> = OnceLock::new();
    let valgrind = VALGRIND.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        first_that_runs(
            std::env::split_paths(&path).map(|dir| dir.join("valgrind")),
            "--version",
        )
    });
    required(
        valgrind,
        "`valgrind` is not on PATH",
        "valgrind",
        "the instruction counts",
    )
}

/// Debian's `chromium`, for the tests that load our HTML page in a real browser: the first of
/// `chromium` and `chromium-browser` on `PATH` that answers `--version`. When there is none: a
/// panic under `CI=true` ([`in_ci`]), else a notice on stderr and `None`, and the caller skips.
pub fn require_chromium() -> Option<PathBuf> {
    static CHROMIUM: OnceLock<Option<PathBuf>> = OnceLock::new();
    let chromium = CHROMIUM.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        first_that_runs(
            std::env::split_paths(&path)
                .flat_map(|dir| [dir.join("chromium"), dir.join("chromium-browser")]),
            "--version",
        )
    });
    required(
        chromium,
        "`chromium` is not on PATH",
        "chromium",
        "the browser checks",
    )
}

/// The first of `candidates` that is a file and exits successfully when run with `arg`.
fn first_that_runs(candidates: impl Iterator<Item = PathBuf>, arg: &str) -> Option<PathBuf> {
    candidates.filter(|c| c.is_file()).find(|c| {
        Command::new(c)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// `found`, or, when a required tool is missing, a panic under `CI=true` ([`in_ci`]) naming the
/// Debian package to install, else a notice on stderr saying what is skipped.
fn required(
    found: &Option<PathBuf>,
    missing: &str,
    package: &str,
    skipped: &str,
) -> Option<PathBuf> {
    if found.is_none() {
        assert!(!in_ci(), "CI=true and {missing}: apt-get install {package}");
        eprintln!("notice: {missing} (apt-get install {package}): skipping {skipped}");
    }
    found.clone()
}

/// Headless `chromium` on `url` with a fresh profile directory and nothing fetched beyond the
/// page (no sync, updates or background requests): first `--dump-dom`, whose DOM (after the
/// page's scripts ran) is returned, then `--screenshot` to `screenshot` at 1400×2000. Each run
/// gets at most two minutes.
pub fn headless_chromium(chromium: &Path, url: &str, screenshot: &Path) -> Result<String, String> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = |extra: &[String]| -> Result<String, String> {
        let profile = std::env::temp_dir().join(format!(
            "chromium-profile-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&profile);
        let mut command = Command::new(chromium);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(url)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("{}: {e}", chromium.display()))?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let mut stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
            text
        });
        let mut stderr = child.stderr.take().expect("piped");
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(100))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let _ = std::fs::remove_dir_all(&profile);
                    return Err(format!("chromium on {url} did not finish in 120 s"));
                }
            }
        };
        let out = reader.join().unwrap_or_default();
        let err = errors.join().unwrap_or_default();
        let _ = std::fs::remove_dir_all(&profile);
        if !status.success() {
            return Err(format!("chromium on {url}: {status}\n{err}"));
        }
        Ok(out)
    };
    let dom = run(&["--dump-dom".to_string()])?;
    if let Some(dir) = screenshot.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    run(&[
        format!("--screenshot={}", screenshot.display()),
        "--window-size=1400,2000".to_string(),
    ])?;
    if !screenshot.is_file() {
        return Err(format!(
            "chromium wrote no screenshot at {}",
            screenshot.display()
        ));
    }
    Ok(dom)
}

/// The rows of the sites table of a `jeprof-page` page (its HTML, or the DOM a browser
/// rendered from it), in order: per row its cells' exact figures as the report prints them (a
/// cell's `title`, which holds them beside the rounded text people read, without its unit word;
/// else its text), character references resolved (function, flat bytes, its interval, flat %,
/// flat objects, its interval, cum bytes, its interval).
pub fn page_site_rows(html: &str) -> Vec<Vec<String>> {
    let Some(start) = html.find("<table id=\"sites\">") else {
        return Vec::new();
    };
    let table = &html[start..];
    let table = &table[..table.find("</table>").unwrap_or(table.len())];
    let exact = |cell: &str| -> Option<String> {
        let tag = &cell[cell.rfind("<td")?..];
        let tag = &tag[..tag.find('>')?];
        let title = &tag[tag.find("title=\"")? + 7..];
        let title = html_text(&title[..title.find('"')?]);
        Some(
            title
                .trim_end_matches(" bytes")
                .trim_end_matches(" objects")
                .to_string(),
        )
    };
    table
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("</td>")
                .filter(|cell| cell.contains("<td"))
                .filter_map(|cell| {
                    exact(cell).or_else(|| cell.rfind('>').map(|i| html_text(&cell[i + 1..])))
                })
                .collect()
        })
        .collect()
}

/// Text with HTML's character references for `&`, `<`, `>`, `"` and `'` resolved.
pub fn html_text(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// What one jeprof run printed.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status.
    pub status: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `perl jeprof <args>` and returns what it printed.
pub fn run(args: &[&str]) -> Output {
    let j = jeprof();
    let out = Command::new("perl")
        .arg(&j.script)
        .args(args)
        .env("JEPROF_TMPDIR", &j.scratch)
        .output()
        .unwrap_or_else(|e| panic!("cannot run perl {}: {e}", j.script.display()));
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// jeprof's `--text` table: the `Total` figure and, per printed name, (flat, cum).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Text {
    /// The `Total:` figure, when printed (nothing is printed for a zero total).
    pub total: Option<f64>,
    /// Per row name: (flat, cum) as printed.
    pub rows: BTreeMap<String, (f64, f64)>,
}

/// Parses `--text` output: `Total: <n> <unit>` then rows `"%8s %6s %6s %8s %6s %s"`.
pub fn parse_text(stdout: &str) -> Result<Text, String> {
    let mut text = Text::default();
    for line in stdout.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("Total: ") {
            let n = rest.split_whitespace().next().unwrap_or("");
            text.total = Some(n.parse().map_err(|_| format!("bad Total line {line:?}"))?);
            continue;
        }
        let mut fields = Vec::with_capacity(5);
        let mut rest = line;
        for _ in 0..5 {
            let t = rest.trim_start();
            let end = t.find(' ').ok_or_else(|| format!("bad row {line:?}"))?;
            fields.push(&t[..end]);
            rest = &t[end..];
        }
        // "%8s %6s %s": exactly one space before the name.
        let name = rest
            .strip_prefix(' ')
            .ok_or_else(|| format!("bad row {line:?}"))?;
        let num = |s: &str| {
            s.parse::<f64>()
                .map_err(|_| format!("bad number {s:?} in {line:?}"))
        };
        let flat = num(fields[0])?;
        let cum = num(fields[3])?;
        if text.rows.insert(name.to_string(), (flat, cum)).is_some() {
            return Err(format!("row {name:?} printed twice"));
        }
    }
    Ok(text)
}

/// What Perl's `sprintf("%d", x)` prints for a double: truncation toward zero, a wrapped
/// negative number from 2^63 to 2^64, and -1 beyond (checked with perl 5.36).
pub fn perl_d(x: f64) -> f64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x >= 2.0 * TWO_63 {
        -1.0
    } else if x >= TWO_63 {
        (x as u64) as i64 as f64
    } else {
        x.trunc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_with_spaces_in_names() {
        let t = parse_text(
            "Total: 2161886 B\n 2161886 100.0% 100.0%  2161886 100.0% leaf_alloc\n       0   0.0% \
             100.0%  1332474  61.6% f (inline)\n",
        )
        .unwrap();
        assert_eq!(t.total, Some(2161886.0));
        assert_eq!(t.rows["f (inline)"], (0.0, 1332474.0));
    }

    #[test]
    fn perl_d_wraps_like_perl() {
        assert_eq!(perl_d(9.3e18), -9146744073709551616.0);
        assert_eq!(perl_d(2e19), -1.0);
        assert_eq!(perl_d(2.9), 2.0);
    }
}

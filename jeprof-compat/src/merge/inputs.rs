//! Where a merge's dumps come from: arguments, directories and lists of any length, read only as
//! the merge asks for them.

use std::path::PathBuf;

use crate::error::Error;

/// Where a merge's dumps come from ([`expand`] reads them in order).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// A dump.
    Path(PathBuf),
    /// A directory of dumps: its regular files (symbolic links followed) whose names do not start
    /// with `.`, sorted by name; subdirectories are not entered. Hidden names are left out because
    /// writers that rename into place keep their unfinished files under them (this project's
    /// `merge -o` writes `.<name>.<random>.tmp`), and a directory of dumps is often still being
    /// written to.
    Dir(PathBuf),
    /// A file listing dumps, one path per line (`-`: standard input), read as the merge goes;
    /// white space around a path is dropped, and blank lines and lines starting with `#` are
    /// skipped. Relative paths are relative to the current directory, as for arguments.
    List(PathBuf),
}

/// The dumps `inputs` name, in order, read only as the merge asks for them: a list of 100,000
/// dumps is never held in memory (a directory's names are, to sort them). After an error (a list
/// or directory that cannot be read, a line that is not UTF-8) the iterator ends.
pub fn expand(inputs: Vec<Input>) -> impl Iterator<Item = Result<PathBuf, Error>> {
    Expand {
        inputs: inputs.into(),
        current: Current::Nothing,
    }
}

/// How many dumps `inputs` name, reading each list and directory once (so their errors come
/// before any dump is read); `None` when a list is standard input, which cannot be read twice.
pub fn count(inputs: &[Input]) -> Result<Option<u64>, Error> {
    let mut total = 0u64;
    for input in inputs {
        match input {
            Input::Dir(dir) => total += directory_files(dir)?.len() as u64,
            Input::Path(_) => total += 1,
            Input::List(list) if is_stdin(list) => return Ok(None),
            Input::List(list) => {
                let mut lines = ListLines::open(list)?;
                while lines.next_path().transpose()?.is_some() {
                    total += 1;
                }
            }
        }
    }
    Ok(Some(total))
}

fn is_stdin(list: &std::path::Path) -> bool {
    list.as_os_str() == "-"
}

/// A directory's dumps, as [`Input::Dir`] says.
fn directory_files(dir: &std::path::Path) -> Result<Vec<PathBuf>, Error> {
    let unreadable = |e: std::io::Error| Error::InputList {
        list: dir.to_path_buf(),
        line: None,
        reason: format!("cannot read the directory: {e}"),
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = entry.path();
        let hidden = entry.file_name().as_encoded_bytes().starts_with(b".");
        // `metadata` follows a link, so a link to a dump is taken and a dangling one is not.
        if !hidden && std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            files.push(path);
        }
    }
    files.sort_unstable();
    Ok(files)
}

/// The paths of a list file, line by line.
struct ListLines {
    list: PathBuf,
    reader: Box<dyn std::io::BufRead>,
    line_number: usize,
    buffer: Vec<u8>,
}

impl ListLines {
    fn open(list: &std::path::Path) -> Result<ListLines, Error> {
        let reader: Box<dyn std::io::BufRead> = if is_stdin(list) {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            let file = std::fs::File::open(list).map_err(|e| Error::InputList {
                list: list.to_path_buf(),
                line: None,
                reason: format!("cannot read the list of dumps: {e}"),
            })?;
            Box::new(std::io::BufReader::new(file))
        };
        Ok(ListLines {
            list: list.to_path_buf(),
            reader,
            line_number: 0,
            buffer: Vec::new(),
        })
    }

    /// The next path listed, `None` at the end.
    fn next_path(&mut self) -> Option<Result<PathBuf, Error>> {
        loop {
            self.buffer.clear();
            let error = |list: &std::path::Path, line, reason| Error::InputList {
                list: list.to_path_buf(),
                line: Some(line),
                reason,
            };
            match self.reader.read_until(b'\n', &mut self.buffer) {
                Ok(0) => return None,
                Ok(_) => self.line_number += 1,
                Err(e) => {
                    return Some(Err(error(
                        &self.list,
                        self.line_number + 1,
                        format!("cannot read the list of dumps: {e}"),
                    )))
                }
            }
            let Ok(text) = std::str::from_utf8(&self.buffer) else {
                return Some(Err(error(
                    &self.list,
                    self.line_number,
                    "not UTF-8; list one path per line".to_string(),
                )));
            };
            let text = text.trim();
            if !text.is_empty() && !text.starts_with('#') {
                return Some(Ok(PathBuf::from(text)));
            }
        }
    }
}

/// [`expand`]'s iterator.
struct Expand {
    inputs: std::collections::VecDeque<Input>,
    current: Current,
}

enum Current {
    Nothing,
    Files(std::vec::IntoIter<PathBuf>),
    Lines(ListLines),
    /// After an error.
    Failed,
}

impl Iterator for Expand {
    type Item = Result<PathBuf, Error>;

    fn next(&mut self) -> Option<Result<PathBuf, Error>> {
        loop {
            let next = match &mut self.current {
                Current::Failed => return None,
                Current::Nothing => None,
                Current::Files(files) => files.next().map(Ok),
                Current::Lines(lines) => lines.next_path(),
            };
            match next {
                Some(Err(e)) => {
                    self.current = Current::Failed;
                    return Some(Err(e));
                }
                Some(Ok(path)) => return Some(Ok(path)),
                None => {}
            }
            self.current = match self.inputs.pop_front()? {
                Input::Dir(dir) => match directory_files(&dir) {
                    Ok(files) => Current::Files(files.into_iter()),
                    Err(e) => {
                        self.current = Current::Failed;
                        return Some(Err(e));
                    }
                },
                Input::Path(path) => return Some(Ok(path)),
                Input::List(list) => match ListLines::open(&list) {
                    Ok(lines) => Current::Lines(lines),
                    Err(e) => {
                        self.current = Current::Failed;
                        return Some(Err(e));
                    }
                },
            };
        }
    }
}

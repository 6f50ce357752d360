//! The GNU build ids of a dump's mapped files: what finds each mapping's debug information later,
//! wherever the program and its libraries have gone since the dump was written.
//!
//! jeprof-shim writes one annotation per loaded object that has a build id, before the first
//! stack (jeprof skips it as it skips every comment there):
//!
//! ```text
//! # build_id: 4ecc4f0b6b10aac5b1825440def8e562e2d3c562 /opt/app/prog_pie
//! ```
//!
//! The id first, in lowercase hex, then the path exactly as the dump's memory map
//! (`MAPPED_LIBRARIES:`) names the file, to the end of the line: paths may hold blanks, ids never
//! do. A value that is not of this form is not a build id and is skipped, as jeprof skips it.
//! Debug files are found by id in the `.build-id/<first two digits>/<the rest>.debug` layout of
//! debuginfod and the distributions.

/// The annotation key of a build id line.
pub const BUILD_ID: &str = "build_id";

/// The build id of one mapped file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BuildId {
    /// The mapped file, as the dump's memory map names it.
    pub path: String,
    /// The id, lowercase hex (an even number of digits, at least 2).
    pub id: String,
}

/// Whether `id` can be a build id: an even number (at least 2) of lowercase hex digits.
pub fn is_build_id(id: &str) -> bool {
    id.len() >= 2
        && id.len().is_multiple_of(2)
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The annotations that carry `ids`, in order (ids lowercased).
pub fn to_annotations(ids: &[BuildId]) -> Vec<(String, String)> {
    ids.iter()
        .map(|b| {
            (
                BUILD_ID.to_string(),
                format!("{} {}", b.id.to_ascii_lowercase(), b.path),
            )
        })
        .collect()
}

/// The build ids `annotations` carry, in order; a value that is not `<hex> <path>` is skipped.
pub fn from_annotations(annotations: &[(String, String)]) -> Vec<BuildId> {
    annotations
        .iter()
        .filter(|(k, _)| k == BUILD_ID)
        .filter_map(|(_, v)| {
            let (id, path) = v.split_once(' ')?;
            let id = id.to_ascii_lowercase();
            (is_build_id(&id) && !path.is_empty()).then(|| BuildId {
                path: path.to_string(),
                id,
            })
        })
        .collect()
}

/// Where the debug file of build id `id` is under a debug directory: `.build-id/ab/cdef….debug`
/// (`None` for what is not a build id).
pub fn debug_file_path(id: &str) -> Option<String> {
    let id = id.to_ascii_lowercase();
    is_build_id(&id).then(|| format!(".build-id/{}/{}.debug", &id[..2], &id[2..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_ids_round_trip_through_annotations_with_blanks_in_paths() {
        let ids = vec![
            BuildId {
                path: "/opt/my app/bin/app".into(),
                id: "4ecc4f0b6b10aac5b1825440def8e562e2d3c562".into(),
            },
            BuildId {
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                id: "00ff".into(),
            },
        ];
        let mut annotations = vec![("shim_unwinder".to_string(), "fp".to_string())];
        annotations.extend(to_annotations(&ids));
        assert_eq!(from_annotations(&annotations), ids);
    }

    #[test]
    fn values_that_are_not_an_id_then_a_path_are_skipped() {
        let annotations: Vec<(String, String)> = [
            "abc /odd/number/of/digits",
            "xyz1 /not/hex",
            "00ff",
            "00ff ",
            "ABCD /upper/case/is/read",
        ]
        .iter()
        .map(|v| (BUILD_ID.to_string(), v.to_string()))
        .collect();
        let read = from_annotations(&annotations);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].id, "abcd");
        assert_eq!(read[0].path, "/upper/case/is/read");
    }

    #[test]
    fn debug_files_are_found_under_the_first_two_digits() {
        assert_eq!(
            debug_file_path("4ECC4f0b").as_deref(),
            Some(".build-id/4e/cc4f0b.debug")
        );
        assert_eq!(debug_file_path("4"), None);
        assert_eq!(debug_file_path("../etc"), None);
    }
}

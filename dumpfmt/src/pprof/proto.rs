//! The subset of pprof's `profile.proto` (github.com/google/pprof, `proto/profile.proto`) that heap
//! profiles use, declared by hand with `prost` so no `protoc` is needed; field numbers and meanings
//! are the proto's. Indices named "string table index" point into [`PbProfile::string_table`],
//! whose entry 0 is always `""`.

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbProfile {
    /// What each sample value is.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<PbValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<PbSample>,
    /// Memory mappings.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<PbMapping>,
    /// Locations (addresses).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<PbLocation>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<PbFunction>,
    /// Every string, index 0 being "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Kind of events between samples.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<PbValueType>,
    /// Events between samples.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form notes (string table indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string table index).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
    /// Frames matching this regex (string table index) are dropped by pprof, with their callees.
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Frames matching this regex (string table index) are kept even if `drop_frames` matches.
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was collected (nanoseconds since the Unix epoch).
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long the profile covers (a window's length; 0 for a point-in-time heap profile).
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
}

/// `ValueType`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbValueType {
    /// Type name (string table index).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Unit (string table index).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbSample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels (`key=value`), which pprof filters on (`-tagfocus`) and scrapers index.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<PbLabel>,
}

/// `Label`: a string (`str`) or numeric (`num`, with `num_unit`) value under `key`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbLabel {
    /// Key (string table index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string table index; 0 when numeric).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// Unit of `num` (string table index).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `Mapping`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbMapping {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// First address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// One past the last address.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// File name (string table index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build id (string table index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether every location in it has function names.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Whether every location in it has file names.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Whether every location in it has line numbers.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Whether inlined frames are expanded in its locations.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `Location`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbLocation {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping (0: none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The instruction address.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Functions at the address, innermost (inlined) first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<PbLine>,
    /// Whether several locations were folded into this one.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// `Line`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbLine {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line (0: unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// `Function`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbFunction {
    /// Unique non-zero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Display name (string table index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Linker name (string table index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string table index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// Line where the function starts (0: unknown).
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

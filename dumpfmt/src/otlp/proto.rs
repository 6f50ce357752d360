//! The messages of OpenTelemetry's profiles signal that [`super::from_pprof`] emits, declared by
//! hand with `prost` so no `protoc` is needed. Version: **opentelemetry-proto v1.10.0**
//! (`opentelemetry/proto/profiles/v1development/profiles.proto`,
//! `collector/profiles/v1development/profiles_service.proto`, `common/v1/common.proto`,
//! `resource/v1/resource.proto`), as the PyPI package `opentelemetry-proto` 1.45.2 carries it;
//! field numbers, types and meanings are that version's. `v1development` is alpha: a later
//! version may renumber, and these declarations then follow that version, not both.
//!
//! Only the fields this crate writes are declared (a decoder skips the others as unknown fields):
//! no links, timestamps per sample, original payloads, entity references, nor `AnyValue`'s
//! kinds other than strings and integers. Every `*_index`/`*_strindex` points into
//! [`ProfilesDictionary`]'s tables, whose entry 0 is the zero value ("not set").

/// `opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest`: what an
/// OTLP/HTTP client POSTs to `/v1development/profiles` (and what `jeprof-compat otlp` writes).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportProfilesServiceRequest {
    /// One entry per resource (process) the profiles describe.
    #[prost(message, repeated, tag = "1")]
    pub resource_profiles: Vec<ResourceProfiles>,
    /// The tables every profile of the request indexes into.
    #[prost(message, optional, tag = "2")]
    pub dictionary: Option<ProfilesDictionary>,
}

/// `ProfilesDictionary`: the request's shared tables; each table's entry 0 is its zero value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfilesDictionary {
    /// Mappings (`Location::mapping_index`).
    #[prost(message, repeated, tag = "1")]
    pub mapping_table: Vec<Mapping>,
    /// Locations (`Stack::location_indices`).
    #[prost(message, repeated, tag = "2")]
    pub location_table: Vec<Location>,
    /// Functions (`Line::function_index`).
    #[prost(message, repeated, tag = "3")]
    pub function_table: Vec<Function>,
    /// Links to trace spans (`Sample::link_index`); only the zero entry here.
    #[prost(message, repeated, tag = "4")]
    pub link_table: Vec<Link>,
    /// Every string, entry 0 being `""`.
    #[prost(string, repeated, tag = "5")]
    pub string_table: Vec<String>,
    /// Attributes (`attribute_indices` of samples, mappings, locations, profiles).
    #[prost(message, repeated, tag = "6")]
    pub attribute_table: Vec<KeyValueAndUnit>,
    /// Stacks (`Sample::stack_index`).
    #[prost(message, repeated, tag = "7")]
    pub stack_table: Vec<Stack>,
}

/// `ResourceProfiles`: the profiles of one resource.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceProfiles {
    /// The resource (here: the process, by semantic-convention attributes).
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// The profiles, by instrumentation scope.
    #[prost(message, repeated, tag = "2")]
    pub scope_profiles: Vec<ScopeProfiles>,
    /// The resource's schema URL (empty: unknown).
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `ScopeProfiles`: the profiles one instrumentation scope (the profiler) produced.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeProfiles {
    /// Who produced them.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// The profiles; viewers show `profiles[0]` first.
    #[prost(message, repeated, tag = "2")]
    pub profiles: Vec<Profile>,
    /// The schema URL (empty: unknown).
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

/// `Profile`: samples of one sample type (unlike pprof, where a sample has one value per type).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// The type and unit of every `Sample::values` entry.
    #[prost(message, optional, tag = "1")]
    pub sample_type: Option<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// When the profile was taken, nanoseconds since the Unix epoch (0: unknown).
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    /// The time it covers (0 for a point-in-time heap profile).
    #[prost(uint64, tag = "4")]
    pub duration_nano: u64,
    /// The kind of events between samples (`space`/`bytes` here).
    #[prost(message, optional, tag = "5")]
    pub period_type: Option<ValueType>,
    /// Events between samples: the sample period R in bytes.
    #[prost(int64, tag = "6")]
    pub period: i64,
    /// A 16-byte id (empty: none; optional in this version).
    #[prost(bytes = "vec", tag = "7")]
    pub profile_id: Vec<u8>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "8")]
    pub dropped_attributes_count: u32,
    /// The profile's own attributes (indices into the attribute table).
    #[prost(int32, repeated, tag = "11")]
    pub attribute_indices: Vec<i32>,
}

/// `Link`: a sample's trace span (only the table's zero entry is written).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Link {
    /// 16-byte trace id.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// 8-byte span id.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
}

/// `ValueType`: a type and its unit.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// Type name (string table index).
    #[prost(int32, tag = "1")]
    pub type_strindex: i32,
    /// Unit (string table index).
    #[prost(int32, tag = "2")]
    pub unit_strindex: i32,
}

/// `Sample`: a stack, its attributes, and its value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// The stack (stack table index).
    #[prost(int32, tag = "1")]
    pub stack_index: i32,
    /// Its attributes (attribute table indices), keys unique.
    #[prost(int32, repeated, tag = "2")]
    pub attribute_indices: Vec<i32>,
    /// A trace link (link table index; 0: none).
    #[prost(int32, tag = "3")]
    pub link_index: i32,
    /// The value (one here: the profile's sample type, aggregated, no timestamps).
    #[prost(int64, repeated, tag = "4")]
    pub values: Vec<i64>,
}

/// `Mapping`: a binary's address range in memory.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// First address.
    #[prost(uint64, tag = "1")]
    pub memory_start: u64,
    /// One past the last address.
    #[prost(uint64, tag = "2")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "3")]
    pub file_offset: u64,
    /// The mapped file (string table index).
    #[prost(int32, tag = "4")]
    pub filename_strindex: i32,
    /// Its attributes (the build id).
    #[prost(int32, repeated, tag = "5")]
    pub attribute_indices: Vec<i32>,
}

/// `Stack`: locations, leaf first.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Stack {
    /// Location table indices, leaf first.
    #[prost(int32, repeated, tag = "1")]
    pub location_indices: Vec<i32>,
}

/// `Location`: an address and the functions at it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Its mapping (mapping table index; 0: unknown).
    #[prost(int32, tag = "1")]
    pub mapping_index: i32,
    /// The instruction address (callers: inside the call instruction).
    #[prost(uint64, tag = "2")]
    pub address: u64,
    /// Functions at the address, innermost (inlined) first, the last being the caller the others
    /// were inlined into.
    #[prost(message, repeated, tag = "3")]
    pub lines: Vec<Line>,
    /// Its attributes.
    #[prost(int32, repeated, tag = "4")]
    pub attribute_indices: Vec<i32>,
}

/// `Line`: a function and a source line in it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// The function (function table index).
    #[prost(int32, tag = "1")]
    pub function_index: i32,
    /// Source line (0: unset).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Source column (0: unset).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// `Function`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// The name shown (string table index).
    #[prost(int32, tag = "1")]
    pub name_strindex: i32,
    /// The system's (linker's) name (string table index; 0: none).
    #[prost(int32, tag = "2")]
    pub system_name_strindex: i32,
    /// Source file (string table index).
    #[prost(int32, tag = "3")]
    pub filename_strindex: i32,
    /// First line of the function (0: unset).
    #[prost(int64, tag = "4")]
    pub start_line: i64,
}

/// `KeyValueAndUnit`: an attribute of the dictionary.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValueAndUnit {
    /// The key (string table index).
    #[prost(int32, tag = "1")]
    pub key_strindex: i32,
    /// The value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
    /// The unit (string table index; 0: implied by the key).
    #[prost(int32, tag = "3")]
    pub unit_strindex: i32,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    /// The resource's attributes, keys unique.
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "2")]
    pub dropped_attributes_count: u32,
}

/// `opentelemetry.proto.common.v1.InstrumentationScope`: the library that produced the data.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InstrumentationScope {
    /// Its name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// Its attributes.
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
    /// Attributes dropped for limits.
    #[prost(uint32, tag = "4")]
    pub dropped_attributes_count: u32,
}

/// `opentelemetry.proto.common.v1.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// The key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// The value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `opentelemetry.proto.common.v1.AnyValue` (the kinds written here).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    /// The value.
    #[prost(oneof = "any_value::Value", tags = "1, 3")]
    pub value: Option<any_value::Value>,
}

/// `AnyValue`'s `oneof value`.
pub mod any_value {
    /// The kinds of value written here.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// `string_value`.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// `int_value`.
        #[prost(int64, tag = "3")]
        IntValue(i64),
    }
}

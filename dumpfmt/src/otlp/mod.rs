//! OpenTelemetry profiles (OTLP, `profiles/v1development`): an `ExportProfilesServiceRequest`,
//! what an OTLP/HTTP exporter POSTs to a Collector's `/v1development/profiles` and what Pyroscope,
//! Parca and Elastic ingest. An adapter around the [`pprof`](crate::pprof) one, so the frames, the charging of
//! flat and the figures are pprof's, by construction: [`from_pprof`] re-indexes a pprof message,
//! it decides nothing about stacks itself.
//!
//! [`check_references`] checks a request as Grafana Pyroscope's OTLP handler reads it (the
//! dictionary, the types, every index in range); [`gzip`] compresses a body for
//! `Content-Encoding: gzip`.
//!
//! The messages are those of **opentelemetry-proto v1.10.0** (the PyPI package
//! `opentelemetry-proto` 1.45.2 is generated from it), declared here with prost's derive, field
//! numbers as that version has them; only the fields written are declared.
//!
//! From pprof to OTLP:
//! - **One `Profile` per sample type** (OTLP carries one type per profile): `inuse_space`,
//!   `inuse_objects`, `alloc_space`, `alloc_objects` with pprof's units, the pprof message's
//!   default type first (viewers show `profiles[0]` first), the others in pprof's order. A
//!   sample's value in a profile is its pprof value for that type (the unbiased estimate rounded
//!   to an integer); samples whose value is 0 in a type are left out of that type's profile, and
//!   samples with the same stack and attributes are added (as the format asks), so each stack's
//!   sum is pprof's sum over its samples. `period` is R with `period_type` `space/bytes`.
//! - **One dictionary** for the whole request: pprof's strings, mappings, functions and locations
//!   re-indexed (entry 0 of every table is the zero value the format requires), stacks interned
//!   from the samples' location lists, attributes interned.
//! - **Resources from labels.** pprof puts a dump's labels on every sample; here the labels that
//!   name a process (every label but [`SCOPE_LABEL`]) become the resource's attributes, and
//!   samples with the same such labels form one `ResourceProfiles` (one per process when several
//!   dumps are merged). Keys follow OpenTelemetry's semantic conventions ([`resource_attributes`]):
//!   `service.name`, `host.name`, `process.pid`, `process.executable.name`,
//!   `process.executable.build_id.gnu`. A sample's `scope` label stays a sample attribute.
//! - **Mappings** keep their range, offset and file; a build id becomes the mapping's
//!   `process.executable.build_id.gnu` attribute, by which a backend finds debug info.
//! - **Time**: pprof's `time_nanos`, or the `time` label (RFC 3339) of the resource when pprof has
//!   none (a merge of dumps); `duration_nano` is pprof's.

mod proto;

pub use proto::*;

use std::collections::HashMap;

use prost::Message;

use crate::error::Error;
use crate::pprof::{PbProfile, SCOPE_LABEL};

/// The path, under an OTLP/HTTP endpoint's base URL, that takes an
/// [`ExportProfilesServiceRequest`] (`Content-Type: application/x-protobuf`).
pub const HTTP_PATH: &str = "/v1development/profiles";

/// Resource attribute keys of OpenTelemetry's semantic conventions, and the label each comes from.
const RESOURCE_KEYS: [(&str, &str); 5] = [
    ("service", "service.name"),
    ("hostname", "host.name"),
    ("pid", "process.pid"),
    ("program", "process.executable.name"),
    ("build_id", BUILD_ID_KEY),
];

/// The attribute of a GNU build id (hex), on a resource and on a mapping.
pub const BUILD_ID_KEY: &str = "process.executable.build_id.gnu";

/// The resource attributes for a process's labels (a dump's `# label` lines, the shim's process
/// labels): `service` → `service.name`, `hostname` → `host.name`, `pid` → `process.pid` (an
/// integer), `program` → `process.executable.name`, `build_id` → `process.executable.build_id.gnu`;
/// any other label keeps its key (a string). Without a `service` label, `service.name` is
/// `unknown_service:<program>` (or `unknown_service`), as OpenTelemetry's SDKs name a service
/// nobody named.
pub fn resource_attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    let label = |key: &str| labels.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let mut attributes = Vec::with_capacity(labels.len() + 1);
    if label("service").is_none() {
        let name = match label("program") {
            Some(program) => format!("unknown_service:{program}"),
            None => "unknown_service".to_string(),
        };
        attributes.push(string_attribute("service.name", name));
    }
    for (key, value) in labels {
        let renamed = RESOURCE_KEYS
            .iter()
            .find(|(label, _)| label == key)
            .map(|(_, otel)| *otel);
        let value = match (renamed, value.parse::<i64>()) {
            (Some("process.pid"), Ok(pid)) => any_value::Value::IntValue(pid),
            _ => any_value::Value::StringValue(value.clone()),
        };
        attributes.push(KeyValue {
            key: renamed.unwrap_or(key).to_string(),
            value: Some(AnyValue { value: Some(value) }),
        });
    }
    attributes
}

fn string_attribute(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
    }
}

/// The dictionary being built: each table with its interner (equal items get one index).
#[derive(Default)]
struct Dictionary {
    tables: ProfilesDictionary,
    strings: HashMap<String, i32>,
    attributes: HashMap<(i32, AttributeValue, i32), i32>,
    stacks: HashMap<Vec<i32>, i32>,
}

/// An attribute value as an interning key.
#[derive(Clone, PartialEq, Eq, Hash)]
enum AttributeValue {
    Str(String),
    Int(i64),
}

/// Index of the next entry of a table of `len` entries (tables stay far below 2^31 entries: a
/// pprof message is under 2 GiB, and each entry here comes from one of its entries).
fn next_index(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

impl Dictionary {
    fn new() -> Dictionary {
        let mut d = Dictionary::default();
        d.tables.mapping_table.push(Mapping::default());
        d.tables.location_table.push(Location::default());
        d.tables.function_table.push(Function::default());
        d.tables.link_table.push(Link::default());
        d.tables.attribute_table.push(KeyValueAndUnit::default());
        d.tables.stack_table.push(Stack::default());
        // A sample whose every frame was removed (all the allocator's) has the zero stack.
        d.stacks.insert(Vec::new(), 0);
        d.string("");
        d
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = next_index(self.tables.string_table.len());
        self.tables.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn attribute(&mut self, key: &str, value: AttributeValue, unit: &str) -> i32 {
        let key = self.string(key);
        let unit = self.string(unit);
        let interned = (key, value, unit);
        if let Some(&i) = self.attributes.get(&interned) {
            return i;
        }
        let i = next_index(self.tables.attribute_table.len());
        let value = match &interned.1 {
            AttributeValue::Str(s) => any_value::Value::StringValue(s.clone()),
            AttributeValue::Int(n) => any_value::Value::IntValue(*n),
        };
        self.tables.attribute_table.push(KeyValueAndUnit {
            key_strindex: key,
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: unit,
        });
        self.attributes.insert(interned, i);
        i
    }

    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = next_index(self.tables.stack_table.len());
        self.tables.stack_table.push(Stack {
            location_indices: locations.clone(),
        });
        self.stacks.insert(locations, i);
        i
    }
}

/// The samples of one resource, added up by (stack, attributes): one value per pprof sample type.
struct ResourceSamples {
    labels: Vec<(String, String)>,
    samples: Vec<(i32, Vec<i32>, Vec<i64>)>,
    by_identity: HashMap<(i32, Vec<i32>), usize>,
}

/// The OTLP request for `pb` (a pprof message from [`crate::pprof::from_profile`] or a builder),
/// with `scope` naming the profiler; see the module docs for the translation. Never fails:
/// a dangling index of a foreign pprof message reads as "unknown" (index 0, `""`).
pub fn from_pprof(pb: &PbProfile, scope: &InstrumentationScope) -> ExportProfilesServiceRequest {
    let mut d = Dictionary::new();
    let locations = dictionary_locations(pb, &mut d);
    let resources = samples_by_resource(pb, &mut d, &locations);
    let resource_profiles = resources
        .into_iter()
        .map(|resource| resource_profiles(pb, &mut d, resource, scope))
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: Some(d.tables),
    }
}

/// String `i` of `pb`'s table; `""` for an index outside it.
fn text(pb: &PbProfile, i: i64) -> &str {
    usize::try_from(i)
        .ok()
        .and_then(|i| pb.string_table.get(i))
        .map_or("", String::as_str)
}

/// `pb`'s mappings, functions and locations put into the shared dictionary; returns each pprof
/// location id's index in the dictionary's location table.
fn dictionary_locations(pb: &PbProfile, d: &mut Dictionary) -> HashMap<u64, i32> {
    let mut mappings: HashMap<u64, i32> = HashMap::new();
    for m in &pb.mapping {
        let filename_strindex = d.string(text(pb, m.filename));
        let build_id = text(pb, m.build_id);
        let attribute_indices = if build_id.is_empty() {
            Vec::new()
        } else {
            vec![d.attribute(BUILD_ID_KEY, AttributeValue::Str(build_id.to_string()), "")]
        };
        mappings.insert(m.id, next_index(d.tables.mapping_table.len()));
        d.tables.mapping_table.push(Mapping {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename_strindex,
            attribute_indices,
        });
    }
    let mut functions: HashMap<u64, i32> = HashMap::new();
    for f in &pb.function {
        let function = Function {
            name_strindex: d.string(text(pb, f.name)),
            system_name_strindex: d.string(text(pb, f.system_name)),
            filename_strindex: d.string(text(pb, f.filename)),
            start_line: f.start_line,
        };
        functions.insert(f.id, next_index(d.tables.function_table.len()));
        d.tables.function_table.push(function);
    }
    let mut locations: HashMap<u64, i32> = HashMap::new();
    for l in &pb.location {
        let location = Location {
            mapping_index: mappings.get(&l.mapping_id).copied().unwrap_or(0),
            address: l.address,
            lines: l
                .line
                .iter()
                .map(|line| Line {
                    function_index: functions.get(&line.function_id).copied().unwrap_or(0),
                    line: line.line,
                    column: 0,
                })
                .collect(),
            attribute_indices: Vec::new(),
        };
        locations.insert(l.id, next_index(d.tables.location_table.len()));
        d.tables.location_table.push(location);
    }
    locations
}

/// `pb`'s samples grouped by resource (their string labels but the scope's), in the order their
/// resources first appear, and added up by (stack, attributes): numeric labels and the scope
/// become sample attributes.
fn samples_by_resource(
    pb: &PbProfile,
    d: &mut Dictionary,
    locations: &HashMap<u64, i32>,
) -> Vec<ResourceSamples> {
    let types = pb.sample_type.len();
    let mut resources: Vec<ResourceSamples> = Vec::new();
    let mut resource_of: HashMap<Vec<(String, String)>, usize> = HashMap::new();
    for sample in &pb.sample {
        let mut labels = Vec::new();
        let mut attributes = Vec::new();
        for label in &sample.label {
            let key = text(pb, label.key);
            if key == SCOPE_LABEL || label.str == 0 {
                let value = if label.str == 0 {
                    AttributeValue::Int(label.num)
                } else {
                    AttributeValue::Str(text(pb, label.str).to_string())
                };
                attributes.push(d.attribute(key, value, text(pb, label.num_unit)));
            } else {
                labels.push((key.to_string(), text(pb, label.str).to_string()));
            }
        }
        attributes.sort_unstable();
        let stack = d.stack(
            sample
                .location_id
                .iter()
                .map(|id| locations.get(id).copied().unwrap_or(0))
                .collect(),
        );
        let r = *resource_of.entry(labels.clone()).or_insert_with(|| {
            resources.push(ResourceSamples {
                labels,
                samples: Vec::new(),
                by_identity: HashMap::new(),
            });
            resources.len() - 1
        });
        let resource = &mut resources[r];
        let at = *resource
            .by_identity
            .entry((stack, attributes.clone()))
            .or_insert_with(|| {
                resource.samples.push((stack, attributes, vec![0; types]));
                resource.samples.len() - 1
            });
        for (sum, value) in resource.samples[at].2.iter_mut().zip(&sample.value) {
            *sum = sum.saturating_add(*value);
        }
    }
    resources
}

/// One resource's profiles: one per sample type, the default type first, then pprof's order;
/// each keeps the samples with a value of its type.
fn resource_profiles(
    pb: &PbProfile,
    d: &mut Dictionary,
    resource: ResourceSamples,
    scope: &InstrumentationScope,
) -> ResourceProfiles {
    let mut order: Vec<usize> = (0..pb.sample_type.len()).collect();
    if let Some(first) = pb
        .sample_type
        .iter()
        .position(|t| pb.default_sample_type != 0 && t.r#type == pb.default_sample_type)
    {
        order.remove(first);
        order.insert(0, first);
    }
    let mut value_type = |t: &crate::pprof::PbValueType| ValueType {
        type_strindex: d.string(text(pb, t.r#type)),
        unit_strindex: d.string(text(pb, t.unit)),
    };
    let value_types: Vec<ValueType> = pb.sample_type.iter().map(&mut value_type).collect();
    let period_type = pb.period_type.as_ref().map(&mut value_type);
    let time_unix_nano = u64::try_from(pb.time_nanos)
        .ok()
        .filter(|&t| t > 0)
        .or_else(|| labelled_time(&resource.labels))
        .unwrap_or(0);
    let profiles = order
        .iter()
        .map(|&t| Profile {
            sample_type: Some(value_types[t].clone()),
            samples: resource
                .samples
                .iter()
                .filter(|(_, _, values)| values[t] != 0)
                .map(|(stack, attributes, values)| Sample {
                    stack_index: *stack,
                    attribute_indices: attributes.clone(),
                    link_index: 0,
                    values: vec![values[t]],
                })
                .collect(),
            time_unix_nano,
            duration_nano: u64::try_from(pb.duration_nanos).unwrap_or(0),
            period_type: period_type.clone(),
            period: pb.period,
            profile_id: Vec::new(),
            dropped_attributes_count: 0,
            attribute_indices: Vec::new(),
        })
        .collect();
    ResourceProfiles {
        resource: Some(Resource {
            attributes: resource_attributes(&resource.labels),
            dropped_attributes_count: 0,
        }),
        scope_profiles: vec![ScopeProfiles {
            scope: Some(scope.clone()),
            profiles,
            schema_url: String::new(),
        }],
        schema_url: String::new(),
    }
}

/// The `time` label (RFC 3339) in nanoseconds since the epoch.
fn labelled_time(labels: &[(String, String)]) -> Option<u64> {
    let (_, value) = labels.iter().find(|(k, _)| k == "time")?;
    let micros = crate::labels::parse_rfc3339(value)?;
    u64::try_from(micros).ok()?.checked_mul(1000)
}

/// The request's protobuf encoding (the body of an OTLP/HTTP POST).
pub fn encode(request: &ExportProfilesServiceRequest) -> Vec<u8> {
    request.encode_to_vec()
}

/// Reads back an encoded request.
pub fn decode(bytes: &[u8]) -> Result<ExportProfilesServiceRequest, Error> {
    ExportProfilesServiceRequest::decode(bytes).map_err(|e| Error::Otlp(e.to_string()))
}

/// `body` gzipped, for an OTLP/HTTP POST with `Content-Encoding: gzip` (which Grafana Pyroscope's
/// and the OpenTelemetry Collector's OTLP/HTTP receivers both read).
pub fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(body);
    gz.finish().unwrap_or_default()
}

/// Reads back a gzipped body.
pub fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    use std::io::Read as _;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut raw)
        .map_err(|e| Error::Otlp(format!("not gzip data: {e}")))?;
    Ok(raw)
}

/// Checks what a backend needs of a request before it reads a sample: the shared dictionary
/// (Grafana Pyroscope refuses a request without one, "missing profile metadata dictionary"), at
/// least one `ResourceProfiles`, each profile's `sample_type` and `period_type`, one value per
/// sample (one type per profile), and every index in range of its table: strings, stacks,
/// locations, mappings, functions, attributes and links (Pyroscope's converter refuses an index
/// out of bounds, and reads a location's mapping even at index 0, so the table's zero entry must
/// be there). The first problem found, as [`Error::Otlp`].
pub fn check_references(request: &ExportProfilesServiceRequest) -> Result<(), Error> {
    let problem = |what: String| Err(Error::Otlp(what));
    let Some(d) = &request.dictionary else {
        return problem("no dictionary (the shared tables)".into());
    };
    if request.resource_profiles.is_empty() {
        return problem("no resource profiles".into());
    }
    let within = |i: i32, len: usize| usize::try_from(i).is_ok_and(|i| i < len);
    let strings = |i: i32| within(i, d.string_table.len());
    let attributes = |ix: &[i32]| ix.iter().all(|&i| within(i, d.attribute_table.len()));
    if d.string_table.first().is_none_or(|s| !s.is_empty()) || d.mapping_table.is_empty() {
        return problem("the string or mapping table lacks its zero entry".into());
    }
    for (n, m) in d.mapping_table.iter().enumerate() {
        if !strings(m.filename_strindex) || !attributes(&m.attribute_indices) {
            return problem(format!("mapping {n} refers outside the tables"));
        }
    }
    for (n, f) in d.function_table.iter().enumerate() {
        let names = [f.name_strindex, f.system_name_strindex, f.filename_strindex];
        if !names.into_iter().all(strings) {
            return problem(format!("function {n} names a string outside the table"));
        }
    }
    for (n, l) in d.location_table.iter().enumerate() {
        let lines_ok = l
            .lines
            .iter()
            .all(|line| within(line.function_index, d.function_table.len()));
        if !within(l.mapping_index, d.mapping_table.len())
            || !lines_ok
            || !attributes(&l.attribute_indices)
        {
            return problem(format!("location {n} refers outside the tables"));
        }
    }
    for (n, s) in d.stack_table.iter().enumerate() {
        if !s
            .location_indices
            .iter()
            .all(|&i| within(i, d.location_table.len()))
        {
            return problem(format!("stack {n} names a location outside the table"));
        }
    }
    if !d.attribute_table.iter().all(|a| strings(a.key_strindex)) {
        return problem("an attribute's key is outside the string table".into());
    }
    let profiles = request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles);
    for (n, p) in profiles.enumerate() {
        let types_ok = [&p.sample_type, &p.period_type].into_iter().all(|t| {
            t.as_ref()
                .is_some_and(|t| strings(t.type_strindex) && strings(t.unit_strindex))
        });
        if !types_ok {
            return problem(format!("profile {n} lacks its sample or period type"));
        }
        for s in &p.samples {
            if !within(s.stack_index, d.stack_table.len())
                || !attributes(&s.attribute_indices)
                || !within(s.link_index, d.link_table.len().max(1))
                || s.values.len() != 1
            {
                return problem(format!(
                    "profile {n}: a sample refers outside the tables or has other than one value"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{self, Counts, Estimate, Profile, ScopeStack, SymbolTable};
    use crate::pprof::{self, Header, Options};

    fn estimate(objects: f64, bytes: f64) -> Estimate {
        Estimate {
            objects,
            bytes,
            ..Estimate::default()
        }
    }

    /// Two stacks through one mapping, one of them with a scope's share, named by a symbol table.
    fn profile() -> Profile {
        let mut p = Profile::new(1 << 19);
        p.mapped_libraries = Some("1000-9000 r-xp 00000000 00:00 1 /usr/bin/prog\n".to_string());
        let mut names = std::collections::BTreeMap::new();
        names.insert(0x1100, vec!["leaf".to_string(), "caller".to_string()]);
        names.insert(0x1200 - 1, vec!["main".to_string()]);
        names.insert(0x1300 - 1, vec!["other".to_string()]);
        names.insert(0x1500, vec!["malloc".to_string()]);
        p.symbols = Some(SymbolTable {
            binary: Some("/usr/bin/prog".into()),
            names,
            lines: std::collections::BTreeMap::new(),
        });
        // The third stack is all the allocator's: every frame is removed, its stack is empty.
        for (frames, bytes) in [
            (vec![0x1100, 0x1200], 3_000_000.4),
            (vec![0x1100, 0x1300], 0.0),
            (vec![0x1500], 2_000_000.0),
        ] {
            p.stacks.push(model::Stack {
                frames,
                counts: Counts {
                    inuse: estimate(bytes / 1000.0, bytes),
                    accum: estimate(7.0, 5_000_000.0),
                },
                threads: Vec::new(),
            });
        }
        p.scopes.push(ScopeStack {
            scope: "tenant-7".into(),
            frames: vec![0x1100, 0x1200],
            inuse: estimate(1000.0, 1_000_000.0),
        });
        p
    }

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn pprof_of(profile: &Profile, process: &[(&str, &str)]) -> PbProfile {
        pprof::from_profile(
            profile,
            &Options {
                header: Header {
                    labels: labels(process),
                    ..Header::default()
                },
                build_ids: vec![("/usr/bin/prog".into(), "abcd01".into())],
                ..Options::default()
            },
        )
    }

    fn scope() -> InstrumentationScope {
        InstrumentationScope {
            name: "test".into(),
            ..InstrumentationScope::default()
        }
    }

    fn dictionary(request: &ExportProfilesServiceRequest) -> &ProfilesDictionary {
        request.dictionary.as_ref().expect("a dictionary")
    }

    /// A stack as the function names of its locations, leaf first, innermost first.
    fn names_of(d: &ProfilesDictionary, stack: i32) -> Vec<String> {
        d.stack_table[stack as usize]
            .location_indices
            .iter()
            .flat_map(|&l| &d.location_table[l as usize].lines)
            .map(|line| {
                let f = &d.function_table[line.function_index as usize];
                d.string_table[f.name_strindex as usize].clone()
            })
            .collect()
    }

    fn attribute(d: &ProfilesDictionary, i: i32) -> (String, Option<any_value::Value>) {
        let a = &d.attribute_table[i as usize];
        (
            d.string_table[a.key_strindex as usize].clone(),
            a.value.clone().and_then(|v| v.value),
        )
    }

    fn resource(
        request: &ExportProfilesServiceRequest,
        i: usize,
    ) -> Vec<(String, any_value::Value)> {
        request.resource_profiles[i]
            .resource
            .as_ref()
            .expect("a resource")
            .attributes
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone().unwrap().value.unwrap()))
            .collect()
    }

    #[test]
    fn every_table_starts_with_its_zero_value_and_every_index_is_in_range() {
        let request = from_pprof(&pprof_of(&profile(), &[("pid", "1")]), &scope());
        let d = dictionary(&request);
        assert_eq!(d.mapping_table[0], Mapping::default());
        assert_eq!(d.location_table[0], Location::default());
        assert_eq!(d.function_table[0], Function::default());
        assert_eq!(d.link_table, vec![Link::default()]);
        assert_eq!(d.attribute_table[0], KeyValueAndUnit::default());
        assert_eq!(d.stack_table[0], Stack::default());
        assert_eq!(d.string_table[0], "");
        let strings = d.string_table.len() as i32;
        for l in &d.location_table[1..] {
            assert!((1..d.mapping_table.len() as i32).contains(&l.mapping_index));
            for line in &l.lines {
                assert!((1..d.function_table.len() as i32).contains(&line.function_index));
            }
        }
        for f in &d.function_table {
            assert!(f.name_strindex < strings && f.filename_strindex < strings);
        }
        for s in &d.stack_table[1..] {
            assert!(!s.location_indices.is_empty(), "one empty stack: entry 0");
            assert!(s.location_indices.iter().all(|&l| l > 0));
        }
        let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
        for sample in profiles.iter().flat_map(|p| &p.samples) {
            assert!((0..d.stack_table.len() as i32).contains(&sample.stack_index));
            assert_eq!(sample.values.len(), 1);
        }
    }

    #[test]
    fn each_sample_type_is_a_profile_default_first_with_pprofs_sum_per_stack() {
        let pb = pprof_of(&profile(), &[("pid", "1")]);
        let request = from_pprof(&pb, &scope());
        let d = dictionary(&request);
        let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
        let text = |i: i32| d.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = profiles
            .iter()
            .map(|p| {
                let t = p.sample_type.as_ref().unwrap();
                (text(t.type_strindex), text(t.unit_strindex))
            })
            .collect();
        assert_eq!(
            types,
            [
                ("inuse_space", "bytes"),
                ("inuse_objects", "count"),
                ("alloc_objects", "count"),
                ("alloc_space", "bytes")
            ]
        );
        let pb_text = |i: i64| pb.string_table[i as usize].as_str();
        for profile in profiles {
            assert_eq!(profile.period, 1 << 19);
            let period = profile.period_type.as_ref().unwrap();
            assert_eq!(
                (text(period.type_strindex), text(period.unit_strindex)),
                ("space", "bytes")
            );
            let kind = text(profile.sample_type.as_ref().unwrap().type_strindex);
            let column = pb
                .sample_type
                .iter()
                .position(|t| pb_text(t.r#type) == kind)
                .unwrap();
            // Per stack (as function names), OTLP's sum equals pprof's over its samples.
            let mut ours: HashMap<Vec<String>, i64> = HashMap::new();
            for s in &profile.samples {
                assert_ne!(s.values[0], 0, "zero values are left out");
                *ours.entry(names_of(d, s.stack_index)).or_default() += s.values[0];
            }
            let mut theirs: HashMap<Vec<String>, i64> = HashMap::new();
            for s in &pb.sample {
                let names: Vec<String> = s
                    .location_id
                    .iter()
                    .flat_map(|&id| &pb.location[id as usize - 1].line)
                    .map(|l| pb_text(pb.function[l.function_id as usize - 1].name).to_string())
                    .collect();
                *theirs.entry(names).or_default() += s.value[column];
            }
            theirs.retain(|_, v| *v != 0);
            assert_eq!(ours, theirs, "{kind}");
        }
        // The allocator's own stack is the zero (empty) stack.
        let inuse = &profiles[0].samples;
        assert_eq!(
            inuse
                .iter()
                .filter(|s| s.stack_index == 0)
                .map(|s| s.values[0])
                .collect::<Vec<_>>(),
            [2_000_000]
        );
        // The scoped share and the rest are one stack with two attribute sets.
        let inuse: Vec<&Sample> = inuse.iter().filter(|s| s.stack_index != 0).collect();
        assert_eq!(inuse.len(), 2);
        assert_eq!(inuse[0].stack_index, inuse[1].stack_index);
        assert_eq!(inuse.iter().map(|s| s.values[0]).sum::<i64>(), 3_000_000);
        let scoped: Vec<_> = inuse
            .iter()
            .filter(|s| !s.attribute_indices.is_empty())
            .collect();
        assert_eq!(scoped.len(), 1);
        assert_eq!(scoped[0].values, vec![1_000_000]);
        assert_eq!(
            attribute(d, scoped[0].attribute_indices[0]),
            (
                "scope".to_string(),
                Some(any_value::Value::StringValue("tenant-7".into()))
            )
        );
    }

    #[test]
    fn process_labels_become_semantic_convention_resource_attributes() {
        let pb = pprof_of(
            &profile(),
            &[
                ("program", "prog"),
                ("build_id", "abcd01"),
                ("hostname", "db-1"),
                ("pid", "4242"),
                ("service", "checkout"),
                ("region", "eu"),
            ],
        );
        let request = from_pprof(&pb, &scope());
        assert_eq!(request.resource_profiles.len(), 1);
        let s = |v: &str| any_value::Value::StringValue(v.to_string());
        assert_eq!(
            resource(&request, 0),
            vec![
                ("process.executable.name".to_string(), s("prog")),
                ("process.executable.build_id.gnu".to_string(), s("abcd01")),
                ("host.name".to_string(), s("db-1")),
                ("process.pid".to_string(), any_value::Value::IntValue(4242)),
                ("service.name".to_string(), s("checkout")),
                ("region".to_string(), s("eu")),
            ]
        );
        let d = dictionary(&request);
        let mapping = &d.mapping_table[1];
        assert_eq!(
            d.string_table[mapping.filename_strindex as usize],
            "/usr/bin/prog"
        );
        assert_eq!(
            attribute(d, mapping.attribute_indices[0]),
            (BUILD_ID_KEY.to_string(), Some(s("abcd01")))
        );
        let unnamed = resource_attributes(&labels(&[("program", "prog")]));
        assert_eq!(unnamed[0].key, "service.name");
        assert_eq!(
            unnamed[0].value.clone().unwrap().value,
            Some(s("unknown_service:prog"))
        );
    }

    #[test]
    fn samples_of_different_processes_become_separate_resources_over_one_dictionary() {
        let mut pb = pprof_of(
            &profile(),
            &[("pid", "1"), ("time", "2026-11-24T08:30:00.000000Z")],
        );
        let other = pprof_of(&profile(), &[("pid", "2")]);
        // The second process's samples, over the same locations (as a merge of two dumps gives).
        for sample in &other.sample {
            let mut sample = sample.clone();
            for label in &mut sample.label {
                let (k, v) = (
                    other.string_table[label.key as usize].clone(),
                    other.string_table[label.str as usize].clone(),
                );
                label.key = pb.string_table.iter().position(|s| *s == k).unwrap() as i64;
                label.str = match pb.string_table.iter().position(|s| *s == v) {
                    Some(i) => i as i64,
                    None => {
                        pb.string_table.push(v);
                        pb.string_table.len() as i64 - 1
                    }
                };
            }
            pb.sample.push(sample);
        }
        pb.time_nanos = 0;
        let request = from_pprof(&pb, &scope());
        assert_eq!(request.resource_profiles.len(), 2);
        let pid = |i: usize| {
            resource(&request, i)
                .into_iter()
                .find(|(k, _)| k == "process.pid")
                .map(|(_, v)| v)
        };
        assert_eq!(pid(0), Some(any_value::Value::IntValue(1)));
        assert_eq!(pid(1), Some(any_value::Value::IntValue(2)));
        let stacks = |i: usize| -> Vec<i32> {
            request.resource_profiles[i].scope_profiles[0].profiles[0]
                .samples
                .iter()
                .map(|s| s.stack_index)
                .collect()
        };
        assert_eq!(stacks(0), stacks(1), "one dictionary: the same stacks");
        let time =
            |i: usize| request.resource_profiles[i].scope_profiles[0].profiles[0].time_unix_nano;
        assert_eq!(time(0), 1_795_509_000_000_000_000, "from the time label");
        assert_eq!(time(1), 0, "no time known");
    }

    #[test]
    fn an_encoded_request_decodes_to_itself_and_garbage_is_an_otlp_error() {
        let request = from_pprof(&pprof_of(&profile(), &[("pid", "1")]), &scope());
        assert_eq!(decode(&encode(&request)).expect("decodes"), request);
        assert!(matches!(decode(b"\xff\xff\xff"), Err(Error::Otlp(_))));
    }

    #[test]
    fn a_gzipped_body_starts_with_gzips_magic_and_gunzips_to_the_request() {
        let body = encode(&from_pprof(
            &pprof_of(&profile(), &[("pid", "1")]),
            &scope(),
        ));
        let gz = gzip(&body);
        assert_eq!(gz[..3], [0x1f, 0x8b, 8], "gzip's magic and deflate");
        assert_eq!(gunzip(&gz).unwrap(), body);
        assert!(matches!(gunzip(&body), Err(Error::Otlp(_))));
    }

    #[test]
    fn backend_checks_pass_our_requests_and_refuse_a_missing_dictionary_or_a_dangling_index() {
        let request = from_pprof(&pprof_of(&profile(), &[("pid", "1")]), &scope());
        check_references(&request).unwrap();
        let mut without = request.clone();
        without.dictionary = None;
        assert!(check_references(&without)
            .unwrap_err()
            .to_string()
            .contains("no dictionary"));
        let mut dangling = request.clone();
        let d = dangling.dictionary.as_mut().unwrap();
        d.location_table[1].mapping_index = d.mapping_table.len() as i32;
        assert!(check_references(&dangling).is_err());
        let mut two_values = request;
        two_values.resource_profiles[0].scope_profiles[0].profiles[0].samples[0]
            .values
            .push(1);
        assert!(check_references(&two_values).is_err());
    }
}

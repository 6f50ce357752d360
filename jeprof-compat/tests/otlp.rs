//! `otlp` output: decoded by OpenTelemetry's own definitions (the PyPI package
//! `opentelemetry-proto`, run from the workspace's Python), it has one profile per sample type
//! and, per stack and type, `pprof`'s figures; dumps of several processes are one resource each;
//! bad input exits 2 and writes nothing.
//!
//! The Python environment is `target/pyenv` in the workspace (or `$JEPROF_PYTHON`) with
//! `opentelemetry-proto`; where it is missing the decoding test says so and skips, except under
//! `CI=true`, where it fails.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use jeprof_compat::pprof::read_gz;
use jeprof_dumpfmt::{write, WriteOptions};

/// The workspace's Python with `opentelemetry.proto` importable, or `None` (skip) outside CI.
fn python() -> Option<PathBuf> {
    let (python, ok) =
        common::workspace_python(&["opentelemetry.proto.collector.profiles.v1development"]);
    if ok {
        return Some(python);
    }
    let what = format!(
        "{} with opentelemetry-proto (python3 -m venv target/pyenv && target/pyenv/bin/pip \
         install opentelemetry-proto==1.45.2)",
        python.display()
    );
    assert!(!jeprof_conformance::in_ci(), "CI needs {what}");
    eprintln!("notice: skipping: {what} not found");
    None
}

/// Decodes an `otlp` file with the official package and prints, per resource, its attributes and
/// its profiles' sample types in order, then per (resource, sample type, stack of function
/// names) the sum of the values; it also checks the dictionary's zero entries.
const DECODE: &str = r#"
import json, sys
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc
from opentelemetry.proto.profiles.v1development import profiles_pb2 as pb
request = svc.ExportProfilesServiceRequest()
request.ParseFromString(open(sys.argv[1], "rb").read())
d = request.dictionary
assert d.string_table[0] == ""
for table, zero in [(d.mapping_table, pb.Mapping()), (d.location_table, pb.Location()),
                    (d.function_table, pb.Function()), (d.link_table, pb.Link()),
                    (d.attribute_table, pb.KeyValueAndUnit()), (d.stack_table, pb.Stack())]:
    assert table[0] == zero, table[0]
s = d.string_table
def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None
out = {"resources": [], "sums": {}}
for r, rp in enumerate(request.resource_profiles):
    attributes = {a.key: value(a.value) for a in rp.resource.attributes}
    profiles = rp.scope_profiles[0].profiles
    types = [s[p.sample_type.type_strindex] + "/" + s[p.sample_type.unit_strindex] for p in profiles]
    out["resources"].append({"attributes": attributes, "types": types,
                             "scope": rp.scope_profiles[0].scope.name,
                             "period": [p.period for p in profiles]})
    for p in profiles:
        kind = s[p.sample_type.type_strindex]
        for sample in p.samples:
            names = [s[d.function_table[line.function_index].name_strindex]
                     for l in d.stack_table[sample.stack_index].location_indices
                     for line in d.location_table[l].lines]
            key = "%d|%s|%s" % (r, kind, ";".join(names))
            out["sums"][key] = out["sums"].get(key, 0) + sum(sample.values)
print(json.dumps(out))
"#;

fn decode(python: &Path, file: &Path) -> serde_json::Value {
    let out = Command::new(python)
        .args(["-c", DECODE])
        .arg(file)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "decoding failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// `pprof`'s figures for the same dumps, keyed as [`DECODE`] keys OTLP's, with the resource
/// numbered by the samples' labels in the order they first appear (zero sums left out).
fn pprof_sums(args: &[&str], dir: &Path) -> BTreeMap<String, i64> {
    let out = dir.join("p.pb.gz");
    let mut all = vec!["pprof", "-o", out.to_str().unwrap()];
    all.extend(args);
    common::run_ok(&all);
    let pb = read_gz(&std::fs::read(&out).unwrap()).unwrap();
    let s = |i: i64| pb.string_table[i as usize].as_str();
    let mut resources: Vec<Vec<(String, String)>> = Vec::new();
    let mut sums = BTreeMap::new();
    for sample in &pb.sample {
        let labels: Vec<(String, String)> = sample
            .label
            .iter()
            .filter(|l| s(l.key) != "scope")
            .map(|l| (s(l.key).to_string(), s(l.str).to_string()))
            .collect();
        let r = match resources.iter().position(|r| *r == labels) {
            Some(r) => r,
            None => {
                resources.push(labels);
                resources.len() - 1
            }
        };
        let names: Vec<&str> = sample
            .location_id
            .iter()
            .flat_map(|&id| &pb.location[id as usize - 1].line)
            .map(|l| s(pb.function[l.function_id as usize - 1].name))
            .collect();
        for (t, value) in pb.sample_type.iter().zip(&sample.value) {
            let key = format!("{r}|{}|{}", s(t.r#type), names.join(";"));
            *sums.entry(key).or_insert(0) += value;
        }
    }
    sums.retain(|_, v| *v != 0);
    sums
}

fn otlp_sums(decoded: &serde_json::Value) -> BTreeMap<String, i64> {
    decoded["sums"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap()))
        .collect()
}

/// Two processes' dumps of one build, labelled as the shim labels its dumps.
fn two_processes(dir: &Path) -> Vec<String> {
    [("101", "api", 3.0), ("202", "worker", 5.0)]
        .iter()
        .map(|(pid, service, scale)| {
            let mut p = common::generated_profile(
                &[
                    (vec![1, 2, 3], 10.0 * scale, 1e6 * scale),
                    (vec![4, 2, 3], 20.0 * scale, 3e6 * scale),
                ],
                1 << 19,
                0x400000,
            );
            p.labels = [
                ("program", "prog"),
                ("build_id", "0123abcd"),
                ("hostname", "db-1"),
                ("pid", pid),
                ("service", service),
                ("time", "2026-11-24T08:30:00.000000Z"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let path = dir.join(format!("{pid}.heap"));
            write::write_file(&p, &path, &WriteOptions::default()).unwrap();
            path.display().to_string()
        })
        .collect()
}

#[test]
fn official_decoder_reads_one_profile_per_sample_type_with_pprofs_figures_per_stack() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    for dumps in [
        vec![common::fixtures()
            .join("symbolized.heap")
            .display()
            .to_string()],
        vec![
            common::fixtures()
                .join("symbolized.heap")
                .display()
                .to_string(),
            common::fixtures()
                .join("rust_demo.heap")
                .display()
                .to_string(),
        ],
    ] {
        let out = dir.path().join("o.pb");
        let mut args = vec!["otlp", "-o", out.to_str().unwrap()];
        args.extend(dumps.iter().map(String::as_str));
        common::run_ok(&args);
        let decoded = decode(&python, &out);
        let resource = &decoded["resources"][0];
        assert_eq!(
            resource["types"],
            serde_json::json!([
                "inuse_space/bytes",
                "inuse_objects/count",
                "alloc_objects/count",
                "alloc_space/bytes"
            ])
        );
        assert_eq!(
            resource["period"],
            serde_json::json!([524288, 524288, 524288, 524288])
        );
        assert_eq!(resource["scope"], "jeprof-compat");
        let dump_args: Vec<&str> = dumps.iter().map(String::as_str).collect();
        let want = pprof_sums(&dump_args, dir.path());
        let got = otlp_sums(&decoded);
        assert!(want.len() >= 8, "{want:?}");
        assert_eq!(got, want, "{dumps:?}");
    }
}

#[test]
fn each_processes_labels_become_its_resources_semantic_convention_attributes() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dumps = two_processes(dir.path());
    let out = dir.path().join("fleet.pb");
    common::run_ok(&[
        "otlp",
        "--label",
        "region=eu",
        "-o",
        out.to_str().unwrap(),
        &dumps[0],
        &dumps[1],
    ]);
    let decoded = decode(&python, &out);
    let resources = decoded["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 2);
    for (resource, (pid, service)) in resources.iter().zip([(101, "api"), (202, "worker")]) {
        assert_eq!(
            resource["attributes"],
            serde_json::json!({
                "process.executable.name": "prog",
                "process.executable.build_id.gnu": "0123abcd",
                "host.name": "db-1",
                "process.pid": pid,
                "service.name": service,
                "time": "2026-11-24T08:30:00.000000Z",
                "region": "eu",
            })
        );
    }
    let want = pprof_sums(&["--label", "region=eu", &dumps[0], &dumps[1]], dir.path());
    assert_eq!(otlp_sums(&decoded), want);
    // fn_1's in-use bytes in the second process: 5 × 1e6, within heap_v2's integer rounding.
    let second = want["1|inuse_space|fn_1;fn_2;fn_3"];
    assert!((second - 5_000_000).abs() <= 1, "{second}");
}

#[test]
fn bad_input_exits_2_naming_the_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.heap");
    std::fs::write(&bad, "heap_v2/524288\n  t*: 1: x [0: 0]\n").unwrap();
    let out = dir.path().join("o.pb");
    std::fs::write(&out, b"earlier").unwrap();
    let result = common::run(&["otlp", "-o", out.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(result.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("bad.heap"), "{stderr}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        b"earlier",
        "the old file is untouched"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
}

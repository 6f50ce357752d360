//! Schema v1 ([`schema`]) as Arrow record batches, written to Parquet ([`ParquetSink`]): one
//! batch per dump, Snappy-compressed row groups of at most [`ROW_GROUP_ROWS`] rows, the schema
//! version in the file's key-value metadata (`jeprof.schema_version`).

use std::io::Write;
use std::sync::Arc;

use arrow_array::builder::{
    Float64Builder, Int32Builder, Int64Builder, ListBuilder, MapBuilder, MapFieldNames,
    StringBuilder, TimestampMicrosecondBuilder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::rows::{DumpRows, StackRow};

/// The version of the schema [`schema`] describes (`docs/design.md` §13: adding columns keeps
/// it, changing or removing one makes a new version).
pub const SCHEMA_VERSION: i32 = 1;

/// The file metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "jeprof.schema_version";

/// Rows per Parquet row group: what the writer holds before it writes them out (a few tens of
/// megabytes for stacks of a dozen frames), and large enough for engines to scan efficiently.
pub const ROW_GROUP_ROWS: usize = 1 << 16;

/// The estimate columns, in order: each figure, then the four variances.
pub const FIGURE_COLUMNS: [&str; 8] = [
    "inuse_objects",
    "inuse_bytes",
    "alloc_objects",
    "alloc_bytes",
    "inuse_objects_var",
    "inuse_bytes_var",
    "alloc_objects_var",
    "alloc_bytes_var",
];

/// The residency columns ([`super::rows::RowRss`]), nullable, in order: each figure, then its
/// variance; null when the dump carries no residency figures (or the one figure is unknown).
pub const RSS_COLUMNS: [&str; 6] = [
    "resident_bytes",
    "resident_bytes_var",
    "swapped_bytes",
    "swapped_bytes_var",
    "fragmentation_bytes",
    "fragmentation_bytes_var",
];

fn list_item(data_type: DataType) -> Arc<Field> {
    Arc::new(Field::new("item", data_type, false))
}

fn map_entries() -> (MapFieldNames, Arc<Field>, Arc<Field>) {
    let names = MapFieldNames {
        entry: "entries".into(),
        key: "keys".into(),
        value: "values".into(),
    };
    let key = Arc::new(Field::new("keys", DataType::Utf8, false));
    let value = Arc::new(Field::new("values", DataType::Utf8, false));
    (names, key, value)
}

/// Schema v1: the columns of `docs/design.md` §13, with their nullability, and
/// [`SCHEMA_VERSION_KEY`] in the schema's metadata.
pub fn schema() -> SchemaRef {
    let (_, key, value) = map_entries();
    let entries = Field::new(
        "entries",
        DataType::Struct(Fields::from(vec![key, value])),
        false,
    );
    let mut fields = vec![
        Field::new("schema_version", DataType::Int32, false),
        Field::new("dump", DataType::Utf8, false),
        Field::new("pid", DataType::Int64, true),
        Field::new(
            "time",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("build_id", DataType::Utf8, true),
        Field::new("binary", DataType::Utf8, true),
        Field::new("labels", DataType::Map(Arc::new(entries), false), false),
        Field::new("sample_period", DataType::Int64, false),
        Field::new("thread", DataType::Int64, true),
        Field::new("frames", DataType::List(list_item(DataType::Utf8)), false),
        Field::new(
            "locations",
            DataType::List(list_item(DataType::Utf8)),
            false,
        ),
        Field::new(
            "addresses",
            DataType::List(list_item(DataType::UInt64)),
            false,
        ),
        Field::new("leaf", DataType::Utf8, true),
        Field::new("user_frame", DataType::Utf8, true),
    ];
    fields.extend(
        FIGURE_COLUMNS
            .iter()
            .map(|name| Field::new(*name, DataType::Float64, false)),
    );
    fields.extend(
        RSS_COLUMNS
            .iter()
            .map(|name| Field::new(*name, DataType::Float64, true)),
    );
    let metadata = [(SCHEMA_VERSION_KEY.to_string(), SCHEMA_VERSION.to_string())].into();
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// One dump's rows as a record batch of [`schema`].
pub fn record_batch(dump: &DumpRows) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = dump.rows.len();
    let id = &dump.identity;
    let repeat_str = |value: Option<&str>| {
        let mut b = StringBuilder::with_capacity(n, value.map_or(0, str::len) * n);
        for _ in 0..n {
            b.append_option(value);
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let repeat_i64 = |value: Option<i64>| {
        let mut b = Int64Builder::with_capacity(n);
        for _ in 0..n {
            b.append_option(value);
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let mut version = Int32Builder::with_capacity(n);
    let mut time = TimestampMicrosecondBuilder::with_capacity(n);
    let (names, key, value) = map_entries();
    let mut labels = MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new())
        .with_keys_field(key)
        .with_values_field(value);
    for _ in 0..n {
        version.append_value(SCHEMA_VERSION);
        time.append_option(id.time_micros);
        for (k, v) in &id.labels {
            labels.keys().append_value(k);
            labels.values().append_value(v);
        }
        labels.append(true)?;
    }
    let mut thread = Int64Builder::with_capacity(n);
    let mut frames = ListBuilder::new(StringBuilder::new()).with_field(list_item(DataType::Utf8));
    let mut locations =
        ListBuilder::new(StringBuilder::new()).with_field(list_item(DataType::Utf8));
    let mut addresses =
        ListBuilder::new(UInt64Builder::new()).with_field(list_item(DataType::UInt64));
    let mut leaf = StringBuilder::new();
    let mut user_frame = StringBuilder::new();
    let mut figures: Vec<Float64Builder> = (0..FIGURE_COLUMNS.len() + RSS_COLUMNS.len())
        .map(|_| Float64Builder::with_capacity(n))
        .collect();
    for row in &dump.rows {
        thread.append_option(row.thread);
        for f in &row.frames {
            frames.values().append_value(f);
        }
        frames.append(true);
        for l in &row.locations {
            locations.values().append_value(l);
        }
        locations.append(true);
        addresses.values().append_slice(&row.addresses);
        addresses.append(true);
        leaf.append_option(row.leaf.as_deref());
        user_frame.append_option(row.user_frame.as_deref());
        append_figures(&mut figures, row);
    }
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(version.finish()),
        repeat_str(Some(&id.dump)),
        repeat_i64(id.pid),
        Arc::new(time.finish().with_timezone("UTC")),
        repeat_str(id.build_id.as_deref()),
        repeat_str(id.binary.as_deref()),
        Arc::new(labels.finish()),
        repeat_i64(Some(id.sample_period)),
        Arc::new(thread.finish()),
        Arc::new(frames.finish()),
        Arc::new(locations.finish()),
        Arc::new(addresses.finish()),
        Arc::new(leaf.finish()),
        Arc::new(user_frame.finish()),
    ];
    columns.extend(figures.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    RecordBatch::try_new(schema(), columns)
}

/// Appends `row`'s figures to `figures`, one builder per column of [`FIGURE_COLUMNS`] then of
/// [`RSS_COLUMNS`].
fn append_figures(figures: &mut [Float64Builder], row: &StackRow) {
    let (i, a) = (&row.counts.inuse, &row.counts.accum);
    let values = [
        i.objects,
        i.bytes,
        a.objects,
        a.bytes,
        i.objects_variance,
        i.bytes_variance,
        a.objects_variance,
        a.bytes_variance,
    ];
    let (fixed, rss) = figures.split_at_mut(FIGURE_COLUMNS.len());
    for (b, v) in fixed.iter_mut().zip(values) {
        b.append_value(v);
    }
    let rss_figures = row.rss.unwrap_or_default();
    for (pair, figure) in rss.chunks_mut(2).zip([
        rss_figures.resident,
        rss_figures.swapped,
        rss_figures.fragmentation,
    ]) {
        pair[0].append_option(figure.map(|f| f.bytes));
        pair[1].append_option(figure.map(|f| f.variance));
    }
}

/// Writes dumps' rows to a Parquet file, one [`record_batch`] per dump.
pub struct ParquetSink<W: Write + Send> {
    writer: ArrowWriter<W>,
    rows: u64,
}

impl<W: Write + Send> ParquetSink<W> {
    /// A writer of [`schema`] into `out`.
    pub fn new(out: W) -> parquet::errors::Result<ParquetSink<W>> {
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_created_by(format!("jeprof-compat {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_VERSION_KEY.to_string(),
                SCHEMA_VERSION.to_string(),
            )]))
            .build();
        Ok(ParquetSink {
            writer: ArrowWriter::try_new(out, schema(), Some(properties))?,
            rows: 0,
        })
    }

    /// Appends one dump's rows.
    pub fn write(&mut self, dump: &DumpRows) -> parquet::errors::Result<()> {
        if dump.rows.is_empty() {
            return Ok(());
        }
        let batch = record_batch(dump)?;
        self.writer.write(&batch)?;
        self.rows += dump.rows.len() as u64;
        Ok(())
    }

    /// Writes what is buffered and the file's footer; returns the rows written.
    pub fn finish(self) -> parquet::errors::Result<u64> {
        self.writer.close()?;
        Ok(self.rows)
    }
}
